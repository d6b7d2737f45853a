/**
 * The engine's in-memory mirror of records, and the overlay a commit writes into.
 * Invariants:
 * - `Records` holds every live task; terminal tasks are kept once seen in this process (older ones
 *   are read from the store on demand);
 * - a conversation's record is in memory once loaded: at open those live work needs (the
 *   conversations of live tasks and unsettled submissions, those live tasks own, the root), the rest
 *   when first named (conversation-load.ts keeps each loaded record's fork ancestry and owner chain
 *   in memory with it). A commit naming a conversation not loaded throws `DocsNotLoaded` (its record
 *   loads with its documents: the session's `ensureDocs`) and runs again; a conversation whose
 *   documents are loaded and that has no record does not exist. `scopeLoaded` names the
 *   conversations whose owned conversations and forks are all in memory (a deletion needs
 *   them: `ScopeNotLoaded` reruns the commit after `Session.ensureScope`);
 * - a conversation's documents (and its newest head) are in memory once loaded (`docsLoaded`): at open
 *   only those of conversations with live work, the rest on first access (the session's
 *   `ensureDocs`), never evicted. Reading or writing the documents of a conversation not loaded
 *   throws `DocsNotLoaded`; the session then loads them and runs that commit's callback again;
 * - the session keeps two of them: the published records (what every reader sees: merged only
 *   after COMMIT returned) and the line's records (merged as a group is assembled, so the next
 *   callback of the group reads the earlier ones); a failed group resets the line to the published;
 * - an overlay is merged only after its callback succeeded, so a failing callback leaves no trace;
 *   merging is synchronous and assigns the commit's `seq`;
 * - the ownership indices (live children per owner task, live conversation tasks, owned
 *   conversations) always match `tasks`;
 * - documents are incarnations (spec §3.2): every document in `docs` has its incarnation in
 *   `docMeta` (id, createdAt, and a conversation document's history and fork rule); a write to an
 *   absent address starts a new one with an id from `nextDocId` (never reused), a retirement ends
 *   it, and an overlay lists both in `docLife`, in order, for the store's `doc_records`. A
 *   conversation incarnation's rules are fixed at its creation (`docRules`, the harness's `forks`
 *   option by name, or its source's for a fork's copy) and stored in its record; from then on they
 *   come from the record alone (history rows, forks, snapshotAsOf), whatever rules later code
 *   declares for the name, so code no longer installed changes nothing of a document's semantics.
 *   Documents are keyed by `docRowKey(scope)`: the session's under 0, a task's under minus its id
 *   (loaded like a conversation's), so forks, views and deletions of conversations never see them;
 * - `tasksWithDocs` names, for every live task, its live task documents (read at open from
 *   `doc_records`, kept by merges), so a task becoming terminal retires them (spec §3.1, §5.3)
 *   without any read for tasks that have none.
 */
import { applyDocPatches, type DocPatch, PATCH_ROW_LIMIT } from "./doc-patch.ts";
import { InvalidTransition } from "./errors.ts";
import {
  type ChangeSet,
  type ConversationId,
  type ConversationRecord,
  type DocumentId,
  type EntryId,
  type EntryRecord,
  type Json,
  type MoveRecord,
  ROOT_CONVERSATION_ID,
  type SubmissionId,
  type SubmissionRecord,
  type TaskId,
  type TaskRecord,
} from "./types.ts";

/**
 * A read or write of the documents of a conversation whose documents are not in memory yet. Inside a
 * commit the session catches it, loads them and runs the callback again (callbacks touch no SQL and
 * have no effect outside their overlay, so a rerun is safe); elsewhere it is a bug: the caller should
 * have awaited `Session.ensureDocs` first.
 */
export class DocsNotLoaded extends Error {
  override readonly name = "DocsNotLoaded";
  constructor(readonly conversationId: ConversationId) {
    super(`the documents of conversation ${conversationId} are not loaded`);
  }
}

/**
 * A deletion of a conversation whose owned conversations and forks are not all in memory:
 * inside a commit the session loads them (`Session.ensureScope`) and runs the callback again.
 */
export class ScopeNotLoaded extends Error {
  override readonly name = "ScopeNotLoaded";
  constructor(readonly conversationId: ConversationId) {
    super(`the conversations below conversation ${conversationId} are not loaded`);
  }
}

/**
 * A lookup by `requestId` (spec §2.2: a retried submit is exactly-once) in a conversation whose
 * submission under that id may be in the store and not in memory (one settled before a reopen):
 * inside a commit the session reads it (`Session.ensureRequest`) and runs the callback again.
 */
export class RequestNotLoaded extends Error {
  override readonly name = "RequestNotLoaded";
  constructor(
    readonly conversationId: ConversationId,
    readonly requestId: string,
  ) {
    super(`the submission of conversation ${conversationId} under request ${requestId} is not loaded`);
  }
}

/**
 * A task's owner edge wanted inside a commit (a failFast wait's check that the waiter owns what it
 * waits on, spec §5.5) for a task memory does not hold (one that ended before this process opened):
 * the session reads the edge (`Session.ensureTaskEdge`) and runs the callback again.
 */
export class TaskNotLoaded extends Error {
  override readonly name = "TaskNotLoaded";
  constructor(readonly taskId: TaskId) {
    super(`the record of task ${taskId} is not loaded`);
  }
}

/**
 * Conversation records read from the store (conversation-load.ts), handed to
 * `Records.installConversations` (both of the session's copies).
 */
export interface LoadedConversations {
  readonly conversations: ConversationRecord[];
  /** Owner edges of finished tasks on the loaded records' owner chains. */
  readonly edges: OwnerEdge[];
}

/** A conversation's documents as stored (patches replayed), handed to `Records.installDocs`. */
export interface LoadedDocs {
  docs: Map<string, { value: Json; version: number; meta: DocMeta }>;
  /** Stored patch rows per document name. */
  patchRows: Map<string, number>;
  /** The `head` of the conversation's newest head marker. */
  head: EntryId | undefined;
}

/** What a fork of a parent at an entry needs from the store (read by fork.ts's `loadForkPoint`). */
export interface ForkPoint {
  /** Whether the entry is visible in the parent's history. */
  readonly visible: boolean;
  /** The `head` of the newest head marker visible through the entry (the fork's active range start). */
  readonly head: EntryId | undefined;
  /** "asOf" documents' values at the entry, by name (absent: no history, the current value is used). */
  readonly asOf: ReadonlyMap<string, { value: Json | undefined; version: number }>;
}

type DocKey = string; // `${docRowKey(scope)}:${name}`

/** A conversation document's history and fork rule (spec §3.1, §3.2): its record's, once it has one. */
export interface DocSemantics {
  readonly history: "latest" | "rewindable";
  readonly fork: "asOf" | "current" | "initial";
}

/**
 * The rules a new conversation incarnation is created with, by name (the harness's `forks` option;
 * the session sets it): asked only when a record is created, and to fill in the fork rule of a record
 * stored before the record kept one. Every other decision reads the incarnation's own record.
 */
