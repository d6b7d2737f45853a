/**
 * The harness: opens a session over a store, recovers it (running tasks become pending, marks and
 * holds are re-derived by the first drain), and exposes tasks to callers. Cancelling a caller's
 * signal only stops that caller's wait; work is aborted only through `abortTask` and
 * `abortConversation`. The session (the commit line and its records) and the scheduler are private:
 * the layers above use the public operations below (committed reads of documents, entries,
 * submissions and conversations; transactions; subscriptions and waits; mounts; aborts), and only
 * the core and tests reach the internals, through `internals.ts`.
 */
import type { Store } from "../store/types.ts";
import {
  type AnyTaskDefinition,
  type CreateTaskOptions,
  Registry,
  type TaskDefinition,
  type TaskHookSource,
  type Tx,
} from "./define.ts";
import { type DocumentSnapshot, DocumentState, readAsOf } from "./documents.ts";
import {
  HarnessClosed,
  InvalidTransition,
  UnknownConversation,
  UnknownTask,
  WaitCancelled,
} from "./errors.ts";
import {
  buildTaskGraph,
  type HarnessInspection,
  inspectTasks,
  openSubmissions,
  type TaskGraph,
  TaskGraphMount,
} from "./inspect.ts";
import { grantInternals } from "./internals.ts";
import * as move from "./move.ts";
import { ConversationMount, type Watch } from "./observe.ts";
import { finish, mark, ordinaryScope } from "./ownership.ts";
import { type EntryPage, FIRST_PAGE } from "./pages.ts";
import { storedTasks } from "./queries.ts";
import { type DocSemantics, type OwnerEdge, patchTask } from "./records.ts";
import { Scheduler } from "./scheduler.ts";
import { Session } from "./session.ts";
import type { TimerPort } from "./timers.ts";
import { documentRecord, refuseAway } from "./tx.ts";
import type {
  ChangeSet,
  Checkpoint,
  ConversationId,
  ConversationOwnership,
  ConversationRecord,
  EntryId,
  EntryRecord,
  Json,
  MoveRecord,
  SubmissionId,
  SubmissionRecord,
  TaskId,
  TaskRecord,
  TaskStatus,
} from "./types.ts";
import { type DocScope, type DocumentRecord, docRowKey, ROOT_CONVERSATION_ID } from "./types.ts";

export interface HarnessOptions {
  tasks?: readonly AnyTaskDefinition[];
  registry?: Registry;
  now?: () => number;
  /**
   * Runs in the commit that creates a conversation, whatever path creates it (the root at first
   * open, `tx.createConversation`), so the layer above can give it its documents. Writes only
   * through `tx`.
   */
  onConversationCreated?: (tx: Tx, record: ConversationRecord) => void;
  /**
   * Runs in each reconcile commit while a live task with cancellation intent owns conversations,
   * with those conversations (spec §5.4: every conversation the cascade reaches), so the layer above
   * can treat each like `Conversation.abort()`. Writes only through `tx`; returns true when it wrote.
   */
  onCascade?: (tx: Tx, conversations: ReadonlySet<ConversationId>) => boolean | undefined;
  /**
   * The history and fork rules (spec §3.1, §3.7) a conversation document's incarnation is created
   * with, by name: fork "current" unless listed in `asOf` (the value at the fork's entry; their
   * history is kept, see fork.ts) or `initial` says so (not copied). Fixed for the harness's life.
   * They decide only when a record is created: a document that has a record keeps the rules stored
   * in it (spec §3.2), whatever this option says of its name (also when it names it otherwise, or
   * not at all: code no longer installed), for its history, `snapshotAsOf` and its forks.
   */
  forks?: {
    readonly asOf?: readonly string[];
    readonly initial?: (name: string) => boolean;
    /**
     * Conversation documents that keep their history without the "asOf" fork rule (spec §3.1
     * `history: "rewindable"` with fork "current" or "initial"): `snapshotAsOf` reads them as they
     * were. Every `asOf` document is rewindable too.
     */
    readonly rewindable?: readonly string[];
  };
  /**
   * The hooks extensions register for tasks (`runtime.hooks.each`), from the layer above the core;
   * absent: a task has none.
   */
  taskHooks?: TaskHookSource;
  /**
   * The largest row body (UTF-8 bytes of an entry's or a submission's JSON) the store takes: a longer
   * one keeps its long strings out of line, in parts below it (spill.ts; a Durable Object's SQLite
   * stores at most 2 MB in a row). Undefined (the default): rows are not bounded, nothing spills.
   */
  maxValueBytes?: number;
  /** Errors nobody awaits: failed migrations, failed fault writes, drain errors. */
  onReport?: (error: unknown) => void;
  /**
   * Told the earliest due time of the durable timers (timers.ts) whenever it changes, after a drain
   * (undefined: no timer waits). A host whose process may be evicted while idle (a Durable Object)
   * arms a wake-up of its own for it; opening the harness again fires what is due. Called off the
   * commit line; must not throw.
   */
  onTimer?: (at: number | undefined) => void;
  /** The process timers the durable timers' alarm uses (default: setTimeout; a test's fake clock). */
  timers?: TimerPort;
  /**
   * The store failed under the harness (quota, I/O, another owner): memory may be ahead of the disk,
   * so the harness stops (and with it the engine it runs in). Everything committed is kept; reopening
   * resumes from it.
   */
  onFatal?: (error: Error) => void;
  /**
   * Open paused (spec §2.2): recovery runs, but no task is reserved or started until `resume()` or a
   * progress call (submit, compact, abort, a wait). Default false: scheduling starts at open.
   */
  paused?: boolean;
  /**
   * Runs once during the open, after the live records are loaded and before recovery and scheduling
   * begin: whatever must be in place before a recovered task runs (an app's stored tools, its root
   * conversation). It may read and commit; no task is reserved or started until it returned, and a
   * `resume()` (or a progress call) it makes takes effect only after it.
   */
  prepare?: (harness: Harness) => Promise<void> | void;
  /**
   * Document scopes (conversation ids, or ids no conversation has, such as an app's settings) whose
   * documents the open loads in the same read as the live records, so a `doc()` of them right after
   * the open reads memory instead of queueing a read of its own.
   */
  preloadDocs?: readonly ConversationId[];
  /**
   * When the root conversation (id 1, ownerless) is created: "at-open" (default), by the first open
   * of a store, in a commit of its own; "lazy", only by `ensureRoot()` (the agent harness's
   * `root()`, spec §2.2, creates it in one commit with its agent and init).
   */
  root?: "at-open" | "lazy";
  /**
   * Group commits requested together into one transaction (default true: the session's group
   * commit, core/session.ts). `false`: one commit per transaction, for crash sweeps that must cut
   * between any two commits.
   */
  groupCommit?: boolean;
  /**
   * How the layer above renumbers the ids in the documents and submission payloads it defines when a
   * conversation moves to another store (move.ts). Absent: they are carried as they are.
   */
  moves?: move.MoveHooks;
}

