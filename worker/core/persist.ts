/**
 * Records to rows and back. Writing serializes strict JSON only (NaN, functions, bigint and the like
 * are refused with `NotJson` before anything reaches SQLite). Reading never throws on bad data: a
 * row that does not parse becomes a placeholder live record plus a diagnostic, which the scheduler
 * turns into a `faulted` outcome for that task alone.
 */
import type { Row, Sql } from "../store/types.ts";
import { NotJson } from "./errors.ts";
import { type Overlay, splitDocKey, taskRecord } from "./records.ts";
import { isSpilled, spillBody, unspill } from "./spill.ts";
import type {
  ConversationRecord,
  EntryRecord,
  Json,
  MoveRecord,
  SubmissionRecord,
  TaskId,
  TaskRecord,
  TaskState,
} from "./types.ts";

/**
 * Throw `NotJson` unless `value` is strict JSON (spec §3.4): plain objects (prototype
 * `Object.prototype` or null) with string keys and data properties, arrays without holes, strings,
 * finite numbers, booleans and null. An undefined member, a Date, a Map, a class instance, a getter,
 * a symbol key, NaN, a function, a bigint or a cycle is refused: `JSON.stringify` would quietly
 * change each of them, so the store would hold something other than what the caller committed.
 * Every object and array in it is frozen: a value handed to a commit is shared with the committed
 * records, so a later mutation by its caller would change memory without changing the store.
 * The walk builds no paths; only a value that fails is walked again to name where.
 */
function checkJson(value: unknown): void {
  if (!isJson(value, 0)) throw new NotJson(describeNotJson(value, "value", 0) ?? "value is not JSON");
}

const objectProto = Object.prototype;
const arrayProto = Array.prototype;

/** A base whose constructor returns the object it is given, so a subclass's `new` stamps that object. */
class Stamped {
  constructor(target: object) {
    // biome-ignore lint/correctness/noConstructorReturn: the return override is how a private field marks an object the class did not make.
    return target as Stamped;
  }
}

/**
 * Objects and arrays found strict JSON (and frozen) by an earlier check, so shared subtrees are walked
 * once: a private field the check adds before it freezes the object (`new CheckedJson(object)`). A
 * private field is invisible to JSON, reflection, structuredClone and equality, and looking for it
 * costs a property read; a WeakSet of every committed object cost more than the walk itself, and
 * its entries were work for every collection. An object that was not extensible before its check
 * (frozen by its caller) cannot take the field everywhere, so it goes to the WeakSet instead.
 */
class CheckedJson extends Stamped {
  #checked = true;
  static has(value: object): boolean {
    return #checked in value || frozenChecked.has(value);
  }
  /** Mark `value` checked and freeze it. */
  static seal(value: object): void {
    if (Object.isExtensible(value)) new CheckedJson(value);
    else frozenChecked.add(value);
    Object.freeze(value);
  }
}
const frozenChecked = new WeakSet<object>();

/**
 * Whether `value` is an object or array an earlier check found strict JSON: it and everything in it
 * are frozen, so whatever is derived from it alone (its text, a resolution) stays true of it.
 */
export function isCheckedJson(value: unknown): boolean {
  return typeof value === "object" && value !== null && CheckedJson.has(value);
}

function isJson(value: unknown, depth: number): boolean {
  switch (typeof value) {
    case "string":
    case "boolean":
      return true;
    case "number":
      return Number.isFinite(value);
    case "object": {
      if (value === null || CheckedJson.has(value)) return true;
      if (depth > 200) return false;
      if (Array.isArray(value)) {
        if (Object.getPrototypeOf(value) !== arrayProto) return false;
        for (let i = 0; i < value.length; i++) {
          if (!(i in value)) return false;
          const item: unknown = value[i];
          if (item === undefined || !isJson(item, depth + 1)) return false;
        }
      } else {
        const proto: unknown = Object.getPrototypeOf(value);
        if (proto !== objectProto && proto !== null) return false;
        if (Object.getOwnPropertySymbols(value).length > 0) return false;
        for (const key in value) {
          const property = Object.getOwnPropertyDescriptor(value, key);
          if (property === undefined || !("value" in property)) return false;
          const item: unknown = property.value;
          if (item === undefined || !isJson(item, depth + 1)) return false;
        }
      }
      CheckedJson.seal(value);
      return true;
    }
    default:
      return false;
  }
}

