/**
 * The core bench: the raw commit line against the engine, side by side in one run, on a memory store
 * (the engine's schema and pragmas). Prints one table; the bars are reported, never enforced.
 *
 * - raw: sequential `await store.commit(INSERT)`, transactions/s;
 * - chain: N single-phase tasks in sequence (each phase commits terminal and creates the next), tasks/s;
 * - concurrent: 100 three-phase tasks at once (each phase commits the next checkpoint), phases/s; a
 *   sample runs several such batches back to back so it lasts long enough to time.
 *
 * The three run interleaved, round after round, so load on the machine hits them alike; ratios are the
 * median of the per-round ratios. CPU time is measured next to wall time: on a busy machine it is the
 * steadier of the two (the workload is single-threaded and never waits on I/O).
 *
 * Env: BENCH_ROUNDS (measured rounds, default 5), BENCH_WARMUP (rounds, default 2), BENCH_RAW,
 * BENCH_CHAIN, BENCH_BATCHES (sizes), BENCH_ONLY=raw|chain|concurrent (one workload, for a profiler).
 */
import { defineTask, Harness, type Json, type TaskId } from "../../worker/index.ts";
import { memoryStore } from "../../worker/testing.ts";

const env = (name: string, fallback: number): number => Number(process.env[name] ?? fallback);
const ROUNDS = env("BENCH_ROUNDS", 5);
const WARMUP = env("BENCH_WARMUP", 2);
const RAW_COMMITS = env("BENCH_RAW", 3000);
const CHAIN_TASKS = env("BENCH_CHAIN", 1500);
const BATCHES = env("BENCH_BATCHES", 10);
const CONCURRENT_TASKS = 100;
const PHASES = 3;
const CHAIN_BAR = 0.45;
const CONCURRENT_BAR = 3;

interface Sample {
  /** Units (commits, tasks, phases) per wall-clock second. */
  rate: number;
  /** Units per CPU second (user + system of this process). */
  cpuRate: number;
  units: number;
  transactions: number;
}

/** Time `work`, which does `units` units and reports how many transactions it committed. */
async function timed(units: number, work: () => Promise<number>): Promise<Sample> {
  const cpu = process.cpuUsage();
  const start = performance.now();
  const transactions = await work();
  const ms = performance.now() - start;
  const used = process.cpuUsage(cpu);
  const cpuMs = (used.user + used.system) / 1000;
  return { rate: (units / ms) * 1000, cpuRate: (units / cpuMs) * 1000, units, transactions };
}

async function raw(n: number): Promise<Sample> {
  const store = await memoryStore();
  const sample = await timed(n, async () => {
    const before = store.stats.transactions;
    for (let i = 0; i < n; i++) {
      await store.commit((sql) =>
        sql.run("INSERT INTO entries (conversation_id, kind, body) VALUES (1, 'bench', ?)", [`{"i":${i}}`]),
      );
    }
    return store.stats.transactions - before;
  });
  await store.close();
  return sample;
}

type Step = { phase: "step" };

async function chain(n: number): Promise<Sample> {
  let finish!: () => void;
  const finished = new Promise<void>((r) => {
    finish = r;
  });
  const link = defineTask<{ n: number; of: number }, Step, number>({
    name: "bench.chain",
    version: 1,
    initial: () => ({ phase: "step" }),
    phases: {
      step: async (task, runtime) => {
        const { n: i, of } = task.input;
        await runtime.commit((tx) => {
          if (i < of) tx.createTask(link, { n: i + 1, of }, { ownership: { kind: "conversation" } });
          return { status: "terminal", outcome: { status: "completed", result: i } };
        });
        if (i === of) finish();
      },
    },
    abort: async (_t, runtime) => {
      await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }));
    },
  });
  const store = await memoryStore();
  const h = await Harness.open(store, { tasks: [link] });
  const sample = await timed(n, async () => {
    const before = store.stats.transactions;
    await h.createTask(link, { n: 1, of: n }, { ownership: { kind: "conversation" } });
    await finished;
    return store.stats.transactions - before;
  });
  await h.close();
  return sample;
}

type Phased = { phase: "p1" } | { phase: "p2" } | { phase: "p3" };

async function concurrent(tasks: number, batches: number): Promise<Sample> {
  const three = defineTask<Json, Phased, Json>({
    name: "bench.three",
    version: 1,
    initial: () => ({ phase: "p1" }),
    phases: {
      p1: async (_task, runtime) => {
        await runtime.commit(() => ({ status: "running", checkpoint: { phase: "p2" } }));
      },
      p2: async (_task, runtime) => {
        await runtime.commit(() => ({ status: "running", checkpoint: { phase: "p3" } }));
      },
      p3: async (_task, runtime) => {
        await runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: null } }));
      },
    },
    abort: async (_t, runtime) => {
      await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }));
    },
  });
  const store = await memoryStore();
  const h = await Harness.open(store, { tasks: [three] });
  const sample = await timed(tasks * PHASES * batches, async () => {
    const before = store.stats.transactions;
    // Each batch starts `tasks` tasks in one commit; the next batch starts when all of them ended.
    for (let b = 0; b < batches; b++) {
      const ids: TaskId[] = await h.transaction((tx) =>
        Array.from({ length: tasks }, () =>
          tx.createTask(three, null, { ownership: { kind: "conversation" } }),
        ),
      );
      for (const r of await Promise.all(ids.map((id) => h.waitForTask(id)))) {
        if (r.state.status !== "terminal" || r.state.outcome.status !== "completed") {
          throw new Error(`task ${r.id} did not complete`);
        }
      }
    }
    return store.stats.transactions - before;
  });
  await h.close();
  return sample;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};

