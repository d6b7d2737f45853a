/**
 * Task definitions and the interfaces handlers see. The phase map is keyed by the checkpoint's
 * `phase`, so the compiler demands a handler for every phase and narrows each handler's checkpoint.
 */
import type { DocPatch } from "./doc-patch.ts";
import type {
  Checkpoint,
  ConversationId,
  ConversationOwnership,
  ConversationRecord,
  DocScope,
  DocumentRecord,
  EntryDraft,
  EntryId,
  EntryRecord,
  Json,
  NextTaskState,
  RunningTask,
  SubmissionId,
  SubmissionRecord,
  TaskId,
  TaskOutcome,
  TaskOwnership,
  TaskRecord,
} from "./types.ts";

export interface CreateTaskOptions<S extends Checkpoint = Checkpoint> {
  /**
   * Start at this checkpoint instead of `initial(input)`: for a creator that already did the first
   * phase's work in the creating commit. Its phase must be one of the definition's.
   */
  start?: S;
  /**
   * Create it already reserved (`running`): it counts as started once the creating commit commits,
   * exactly as if the scheduler had reserved it in that commit, and the scheduler launches it after
   * that commit without a reserving write of its own. A crash after the commit finds it `running`,
   * so its first phase runs with `runtime.resumed`.
   */
  reserve?: boolean;
  /** Required, never inferred from the calling task (spec §2.2): the conversation, or an owner task. */
  ownership: TaskOwnership;
  /** Default: the owner task's conversation, else the root conversation. */
  conversationId?: ConversationId;
  /** Conversation-owned tasks only: a boundary for aborts and idleness. */
  background?: boolean;
}

/**
 * The transaction a commit callback receives. Reads see the commit's own writes. Every value handed
 * to it (inputs, entries, documents, checkpoints) is frozen, deeply, once checked: copy before editing.
 */
export interface Tx {
  /** Wall clock the harness was opened with. */
  now(): number;
  createTask<I, S extends Checkpoint, R>(
    definition: TaskDefinition<I, S, R>,
    input: NoInfer<I>,
    options: CreateTaskOptions<NoInfer<S>>,
  ): TaskId;
  getTask(id: TaskId): TaskRecord | undefined;
  /** The newest entry id so far (entry ids are global and increasing), including this commit's. */
  lastEntryId(): EntryId;
  appendEntry(conversationId: ConversationId, draft: EntryDraft): EntryRecord;
  /**
   * The entries appended to a conversation and not published yet, in order: by the commits merged
   * before this one in its group (a tool's result, when the scheduler's drain joins the group that
   * stored it), then by this commit so far. No cache of published changes holds them yet.
   */
  appendedEntries(conversationId: ConversationId): readonly EntryRecord[];
  /** Ownership is required: ownerless, or owned by a live task (judged at the end of the commit). */
  createConversation(ownership: ConversationOwnership): ConversationRecord;
  /**
   * Fork `parentId` at entry `at`, which must be visible in its history (spec §3.7): the child sees
   * the parent's entries through `at`, and its documents by their fork rules. Ownership as for
   * `createConversation`. Throws EntryNotVisible for an entry the parent's history does not show.
   */
  forkConversation(
    parentId: ConversationId,
    at: EntryId,
    options: { ownership: ConversationOwnership },
  ): ConversationRecord;
  conversation(id: ConversationId): ConversationRecord | undefined;
  /** The conversations a task owns, oldest first (the ownership index, this commit's creations included). */
  ownedConversations(taskId: TaskId): ConversationId[];
  submission(id: SubmissionId): SubmissionRecord | undefined;
  /**
   * The submission the conversation admitted under `requestId` (this commit's included), found also
   * when only the store holds it: the commit then runs again once the session has read it.
   */
  submissionByRequest(conversationId: ConversationId, requestId: string): SubmissionRecord | undefined;
  createSubmission(record: Omit<SubmissionRecord, "id">): SubmissionRecord;
  updateSubmission(record: SubmissionRecord): void;
  /**
   * Read a document of a scope (spec §3.1: a conversation's id, `SESSION_DOCS`, or `{ kind: "task",
   * taskId }`); undefined when absent. A task's documents cannot be reached once it is terminal.
   */
  readDoc<T extends Json>(scope: DocScope, name: string): T | undefined;
  /**
   * Replace a document's value, stored at `version` of its definition (a positive integer); without
   * one it keeps the version it is stored at (1 for a new document). A write to an address with no
   * live incarnation creates one (spec §3.2). `undefined` is refused: `retireDoc` ends a document.
   * `semantics`: a conversation document's history and fork rule, taken only when this write creates
   * its incarnation (a typed token's, spec §3.3: ordinary definitions are not registered); without
   * them, the harness's rules for the name (its `forks` option, else latest/current).
   */
  writeDoc(
    scope: DocScope,
    name: string,
    value: Json,
    version?: number,
    semantics?: {
      readonly history: "latest" | "rewindable";
      readonly fork: "asOf" | "current" | "initial";
    },
  ): void;
  /**
   * Retire a document's live incarnation (spec §3.3): it reads as absent from this commit on, and a
   * later write, in this commit or another, creates a new incarnation with a new id. Retiring an
   * absent document creates nothing.
   */
  retireDoc(scope: DocScope, name: string): void;
  /** A document's live incarnation (this commit's creations and retirements included). */
  docRecord(scope: DocScope, name: string): DocumentRecord | undefined;
  /** Where a conversation's active range starts: its newest head marker's `head` (this commit's included). */
  activeHead(conversationId: ConversationId): EntryId | undefined;
  /** The definition version a document is stored at (undefined when absent). */
  docVersion(scope: DocScope, name: string): number | undefined;
  /**
   * Change an existing document in place (append text to a string, set a key) and return its new
   * value. Only the patches are stored, so a writer that streams into a big document pays for what
   * it adds, not for the document (see doc-patch.ts). Throws InvalidTransition for a path that does
   * not fit the document.
   */
  patchDoc(scope: DocScope, name: string, patches: readonly DocPatch[]): Json;
}

