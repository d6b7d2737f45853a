/**
 * The agent bench: one 50-round tool-calling run (each round the model calls one tool; the 51st
 * response answers) with an instant model and the same instant tool, in one run:
 * - the durable AgentHarness on a memory store; the model is a pi-ai provider answering from the
 *   request's messages, all at once (a `start` and a `done` event);
 * - LangGraph.js, the durable JS peer: the canonical agent graph (a model node, a ToolNode, a
 *   tools-or-end edge) compiled with its in-memory checkpointer (MemorySaver), which saves a
 *   checkpoint at every super-step; the model is a LangChain chat model answering from the messages;
 * - the floor: the durable run's own SQL replayed job by job on a fresh memory store with no engine,
 *   what the durable run would cost if the engine and the model cost nothing;
 * - the loop with no durability: pi-agent-core's `runAgentLoop` over the same pi-ai provider and the
 *   same tool, in memory. The floor plus this loop is the least a durable loop built on pi-ai could
 *   cost (its SQL, and a loop's work that writes nothing); its ratio to the floor says how close to
 *   the floor-ratio bar any such engine can come, and the durable run over that sum is what the
 *   durability itself costs beyond both.
 * Bars (reported, never enforced; the process exits 0 unless it crashes): at most 2 store
 * transactions per tool round; the durable round at most 0.5x LangGraph's; the durable run at most
 * 1.5x its own SQL floor. Both engines and the floor are measured warm, interleaved round by round,
 * and each ratio is the median of the rounds' own ratios.
 * Env: BENCH_ROUNDS (measured rounds, default 9), BENCH_WARMUP (durable warm-up rounds, default 15;
 * LangGraph joins for the last BENCH_LG_WARMUP of them, default 3: its runs are far longer),
 * BENCH_TOOL_ROUNDS (default 50), BENCH_ONLY=durable|langgraph|loop (one side alone, for a profiler; loop: pi-agent-core's);
 * with BENCH_ONLY=durable, BENCH_PROFILE=1 profiles the timed part of the runs after the warm-up
 * and ranks self time by module and function (tests/bench/node-profile.ts).
 * The models are the same on both sides: count the tool results in the messages, answer with the next
 * call or the final text, stream nothing, estimate nothing. (Until issue 16 the durable side used
 * pi-ai's faux provider, which also estimates token usage over the whole serialized context and
 * streams the answer in small deltas each round: about a tenth of the durable run, and work
 * LangGraph's model did not do. The durable model reports a fixed usage, so pi.usage is still written.)
 */
import { type StoreJob as Job, memoryStore } from "../../worker/testing.ts";
import {
  durable as durableRun,
  langGraph as langGraphRun,
  piAgentLoop,
  type Sample,
  timed,
} from "./agent-runs.ts";
import { type DurableModel, instantModel } from "./agent-scenario.ts";
import { type NodeProfiler, nodeProfiler } from "./node-profile.ts";

const env = (name: string, fallback: number): number => Number(process.env[name] ?? fallback);
const ROUNDS = env("BENCH_ROUNDS", 9);
const WARMUP = env("BENCH_WARMUP", 15);
const LG_WARMUP = Math.min(WARMUP, env("BENCH_LG_WARMUP", 3));
const TOOL_ROUNDS = env("BENCH_TOOL_ROUNDS", 50);
const TX_PER_ROUND_BAR = 2;
const LANGGRAPH_BAR = 0.5;
const FLOOR_BAR = 1.5;

/** The durable side's model (agent-scenario.ts, shared with the server bench). */
const model = (toolRounds = TOOL_ROUNDS): DurableModel => instantModel(toolRounds);
/** The two sides' runs (agent-runs.ts, shared with the server bench). */
const durable = (chat: DurableModel, jobs?: { opening: Job[]; timed: Job[] }, profiler?: NodeProfiler) =>
  durableRun(chat, { ...(jobs ? { jobs } : {}), ...(profiler ? { profiler } : {}) });
const langGraph = () => langGraphRun(TOOL_ROUNDS);

/**
 * The floor: the SQL of one durable run (`timed`, after the jobs that opened the harness) replayed
 * job by job on a fresh memory store, with no engine at all.
 */
async function replay(opening: readonly Job[], jobs: readonly Job[]): Promise<Sample> {
  const store = await memoryStore();
  const run = (job: Job) =>
    store[job.kind](async (sql) => {
      for (const s of job.statements) await (s.rows ? sql.all(s.sql, s.params) : sql.run(s.sql, s.params));
    });
  for (const job of opening) await run(job);
  const sample = await timed(async () => {
    const before = store.stats.transactions;
    for (const job of jobs) await run(job);
    return { transactions: store.stats.transactions - before, toolResults: TOOL_ROUNDS };
  });
  await store.close();
  return sample;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};
