/**
 * The transaction a commit callback receives: reads see the commit's own overlay, writes go into it,
 * and every call checks the rules at the boundary (ownership, JSON values, known conversations and
 * phases) so a bad write fails its own commit with a typed error. Valid only while its callback runs
 * (the overlay is sealed afterwards).
 */
import type { AnyTaskDefinition, CreateTaskOptions, Tx } from "./define.ts";
import { deletionSet } from "./delete.ts";
import type { DocPatch } from "./doc-patch.ts";
import { ConversationMoved, EntryNotVisible, InvalidTransition, UnknownConversation } from "./errors.ts";
import { type DocumentFork, forkPointKey, isEntryId } from "./fork.ts";
import { liveOwner } from "./ownership.ts";
import { assertJson, sealBuilt } from "./persist.ts";
import { type DocMeta, type DocSemantics, type Overlay, semanticsOf, taskRecord } from "./records.ts";
import type { Session } from "./session.ts";
import { SPILL_KEY } from "./spill.ts";
import {
  type ConversationId,
  type ConversationOwnership,
  type ConversationRecord,
  type DocScope,
  type DocumentRecord,
  docRowKey,
  type EntryDraft,
  type EntryId,
  type EntryRecord,
  type Json,
  ROOT_CONVERSATION_ID,
  type SubmissionId,
  type SubmissionRecord,
  type TaskId,
  type TaskRecord,
} from "./types.ts";

export interface TxContext {
  /** The task whose runtime commits (entries record it; tasks it creates default to its conversation). */
  byTaskId?: TaskId;
}

/** The transaction handed to commit callbacks. Valid only while its callback runs. */
export class TxImpl implements Tx {
  constructor(
    readonly session: Session,
    readonly overlay: Overlay,
    readonly context: TxContext,
  ) {}