/**
 * Asks a task's hooks (spec §7.2): `each(name, invoke)` calls `invoke` with every handler registered
 * under `name`, in order, and the api the harness gives hooks (the agent's `HookApi`). An ordinary
 * throw from `invoke` is reported (onReport) and the next handler runs; once the invocation is
 * signalled (aborted, closing), the error propagates. A task that composes otherwise (a first
 * decision wins, a throw blocks) does so inside its own `invoke`.
 */
export interface HookRunner {
  // Untyped here, so a runtime of a task with hooks stays assignable to one without: the layer
  // above types it (the agent's `agentHooks(runtime)`).
  each(
    name: string,
    invoke: (handler: (...args: unknown[]) => unknown, api: unknown) => unknown,
  ): Promise<void>;
}

/**
 * Where a harness's hooks come from (set by the layer above the core): the handler objects that
 * apply to a task, and the api handed to them. `handlers` is called at most once per phase, with the
 * registry `snapshot` taken when that phase's handler was invoked (spec §7.1: hooks resolve from
 * the phase's snapshot, never from one of their own).
 */
export interface TaskHookSource {
  /** The registry as it is now: taken at the start of every phase handler and abort handler. */
  snapshot?(): unknown;
  handlers(task: TaskRecord, snapshot?: unknown): readonly object[];
  api(runtime: TaskRuntime): unknown;
}

export interface TaskRuntime<
  I = Json,
  S extends Checkpoint = Checkpoint,
  R = Json,
  _H extends object = object,
