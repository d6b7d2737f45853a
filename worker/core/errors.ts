/**
 * Typed errors of the engine. Each carries a stable `code` so callers (and the tab protocol) can
 * branch on it without parsing messages, and spells its `name` as a literal: the production build
 * mangles class names, and an error crossing to the tab keeps only its name and message.
 */

export class HarnessError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

/** A runtime commit was refused: the task's abort mark is set, its invocation ended, or it is finished. */
export class CommitRefused extends HarnessError {
  override readonly name = "CommitRefused";
  constructor(
    readonly reason: "abort_requested" | "invocation_ended" | "not_running" | "closing" | "moved",
    message: string,
  ) {
    super(`commit_refused:${reason}`, message);
  }
}

/** A wait that names the task itself, a task on its owner chain, or closes a cycle of waits. */
export class WaitCycle extends HarnessError {
  override readonly name = "WaitCycle";
  constructor(message: string) {
    super("wait_cycle", message);
  }
}

/** A wait, creation or state that is malformed: missing task, bad policy, pending returned... */
export class InvalidTransition extends HarnessError {
  override readonly name = "InvalidTransition";
  constructor(message: string) {
    super("invalid_transition", message);
  }
}

export class UnknownTask extends HarnessError {
  override readonly name = "UnknownTask";
  constructor(id: number) {
    super("unknown_task", `no task ${id}`);
  }
}

export class UnknownConversation extends HarnessError {
  override readonly name = "UnknownConversation";
  constructor(id: number) {
    super("unknown_conversation", `no conversation ${id}`);
  }
}

/** Why a conversation cannot be deleted (see `ConversationNotDeletable`). */
export type DeleteRefusal = "root" | "owned" | "forked" | "busy";

/**
 * A conversation that cannot be deleted now: the root conversation (`root`), one a task owns (`owned`:
 * it goes with its owner's conversation), one whose history forks read (`forked`: `blockers` are the
 * forks), or one with live work or queued inputs in it or in the conversations its tasks own
 * (`busy`: `blockers` are the live tasks; stop them first).
 */
export class ConversationNotDeletable extends HarnessError {
  override readonly name = "ConversationNotDeletable";
  constructor(
    readonly conversationId: number,
    readonly reason: DeleteRefusal,
    readonly blockers: readonly number[],
    message: string,
  ) {
    super(`not_deletable:${reason}`, message);
  }
}

/** A fork names an entry its parent's history does not show (another conversation's, or past a cap). */
export class EntryNotVisible extends HarnessError {
  override readonly name = "EntryNotVisible";
  constructor(
    readonly conversationId: number,
    readonly entryId: number,
  ) {
    super("entry_not_visible", `entry ${entryId} is not in the history of conversation ${conversationId}`);
  }
}

/** New owned work needs a live owner that is not finishing and not abort-marked. */
export class OwnerNotLive extends HarnessError {
  override readonly name = "OwnerNotLive";
  constructor(message: string) {
    super("owner_not_live", message);
  }
}

export class HarnessClosed extends HarnessError {
  override readonly name = "HarnessClosed";
  constructor(message = "harness is closed") {
    super("harness_closed", message);
  }
}

/** Values that are not strict JSON (undefined, NaN, functions, cycles) cannot be stored. */
export class NotJson extends HarnessError {
  override readonly name = "NotJson";
  constructor(message: string) {
    super("not_json", message);
  }
}

/**
 * Typed access to a conversation document whose incarnation was created with another history or
 * fork rule than the token declares (spec §3.1): a definition cannot reinterpret a document's
 * lifetime. Nothing is written.
 */
export class DocumentSemanticsError extends HarnessError {
  override readonly name = "DocumentSemanticsError";
  constructor(
    readonly document: string,
    readonly declared: { readonly history: string; readonly fork: string },
    readonly stored: { readonly history: string; readonly fork: string },
  ) {
    super(
      "document_semantics",
      `document ${document} is history "${stored.history}", fork "${stored.fork}" here, but its definition declares history "${declared.history}", fork "${declared.fork}" (an existing document keeps the semantics it was created with)`,
    );
  }
}

/**
 * Typed access to a document whose stored version this definition cannot read: newer than the
 * definition, or older with no `migrate`. The stored value is left as it is.
 */
export class DocumentVersionError extends HarnessError {
  override readonly name = "DocumentVersionError";
  constructor(
    readonly document: string,
    readonly storedVersion: number,
    readonly definitionVersion: number,
  ) {
    super(
      "document_version",
      storedVersion > definitionVersion
        ? `document ${document} is stored at version ${storedVersion}, newer than this definition's ${definitionVersion}`
        : `document ${document} is stored at version ${storedVersion} and its definition (version ${definitionVersion}) has no migrate`,
    );
  }
}

/**
 * A write to a conversation that is moving to another home (`moving`: step 1 of a move committed, it
 * runs nowhere until the receiver adopts it or the move is cancelled) or that lives in another home
 * now (`moved`: this store keeps a read-only copy; `remote` is its id there). Nothing was written.
 */
export class ConversationMoved extends HarnessError {
  override readonly name = "ConversationMoved";
  constructor(
    readonly conversationId: number,
    readonly status: "moving" | "moved",
    readonly transfer: string,
    readonly remote?: number,
  ) {
    super(
      `conversation_moved:${status}`,
      status === "moving"
        ? `conversation ${conversationId} is moving to another home (transfer ${transfer}): it cannot change here`
        : `conversation ${conversationId} lives in another home now (as conversation ${remote}): this copy is read-only`,
    );
  }
}

/** Why a step of a move was refused (see `MoveRefused`). */
export type MoveRefusal =
  | "unknown_conversation"
  | "owned"
  | "subagent"
  | "task_kind"
  | "moving"
  | "moved"
  | "cancelled"
  | "unknown_transfer"
  | "bad_package"
  | "refused"
  | "too_large";

/**
 * A step of a move refused, changing nothing: the conversation cannot move (`unknown_conversation`;
 * `owned`: a subagent's conversation moves only with its owner; `subagent`: it has live owned
 * conversations; `task_kind`: a live task's kind has no `moveIds` hook or cannot run here), it is
 * already moving or moved, the transfer is unknown, was cancelled or refused, or the package is
 * malformed (`bad_package`), or it is larger than the other home takes in one message (`too_large`:
 * worker/app/moves.ts checks it before anything is sent).
 */
export class MoveRefused extends HarnessError {
  override readonly name = "MoveRefused";
  constructor(
    readonly reason: MoveRefusal,
    message: string,
  ) {
    super(`move_refused:${reason}`, message);
  }
}

/** Cancelling a caller's own wait: never aborts the work. */
export class WaitCancelled extends HarnessError {
  override readonly name = "WaitCancelled";
  constructor(message = "wait cancelled") {
    super("wait_cancelled", message);
  }
}

/** An error's message, or the thrown value as text (defined with the store, the lowest layer). */
export { errorMessage } from "../store/errors.ts";