  #open(): Overlay {
    if (this.overlay.sealed)
      throw new InvalidTransition("this transaction has ended; use the one of the current commit");
    return this.overlay;
  }

  /** The overlay, once the conversation is known to be writable here (not moving, not moved: move.ts). */
  #writable(conversationId: ConversationId): Overlay {
    const o = this.#open();
    refuseAway(o, conversationId);
    return o;
  }

  now(): number {
    return this.session.now();
  }

  /** Run the creation hook; a throw fails this commit, even if the callback catches it (spec §2.2). */
  #created(o: Overlay, record: ConversationRecord): void {
    try {
      this.session.onConversationCreated(this, record);
    } catch (error) {
      o.creationFailure ??= { error };
      throw error;
    }
  }

  getTask(id: TaskId): TaskRecord | undefined {
    return this.#open().task(id);
  }

  conversation(id: ConversationId): ConversationRecord | undefined {
    return this.#open().conversation(id);
  }

  ownedConversations(taskId: TaskId): ConversationId[] {
    return this.#open()
      .ownedConversations(taskId)
      .sort((a, b) => a - b);
  }

  lastEntryId(): number {
    return this.#open().nextEntryId - 1;
  }

  createTask(definition: AnyTaskDefinition, input: unknown, options: CreateTaskOptions): TaskId {
    const o = this.#open();
    const ownership = options?.ownership;
    if (ownership?.kind !== "conversation" && ownership?.kind !== "task")
      throw new InvalidTransition(
        "createTask needs an explicit ownership: { kind: 'conversation' } or { kind: 'task', taskId }",
      );
    let conversationId = options.conversationId;
    let owner: TaskId | undefined;
    if (ownership.kind === "task") {
      const ownerRecord = liveOwner(o, ownerTaskId(ownership, "createTask"));
      if (conversationId !== undefined && conversationId !== ownerRecord.conversationId) {
        throw new InvalidTransition("a child task lives in its owner's conversation");
      }
      if (options.background) throw new InvalidTransition("only conversation-owned tasks may be background");
      conversationId = ownerRecord.conversationId;
      owner = ownerRecord.id;
    } else {
      // The conversation defaults to the committing task's (the transaction's bound conversation).
      conversationId ??=
        this.context.byTaskId !== undefined
          ? (o.task(this.context.byTaskId)?.conversationId ?? ROOT_CONVERSATION_ID)
          : ROOT_CONVERSATION_ID;
    }
    if (!o.conversation(conversationId)) throw new UnknownConversation(conversationId);
    refuseAway(o, conversationId);
    const checkpoint = options.start ?? definition.initial(input);
    if (
      !checkpoint ||
      typeof checkpoint.phase !== "string" ||
      !Object.hasOwn(definition.phases, checkpoint.phase)
    )
      throw new InvalidTransition(
        `task ${definition.name} has no phase ${String((checkpoint as { phase?: unknown } | undefined)?.phase)}`,
      );
    assertJson(input);
    assertJson(checkpoint);
    this.session.onDefinition(definition);
    const id = o.nextTaskId++;
    o.markCreated(id);
    o.setTask(
      taskRecord(
        {
          id,
          conversationId,
          kind: definition.name,
          version: definition.version,
          input: input as Json,
          background: options.background === true,
          abortRequested: false,
          state: options.reserve
            ? sealBuilt({ status: "running", checkpoint })
            : sealBuilt({ status: "pending", checkpoint }),
        },
        owner,
        undefined,
        options.reserve ? this.session.now() : undefined,
        undefined,
      ),
    );
    return id;
  }

  appendEntry(conversationId: ConversationId, draft: EntryDraft): EntryRecord {
    const o = this.#writable(conversationId);
    if (!o.conversation(conversationId)) throw new UnknownConversation(conversationId);
    assertJson(draft);
    // A stored body with this key is read as spilled (spill.ts): a draft carrying it would be misread.
    if (Object.hasOwn(draft, SPILL_KEY))
      throw new InvalidTransition(`an entry draft may not carry the key ${SPILL_KEY}: it is reserved`);
    if (draft.edits !== undefined) checkEdits(draft.edits, o.nextEntryId);
    // `head: "self"` (spec §2: an EntryDraft's head) names the entry being appended.
    const head = (draft.head === "self" ? o.nextEntryId : draft.head) as unknown;
    if (
      head !== undefined &&
      !(Number.isInteger(head) && (head as number) >= 1 && (head as number) <= o.nextEntryId)
    )
      throw new InvalidTransition(
        `an entry's head must name it or an earlier entry, not ${JSON.stringify(head)}`,
      );
    // Frozen (its contents were by assertJson): the caller and every commit listener get this same
    // record, so a write to it would change what they hold, never the store (spec §1.5, §4).
    // A draft's own byTaskId (not an EntryDraft field: spec §2) is dropped: only a task's commit
    // attributes an entry, from its context below.
    const { byTaskId: _notTaken, ...body } = draft as EntryDraft & { byTaskId?: unknown };
    const entry: EntryRecord = Object.freeze({
      ...(body as Omit<EntryDraft, "head">),
      ...(draft.head === "self" ? { head: head as EntryId } : {}),
      id: o.nextEntryId++,
      conversationId,
      ...(this.context.byTaskId !== undefined ? { byTaskId: this.context.byTaskId } : {}),
    });
    o.pushEntry(entry);
    return entry;
  }

  appendedEntries(conversationId: ConversationId): readonly EntryRecord[] {
    const own = this.#open().entries.filter((e) => e.conversationId === conversationId);
    const group = this.session.unpublishedEntries(conversationId);
    return group.length > 0 ? [...group, ...own] : own;
  }

  createConversation(ownership: ConversationOwnership): ConversationRecord {
    const o = this.#open();
    const record: ConversationRecord = inert({
      id: o.nextConversationId++,
      createdAt: this.session.now(),
      ...this.#owner(o, ownership, "createConversation"),
    });
    o.setConversation(record);
    this.#created(o, record);
    return record;
  }

  /**
   * The root conversation (id 1, reserved: other creations never take it), ownerless, with the
   * creation hook like any creation. Refused when it exists. The core's (not on `Tx`): the harness
   * creates it at open or lazily (`Harness.ensureRoot`).
   */
  createRoot(): ConversationRecord {
    const o = this.#open();
    if (o.conversation(ROOT_CONVERSATION_ID))
      throw new InvalidTransition("the root conversation exists already");
    const record: ConversationRecord = inert({ id: ROOT_CONVERSATION_ID, createdAt: this.session.now() });
    o.setConversation(record);
    this.#created(o, record);
    return record;
  }

  #owner(o: Overlay, ownership: ConversationOwnership, what: string): Pick<ConversationRecord, "owner"> {
    if (ownership?.kind !== "ownerless" && ownership?.kind !== "task")
      throw new InvalidTransition(
        `${what} needs an explicit ownership: { kind: 'ownerless' } or { kind: 'task', taskId }`,
      );
    if (ownership.kind === "ownerless") return {};
    const t = liveOwner(o, ownerTaskId(ownership, what));
    return { owner: { taskId: t.id, conversationId: t.conversationId } };
  }

  /**
   * A fork of `parentId` at entry `at` (spec §3.7): the child sees the parent's history through `at`,
   * starts its active range where the parent's was at `at`, and gets the parent's documents by each
   * one's fork rule as its record holds it (spec §3.7, whatever rules this process declares for its
   * name): "current" copies the committed value (this commit's own writes to the parent's documents,
   * before the fork or after it, are refused, not copied), "asOf" the value at the end of the commit
   * that appended `at`, "initial" nothing. Each copy is a new incarnation with its source's history
   * and fork rule. Then the creation hook runs, as for any creation.
   */
  forkConversation(
    parentId: ConversationId,
    at: EntryId,
    options: { ownership: ConversationOwnership },
  ): ConversationRecord {
    const o = this.#open();
    if (!o.conversation(parentId)) throw new UnknownConversation(parentId);
    // No entry has an id that is not a positive integer (draw 36b).
    if (!isEntryId(at)) throw new EntryNotVisible(parentId, at);
    const point = o.base.forkPoints.get(forkPointKey(parentId, at));
    if (!point) {
      o.missingFork ??= { parent: parentId, at };
      throw new InvalidTransition(`the fork point ${parentId}@${at} is not loaded`);
    }
    if (!point.visible) throw new EntryNotVisible(parentId, at);
    const owner = this.#owner(o, options?.ownership, "forkConversation");
    o.needDocs(parentId); // its documents are copied from memory
    const prefix = `${parentId}:`;
    for (const key of o.docs.keys())
      if (key.startsWith(prefix) && forkOf(o, key, key.slice(prefix.length)) === "current")
        throw new InvalidTransition(
          `a fork of conversation ${parentId} cannot be created in a commit that writes its document ${key.slice(prefix.length)}`,
        );
    const record: ConversationRecord = inert({
      id: o.nextConversationId++,
      createdAt: this.session.now(),
      parent: { conversationId: parentId, at },
      ...owner,
    });
    o.setConversation(record);
    if (point.head !== undefined) o.setForkHead(record.id, point.head);
    for (const [key, value] of o.base.docs) {
      if (!key.startsWith(prefix)) continue;
      const name = key.slice(prefix.length);
      const semantics = semanticsOf(o.base.docMeta.get(key));
      if (semantics.fork === "initial") continue;
      const asOf = semantics.fork === "asOf" ? point.asOf.get(name) : undefined;
      if (asOf) {
        if (asOf.value !== undefined) o.setDoc(record.id, name, asOf.value, asOf.version, semantics);
      } else if (semantics.fork === "asOf")
        continue; // no value at `at`: first written after it
      else o.setDoc(record.id, name, value, o.base.docVersions.get(key) ?? 1, semantics);
    }
    // An "asOf" document deleted since `at` (or written first after it) is not in the parent now
    // (the fork point holds only documents whose record said "asOf": fork.ts `loadForkPoint`).
    for (const [name, asOf] of point.asOf)
      if (asOf.value !== undefined && !o.base.docs.has(prefix + name))
        o.setDoc(record.id, name, asOf.value, asOf.version, AS_OF);
    this.#created(o, record);
    return record;
  }

  /**
   * Delete a conversation with the conversations its tasks own: their entries, documents, tasks and
   * submissions go in this commit. Refused with `ConversationNotDeletable` (root, owned, forked or
   * busy: see delete.ts) or `UnknownConversation`. Returns the ids deleted, `conversationId` first.
   */
  deleteConversation(conversationId: ConversationId): ConversationId[] {
    const o = this.#open();
    // A moved conversation's read-only copy may go; one moving may not (the move is in flight).
    if (o.away(conversationId)?.status === "pending") refuseAway(o, conversationId);
    const set = deletionSet(o, conversationId);
    for (const id of set) o.markDeleted(id);
    return set;
  }

  submission(id: SubmissionId): SubmissionRecord | undefined {
    return this.#open().submission(id);
  }

  submissionByRequest(conversationId: ConversationId, requestId: string): SubmissionRecord | undefined {
    return this.#open().submissionByRequest(conversationId, requestId);
  }

  createSubmission(record: Omit<SubmissionRecord, "id">): SubmissionRecord {
    const o = this.#writable(record.conversationId);
    if (!o.conversation(record.conversationId)) throw new UnknownConversation(record.conversationId);
    assertJson(record);
    // Frozen like a created entry: the caller gets the engine's own record (its contents were frozen
    // by assertJson), so a write to it would change the submission in memory, never in the store.
    const sub: SubmissionRecord = Object.freeze({ ...record, id: o.nextSubmissionId++ });
    o.markCreatedSubmission(sub.id);
    o.setSubmission(sub);
    return sub;
  }

  updateSubmission(record: SubmissionRecord): void {
    const o = this.#open();
    const before = o.submission(record.id);
    if (!before) throw new InvalidTransition(`no submission ${record.id}`);
    refuseAway(o, before.conversationId);
    assertJson(record);
    o.setSubmission(record);
  }

  readDoc<T extends Json>(scope: DocScope, name: string): T | undefined {
    const o = this.#open();
    return o.getDoc(this.#scopeKey(o, scope), name) as T | undefined;
  }

  writeDoc(scope: DocScope, name: string, value: Json, version?: number, semantics?: DocSemantics): void {
    if (version !== undefined && !(Number.isInteger(version) && version >= 1))
      throw new InvalidTransition(`a document version must be a positive integer, not ${version}`);
    if (value === undefined)
      throw new InvalidTransition(`document ${name}: undefined is not a value (retireDoc ends a document)`);
    // Spec §3.1: fork "asOf" requires history "rewindable", on the raw path too (defineDoc checks a token's).
    if (semantics?.fork === "asOf" && semantics.history !== "rewindable")
      throw new InvalidTransition(`document ${name}: fork "asOf" needs history "rewindable"`);
    const o = this.#open();
    const key = this.#scopeKey(o, scope);
    if (key > 0) {
      refuseAway(o, key);
      this.#refuseForkSourceWrite(o, key, name);
    }
    // Checked once per commit, on the final value (validateOverlay).
    o.setDoc(key, name, value, version, key > 0 ? semantics : undefined);
  }

  retireDoc(scope: DocScope, name: string): void {
    const o = this.#open();
    const key = this.#scopeKey(o, scope);
    if (key > 0) {
      refuseAway(o, key);
      this.#refuseForkSourceWrite(o, key, name);
    }
    o.retireDoc(key, name);
  }

  docRecord(scope: DocScope, name: string): DocumentRecord | undefined {
    const o = this.#open();
    const key = this.#scopeKey(o, scope);
    o.getDoc(key, name); // loaded (or DocsNotLoaded)
    const meta = o.docMetaOf(`${key}:${name}`);
    if (!meta) return undefined;
    // An incarnation's record never changes (its meta and the session's rules are fixed): made once,
    // frozen and shared, since a typed document token checks it at every read.
    let record = recordsByMeta.get(meta);
    if (!record) {
      record = documentRecord(key, name, meta);
      Object.freeze(record.scope);
      recordsByMeta.set(meta, Object.freeze(record));
    }
    return record;
  }

  /** The row key of a scope; a task's documents only while it is live in this commit. */
  #scopeKey(o: Overlay, scope: DocScope): number {
    const key = docRowKey(scope);
    if (key < 0) o.checkTaskDocs(-key);
    return key;
  }

  /**
   * A fork's source may not change in the commit that forks it (spec §3.7): the child copies the
   * parent's committed "current" documents, so a write to one of them after the fork, in the same
   * commit, is refused as one before it is (forkConversation): the copy has one source revision.
   */
  #refuseForkSourceWrite(o: Overlay, conversationId: ConversationId, name: string): void {
    for (const c of o.conversations.values()) {
      if (c.parent?.conversationId !== conversationId) continue;
      if (forkOf(o, `${conversationId}:${name}`, name) !== "current") return;
      throw new InvalidTransition(
        `conversation ${conversationId} was forked in this commit: its document ${name} cannot change in it (the fork copies its committed value; commit the change first)`,
      );
    }
  }

  docVersion(scope: DocScope, name: string): number | undefined {
    const o = this.#open();
    return o.docVersion(this.#scopeKey(o, scope), name);
  }

  activeHead(conversationId: ConversationId): EntryId | undefined {
    return this.#open().activeHead(conversationId);
  }

  patchDoc(scope: DocScope, name: string, patches: readonly DocPatch[]): Json {
    const o = this.#open();
    const key = this.#scopeKey(o, scope);
    if (key > 0) {
      refuseAway(o, key);
      this.#refuseForkSourceWrite(o, key, name);
    }
    // The new value is checked once per commit with the rest (validateOverlay).
    return o.patchDoc(key, name, patches);
  }
}