export type DocRules = (name: string) => DocSemantics;

const LATEST: DocSemantics = Object.freeze({ history: "latest", fork: "current" });

/**
 * A live document's incarnation: its id, the commit position that created it, and for a
 * conversation document its history and fork rule, as its record holds them (spec §3.2): set when the
 * incarnation is created (from `DocRules`, or from the parent's record for a fork's copy) or read
 * with it, never changed, whatever rules later code declares.
 */
export interface DocMeta {
  readonly id: DocumentId;
  readonly createdAt: number;
  readonly history?: "latest" | "rewindable";
  readonly fork?: "asOf" | "current" | "initial";
}

/** A change of an incarnation's life in a commit, in order (stored in `doc_records`). */
export type DocLife =
  | {
      readonly kind: "create";
      readonly key: DocKey;
      readonly id: DocumentId;
      readonly at: number;
      /** A conversation document's rules, stored in its record (absent for session and task ones). */
      readonly semantics: DocSemantics | undefined;
    }
  | { readonly kind: "retire"; readonly key: DocKey; readonly id: DocumentId; readonly at: number };

/** A document key's row key (conversation id, 0 session, -task id) and name. */
export function splitDocKey(key: DocKey): { rowKey: number; name: string } {
  const i = key.indexOf(":", 1);
  return { rowKey: Number(key.slice(0, i)), name: key.slice(i + 1) };
}

/** What ordinary traversal needs of a task on an owner chain (spec §5.4). */
export type OwnerEdge = Pick<TaskRecord, "id" | "conversationId" | "owner" | "background">;
const docKey = (conversationId: ConversationId, name: string): DocKey => `${conversationId}:${name}`;
/** A move record's key: its role and transfer id. */
/** One part of an incoming move package (move.ts `stage`). */
export interface StagedPart {
  readonly transfer: string;
  readonly index: number;
  readonly count: number;
  /** Its UTF-8 size. */
  readonly bytes: number;
  readonly part: string;
}

/** What is staged of one transfer: the parts' count and each stored index's UTF-8 size. */
export interface StagedTransfer {
  readonly count: number;
  readonly parts: Map<number, number>;
}

export const moveKey = (role: MoveRecord["role"], transfer: string): string => `${role}:${transfer}`;

export class Records {
  readonly tasks = new Map<TaskId, TaskRecord>();
  /** Loaded conversation records (see the header: not every conversation of the store). */
  readonly conversations = new Map<ConversationId, ConversationRecord>();
  /** Conversations whose owned conversations (transitively) and their forks are all in `conversations`. */
  readonly scopeLoaded = new Set<ConversationId>();
  /** Whether the conversations below `id` and their forks are all in memory. */
  hasScope(id: ConversationId): boolean {
    return this.scopeLoaded.has(id);
  }
  readonly docs = new Map<DocKey, Json>();
  /** Conversations whose documents and head are in `docs`, `docVersions`, `docPatchRows`, `heads`. */
  readonly docsLoaded = new Set<ConversationId>();
  /** Per loaded conversation, the `head` of its newest head marker: where its active range starts. */
  readonly heads = new Map<ConversationId, EntryId>();
  /** Definition versions of documents stored at a version other than 1. */
  readonly docVersions = new Map<DocKey, number>();
  /** Stored patch rows per document (doc-patch.ts); a whole write of the document deletes them. */
  readonly docPatchRows = new Map<DocKey, number>();
  /** The incarnation of each document in `docs`. */
  readonly docMeta = new Map<DocKey, DocMeta>();
  /** Live tasks' live task documents, by name (complete: read at open, kept by merges). */
  readonly tasksWithDocs = new Map<TaskId, Set<string>>();
  /** Live tasks in id order of insertion (ids only grow). */
  readonly live = new Set<TaskId>();
  /** Live tasks owned by a task. */
  readonly children = new Map<TaskId, Set<TaskId>>();
  /** Live, non-background, conversation-owned tasks of a conversation. */
  readonly conversationTasks = new Map<ConversationId, Set<TaskId>>();
  /** Conversations owned by a task. */
  readonly ownedConversations = new Map<TaskId, Set<ConversationId>>();
  /**
   * Owner edges of terminal tasks this process never held that sit on the owner chain of a loaded
   * task-owned conversation (read with it: conversation-load.ts): traversal follows them after a
   * reopen, so a finished background ancestor stays a boundary. A deletion drops the edges of its
   * conversations' tasks.
   */
  readonly formerOwners = new Map<TaskId, OwnerEdge>();
  /** Task ids below nextTaskId the store was read for and holds no row of (a deleted conversation's). */
  readonly tasksAbsent = new Set<TaskId>();
  /** Unsettled submissions, and every one seen in this process (settled ones are read on demand). */
  readonly submissions = new Map<SubmissionId, SubmissionRecord>();
  /** Fork points read from the store (fork.ts), by `forkPointKey`: facts about committed entries. */
  readonly forkPoints = new Map<string, ForkPoint>();
  /** `${conversationId}:${requestId}` of the submissions in `submissions`. */
  readonly requests = new Map<string, SubmissionId>();
  /**
   * `${conversationId}:${requestId}` keys the store was read for and had no submission under (the
   * session's `ensureRequest` and `submissionByRequest`): a lookup in a commit answers "none" without
   * another read. A key leaves once a submission takes it.
   */
  readonly requestsAbsent = new Set<string>();
  /**
   * Conversations with an id from this one on were created in this process (or moved in through it),
   * so every submission they ever admitted is in `submissions`: a lookup by requestId needs no read.
   */
  firstNewConversationId = ROOT_CONVERSATION_ID + 1;
  /** Every move record, by `moveKey(role, transfer)` (all are read at open: move.ts). */
  readonly moves = new Map<string, MoveRecord>();
  /** Staged parts of incoming packages (move.ts `stage`), by transfer: their count and each part's bytes. */
  readonly staged = new Map<string, StagedTransfer>();
  /** Conversations that are away (an `out` move `pending` or `done`), with that move. */
  readonly away = new Map<ConversationId, MoveRecord & { role: "out" }>();
  /** Diagnostics of stored rows that could not be read (shared by a clone: bookkeeping, not records). */
  readonly corrupt: Map<TaskId, string>;
  /** Tasks found running at open: their phase started under an engine that stopped mid-phase (shared). */
  readonly interrupted: Set<TaskId>;
  nextTaskId = 1;
  nextEntryId = 1;
  /** Id 1 is reserved for the root conversation (`TxImpl.createRoot`). */
  nextConversationId = 2;
  nextSubmissionId = 1;
  nextDocId = 1;
  seq = 0;
  /** The rules new conversation incarnations are created with (see DocRules; shared by a clone). */
  docRules: DocRules = () => LATEST;
  /** Overlays applied to this copy so far: a draft made over it is current while this is unchanged. */
  applied = 0;

