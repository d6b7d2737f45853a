/**
 * The engine's durable records. Every record is plain JSON-compatible data, immutable once
 * published: a change makes a new record. Ids are plain numbers, distinct per record type.
 */

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

export type TaskId = number;
export type SubmissionId = number;
export type ConversationId = number;
export type EntryId = number;

export const ROOT_CONVERSATION_ID: ConversationId = 1;

export type JoinPolicy = "failFast" | "allSettled";

export type TaskOutcomeError = { message: string; detail?: Json };

export type TaskOutcome<R = Json> =
  | { readonly status: "completed"; readonly result: R }
  | { readonly status: "failed"; readonly error: TaskOutcomeError; readonly result?: R }
  | { readonly status: "aborted"; readonly reason?: string; readonly result?: R }
  | { readonly status: "orphaned"; readonly reason: BlockedReason | string }
  | { readonly status: "faulted"; readonly error: TaskOutcomeError };

export type TaskState<S = Checkpoint, R = Json> =
  | {
      readonly status: "pending";
      readonly checkpoint: S;
      /**
       * Set by an opening that turned a running task back to pending: the checkpoint's phase was
       * begun and may have had effects. Kept until the task runs again, so an engine that dies (or
       * lacks the definition) before then leaves the next one resuming it, not starting it afresh.
       */
      readonly interrupted?: true;
    }
  | { readonly status: "running"; readonly checkpoint: S }
  | {
      readonly status: "waiting";
      readonly checkpoint: S;
      readonly on: readonly TaskId[];
      readonly policy: JoinPolicy;
      /**
       * A durable timer (worker/core/timers.ts): the wait also lasts until this wall-clock time, in
       * epoch ms on the harness's clock. Absent: no timer.
       */
      readonly until?: number;
    }
  | { readonly status: "completing"; readonly outcome: TaskOutcome<R> }
  | { readonly status: "terminal"; readonly outcome: TaskOutcome<R> };

export type TaskStatus = TaskState["status"];

/** What a phase handler may return through `commit`: never `pending` or `completing`. */
export type NextTaskState<S = Checkpoint, R = Json> =
  | { readonly status: "running"; readonly checkpoint: S }
  | {
      readonly status: "waiting";
      readonly checkpoint: S;
      /** Tasks to wait for (may be empty when `until` is given). */
      readonly on: readonly TaskId[];
      readonly policy: JoinPolicy;
      /** A durable timer: also wait until this wall-clock time, epoch ms (worker/core/timers.ts). */
      readonly until?: number;
    }
  | { readonly status: "terminal"; readonly outcome: TaskOutcome<R> };

export type Checkpoint = { readonly phase: string };

export type TaskOwnership = { kind: "conversation" } | { kind: "task"; taskId: TaskId };
export type ConversationOwnership = { kind: "ownerless" } | { kind: "task"; taskId: TaskId };

export interface TaskRecord<I = Json, S = Checkpoint, R = Json> {
  readonly id: TaskId;
  readonly conversationId: ConversationId;
  readonly kind: string;
  readonly version: number;
  readonly input: I;
  /** The owning task; absent for conversation-owned tasks. */
  readonly owner?: TaskId;
  readonly background: boolean;
  readonly abortRequested: boolean;
  readonly state: TaskState<S, R>;
  readonly memos?: Readonly<Record<string, Json>>;
  readonly startedAt?: number;
  readonly endedAt?: number;
}

export type RunningTask<I = Json, S = Checkpoint, R = Json> = TaskRecord<I, S, R> & {
  readonly state: { readonly status: "running"; readonly checkpoint: S };
};

export interface ConversationRecord {
  readonly id: ConversationId;
  readonly parent?: { readonly conversationId: ConversationId; readonly at: EntryId };
  readonly owner?: { readonly conversationId: ConversationId; readonly taskId: TaskId };
  readonly createdAt: number;
}

/**
 * A context edit carried by an entry: from this entry on, `target`'s messages are left out of the
 * model context (`omit`) or replaced by `messages` (`replace`). The newest edit per target wins.
 */
export type EntryEdit =
  | { readonly target: EntryId; readonly action: "omit" }
  | { readonly target: EntryId; readonly action: "replace"; readonly messages: Json };

export interface EntryRecord {
  readonly id: EntryId;
  readonly conversationId: ConversationId;
  readonly kind: string;
  readonly data?: Json;
  readonly model?: Json;
  readonly head?: EntryId;
  readonly edits?: readonly EntryEdit[];
  readonly byTaskId?: TaskId;
  readonly timestamp?: number;
}

/** What an append takes: `head` may be "self", the id the entry gets (spec §2). */
export type EntryDraft = Omit<EntryRecord, "id" | "conversationId" | "byTaskId" | "head"> & {
  readonly head?: EntryId | "self";
};

export type SubmissionStatus = "queued" | "placed" | "done" | "unanswered";

/**
 * A submission: an input (answered by a run) or a write (an entry placed at a boundary). `payload`
 * holds what was submitted (the input content or the entry draft) until it is placed.
 */
