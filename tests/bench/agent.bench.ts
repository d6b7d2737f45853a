/**
 * The agent bench: one 50-round tool-calling run (each round the model calls one tool; the 51st
 * response answers), with an instant faux model and the same tool, through the durable AgentHarness
 * on a memory store and through pi-agent-core's in-memory `Agent`, side by side in one run. Prints one
 * table; the bars are reported, never enforced (the process exits 0 unless it crashes).
 *
 * Both sides do the same model work: the durable harness sends each conversation's provider session
 * id (pi.provider), so the in-memory Agent gets one too (the faux provider's prompt cache runs on it).
 *
 * Bars: at most 4 store transactions per tool round; durable wall time within 5x of in-memory.
 * Both sides are measured warm: the durable side has far more code for the JIT to settle, and
 * its first rounds measured up to twice their steady-state time.
 * The floor row replays one run's own SQL, job by job, on a fresh memory store with no engine: what
 * the durable run would cost if the engine and the model cost nothing.
 * Env: BENCH_ROUNDS (measured rounds, default 9), BENCH_WARMUP (default 15), BENCH_TOOL_ROUNDS
 * (default 50), BENCH_ONLY=durable|memory (one side alone, for a profiler).
 */
import { Agent, type AgentTool } from "@mariozechner/pi-agent-core";
import { fauxAssistantMessage, fauxToolCall } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { textResult } from "../../worker/agent/tools/contract.ts";
import { AgentHarness, defineTool } from "../../worker/index.ts";
import {
  type FauxAgentModel,
  fauxAgentModel,
  type StoreJob as Job,
  memoryStore,
  recordJobs,
} from "../../worker/testing.ts";

const env = (name: string, fallback: number): number => Number(process.env[name] ?? fallback);
const ROUNDS = env("BENCH_ROUNDS", 9);
const WARMUP = env("BENCH_WARMUP", 15);
const TOOL_ROUNDS = env("BENCH_TOOL_ROUNDS", 50);
const TX_PER_ROUND_BAR = 4;
const RATIO_BAR = 5;

/** The tool both sides run: instant, a little text. */
const step = (n: number) => `step ${n} done`;

/** The model: a tool call per round until TOOL_ROUNDS results are in the context, then an answer. */
function model(toolRounds = TOOL_ROUNDS): FauxAgentModel {
  return fauxAgentModel(
    (req) => {
      const results = req.messages.filter((m) => m.role === "toolResult").length;
      if (results >= toolRounds) return fauxAssistantMessage(`all ${results} steps done`);
      return fauxAssistantMessage([fauxToolCall("step", { n: results + 1 }, { id: `call-${results + 1}` })], {
        stopReason: "toolUse",
      });
    },
    { record: false },
  );
}

const durableTool = defineTool({
  name: "step",
  description: "Do one step",
  parameters: Type.Object({ n: Type.Number() }),
  execute: async (args) => textResult(step(args.n)),
});

const memoryTool: AgentTool = {
  name: "step",
  label: "step",
  description: "Do one step",
  parameters: Type.Object({ n: Type.Number() }),
  execute: async (_id, params) => ({
    content: [{ type: "text", text: step((params as { n: number }).n) }],
    details: {},
  }),
};

interface Sample {
  ms: number;
  cpuMs: number;
  transactions: number;
  toolResults: number;
}

/**
 * A pause before each timed run, so a collection the previous run started (concurrent marking ends
 * in an event-loop task) finishes outside the timing: neither side pays for the other's garbage, and
 * the durable run allocates far more. (A forced full collection instead measured both sides at up to
 * twice their time: it also drops compiled code.)
 */
const settle = () => new Promise<void>((resolve) => setTimeout(resolve, 25));

async function timed(work: () => Promise<{ transactions: number; toolResults: number }>): Promise<Sample> {
  await settle();
  const cpu = process.cpuUsage();
  const start = performance.now();
  const r = await work();
  const ms = performance.now() - start;
  const used = process.cpuUsage(cpu);
  return { ms, cpuMs: (used.user + used.system) / 1000, ...r };
}