/**
 * Mark checked (and freeze) an object or array the engine has just built itself, as a literal, a
 * spread or a copy, around parts that are checked already or are checked here: a task's state
 * around its checkpoint or outcome, a wait's copy of its `on` list, the memos with a new one. Its own
 * shape is the engine's (plain, data properties, no symbol keys, no holes), so only its members are
 * looked at: a string, a boolean or null passes, a number must be finite, an object or an array
 * passes at once when an earlier check marked it, and is walked as `assertJson` walks it otherwise
 * (an undefined member fails). So a value from outside (a handler's checkpoint, a tool's result)
 * is still refused with `NotJson`, here rather than when the commit is validated, and the wrapper
 * is not walked again by `validateOverlay`. Never for a value a caller handed in: its shape is
 * what the full check is for. Returns `value`.
 */
export function sealBuilt<T extends object>(value: T): T {
  if (CheckedJson.has(value)) return value;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) if (!isMember(value[i])) checkJson(value);
  } else {
    for (const key in value) if (!isMember(value[key])) checkJson(value);
  }
  CheckedJson.seal(value);
  return value;
}

/** A member of a built value: a leaf by its type, an object or array checked before, else walked. */
function isMember(item: unknown): boolean {
  switch (typeof item) {
    case "string":
    case "boolean":
      return true;
    case "number":
      return Number.isFinite(item);
    case "object":
      return item === null || CheckedJson.has(item) || isJson(item, 1);
    default:
      return false;
  }
}

/** jsonCopy's answer for a value the JSON round trip would change otherwise than by dropping undefined members. */
const NOT_PLAIN: unique symbol = Symbol("not plain");

/**
 * A strict-JSON copy of plain data, made and checked in one walk: what the JSON round trip
 * (`JSON.parse(JSON.stringify(value))`) gives plain data (plain objects and arrays, strings, finite
 * numbers, booleans, null), its undefined members dropped. The copy is the engine's own, built
 * here from data properties alone, so it is strict JSON by construction: each of its objects and
 * arrays is frozen and known checked, and committing it (an entry, a document, a checkpoint) does
 * not walk it again. Undefined when `value` holds anything the round trip would change otherwise
 * (a Date, a class instance, a function, NaN, -0, a hole, a symbol key, an own `__proto__`, a
 * cycle): the caller decides (provider output takes the round trip itself).
 */
export function jsonCopy(value: unknown): Json | undefined {
  const copy = plainCopy(value, 0);
  return copy === NOT_PLAIN ? undefined : (copy as Json);
}

function plainCopy(value: unknown, depth: number): unknown {
  switch (typeof value) {
    case "string":
    case "boolean":
      return value;
    case "number":
      return Number.isFinite(value) && !Object.is(value, -0) ? value : NOT_PLAIN;
    case "object": {
      if (value === null) return null;
      if (depth > 200) return NOT_PLAIN; // the round trip reports a cycle
      const proto: unknown = Object.getPrototypeOf(value);
      let out: unknown[] | Record<string, unknown>;
      if (Array.isArray(value)) {
        if (proto !== arrayProto) return NOT_PLAIN;
        const items: unknown[] = [];
        for (let i = 0; i < value.length; i++) {
          if (!(i in value)) return NOT_PLAIN;
          const item = plainCopy(value[i], depth + 1);
          if (item === NOT_PLAIN) return NOT_PLAIN;
          items.push(item);
        }
        out = items;
      } else {
        if (proto !== objectProto && proto !== null) return NOT_PLAIN;
        const members: Record<string, unknown> = {};
        for (const key of Object.keys(value)) {
          const member: unknown = (value as Record<string, unknown>)[key];
          if (member === undefined) continue;
          if (key === "__proto__") return NOT_PLAIN;
          const item = plainCopy(member, depth + 1);
          if (item === NOT_PLAIN) return NOT_PLAIN;
          members[key] = item;
        }
        out = members;
      }
      CheckedJson.seal(out);
      return out;
    }
    default:
      return NOT_PLAIN;
  }
}