export interface SubmissionRecord {
  readonly id: SubmissionId;
  readonly conversationId: ConversationId;
  readonly requestId?: string;
  readonly type: "input" | "write";
  readonly status: SubmissionStatus;
  readonly mode?: "steer" | "followUp";
  readonly payload?: Json;
  readonly entry?: EntryId;
  readonly answer?: EntryId;
  readonly reason?: string;
  readonly detail?: string;
}

/**
 * A move of a conversation between two stores (worker/core/move.ts), keyed by its transfer id. The
 * sender keeps an `out` record: `pending` from step 1 (the conversation is away: nothing runs or
 * writes it here), `done` from step 3 (it lives in the peer's conversation `remote`; the local copy
 * is read-only), or `cancelled` (step 1 undone: it is home again). The receiver keeps an `in`
 * record: `adopted` (its own conversation `conversationId`, adopted from the sender's `from`) or
 * `refused` (it will never adopt this transfer).
 */
export type MoveRecord =
  | {
      readonly transfer: string;
      readonly role: "out";
      readonly status: "pending" | "done" | "cancelled";
      readonly conversationId: ConversationId;
      /** When step 1 committed (the package's `preparedAt`). */
      readonly at: number;
      /** The tasks that were running when step 1 committed (the package carries them as running). */
      readonly interrupted: readonly TaskId[];
      /** Step 3: the conversation's id in the receiver's store. */
      readonly remote?: ConversationId;
    }
  | {
      readonly transfer: string;
      readonly role: "in";
      readonly status: "adopted";
      readonly conversationId: ConversationId;
      readonly from: ConversationId;
      readonly at: number;
    }
  | { readonly transfer: string; readonly role: "in"; readonly status: "refused"; readonly at: number };

/** Why a live task cannot run: derived, never stored. */
export type BlockedReason = "missing_task" | "task_too_old" | "migration_failed" | "corrupt_record";

/** What one commit changed, published after COMMIT in commit order. */
export interface ChangeSet {
  readonly seq: number;
  readonly tasks: readonly TaskRecord[];
  readonly entries: readonly EntryRecord[];
  readonly conversations: readonly ConversationRecord[];
  /**
   * Each document this commit wrote: its value (undefined: retired) and the definition version it is
   * stored at, and `id`, the incarnation it belongs to after the commit (absent when retired).
   * `conversationId` is the document's row key (see `docRowKey`): a conversation's id, 0 for a
   * session document, minus the task id for a task document.
   */
  readonly docs: ReadonlyArray<{
    conversationId: ConversationId;
    name: string;
    value: Json | undefined;
    version?: number;
    id?: DocumentId;
  }>;
  readonly submissions: readonly SubmissionRecord[];
  /** Conversations this commit deleted with everything in them (absent: none). */
  readonly deletedConversations?: readonly ConversationId[];
  /** Move records this commit wrote (absent: none; worker/core/move.ts). */
  readonly moves?: readonly MoveRecord[];
}

export function isLive(record: TaskRecord): boolean {
  return record.state.status !== "terminal";
}

/** A document incarnation's id (spec §3.2): never reused, also after a retirement or a deletion. */
export type DocumentId = number;

/**
 * Where a document lives (spec §3.1): a conversation (its id), the session, or a task. A session
 * document belongs to no conversation and outlives close and reopen; a conversation document goes
 * with its conversation; a task document is retired in the commit its task becomes terminal.
 */
export type DocScope =
  | ConversationId
  | { readonly kind: "session" }
  | { readonly kind: "task"; readonly taskId: TaskId };

/** The session scope. */
export const SESSION_DOCS: DocScope = Object.freeze({ kind: "session" as const });

/**
 * One incarnation of a document (spec §3.2). `createdAt` and `retiredAt` are commit positions: the
 * first entry id the commit could append (entry ids are global and increasing), so an entry `E`
 * sees the incarnation alive at the end of its commit exactly when `createdAt <= E < retiredAt`.
 * Commits that append no entry share a position with the next one that does (see
 * tests/spec-coverage/sections-0-4.md [3.2]). Conversation documents carry their history and fork
 * rule, fixed when the incarnation is created (the harness's `forks` option then) and kept by the
 * record from then on.
 */
export type DocumentRecord = {
  readonly id: DocumentId;
  readonly kind: string;
  readonly createdAt: number;
  readonly retiredAt?: number;
} & (
  | { readonly scope: { readonly kind: "session" } }
  | {
      readonly scope: { readonly kind: "conversation"; readonly conversationId: ConversationId };
      readonly history: "latest" | "rewindable";
      readonly fork: "asOf" | "current" | "initial";
    }
  | { readonly scope: { readonly kind: "task"; readonly taskId: TaskId } }
);

/**
 * The number a scope's documents are keyed by in memory and in the `documents` table: the
 * conversation's id (ids start at 1), 0 for the session, minus the task's id for a task.
 */
export function docRowKey(scope: DocScope): number {
  if (typeof scope === "number") return scope;
  if (scope?.kind === "session") return 0;
  if (scope?.kind === "task" && Number.isSafeInteger(scope.taskId) && scope.taskId >= 1) return -scope.taskId;
  throw new TypeError(`not a document scope: ${JSON.stringify(scope)}`);
}