> {
  readonly taskId: TaskId;
  readonly conversationId: ConversationId;
  /**
   * Aborted when the invocation ends for any reason (abort mark, close, crash). Made on first use: a
   * handler declaring a third parameter gets it made for it; one with two reads it here only where
   * it hands it on (a fetch, a wait), so an invocation nobody listens to costs no AbortController.
   */
  readonly signal: AbortSignal;
  /**
   * Whether `signal` has aborted, without making it: what `signal.aborted` answers, for a handler
   * that only looks.
   */
  readonly aborted: boolean;
  /**
   * True when this checkpoint's phase already started under an earlier engine that stopped before
   * the phase's next commit (crash, close, handover): whatever it began may have happened.
   */
  readonly resumed: boolean;
  /**
   * The hooks extensions registered for this task's name (spec §7.2 `runtime.hooks.each`): those
   * of the extensions its conversation selects, in extension order, resolved once per phase at the
   * first dispatch (the harness above the core resolves them; none without one).
   */
  readonly hooks: HookRunner;
  /** Write the next state atomically with whatever the callback creates. */
  commit(
    change: (
      tx: Tx,
      current: RunningTask<I, S, R>,
    ) => NextTaskState<S, R> | undefined | Promise<NextTaskState<S, R> | undefined>,
    signal?: AbortSignal,
  ): Promise<TaskRecord<I, S, R>>;
  /**
   * First-writer-wins value: with a candidate, insert-or-read in one commit; without, read. A
   * candidate function runs (inside that commit) only when no winner exists yet.
   */
  memo<T extends Json>(
    name: string,
    candidate?: T | ((tx: Tx) => T),
    signal?: AbortSignal,
  ): Promise<T | undefined>;
  /** Outcomes of terminal tasks, in order; rejects if one is not terminal. */
  outcomes(ids: readonly TaskId[], signal?: AbortSignal): Promise<TaskOutcome[]>;
  getTask(id: TaskId, signal?: AbortSignal): Promise<TaskRecord | undefined>;
  /** Wait for a task's terminal record; rejects when this invocation ends. */
  waitForTask(id: TaskId, signal?: AbortSignal): Promise<TaskRecord>;
  /** The harness clock. Like every operation here, it throws (`invocation_ended`) once the invocation ended. */
  now(): number;
  /** Hand an error to the harness's `onReport`; throws (`invocation_ended`) once the invocation ended. */
  report(error: unknown): void;
}

export type PhaseHandler<I, C, S extends Checkpoint, R, H extends object> = (
  task: RunningTask<I, C, R>,
  runtime: TaskRuntime<I, S, R, H>,
  signal: AbortSignal,
) => Promise<void>;

export interface TaskDefinition<
  I = Json,
  S extends Checkpoint = Checkpoint,
  R = Json,
  H extends object = object,
> {
  readonly name: string;
  readonly version: number;
  initial(input: I): S;
  readonly phases: { readonly [P in S["phase"]]: PhaseHandler<I, Extract<S, { phase: P }>, S, R, H> };
  /** Runs in a fresh invocation once owned work drained; must commit a terminal outcome. */
  abort(task: TaskRecord<I, S, R>, runtime: TaskRuntime<I, S, R, H>, signal: AbortSignal): Promise<void>;
  /**
   * Continuations for phases a task enters by waking from a wait. The scheduler runs one inside the
   * commit that satisfied the wait (no invocation, no transaction of its own) and applies the state
   * it returns. Synchronous and transaction-only: no effect outside `tx`. Returning undefined (before
   * writing anything) runs the phase's handler as usual, e.g. when user hooks must run. A wake that
   * throws is reported and that checkpoint's handler runs instead.
   */
  readonly wake?: {
    readonly [P in S["phase"]]?: (
      tx: Tx,
      task: RunningTask<I, Extract<S, { phase: P }>, R>,
    ) => NextTaskState<S, R> | undefined;
  };
  /**
   * Runs in the commit where the scheduler, not a handler, ends a task of this kind (`faulted`: a
   * handler threw or the record is unreadable; `orphaned`: aborted with no runnable definition), so
   * the definition can release what the task held (a run, live slots). A fault held `completing` by
   * live owned work is cleaned up in the commit that makes it terminal, after that work drained
   * (that commit runs it for any held faulted outcome). Writes only through `tx`.
   */
  cleanUp?(tx: Tx, task: TaskRecord): void;
  /** Upgrade a stored task of an older version when it is reserved. */
  migrate?(input: Json, checkpoint: Json, fromVersion: number): { input: I; checkpoint: S };
  /**
   * How the ids inside a task of this kind are renumbered when its conversation moves to another
   * store (worker/core/move.ts): ids are per store, so every task, entry, submission and conversation
   * id in its input, checkpoint, result and memos goes through `ids`. A conversation with a live
   * task of a kind without this hook cannot move (`MoveRefused`, `task_kind`).
   */
  readonly moveIds?: TaskMoveHooks<I, S, R>;
  readonly hooks?: H;
}