/** Throw ConversationMoved when the conversation is away (moving or moved: move.ts). */
export function refuseAway(o: Overlay, conversationId: ConversationId): void {
  const away = o.away(conversationId);
  if (!away) return;
  throw new ConversationMoved(
    conversationId,
    away.status === "pending" ? "moving" : "moved",
    away.transfer,
    away.remote,
  );
}

/** Edits name earlier entries and say omit, or replace with a list of messages. */
function checkEdits(edits: unknown, nextId: number): void {
  if (!Array.isArray(edits)) throw new InvalidTransition("entry edits must be an array");
  for (const edit of edits as Array<Record<string, unknown>>) {
    const target = edit?.["target"];
    if (typeof target !== "number" || !Number.isInteger(target) || target < 1 || target >= nextId)
      throw new InvalidTransition(`an edit must target an earlier entry, not ${JSON.stringify(target)}`);
    const action = edit["action"];
    if (action === "omit") continue;
    if (action !== "replace") throw new InvalidTransition(`unknown edit action ${JSON.stringify(action)}`);
    if (!Array.isArray(edit["messages"]))
      throw new InvalidTransition("a replace edit needs messages (an array)");
  }
}

/**
 * A created conversation's record, frozen with its parent and owner pairs (spec §3.3: creation
 * returns an inert record): the caller and the creation hooks get the engine's own record, so a
 * write to it would rewrite the conversation in memory, never in the store.
 */
