/**
 * One invocation of a task's code, and the runtime its handlers use. A run invocation executes
 * phases in sequence. Before each one a step, decided on the commit line from the committed task
 * (spec §5.1), applies the first matching rule: stop when the task left `running`, when the harness
 * closes, or when an abort mark appeared; fault on a throw or on a phase that committed no new
 * checkpoint; hand over when the definition was replaced; else run the next phase. A commit the
 * invocation queued before the step lands first and counts. An abort invocation runs the abort
 * handler once and faults the task if it returned without an outcome. Every runtime call rejects
 * once the invocation ended.
 */
import type { AnyTaskDefinition, HookRunner, TaskRuntime, Tx } from "./define.ts";
import { CommitRefused, HarnessError, InvalidTransition, WaitCancelled } from "./errors.ts";
import { sealBuilt } from "./persist.ts";
import { type Overlay, patchTask } from "./records.ts";
import type { Scheduler } from "./scheduler.ts";
import { isPromiseLike } from "./session.ts";
import { applyNextState } from "./transition.ts";
import type {
  Checkpoint,
  Json,
  NextTaskState,
  RunningTask,
  TaskId,
  TaskOutcome,
  TaskRecord,
} from "./types.ts";

export type InvocationMode = "run" | "abort";

/** Thrown into a run invocation's signal when its task got an abort mark. */
export class AbortRequested extends HarnessError {
  override readonly name = "AbortRequested";
  constructor(id: TaskId) {
    super("abort_requested", `task ${id} was asked to abort`);
  }
}

/** The signal reason of an invocation that ended normally: one shared instance (no stack capture per task). */
const INVOCATION_ENDED = new CommitRefused("invocation_ended", "invocation ended");

export class Invocation {
  /**
   * Created on first use: an AbortController costs more than a whole phase commit of a small task,
   * and a handler that never looks at its signal (fewer than three parameters, no runtime.signal)
   * does not need one. An abort before that is remembered and shows on the signal once made.
   */
  #controller: AbortController | undefined;
  #abortReason: unknown;
  #aborted = false;
  #ended = false;
  #launched = false;
  /** Counts the phase handlers this invocation started (a phase's hooks are resolved once). */
  #phase = 0;
  /** The hook source's registry snapshot, taken as the current phase handler started. */
  #phaseSnapshot: unknown;
  /** Made on first use (`done`): only closing, a move and an abort's wait ask for it. */
  #done: Promise<void> | undefined;
  #resolveDone: (() => void) | undefined;
  #finished = false;
  /** Whether this invocation reported its definition gone from the registry (spec §5.4: once). */
  #missingReported = false;
  /**
   * The registered definitions that could not take this invocation's task over: each reported once
   * by this invocation (spec §5.4, once per resolved definition), so every task that meets one is named.
   */
  #unfitReported: WeakSet<AnyTaskDefinition> | undefined;
  readonly runtime: TaskRuntime;
  #resumed: boolean;

  constructor(
    readonly scheduler: Scheduler,
    readonly taskId: TaskId,
    readonly mode: InvocationMode,
    readonly definition: AnyTaskDefinition,
  ) {
    this.#resumed = mode === "run" && scheduler.session.records.interrupted.has(taskId);
    this.runtime = new Runtime(this);
  }

  get signal(): AbortSignal {
    if (!this.#controller) {
      this.#controller = new AbortController();
      if (this.#aborted) this.#controller.abort(this.#abortReason);
    }
    return this.#controller.signal;
  }

  #abort(reason: unknown): void {
    if (this.#aborted) return;
    this.#aborted = true;
    this.#abortReason = reason;
    this.#controller?.abort(reason);
  }

  /** `signal.aborted`, without making the signal. */
  get aborted(): boolean {
    return this.#aborted;
  }

  /** See TaskRuntime.resumed: only the invocation's first phase can be one cut off earlier. */
  get resumed(): boolean {
    return this.#resumed;
  }

  get ended(): boolean {
    return this.#ended;
  }

  /** Settles once the invocation has ended and the scheduler knows it. */
  get done(): Promise<void> {
    if (this.#done === undefined) {
      if (this.#finished) this.#done = Promise.resolve();
      else
        this.#done = new Promise<void>((r) => {
          this.#resolveDone = r;
        });
    }
    return this.#done;
  }

