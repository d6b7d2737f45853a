/**
 * Crashing on purpose. `crashingStore` is a memory store that dies at a chosen transaction (it then
 * refuses every call, as if the process died) and hands back a fresh store holding exactly what was
 * committed. `crashSweep` is the one loop every crash sweep runs: the scenario once uncrashed (its
 * transactions counted), then once per transaction k = 1..K crashing at k in the given mode, a new
 * harness opened on what was committed and the scenario finished there; each run goes to the
 * scenario's own assertions, and the sweep prints the crash points it covered.
 * Grouping commits is the harness's (core/session.ts; the store runs one callback per transaction),
 * so a mode's `groupCommit` reaches the harness: the sweep hands it to the scenario's `open`, which
 * passes it to the harness it opens.
 * Invariants the sweep checks itself: every crash point it runs does crash (or the sweep fails: a
 * point that is never reached proves nothing), it covers at least `atLeast` points, every run ends
 * with no task left live, and in a mode without grouping no transaction carries two commits (or the
 * scenario did not pass the mode on).
 */
import type { ChangeSet, TaskRecord } from "../core/types.ts";
import type { MemoryImage, MemoryStore } from "../store/open.ts";
import { StoreClosed } from "../store/types.ts";
import { memoryStore } from "./store.ts";
import { within } from "./wait.ts";

export interface CrashingStore {
  readonly store: MemoryStore;
  /** Resolves when the crash happened. */
  readonly crashed: Promise<void>;
  readonly hasCrashed: boolean;
  /** A fresh store holding exactly the committed state at the crash (or now, if it never crashed). */
  recover(): Promise<MemoryStore>;
}

export interface CrashOptions {
  /** Die at the k-th transaction (1-based). */
  at: number;
  /** `after-commit`: right after COMMIT returned (default); `before-commit`: with the transaction's
   * pages written but COMMIT not reached, so reopening rolls it back. */
  point?: "after-commit" | "before-commit";
  image?: MemoryImage;
}

/**
 * The timeout a test running crash sweeps gives itself (vitest's per-test timeout). How long a sweep
 * takes is its number of crash points times one run, and the machine's load multiplies it (31 s at
 * load 12 for the longest; the 60 s default failed several at load 20-30). What stops a sweep that
 * goes wrong is per run, and so scales with the sweep: each run of `crashSweep` fails after its own
 * `timeoutMs` naming the run, and the runs are as many as the uncrashed run's transactions. This
 * bound is only the backstop behind those.
 */
export const CRASH_SWEEP_TEST_TIMEOUT_MS = 15 * 60_000;

/**
 * The crash sweeps' modes: where the world stops, and whether the harness groups commits into shared
 * transactions (`HarnessOptions.groupCommit`; without grouping every two commits are a crash point).
 */
export interface CrashMode {
  name: string;
  point: "after-commit" | "before-commit";
  groupCommit: boolean;
}

/** What a scenario's `open` passes on to the harness it opens: the mode's grouping. */
export interface CrashHarnessOptions {
  readonly groupCommit: boolean;
}

export const CRASH_MODES: readonly CrashMode[] = [
  { name: "grouped, crash after COMMIT", point: "after-commit", groupCommit: true },
  { name: "one commit per transaction, crash after COMMIT", point: "after-commit", groupCommit: false },
  { name: "grouped, crash before COMMIT", point: "before-commit", groupCommit: true },
];

export async function crashingStore(options: CrashOptions | { afterCommit: number }): Promise<CrashingStore> {
  const o: CrashOptions = "afterCommit" in options ? { at: options.afterCommit } : options;
  const point = o.point ?? "after-commit";
  const store = await memoryStore(o.image);
  let image: MemoryImage | undefined;
  let signalCrash!: () => void;
  const crashed = new Promise<void>((r) => {
    signalCrash = r;
  });
  store.setFaultHook((p, { transaction }) => {
    if (p !== point || transaction !== o.at || image) return;
    image = store.image();
    store.kill(`crashed at ${point} of transaction ${transaction}`);
    signalCrash();
    throw new StoreClosed(`crashed at ${point} of transaction ${transaction}`);
  });
  return {
    store,
    crashed,
    get hasCrashed() {
      return image !== undefined;
    },
    recover: () => memoryStore(image ?? store.image()),
  };
}

