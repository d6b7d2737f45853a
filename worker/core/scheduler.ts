/**
 * The scheduler: a dirty-flag drain that, in one commit, derives abort marks, releases completing
 * holds, faults unreadable records, orphans abort-marked tasks nobody can run, and reserves every
 * eligible task (pending -> running) before any handler starts. Handlers then run off the line.
 * A waiting task with a durable timer (`until`, timers.ts) is eligible once its due time is reached;
 * after each drain the scheduler arms its one in-process alarm for the earliest timer not due yet.
 * Invariants:
 * - a task has at most one invocation; invocations are registered inside the reserving commit, so
 *   a second drain can never start the same task twice;
 * - a drain that would change nothing commits nothing: it plans once, in a draft of its commit over
 *   the line (`Session.draft`), and requests that commit only when the plan writes; the commit takes
 *   the draft as planned unless another commit was applied to the line in between (then the plan is
 *   made again inside it), so the plan is never made twice in the common case;
 * - a missing or incompatible definition never terminalizes a task: it stays blocked and visible in
 *   `inspect()`, and only an abort orphans it.
 */
import type { AnyTaskDefinition, Registry, TaskHookSource, Tx } from "./define.ts";
import { errorMessage, HarnessClosed, UnknownTask, WaitCancelled } from "./errors.ts";
import { deriveMarks, finish, hasCancellationIntent, outcomeOf } from "./ownership.ts";
import { assertJson, sealBuilt } from "./persist.ts";
import { type Overlay, patchTask } from "./records.ts";
import { Invocation, type InvocationMode } from "./runtime.ts";
import type { Draft, Session } from "./session.ts";
import { PROCESS_TIMERS, TimerAlarm, type TimerPort } from "./timers.ts";
import { applyNextState } from "./transition.ts";
import { TxImpl } from "./tx.ts";
import type {
  BlockedReason,
  Checkpoint,
  ConversationId,
  Json,
  NextTaskState,
  RunningTask,
  TaskId,
  TaskRecord,
} from "./types.ts";

export interface Blocked {
  readonly id: TaskId;
  readonly kind: string;
  readonly reason: BlockedReason;
  readonly detail: string;
}

type Resolution =
  | { ok: true; definition: AnyTaskDefinition; migrated?: { input: Json; checkpoint: Json } }
  | { ok: false; reason: BlockedReason; detail: string };

/** Thrown by a reserving commit that reached the line after close began: nothing to report. */
const SEALED = new Error("task reservation is sealed: the harness is closing");

/**
 * What one drain decided. Its writes are already in the overlay (and, for a committing pass, in the
 * transaction); the in-memory effects are listed here and carried out by `#carryOut`.
 */
interface Plan {
  writes: boolean;
  /** Tasks to start; their invocations are made only when the plan is carried out (a plan that writes nothing starts them without a commit). */
  starts: Start[];
  /** The invocations of `starts`, made by `#carryOut` (or by the drain when the plan starts them without a write). */
  invocations: Invocation[];
  marked: TaskId[];
  /** Unreadable records handled by this pass, with their diagnostics. */
  corrupt: Array<{ id: TaskId; message: string }>;
  /** Tasks whose definition now resolves (or that were orphaned): no longer blocked. */
  unblocked: TaskId[];
  /**
   * Recovered running tasks found blocked: shown blocked once the commit that writes them pending
   * has landed (never as blocked while their stored row still says running).
   */
  blockedOnceStored: Blocked[];
  /** The earliest due time of a timer that is not due yet (its wait otherwise satisfied). */
  nextDue?: number;
  /** Tasks a wake continuation moved on: the phase they were interrupted in is over. */
  woken: TaskId[];
}

/** A task a plan starts: its invocation is made once the plan is carried out. */
interface Start {
  readonly taskId: TaskId;
  readonly mode: InvocationMode;
  readonly definition: AnyTaskDefinition;
}

