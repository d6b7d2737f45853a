/**
 * The server bench: the server engine (worker/server/space.ts, one Durable Object per space) in
 * workerd, run locally by miniflare 3 (tests/server/miniflare.ts) with the bench's worker
 * (server/bench-entry.ts: the Space with bench routes). Four parts, each a table whose rows carry the
 * machine's load averages; they are judged by the ratios within one run:
 *
 * 1. commits: commits/s of one small INSERT, one commit at a time, in one object: through the
 *    Durable Object store's line (DoStore.commit: `transaction(async)`, then `sync()`), against the
 *    same statement in a bare loop on `ctx.storage.sql` (one `transactionSync` per commit), with
 *    nothing awaited (the response waits for the writes: workerd's output gate) and with an awaited
 *    `sync()` per commit (the store's durability). Interleaved round by round; ratios per round.
 * 2. agent: the agent bench's loop (agent-scenario.ts: BENCH_TOOL_ROUNDS tool rounds, instant model
 *    and tool) on the server (the durable harness on a Durable Object store, in workerd, a fresh
 *    object per run), beside the same runs as agent.bench.ts times them in this process: the
 *    browser's engine (the durable harness on a wa-sqlite memory store) and LangGraph.js (MemorySaver).
 *    Interleaved round by round, each warm; ratios are medians of per-round ratios.
 * 3. recovery: a space holding BENCH_SEED terminal tasks, BENCH_CONVERSATIONS idle conversations and
 *    one live task; workerd is killed and started again (SIGKILL, the same folder), and the first
 *    request opens the space: from sending it to the object's line saying the harness is open (the
 *    space recovered), and to its line at the live task's first commit. Beside it a small store (the
 *    live task alone) and the floor: the first request to an empty object after a restart.
 * 4. scale: N spaces (BENCH_SCALE, default 1, 10, 100) each running a demo conversation at once
 *    (BENCH_SCALE_RUNS inputs "write a note" each, one after the other; the demo model streams with
 *    no delay): steps (commits that append to a conversation) per second in all, and the step
 *    latency (time since the conversation's previous step), median and p95, each against N = 1.
 *    Each object streams a line per step as its commit is published; they are stamped here.
 *
 * Timing: workerd's clock inside an object stands still across synchronous work
 * (server/bench-entry.ts), so everything is timed from here: whole requests, less the round trip of
 * an empty request to the same object just before (the smallest of three), and moments inside a
 * request by the lines the object streams at each, stamped as they arrive. workerd's CPU time is read from /proc (Linux) around a request.
 * Figures only: no bars; the process exits 0 unless it crashes.
 * Env: BENCH_ONLY=commits|agent|recovery|scale; BENCH_ROUNDS (measured rounds of parts 1 and 2,
 * default 5 and 9), BENCH_WARMUP (default 2 and 15), BENCH_COMMITS (commits per sample, default 1000;
 * the bare loop runs 10x as many), BENCH_TOOL_ROUNDS (50), BENCH_RECOVERY_ROUNDS (5), BENCH_SEED
 * (10000), BENCH_CONVERSATIONS (1000), BENCH_SCALE ("1,10,100"), BENCH_SCALE_RUNS (3).
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { type ServerWorker, startServerWorker } from "../server/miniflare.ts";
import { durable, langGraph, type Sample } from "./agent-runs.ts";
import { instantModel } from "./agent-scenario.ts";
import { fmt, machineLoad, median, percentile, table } from "./report.ts";

const here = dirname(fileURLToPath(import.meta.url));
const env = (name: string, fallback: number): number => Number(process.env[name] ?? fallback);
const ONLY = process.env["BENCH_ONLY"];
const COMMITS = env("BENCH_COMMITS", 1000);
const BARE_FACTOR = 10;
const TOOL_ROUNDS = env("BENCH_TOOL_ROUNDS", 50);
const RECOVERY_ROUNDS = env("BENCH_RECOVERY_ROUNDS", 5);
const SEED = env("BENCH_SEED", 10_000);
const SEED_CONVERSATIONS = env("BENCH_CONVERSATIONS", 1000);
const SCALE = (process.env["BENCH_SCALE"] ?? "1,10,100").split(",").map(Number);
const SCALE_RUNS = env("BENCH_SCALE_RUNS", 3);
const SCALE_TEXT = "write a note";
const PARTS = ["commits", "agent", "recovery", "scale"] as const;

if (ONLY !== undefined && !(PARTS as readonly string[]).includes(ONLY))
  throw new Error(`BENCH_ONLY: one of ${PARTS.join(", ")}`);
const runs = (part: (typeof PARTS)[number]) => ONLY === undefined || ONLY === part;

let server: ServerWorker;
const post = <T>(path: string) => server.call<T>(path, { method: "POST" });

/** The workerd process's CPU time so far (user + system, ms), from /proc; NaN where there is none. */
function workerdCpuMs(): number {
  try {
    let total = 0;
    let found = false;
    for (const pid of readdirSync("/proc")) {
      if (!/^\d+$/.test(pid)) continue;
      let stat: string;
      try {
        stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      } catch {
        continue;
      }
      // pid (comm) state ppid ... utime(14) stime(15): fields after the command's closing paren.
      const close = stat.lastIndexOf(")");
      const comm = stat.slice(stat.indexOf("(") + 1, close);
      const fields = stat.slice(close + 2).split(" ");
      if (comm !== "workerd" || Number(fields[1]) !== process.pid) continue;
      total += ((Number(fields[11]) + Number(fields[12])) * 1000) / 100; // USER_HZ: 100
      found = true;
    }
    return found ? total : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

interface Timed<T> {
  /** Wall ms from here, less the empty round trip. */
  ms: number;
  /** workerd's CPU ms during the request (NaN where unknown). */
  cpuMs: number;
  value: T;
}

/** POST `route` to `space`, timed from here less the smallest of three empty round trips to it. */
async function timedPost<T>(space: string, route: string): Promise<Timed<T>> {
  const trips: number[] = [];
  for (let i = 0; i < 3; i++) {
    const started = performance.now();
    await post(`/space/${space}/empty`);
    trips.push(performance.now() - started);
  }
  await new Promise((r) => setTimeout(r, 25));
  const cpu = workerdCpuMs();
  const started = performance.now();
  const value = await post<T>(`/space/${space}/${route}`);
  const ms = performance.now() - started - Math.min(...trips);
  return { ms: Math.max(0, ms), cpuMs: workerdCpuMs() - cpu, value };
}

const ms = (n: number, digits = 1) => (Number.isNaN(n) ? "-" : `${fmt(n, digits)} ms`);
const ratio = (n: number, digits = 2) => `${fmt(n, digits)}x`;

async function commits(): Promise<void> {
  const rounds = env("BENCH_ROUNDS", 5);
  const warmup = env("BENCH_WARMUP", 2);
  const modes = [
    { mode: "store", n: COMMITS, label: "DoStore.commit (transaction(async) + sync())" },
    { mode: "bare", n: COMMITS * BARE_FACTOR, label: "bare: transactionSync per commit, no await" },
    { mode: "bare-sync", n: COMMITS, label: "bare: transactionSync + await sync() per commit" },
  ] as const;
  const rates: Record<string, number[]> = { store: [], bare: [], "bare-sync": [] };
  for (let round = 0; round < warmup + rounds; round++) {
    // Each round starts with another mode, so none always runs first.
    for (let k = 0; k < modes.length; k++) {
      const { mode, n } = modes[(round + k) % modes.length]!;
      const t = await timedPost<{ n: number }>("commits", `commits?mode=${mode}&n=${n}`);
      if (round >= warmup) rates[mode]!.push(n / (t.ms / 1000));
    }
  }
  const load = machineLoad();
  const perRound = (mode: string) => median(rates["store"]!.map((s, i) => s / rates[mode]![i]!));
  console.log(
    `\nserver commits: one small INSERT per commit, one object, commits/s; medians of ${rounds} rounds after ${warmup} warm-up (${COMMITS} commits a sample, the bare loop ${COMMITS * BARE_FACTOR})`,
  );
  table([
    ["measurement", "commits/s", "µs per commit", "store / this", "load (1, 5, 15 min)"],
    ...modes.map(({ mode, label }) => {
      const rate = median(rates[mode]!);
      return [label, fmt(rate), fmt(1e6 / rate), mode === "store" ? "" : ratio(perRound(mode), 3), load];
    }),
  ]);
  console.log("(store / this: the median of per-round ratios of commits/s; below 1x the store is slower)");
}

async function agent(): Promise<void> {
  const rounds = env("BENCH_ROUNDS", 9);
  const warmup = env("BENCH_WARMUP", 15);
  const lgWarmup = Math.min(warmup, 3);
  const chat = instantModel(TOOL_ROUNDS);
  const servers: Array<Timed<{ transactions: number; toolResults: number }>> = [];
  const browsers: Sample[] = [];
  const graphs: Sample[] = [];
  let objects = 0;
  const serverRun = async (toolRounds: number) => {
    const space = `agent-${toolRounds}-${++objects}`;
    await post(`/space/${space}/prepare?rounds=${toolRounds}`);
    const run = await timedPost<{ transactions: number }>(space, "agent");
    const { toolResults } = await post<{ toolResults: number }>(`/space/${space}/verify`);
    return { ...run, value: { ...run.value, toolResults } };
  };
  const check = (side: string, toolResults: number) => {
    if (toolResults !== TOOL_ROUNDS)
      throw new Error(`${side}: ${toolResults} tool results, not ${TOOL_ROUNDS}`);
  };
  for (let i = 0; i < warmup + rounds; i++) {
    const s = await serverRun(TOOL_ROUNDS);
    check("server", s.value.toolResults);
    const b = await durable(chat);
    check("browser engine", b.toolResults);
    const g = i >= warmup - lgWarmup ? await langGraph(TOOL_ROUNDS) : undefined;
    if (g) check("LangGraph", g.toolResults);
    if (i >= warmup) {
      servers.push(s);
      browsers.push(b);
      graphs.push(g!);
    }
  }
  chat.unregister();
  // What a run with no tool round commits, so tx/round is what each round adds.
  const fixed = (await serverRun(0)).value.transactions;
  const bare = instantModel(0);
  const browserFixed = (await durable(bare)).transactions;
  bare.unregister();
  const load = machineLoad();

  const serverMs = median(servers.map((s) => s.ms));
  const browserMs = median(browsers.map((s) => s.ms));
  const graphMs = median(graphs.map((s) => s.ms));
  const perRound = (n: number) => `${fmt((n / TOOL_ROUNDS) * 1000)} µs`;
  const serverTx = median(servers.map((s) => s.value.transactions));
  const browserTx = median(browsers.map((s) => s.transactions));
  console.log(
    `\nserver agent loop: ${TOOL_ROUNDS} tool rounds + answer, instant model; medians of ${rounds} interleaved rounds after ${warmup} warm-up (LangGraph: ${lgWarmup}); Node ${process.version}`,
  );
  table([
    [
      "measurement",
      "wall (median)",
      "cpu (median)",
      "wall per round",
      "transactions",
      "tx/round",
      "load (1, 5, 15 min)",
    ],
    [
      "server: durable harness, Durable Object store (workerd)",
      ms(serverMs),
      ms(median(servers.map((s) => s.cpuMs))),
      perRound(serverMs),
      fmt(serverTx),
      fmt((serverTx - fixed) / TOOL_ROUNDS, 2),
      load,
    ],
    [
      "browser engine: durable harness, wa-sqlite memory store (Node)",
      ms(browserMs),
      ms(median(browsers.map((s) => s.cpuMs))),
      perRound(browserMs),
      fmt(browserTx),
      fmt((browserTx - browserFixed) / TOOL_ROUNDS, 2),
      load,
    ],
    [
      "LangGraph.js, MemorySaver checkpointer (Node)",
      ms(graphMs),
      ms(median(graphs.map((s) => s.cpuMs))),
      perRound(graphMs),
      "-",
      "-",
      load,
    ],
    [
      "ratio server / browser engine (per round)",
      ratio(median(servers.map((s, i) => s.ms / browsers[i]!.ms))),
      "",
      "",
      "",
      "",
      load,
    ],
    [
      "ratio server / LangGraph (per round)",
      ratio(median(servers.map((s, i) => s.ms / graphs[i]!.ms))),
      "",
      "",
      "",
      "",
      load,
    ],
  ]);
  console.log(
    "(server: the request's round trip less an empty one's; its cpu is workerd's. Every commit of the server's store waits for sync(), the memory store's for nothing)",
  );
  const list = (xs: Array<{ ms: number }>) => xs.map((s) => fmt(s.ms, 1)).join(", ");
  console.log(
    `wall ms per run: server ${list(servers)} | browser engine ${list(browsers)} | LangGraph ${list(graphs)}`,
  );
}

async function recovery(): Promise<void> {
  console.log(
    `\nserver recovery: workerd killed (SIGKILL) and started again on the same folder, then the first request opens a space; ${RECOVERY_ROUNDS} rounds`,
  );
  let started = performance.now();
  await post(`/space/recover-big/seed?tasks=${SEED}&conversations=${SEED_CONVERSATIONS}`);
  const seededMs = performance.now() - started;
  await post("/space/recover-small/seed?tasks=0&conversations=0");
  console.log(
    `  seeded ${fmt(SEED)} terminal tasks, ${fmt(SEED_CONVERSATIONS)} idle conversations and one live task in ${fmt(seededMs / 1000, 1)} s`,
  );
  const targets = [
    {
      space: "recover-big",
      label: `${fmt(SEED)} terminal tasks, ${fmt(SEED_CONVERSATIONS)} conversations, 1 live task`,
    },
    { space: "recover-small", label: "small store: 1 live task" },
  ];
  const open: Record<string, number[]> = {};
  const resumed: Record<string, number[]> = {};
  const loads: Record<string, string> = {};
  const floor: number[] = [];
  for (let round = 0; round < RECOVERY_ROUNDS; round++) {
    // Alternate which store is opened first after its restart.
    for (const { space } of round % 2 ? [...targets].reverse() : targets) {
      await server.restart();
      started = performance.now();
      await post("/space/recover-floor/empty");
      floor.push(performance.now() - started);
      started = performance.now();
      let openAt = Number.NaN;
      for await (const { line, at } of server.lines(`/space/${space}/opened`)) {
        if (line.startsWith("open ")) {
          openAt = at;
          if (line !== "open 1")
            throw new Error(`${space}: ${line.slice(5)} live tasks after recovery, not 1`);
        } else if (line === "resumed") (resumed[space] ??= []).push(at - started);
        else throw new Error(`${space}: ${line}`);
      }
      (open[space] ??= []).push(openAt - started);
      loads[space] = machineLoad();
    }
  }
  const big = median(open["recover-big"]!);
  const small = median(open["recover-small"]!);
  table([
    [
      "store",
      "first request: harness open (median)",
      "to the live task's first commit (median)",
      "load (1, 5, 15 min)",
    ],
    ...targets.map(({ space, label }) => [
      label,
      ms(median(open[space]!)),
      ms(median(resumed[space]!)),
      loads[space]!,
    ]),
    ["floor: first request to an empty object", ms(median(floor)), "", machineLoad()],
    ["ratio big / small store (harness open)", ratio(big / small), "", ""],
  ]);
  console.log(
    "(from sending the first request: its line saying the harness is open, and its line at the live task's first commit, stamped here as they arrive)",
  );
}

/**
 * One space's demo conversation (the entry's streamed `/run`): each step's latency, stamped here as
 * its line arrives: since the previous step, or since the input was about to be submitted.
 */
async function demoRun(space: string): Promise<number[]> {
  const steps: number[] = [];
  let last = Number.NaN;
  let done = false;
  for await (const { line, at } of server.lines(
    `/space/${space}/run?runs=${SCALE_RUNS}&text=${encodeURIComponent(SCALE_TEXT)}`,
  )) {
    if (line === "submit") last = at;
    else if (line === "step") {
      steps.push(at - last);
      last = at;
    } else if (line.startsWith("done ")) done = true;
    else throw new Error(`${space}: ${line}`);
  }
  if (!done) throw new Error(`${space}: the run's stream ended before it was done`);
  return steps;
}

async function scale(): Promise<void> {
  console.log(
    `\nserver scale: N spaces each running a demo conversation at once (${SCALE_RUNS} x "${SCALE_TEXT}", no streaming delay), one workerd on this machine`,
  );
  const rows: string[][] = [
    [
      "spaces",
      "steps",
      "wall",
      "steps/s",
      "vs N=1",
      "step p50",
      "step p95",
      "p95 vs N=1",
      "load (1, 5, 15 min)",
    ],
  ];
  let base: { rate: number; p95: number } | undefined;
  for (const n of SCALE) {
    const spaces = Array.from({ length: n }, (_, i) => `scale-${n}-${i}`);
    // Each space's harness open first: opening is the recovery row's, not this one's.
    await Promise.all(spaces.map((s) => server.call(`/space/${s}/status`)));
    const started = performance.now();
    const results = await Promise.all(spaces.map((s) => demoRun(s)));
    const wall = performance.now() - started;
    const steps = results.flat();
    const rate = steps.length / (wall / 1000);
    const p95 = percentile(steps, 95);
    base ??= { rate, p95 };
    rows.push([
      String(n),
      fmt(steps.length),
      ms(wall, 0),
      fmt(rate),
      ratio(rate / base.rate),
      ms(median(steps)),
      ms(p95),
      ratio(p95 / base.p95),
      machineLoad(),
    ]);
  }
  table(rows);
  console.log(
    "(a step: a commit that appends to a conversation; its latency: since the conversation's previous step, or since its input was submitted; each stamped here as the object's line for it arrives)",
  );
}

async function main(): Promise<void> {
  const started = performance.now();
  console.log(`server bench: workerd through miniflare 3, Node ${process.version}; load ${machineLoad()}`);
  server = await startServerWorker({
    entry: join(here, "server", "bench-entry.ts"),
    objects: { SPACES: "BenchSpace" },
  });
  try {
    if (runs("commits")) await commits();
    if (runs("agent")) await agent();
    if (runs("recovery")) await recovery();
    if (runs("scale")) await scale();
  } finally {
    await server.stop();
  }
  console.log(`server bench took ${fmt((performance.now() - started) / 1000, 1)} s`);
}

await main();
