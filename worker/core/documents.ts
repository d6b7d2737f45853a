/**
 * Reads of the document model (spec §3.2-3.3) outside a commit: `snapshotAsOf`, a rewindable
 * conversation document as it was at the end of an entry's commit, and `DocumentState`, a read-only
 * view bound to one committed incarnation.
 *
 * Invariants:
 * - `readAsOf` validates that the entry is visible through the conversation's ancestry, reads the
 *   ancestor that owns the entry, picks the incarnation whose `[created_at, retired_at)` holds the
 *   entry (never today's by default), and its value from `doc_history` within that lifetime; it
 *   never creates or writes anything. Whether the document is rewindable is that incarnation's
 *   record's rule, not the rules the process declares for its name. Legacy incarnations without
 *   history rows read their current value.
 * - a `DocumentState` takes its baseline from the published records and subscribes in the same
 *   synchronous step (no commit can land between them), follows only commits that wrote its
 *   incarnation, and ends (value undefined, `ended`) at the commit that retires it, when it is
 *   disposed, or when the harness closes. Its listeners run later, in a microtask, never on the
 *   commit line.
 */
import type { Sql } from "../store/types.ts";
import { applyDocPatches, type DocPatch } from "./doc-patch.ts";
import { EntryNotVisible } from "./errors.ts";
import type { Segment } from "./fork.ts";
import type { ChangeSet, ConversationId, DocumentId, DocumentRecord, EntryId, Json } from "./types.ts";

/** A document value read through an incarnation: its id, the value and its stored version. */
export interface DocumentSnapshot {
  readonly id: DocumentId;
  readonly value: Json;
  readonly version: number;
}

function parse(text: unknown): Json | undefined {
  if (text === null || text === undefined) return undefined;
  try {
    return JSON.parse(String(text)) as Json;
  } catch {
    return undefined; // unreadable: absent, like an unreadable document
  }
}

/**
 * `name` in `conversationId` as of entry `at` (see the module header), with the history rule of the
 * incarnation alive then as its record holds it (undefined when none was, or its record predates the
 * rule); the caller refuses one that is not rewindable. Throws EntryNotVisible.
 */
export async function readAsOf(
  sql: Sql,
  conversationId: ConversationId,
  segments: readonly Segment[],
  name: string,
  at: EntryId,
): Promise<{ snapshot: DocumentSnapshot | undefined; history: "latest" | "rewindable" | undefined }> {
  const incarnation = await incarnationAt(sql, conversationId, segments, name, at);
  if (!incarnation) return { snapshot: undefined, history: undefined };
  const history = incarnation.history;
  return {
    history,
    snapshot: history === "rewindable" ? await valueAsOf(sql, incarnation, name, at) : undefined,
  };
}

async function incarnationAt(
  sql: Sql,
  conversationId: ConversationId,
  segments: readonly Segment[],
  name: string,
  at: EntryId,
): Promise<
  | { owner: ConversationId; id: number; createdAt: number; history: "latest" | "rewindable" | undefined }
  | undefined
> {
  const row = Number.isSafeInteger(at)
    ? await sql.get("SELECT conversation_id FROM entries WHERE id = ?", [at])
    : undefined;
  const owner = row === undefined ? undefined : Number(row["conversation_id"]);
  if (!segments.some((s) => s.conversationId === owner && at <= s.cap))
    throw new EntryNotVisible(conversationId, at);
  const incarnation = await sql.get(
    "SELECT id, created_at, history FROM doc_records WHERE row_key = ? AND kind = ? AND created_at <= ? AND (retired_at IS NULL OR retired_at > ?) ORDER BY id DESC LIMIT 1",
    [owner!, name, at, at],
  );
  if (!incarnation) return undefined;
  const history = incarnation["history"];
  return {
    owner: owner!,
    id: Number(incarnation["id"]),
    createdAt: Number(incarnation["created_at"]),
    history: history === "rewindable" || history === "latest" ? history : undefined,
  };
}