export type Scheduling = "paused" | "running" | "closing";

export type AbortResult = "marked" | "terminal";

/** `done`, unless `signal` aborts first (then only this wait ends, with WaitCancelled). */
function untilDone(done: Promise<void>, signal: AbortSignal | undefined): Promise<void> {
  if (!signal) return done;
  return new Promise<void>((resolve, reject) => {
    if (signal.aborted) return reject(new WaitCancelled());
    const onAbort = () => reject(new WaitCancelled());
    signal.addEventListener("abort", onAbort, { once: true });
    void done.then(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    });
  });
}

export class Harness {
  readonly registry: Registry;
  /** The commit line and its records (internal to the core: see internals.ts). */
  readonly #session: Session;
  readonly #scheduler: Scheduler;
  #mounts = new Map<ConversationId, ConversationMount>();
  #pageMounts = new Map<ConversationId, ConversationMount>();
  #graph: TaskGraphMount | undefined;
  #closed: Promise<void> | undefined;
  #sealed = false;
  readonly #closeListeners = new Set<{ listener: () => void }>();
  readonly #states = new Set<DocumentState>();
  readonly #moves: move.MoveContext;
  readonly #rootAtOpen: boolean;
  /** Opened paused (`HarnessOptions.paused`): recovery commits at open, nothing runs until resume. */
  readonly #pausedAtOpen: boolean;
  /** The open is under way (see `start`): the scheduler is held, a resume waits for its end. */
  #starting = true;
  #resumeRequested = false;
  readonly #prepare: HarnessOptions["prepare"];
  readonly #preloadDocs: readonly ConversationId[];