  #finish(): void {
    this.#finished = true;
    this.#resolveDone?.();
  }

  get phase(): number {
    return this.#phase;
  }

  get phaseSnapshot(): unknown {
    return this.#phaseSnapshot;
  }

  /** A phase (or abort) handler starts: its hooks resolve later, from the registry as it is now. */
  #startPhase(): void {
    this.#phase++;
    this.#phaseSnapshot = this.scheduler.taskHooks?.snapshot?.();
  }

  signalAbort(): void {
    if (this.mode === "run" && !this.#aborted) this.#abort(new AbortRequested(this.taskId));
  }

  stop(reason: Error): void {
    this.#abort(reason);
  }

  get launched(): boolean {
    return this.#launched;
  }

  /** The reservation never committed: end without running anything. */
  abandon(): void {
    this.#ended = true;
    this.#finish();
  }

  launch(): void {
    this.#launched = true;
    // Phases read their conversation's committed documents: load them first if nobody has yet.
    const session = this.scheduler.session;
    const c = this.#current()?.conversationId;
    const start = () => (this.mode === "run" ? this.#runPhases() : this.#runAbort());
    const run =
      c === undefined || session.records.docsLoaded.has(c)
        ? start()
        : session.ensureDocs(c).then(start, () => undefined);
    // One reaction for both outcomes (`finally` made three promises per invocation); a rejection
    // still surfaces as it did.
    const end = () => {
      this.#ended = true;
      this.#abort(INVOCATION_ENDED);
      this.scheduler.ended(this);
      this.#finish();
    };
    void run.then(end, (error: unknown) => {
      end();
      throw error;
    });
  }

  #current(): TaskRecord | undefined {
    return this.scheduler.session.records.tasks.get(this.taskId);
  }

  /**
   * The step before a phase (spec §5.1): the first matching rule, applied to the committed task.
   * When no commit is outstanding on the line, the published record is the committed one and a
   * step that writes nothing is decided at once. Otherwise the step is a callback on the line, so
   * whatever the invocation queued before it (a checkpoint, a mark) lands first and counts. A fault
   * or a handover is written by that same callback. Resolves with the task to run the next phase
   * on, or undefined when the invocation ends.
   */
  async #step(after?: After): Promise<RunningTask | undefined> {
    const session = this.scheduler.session;
    if (session.quiet) {
      const decided = this.#decide(session.records.tasks.get(this.taskId), after);
      if (decided.kind === "run") return decided.task;
      if (decided.kind === "stop") return undefined;
    }
    try {
      const decided = await session.commit((tx, overlay) => {
        const d = this.#decide(overlay.task(this.taskId), after, (c) => overlay.away(c));
        if (d.kind === "fault") this.scheduler.writeFault(tx, overlay, this.taskId, d.error);
        else if (d.kind === "handover") {
          const t = overlay.task(this.taskId) as RunningTask;
          overlay.setTask(patchTask(t, { state: { status: "pending", checkpoint: t.state.checkpoint } }));
        }
        return d;
      });
      return decided.kind === "run" ? decided.task : undefined;
    } catch (error) {
      // The step's write was refused: the invocation ends, the task stays running, and the next
      // reservation runs it again.
      if (!this.scheduler.closing) this.scheduler.report(error);
      return undefined;
    }
  }

  /** Rules 1-3 before the first phase; after a phase, rules 1-6 (an abort handler: 1, 2 and 4). */
  #decide(
    t: TaskRecord | undefined,
    after: After | undefined,
    away: (c: number) => unknown = (c) => this.scheduler.session.records.away.get(c),
  ): Step {
    if (!isRunning(t)) return STOP;
    // Its conversation moved away (step 1 of a move): it stops here, its stored state untouched.
    if (away(t.conversationId)) return STOP;
    if (this.mode === "abort") {
      // Rule 2 from the moment close began, its grace included, as for a run invocation below.
      if (this.scheduler.stopping) return STOP;
      if (!after) return { kind: "run", task: t };
      // A thrown value is the handler's failure whatever it is (undefined and null too: rule 4).
      const error = after.failure
        ? after.failure.error
        : new Error(`abort handler of ${t.kind} returned without a terminal outcome`);
      return { kind: "fault", error };
    }
    if (this.scheduler.stopping) return STOP;
    if (t.abortRequested) return STOP; // the scheduler starts the abort invocation once owned work drained
    if (!after) return { kind: "run", task: t };
    if (after.failure) return { kind: "fault", error: after.failure.error };
    // Any checkpoint commit (same phase included) replaces the state object; memos keep it.
    if (t.state === after.state) {
      const phase = (after.state as { checkpoint: Checkpoint }).checkpoint.phase;
      return {
        kind: "fault",
        error: new Error(`phase ${phase} returned without committing a new checkpoint`),
      };
    }
    const replacement = this.scheduler.registry.get(t.kind);
    if (!replacement && !this.#missingReported) {
      // Missing is reported like a definition that cannot reserve (spec §5.4); the task runs on.
      this.#missingReported = true;
      this.scheduler.report(
        new Error(
          `${t.kind} is no longer registered: task ${t.id} runs on under the definition it started with`,
        ),
      );
    }
    if (replacement && replacement !== this.definition) {
      // Hand over only to a definition that can reserve the task (spec §5.4): the same version, or a
      // higher one with `migrate`. Otherwise run on under this one, report it once per definition,
      // and look again at the next boundary.
      const canReserve =
        replacement.version === t.version ||
        (replacement.version > t.version && replacement.migrate !== undefined);
      if (canReserve) return { kind: "handover" };
      this.#unfitReported ??= new WeakSet();
      if (!this.#unfitReported.has(replacement)) {
        this.#unfitReported.add(replacement);
        this.scheduler.report(
          new Error(
            `${t.kind} version ${replacement.version} cannot take over task ${t.id} of version ${t.version} (${
              replacement.version < t.version ? "an older version" : "no migrate"
            }); it runs on under the definition it started with`,
          ),
        );
      }
    }
    return { kind: "run", task: t };
  }

  async #runPhases(): Promise<void> {
    let after: After | undefined;
    for (;;) {
      const task = await this.#step(after);
      // Closing may have begun while the step was on the line: rule 2 again, right before the call.
      if (!task || this.scheduler.stopping) return;
      if (after) this.#resumed = false;
      const phase = (task.state.checkpoint as Checkpoint).phase;
      // The definition's own phases only: a name Object.prototype has ("toString") is no phase.
      const phases = this.definition.phases as Record<string, unknown>;
      const handler = (Object.hasOwn(phases, phase) ? phases[phase] : undefined) as
        | ((t: TaskRecord, r: TaskRuntime, s: AbortSignal) => Promise<void>)
        | undefined;
      if (typeof handler !== "function") {
        after = {
          state: task.state,
          failure: { error: new Error(`${task.kind} has no handler for phase ${phase}`) },
        };
        continue;
      }
      after = { state: task.state };
      this.#startPhase();
      try {
        // A handler declaring one or two parameters cannot see the argument: skip making it. One
        // of length 0 may forward a rest parameter (`(...args) => inner(...args)`): it gets it.
        await handler(task, this.runtime, seesSignal(handler) ? this.signal : (undefined as never));
      } catch (error) {
        after.failure = { error };
      }
    }
  }

  async #runAbort(): Promise<void> {
    const task = await this.#step();
    if (!task || this.scheduler.closing) return;
    const after: After = { state: task.state };
    this.#startPhase();
    try {
      const abort = this.definition.abort;
      await abort(task, this.runtime, seesSignal(abort) ? this.signal : (undefined as never));
    } catch (error) {
      after.failure = { error };
    }
    await this.#step(after);
  }
}