/** What the sweep needs of a harness (a `Harness` or an `AgentHarness`). */
export interface SweptHarness {
  tasks(): Promise<TaskRecord[]>;
  subscribe(listener: (change: ChangeSet) => void): () => void;
  close(): Promise<void>;
}

/**
 * A scenario to sweep. `S` is one run's own state (fresh fakes, what the run records), `R` what a
 * user can observe at the end of a run, compared across runs by the scenario's assertions.
 */
export interface CrashScenario<E extends SweptHarness, S, R> {
  readonly name: string;
  /** The committed state every run starts from (default: an empty store). */
  readonly image?: MemoryImage;
  /** A fresh state for one run. */
  services(): S;
  /**
   * Open a harness on `store` (the first one, or the one reopened after the crash), with `options`
   * among the harness's options (the mode's grouping).
   */
  open(store: MemoryStore, services: S, options: CrashHarnessOptions): Promise<E>;
  /**
   * Drive the harness to the end and observe the result. Runs on the first harness (raced against the
   * crash) and, after a crash, in full on the reopened one: like a client, it starts work only when
   * the committed state does not hold it already (or resends it with the same request id).
   */
  finish(harness: E, services: S): Promise<R>;
  /** After a crash, before the harness reopens: look at a copy of what was committed. */
  afterCrash?(committed: MemoryStore, services: S): Promise<void>;
}

/** One run of a sweep, as handed to the scenario's assertions. */
export interface CrashRun<S, R> {
  readonly mode: CrashMode;
  /** The transaction the store was told to die at; undefined for the uncrashed run. */
  readonly at: number | undefined;
  readonly crashed: boolean;
  readonly result: R;
  readonly services: S;
  /** The run's name for assertion messages: "crash at after-commit of transaction 3". */
  readonly label: string;
}

export interface CrashSweepReport<S, R> {
  readonly scenario: string;
  readonly mode: CrashMode;
  /** Transactions of the uncrashed run: the crash points swept. */
  readonly transactions: number;
  /** Crash points covered (runs that crashed): equal to `transactions`, or the sweep fails. */
  readonly points: number;
  readonly baseline: CrashRun<S, R>;
  readonly runs: ReadonlyArray<CrashRun<S, R>>;
}

export interface CrashSweepOptions<S, R> {
  mode: CrashMode;
  /** The scenario's assertions on the uncrashed run, before any crash. */
  baseline?(run: CrashRun<S, R>): void;
  /** The scenario's assertions on each crashed run, with the uncrashed run to compare it to. */
  check(run: CrashRun<S, R>, baseline: CrashRun<S, R>): void;
  /**
   * The fewest crash points this sweep may cover (what it covered when it was written): a change
   * that makes it sweep fewer fails it, in whatever selection of tests runs, instead of going unseen.
   */
  atLeast?: number;
  /** One harness's `finish` fails after this long (default 10 s) instead of hanging the sweep. */
  timeoutMs?: number;
  /** Where the covered points are printed (default `console.log`). */
  log?: (line: string) => void;
}

/**
 * Sweep `scenario` in one crash mode (callers run it once per entry of `CRASH_MODES`). Resolves with
 * the report once every run passed its checks; rejects on the first failing one.
 */
export async function crashSweep<E extends SweptHarness, S, R>(
  scenario: CrashScenario<E, S, R>,
  options: CrashSweepOptions<S, R>,
): Promise<CrashSweepReport<S, R>> {
  const { mode } = options;
  const first = await runOnce(scenario, options, undefined);
  const baseline = first.run;
  options.baseline?.(baseline);
  const runs: Array<CrashRun<S, R>> = [];
  for (let k = 1; k <= first.transactions; k++) {
    const { run } = await runOnce(scenario, options, k);
    if (!run.crashed)
      throw new Error(`${scenario.name} (${mode.name}): ${run.label} was never reached, so it was not swept`);
    options.check(run, baseline);
    runs.push(run);
  }
  if (options.atLeast !== undefined && runs.length < options.atLeast)
    throw new Error(
      `${scenario.name} (${mode.name}): ${runs.length} crash points covered, fewer than the ${options.atLeast} it must cover`,
    );
  const report = {
    scenario: scenario.name,
    mode,
    transactions: first.transactions,
    points: runs.length,
    baseline,
    runs,
  };
  (options.log ?? console.log)(
    `crash sweep: ${scenario.name} (${mode.name}): ${report.points} crash points of ${report.transactions} transactions`,
  );
  return report;
}