/** Where and why `value` is not JSON (the slow path, for the error message only). */
function describeNotJson(value: unknown, path: string, depth: number): string | undefined {
  switch (typeof value) {
    case "string":
    case "boolean":
      return undefined;
    case "number":
      return Number.isFinite(value) ? undefined : `${path} is ${value}, not JSON`;
    case "undefined":
      return `${path} is undefined, not JSON`;
    case "object": {
      if (value === null) return undefined;
      if (depth > 200) return `${path} is nested too deeply (a cycle?)`;
      if (Array.isArray(value)) {
        if (Object.getPrototypeOf(value) !== arrayProto) return `${path} is not a plain array`;
        for (let i = 0; i < value.length; i++) {
          if (!(i in value)) return `${path}[${i}] is a hole, not JSON`;
          const problem = describeNotJson(value[i], `${path}[${i}]`, depth + 1);
          if (problem) return problem;
        }
        return undefined;
      }
      const proto: unknown = Object.getPrototypeOf(value);
      if (proto !== objectProto && proto !== null) {
        const name = (value as { constructor?: { name?: unknown } }).constructor?.name;
        return `${path} is ${typeof name === "string" && name ? `a ${name}` : "not a plain object"}, not JSON`;
      }
      if (Object.getOwnPropertySymbols(value).length > 0) return `${path} has a symbol key, not JSON`;
      for (const key in value) {
        const property = Object.getOwnPropertyDescriptor(value, key);
        if (property === undefined || !("value" in property))
          return `${path}.${key} is an accessor, not JSON`;
        const problem = describeNotJson(property.value, `${path}.${key}`, depth + 1);
        if (problem) return problem;
      }
      return undefined;
    }
    default:
      return `${path} is a ${typeof value}, not JSON`;
  }
}

/**
 * Freeze and mark checked a value read back from the store, like a committed one (spec §3.3: a
 * snapshot is the shared immutable revision): what a load hands every reader must not be mutable into
 * memory. A parsed row is strict JSON; one the check refuses (only a hand-edited store: too deep) is
 * left as parsed, never thrown on.
 */
export function sealLoaded(value: unknown): void {
  if (typeof value === "object" && value !== null) isJson(value, 0);
}

/** Validate strict JSON; returns its text. */
export function toJson(value: unknown): string {
  checkJson(value);
  const text = JSON.stringify(value);
  if (text === undefined) throw new NotJson("value is not JSON");
  return text;
}

/** Validate strict JSON without serializing it. */
export function assertJson(value: unknown): void {
  checkJson(value);
}

/**
 * Check what the callback itself built is strict JSON: task states, memos, and each document's final
 * value (a commit may rewrite a document several times; only the last is stored). Inputs, entries
 * and submissions were checked where they entered (createTask, appendEntry, submissions). The
 * states and memos the engine builds are sealed as it builds them (`sealBuilt`), so their check
 * here is a mark read.
 */
export function validateOverlay(overlay: Overlay): void {
  for (const t of overlay.tasks.values()) {
    assertJson(t.state);
    if (t.memos) assertJson(t.memos);
  }
  for (const value of overlay.docs.values()) if (value !== undefined) assertJson(value);
}

const stringify = (value: unknown): string => JSON.stringify(value);

/** Same row but for status and state (memos compare by identity: a memo write replaces the object). */
function onlyStateChanged(before: TaskRecord | undefined, after: TaskRecord): boolean {
  return (
    before !== undefined &&
    before.version === after.version &&
    before.abortRequested === after.abortRequested &&
    before.memos === after.memos &&
    before.startedAt === after.startedAt &&
    before.endedAt === after.endedAt
  );
}

/**
 * Persist everything a group of overlays wrote (validated already), inside its transaction.
 * `stored` holds each updated task's record as its row stands: a task whose only change is its
 * state (the common checkpoint move) gets a narrow update.
 */