/**
 * Whether a handler may read its third argument: it declares three parameters or more, or none (a
 * rest parameter has length 0). A third parameter with a default is not counted by `length`; such a
 * handler reads `runtime.signal` instead.
 */
const seesSignal = (handler: { readonly length: number }): boolean =>
  handler.length >= 3 || handler.length === 0;

/** What the phase (or abort handler) that just returned left for the step to judge. */
interface After {
  /** The committed state the phase started on. */
  readonly state: TaskRecord["state"];
  failure?: { error: unknown };
}

type Step =
  | { kind: "run"; task: RunningTask }
  | { kind: "stop" }
  | { kind: "fault"; error: unknown }
  | { kind: "handover" };

const STOP: Step = { kind: "stop" };

type HookInvoke = Parameters<HookRunner["each"]>[1];

const isRunning = (t: TaskRecord | undefined): t is RunningTask => t?.state.status === "running";

class Runtime implements TaskRuntime {
  readonly taskId: TaskId;
  #conversationId: number | undefined;

  constructor(readonly invocation: Invocation) {
    this.taskId = invocation.taskId;
  }

  /** Read once the task is published (an invocation is made in the commit that reserves it). */
  get conversationId(): number {
    this.#conversationId ??= this.invocation.scheduler.session.records.tasks.get(this.taskId)?.conversationId;
    return this.#conversationId ?? 1;
  }