function fmt(n: number, digits = 0): string {
  return n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
}

/** `BENCH_ONLY=raw|chain|concurrent`: one workload alone, for a profiler. */
async function only(which: string): Promise<void> {
  const runs: Record<string, () => Promise<Sample>> = {
    raw: () => raw(RAW_COMMITS),
    chain: () => chain(CHAIN_TASKS),
    concurrent: () => concurrent(CONCURRENT_TASKS, BATCHES),
  };
  const run = runs[which];
  if (!run) throw new Error(`BENCH_ONLY must be raw, chain or concurrent, not ${which}`);
  for (let i = 0; i < WARMUP + ROUNDS; i++) {
    const s = await run();
    console.log(
      `${which}: ${fmt(s.rate)}/s wall, ${fmt(s.cpuRate)}/s cpu, ${s.transactions} transactions for ${s.units} units`,
    );
  }
}

async function main(): Promise<void> {
  const started = performance.now();
  const rounds: Array<{ raw: Sample; chain: Sample; concurrent: Sample }> = [];
  for (let i = 0; i < WARMUP + ROUNDS; i++) {
    const round = {
      raw: await raw(RAW_COMMITS),
      chain: await chain(CHAIN_TASKS),
      concurrent: await concurrent(CONCURRENT_TASKS, BATCHES),
    };
    if (i >= WARMUP) rounds.push(round); // the first rounds warm the JIT, the wasm and the statement caches
  }
  const med = (f: (r: (typeof rounds)[number]) => number) => median(rounds.map(f));
  const chainRatio = med((r) => r.chain.rate / r.raw.rate);
  const concRatio = med((r) => r.concurrent.rate / r.raw.rate);
  const chainCpuRatio = med((r) => r.chain.cpuRate / r.raw.cpuRate);
  const concCpuRatio = med((r) => r.concurrent.cpuRate / r.raw.cpuRate);
  const first = rounds[0]!;
  const perUnit = (s: Sample) => fmt(s.transactions / s.units, 3);

  const rows: string[][] = [
    [
      "measurement",
      "work per run",
      "rate (wall)",
      "rate (cpu)",
      "transactions",
      "tx/unit",
      "ratio wall",
      "ratio cpu",
      "bar",
      "result",
    ],
    [
      "raw store commits, sequential",
      `${fmt(RAW_COMMITS)} commits`,
      `${fmt(med((r) => r.raw.rate))} tx/s`,
      `${fmt(med((r) => r.raw.cpuRate))} tx/s`,
      fmt(first.raw.transactions),
      perUnit(first.raw),
      "1.00",
      "1.00",
      "",
      "",
    ],
    [
      "engine chain, 1-phase tasks",
      `${fmt(CHAIN_TASKS)} tasks`,
      `${fmt(med((r) => r.chain.rate))} tasks/s`,
      `${fmt(med((r) => r.chain.cpuRate))} tasks/s`,
      fmt(first.chain.transactions),
      perUnit(first.chain),
      fmt(chainRatio, 2),
      fmt(chainCpuRatio, 2),
      `>= ${CHAIN_BAR}`,
      chainRatio >= CHAIN_BAR ? "PASS" : "FAIL",
    ],
    [
      `engine ${CONCURRENT_TASKS} concurrent ${PHASES}-phase tasks`,
      `${fmt(CONCURRENT_TASKS * PHASES * BATCHES)} steps`,
      `${fmt(med((r) => r.concurrent.rate))} steps/s`,
      `${fmt(med((r) => r.concurrent.cpuRate))} steps/s`,
      fmt(first.concurrent.transactions),
      perUnit(first.concurrent),
      fmt(concRatio, 2),
      fmt(concCpuRatio, 2),
      `>= ${CONCURRENT_BAR}`,
      concRatio >= CONCURRENT_BAR ? "PASS" : "FAIL",
    ],
  ];
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)));
  const line = (row: string[]) =>
    row.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join("  ");
  console.log(
    `\ncore bench: memory store, Node ${process.version}; medians of ${ROUNDS} interleaved rounds after ${WARMUP} warm-up rounds`,
  );
  console.log(line(rows[0]!));
  console.log(widths.map((w) => "-".repeat(w)).join("  "));
  for (const row of rows.slice(1)) console.log(line(row));
  console.log("(PASS/FAIL judges the wall-clock ratio; a miss is reported, never an error)");
  const list = (f: (r: (typeof rounds)[number]) => number) => rounds.map((r) => fmt(f(r))).join(", ");
  console.log(
    `wall rates per round: raw ${list((r) => r.raw.rate)} | chain ${list((r) => r.chain.rate)} | concurrent ${list((r) => r.concurrent.rate)}`,
  );
  console.log(`core bench took ${fmt((performance.now() - started) / 1000, 1)} s`);
}

const onlyWhich = process.env["BENCH_ONLY"];
await (onlyWhich ? only(onlyWhich) : main());
