/**
 * The in-browser benchmark, run inside the engine's own context (SharedWorker or dedicated worker)
 * on scratch stores of the engine's own kind and build, deleted afterwards: raw wa-sqlite
 * transactions/s versus engine task steps/s, side by side.
 *
 * - raw: sequential `await store.commit(INSERT)`, transactions/s;
 * - chain: single-phase tasks in sequence (each phase commits terminal and creates the next), tasks/s;
 *   the end is seen on the harness's change sets, so measuring adds no reads to the commit line;
 * - concurrent: batches of 100 three-phase tasks at once (each phase commits the next checkpoint),
 *   phases/s, batch after batch until the time budget is used.
 */

import type { HostPlatform } from "../browser/platform.ts";
import { defineTask } from "../core/define.ts";
import { Harness } from "../core/harness.ts";
import { commitBenchEntry } from "../core/queries.ts";
import { migrateStore } from "../core/schema.ts";

const chainTask = defineTask<{ n: number; of: number }, { phase: "step" }, number>({
  name: "bench.chain",
  version: 1,
  initial: () => ({ phase: "step" }),
  phases: {
    step: async (task, runtime) => {
      await runtime.commit((tx) => {
        if (task.input.n < task.input.of)
          tx.createTask(
            chainTask,
            { n: task.input.n + 1, of: task.input.of },
            { ownership: { kind: "conversation" } },
          );
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
    c: async (_t, r) =>
      void (await r.commit(() => ({ status: "terminal", outcome: { status: "completed", result: null } }))),
  },
  abort: async (_t, r) =>
    void (await r.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
});

const CONCURRENT_TASKS = 100;

export async function runBrowserBench(
  platform: HostPlatform,
  options: { seconds: number },
): Promise<Record<string, number>> {
  const budgetMs = Math.max(500, options.seconds * 1000);
  const names: string[] = [];
  const scratch = () => {
    const name = `bench-${crypto.randomUUID()}`;
    names.push(name);
    return platform.openScratchStore(name);
  };
  try {
    // Raw: one INSERT per transaction, sequentially.
    const raw = await scratch();
    await migrateStore(raw);
    let t0 = performance.now();
    let n = 0;
    while (performance.now() - t0 < budgetMs) {
      await commitBenchEntry(raw, `{"i":${n}}`);
      n++;
    }
    const rawRate = n / ((performance.now() - t0) / 1000);
    await raw.close();

    // Chain: about half the raw budget's worth of links, one after the other.
    const chainStore = await scratch();
    const chain = await Harness.open(chainStore, { tasks: [chainTask] });
    const links = Math.max(20, Math.round((rawRate * budgetMs) / 1000 / 2));
    let lastDone!: () => void;
    const finished = new Promise<void>((resolve) => {
      lastDone = resolve;
    });
    const unsubscribe = chain.subscribe((change) => {
      for (const t of change.tasks) {
        if (
          t.kind === "bench.chain" &&
          t.state.status === "terminal" &&
          (t.input as { n: number }).n === links
        )
          lastDone();
      }
    });
    const chainTx0 = chainStore.stats.transactions;
    t0 = performance.now();
    await chain.createTask(chainTask, { n: 1, of: links }, { ownership: { kind: "conversation" } });
    await finished;
    const chainRate = links / ((performance.now() - t0) / 1000);
    const chainTx = chainStore.stats.transactions - chainTx0;
    unsubscribe();
    await chain.close();

    // Concurrent: batches of 100 three-phase tasks until the budget is used.
    const concStore = await scratch();
    const conc = await Harness.open(concStore, { tasks: [threeTask] });
    const concTx0 = concStore.stats.transactions;
    let steps = 0;
    t0 = performance.now();
    do {
      const ids = await conc.transaction((tx) =>
        Array.from({ length: CONCURRENT_TASKS }, () =>
          tx.createTask(threeTask, null, { ownership: { kind: "conversation" } }),
        ),
      );
      await Promise.all(ids.map((id) => conc.waitForTask(id)));
      steps += CONCURRENT_TASKS * 3;
    } while (performance.now() - t0 < budgetMs);
    const concRate = steps / ((performance.now() - t0) / 1000);
    const concTx = concStore.stats.transactions - concTx0;
    await conc.close();

    return {
      rawTransactionsPerSecond: rawRate,
      rawTransactions: n,
      chainTasksPerSecond: chainRate,
      chainTasks: links,
      chainTransactionsPerTask: chainTx / links,
      concurrentStepsPerSecond: concRate,
      concurrentSteps: steps,
      concurrentStepsPerTransaction: steps / Math.max(1, concTx),
      chainRatio: chainRate / rawRate,
      concurrentRatio: concRate / rawRate,
    };
  } finally {
    for (const name of names) await platform.deleteScratchStore(name).catch(() => undefined);
  }
}