/** An incarnation's value at the end of the commit of entry `at`. */
async function valueAsOf(
  sql: Sql,
  incarnation: { owner: ConversationId; id: number; createdAt: number },
  name: string,
  at: EntryId,
): Promise<DocumentSnapshot | undefined> {
  const { owner, id } = incarnation;
  const history = await sql.get(
    "SELECT value, version FROM doc_history WHERE conversation_id = ? AND name = ? AND since_entry >= ? AND since_entry <= ? ORDER BY since_entry DESC, id DESC LIMIT 1",
    [owner, name, incarnation.createdAt, at],
  );
  if (history) {
    const value = parse(history["value"]);
    return value === undefined ? undefined : { id, value, version: Number(history["version"]) };
  }
  // Stored before history existed: the value it has now, if it is still this incarnation (its row
  // found by the primary key, then checked for the incarnation: doc_id has no index, spec §11.2).
  const current = await sql.get(
    "SELECT value, version FROM documents WHERE conversation_id = ? AND name = ? AND doc_id = ?",
    [owner, name, id],
  );
  if (!current) return undefined;
  let value = parse(current["value"]);
  if (value === undefined) return undefined;
  for (const patch of await sql.all(
    "SELECT op FROM doc_patches WHERE conversation_id = ? AND name = ? ORDER BY id",
    [owner, name],
  )) {
    try {
      value = applyDocPatches(value, [JSON.parse(String(patch["op"])) as DocPatch]);
    } catch {
      // Skipped, as at open.
    }
  }
  return { id, value, version: Number(current["version"]) };
}

/**
 * A read-only state of one committed incarnation (spec §3.3 `documentState`). `value` is its
 * committed value (undefined once retired or disposed; the last one once closed); `subscribe` listeners run after each commit that changed
 * it, and once more when it ends by retirement.
 */
export class DocumentState {
  #value: Json | undefined;
  #version: number;
  #ended = false;
  #listeners = new Set<() => void>();
  #unsubscribe: () => void;

  constructor(
    readonly record: DocumentRecord,
    baseline: { value: Json; version: number },
    readonly rowKey: number,
    subscribe: (listener: (change: ChangeSet) => void) => () => void,
    private readonly onEnd: (state: DocumentState) => void,
  ) {
    this.#value = baseline.value;
    this.#version = baseline.version;
    this.#unsubscribe = subscribe((change) => this.#apply(change));
  }

  get value(): Json | undefined {
    return this.#value;
  }

  get version(): number {
    return this.#version;
  }

  get ended(): boolean {
    return this.#ended;
  }

  /** Called after each later commit that changed this incarnation, and when it is retired. */
  subscribe(listener: () => void): () => void {
    if (this.#ended) return () => undefined;
    // Each call is a subscription of its own: its unsubscribe ends that one only.
    const subscription = () => listener();
    this.#listeners.add(subscription);
    return () => {
      this.#listeners.delete(subscription);
    };
  }

  /** Stop following; idempotent. */
  dispose(): void {
    this.end({ notify: false });
  }

  /**
   * End it (retired, disposed, closed). Closing keeps the last value (spec §9.1: the state ends at
   * the seal with its last value); retirement and disposal leave it undefined.
   */
  end(options: { notify: boolean; keepValue?: boolean }): void {
    if (this.#ended) return;
    this.#ended = true;
    if (!options.keepValue) this.#value = undefined;
    this.#unsubscribe();
    this.onEnd(this);
    const listeners = options.notify ? [...this.#listeners] : [];
    this.#listeners.clear();
    if (listeners.length > 0) queueMicrotask(() => notifyAll(listeners));
  }

  #apply(change: ChangeSet): void {
    // A deletion of its conversation ends it, also when the commit lists no document change: a
    // deletion removes the documents without a retirement of each (found by break pass 28H).
    if (change.deletedConversations?.includes(this.rowKey)) {
      this.end({ notify: true });
      return;
    }
    if (change.docs.length === 0) return;
    for (const doc of change.docs) {
      if (doc.conversationId !== this.rowKey || doc.name !== this.record.kind) continue;
      if (doc.value === undefined || doc.id !== this.record.id) {
        this.end({ notify: true });
        return;
      }
      this.#value = doc.value;
      this.#version = doc.version ?? 1;
      const listeners = [...this.#listeners];
      if (listeners.length > 0) queueMicrotask(() => notifyAll(listeners));
    }
  }
}

function notifyAll(listeners: ReadonlyArray<() => void>): void {
  for (const listener of listeners) listener();
}