const fmt = (n: number, digits = 0) =>
  n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
const verdict = (ok: boolean) => (ok ? "PASS" : "FAIL");

async function main(): Promise<void> {
  const started = performance.now();
  const chat = model();
  const which = process.env["BENCH_ONLY"];
  if (which) {
    const profiler = process.env["BENCH_PROFILE"] === "1" ? await nodeProfiler() : undefined;
    const samples: Sample[] = [];
    for (let i = 0; i < WARMUP + ROUNDS; i++) {
      const profiled = i >= WARMUP ? profiler : undefined;
      const s =
        which === "langgraph"
          ? await langGraph()
          : which === "loop"
            ? await piAgentLoop(chat)
            : await durable(chat, undefined, profiled);
      if (i >= WARMUP) samples.push(s);
      console.log(
        `${which}: ${fmt(s.ms, 1)} ms wall, ${fmt(s.cpuMs, 1)} ms cpu, ${s.transactions} transactions`,
      );
    }
    console.log(
      `${which}, median of ${ROUNDS}: ${fmt(median(samples.map((s) => s.ms)), 1)} ms wall, ${fmt(median(samples.map((s) => s.cpuMs)), 1)} ms cpu`,
    );
    profiler?.report(`agent-${which}`);
    chat.unregister();
    return;
  }
  const durables: Sample[] = [];
  const graphs: Sample[] = [];
  const replays: Sample[] = [];
  const loops: Sample[] = [];
  const check = (side: string, s: Sample) => {
    if (s.toolResults !== TOOL_ROUNDS)
      throw new Error(`${side}: ${s.toolResults} tool results, not ${TOOL_ROUNDS}`);
    return s;
  };
  // The floor's SQL: one durable run, recorded. It is replayed with no engine in every measured
  // round, beside the durable run and LangGraph's, so all three see the same moment's load (replayed
  // once all runs had ended, a change of load in between moved the ratio by more than the engine).
  const recorded = model();
  const jobs = { opening: [] as Job[], timed: [] as Job[] };
  await durable(recorded, jobs);
  recorded.unregister();
  for (let i = 0; i < WARMUP + ROUNDS; i++) {
    const d = check("durable", await durable(chat));
    const warm = i >= WARMUP - LG_WARMUP;
    const g = warm ? check("LangGraph", await langGraph()) : undefined;
    const f = warm ? await replay(jobs.opening, jobs.timed) : undefined;
    const l = check("pi-agent-core", await piAgentLoop(chat));
    if (i >= WARMUP) {
      durables.push(d);
      graphs.push(g!);
      replays.push(f!);
      loops.push(l);
    }
  }
  chat.unregister();
  // The fixed cost of a run (admitting the input, the final answer) measured alone, so tx/round is
  // what each tool round adds.
  const bare = model(0);
  const fixedTransactions = (await durable(bare)).transactions;
  bare.unregister();
  const statements = jobs.timed.reduce((n, job) => n + job.statements.length, 0);

  const m = (xs: Sample[], f: (s: Sample) => number) => median(xs.map(f));
  const durableMs = m(durables, (s) => s.ms);
  const durableCpu = m(durables, (s) => s.cpuMs);
  const graphMs = m(graphs, (s) => s.ms);
  const graphCpu = m(graphs, (s) => s.cpuMs);
  const floorMs = m(replays, (s) => s.ms);
  const floorCpu = m(replays, (s) => s.cpuMs);
  const loopMs = m(loops, (s) => s.ms);
  const loopCpu = m(loops, (s) => s.cpuMs);
  // Per measured round: the floor and the in-memory loop of that round, summed.
  const least = replays.map((f, i) => ({ ms: f.ms + loops[i]!.ms, cpuMs: f.cpuMs + loops[i]!.cpuMs }));
  const leastMs = median(least.map((s) => s.ms));
  const leastCpu = median(least.map((s) => s.cpuMs));
  const leastVsFloor = median(least.map((s, i) => s.ms / replays[i]!.ms));
  const leastVsFloorCpu = median(least.map((s, i) => s.cpuMs / replays[i]!.cpuMs));
  const vsLeast = median(durables.map((d, i) => d.ms / least[i]!.ms));
  const vsLeastCpu = median(durables.map((d, i) => d.cpuMs / least[i]!.cpuMs));
  const txPerRound = (m(durables, (s) => s.transactions) - fixedTransactions) / TOOL_ROUNDS;
  // Ratios: the median of per-round ratios, each round's runs measured back to back.
  const vsGraph = median(durables.map((d, i) => d.ms / graphs[i]!.ms));
  const vsGraphCpu = median(durables.map((d, i) => d.cpuMs / graphs[i]!.cpuMs));
  const vsFloor = median(durables.map((d, i) => d.ms / replays[i]!.ms));
  const vsFloorCpu = median(durables.map((d, i) => d.cpuMs / replays[i]!.cpuMs));
  const perRound = (ms: number) => `${fmt((ms / TOOL_ROUNDS) * 1000)} µs`;
  /** A ratio's row: wall and CPU, and its bar and verdict when it has one (judged on wall). */
  const ratioRow = (label: string, wall: number, cpu: number, digits: number, bar?: number): string[] => [
    label,
    `${fmt(wall, digits)}x`,
    `${fmt(cpu, digits)}x`,
    "",
    "",
    "",
    bar === undefined ? "" : `<= ${bar}x`,
    bar === undefined ? "" : verdict(wall <= bar),
  ];

  const rows: string[][] = [
    [
      "measurement",
      "wall (median)",
      "cpu (median)",
      "wall per round",
      "transactions",
      "tx/round",
      "bar",
      "result",
    ],
    [
      "durable AgentHarness, memory store",
      `${fmt(durableMs, 1)} ms`,
      `${fmt(durableCpu, 1)} ms`,
      perRound(durableMs),
      fmt(m(durables, (s) => s.transactions)),
      fmt(txPerRound, 2),
      `<= ${TX_PER_ROUND_BAR}`,
      verdict(txPerRound <= TX_PER_ROUND_BAR),
    ],
    [
      "LangGraph.js, MemorySaver checkpointer",
      `${fmt(graphMs, 1)} ms`,
      `${fmt(graphCpu, 1)} ms`,
      perRound(graphMs),
      "-",
      "-",
      "",
      "",
    ],
    [
      `floor: the run's own SQL, no engine (${fmt(statements)} statements)`,
      `${fmt(floorMs, 1)} ms`,
      `${fmt(floorCpu, 1)} ms`,
      perRound(floorMs),
      fmt(m(replays, (s) => s.transactions)),
      "",
      "",
      "",
    ],
    [
      "pi-agent-core runAgentLoop, in memory (not durable)",
      `${fmt(loopMs, 1)} ms`,
      `${fmt(loopCpu, 1)} ms`,
      perRound(loopMs),
      "-",
      "-",
      "",
      "",
    ],
    [
      "floor + that loop: the least a durable loop on pi-ai costs",
      `${fmt(leastMs, 1)} ms`,
      `${fmt(leastCpu, 1)} ms`,
      perRound(leastMs),
      "",
      "",
      "",
      "",
    ],
    ["a run with no tool round (fixed cost)", "", "", "", fmt(fixedTransactions), "", "", ""],
    ratioRow("ratio durable / LangGraph (per round)", vsGraph, vsGraphCpu, 3, LANGGRAPH_BAR),
    ratioRow("ratio durable / its SQL floor", vsFloor, vsFloorCpu, 2, FLOOR_BAR),
    ratioRow("ratio (floor + in-memory loop) / SQL floor", leastVsFloor, leastVsFloorCpu, 2),
    ratioRow("ratio durable / (floor + in-memory loop)", vsLeast, vsLeastCpu, 2),
  ];
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)));
  const line = (row: string[]) =>
    row.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join("  ");
  console.log(
    `\nagent bench: ${TOOL_ROUNDS} tool rounds + answer, instant model, Node ${process.version}; medians of ${ROUNDS} interleaved rounds after ${WARMUP} warm-up rounds (LangGraph: ${LG_WARMUP})`,
  );
  console.log(line(rows[0]!));
  console.log(widths.map((w) => "-".repeat(w)).join("  "));
  for (const row of rows.slice(1)) console.log(line(row));
  console.log("(bars judge wall-clock medians; a miss is reported, never an error)");
  const list = (xs: Sample[]) => xs.map((s) => fmt(s.ms, 1)).join(", ");
  console.log(
    `wall ms per run: durable ${list(durables)} | LangGraph ${list(graphs)} | floor ${list(replays)} | in-memory loop ${list(loops)}`,
  );
  console.log(`agent bench took ${fmt((performance.now() - started) / 1000, 1)} s`);
}

await main();