  constructor(shared: { corrupt?: Map<TaskId, string>; interrupted?: Set<TaskId> } = {}) {
    this.corrupt = shared.corrupt ?? new Map();
    this.interrupted = shared.interrupted ?? new Set();
  }

  /** An independent copy (the maps and the ownership indices copied, records shared: they are immutable). */
  clone(): Records {
    const r = new Records({ corrupt: this.corrupt, interrupted: this.interrupted });
    for (const [k, v] of this.tasks) r.tasks.set(k, v);
    for (const [k, v] of this.conversations) r.conversations.set(k, v);
    for (const [k, v] of this.docs) r.docs.set(k, v);
    for (const [k, v] of this.heads) r.heads.set(k, v);
    for (const [k, v] of this.docVersions) r.docVersions.set(k, v);
    for (const [k, v] of this.docPatchRows) r.docPatchRows.set(k, v);
    for (const [k, v] of this.docMeta) r.docMeta.set(k, v);
    for (const [k, v] of this.tasksWithDocs) r.tasksWithDocs.set(k, new Set(v));
    for (const id of this.live) r.live.add(id);
    for (const id of this.docsLoaded) r.docsLoaded.add(id);
    for (const id of this.scopeLoaded) r.scopeLoaded.add(id);
    for (const [k, v] of this.children) r.children.set(k, new Set(v));
    for (const [k, v] of this.conversationTasks) r.conversationTasks.set(k, new Set(v));
    for (const [k, v] of this.ownedConversations) r.ownedConversations.set(k, new Set(v));
    for (const [k, v] of this.submissions) r.submissions.set(k, v);
    for (const [k, v] of this.requests) r.requests.set(k, v);
    for (const k of this.requestsAbsent) r.requestsAbsent.add(k);
    r.firstNewConversationId = this.firstNewConversationId;
    for (const [k, v] of this.forkPoints) r.forkPoints.set(k, v);
    for (const [k, v] of this.formerOwners) r.formerOwners.set(k, v);
    for (const k of this.tasksAbsent) r.tasksAbsent.add(k);
    for (const [k, v] of this.moves) r.moves.set(k, v);
    for (const [k, v] of this.away) r.away.set(k, v);
    for (const [k, v] of this.staged) r.staged.set(k, { count: v.count, parts: new Map(v.parts) });
    r.nextTaskId = this.nextTaskId;
    r.nextEntryId = this.nextEntryId;
    r.nextConversationId = this.nextConversationId;
    r.nextSubmissionId = this.nextSubmissionId;
    r.nextDocId = this.nextDocId;
    r.seq = this.seq;
    r.docRules = this.docRules;
    return r;
  }

  /** A task on an owner chain: its record when in memory, else its edge as read at open. */
  ownerEdge(id: TaskId): OwnerEdge | undefined {
    return this.tasks.get(id) ?? this.formerOwners.get(id);
  }

  putSubmission(record: SubmissionRecord): void {
    this.submissions.set(record.id, record);
    if (record.requestId !== undefined) {
      const key = `${record.conversationId}:${record.requestId}`;
      this.requests.set(key, record.id);
      this.requestsAbsent.delete(key);
    }
  }

  /** Throw `DocsNotLoaded` unless the conversation's documents are in memory. */
  needDocs(conversationId: ConversationId): void {
    if (!this.docsLoaded.has(conversationId)) throw new DocsNotLoaded(conversationId);
  }

  getDoc(conversationId: ConversationId, name: string): Json | undefined {
    this.needDocs(conversationId);
    return this.docs.get(docKey(conversationId, name));
  }

  /** The stored definition version of a document (undefined when the document is absent). */
  docVersion(conversationId: ConversationId, name: string): number | undefined {
    this.needDocs(conversationId);
    const key = docKey(conversationId, name);
    return this.docs.has(key) ? (this.docVersions.get(key) ?? 1) : undefined;
  }

  /**
   * Take a conversation's documents as read from the store. Called inside a store job (a read on the
   * line), so what was read is exactly what is committed: nothing merged since can be newer.
   */
  installDocs(conversationId: ConversationId, loaded: LoadedDocs): void {
    if (this.docsLoaded.has(conversationId)) return;
    for (const [name, { value, version, meta }] of loaded.docs) {
      const key = docKey(conversationId, name);
      this.docs.set(key, value);
      // A record from before the fork rule was stored gets it here, once (storedSemantics).
      const complete = conversationId <= 0 || (meta.history !== undefined && meta.fork !== undefined);
      this.docMeta.set(key, complete ? meta : storedSemantics(meta, this.docRules(name)));
      if (version !== 1) this.docVersions.set(key, version);
      else this.docVersions.delete(key);
    }
    for (const [name, rows] of loaded.patchRows) this.docPatchRows.set(docKey(conversationId, name), rows);
    if (loaded.head !== undefined) this.heads.set(conversationId, loaded.head);
    this.docsLoaded.add(conversationId);
  }

  putTask(record: TaskRecord): void {
    inertTask(record);
    const before = this.tasks.get(record.id);
    this.tasks.set(record.id, record);
    const live = record.state.status !== "terminal";
    if (before && before.state.status !== "terminal" && !live) this.#unindex(record);
    else if (!before && live) this.#index(record);
  }

  putStaged(transfer: string, index: number, count: number, bytes: number): void {
    let staged = this.staged.get(transfer);
    if (!staged) this.staged.set(transfer, (staged = { count, parts: new Map() }));
    staged.parts.set(index, bytes);
  }

  putMove(record: MoveRecord): void {
    this.moves.set(moveKey(record.role, record.transfer), record);
    if (record.role !== "out") return;
    if (record.status === "cancelled") {
      if (this.away.get(record.conversationId)?.transfer === record.transfer)
        this.away.delete(record.conversationId);
    } else this.away.set(record.conversationId, record);
  }

  putConversation(record: ConversationRecord): void {
    this.conversations.set(record.id, record);
    if (record.owner) addTo(this.ownedConversations, record.owner.taskId, record.id);
  }

  /**
   * Take conversation records read from the store (with their chains: conversation-load.ts). Called
   * inside a store job on the line, so nothing merged since can differ (records never change once
   * created); one already in memory is kept.
   */
  installConversations(loaded: LoadedConversations): void {
    for (const c of loaded.conversations) if (!this.conversations.has(c.id)) this.putConversation(c);
    for (const edge of loaded.edges)
      if (!this.tasks.has(edge.id) && !this.formerOwners.has(edge.id)) this.formerOwners.set(edge.id, edge);
  }

  /** Whether a conversation's record is known: in memory, or known absent (its documents are loaded). */
  knowsConversation(id: ConversationId): boolean {
    return this.conversations.has(id) || this.docsLoaded.has(id);
  }

