/**
 * The in-browser benchmark, run inside the engine's own context (SharedWorker or dedicated worker)
 * on scratch stores: raw wa-sqlite transactions/s versus engine task steps/s, side by side.
 */
import { defineTask } from "../core/define.ts";
import { Harness } from "../core/harness.ts";
import type { HostPlatform } from "./engine.ts";

const chainTask = defineTask<{ n: number; of: number }, { phase: "step" }, number>({
  name: "bench.chain",
  version: 1,
  initial: () => ({ phase: "step" }),
  phases: {
    step: async (task, runtime) => {
      await runtime.commit((tx) => {
        if (task.input.n < task.input.of) tx.createTask(chainTask, { n: task.input.n + 1, of: task.input.of }, { ownership: { kind: "conversation" } });
        return { status: "terminal", outcome: { status: "completed", result: task.input.n } };
      });
    },
  },
  abort: async (_t, runtime) => {
    await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }));
  },
});

type Three = { phase: "a" } | { phase: "b" } | { phase: "c" };
const threeTask = defineTask<null, Three, null>({
  name: "bench.three",
  version: 1,
  initial: () => ({ phase: "a" }),
  phases: {
    a: async (_t, r) => void (await r.commit(() => ({ status: "running", checkpoint: { phase: "b" } }))),
    b: async (_t, r) => void (await r.commit(() => ({ status: "running", checkpoint: { phase: "c" } }))),
    c: async (_t, r) => void (await r.commit(() => ({ status: "terminal", outcome: { status: "completed", result: null } }))),
  },
  abort: async (_t, r) => void (await r.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
});

export async function runBrowserBench(platform: HostPlatform, options: { seconds: number }): Promise<Record<string, number>> {
  const { openStore } = await import("../store/open.ts");
  const kind = platform.storeKind;
  const scratch = () => openStore({ kind, name: `bench-${crypto.randomUUID()}` } as never);
  const budgetMs = Math.max(500, options.seconds * 1000);

  const raw = await scratch();
  let t0 = performance.now();
  let n = 0;
  while (performance.now() - t0 < budgetMs) {
    await raw.commit((sql) => sql.run("INSERT OR REPLACE INTO meta (key, value) VALUES ('bench', ?)", [String(n)]));
    n++;
  }
  const rawRate = n / ((performance.now() - t0) / 1000);
  await raw.close();

  const chainStore = await scratch();
  const chain = await Harness.open(chainStore, { tasks: [chainTask] });
  const links = Math.max(20, Math.round((rawRate * budgetMs) / 1000 / 2));
  t0 = performance.now();
  const first = await chain.createTask(chainTask, { n: 1, of: links });
  await chain.waitForTask(first);
  for (;;) {
    const last = (await chain.tasks({ kind: "bench.chain" })).at(-1)!;
    if (last.state.status === "terminal" && (last.input as { n: number }).n === links) break;
    await chain.waitForTask(last.id);
  }
  const chainRate = links / ((performance.now() - t0) / 1000);
  const chainTx = chainStore.stats.transactions;
  await chain.close();

  const concStore = await scratch();
  const conc = await Harness.open(concStore, { tasks: [threeTask] });
  t0 = performance.now();
  const ids = await conc.transaction((tx) => Array.from({ length: 100 }, () => tx.createTask(threeTask, null)));
  await Promise.all(ids.map((id) => conc.waitForTask(id)));
  const concRate = 300 / ((performance.now() - t0) / 1000);
  await conc.close();

  return {
    rawTransactionsPerSecond: rawRate,
    chainTasksPerSecond: chainRate,
    chainTransactionsPerTask: chainTx / links,
    concurrentStepsPerSecond: concRate,
    chainRatio: chainRate / rawRate,
    concurrentRatio: concRate / rawRate,
  };
}