/**
 * The id maps of a move (move.ts), from the sender's ids to the receiver's. On the sender the same
 * hooks run over a collecting map (it returns each id as it is and notes the tasks named, so the
 * package carries the finished tasks a live one refers to). Each throws `MoveRefused`
 * (`bad_package`) for an id the package does not carry.
 */
export interface MoveIds {
  task(id: TaskId): TaskId;
  /** An entry of the moved conversation's visible history. */
  entry(id: EntryId): EntryId;
  /**
   * A position in the entry order rather than an entry (a request's `cutoff`: the newest entry id of
   * the store when it was prepared): the new id of the newest moved entry at or before it, so every
   * comparison with the conversation's entries keeps its answer.
   */
  entryAtOrBefore(id: EntryId): EntryId;
  submission(id: SubmissionId): SubmissionId;
  /** Only the moved conversation itself maps. */
  conversation(id: ConversationId): ConversationId;
}

/** A task kind's renumbering of its stored values when its conversation moves (`TaskDefinition.moveIds`). */
export interface TaskMoveHooks<I = Json, S extends Checkpoint = Checkpoint, R = Json> {
  input(input: I, ids: MoveIds): I;
  checkpoint(checkpoint: S, ids: MoveIds): S;
  /** A finished or held outcome's result (absent: the result holds no id). */
  result?(result: R, ids: MoveIds): R;
  /** One memo of a live task (absent: memos hold no id). */
  memo?(name: string, value: Json, ids: MoveIds): Json;
}

// biome-ignore lint/suspicious/noExplicitAny: the registry holds definitions of every shape.
export type AnyTaskDefinition = TaskDefinition<any, any, any, any>;

export function defineTask<I, S extends Checkpoint, R = Json, H extends object = object>(
  definition: TaskDefinition<I, S, R, H>,
): TaskDefinition<I, S, R, H> {
  if (!definition.name) throw new TypeError("a task definition needs a name");
  if (!Number.isInteger(definition.version) || definition.version < 1) {
    throw new TypeError(`task ${definition.name}: version must be a positive integer`);
  }
  return Object.freeze(definition);
}

/** Definitions by name. Replacing one takes effect for phases that start later. */
export class Registry {
  #byName = new Map<string, AnyTaskDefinition>();
  #listeners = new Set<() => void>();
  #managed = new Set<string>();
  #generation = 0;

  get generation(): number {
    return this.#generation;
  }

  register(...definitions: AnyTaskDefinition[]): void {
    for (const d of definitions) this.#byName.set(d.name, d);
    this.#generation++;
    for (const l of this.#listeners) l();
  }

  /**
   * Names another registry decides (an agent's extension registry): a definition met when a task is
   * created (`learn`) is never registered under them.
   */
  manage(name: string): void {
    this.#managed.add(name);
  }

  /** A definition met when a task is created: registered unless its name is known or managed. */
  learn(definition: AnyTaskDefinition): void {
    if (!this.#byName.has(definition.name) && !this.#managed.has(definition.name)) this.register(definition);
  }

  unregister(name: string): void {
    if (this.#byName.delete(name)) {
      this.#generation++;
      for (const l of this.#listeners) l();
    }
  }

  get(name: string): AnyTaskDefinition | undefined {
    return this.#byName.get(name);
  }

  has(name: string): boolean {
    return this.#byName.has(name);
  }

  onChange(listener: () => void): () => void {
    // Each call is a subscription of its own: its disposer ends that one only.
    const subscription = () => listener();
    this.#listeners.add(subscription);
    return () => {
      this.#listeners.delete(subscription);
    };
  }
}