  #index(record: TaskRecord): void {
    this.live.add(record.id);
    if (record.owner !== undefined) addTo(this.children, record.owner, record.id);
    else if (!record.background) addTo(this.conversationTasks, record.conversationId, record.id);
  }

  #unindex(record: TaskRecord): void {
    this.live.delete(record.id);
    if (record.owner !== undefined) removeFrom(this.children, record.owner, record.id);
    else if (!record.background) removeFrom(this.conversationTasks, record.conversationId, record.id);
  }

  /** Count the patch rows a group's combined writes stored (after they were written). */
  notePatchRows(writes: Overlay): void {
    for (const key of writes.docs.keys()) {
      const patches = writes.docPatches.get(key);
      if (patches) this.docPatchRows.set(key, (this.docPatchRows.get(key) ?? 0) + patches.length);
      else this.docPatchRows.delete(key);
    }
  }

  /**
   * Merge a successful overlay; returns its change set, frozen with its lists and document items
   * (spec §1: commit observers capture immutable state; one listener cannot change what the next
   * sees). The records in it are frozen where they are made.
   */
  merge(overlay: Overlay): ChangeSet {
    this.apply(overlay);
    return Object.freeze({
      seq: ++this.seq,
      tasks: Object.freeze(valuesOf(overlay.tasks)),
      entries: Object.freeze(overlay.entries),
      conversations: Object.freeze(valuesOf(overlay.conversations)),
      submissions: Object.freeze(valuesOf(overlay.submissions)),
      ...(overlay.deleted.size > 0 ? { deletedConversations: Object.freeze([...overlay.deleted]) } : {}),
      ...(overlay.moves.size > 0 ? { moves: Object.freeze([...overlay.moves.values()]) } : {}),
      docs:
        overlay.docs.size === 0
          ? EMPTY_LIST
          : Object.freeze(
              [...overlay.docs].map(([key, value]) => {
                const { rowKey, name } = splitDocKey(key);
                // Built whole (a spread of a fresh literal cost more than the rest of the merge).
                return Object.freeze(
                  value === undefined
                    ? { conversationId: rowKey, name, value }
                    : {
                        conversationId: rowKey,
                        name,
                        value,
                        version: this.docVersions.get(key) ?? 1,
                        id: this.docMeta.get(key)!.id,
                      },
                );
              }),
            ),
    });
  }

  /** Merge a successful overlay without making its change set (the line's own copy). */
  apply(overlay: Overlay): void {
    this.applied++;
    // Most collections of an overlay are empty: each loop is skipped without making an iterator.
    if (overlay.conversations.size > 0)
      for (const c of overlay.conversations.values()) {
        // A conversation created here has all its documents in this overlay, and everything that
        // names it (forks, owned conversations) is created after it, in this process.
        if (!this.conversations.has(c.id)) {
          this.docsLoaded.add(c.id);
          this.scopeLoaded.add(c.id);
        }
        this.putConversation(c);
      }
    // A fork's active range starts where its parent's did at its entry, until it writes a head.
    if (overlay.forkHeads.size > 0) for (const [c, head] of overlay.forkHeads) this.heads.set(c, head);
    if (overlay.tasks.size > 0) for (const t of overlay.tasks.values()) this.putTask(t);
    if (overlay.submissions.size > 0) for (const sub of overlay.submissions.values()) this.putSubmission(sub);
    for (const e of overlay.entries) if (e.head !== undefined) this.heads.set(e.conversationId, e.head);
    if (overlay.docs.size > 0)
      for (const [key, value] of overlay.docs) {
        if (value === undefined) this.docs.delete(key);
        else this.docs.set(key, value);
        const version = overlay.docVersions.get(key);
        if (value === undefined || version === 1) this.docVersions.delete(key);
        else if (version !== undefined) this.docVersions.set(key, version);
      }
    if (overlay.docMetaChanges.size > 0)
      for (const [key, meta] of overlay.docMetaChanges) {
        if (meta) this.docMeta.set(key, meta);
        else this.docMeta.delete(key);
      }
    for (const life of overlay.docLife) {
      const { rowKey, name } = splitDocKey(life.key);
      if (rowKey >= 0) continue;
      const taskId = -rowKey;
      if (life.kind === "create") addTo(this.tasksWithDocs, taskId, name);
      else removeFrom(this.tasksWithDocs, taskId, name);
    }
    if (overlay.deleted.size > 0) for (const id of overlay.deleted) this.#forget(id);
    if (overlay.moves.size > 0) for (const m of overlay.moves.values()) this.putMove(m);
    if (overlay.stagedParts.size > 0)
      for (const p of overlay.stagedParts.values()) this.putStaged(p.transfer, p.index, p.count, p.bytes);
    if (overlay.unstaged.size > 0) for (const transfer of overlay.unstaged) this.staged.delete(transfer);
    this.nextTaskId = overlay.nextTaskId;
    this.nextEntryId = overlay.nextEntryId;
    this.nextConversationId = overlay.nextConversationId;
    this.nextSubmissionId = overlay.nextSubmissionId;
    this.nextDocId = overlay.nextDocId;
  }

  /**
   * Drop a deleted conversation and everything of it held in memory, owner edges of its finished
   * tasks included. Its tasks are all terminal (the deletion was refused otherwise), so no live index
   * names them; its unsettled submissions (queued with nothing to run them) go too.
   */
  #forget(id: ConversationId): void {
    const record = this.conversations.get(id);
    if (record?.owner) removeFrom(this.ownedConversations, record.owner.taskId, id);
    this.conversations.delete(id);
    const prefix = `${id}:`;
    for (const map of [
      this.docs,
      this.docVersions,
      this.docPatchRows,
      this.docMeta,
      this.forkPoints,
      this.requests,
      this.requestsAbsent,
    ])
      for (const key of map.keys()) if (key.startsWith(prefix)) map.delete(key);
    this.docsLoaded.delete(id);
    this.scopeLoaded.delete(id);
    this.heads.delete(id);
    this.away.delete(id);
    for (const [taskId, t] of this.tasks) {
      if (t.conversationId !== id) continue;
      this.tasks.delete(taskId);
      this.ownedConversations.delete(taskId);
    }
    for (const [taskId, edge] of this.formerOwners)
      if (edge.conversationId === id) this.formerOwners.delete(taskId);
    for (const [subId, sub] of this.submissions)
      if (sub.conversationId === id) this.submissions.delete(subId);
  }
}

// Shared empty collections for overlays that never wrote that kind of record (never mutated: the
// getters hand them out read-only).
const EMPTY_MAP: ReadonlyMap<never, never> = new Map<never, never>();
const EMPTY_SET: ReadonlySet<never> = new Set<never>();
const EMPTY_LIST: readonly never[] = Object.freeze([]);

/**
 * One commit's writes, readable through (reads fall back to the committed records). Its collections
 * are made on first write: most commits touch one or two kinds of record, and the scheduler plans
 * against a fresh overlay that usually writes nothing.
 */