  get signal(): AbortSignal {
    return this.invocation.signal;
  }

  get aborted(): boolean {
    return this.invocation.aborted;
  }

  get resumed(): boolean {
    return this.invocation.resumed;
  }

  /** The hook handlers of the current phase, resolved at its first dispatch. */
  #phaseHooks: { phase: number; handlers: readonly object[] } | undefined;
  #hookApi: unknown;
  #hookRunner: HookRunner | undefined;

  get hooks(): HookRunner {
    this.#hookRunner ??= Object.freeze({
      each: (name: string, invoke: HookInvoke) => this.#each(name, invoke),
    });
    return this.#hookRunner;
  }

  /** Spec §7.2 `runtime.hooks.each`: every handler under `name`, in order; a throw reported, unless signalled. */
  async #each(name: string, invoke: HookInvoke): Promise<void> {
    this.#check();
    const inv = this.invocation;
    const source = inv.scheduler.taskHooks;
    if (!source) return;
    if (this.#phaseHooks?.phase !== inv.phase) {
      const task = inv.scheduler.session.records.tasks.get(this.taskId);
      this.#phaseHooks = { phase: inv.phase, handlers: task ? source.handlers(task, inv.phaseSnapshot) : [] };
    }
    const api = (this.#hookApi ??= source.api(this));
    for (const set of this.#phaseHooks.handlers) {
      // The set's own handlers only: a name every object inherits (toString) is none.
      const handler = Object.hasOwn(set, name) ? (set as Record<string, unknown>)[name] : undefined;
      if (typeof handler !== "function") continue;
      try {
        await invoke(handler as (...args: unknown[]) => unknown, api);
      } catch (error) {
        if (this.signal.aborted) throw error;
        this.report(error);
      }
    }
  }

  #check(signal?: AbortSignal): void {
    if (this.invocation.ended)
      throw new CommitRefused("invocation_ended", `the invocation of task ${this.taskId} has ended`);
    if (signal?.aborted) throw new WaitCancelled();
  }

  /** Admission gate, on the line, before the callback runs. */
  #gate(current: TaskRecord | undefined, overlay: Overlay): asserts current is RunningTask {
    const inv = this.invocation;
    if (inv.ended)
      throw new CommitRefused("invocation_ended", `the invocation of task ${this.taskId} has ended`);
    if (inv.scheduler.closing) throw new CommitRefused("closing", "the harness is closing");
    if (current?.state.status !== "running") {
      throw new CommitRefused("not_running", `task ${this.taskId} is ${current?.state.status ?? "missing"}`);
    }
    if (overlay.away(current.conversationId))
      throw new CommitRefused("moved", `task ${this.taskId}'s conversation has moved to another home`);
    if (inv.mode === "run" && current.abortRequested) {
      throw new CommitRefused(
        "abort_requested",
        `task ${this.taskId} has an abort mark; its run invocation may not commit`,
      );
    }
  }

  async commit(
    change: (tx: Tx, current: RunningTask) => NextTaskState | undefined | Promise<NextTaskState | undefined>,
    signal?: AbortSignal,
  ): Promise<TaskRecord> {
    this.#check(signal);
    const session = this.invocation.scheduler.session;
    return session.commit(
      (tx, overlay) => {
        const current = overlay.task(this.taskId);
        this.#gate(current, overlay);
        const apply = (next: NextTaskState | undefined): TaskRecord => {
          if (next === undefined) return overlay.task(this.taskId)!;
          return applyNextState(overlay, current, next, this.invocation.mode, session.now()).record;
        };
        const next = change(tx, current);
        return isPromiseLike(next) ? Promise.resolve(next).then(apply) : apply(next);
      },
      { byTaskId: this.taskId },
    );
  }

  async memo<T extends Json>(
    name: string,
    candidate?: T | ((tx: Tx) => T),
    signal?: AbortSignal,
  ): Promise<T | undefined> {
    this.#check(signal);
    const session = this.invocation.scheduler.session;
    // A memo is the record's own property: a name an object inherits (toString) has no winner.
    if (candidate === undefined)
      return ownMemo(session.records.tasks.get(this.taskId), name) as T | undefined;
    return session.commit(
      (tx, overlay) => {
        const current = overlay.task(this.taskId);
        this.#gate(current, overlay);
        const existing = ownMemo(current, name);
        if (existing !== undefined) return existing as T;
        // A factory runs only when there is no winner yet, in the same commit that records it.
        const value = typeof candidate === "function" ? candidate(tx) : candidate;
        const latest = overlay.task(this.taskId)!;
        overlay.setTask(patchTask(latest, { memos: sealBuilt({ ...latest.memos, [name]: value }) }));
        return value;
      },
      { byTaskId: this.taskId },
    );
  }

  async outcomes(ids: readonly TaskId[], signal?: AbortSignal): Promise<TaskOutcome[]> {
    this.#check(signal);
    const out: TaskOutcome[] = [];
    for (const id of ids) {
      const t = await this.invocation.scheduler.session.task(id);
      if (t?.state.status !== "terminal") {
        throw new InvalidTransition(`task ${id} is ${t?.state.status ?? "missing"}, not terminal`);
      }
      out.push(t.state.outcome);
    }
    return out;
  }

  async getTask(id: TaskId, signal?: AbortSignal): Promise<TaskRecord | undefined> {
    this.#check(signal);
    return this.invocation.scheduler.session.task(id);
  }

  waitForTask(id: TaskId, signal?: AbortSignal): Promise<TaskRecord> {
    try {
      this.#check(signal);
    } catch (error) {
      return Promise.reject(error);
    }
    const signals = signal ? AbortSignal.any([signal, this.signal]) : this.signal;
    return this.invocation.scheduler.waitForTerminal(id, signals).catch((error: unknown) => {
      // A wait the invocation's end cut (a leftover nobody awaited): it rejects with the reason the
      // invocation ended for (invocation_ended, or the abort), as every operation after it does.
      if (this.invocation.ended && !signal?.aborted) throw this.signal.reason;
      throw error;
    });
  }

  /** The harness clock; throws once the invocation ended, as every runtime operation (spec §5.4). */
  now(): number {
    this.#check();
    return this.invocation.scheduler.session.now();
  }

  /** To the host's `onReport`; throws once the invocation ended, as every runtime operation (spec §5.4). */
  report(error: unknown): void {
    this.#check();
    this.invocation.scheduler.report(error);
  }
}

function ownMemo(task: TaskRecord | undefined, name: string): Json | undefined {
  const memos = task?.memos;
  return memos !== undefined && Object.hasOwn(memos, name) ? memos[name] : undefined;
}