export async function writeOverlay(
  sql: Sql,
  overlay: Overlay,
  stored: ReadonlyMap<TaskId, TaskRecord | undefined> = new Map(),
  // The largest row body the store takes (HarnessOptions.maxValueBytes): longer ones spill (spill.ts).
  maxValueBytes?: number,
): Promise<void> {
  if (overlay.conversations.size > 0)
    for (const c of overlay.conversations.values()) {
      await sql.run(
        "INSERT INTO conversations (id, parent, owner_task, owner_conversation, created_at) VALUES (?, ?, ?, ?, ?)",
        [
          c.id,
          c.parent ? stringify(c.parent) : null,
          c.owner?.taskId ?? null,
          c.owner?.conversationId ?? null,
          c.createdAt,
        ],
      );
    }
  for (const t of overlay.tasks.values()) {
    const state = stringify(t.state);
    const memos = t.memos && Object.keys(t.memos).length > 0 ? stringify(t.memos) : null;
    if (overlay.created.has(t.id)) {
      await sql.run(
        "INSERT INTO tasks (id, conversation_id, kind, version, owner_task, background, abort_requested, status, state, input, memos, started_at, ended_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
          t.id,
          t.conversationId,
          t.kind,
          t.version,
          t.owner ?? null,
          t.background ? 1 : 0,
          t.abortRequested ? 1 : 0,
          t.state.status,
          state,
          stringify(t.input),
          memos,
          t.startedAt ?? null,
          t.endedAt ?? null,
        ],
      );
    } else if (onlyStateChanged(stored.get(t.id), t) && !overlay.migratedInputs.has(t.id)) {
      // A checkpoint move keeps its status: leaving `status` out spares SQLite the tasks_live index.
      if (stored.get(t.id)!.state.status === t.state.status)
        await sql.run("UPDATE tasks SET state = ? WHERE id = ?", [state, t.id]);
      else
        await sql.run("UPDATE tasks SET status = ?, state = ? WHERE id = ?", [t.state.status, state, t.id]);
    } else {
      await sql.run(
        "UPDATE tasks SET version = ?, abort_requested = ?, status = ?, state = ?, input = coalesce(?, input), memos = ?, started_at = ?, ended_at = ? WHERE id = ?",
        [
          t.version,
          t.abortRequested ? 1 : 0,
          t.state.status,
          state,
          overlay.migratedInputs.has(t.id) ? stringify(t.input) : null,
          memos,
          t.startedAt ?? null,
          t.endedAt ?? null,
          t.id,
        ],
      );
    }
  }
  for (const e of overlay.entries) {
    const { id, conversationId, kind, byTaskId, ...body } = e;
    await sql.run(
      "INSERT INTO entries (id, conversation_id, kind, body, by_task, head) VALUES (?, ?, ?, ?, ?, ?)",
      [
        id,
        conversationId,
        kind,
        maxValueBytes === undefined
          ? stringify(body)
          : await spillBody(sql, conversationId, body, maxValueBytes),
        byTaskId ?? null,
        e.head ?? null,
      ],
    );
  }
  if (overlay.submissions.size > 0)
    for (const sub of overlay.submissions.values()) {
      const { id, conversationId, requestId, ...body } = sub;
      const text =
        maxValueBytes === undefined
          ? stringify(body)
          : await spillBody(sql, conversationId, body, maxValueBytes);
      if (overlay.createdSubmissions.has(id)) {
        await sql.run("INSERT INTO submissions (id, conversation_id, request_id, body) VALUES (?, ?, ?, ?)", [
          id,
          conversationId,
          requestId ?? null,
          text,
        ]);
      } else {
        await sql.run("UPDATE submissions SET body = ? WHERE id = ?", [text, id]);
      }
    }
  // Incarnations started and ended (spec §3.2): one row each, written only by a creation or a
  // retirement, never by an ordinary write. A conversation document's history and fork rule are the
  // ones its incarnation was created with (records.ts DocMeta), stored once in its record.
  for (const life of overlay.docLife) {
    if (life.kind === "retire") {
      await sql.run("UPDATE doc_records SET retired_at = ? WHERE id = ?", [life.at, life.id]);
      continue;
    }
    const { rowKey, name } = splitDocKey(life.key);
    const taskId = rowKey < 0 ? -rowKey : null;
    const rules = rowKey > 0 ? life.semantics : undefined;
    await sql.run(
      "INSERT INTO doc_records (id, scope, row_key, conversation_id, task_id, kind, history, fork, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
      [
        life.id,
        rowKey === 0 ? "session" : rowKey < 0 ? "task" : "conversation",
        rowKey,
        rowKey > 0 ? rowKey : taskId === null ? null : (overlay.task(taskId)?.conversationId ?? null),
        taskId,
        name,
        rules?.history ?? null,
        rules?.fork ?? null,
        life.at,
      ],
    );
  }
  for (const [key, value] of overlay.docs) {
    const { rowKey: conversationId, name } = splitDocKey(key);
    const patches = overlay.docPatches.get(key);
    if (patches) {
      // Only what changed: the row keeps its older value, the patches replay on it at open.
      for (const patch of patches)
        await sql.run("INSERT INTO doc_patches (conversation_id, name, op) VALUES (?, ?, ?)", [
          conversationId,
          name,
          stringify(patch),
        ]);
      continue;
    }
    if (overlay.base.docPatchRows.get(key))
      await sql.run("DELETE FROM doc_patches WHERE conversation_id = ? AND name = ?", [conversationId, name]);
    if (value === undefined) {
      await sql.run("DELETE FROM documents WHERE conversation_id = ? AND name = ?", [conversationId, name]);
    } else {
      await sql.run(
        "INSERT OR REPLACE INTO documents (conversation_id, name, value, seq, version, doc_id) VALUES (?, ?, ?, ?, ?, ?)",
        [
          conversationId,
          name,
          stringify(value),
          overlay.base.seq + 1,
          overlay.docVersions.get(key) ?? overlay.base.docVersions.get(key) ?? 1,
          overlay.docMetaOf(key)!.id,
        ],
      );
    }
  }
  if (overlay.moves.size > 0)
    for (const m of overlay.moves.values())
      await sql.run(
        "INSERT OR REPLACE INTO moves (transfer, role, conversation_id, body) VALUES (?, ?, ?, ?)",
        [m.transfer, m.role, "conversationId" in m ? m.conversationId : null, stringify(m)],
      );
  if (overlay.stagedParts.size > 0)
    for (const p of overlay.stagedParts.values())
      await sql.run(
        "INSERT OR IGNORE INTO move_parts (transfer, idx, count, bytes, part) VALUES (?, ?, ?, ?, ?)",
        [p.transfer, p.index, p.count, p.bytes, p.part],
      );
  if (overlay.unstaged.size > 0)
    for (const transfer of overlay.unstaged)
      await sql.run("DELETE FROM move_parts WHERE transfer = ?", [transfer]);
  // Last: a deletion removes whatever earlier callbacks of the group wrote to the conversation too.
  if (overlay.deleted.size > 0) await deleteConversationRows(sql, overlay);
  else if (overlay.keepsIdMarks) await writeNextIds(sql, overlay);
}