export class Overlay {
  #tasks: Map<TaskId, TaskRecord> | undefined;
  #created: Set<TaskId> | undefined;
  #migratedInputs: Set<TaskId> | undefined;
  #conversations: Map<ConversationId, ConversationRecord> | undefined;
  #entries: EntryRecord[] | undefined;
  #docs: Map<DocKey, Json | undefined> | undefined;
  /** Versions given with this overlay's whole document writes. */
  #docVersions: Map<DocKey, number> | undefined;
  /** Documents this overlay changed only by patches, with the patches (others are written whole). */
  #docPatches: Map<DocKey, DocPatch[]> | undefined;
  /** Incarnations this overlay started (a DocMeta) or ended (null), by key: the final state. */
  #docMeta: Map<DocKey, DocMeta | null> | undefined;
  #docLife: DocLife[] | undefined;
  #submissions: Map<SubmissionId, SubmissionRecord> | undefined;
  #createdSubmissions: Set<SubmissionId> | undefined;
  /** Forks created here whose inherited active range starts at a head (see `activeHead`). */
  #forkHeads: Map<ConversationId, EntryId> | undefined;
  #deleted: Set<ConversationId> | undefined;
  #moves: Map<string, MoveRecord> | undefined;
  #stagedParts: Map<string, StagedPart> | undefined;
  #unstaged: Set<string> | undefined;
  /**
   * This commit handed out ids no row will hold (an adopted entry's `byTaskId` naming a task that did
   * not move): the counters' high-water marks are stored with it, as a deletion stores them.
   */
  keepsIdMarks = false;
  /** The first entry id this commit could append (document history rows are keyed by it: fork.ts). */
  readonly firstEntryId: number;
  nextTaskId: number;
  nextSubmissionId: number;
  nextEntryId: number;
  nextConversationId: number;
  nextDocId: number;
  sealed = false;
  /**
   * The scheduler's own plan, found to leave nothing for another plan: merging it wakes no drain
   * (`Scheduler.#settled`).
   */
  settled = false;
  /**
   * The first throw of a conversation creation hook in this commit (spec §2.2: "a throw fails the
   * creating commit"): the commit fails with it even when the callback caught it.
   */
  creationFailure: { readonly error: unknown } | undefined;
  /** The first conversation whose documents this overlay needed but memory lacked (see DocsNotLoaded). */
  missingDocs: ConversationId | undefined;
  /** The first fork point this overlay needed but memory lacked (loaded, then the callback runs again). */
  missingFork: { parent: ConversationId; at: EntryId } | undefined;
  /** The first conversation whose scope (Records.scopeLoaded) this overlay needed but memory lacked. */
  missingScope: ConversationId | undefined;
  /** The first lookup by requestId whose answer may be in the store only (see RequestNotLoaded). */
  missingRequest: { conversationId: ConversationId; requestId: string } | undefined;
  /** The first task whose owner edge this overlay needed but memory lacked (see TaskNotLoaded). */
  missingTask: TaskId | undefined;

  constructor(readonly base: Records) {
    this.nextTaskId = base.nextTaskId;
    this.nextEntryId = base.nextEntryId;
    this.firstEntryId = base.nextEntryId;
    this.nextConversationId = base.nextConversationId;
    this.nextSubmissionId = base.nextSubmissionId;
    this.nextDocId = base.nextDocId;
  }

  get tasks(): ReadonlyMap<TaskId, TaskRecord> {
    return this.#tasks ?? EMPTY_MAP;
  }
  get created(): ReadonlySet<TaskId> {
    return this.#created ?? EMPTY_SET;
  }
  /** Tasks whose input a migration rewrote (inputs are otherwise written once). */
  get migratedInputs(): ReadonlySet<TaskId> {
    return this.#migratedInputs ?? EMPTY_SET;
  }
  get conversations(): ReadonlyMap<ConversationId, ConversationRecord> {
    return this.#conversations ?? EMPTY_MAP;
  }
  get entries(): readonly EntryRecord[] {
    return this.#entries ?? EMPTY_LIST;
  }
  get docs(): ReadonlyMap<DocKey, Json | undefined> {
    return this.#docs ?? EMPTY_MAP;
  }
  get docVersions(): ReadonlyMap<DocKey, number> {
    return this.#docVersions ?? EMPTY_MAP;
  }
  get docPatches(): ReadonlyMap<DocKey, readonly DocPatch[]> {
    return this.#docPatches ?? EMPTY_MAP;
  }
  /** Incarnations started (meta) or ended (null) here, by key. */
  get docMetaChanges(): ReadonlyMap<DocKey, DocMeta | null> {
    return this.#docMeta ?? EMPTY_MAP;
  }
  /** Incarnations created and retired here, in order. */
  get docLife(): readonly DocLife[] {
    return this.#docLife ?? EMPTY_LIST;
  }

  /** A document's live incarnation as of this overlay (its documents must be loaded). */
  docMetaOf(key: DocKey): DocMeta | undefined {
    const mine = this.#docMeta?.get(key);
    if (mine !== undefined) return mine ?? undefined;
    return this.base.docMeta.get(key);
  }
  get submissions(): ReadonlyMap<SubmissionId, SubmissionRecord> {
    return this.#submissions ?? EMPTY_MAP;
  }
  get createdSubmissions(): ReadonlySet<SubmissionId> {
    return this.#createdSubmissions ?? EMPTY_SET;
  }
  get forkHeads(): ReadonlyMap<ConversationId, EntryId> {
    return this.#forkHeads ?? EMPTY_MAP;
  }

  /** Conversations this commit deletes with everything in them (worker/core/delete.ts). */
  get deleted(): ReadonlySet<ConversationId> {
    return this.#deleted ?? EMPTY_SET;
  }

  /** Move records this commit writes (move.ts). */
  get moves(): ReadonlyMap<string, MoveRecord> {
    return this.#moves ?? EMPTY_MAP;
  }

  /** Package parts this commit stores (move.ts `stage`), by `transfer:index`. */
  get stagedParts(): ReadonlyMap<string, StagedPart> {
    return this.#stagedParts ?? EMPTY_MAP;
  }

  /** Transfers whose staged parts this commit deletes (after storing this commit's own). */
  get unstaged(): ReadonlySet<string> {
    return this.#unstaged ?? EMPTY_SET;
  }