export class Scheduler {
  readonly active = new Map<TaskId, Invocation>();
  readonly blocked = new Map<TaskId, Blocked>();
  /** Faults the scheduler wrote for unreadable records, with their diagnostics. */
  readonly diagnostics: Array<{ id: TaskId; message: string }> = [];
  #dirty = false;
  #draining = false;
  #closing = false;
  /** Tasks whose wake continuation threw at their current checkpoint; the waking task meanwhile. */
  #noWake = new Set<TaskId>();
  #waking: TaskId | undefined;
  /**
   * Tasks a plan passed over because an invocation of theirs was still active when they were marked
   * for abort or their wait was satisfied: when that invocation ends, a drain must look at them
   * again. Any other task whose invocation ends waiting or terminal leaves a drain nothing to do
   * (the tasks an invocation ends with a fresh drain for are the others: running, pending): the
   * commit that made its state was merged, and every merge but a running task's step wakes a drain,
   * which either plans after the invocation ended (and sees it inactive) or saw the task as it ended.
   */
  #passedOver = new Set<TaskId>();
  /** Migration failures reported once per (task, definition object). */
  /** A failed migration per task: the definition it failed with, and its error (reported once). */
  #migrationReported = new Map<TaskId, { definition: AnyTaskDefinition; error: string }>();

  /** Where tasks' hooks come from (see HarnessOptions.taskHooks). */
  taskHooks: TaskHookSource | undefined;

  /** The durable timers' in-process alarm (timers.ts), set after each drain. */
  readonly alarm: TimerAlarm;

  #waiters = new Map<TaskId, Set<{ resolve: (r: TaskRecord) => void; reject: (e: unknown) => void }>>();
  /**
   * Runs in each reconcile commit while a live task with cancellation intent owns conversations, with
   * those conversations (spec §5.4: each is treated like Conversation.abort()). Writes only through
   * `tx`; returns true when it wrote.
   */
  onCascade: ((tx: Tx, conversations: ReadonlySet<ConversationId>) => boolean | undefined) | undefined;

  constructor(
    readonly session: Session,
    readonly registry: Registry,
    readonly report: (error: unknown) => void,
    timers: { port?: TimerPort; onChange?: (at: number | undefined) => void } = {},
  ) {
    this.alarm = new TimerAlarm(
      timers.port ?? PROCESS_TIMERS,
      () => session.now(),
      () => this.kick(),
      timers.onChange,
    );
    session.subscribe((change) => {
      for (const t of change.tasks) {
        if (t.state.status !== "terminal") continue;
        const waiters = this.#waiters.get(t.id);
        if (!waiters) continue;
        this.#waiters.delete(t.id);
        for (const w of waiters) w.resolve(t);
      }
    });
  }

  /** Resolve with the task's terminal record; `signal` cancels only this wait. */
  waitForTerminal(id: TaskId, signal?: AbortSignal): Promise<TaskRecord> {
    return new Promise<TaskRecord>((resolve, reject) => {
      if (signal?.aborted) return reject(new WaitCancelled());
      if (this.closing) return reject(new HarnessClosed());
      const known = this.session.records.tasks.get(id);
      if (known?.state.status === "terminal") return resolve(known);
      let set = this.#waiters.get(id);
      if (!set) this.#waiters.set(id, (set = new Set()));
      const waiter = {
        resolve: (r: TaskRecord) => {
          signal?.removeEventListener("abort", onAbort);
          resolve(r);
        },
        reject: (e: unknown) => {
          signal?.removeEventListener("abort", onAbort);
          reject(e);
        },
      };
      const onAbort = () => {
        set.delete(waiter);
        reject(new WaitCancelled());
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      set.add(waiter);
      if (!known) {
        this.session.task(id).then(
          (t) => {
            if (!t) waiter.reject(new UnknownTask(id));
            else if (t.state.status === "terminal") waiter.resolve(t);
          },
          (e) => waiter.reject(e),
        );
      }
    });
  }

  /** Reject every pending wait (close, fatal store). */
  rejectWaiters(error: Error): void {
    const all = [...this.#waiters.values()];
    this.#waiters.clear();
    for (const set of all) for (const w of set) w.reject(error);
  }

  get closing(): boolean {
    return this.#closing || this.session.fatal !== undefined;
  }

  #quiescing = false;

  /** No new reservations and no next phase, but running phases may still commit (a handover). */
  get stopping(): boolean {
    return this.#quiescing || this.closing;
  }

  /**
   * Stop reserving and let running phases reach their next boundary, for at most `graceMs`; then
   * close (signalling whatever still runs). Nothing is lost: stopped tasks stay running in storage
   * and the next engine returns them to pending.
   */
  async quiesce(graceMs: number): Promise<void> {
    this.#quiescing = true;
    this.alarm.clear();
    const running = [...this.active.values()].filter((i) => i.launched);
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      Promise.all(running.map((i) => i.done)),
      new Promise<void>((r) => {
        timer = setTimeout(r, graceMs);
      }),
    ]);
    clearTimeout(timer);
  }