function inert(record: ConversationRecord): ConversationRecord {
  if (record.parent) Object.freeze(record.parent);
  if (record.owner) Object.freeze(record.owner);
  return Object.freeze(record);
}

/** The rules of a copy whose source the fork point read "asOf". */
const AS_OF: DocSemantics = Object.freeze({ history: "rewindable", fork: "asOf" });

/**
 * A conversation document's fork rule as its record holds it: the live incarnation's in this commit,
 * else the one this commit retired; for one with no record (about to be created), the rule it will
 * be created with.
 */
function forkOf(o: Overlay, key: string, name: string): DocumentFork {
  return (o.docMetaOf(key) ?? o.base.docMeta.get(key))?.fork ?? o.base.docRules(name).fork;
}

/**
 * The public record of a live incarnation held under `rowKey` (see `docRowKey`). A conversation
 * document's history and fork rule are its record's, fixed when the incarnation was created
 * (spec §3.2: the record keeps its semantics whatever definitions this process holds; records.ts
 * DocMeta).
 */
/** Each incarnation's record, by its meta object (one per incarnation, for its session's life). */
const recordsByMeta = new WeakMap<DocMeta, DocumentRecord>();

export function documentRecord(rowKey: number, name: string, meta: DocMeta): DocumentRecord {
  const base = { id: meta.id, kind: name };
  if (rowKey === 0) return { ...base, scope: { kind: "session" }, createdAt: meta.createdAt };
  if (rowKey < 0) return { ...base, scope: { kind: "task", taskId: -rowKey }, createdAt: meta.createdAt };
  const { history, fork } = semanticsOf(meta);
  return {
    ...base,
    scope: { kind: "conversation", conversationId: rowKey },
    history,
    fork,
    createdAt: meta.createdAt,
  };
}

/** The owner a `{ kind: "task" }` ownership names: a task id, else refused at the door (never inferred). */
function ownerTaskId(ownership: { taskId?: unknown }, what: string): TaskId {
  const id = ownership.taskId;
  if (typeof id !== "number" || !Number.isSafeInteger(id) || id < 1)
    throw new InvalidTransition(`${what}: ownership { kind: 'task' } needs its owner's taskId (a task id)`);
  return id as TaskId;
}