  stagePart(part: StagedPart): void {
    (this.#stagedParts ??= new Map()).set(`${part.transfer}:${part.index}`, part);
  }

  unstage(transfer: string): void {
    (this.#unstaged ??= new Set()).add(transfer);
  }

  /** A transfer's staged parts as of this commit: their count and each index's bytes. */
  stagedOf(transfer: string): StagedTransfer | undefined {
    if (this.#unstaged?.has(transfer)) return undefined;
    const base = this.base.staged.get(transfer);
    let out: StagedTransfer | undefined = base && { count: base.count, parts: new Map(base.parts) };
    for (const p of this.#stagedParts?.values() ?? [])
      if (p.transfer === transfer) {
        out ??= { count: p.count, parts: new Map() };
        out.parts.set(p.index, p.bytes);
      }
    return out;
  }

  setMove(record: MoveRecord): void {
    (this.#moves ??= new Map()).set(moveKey(record.role, record.transfer), record);
  }

  move(role: MoveRecord["role"], transfer: string): MoveRecord | undefined {
    const key = moveKey(role, transfer);
    return this.#moves?.get(key) ?? this.base.moves.get(key);
  }

  /** The move that holds a conversation away (an `out` move `pending` or `done`), this commit's included. */
  away(conversationId: ConversationId): (MoveRecord & { role: "out" }) | undefined {
    if (this.#moves)
      for (const m of [...this.#moves.values()].reverse())
        if (m.role === "out" && m.conversationId === conversationId)
          return m.status === "cancelled" ? undefined : m;
    return this.base.away.get(conversationId);
  }

  markDeleted(id: ConversationId): void {
    (this.#deleted ??= new Set()).add(id);
  }

  setForkHead(conversationId: ConversationId, head: EntryId): void {
    (this.#forkHeads ??= new Map()).set(conversationId, head);
  }

  markCreated(id: TaskId): void {
    (this.#created ??= new Set()).add(id);
  }
  markMigrated(id: TaskId): void {
    (this.#migratedInputs ??= new Set()).add(id);
  }
  setConversation(record: ConversationRecord): void {
    (this.#conversations ??= new Map()).set(record.id, record);
  }
  pushEntry(entry: EntryRecord): void {
    (this.#entries ??= []).push(entry);
  }
  markCreatedSubmission(id: SubmissionId): void {
    (this.#createdSubmissions ??= new Set()).add(id);
  }

  /** Add another overlay's writes to this one (later versions of a record replace earlier ones). */
  absorb(from: Overlay): void {
    // Most collections of an overlay are empty: each loop is skipped without making an iterator.
    if (from.conversations.size > 0) for (const c of from.conversations.values()) this.setConversation(c);
    if (from.tasks.size > 0) for (const t of from.tasks.values()) this.#putTask(t);
    if (from.docMetaChanges.size > 0)
      for (const [key, meta] of from.docMetaChanges) (this.#docMeta ??= new Map()).set(key, meta);
    if (from.docLife.length > 0) (this.#docLife ??= []).push(...from.docLife);
    this.nextDocId = Math.max(this.nextDocId, from.nextDocId);
    if (from.created.size > 0) for (const id of from.created) this.markCreated(id);
    if (from.migratedInputs.size > 0) for (const id of from.migratedInputs) this.markMigrated(id);
    for (const e of from.entries) this.pushEntry(e);
    if (from.docs.size > 0)
      for (const [key, value] of from.docs) {
        const patches = from.docPatches.get(key);
        const mine = this.#docPatches?.get(key);
        // Patches extend this overlay's own patches, or an untouched document; a whole write wins.
        if (patches && (mine || !this.docs.has(key))) this.#notePatches(key, patches);
        else this.#docPatches?.delete(key);
        (this.#docs ??= new Map()).set(key, value);
        const version = from.docVersions.get(key);
        if (version !== undefined) (this.#docVersions ??= new Map()).set(key, version);
      }
    if (from.submissions.size > 0) for (const sub of from.submissions.values()) this.setSubmission(sub);
    if (from.createdSubmissions.size > 0)
      for (const id of from.createdSubmissions) this.markCreatedSubmission(id);
    if (from.forkHeads.size > 0) for (const [c, head] of from.forkHeads) this.setForkHead(c, head);
    if (from.deleted.size > 0) for (const id of from.deleted) this.markDeleted(id);
    if (from.moves.size > 0) for (const m of from.moves.values()) this.setMove(m);
    if (from.stagedParts.size > 0) for (const p of from.stagedParts.values()) this.stagePart(p);
    if (from.unstaged.size > 0) for (const transfer of from.unstaged) this.unstage(transfer);
    if (from.keepsIdMarks) this.keepsIdMarks = true;
  }

  submission(id: SubmissionId): SubmissionRecord | undefined {
    return this.submissions.get(id) ?? this.base.submissions.get(id);
  }

  submissionByRequest(conversationId: ConversationId, requestId: string): SubmissionRecord | undefined {
    for (const s of this.submissions.values()) {
      if (s.conversationId === conversationId && s.requestId === requestId) return s;
    }
    const key = `${conversationId}:${requestId}`;
    const id = this.base.requests.get(key);
    if (id !== undefined) return this.submission(id);
    // Created in this process (or this commit), or read before and absent: memory has every one.
    if (conversationId >= this.base.firstNewConversationId || this.base.requestsAbsent.has(key))
      return undefined;
    this.missingRequest ??= { conversationId, requestId };
    throw new RequestNotLoaded(conversationId, requestId);
  }

  setSubmission(record: SubmissionRecord): void {
    (this.#submissions ??= new Map()).set(record.id, record);
  }

  task(id: TaskId): TaskRecord | undefined {
    return this.tasks.get(id) ?? this.base.tasks.get(id);
  }

  /**
   * A conversation's record on this commit's candidate records. One that may be stored but is not
   * loaded throws `DocsNotLoaded` (remembered: the session loads its record with its documents and
   * runs the callback again).
   */
  conversation(id: ConversationId): ConversationRecord | undefined {
    if (this.#deleted?.has(id)) return undefined;
    const record = this.#conversations?.get(id) ?? this.base.conversations.get(id);
    if (record !== undefined) return record;
    // Never created (ids are never reused), or known absent.
    if (!Number.isSafeInteger(id) || id < 1 || id >= this.base.nextConversationId) return undefined;
    if (this.base.docsLoaded.has(id)) return undefined;
    this.missingDocs ??= id;
    throw new DocsNotLoaded(id);
  }

  /**
   * Throw `ScopeNotLoaded` (remembered) unless the conversations below `id` and their forks are all
   * in memory (a deletion's judgement reads them).
   */
  needScope(id: ConversationId): void {
    if (this.base.hasScope(id)) return;
    if (this.#conversations?.has(id) && !this.base.conversations.has(id)) return; // created here
    this.missingScope ??= id;
    throw new ScopeNotLoaded(id);
  }

  ownerEdge(id: TaskId): OwnerEdge | undefined {
    return this.task(id) ?? this.base.formerOwners.get(id);
  }

  /**
   * A task's owner edge wherever it is: in memory, read before, or (a task that ended before this
   * process opened) read from the store: `TaskNotLoaded` until it is. Undefined for an id with no row.
   */
  loadedEdge(id: TaskId): OwnerEdge | undefined {
    const edge = this.ownerEdge(id);
    if (edge !== undefined || this.base.tasksAbsent.has(id) || !this.exists(id)) return edge;
    this.missingTask ??= id;
    throw new TaskNotLoaded(id);
  }

  /** Throw (and remember) `DocsNotLoaded` unless the conversation's documents are at hand. */
  needDocs(conversationId: ConversationId): void {
    this.#needDocs(conversationId);
  }

  #needDocs(conversationId: ConversationId): void {
    if (this.base.docsLoaded.has(conversationId)) return;
    // Created in this commit: every document it has is in this overlay.
    if (this.#conversations?.has(conversationId) && !this.base.conversations.has(conversationId)) return;
    if (conversationId < 0 && this.#created?.has(-conversationId)) return; // a task created here
    this.missingDocs ??= conversationId;
    throw new DocsNotLoaded(conversationId);
  }

  getDoc(conversationId: ConversationId, name: string): Json | undefined {
    this.#needDocs(conversationId);
    const key = docKey(conversationId, name);
    return this.docs.has(key) ? this.docs.get(key) : this.base.docs.get(key);
  }

  /**
   * Write a document whole; without a version it keeps the version it is stored at (1 when new). A
   * write to an address with no live incarnation starts one (spec §3.2).
   */
  setDoc(
    conversationId: ConversationId,
    name: string,
    value: Json,
    version?: number,
    semantics?: DocSemantics,
  ): void {
    this.#needDocs(conversationId);
    const key = docKey(conversationId, name);
    if (this.docMetaOf(key) === undefined) {
      // A conversation incarnation's rules are fixed here, in its record: given (a fork's copy keeps
      // its source's), else the rules for its name; every later decision reads them from the record.
      const rules = conversationId > 0 ? (semantics ?? this.base.docRules(name)) : undefined;
      const meta: DocMeta = {
        id: this.nextDocId++,
        createdAt: this.firstEntryId,
        ...(rules ? { history: rules.history, fork: rules.fork } : {}),
      };
      (this.#docMeta ??= new Map()).set(key, meta);
      (this.#docLife ??= []).push({
        kind: "create",
        key,
        id: meta.id,
        at: this.firstEntryId,
        semantics: rules,
      });
    }
    (this.#docs ??= new Map()).set(key, value);
    this.#docPatches?.delete(key);
    if (version !== undefined) (this.#docVersions ??= new Map()).set(key, version);
  }

  /**
   * End a document's live incarnation (spec §3.3 `retireDoc`); an absent one is left absent (no
   * creation). Returns whether one was retired. A later write starts a new incarnation at version 1
   * unless it names one.
   */
  retireDoc(conversationId: ConversationId, name: string): boolean {
    this.#needDocs(conversationId);
    const key = docKey(conversationId, name);
    const meta = this.docMetaOf(key);
    if (meta === undefined) return false;
    (this.#docs ??= new Map()).set(key, undefined);
    this.#docPatches?.delete(key);
    (this.#docVersions ??= new Map()).set(key, 1);
    (this.#docMeta ??= new Map()).set(key, null);
    (this.#docLife ??= []).push({ kind: "retire", key, id: meta.id, at: this.firstEntryId });
    return true;
  }

  /** Where the conversation's active range starts (its newest head marker's `head`), this commit included. */
  activeHead(conversationId: ConversationId): EntryId | undefined {
    this.#needDocs(conversationId);
    const entries = this.entries;
    for (let i = entries.length - 1; i >= 0; i--) {
      const e = entries[i]!;
      if (e.conversationId === conversationId && e.head !== undefined) return e.head;
    }
    return this.#forkHeads?.get(conversationId) ?? this.base.heads.get(conversationId);
  }

  docVersion(conversationId: ConversationId, name: string): number | undefined {
    const key = docKey(conversationId, name);
    if (this.getDoc(conversationId, name) === undefined) return undefined;
    return this.#docVersions?.get(key) ?? this.base.docVersions.get(key) ?? 1;
  }

  /**
   * Change a document by patches: the new value is computed here, and unless this overlay already
   * writes the document whole, only the patches are stored, until the document would hold more
   * than PATCH_ROW_LIMIT patch rows (then it is written whole).
   */
  patchDoc(conversationId: ConversationId, name: string, patches: readonly DocPatch[]): Json {
    this.#needDocs(conversationId);
    const key = docKey(conversationId, name);
    const value = applyDocPatches(this.getDoc(conversationId, name), patches);
    const whole = this.docs.has(key) && !this.#docPatches?.has(key);
    (this.#docs ??= new Map()).set(key, value);
    if (whole) return value;
    const pending = (this.#docPatches?.get(key)?.length ?? 0) + patches.length;
    if ((this.base.docPatchRows.get(key) ?? 0) + pending > PATCH_ROW_LIMIT) this.#docPatches?.delete(key);
    else this.#notePatches(key, patches);
    return value;
  }

  #notePatches(key: DocKey, patches: readonly DocPatch[]): void {
    const map = (this.#docPatches ??= new Map());
    const list = map.get(key);
    if (list) list.push(...patches);
    else map.set(key, [...patches]);
  }

  /**
   * Put a task's candidate record. One becoming terminal here retires its task documents in this
   * commit (spec §3.1, §5.3), those created earlier in it included; its documents are loaded first
   * (DocsNotLoaded reruns the commit) only when it has some.
   */
  setTask(record: TaskRecord): void {
    if (record.state.status === "terminal" && this.task(record.id)?.state.status !== "terminal")
      this.#retireTaskDocs(record.id);
    this.#putTask(record);
  }

  #putTask(record: TaskRecord): void {
    inertTask(record);
    (this.#tasks ??= new Map()).set(record.id, record);
  }

  #retireTaskDocs(taskId: TaskId): void {
    const rowKey = -taskId;
    const names = new Set(this.base.tasksWithDocs.get(taskId));
    for (const life of this.#docLife ?? []) {
      const split = splitDocKey(life.key);
      if (split.rowKey === rowKey) names.add(split.name);
    }
    if (names.size === 0) return;
    for (const name of names) this.retireDoc(rowKey, name);
  }

  /**
   * Refuse task-document access for a task that is missing or terminal in this commit (spec §3.3:
   * a terminal candidate rejects later task-document access).
   */
  checkTaskDocs(taskId: TaskId): void {
    const t = this.task(taskId);
    if (!t && !this.exists(taskId))
      throw new InvalidTransition(`no task ${taskId}: its documents cannot be reached`);
    if (!t || t.state.status === "terminal")
      throw new InvalidTransition(`task ${taskId} is terminal: its documents are retired`);
  }

  /** Every live task is in memory, and ids below `nextTaskId` all exist: an unknown one is terminal. */
  exists(id: TaskId): boolean {
    return this.task(id) !== undefined || (Number.isInteger(id) && id >= 1 && id < this.nextTaskId);
  }

  isTerminal(id: TaskId): boolean {
    const t = this.task(id);
    return t ? t.state.status === "terminal" : this.exists(id);
  }

  isLive(id: TaskId): boolean {
    const t = this.task(id);
    return t !== undefined && t.state.status !== "terminal";
  }

  /** Live tasks owned by `taskId`, judged on this commit's candidate records. */
  liveChildren(taskId: TaskId): TaskId[] {
    const out: TaskId[] = [];
    for (const id of this.base.children.get(taskId) ?? []) if (this.isLive(id)) out.push(id);
    for (const t of this.tasks.values()) {
      if (this.created.has(t.id) && t.owner === taskId && t.state.status !== "terminal") out.push(t.id);
    }
    return out;
  }

  /** Live non-background conversation-owned tasks of a conversation, on candidate records. */
  liveConversationTasks(conversationId: ConversationId): TaskId[] {
    const out: TaskId[] = [];
    for (const id of this.base.conversationTasks.get(conversationId) ?? []) if (this.isLive(id)) out.push(id);
    for (const t of this.tasks.values()) {
      if (
        this.created.has(t.id) &&
        t.owner === undefined &&
        !t.background &&
        t.conversationId === conversationId &&
        t.state.status !== "terminal"
      ) {
        out.push(t.id);
      }
    }
    return out;
  }

  ownedConversations(taskId: TaskId): ConversationId[] {
    const out = [...(this.base.ownedConversations.get(taskId) ?? [])];
    for (const c of this.conversations.values()) if (c.owner?.taskId === taskId) out.push(c.id);
    return out;
  }

  /** The live ordinary owned work of a task (spec §5.5): the tasks it owns, the tasks in conversations it owns. */
  liveOwnedWork(taskId: TaskId): TaskId[] {
    const out = this.liveChildren(taskId);
    for (const c of this.ownedConversations(taskId)) out.push(...this.liveConversationTasks(c));
    return out;
  }

  /** Whether `liveOwnedWork(taskId)` holds anything (stops at the first). */
  hasLiveOwnedWork(taskId: TaskId): boolean {
    if (this.liveChildren(taskId).length > 0) return true;
    for (const c of this.ownedConversations(taskId))
      if (this.liveConversationTasks(c).length > 0) return true;
    return false;
  }

  /** The task that owns `record` for cascades: its owner task, or the task owning its conversation. */
  ownerTask(record: TaskRecord): TaskId | undefined {
    if (record.owner !== undefined) return record.owner;
    if (record.background) return undefined;
    return this.conversation(record.conversationId)?.owner?.taskId;
  }
}

type Writable<T> = { -readonly [K in keyof T]: T[K] };

/** What `patchTask` may change; `memos: null` drops them. */
export interface TaskPatch {
  version?: number;
  input?: Json;
  abortRequested?: boolean;
  state?: TaskRecord["state"];
  memos?: Readonly<Record<string, Json>> | null;
  startedAt?: number;
  endedAt?: number;
}

/**
 * A task record built field by field in the one order every record of this process has: the eight
 * fields every task has, then `owner`, `memos`, `startedAt` and `endedAt` when present. Records are
 * made at every commit, and a spread (`{ ...t, endedAt }`, or a conditional `...(x ? { x } : {})`)
 * takes V8's slow path, about a microsecond each; one field order keeps the records to a few
 * shapes, so the engine's reads of them (the scheduler's plans, the merges, the rows) stay fast.
 */
export function taskRecord(
  fields: Pick<
    TaskRecord,
    "id" | "conversationId" | "kind" | "version" | "input" | "background" | "abortRequested" | "state"
  >,
  owner: TaskId | undefined,
  memos: TaskRecord["memos"],
  startedAt: number | undefined,
  endedAt: number | undefined,
): TaskRecord {
  const r: Writable<TaskRecord> = {
    id: fields.id,
    conversationId: fields.conversationId,
    kind: fields.kind,
    version: fields.version,
    input: fields.input,
    background: fields.background,
    abortRequested: fields.abortRequested,
    state: fields.state,
  };
  if (owner !== undefined) r.owner = owner;
  if (memos !== undefined) r.memos = memos;
  if (startedAt !== undefined) r.startedAt = startedAt;
  if (endedAt !== undefined) r.endedAt = endedAt;
  return r;
}

/**
 * Freeze a task record as it is put (spec §5.1: no transaction replaces a task or marks it; the
 * scheduler and abortTask own those). tx.getTask and Harness.getTask hand out the stored record
 * itself, so a write to an unfrozen one marked or replaced the task in memory, never in the store
 * (draw 34cB). Records are built whole (patchTask) and never changed once put.
 */
export function inertTask(record: TaskRecord): TaskRecord {
  if (Object.isFrozen(record)) return record;
  if (record.owner) Object.freeze(record.owner);
  return Object.freeze(record);
}

/** A copy of `t` with `patch` applied (`taskRecord`'s field order). */
export function patchTask(t: TaskRecord, patch: TaskPatch): TaskRecord {
  const r: Writable<TaskRecord> = {
    id: t.id,
    conversationId: t.conversationId,
    kind: t.kind,
    version: patch.version ?? t.version,
    input: patch.input !== undefined ? patch.input : t.input,
    background: t.background,
    abortRequested: patch.abortRequested ?? t.abortRequested,
    state: patch.state ?? t.state,
  };
  if (t.owner !== undefined) r.owner = t.owner;
  const memos = patch.memos === null ? undefined : (patch.memos ?? t.memos);
  if (memos !== undefined) r.memos = memos;
  const startedAt = patch.startedAt ?? t.startedAt;
  if (startedAt !== undefined) r.startedAt = startedAt;
  const endedAt = patch.endedAt ?? t.endedAt;
  if (endedAt !== undefined) r.endedAt = endedAt;
  return r;
}

function valuesOf<V>(map: ReadonlyMap<unknown, V>): readonly V[] {
  return map.size === 0 ? EMPTY_LIST : [...map.values()];
}

function addTo<K, V>(map: Map<K, Set<V>>, key: K, value: V): void {
  let set = map.get(key);
  if (!set) map.set(key, (set = new Set()));
  set.add(value);
}

function removeFrom<K, V>(map: Map<K, Set<V>>, key: K, value: V): void {
  const set = map.get(key);
  if (!set) return;
  set.delete(value);
  if (set.size === 0) map.delete(key);
}

/**
 * A conversation incarnation's meta as read from its record, its rules completed: a record stored
 * before records kept the fork rule (schema 7 gave old documents their history only) takes the fork
 * rule `rules` gives its name, "current" when that asks for "asOf" of a document that kept no history.
 */
export function storedSemantics(meta: DocMeta, rules: DocSemantics): DocMeta {
  if (meta.history !== undefined && meta.fork !== undefined) return meta;
  const history = meta.history ?? rules.history;
  const fork = meta.fork ?? (rules.fork === "asOf" && history !== "rewindable" ? "current" : rules.fork);
  return { ...meta, history, fork };
}

/** A conversation incarnation's rules from its meta ("latest"/"current" for one that has none). */
export function semanticsOf(meta: DocMeta | undefined): DocSemantics {
  return meta?.history !== undefined && meta.fork !== undefined
    ? { history: meta.history, fork: meta.fork }
    : LATEST;
}