  /**
   * Tasks the open found running (`recover`), settled by the next drain that runs: started again
   * without a write when it can start them at once, else written back to pending, interrupted.
   */
  #recovering = new Set<TaskId>();

  /**
   * Recovery at open, folded into the first drain (docs/ARCHITECTURE.md, "The recovery path"). A
   * running task the drain starts again at once keeps its stored row: running at its last checkpoint
   * is exactly what a reservation would write, and a crash before its next commit leaves it running,
   * to be recovered again. Every other one (blocked, abort-marked with live owned work, in a
   * conversation that is away) is written pending and interrupted in the drain's commit, as a
   * paused open does at once, so nothing shows running that no invocation runs.
   */
  recover(ids: readonly TaskId[]): Promise<void> {
    for (const id of ids) this.#recovering.add(id);
    const settled = new Promise<void>((resolve) => this.#recoveredWaiters.push(resolve));
    this.kick();
    return settled;
  }

  /**
   * A paused open's reconciliation (spec §2.2: open re-evaluates finalization and failFast for
   * completing and waiting tasks): the marks a crash left underived and the holds whose owned work
   * drained before it, committed at once, so `inspect()` shows them before `resume()`. Nothing is
   * reserved or started; the abort invocations the marks call for run once scheduling resumes.
   */
  async reconcileAtOpen(): Promise<void> {
    const reconcile = (tx: Tx, overlay: Overlay) => {
      const live = [...this.session.line.live].filter((id) => {
        const t = overlay.task(id);
        return !t || overlay.away(t.conversationId) === undefined;
      });
      return this.#reconcile(overlay, tx, live, this.session.now());
    };
    // Decided in a draft first: an open with nothing to reconcile (the usual one) commits nothing.
    // A draft that needed what memory lacks (documents a cascade touches) is decided by the commit.
    const draft = this.session.draft();
    let decided: boolean;
    try {
      decided = reconcile(draft.tx, draft.overlay).writes;
    } catch {
      await this.session.commit((tx, overlay) => void reconcile(tx, overlay));
      return;
    }
    if (!decided) return;
    await this.session.commit(
      (tx, overlay) => {
        if (overlay !== draft.overlay) reconcile(tx, overlay);
      },
      {},
      draft,
    );
  }

  /** Resolved once the drain that settles the recovering tasks is done with them (or closing). */
  #recoveredWaiters: Array<() => void> = [];

  #recovered(): void {
    for (const resolve of this.#recoveredWaiters.splice(0)) resolve();
  }

  #paused = false;

  /** Paused: nothing is reserved or started until `resume()` (a paused open, spec §2.2). */
  get paused(): boolean {
    return this.#paused;
  }

  pause(): void {
    this.#paused = true;
  }

  resume(): void {
    if (!this.#paused) return;
    this.#paused = false;
    this.kick();
  }

  kick(): void {
    this.#dirty = true;
    if (this.#draining || this.stopping || this.#paused) return;
    this.#draining = true;
    queueMicrotask(() => void this.#drain());
  }

  async #drain(): Promise<void> {
    let nextDue: number | undefined;
    let planned = false;
    try {
      while (this.#dirty && !this.stopping && !this.#paused) {
        this.#dirty = false;
        // Planned once, in a draft of the commit that carries it out: the commit takes the draft
        // (and this plan) as it is unless another commit was applied to the line in between.
        const draft = this.session.draft();
        const ahead = this.#planAhead(draft);
        planned = true;
        if (ahead !== undefined) {
          nextDue = ahead.nextDue;
          if (!ahead.writes && ahead.starts.length === 0) {
            this.#recovering.clear();
            this.#recovered();
            continue;
          }
          if (!ahead.writes) {
            // Only tasks that are already running (created reserved) start: there is nothing to write,
            // but the commit that made them may still be in flight, so they launch once it committed.
            this.#recovering.clear();
            const invocations = ahead.starts.map((s) => this.#invocation(s));
            for (const invocation of invocations) this.#register(invocation);
            this.#recovered();
            await this.session.barrier();
            for (const invocation of invocations) invocation.launch();
            continue;
          }
        }
        // Carried out inside the reserving commit: a second drain can never start the same task.
        const plan = await this.session.commit(
          (tx, overlay) => {
            // Closing seals task reservation (spec §4): a reserving commit that reaches the line after
            // the seal (queued behind a commit that held it) reserves and writes nothing.
            if (this.stopping) throw SEALED;
            const decided =
              ahead !== undefined && overlay === draft.overlay ? ahead : this.#plan(overlay, tx);
            this.#carryOut(decided);
            overlay.settled = this.#settled(decided, overlay);
            return decided;
          },
          {},
          ahead === undefined ? undefined : draft,
        );
        for (const b of plan.blockedOnceStored) this.blocked.set(b.id, b);
        nextDue = plan.nextDue;
        this.#recovered();
        for (const id of plan.marked) this.active.get(id)?.signalAbort();
        for (const invocation of plan.invocations) invocation.launch();
      }
    } catch (error) {
      // A wake continuation threw: that checkpoint's handler runs instead (next pass).
      if (this.#waking !== undefined) {
        this.#noWake.add(this.#waking);
        this.#waking = undefined;
        this.#dirty = true;
      }
      // The reserving commit failed: the invocations it registered never start.
      for (const [id, invocation] of this.active) {
        if (!invocation.launched) {
          this.active.delete(id);
          invocation.abandon();
        }
      }
      if (!this.closing && error !== SEALED) this.report(error);
      if (this.#recovering.size === 0) this.#recovered();
    } finally {
      this.#draining = false;
      if (this.stopping) this.alarm.clear();
      else if (planned && !this.#dirty) this.alarm.arm(nextDue);
      if (this.#dirty && !this.stopping && !this.#paused) this.kick();
    }
  }

  /**
   * Plan in a draft, ahead of any commit: undefined when the plan needed documents or a fork point
   * not in memory (a wake continuation touched them), so that only a commit can decide it (it loads
   * them and runs the callback again). A plan that writes nothing leaves the draft untouched.
   */
  #planAhead(draft: Draft): Plan | undefined {
    const overlay = draft.overlay;
    const needsLoad = () =>
      overlay.missingDocs !== undefined ||
      overlay.missingFork !== undefined ||
      overlay.missingScope !== undefined ||
      overlay.missingRequest !== undefined ||
      overlay.missingTask !== undefined;
    let plan: Plan;
    try {
      plan = this.#plan(overlay, draft.tx);
    } catch (error) {
      if (!needsLoad()) throw error;
      this.#waking = undefined;
      return undefined;
    }
    return needsLoad() ? undefined : plan;
  }

  /**
   * Decide everything one drain does, writing into `overlay` (the outcome hooks and wake
   * continuations write through `tx`). It changes no scheduler state but `blocked` entries;
   * `#carryOut` does the rest, inside the commit that writes the plan, so a plan made ahead and
   * dropped (the line moved: it is made again in the commit) leaves nothing behind.
   */
  #plan(overlay: Overlay, tx: Tx): Plan {
    const records = this.session.line;
    const now = this.session.now();
    const plan: Plan = {
      writes: false,
      starts: [],
      invocations: [],
      marked: [],
      corrupt: [],
      unblocked: [],
      blockedOnceStored: [],
      woken: [],
    };
    // The tasks of a conversation that is away (moving or moved: move.ts) never run here, and the
    // scheduler writes nothing of theirs: they are left exactly as step 1 of the move found them.
    const here = (id: TaskId) => {
      const t = overlay.task(id);
      return !t || overlay.away(t.conversationId) === undefined;
    };
    const live: TaskId[] =
      records.away.size === 0 && overlay.moves.size === 0
        ? [...records.live]
        : [...records.live].filter(here);

    // Unreadable rows fault their own task, with the diagnostic.
    for (const [id, diagnostic] of records.corrupt) {
      if (!here(id)) continue;
      const t = overlay.task(id);
      plan.corrupt.push({ id, message: diagnostic });
      if (t && t.state.status !== "terminal" && t.state.status !== "completing") {
        const done = finish(overlay, t, { status: "faulted", error: { message: diagnostic } }, now);
        this.#cleanUp(tx, done);
        plan.writes = true;
      }
    }

    const reconciled = this.#reconcile(overlay, tx, live, now);
    if (reconciled.writes) plan.writes = true;
    plan.marked = reconciled.marked;

    // Tasks a wake continuation creates join the queue, so they are reserved in this same pass
    // (`live` is this plan's own copy, read before the loop only: the queue extends it).
    const queue = live;
    for (let k = 0; k < queue.length; k++) {
      const id = queue[k]!;
      const t = overlay.task(id)!;
      const status = t.state.status;
      if (status === "terminal" || status === "completing") continue;
      if (this.active.has(id)) {
        // Marked for abort, or a wait satisfied, while the invocation that began it still runs:
        // looked at again when that invocation ends (see `ended`).
        if (t.abortRequested || (status === "waiting" && t.state.on.every((w) => overlay.isTerminal(w))))
          this.#passedOver.add(id);
        continue;
      }
      let mode: InvocationMode;
      if (t.abortRequested) {
        if (overlay.hasLiveOwnedWork(id)) continue;
        mode = "abort";
      } else if (status === "waiting") {
        const s = t.state as Extract<TaskRecord["state"], { status: "waiting" }>;
        if (!s.on.every((w) => overlay.isTerminal(w))) continue;
        // A durable timer not due yet (timers.ts): the alarm is armed for the earliest one.
        if (s.until !== undefined && s.until > now) {
          if (plan.nextDue === undefined || s.until < plan.nextDue) plan.nextDue = s.until;
          continue;
        }
        mode = "run";
      } else {
        mode = "run";
      }
      const resolution = this.#resolve(t);
      if (!resolution.ok) {
        if (mode === "abort") {
          const done = finish(overlay, t, { status: "orphaned", reason: resolution.reason }, now);
          this.#cleanUp(tx, done);
          plan.writes = true;
          plan.unblocked.push(id);
        } else {
          // In memory only, so a plan that writes nothing records it too: its drain still shows it.
          const entry = { id, kind: t.kind, reason: resolution.reason, detail: resolution.detail };
          if (status === "running" && this.#recovering.has(id)) plan.blockedOnceStored.push(entry);
          else this.blocked.set(id, entry);
        }
        continue;
      }
      plan.unblocked.push(id);
      if (
        status === "running" &&
        !resolution.migrated &&
        resolution.definition.version === t.version &&
        t.startedAt !== undefined
      ) {
        // Already reserved (created so, or left running by an invocation that stopped early): start
        // it without a write. A running record with no startedAt (written before lifecycle times)
        // takes the reservation's write below, which stamps it (spec §5.3).
        plan.starts.push({ taskId: id, mode, definition: resolution.definition });
        continue;
      }
      const checkpoint = resolution.migrated?.checkpoint ?? (t.state as { checkpoint: Json }).checkpoint;
      const reserved = patchTask(t, {
        version: resolution.definition.version,
        input: resolution.migrated ? resolution.migrated.input : t.input,
        state: sealBuilt({ status: "running", checkpoint: checkpoint as { phase: string } }),
        startedAt: t.startedAt ?? now,
      });
      if (resolution.migrated) overlay.markMigrated(id);
      overlay.setTask(reserved);
      plan.writes = true;
      if (mode === "run" && status === "waiting" && !resolution.migrated) {
        const created = this.#wake(overlay, reserved as RunningTask, resolution.definition, now);
        if (created) {
          plan.woken.push(id);
          queue.push(...created);
          continue;
        }
      }
      plan.starts.push({ taskId: id, mode, definition: resolution.definition });
    }
    if (this.#recovering.size > 0) {
      const starting = new Set(plan.starts.map((i) => i.taskId));
      for (const id of this.#recovering) {
        const t = overlay.task(id);
        if (t?.state.status !== "running" || starting.has(id) || this.active.has(id)) continue;
        overlay.setTask(
          patchTask(t, { state: { status: "pending", checkpoint: t.state.checkpoint, interrupted: true } }),
        );
        plan.writes = true;
      }
    }
    return plan;
  }

  /**
   * The reconciliation every plan starts with (spec §5.5), written into `overlay`: the abort marks
   * to derive (the cascade below cancelled owners, failFast siblings, and the conversations a cascade
   * reaches), and the completing holds whose ordinary owned work drained, released. It starts
   * nothing. A paused open commits it alone (`reconcileAtOpen`).
   */
  #reconcile(
    overlay: Overlay,
    tx: Tx,
    live: readonly TaskId[],
    now: number,
  ): { writes: boolean; marked: TaskId[] } {
    let writes = false;
    const marked = deriveMarks(overlay, live);
    if (marked.length > 0) writes = true;
    if (this.onCascade) {
      // The conversations the cascade reaches (spec §5.4): every conversation a live task with
      // cancellation intent owns, also one with no live work in it (its queue left by a failed run),
      // never the cancelled task's own nor one moved away. The marks just derived count, so it
      // reaches down the tree.
      const reached = new Set<ConversationId>();
      for (const id of live) {
        if (!hasCancellationIntent(overlay.task(id))) continue;
        for (const c of overlay.ownedConversations(id)) if (overlay.away(c) === undefined) reached.add(c);
      }
      if (reached.size > 0 && this.onCascade(tx, reached) === true) writes = true;
    }

    // Release completing holds, newest first so a drained child lets its owner finish in the same pass.
    for (let i = live.length - 1; i >= 0; i--) {
      const t = overlay.task(live[i]!)!;
      if (t.state.status === "completing" && !overlay.hasLiveOwnedWork(t.id)) {
        const released = patchTask(t, {
          state: sealBuilt({ status: "terminal", outcome: t.state.outcome }),
          endedAt: now,
        });
        overlay.setTask(released);
        // A held fault gets its cleanup now, in the commit that makes it terminal (spec §5.4).
        if (t.state.outcome.status === "faulted" || t.state.outcome.status === "orphaned")
          this.#cleanUp(tx, released);
        writes = true;
      }
    }

    return { writes, marked };
  }

  /**
   * Whether a plan made in `overlay` leaves nothing for the next one, so that merging it need not
   * wake a drain (the plan after the drain's own commit found nothing, once per tool round). A plan
   * decides every task it looked at; what it cannot have looked at is what its own writes made
   * eligible after it passed: a task a wake continuation (or a released hold) ended may satisfy a
   * wait, release its owner's hold or let its owner's abort run, and a failed one cascades. So only
   * the plainest plan counts: no marks, no corrupt rows, no conversation written, and every task it
   * wrote either started by it, or ended `completed` with no task waiting on it and an owner (its
   * owner task, else the task owning its conversation) that neither holds an outcome nor is marked.
   * Anything else wakes a drain, as every merge did.
   */
  #settled(plan: Plan, overlay: Overlay): boolean {
    if (plan.marked.length > 0 || plan.corrupt.length > 0 || overlay.conversations.size > 0) return false;
    if (overlay.deleted.size > 0 || overlay.moves.size > 0) return false;
    const ended: TaskId[] = [];
    for (const t of overlay.tasks.values()) {
      const s = t.state;
      if (s.status === "running" && plan.starts.some((start) => start.taskId === t.id)) continue;
      if (s.status !== "terminal" || s.outcome.status !== "completed" || t.abortRequested) return false;
      // Its owner, or the task owning its conversation (a subagent's): its work may have drained.
      const ownerId = t.owner ?? overlay.conversation(t.conversationId)?.owner?.taskId;
      if (ownerId !== undefined) {
        const owner = overlay.task(ownerId);
        if (owner && (owner.abortRequested || owner.state.status === "completing")) return false;
      }
      ended.push(t.id);
    }
    if (ended.length === 0) return true;
    for (const id of this.session.line.live) {
      const s = overlay.task(id)?.state;
      if (s?.status === "waiting" && ended.some((e) => s.on.includes(e))) return false;
    }
    return true;
  }

  /** The in-memory effects of a plan whose writes are being committed. */
  #carryOut(plan: Plan): void {
    this.#recovering.clear();
    for (const { id, message } of plan.corrupt) {
      this.session.records.corrupt.delete(id);
      this.diagnostics.push({ id, message });
    }
    for (const id of plan.unblocked) this.blocked.delete(id);
    for (const id of plan.woken) this.session.records.interrupted.delete(id);
    for (const start of plan.starts) {
      const invocation = this.#invocation(start);
      plan.invocations.push(invocation);
      this.#register(invocation);
    }
  }

  #invocation(start: Start): Invocation {
    return new Invocation(this, start.taskId, start.mode, start.definition);
  }

  /**
   * The definition's cleanup, in the commit where a faulted or orphaned outcome becomes terminal:
   * the one that writes it, or, when live owned work holds it `completing`, the final commit.
   */
  #cleanUp(tx: Tx, task: TaskRecord): void {
    if (task.state.status !== "terminal") return;
    this.registry.get(task.kind)?.cleanUp?.(tx, task);
  }

  #register(invocation: Invocation): void {
    const id = invocation.taskId;
    this.active.set(id, invocation);
    this.blocked.delete(id);
    // Started again: a later invocation of this checkpoint is not the interrupted one.
    this.session.records.interrupted.delete(id);
    this.#noWake.delete(id);
  }