  static {
    grantInternals((h) => {
      if (!(h instanceof Harness)) throw new TypeError("not a harness");
      return { session: h.#session, scheduler: h.#scheduler };
    });
  }

  protected constructor(
    readonly store: Store,
    options: HarnessOptions,
  ) {
    this.registry = options.registry ?? new Registry();
    this.#rootAtOpen = options.root !== "lazy";
    this.#session = new Session(store, options.now ?? Date.now);
    if (options.groupCommit === false) this.#session.maxGroup = 1;
    this.#session.maxValueBytes = options.maxValueBytes;
    const report = options.onReport ?? (() => undefined);
    if (options.onConversationCreated) this.#session.onConversationCreated = options.onConversationCreated;
    // The rules a new conversation incarnation is created with; one that has a record follows it.
    const asOf = new Set(options.forks?.asOf ?? []);
    const initial = options.forks?.initial ?? (() => false);
    const rewindable = new Set([...asOf, ...(options.forks?.rewindable ?? [])]);
    const rules = new Map<string, DocSemantics>();
    this.#session.docRules = (name) => {
      let known = rules.get(name);
      if (!known) {
        const fork = asOf.has(name) ? "asOf" : initial(name) ? "initial" : "current";
        known = Object.freeze({ history: rewindable.has(name) ? "rewindable" : "latest", fork });
        rules.set(name, known);
      }
      return known;
    };
    this.#scheduler = new Scheduler(this.#session, this.registry, report, {
      ...(options.timers ? { port: options.timers } : {}),
      ...(options.onTimer ? { onChange: options.onTimer } : {}),
    });
    this.#scheduler.taskHooks = options.taskHooks;
    this.#scheduler.onCascade = options.onCascade;
    this.#session.onMerged = () => this.#scheduler.kick();
    this.#session.onDefinition = (d) => this.registry.learn(d);
    this.#session.onFatal = (error) => {
      void this.#scheduler.close(error);
      this.#scheduler.rejectWaiters(new HarnessClosed(`engine stopped: ${error.message}`));
      options.onFatal?.(error);
    };
    this.registry.onChange(() => this.#scheduler.kick());
    this.#moves = {
      session: this.#session,
      scheduler: this.#scheduler,
      registry: this.registry,
      hooks: options.moves ?? {},
    };
    if (options.tasks?.length) this.registry.register(...options.tasks);
    this.#pausedAtOpen = options.paused === true;
    this.#prepare = options.prepare;
    this.#preloadDocs = options.preloadDocs ?? [];
    // Held until the open's end (start): recovery decides how the running tasks come back first.
    this.#scheduler.pause();
  }

  static async open(store: Store, options: HarnessOptions = {}): Promise<Harness> {
    const harness = new Harness(store, options);
    await harness.start();
    return harness;
  }

  /**
   * Load, prepare, recover, start scheduling. The store operations before a recovered task's first
   * commit are the load (one read) and whatever `prepare` does; recovery itself writes nothing for a
   * task the first drain starts again at once (docs/ARCHITECTURE.md, "The recovery path").
   */
  protected async start(): Promise<void> {
    await this.#session.load({
      docs: this.#preloadDocs,
    });
    // Recovery: nothing runs yet, so every running task was cut off. Its phase reruns from its last
    // checkpoint with `runtime.resumed` (the in-memory `interrupted` mark); a pending task an earlier
    // opening marked interrupted in storage (and that never ran since) is interrupted too.
    const running: TaskId[] = [];
    for (const id of this.#session.records.live) {
      const state = this.#session.records.tasks.get(id)?.state;
      if (state?.status === "running") running.push(id);
      if (state?.status === "running" || (state?.status === "pending" && state.interrupted))
        this.#session.records.interrupted.add(id);
    }
    await this.#prepare?.(this);
    const scheduling = !this.#pausedAtOpen || this.#resumeRequested;
    let recovered: Promise<void> | undefined;
    if (running.length > 0) {
      if (scheduling) {
        // The first drain settles them (scheduler.ts, `recover`): one it starts again at once keeps
        // its stored `running` row (a crash before its next commit finds it running again, exactly
        // as now); every other one is written back to pending, interrupted, in that drain's commit.
        recovered = this.#scheduler.recover(running);
      } else {
        // Opened paused: the tasks show pending (interrupted) until scheduling resumes.
        await this.#session.commit((_tx, overlay) => {
          for (const id of running) {
            const t = overlay.task(id)!;
            if (t.state.status === "running")
              overlay.setTask(
                patchTask(t, {
                  state: { status: "pending", checkpoint: t.state.checkpoint, interrupted: true },
                }),
              );
          }
        });
      }
    }
    // Opened paused, the open still re-evaluates finalization and failFast (spec §2.2): the marks and
    // the released holds are committed now; what they start waits for resume().
    if (!scheduling) await this.#scheduler.reconcileAtOpen();
    if (this.#rootAtOpen) await this.ensureRoot();
    this.#starting = false;
    if (scheduling || this.#resumeRequested) this.#scheduler.resume();
    else this.#scheduler.kick();
    // The open returns once every recovered task is running again or stored pending (a task started
    // again needs no write: its drain launches it at once), so no reader after it sees a task running
    // that nothing runs.
    await recovered;
  }

  /**
   * The root conversation (id 1). When absent, one commit creates it ownerless (the creation hook
   * runs, `onConversationCreated`) and runs `init` in that commit: a throw creates nothing. When
   * it exists, `init` is ignored and nothing is written (also when a concurrent call created it
   * first).
   */
  async ensureRoot(
    init?: (tx: Tx, conversationId: ConversationId) => void | Promise<void>,
    signal?: AbortSignal,
  ): Promise<ConversationRecord> {
    const existing = this.#session.records.conversations.get(ROOT_CONVERSATION_ID);
    if (existing) return existing;
    this.#live(signal);
    return this.#session.commit(async (tx) => {
      const present = tx.conversation(ROOT_CONVERSATION_ID);
      if (present) return present;
      const created = tx.createRoot();
      await init?.(tx, created.id);
      return created;
    });
  }

  /** Enable scheduling after a paused open; idempotent; throws once close began. */
  resume(): void {
    if (this.#closed) throw new HarnessClosed();
    // During the open (a `prepare` that resumes, or makes a progress call): once it has recovered.
    if (this.#starting) {
      this.#resumeRequested = true;
      return;
    }
    this.#scheduler.resume();
  }

  /** Whether tasks are being scheduled (reported by `inspect()`). */
  get #scheduling(): Scheduling {
    if (this.#closed || this.#scheduler.closing) return "closing";
    return this.#scheduler.paused ? "paused" : "running";
  }

  /**
   * Resolves when no ordinary work is live anywhere: every live task sits below a background
   * boundary (spec §2.2, §5.4). A progress call: it resumes a paused harness. The signal cancels
   * only this wait. A refusal (closed, cancelled) is a rejected promise, never a throw at the call.
   */
  async waitForIdle(signal?: AbortSignal): Promise<void> {
    this.#live(signal);
    this.resume();
    return this.waitUntil(() => !this.#ordinaryWorkLive(), signal);
  }

  #ordinaryWorkLive(): boolean {
    const r = this.#session.records;
    for (const id of r.live)
      if (!this.#belowBackground(id) && !r.away.has(r.tasks.get(id)!.conversationId)) return true;
    return false;
  }

  /** The task, or a task owning it (directly or through an owned conversation), is background. */
  #belowBackground(id: TaskId): boolean {
    const r = this.#session.records;
    const seen = new Set<TaskId>();
    for (let t: OwnerEdge | undefined = r.tasks.get(id); t && !seen.has(t.id); ) {
      seen.add(t.id);
      if (t.background) return true;
      const owner = t.owner ?? r.conversations.get(t.conversationId)?.owner?.taskId;
      if (owner === undefined) return false;
      t = r.ownerEdge(owner);
    }
    return false;
  }

  /**
   * Resolve when `predicate` holds on committed state (checked now and after every commit); rejects
   * when the harness closes or the signal is cancelled (which cancels only this wait).
   */
  waitUntil(predicate: () => boolean, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(new WaitCancelled());
      if (predicate()) return resolve();
      const stopListening = this.#session.subscribe(() => {
        if (predicate()) settle(resolve);
      });
      const timer = setInterval(() => {
        if (this.#session.fatal || this.closed) settle(() => reject(new HarnessClosed()));
      }, 50);
      const onAbort = () => settle(() => reject(new WaitCancelled()));
      const settle = (how: () => void) => {
        stopListening();
        clearInterval(timer);
        signal?.removeEventListener("abort", onAbort);
        how();
      };
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  /**
   * Refuse a new read once close began (spec §2.2: every new operation rejects): HarnessClosed. A
   * stopped engine (a fatal storage failure) still answers reads of what it committed, so a person
   * can see and export their work before the reopen; its writes are refused by `#live`.
   */
  assertOpen(): void {
    this.#notClosing();
  }

  #notClosing(): void {
    if (this.#closed || this.#sealed) throw new HarnessClosed();
  }

  #live(signal?: AbortSignal): void {
    if (this.#closed || this.#sealed) throw new HarnessClosed();
    if (this.#session.fatal) throw new HarnessClosed(`engine stopped: ${this.#session.fatal.message}`);
    if (signal?.aborted) throw new WaitCancelled();
  }

  /** Run a callback in one commit (top level: no calling task; every creation names its ownership). */
  async transaction<T>(work: (tx: Tx) => T | Promise<T>, signal?: AbortSignal): Promise<T> {
    this.#live(signal);
    return this.#session.commit((tx) => work(tx));
  }

  /**
   * Fork `parentId` at entry `at` in one commit (spec §3.7; see `Tx.forkConversation`), with `init`
   * run after the creation hook in that commit. Rejects with UnknownConversation or EntryNotVisible.
   */
  async forkRecord(
    parentId: ConversationId,
    at: number,
    options: {
      ownership: ConversationOwnership;
      init?: (tx: Tx, conversationId: ConversationId) => void | Promise<void>;
    },
    signal?: AbortSignal,
  ): Promise<ConversationRecord> {
    this.#live(signal);
    return this.underWay(async () => {
      if (!(await this.#session.conversation(parentId))) throw new UnknownConversation(parentId);
      // Loaded ahead, so the commit normally runs once (it would load them and run again otherwise).
      await Promise.all([this.#session.ensureForkPoint(parentId, at), this.#session.ensureDocs(parentId)]);
      this.#live(signal); // admission: sealed once close began (spec §4), as `transaction()` is
      return this.#session.commit(async (tx) => {
        const record = tx.forkConversation(parentId, at, { ownership: options.ownership });
        await options.init?.(tx, record.id);
        return record;
      });
    });
  }

  /**
   * Delete a conversation in one commit, with the conversations its tasks own: entries, documents,
   * tasks and submissions (delete.ts). Rejects with UnknownConversation, or ConversationNotDeletable
   * naming why (root, owned, forked, busy: stop its work first). Its watches end with "deleted"; its
   * ids are never handed out again, also after a reopen. Resolves with the ids deleted.
   */
  async deleteConversation(conversationId: ConversationId, signal?: AbortSignal): Promise<ConversationId[]> {
    this.#live(signal);
    return this.underWay(async () => {
      // Loaded ahead (its record, the conversations below it and their forks), so the commit normally
      // runs once (it would load them and run again otherwise).
      if (await this.#session.conversation(conversationId)) await this.#session.ensureScope(conversationId);
      this.#live(signal); // admission: sealed once close began (spec §4)
      return this.#session.commit((tx) => tx.deleteConversation(conversationId));
    });
  }

  /**
   * Operations of several steps begun before close's seal and still under way (a read after a read,
   * or reads before a commit): close lets them end before it closes the store, so a read asked
   * before the seal completes (spec §2.2) and none meets a closed store.
   */
  readonly #underWay = new Set<Promise<unknown>>();

  /** Run an operation of several steps as one under way at close (the layer above wraps its own). */
  protected underWay<T>(work: () => Promise<T>): Promise<T> {
    const op = work();
    this.#underWay.add(op);
    const end = () => this.#underWay.delete(op);
    op.then(end, end);
    return op;
  }

  createTask<I, S extends Checkpoint, R>(
    definition: TaskDefinition<I, S, R>,
    input: NoInfer<I>,
    options: CreateTaskOptions<NoInfer<S>>,
    signal?: AbortSignal,
  ): Promise<TaskId> {
    return this.transaction((tx) => tx.createTask(definition, input, options), signal);
  }

  async getTask(id: TaskId, signal?: AbortSignal): Promise<TaskRecord | undefined> {
    this.#live(signal);
    return this.#session.task(id);
  }

  /** Stored tasks (terminal ones included), oldest first, optionally of one kind or status. */
  async tasks(
    filter: { kind?: string; status?: TaskStatus } = {},
    signal?: AbortSignal,
  ): Promise<TaskRecord[]> {
    this.#live(signal);
    // Memory is ahead of nothing (reads queue behind commits), but it holds the parsed live records.
    return storedTasks(this.store, filter, (id) => this.#session.records.tasks.get(id));
  }

  /** Resolve with the terminal record; the signal cancels only this wait. */
  async waitForTask(id: TaskId, signal?: AbortSignal): Promise<TaskRecord> {
    this.#live(signal);
    this.resume();
    return this.#scheduler.waitForTerminal(id, signal);
  }

  /**
   * Durably mark a task for abort, then signal and join its running invocation; its abort handler
   * runs once its owned work drained. A blocked task with no running invocation and no live owned
   * work is settled `orphaned` by the marking commit itself. Resolves `marked` once that is done
   * (marking again is idempotent), `terminal` for a finished task; the signal cancels only this wait.
   */
  async abortTask(id: TaskId, signal?: AbortSignal): Promise<AbortResult> {
    this.#live(signal);
    const result = await this.#session.commit((tx, overlay): AbortResult => {
      const t = overlay.task(id);
      // Only live tasks are in memory after a reopen: a known id without a record there ended earlier.
      if (!t) {
        if (overlay.exists(id)) return "terminal";
        throw new UnknownTask(id);
      }
      if (t.state.status === "terminal") return "terminal";
      refuseAway(overlay, t.conversationId);
      mark(overlay, id);
      if (
        t.state.status !== "completing" &&
        !this.#scheduler.active.has(id) &&
        !overlay.hasLiveOwnedWork(id)
      ) {
        const blocked = this.#scheduler.blockedReason(t);
        if (blocked) {
          const orphaned = finish(
            overlay,
            overlay.task(id)!,
            { status: "orphaned", reason: blocked },
            this.#session.now(),
          );
          this.registry.get(orphaned.kind)?.cleanUp?.(tx, orphaned);
        }
      }
      return "marked";
    });
    if (this.#session.records.tasks.get(id)?.state.status === "terminal") this.#scheduler.blocked.delete(id);
    if (result === "marked") {
      const invocation = this.#scheduler.active.get(id);
      if (invocation?.mode === "run") {
        invocation.signalAbort();
        await untilDone(invocation.done, signal);
      }
    }
    return result;
  }

  /** Every published change set, after its COMMIT; returns the unsubscribe. */
  subscribe(listener: (change: ChangeSet) => void): () => void {
    return this.#session.subscribe(listener);
  }

  /**
   * The earliest due time (epoch ms) of a durable timer whose wait is otherwise satisfied, as of the
   * last drain; undefined when none waits (timers.ts).
   */
  nextTimer(): number | undefined {
    return this.#scheduler.alarm.next;
  }

  /** The clock commits are stamped with. */
  now(): number {
    return this.#session.now();
  }

  /**
   * Durably mark the live work ordinary traversal reaches from a conversation (spec §5.4; with
   * `background`, across background boundaries too), signal its running invocations, and resolve
   * once that traversal reaches no live task (with `background`, once every task it reached is terminal
   * too). `inCommit` runs in the marking commit with the conversations reached, so the layer above
   * can withdraw their queued inputs atomically with the marks. A progress call; the signal cancels
   * only the wait.
   */
  async abortConversation(
    conversationId: ConversationId,
    options: {
      background?: boolean;
      inCommit?: (tx: Tx, reached: ReadonlySet<ConversationId>) => void;
    } = {},
    signal?: AbortSignal,
  ): Promise<void> {
    if (signal?.aborted) throw new WaitCancelled();
    this.resume();
    const admitted = await this.#session.commit((tx, overlay) => {
      refuseAway(overlay, conversationId);
      const scope = ordinaryScope(
        overlay,
        [...overlay.base.live, ...overlay.created],
        conversationId,
        options,
      );
      const reached = new Set([conversationId]);
      if (options.background) {
        for (const id of scope) reached.add(overlay.task(id)!.conversationId);
        // Also a conversation below with no live work, its queue left by a failed run (spec §5.4:
        // "the queued inputs of every conversation it reaches"). Those with queued items are in memory.
        const records = overlay.base.conversations;
        for (const record of records.values()) {
          let up = record.owner?.conversationId;
          for (let steps = 0; up !== undefined && steps < 100_000; steps++) {
            if (up === conversationId) {
              if (overlay.away(record.id) === undefined) reached.add(record.id);
              break;
            }
            up = records.get(up)?.owner?.conversationId;
          }
        }
      }
      options.inCommit?.(tx, reached);
      return { scope, marked: scope.filter((id) => mark(overlay, id)) };
    });
    for (const id of admitted.marked) this.#scheduler.active.get(id)?.signalAbort();
    await this.waitForConversationIdle(conversationId, signal);
    if (options.background) {
      // Every task reached when the abort was admitted, also one an earlier abort had marked already.
      const records = this.#session.records;
      await this.waitUntil(
        () => admitted.scope.every((id) => records.tasks.get(id)?.state.status === "terminal"),
        signal,
      );
    }
  }

  /**
   * Resolves when ordinary traversal from a conversation (owned conversations included, also those of
   * finished owners; background work excluded) reaches no live task. A progress call; a refusal
   * (closed, cancelled) is a rejected promise, never a throw at the call.
   */
  async waitForConversationIdle(conversationId: ConversationId, signal?: AbortSignal): Promise<void> {
    this.resume();
    const records = this.#session.records;
    const view = {
      task: (id: number) => records.tasks.get(id),
      ownerEdge: (id: number) => records.ownerEdge(id),
      conversation: (id: number) => records.conversations.get(id),
    };
    return this.waitUntil(() => ordinaryScope(view, records.live, conversationId).length === 0, signal);
  }

  /**
   * Step 1 of a move, on the sender (move.ts): in one commit (with `also`'s writes) mark the
   * conversation away under `transfer`, stop its tasks here, and resolve with the package (again
   * with the same transfer while pending: the same package). Refuses with MoveRefused, changing nothing.
   */
  async prepareMove(
    transfer: string,
    conversationId: ConversationId,
    options: { also?: (tx: Tx) => void } = {},
  ): Promise<move.MovePackage> {
    this.#live();
    return move.prepare(this.#moves, transfer, conversationId, options.also);
  }

  /** Step 2, on the receiver: adopt a package in one commit; resolves with its conversation here. */
  async adoptMove(
    pkg: unknown,
    options: { also?: (tx: Tx, conversationId: ConversationId) => void } = {},
  ): Promise<ConversationId> {
    this.#live();
    return move.adopt(this.#moves, pkg, options.also);
  }

  /** Step 2's first half for a package sent in parts (receiver): store one part. Idempotent. */
  async stageMovePart(
    transfer: string,
    index: number,
    count: number,
    part: string,
  ): Promise<move.StageAnswer> {
    this.#live();
    return move.stage(this.#moves, transfer, index, count, part);
  }

  /** Step 2 for a package sent in parts (receiver): adopt the staged parts in one commit. */
  async adoptStagedMove(
    transfer: string,
    options: { also?: (tx: Tx, conversationId: ConversationId) => void } = {},
  ): Promise<ConversationId> {
    this.#live();
    return move.adoptStaged(this.#moves, transfer, options.also);
  }

  /** Step 3, on the sender: the move is done, as the receiver's conversation `remote`. Idempotent. */
  async finishMove(
    transfer: string,
    remote: ConversationId,
    options: { also?: (tx: Tx) => void } = {},
  ): Promise<void> {
    this.#live();
    return move.finish(this.#moves, transfer, remote, options.also);
  }

  /** Undo a pending move on the sender, once the receiver durably refused it. Idempotent. */
  async cancelMove(transfer: string, options: { also?: (tx: Tx) => void } = {}): Promise<void> {
    this.#live();
    return move.cancel(this.#moves, transfer, options.also);
  }

  /** The receiver's durable refusal of a transfer (or the id it adopted it as). */
  async refuseMove(transfer: string, options: { also?: (tx: Tx) => void } = {}): Promise<move.RefuseAnswer> {
    this.#live();
    return move.refuse(this.#moves, transfer, options.also);
  }

  /** A committed move record of this store (`out`: it sent the transfer; `in`: it received it). */
  moveRecord(role: MoveRecord["role"], transfer: string): MoveRecord | undefined {
    return this.#session.records.moves.get(`${role}:${transfer}`);
  }

  /** The move that holds a conversation away (moving: `pending`; moved: `done`), if any. */
  awayOf(conversationId: ConversationId): (MoveRecord & { role: "out" }) | undefined {
    return this.#session.records.away.get(conversationId);
  }

  /**
   * The conversation records in memory: those loaded so far (live work's, and those named since
   * the open; the rest load when first named: docs/ARCHITECTURE.md, "Flat as the store grows").
   */
  conversationRecords(): ConversationRecord[] {
    return [...this.#session.records.conversations.values()];
  }

  /**
   * A conversation's record if it is in memory (see `conversationRecords`): undefined also for one
   * stored but not loaded yet; `loadConversation` loads it.
   */
  conversationRecord(id: ConversationId): ConversationRecord | undefined {
    return this.#session.records.conversations.get(id);
  }

  /** A conversation's record, read from the store on first access (undefined: there is none). */
  loadConversation(id: ConversationId): Promise<ConversationRecord | undefined> {
    return this.#session.conversation(id);
  }

  /**
   * A conversation's record and those of the conversations below it (owned by its tasks,
   * transitively), read from the store on first access (with the forks of any of them:
   * `Session.ensureScope`); undefined when there is no such conversation. The first is `id`'s.
   */
  async loadBelow(id: ConversationId): Promise<ConversationRecord[] | undefined> {
    const record = await this.#session.conversation(id);
    if (!record) return undefined;
    await this.#session.ensureScope(id);
    const children = new Map<ConversationId, ConversationRecord[]>();
    for (const r of this.#session.records.conversations.values()) {
      if (!r.owner) continue;
      const list = children.get(r.owner.conversationId);
      if (list) list.push(r);
      else children.set(r.owner.conversationId, [r]);
    }
    const out = [record];
    for (let i = 0; i < out.length; i++)
      for (const child of children.get(out[i]!.id) ?? []) if (child.id !== id) out.push(child);
    return out;
  }

  /**
   * The conversations task `taskId` owns, from memory: complete for a live task (the open loads
   * what live tasks own; later ones are created in this process).
   */
  conversationsOwnedBy(taskId: TaskId): ConversationId[] {
    return [...(this.#session.records.ownedConversations.get(taskId) ?? [])].sort((a, b) => a - b);
  }

  /**
   * A submission's committed record, from memory or from the store. A submission operation: once
   * close began it rejects with HarnessClosed (spec §2.2), as the task and conversation ones do.
   */
  async submissionRecord(id: SubmissionId): Promise<SubmissionRecord | undefined> {
    this.#notClosing();
    return this.#session.submission(id);
  }

  /** A submission's committed record if it is in memory (for predicates re-checked after commits). */
  submissionNow(id: SubmissionId): SubmissionRecord | undefined {
    return this.#session.records.submissions.get(id);
  }

  /** The submission a conversation admitted under `requestId`, if any. */
  submissionByRequest(
    conversationId: ConversationId,
    requestId: string,
  ): Promise<SubmissionRecord | undefined> {
    return this.#session.submissionByRequest(conversationId, requestId);
  }

  /** A stored entry by id. */
  entry(id: number): Promise<EntryRecord | undefined> {
    return this.#session.entry(id);
  }

  /** A conversation's stored entries in id order: after `afterId` (exclusive), up to `upTo`, at most `limit`. */
  async entries(
    conversationId: ConversationId,
    options: { afterId?: number; limit?: number; upTo?: number } = {},
  ): Promise<EntryRecord[]> {
    this.#notClosing();
    return this.#session.entries(conversationId, options);
  }

  /**
   * `entries()` for the engine's own readers (the agent's entry cache), which may still be serving
   * an invocation that close is joining: not refused at the seal like a host's new operation.
   */
  storedEntries(
    conversationId: ConversationId,
    options: { afterId?: number; limit?: number; upTo?: number } = {},
  ): Promise<EntryRecord[]> {
    return this.#session.entries(conversationId, options);
  }

  /**
   * A page of a conversation's active range (core/pages.ts): the `limit` entries that precede entry
   * `before` in view order (none given: the newest), and how many precede those.
   */
  async entryPage(
    conversationId: ConversationId,
    options: { before?: EntryId; limit: number },
  ): Promise<EntryPage> {
    this.#notClosing();
    return this.#session.entryPage(conversationId, options);
  }

  /**
   * A committed document value (for reads outside commits) of a scope: a conversation's id,
   * `SESSION_DOCS` or `{ kind: "task", taskId }`. A scope's documents are read from the store on
   * first access (open loads only those live work needs).
   */
  async doc<T extends Json>(scope: DocScope, name: string): Promise<T | undefined> {
    this.#notClosing();
    const key = docRowKey(scope);
    await this.#session.ensureDocs(key);
    return this.docNow<T>(key, name);
  }

  /**
   * `doc()` without waiting, for a scope whose documents are known to be loaded (one that has
   * run work in this process, or one `doc()` read before); throws `DocsNotLoaded` otherwise.
   */
  docNow<T extends Json>(scope: DocScope, name: string): T | undefined {
    return this.#session.records.getDoc(docRowKey(scope), name) as T | undefined;
  }

  /** A committed document with its stored definition version (undefined when absent); loads the documents. */
  async docVersioned(
    scope: DocScope,
    name: string,
  ): Promise<{ value: Json | undefined; version: number | undefined }> {
    this.#notClosing();
    await this.#session.ensureDocs(docRowKey(scope));
    return this.docVersionedNow(scope, name);
  }

  /** `docVersioned()` without waiting, under `docNow`'s condition (the documents are loaded). */
  docVersionedNow(scope: DocScope, name: string): { value: Json | undefined; version: number | undefined } {
    const records = this.#session.records;
    const key = docRowKey(scope);
    return { value: records.getDoc(key, name), version: records.docVersion(key, name) };
  }

  /** A document's committed live incarnation (spec §3.2), undefined when absent. */
  async docRecord(scope: DocScope, name: string): Promise<DocumentRecord | undefined> {
    const key = docRowKey(scope);
    await this.#session.ensureDocs(key);
    const meta = this.#session.records.docMeta.get(`${key}:${name}`);
    return meta && documentRecord(key, name, meta);
  }

  /**
   * A rewindable conversation document as it was at the end of the commit that appended entry `at`
   * (spec §3.3): the incarnation alive then, by `createdAt <= at < retiredAt`, in the ancestor
   * conversation that owns `at`. Undefined when none was; creates and writes nothing. Whether it is
   * rewindable is its record's rule (spec §3.2: the incarnation read, or when none was alive at `at`,
   * the conversation's live one; with neither, the rules `forks` gives the name), not this process's
   * option. Throws InvalidTransition for a document that is not rewindable, EntryNotVisible for an
   * entry the conversation's history does not show.
   */
  async snapshotAsOf(
    conversationId: ConversationId,
    name: string,
    at: EntryId,
    signal?: AbortSignal,
  ): Promise<DocumentSnapshot | undefined> {
    this.#live(signal);
    return this.underWay(async () => {
      if (!(await this.#session.conversation(conversationId))) throw new UnknownConversation(conversationId);
      const segments = this.#session.segments(conversationId);
      const read = await this.#session.store.read((sql) => readAsOf(sql, conversationId, segments, name, at));
      let history = read.history;
      if (history === undefined) {
        const live = await this.docRecord(conversationId, name);
        history = live && "history" in live ? live.history : this.#session.docRules(name).history;
      }
      if (history !== "rewindable")
        throw new InvalidTransition(
          `document ${name} is not rewindable: snapshotAsOf reads only documents whose record keeps their history`,
        );
      return read.snapshot;
    });
  }

  /**
   * A read-only state bound to a document's committed live incarnation (spec §3.3), undefined when
   * absent: it follows that incarnation's commits and ends when it is retired, when disposed, or at
   * close (documents.ts). One asked before close and still loading at the seal rejects HarnessClosed
   * (spec §2.2), unless the document is absent.
   */
  async documentState(scope: DocScope, name: string): Promise<DocumentState | undefined> {
    this.#live();
    const key = docRowKey(scope);
    await this.#session.ensureDocs(key);
    // Baseline and subscription in one synchronous step: no commit lands between them.
    const records = this.#session.records;
    const meta = records.docMeta.get(`${key}:${name}`);
    const value = records.docs.get(`${key}:${name}`);
    if (!meta || value === undefined) return undefined;
    // Asked before close and still loading at its seal: a state needs later commits, so it rejects
    // (spec §2.2); only the acquisition of an absent document resolves, `undefined`, above.
    if (this.#closed) throw new HarnessClosed();
    const state = new DocumentState(
      documentRecord(key, name, meta),
      { value, version: records.docVersions.get(`${key}:${name}`) ?? 1 },
      key,
      (listener) => this.#session.subscribe(listener),
      (ended) => this.#states.delete(ended),
    );
    this.#states.add(state);
    return state;
  }

  /**
   * Observe close (spec §4 `subscribeClose`): `listener` runs once, synchronously, when close
   * begins, after admission is sealed. It must not throw, block or call the harness. The disposer
   * is idempotent.
   */
  subscribeClose(listener: () => void): () => void {
    const entry = { listener };
    this.#closeListeners.add(entry);
    return () => {
      this.#closeListeners.delete(entry);
    };
  }

  /** Whether a conversation's documents are in memory (`docNow` reads them without throwing). */
  docsLoaded(conversationId: ConversationId): boolean {
    return this.#session.records.docsLoaded.has(conversationId);
  }

  /** One document's committed value in every conversation that has it (none loaded for this). */
  async docsNamed<T extends Json>(name: string): Promise<Map<ConversationId, T>> {
    this.#notClosing();
    return this.#session.docsNamed(name) as Promise<Map<ConversationId, T>>;
  }

  /**
   * The committed documents `names` of conversations `ids`, by conversation then name (an absent
   * document is left out), without loading the conversations: O(ids), for a page of a list.
   */
  async docsIn<T extends Json>(
    names: readonly string[],
    ids: readonly ConversationId[],
  ): Promise<Map<ConversationId, Map<string, T>>> {
    this.#notClosing();
    return this.#session.docsIn(names, ids) as Promise<Map<ConversationId, Map<string, T>>>;
  }

  /**
   * `docsIn()` for a step of an operation already under way (one asked before close's seal), which
   * is not refused at the seal like a host's new operation. Protected: a host's read is a new one.
   */
  protected storedDocsIn<T extends Json>(
    names: readonly string[],
    ids: readonly ConversationId[],
  ): Promise<Map<ConversationId, Map<string, T>>> {
    return this.#session.docsIn(names, ids) as Promise<Map<ConversationId, Map<string, T>>>;
  }

  /** The shared view mount of a conversation (created on first use, dropped when unobserved). */
  mount(id: ConversationId): ConversationMount {
    this.#notClosing();
    let mount = this.#mounts.get(id);
    if (!mount) {
      mount = new ConversationMount(this.#session, id, () => this.#mounts.delete(id));
      this.#mounts.set(id, mount);
    }
    return mount;
  }

  /**
   * The shared paged view mount of a conversation (the tab's watch): its view carries the newest
   * FIRST_PAGE entries of the active range and counts the others (`older`).
   */
  pageMount(id: ConversationId): ConversationMount {
    let mount = this.#pageMounts.get(id);
    if (!mount) {
      mount = new ConversationMount(this.#session, id, () => this.#pageMounts.delete(id), FIRST_PAGE);
      this.#pageMounts.set(id, mount);
    }
    return mount;
  }

  /** The live tasks as a structure (spec §9.5): read only, from published records. */
  taskGraph(): TaskGraph {
    return buildTaskGraph(this.#session.records);
  }

  /**
   * Watch the live task graph (spec §9.5): `watch.value` is the graph now, then one frame per commit
   * that changed a node; bounded like a conversation's watch (at most 100 wait, then one frame with
   * the newest graph replaces them). Read only: it enables no scheduling. Close ends it.
   */
  async watchTaskGraph(limit?: number): Promise<Watch<TaskGraph>> {
    this.#live();
    this.#graph ??= new TaskGraphMount(
      this.#session.records,
      (listener) => this.#session.subscribe(listener),
      () => {
        this.#graph = undefined;
      },
    );
    return this.#graph.watch(limit);
  }

  /** Every live task with what the scheduler makes of it, and the open submissions (spec §2.2). */
  inspect(): HarnessInspection {
    const fatal = this.#session.fatal;
    const records = this.#session.records;
    return {
      scheduling: this.#scheduling,
      tasks: inspectTasks(records, this.#scheduler),
      submissions: openSubmissions(records),
      diagnostics: [...this.#scheduler.diagnostics],
      ...(fatal ? { fatal: fatal.message } : {}),
    };
  }

  get closed(): boolean {
    return this.#closed !== undefined || this.#sealed;
  }

  /**
   * Stop every invocation without an outcome, let admitted commits settle, close the store. With
   * `graceMs`, running phases first get that long to reach their next commit (a handover).
   * Admission is sealed at the first call and stays sealed: `signal` cancels only this wait, and a
   * later `close()` awaits the same shutdown.
   */
  close(options: { graceMs?: number } = {}, signal?: AbortSignal): Promise<void> {
    if (!this.#sealed) {
      this.#sealed = true;
      for (const { listener } of [...this.#closeListeners]) listener();
      this.#closeListeners.clear();
    }
    for (const state of [...this.#states]) state.end({ notify: false, keepValue: true });
    for (const mount of [...this.#mounts.values(), ...this.#pageMounts.values()]) mount.endAll();
    this.#mounts.clear();
    this.#pageMounts.clear();
    this.#graph?.endAll();
    this.#closed ??= (async () => {
      if (options.graceMs) await this.#scheduler.quiesce(options.graceMs);
      await this.#scheduler.close();
      this.#scheduler.rejectWaiters(new HarnessClosed());
      // Operations begun before the seal end, and commits queued at it settle (spec §2.2): the line
      // drains before the store closes.
      while (this.#underWay.size > 0) await Promise.allSettled([...this.#underWay]);
      await this.#session.untilQuiet();
      if (!this.store.closed) await this.store.close();
    })();
    return untilDone(this.#closed, signal);
  }
}
