/**
 * The kit's crash sweep (worker/testing/crash.ts) over any store kit: the scenario once uncrashed
 * (its transactions counted), then once per transaction k = 1..K with the store dying at k (after
 * its commit, or before it: rolled back), a new engine opened on what was committed and the scenario
 * finished there. The same invariants as the kit's: every crash point swept does crash (a point never
 * reached proves nothing), at least `atLeast` points are covered, and every run ends with no task
 * left live. Kept beside the kit's because that one is bound to memory images; this one needs only
 * `StoreKit.kill` and `reopen`, which a Durable Object can do on its one database.
 */
import type { TaskRecord } from "../../worker/core/types.ts";
import { type Store, StoreClosed } from "../../worker/store/types.ts";
import { within } from "../../worker/testing/wait.ts";
import type { StoreKit } from "./kit.ts";

export interface SweptEngine {
  tasks(): Promise<TaskRecord[]>;
  close(): Promise<void>;
}

export interface SweepScenario<E extends SweptEngine, S, R> {
  readonly name: string;
  /** Fresh services for one run (the outside world: it outlives the crash). */
  services(): S;
  /** Open the engine on `store`; `options` is the sweep mode's (whether the harness groups commits). */
  open(store: Store, services: S, options: { groupCommit: boolean }): Promise<E>;
  /** Drive to the end; after a crash it runs in full on the reopened engine, like a client. */
  finish(engine: E, services: S): Promise<R>;
}

export interface SweepRun<S, R> {
  readonly at: number | undefined;
  readonly result: R;
  readonly services: S;
  readonly label: string;
}

export interface SweepOptions<S, R> {
  point: "after-commit" | "before-commit";
  /** The harness groups concurrent commits into one transaction (default true). */
  groupCommit?: boolean;
  baseline?(run: SweepRun<S, R>): void;
  check(run: SweepRun<S, R>, baseline: SweepRun<S, R>): void;
  atLeast?: number;
  timeoutMs?: number;
}

export interface SweepReport {
  readonly transactions: number;
  readonly points: number;
}

export async function sweepOn<St extends Store, E extends SweptEngine, S, R>(
  kit: StoreKit<St>,
  scenario: SweepScenario<E, S, R>,
  options: SweepOptions<S, R>,
): Promise<SweepReport> {
  const first = await runOnce(kit, scenario, options, undefined);
  options.baseline?.(first.run);
  let points = 0;
  for (let k = 1; k <= first.transactions; k++) {
    const { run, crashed } = await runOnce(kit, scenario, options, k);
    if (!crashed) throw new Error(`${scenario.name} (${options.point}): ${run.label} was never reached`);
    options.check(run, first.run);
    points++;
  }
  if (options.atLeast !== undefined && points < options.atLeast)
    throw new Error(
      `${scenario.name} (${options.point}): ${points} crash points, fewer than ${options.atLeast}`,
    );
  return { transactions: first.transactions, points };
}

async function runOnce<St extends Store, E extends SweptEngine, S, R>(
  kit: StoreKit<St>,
  scenario: SweepScenario<E, S, R>,
  options: SweepOptions<S, R>,
  at: number | undefined,
): Promise<{ run: SweepRun<S, R>; crashed: boolean; transactions: number }> {
  const { point, groupCommit = true, timeoutMs = 10_000 } = options;
  const label = at === undefined ? "the uncrashed run" : `crash at ${point} of transaction ${at}`;
  const services = scenario.services();
  const store = await kit.fresh();
  let crashed = false;
  let signalCrash!: () => void;
  const crash = new Promise<void>((r) => {
    signalCrash = r;
  });
  store.setFaultHook((p, { transaction }) => {
    if (at === undefined || crashed || p !== point || transaction !== at) return;
    crashed = true;
    kit.kill(store, label);
    signalCrash();
    throw new StoreClosed(label);
  });
  let engine: E | undefined;
  let result: { value: R } | undefined;
  try {
    engine = await scenario.open(store, services, { groupCommit });
    const finished = scenario.finish(engine, services).then((value) => ({ value }));
    result = await within(Promise.race([finished, crash.then(() => undefined)]), timeoutMs, label);
  } catch (error) {
    if (!crashed) throw error;
  }
  if (!crashed) {
    if (!engine || !result) throw new Error(`${label}: finished without a result`);
    const transactions = store.stats.transactions;
    try {
      await noneLive(engine, label);
    } finally {
      await engine.close();
      await store.close();
    }
    return { run: { at, result: result.value, services, label }, crashed, transactions };
  }
  await engine?.close().catch(() => undefined);
  const reopened = await kit.reopen(store);
  const again = await scenario.open(reopened, services, { groupCommit });
  try {
    const value = await within(scenario.finish(again, services), timeoutMs, `${label}, reopened`);
    await noneLive(again, label);
    return { run: { at, result: value, services, label }, crashed, transactions: 0 };
  } finally {
    await again.close();
    await reopened.close();
  }
}

async function noneLive(engine: SweptEngine, label: string): Promise<void> {
  const live = (await engine.tasks()).filter((t) => t.state.status !== "terminal");
  if (live.length > 0)
    throw new Error(
      `${label}: tasks left live: ${live.map((t) => `${t.kind} #${t.id} (${t.state.status})`).join(", ")}`,
    );
}
