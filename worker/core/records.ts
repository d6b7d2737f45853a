/**
 * The engine's in-memory mirror of committed records, and the overlay a commit writes into.
 * Invariants:
 * - `Records` holds every live task, every conversation and every document; terminal tasks are kept
 *   once seen in this process (older ones are read from the store on demand);
 * - an overlay is merged only after its callback and its SQL writes succeeded, so a failing
 *   callback leaves no trace; merging is synchronous and assigns the commit's `seq`;
 * - the ownership indices (live children per owner task, live conversation tasks, owned
 *   conversations) always match `tasks`.
 */
import type {
  ChangeSet,
  ConversationId,
  ConversationRecord,
  EntryRecord,
  Json,
  SubmissionId,
  SubmissionRecord,
  TaskId,
  TaskRecord,
} from "./types.ts";

type DocKey = string; // `${conversationId}:${name}`
const docKey = (conversationId: ConversationId, name: string): DocKey => `${conversationId}:${name}`;

export class Records {
  readonly tasks = new Map<TaskId, TaskRecord>();
  readonly conversations = new Map<ConversationId, ConversationRecord>();
  readonly docs = new Map<DocKey, Json>();
  /** Live tasks in id order of insertion (ids only grow). */
  readonly live = new Set<TaskId>();
  /** Live tasks owned by a task. */
  readonly children = new Map<TaskId, Set<TaskId>>();
  /** Live, non-background, conversation-owned tasks of a conversation. */
  readonly conversationTasks = new Map<ConversationId, Set<TaskId>>();
  /** Conversations owned by a task. */
  readonly ownedConversations = new Map<TaskId, Set<ConversationId>>();
  /** Unsettled submissions, and every one seen in this process (settled ones are read on demand). */
  readonly submissions = new Map<SubmissionId, SubmissionRecord>();
  /** `${conversationId}:${requestId}` of the submissions in `submissions`. */
  readonly requests = new Map<string, SubmissionId>();
  /** Diagnostics of stored rows that could not be read. */
  readonly corrupt = new Map<TaskId, string>();
  /** Tasks found running at open: their phase started under an engine that stopped mid-phase. */
  readonly interrupted = new Set<TaskId>();
  nextTaskId = 1;
  nextEntryId = 1;
  nextConversationId = 1;
  nextSubmissionId = 1;
  seq = 0;

  putSubmission(record: SubmissionRecord): void {
    this.submissions.set(record.id, record);
    if (record.requestId !== undefined)
      this.requests.set(`${record.conversationId}:${record.requestId}`, record.id);
  }

  getDoc(conversationId: ConversationId, name: string): Json | undefined {
    return this.docs.get(docKey(conversationId, name));
  }

  putTask(record: TaskRecord): void {
    const before = this.tasks.get(record.id);
    this.tasks.set(record.id, record);
    const live = record.state.status !== "terminal";
    if (before && before.state.status !== "terminal" && !live) this.#unindex(record);
    else if (!before && live) this.#index(record);
  }

  putConversation(record: ConversationRecord): void {
    this.conversations.set(record.id, record);
    if (record.owner) addTo(this.ownedConversations, record.owner.taskId, record.id);
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

  /** Merge a successful overlay; returns its change set. */
  merge(overlay: Overlay): ChangeSet {
    for (const c of overlay.conversations.values()) this.putConversation(c);
    for (const t of overlay.tasks.values()) this.putTask(t);
    for (const sub of overlay.submissions.values()) this.putSubmission(sub);
    for (const [key, value] of overlay.docs) {
      if (value === undefined) this.docs.delete(key);
      else this.docs.set(key, value);
    }
    this.nextTaskId = overlay.nextTaskId;
    this.nextEntryId = overlay.nextEntryId;
    this.nextConversationId = overlay.nextConversationId;
    this.nextSubmissionId = overlay.nextSubmissionId;
    return {
      seq: ++this.seq,
      tasks: [...overlay.tasks.values()],
      entries: overlay.entries,
      conversations: [...overlay.conversations.values()],
      submissions: [...overlay.submissions.values()],
      docs: [...overlay.docs].map(([key, value]) => {
        const i = key.indexOf(":");
        return { conversationId: Number(key.slice(0, i)), name: key.slice(i + 1), value };
      }),
    };
  }
}

/** One commit's writes, readable through (reads fall back to the committed records). */
export class Overlay {
  readonly tasks = new Map<TaskId, TaskRecord>();
  readonly created = new Set<TaskId>();
  /** Tasks whose input a migration rewrote (inputs are otherwise written once). */
  readonly migratedInputs = new Set<TaskId>();
  readonly conversations = new Map<ConversationId, ConversationRecord>();
  readonly entries: EntryRecord[] = [];
  readonly docs = new Map<DocKey, Json | undefined>();
  readonly submissions = new Map<SubmissionId, SubmissionRecord>();
  readonly createdSubmissions = new Set<SubmissionId>();
  nextTaskId: number;
  nextSubmissionId: number;
  nextEntryId: number;
  nextConversationId: number;
  sealed = false;

  constructor(readonly base: Records) {
    this.nextTaskId = base.nextTaskId;
    this.nextEntryId = base.nextEntryId;
    this.nextConversationId = base.nextConversationId;
    this.nextSubmissionId = base.nextSubmissionId;
  }

  submission(id: SubmissionId): SubmissionRecord | undefined {
    return this.submissions.get(id) ?? this.base.submissions.get(id);
  }

  submissionByRequest(conversationId: ConversationId, requestId: string): SubmissionRecord | undefined {
    for (const s of this.submissions.values()) {
      if (s.conversationId === conversationId && s.requestId === requestId) return s;
    }
    const id = this.base.requests.get(`${conversationId}:${requestId}`);
    return id === undefined ? undefined : this.submission(id);
  }

  setSubmission(record: SubmissionRecord): void {
    this.submissions.set(record.id, record);
  }

  task(id: TaskId): TaskRecord | undefined {
    return this.tasks.get(id) ?? this.base.tasks.get(id);
  }

  conversation(id: ConversationId): ConversationRecord | undefined {
    return this.conversations.get(id) ?? this.base.conversations.get(id);
  }

  getDoc(conversationId: ConversationId, name: string): Json | undefined {
    const key = docKey(conversationId, name);
    return this.docs.has(key) ? this.docs.get(key) : this.base.docs.get(key);
  }

  setDoc(conversationId: ConversationId, name: string, value: Json | undefined): void {
    this.docs.set(docKey(conversationId, name), value);
  }

  setTask(record: TaskRecord): void {
    this.tasks.set(record.id, record);
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

  /** Ordinary owned work of a task that is still live (tasks it owns, tasks in conversations it owns). */
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
 * A copy of `t` with `patch` applied, built field by field. Records change on every commit, and an
 * object spread that adds a field its source lacks (`{ ...t, endedAt }`) takes V8's slow path, about
 * a microsecond each; this keeps one field order, so the records share a few shapes.
 */
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