/** The meta row keeping the id counters' high-water marks (ids are never reused after a deletion). */
export const NEXT_IDS_KEY = "next_ids";

/** The counters as stored in meta; the session takes the larger of these and max(id) + 1 at open. */
export interface NextIds {
  tasks: number;
  entries: number;
  conversations: number;
  submissions: number;
  /** Document incarnations (doc_records). */
  doc_records: number;
}

async function deleteConversationRows(sql: Sql, overlay: Overlay): Promise<void> {
  for (const id of overlay.deleted) {
    // Its task documents are retired already (its tasks are terminal): only their records remain,
    // and doc_records' conversation_id names the task's conversation.
    for (const table of [
      "entries",
      "tasks",
      "submissions",
      "documents",
      "doc_patches",
      "doc_history",
      "doc_records",
      "spill_refs",
    ])
      await sql.run(`DELETE FROM ${table} WHERE conversation_id = ?`, [id]);
    await sql.run("DELETE FROM conversations WHERE id = ?", [id]);
  }
  // The parts of values out of line that no conversation refers to any more (spill.ts).
  if (overlay.deleted.size > 0)
    await sql.run("DELETE FROM spills WHERE hash NOT IN (SELECT hash FROM spill_refs)");
  await writeNextIds(sql, overlay);
}

async function writeNextIds(sql: Sql, overlay: Overlay): Promise<void> {
  const next: NextIds = {
    tasks: overlay.nextTaskId,
    entries: overlay.nextEntryId,
    conversations: overlay.nextConversationId,
    submissions: overlay.nextSubmissionId,
    doc_records: overlay.nextDocId,
  };
  await sql.run("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", [NEXT_IDS_KEY, stringify(next)]);
}

export type ParsedTask = { record: TaskRecord; corrupt?: string };