/**
 * The floor: the SQL of one durable run (`timed`, after the jobs that opened the harness) replayed
 * job by job on a fresh memory store, with no engine at all. Returns the replay's wall time.
 */
async function replay(opening: readonly Job[], timed: readonly Job[]): Promise<number> {
  const store = await memoryStore();
  const run = (job: Job) =>
    store[job.kind](async (sql) => {
      for (const s of job.statements) await (s.rows ? sql.all(s.sql, s.params) : sql.run(s.sql, s.params));
    });
  for (const job of opening) await run(job);
  await settle();
  const start = performance.now();
  for (const job of timed) await run(job);
  const ms = performance.now() - start;
  await store.close();
  return ms;
}

async function durable(faux: FauxAgentModel, jobs?: { opening: Job[]; timed: Job[] }): Promise<Sample> {
  const store = await memoryStore();
  const recorder = { into: jobs?.opening ?? [] };
  if (jobs) recordJobs(store, recorder);
  const h = await AgentHarness.open(store, {
    models: faux.models,
    defaultModel: faux.ref,
    tools: [durableTool],
  });
  const root = await h.root();
  const sample = await timed(async () => {
    if (jobs) recorder.into = jobs.timed;
    const before = store.stats.transactions;
    const settled = await (await root.submit({ type: "input", content: "go" })).wait();
    if (settled.status !== "done") throw new Error(`durable run ended ${JSON.stringify(settled)}`);
    await root.waitForIdle();
    return { transactions: store.stats.transactions - before, toolResults: 0 };
  });
  // Checking the transcript is not part of the run (the in-memory side's check reads an array).
  sample.toolResults = (await root.entries()).filter((e) => e.kind === "pi.tool-result").length;
  await h.close();
  return sample;
}

async function inMemory(faux: FauxAgentModel): Promise<Sample> {
  const agent = new Agent({
    initialState: { systemPrompt: "", model: faux.model, tools: [memoryTool] },
    sessionId: crypto.randomUUID(),
  });
  return timed(async () => {
    await agent.prompt("go");
    await agent.waitForIdle();
    const last = agent.state.messages.at(-1);
    if (last?.role !== "assistant" || last.stopReason !== "stop")
      throw new Error("in-memory run did not answer");
    return {
      transactions: 0,
      toolResults: agent.state.messages.filter((m) => m.role === "toolResult").length,
    };
  });
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};
const fmt = (n: number, digits = 0) =>
  n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });

async function main(): Promise<void> {
  const started = performance.now();
  const faux = model();
  const which = process.env["BENCH_ONLY"];
  if (which) {
    for (let i = 0; i < WARMUP + ROUNDS; i++) {
      const s = which === "memory" ? await inMemory(faux) : await durable(faux);
      console.log(
        `${which}: ${fmt(s.ms, 1)} ms wall, ${fmt(s.cpuMs, 1)} ms cpu, ${s.transactions} transactions`,
      );
    }
    faux.unregister();
    return;
  }
  const rounds: Array<{ durable: Sample; memory: Sample }> = [];
  for (let i = 0; i < WARMUP + ROUNDS; i++) {
    const round = { durable: await durable(faux), memory: await inMemory(faux) };
    for (const [side, s] of Object.entries(round)) {
      if (s.toolResults !== TOOL_ROUNDS)
        throw new Error(`${side}: ${s.toolResults} tool results, not ${TOOL_ROUNDS}`);
    }
    if (i >= WARMUP) rounds.push(round);
  }
  faux.unregister();
  // The fixed cost of a run (admitting the input, the final answer) measured alone, so tx/round is
  // what each tool round adds.
  const bare = model(0);
  const fixedTransactions = (await durable(bare)).transactions;
  bare.unregister();
  // The floor: one more durable run, recorded, and its SQL replayed with no engine (median of 5).
  const recorded = model();
  const jobs = { opening: [] as Job[], timed: [] as Job[] };
  await durable(recorded, jobs);
  recorded.unregister();
  const replays: number[] = [];
  for (let i = 0; i < 5; i++) replays.push(await replay(jobs.opening, jobs.timed));
  const statements = jobs.timed.reduce((n, job) => n + job.statements.length, 0);
  const med = (f: (r: (typeof rounds)[number]) => number) => median(rounds.map(f));
  const durableMs = med((r) => r.durable.ms);
  const memoryMs = med((r) => r.memory.ms);
  const ratio = med((r) => r.durable.ms / r.memory.ms);
  const cpuRatio = med((r) => r.durable.cpuMs / r.memory.cpuMs);
  const txPerRound = (med((r) => r.durable.transactions) - fixedTransactions) / TOOL_ROUNDS;

  const rows: string[][] = [
    [
      "measurement",
      "wall (median)",
      "cpu (median)",
      "per tool round",
      "transactions",
      "tx/round",
      "bar",
      "result",
    ],
    [
      "in-memory pi-agent-core Agent",
      `${fmt(memoryMs, 1)} ms`,
      `${fmt(
        med((r) => r.memory.cpuMs),
        1,
      )} ms`,
      `${fmt(memoryMs / TOOL_ROUNDS, 2)} ms`,
      "-",
      "-",
      "",
      "",
    ],
    [
      "durable AgentHarness, memory store",
      `${fmt(durableMs, 1)} ms`,
      `${fmt(
        med((r) => r.durable.cpuMs),
        1,
      )} ms`,
      `${fmt(durableMs / TOOL_ROUNDS, 2)} ms`,
      fmt(med((r) => r.durable.transactions)),
      fmt(txPerRound, 2),
      `<= ${TX_PER_ROUND_BAR}`,
      txPerRound <= TX_PER_ROUND_BAR ? "PASS" : "FAIL",
    ],
    [
      "ratio durable / in-memory",
      `${fmt(ratio, 2)}x`,
      `${fmt(cpuRatio, 2)}x`,
      "",
      "",
      "",
      `<= ${RATIO_BAR}x`,
      ratio <= RATIO_BAR ? "PASS" : "FAIL",
    ],
  ];
  rows.push(["a run with no tool round (fixed cost)", "", "", "", fmt(fixedTransactions), "", "", ""]);
  const floorMs = median(replays);
  rows.push([
    `floor: the run's own SQL, no engine (${fmt(statements)} statements)`,
    `${fmt(floorMs, 1)} ms`,
    "",
    `${fmt(floorMs / TOOL_ROUNDS, 2)} ms`,
    fmt(jobs.timed.filter((j) => j.kind === "commit").length),
    "",
    `${fmt(floorMs / memoryMs, 2)}x`,
    "",
  ]);
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)));
  const line = (row: string[]) =>
    row.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join("  ");
  console.log(
    `\nagent bench: ${TOOL_ROUNDS} tool rounds + answer, instant faux model, Node ${process.version}; medians of ${ROUNDS} interleaved rounds after ${WARMUP} warm-up rounds`,
  );
  console.log(line(rows[0]!));
  console.log(widths.map((w) => "-".repeat(w)).join("  "));
  for (const row of rows.slice(1)) console.log(line(row));
  console.log(
    "(the ratio bar judges the median of per-round wall-clock ratios; a miss is reported, never an error)",
  );
  const list = (f: (r: (typeof rounds)[number]) => number) => rounds.map((r) => fmt(f(r), 1)).join(", ");
  console.log(
    `wall ms per round: durable ${list((r) => r.durable.ms)} | in-memory ${list((r) => r.memory.ms)}`,
  );
  console.log(`agent bench took ${fmt((performance.now() - started) / 1000, 1)} s`);
}

await main();