async function runOnce<E extends SweptHarness, S, R>(
  scenario: CrashScenario<E, S, R>,
  options: CrashSweepOptions<S, R>,
  at: number | undefined,
): Promise<{ run: CrashRun<S, R>; transactions: number }> {
  const { mode, timeoutMs = 10_000 } = options;
  const label = at === undefined ? "the uncrashed run" : `crash at ${mode.point} of transaction ${at}`;
  const services = scenario.services();
  const cs = await crashingStore({
    at: at ?? Number.POSITIVE_INFINITY,
    point: mode.point,
    ...(scenario.image ? { image: scenario.image } : {}),
  });
  const harnessOptions: CrashHarnessOptions = { groupCommit: mode.groupCommit };
  const done = (result: R, crashed: boolean): CrashRun<S, R> => ({
    mode,
    at,
    crashed,
    result,
    services,
    label,
  });
  let harness: E | undefined;
  let result: { value: R } | undefined;
  try {
    harness = await scenario.open(cs.store, services, harnessOptions);
    const ungrouped = mode.groupCommit
      ? undefined
      : oneCommitPerTransaction(harness, cs.store, scenario.name);
    const finished = scenario.finish(harness, services).then((value) => ({ value }));
    try {
      result = await within(Promise.race([finished, cs.crashed.then(() => undefined)]), timeoutMs, label);
    } finally {
      ungrouped?.stop();
    }
    ungrouped?.check();
  } catch (error) {
    if (!cs.hasCrashed) throw error;
  }
  if (!cs.hasCrashed) {
    if (!harness || !result) throw new Error(`${label}: finished without a result`);
    const transactions = cs.store.stats.transactions;
    try {
      await noneLive(harness, label);
    } finally {
      await harness.close();
    }
    return { run: done(result.value, false), transactions };
  }
  await harness?.close().catch(() => undefined);
  if (scenario.afterCrash) {
    const copy = await cs.recover();
    try {
      await scenario.afterCrash(copy, services);
    } finally {
      await copy.close();
    }
  }
  const recovered = await cs.recover();
  const reopened = await scenario.open(recovered, services, harnessOptions);
  const ungrouped = mode.groupCommit
    ? undefined
    : oneCommitPerTransaction(reopened, recovered, scenario.name);
  try {
    const value = await within(scenario.finish(reopened, services), timeoutMs, `${label}, reopened`);
    ungrouped?.stop();
    ungrouped?.check();
    await noneLive(reopened, label);
    return { run: done(value, true), transactions: 0 };
  } finally {
    await reopened.close();
  }
}

/**
 * Watch that `harness` commits one commit per transaction: each commit publishes one change set after
 * its COMMIT and before the store's next transaction, so two change sets published at the same
 * transaction count came from one transaction.
 */
function oneCommitPerTransaction(
  harness: SweptHarness,
  store: MemoryStore,
  scenario: string,
): { stop(): void; check(): void } {
  let shared: number | undefined;
  let last: number | undefined;
  const stop = harness.subscribe(() => {
    const t = store.stats.transactions;
    if (t === last) shared ??= t;
    last = t;
  });
  return {
    stop,
    check() {
      if (shared !== undefined)
        throw new Error(
          `${scenario}: transaction ${shared} carried more than one commit in a mode without grouping (does its open pass the mode's options to the harness?)`,
        );
    },
  };
}

async function noneLive(harness: SweptHarness, label: string): Promise<void> {
  const live = (await harness.tasks()).filter((t) => t.state.status !== "terminal");
  if (live.length > 0)
    throw new Error(
      `${label}: tasks left live: ${live.map((t) => `${t.kind} #${t.id} (${t.state.status})`).join(", ")}`,
    );
}