/** A task row to a record; a row that does not parse yields a placeholder and a diagnostic. */
export function taskFromRow(row: Row): ParsedTask {
  const id = Number(row["id"]);
  const kind = String(row["kind"]);
  const owner = row["owner_task"] !== null ? Number(row["owner_task"]) : undefined;
  const startedAt = row["started_at"] !== null ? Number(row["started_at"]) : undefined;
  const endedAt = row["ended_at"] !== null ? Number(row["ended_at"]) : undefined;
  const problems: string[] = [];
  const parse = (column: string): Json | undefined => {
    const text = row[column];
    if (text === null || text === undefined) return undefined;
    let value: Json;
    try {
      value = JSON.parse(String(text)) as Json;
    } catch (error) {
      problems.push(`column ${column} is not valid JSON (${(error as Error).message})`);
      return undefined;
    }
    sealLoaded(value);
    return value;
  };
  const state = parse("state") as TaskState | undefined;
  const input = parse("input");
  const memos = parse("memos") as Record<string, Json> | undefined;
  if (state && (typeof state !== "object" || state.status !== row["status"])) {
    problems.push(`column state does not match status ${String(row["status"])}`);
  }
  // Built in the one field order of every task record (records.ts taskRecord).
  const record = (s: TaskState, m: Record<string, Json> | undefined): TaskRecord =>
    taskRecord(
      {
        id,
        conversationId: Number(row["conversation_id"]),
        kind,
        version: Number(row["version"]),
        input: input ?? null,
        background: Number(row["background"]) === 1,
        abortRequested: Number(row["abort_requested"]) === 1,
        state: s,
      },
      owner,
      m,
      startedAt,
      endedAt,
    );
  if (problems.length > 0) {
    const placeholder = record(
      row["status"] === "terminal" && state?.status === "terminal"
        ? state
        : { status: "pending", checkpoint: { phase: "<unreadable>" } },
      undefined,
    );
    return { record: placeholder, corrupt: `task ${id} (${kind}): ${problems.join("; ")}` };
  }
  return { record: record(state!, memos) };
}

/** A move row to its record (see MoveRecord); undefined for a row that does not parse. */
export function moveFromRow(row: Row): MoveRecord | undefined {
  try {
    const record = JSON.parse(String(row["body"])) as MoveRecord;
    return record && typeof record.transfer === "string" ? record : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A conversation record read from the store, frozen with its parent and owner pairs like a created
 * one (core/tx.ts `inert`): records never change once created, and the engine hands this one out as is.
 */
export function conversationFromRow(row: Row): ConversationRecord {
  const parent =
    row["parent"] === null ? undefined : (JSON.parse(String(row["parent"])) as ConversationRecord["parent"]);
  return Object.freeze({
    id: Number(row["id"]),
    createdAt: Number(row["created_at"]),
    ...(parent ? { parent: Object.freeze(parent) } : {}),
    ...(row["owner_task"] !== null
      ? {
          owner: Object.freeze({
            taskId: Number(row["owner_task"]),
            conversationId: Number(row["owner_conversation"]),
          }),
        }
      : {}),
  });
}

export function entryFromRow(row: Row): EntryRecord {
  const body = JSON.parse(String(row["body"])) as Omit<
    EntryRecord,
    "id" | "conversationId" | "kind" | "byTaskId"
  >;
  return {
    ...body,
    id: Number(row["id"]),
    conversationId: Number(row["conversation_id"]),
    kind: String(row["kind"]),
    ...(row["by_task"] !== null ? { byTaskId: Number(row["by_task"]) } : {}),
  };
}

/**
 * An entry row read back whole (its values out of line joined: spill.ts), frozen like a committed
 * one (spec §1.5: entries are immutable; the agent's entry cache shares what it loads).
 */
export async function readEntryRow(sql: Sql, row: Row): Promise<EntryRecord> {
  const entry = await unspill(sql, entryFromRow(row));
  sealLoaded(entry);
  return entry;
}

/** Entry rows read back whole, in their order (no await per row unless one was spilled), frozen. */
export async function readEntryRows(sql: Sql, rows: readonly Row[]): Promise<EntryRecord[]> {
  const out = rows.map(entryFromRow);
  for (let i = 0; i < out.length; i++) if (isSpilled(out[i]!)) out[i] = await unspill(sql, out[i]!);
  for (const entry of out) sealLoaded(entry);
  return out;
}

/** A submission row read back whole (its values out of line joined: spill.ts). */
export function readSubmissionRow(sql: Sql, row: Row): Promise<SubmissionRecord> {
  return unspill(sql, submissionFromRow(row));
}

export const TASK_COLUMNS =
  "id, conversation_id, kind, version, owner_task, background, abort_requested, status, state, input, memos, started_at, ended_at";

export function submissionFromRow(row: Row): SubmissionRecord {
  const body = JSON.parse(String(row["body"])) as Omit<
    SubmissionRecord,
    "id" | "conversationId" | "requestId"
  >;
  return {
    ...body,
    id: Number(row["id"]),
    conversationId: Number(row["conversation_id"]),
    ...(row["request_id"] !== null ? { requestId: String(row["request_id"]) } : {}),
  };
}