  /**
   * Run the definition's wake continuation for a task whose wait was just satisfied, in the plan's
   * own commit. Returns the ids of tasks it created, or undefined when the phase's handler must run.
   */
  #wake(
    overlay: Overlay,
    task: RunningTask,
    definition: AnyTaskDefinition,
    now: number,
  ): TaskId[] | undefined {
    // The definition's own continuations only: a name Object.prototype has ("toString") is none.
    const phase = (task.state.checkpoint as Checkpoint).phase;
    const wakes = definition.wake as Record<string, unknown> | undefined;
    const wake = (wakes && Object.hasOwn(wakes, phase) ? wakes[phase] : undefined) as
      | ((tx: Tx, task: RunningTask) => NextTaskState | undefined)
      | undefined;
    if (!wake || this.#noWake.has(task.id)) return undefined;
    const before = overlay.created.size;
    this.#waking = task.id;
    const next = wake(new TxImpl(this.session, overlay, { byTaskId: task.id }), task);
    // A state the wake returns and the task may not take (pending, completing) is the wake's throw too.
    if (next !== undefined) applyNextState(overlay, task, next, "run", now);
    this.#waking = undefined;
    if (next === undefined) return undefined;
    return [...overlay.created].slice(before);
  }

  /** Why the current registry cannot run `t` (missing, too old, migration failed), if it cannot. */
  blockedReason(t: TaskRecord): BlockedReason | undefined {
    const resolution = this.#resolve(t);
    return resolution.ok ? undefined : resolution.reason;
  }

  /**
   * Whether the current registry can take `t`, without running its migration (no user code, no
   * report): what `inspect()` shows for a task no drain has judged yet.
   */
  check(t: TaskRecord): { migrates: boolean } | Blocked {
    const checked = this.#check(t);
    if ("definition" in checked) return { migrates: checked.definition.version !== t.version };
    return { id: t.id, kind: t.kind, reason: checked.reason, detail: checked.detail };
  }

  #check(t: TaskRecord): { definition: AnyTaskDefinition } | { reason: BlockedReason; detail: string } {
    const definition = this.registry.get(t.kind);
    if (!definition) return { reason: "missing_task", detail: `no definition named ${t.kind} is registered` };
    if (definition.version < t.version) {
      return {
        reason: "task_too_old",
        detail: `stored task ${t.id} is version ${t.version}, the registered ${t.kind} is version ${definition.version}`,
      };
    }
    if (definition.version === t.version) return { definition };
    const failed = this.#migrationReported.get(t.id);
    // The same definition failed already: blocked with that failure's own words, not tried again.
    if (failed?.definition === definition) return { reason: "migration_failed", detail: failed.error };
    if (!definition.migrate) {
      return {
        reason: "migration_failed",
        detail: `${t.kind} version ${definition.version} has no migrate for version ${t.version}`,
      };
    }
    return { definition };
  }

  #resolve(t: TaskRecord): Resolution {
    const checked = this.#check(t);
    if (!("definition" in checked)) return { ok: false, ...checked };
    const definition = checked.definition;
    // (#check blocked a version change without migrate; the test only narrows the type.)
    if (definition.version === t.version || !definition.migrate) return { ok: true, definition };
    try {
      // Copies, as a document's migrate gets: the stored record is frozen, and a migrate that
      // builds its result in place (an old input given a new field) must not fault on it.
      const checkpoint = structuredClone((t.state as { checkpoint?: Json }).checkpoint ?? null);
      const migrated = definition.migrate(structuredClone(t.input), checkpoint, t.version) as {
        input: Json;
        checkpoint: Json;
      };
      if (!migrated || typeof migrated.checkpoint !== "object" || migrated.checkpoint === null) {
        throw new TypeError("migrate must return { input, checkpoint }");
      }
      // Strict JSON where it enters (spec §3.4): a bad migration blocks its task, not the commit.
      assertJson(migrated.input);
      assertJson(migrated.checkpoint);
      return { ok: true, definition, migrated };
    } catch (error) {
      // Reported from whichever plan sees it first (a plan made ahead may be the only one): once per definition.
      this.#migrationReported.set(t.id, { definition, error: errorMessage(error) });
      this.report(
        new Error(
          `migrating task ${t.id} (${t.kind}) from version ${t.version} failed: ${errorMessage(error)}`,
        ),
      );
      return { ok: false, reason: "migration_failed", detail: errorMessage(error) };
    }
  }

  /** Called by an invocation when it ends. */
  ended(invocation: Invocation): void {
    const id = invocation.taskId;
    if (this.active.get(id) === invocation) this.active.delete(id);
    // A drain is needed only if a plan passed the task over while this invocation ran, or the task
    // is left anything but waiting or terminal (stopped early, marked for abort, handed back).
    const status = this.session.line.tasks.get(id)?.state.status;
    if (this.#passedOver.delete(id) || (status !== "waiting" && status !== "terminal")) this.kick();
  }

  /**
   * Fault a task from the scheduler's side (a throwing handler, a phase without progress), inside
   * the caller's commit on the line: the outcome (or its hold) and the definition's cleanup.
   */
  writeFault(tx: Tx, overlay: Overlay, id: TaskId, error: unknown): void {
    const t = overlay.task(id);
    if (!t || t.state.status === "terminal" || t.state.status === "completing") return;
    const message = errorMessage(error);
    this.#cleanUp(tx, finish(overlay, t, { status: "faulted", error: { message } }, this.session.now()));
  }

  /** Stop reserving and signal every invocation; resolves when all of them returned. */
  async close(reason: Error = new HarnessClosed()): Promise<void> {
    this.#closing = true;
    this.alarm.clear();
    this.#recovered();
    const running = [...this.active.values()];
    for (const invocation of running) invocation.stop(reason);
    await Promise.all(running.filter((i) => i.launched).map((i) => i.done));
  }

  /** Outcome of a task if it is decided (terminal or held). */
  outcome(id: TaskId) {
    return outcomeOf(this.session.records.tasks.get(id));
  }
}
