/**
 * Records to rows and back. Writing serializes strict JSON only (NaN, functions, bigint and the like
 * are refused with `NotJson` before anything reaches SQLite). Reading never throws on bad data: a
 * row that does not parse becomes a placeholder live record plus a diagnostic, which the scheduler
 * turns into a `faulted` outcome for that task alone.
 */
import type { Row, Sql } from "../store/types.ts";
import { NotJson } from "./errors.ts";
import type { Overlay } from "./records.ts";
import type { ConversationRecord, EntryRecord, Json, SubmissionRecord, TaskRecord, TaskState } from "./types.ts";

function strictReplacer(this: unknown, key: string, value: unknown): unknown {
  switch (typeof value) {
    case "number":
      if (!Number.isFinite(value)) throw new NotJson(`${key || "value"} is ${value}, not JSON`);
      return value;
    case "function":
    case "symbol":
    case "bigint":
      throw new NotJson(`${key || "value"} is a ${typeof value}, not JSON`);
    case "undefined":
      if (Array.isArray(this)) throw new NotJson(`array item ${key} is undefined, not JSON`);
      return value;
    default:
      return value;
  }
}

export function toJson(value: unknown): string {
  try {
    const text = JSON.stringify(value, strictReplacer);
    if (text === undefined) throw new NotJson("value is not JSON");
    return text;
  } catch (error) {
    if (error instanceof NotJson) throw error;
    throw new NotJson(`value is not JSON: ${(error as Error).message}`);
  }
}

/** Persist everything an overlay wrote, inside the commit's savepoint. */
export async function writeOverlay(sql: Sql, overlay: Overlay): Promise<void> {
  for (const c of overlay.conversations.values()) {
    await sql.run(
      "INSERT INTO conversations (id, parent, owner_task, owner_conversation, created_at) VALUES (?, ?, ?, ?, ?)",
      [c.id, c.parent ? toJson(c.parent) : null, c.owner?.taskId ?? null, c.owner?.conversationId ?? null, c.createdAt],
    );
  }
  for (const t of overlay.tasks.values()) {
    const state = toJson(t.state);
    const memos = t.memos && Object.keys(t.memos).length > 0 ? toJson(t.memos) : null;
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
          toJson(t.input),
          memos,
          t.startedAt ?? null,
          t.endedAt ?? null,
        ],
      );
    } else {
      await sql.run(
        "UPDATE tasks SET version = ?, abort_requested = ?, status = ?, state = ?, input = coalesce(?, input), memos = ?, started_at = ?, ended_at = ? WHERE id = ?",
        [
          t.version,
          t.abortRequested ? 1 : 0,
          t.state.status,
          state,
          overlay.migratedInputs.has(t.id) ? toJson(t.input) : null,
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
    await sql.run("INSERT INTO entries (id, conversation_id, kind, body, by_task) VALUES (?, ?, ?, ?, ?)", [
      id,
      conversationId,
      kind,
      toJson(body),
      byTaskId ?? null,
    ]);
  }
  for (const sub of overlay.submissions.values()) {
    const { id, conversationId, requestId, ...body } = sub;
    if (overlay.createdSubmissions.has(id)) {
      await sql.run("INSERT INTO submissions (id, conversation_id, request_id, body) VALUES (?, ?, ?, ?)", [
        id,
        conversationId,
        requestId ?? null,
        toJson(body),
      ]);
    } else {
      await sql.run("UPDATE submissions SET body = ? WHERE id = ?", [toJson(body), id]);
    }
  }
  for (const [key, value] of overlay.docs) {
    const i = key.indexOf(":");
    const conversationId = Number(key.slice(0, i));
    const name = key.slice(i + 1);
    if (value === undefined) {
      await sql.run("DELETE FROM documents WHERE conversation_id = ? AND name = ?", [conversationId, name]);
    } else {
      await sql.run("INSERT OR REPLACE INTO documents (conversation_id, name, value, seq) VALUES (?, ?, ?, ?)", [
        conversationId,
        name,
        toJson(value),
        overlay.base.seq + 1,
      ]);
    }
  }
}

export type ParsedTask = { record: TaskRecord; corrupt?: string };

/** A task row to a record; a row that does not parse yields a placeholder and a diagnostic. */
export function taskFromRow(row: Row): ParsedTask {
  const base = {
    id: Number(row["id"]),
    conversationId: Number(row["conversation_id"]),
    kind: String(row["kind"]),
    version: Number(row["version"]),
    background: Number(row["background"]) === 1,
    abortRequested: Number(row["abort_requested"]) === 1,
    ...(row["owner_task"] !== null ? { owner: Number(row["owner_task"]) } : {}),
    ...(row["started_at"] !== null ? { startedAt: Number(row["started_at"]) } : {}),
    ...(row["ended_at"] !== null ? { endedAt: Number(row["ended_at"]) } : {}),
  };
  const problems: string[] = [];
  const parse = (column: string): Json | undefined => {
    const text = row[column];
    if (text === null || text === undefined) return undefined;
    try {
      return JSON.parse(String(text)) as Json;
    } catch (error) {
      problems.push(`column ${column} is not valid JSON (${(error as Error).message})`);
      return undefined;
    }
  };
  const state = parse("state") as TaskState | undefined;
  const input = parse("input");
  const memos = parse("memos") as Record<string, Json> | undefined;
  if (state && (typeof state !== "object" || state.status !== row["status"])) {
    problems.push(`column state does not match status ${String(row["status"])}`);
  }
  if (problems.length > 0) {
    const placeholder: TaskRecord = {
      ...base,
      input: input ?? null,
      state:
        row["status"] === "terminal" && state?.status === "terminal"
          ? state
          : { status: "pending", checkpoint: { phase: "<unreadable>" } },
    };
    return { record: placeholder, corrupt: `task ${base.id} (${base.kind}): ${problems.join("; ")}` };
  }
  return { record: { ...base, input: input ?? null, state: state!, ...(memos ? { memos } : {}) } };
}

export function conversationFromRow(row: Row): ConversationRecord {
  const parent = row["parent"] === null ? undefined : (JSON.parse(String(row["parent"])) as ConversationRecord["parent"]);
  return {
    id: Number(row["id"]),
    createdAt: Number(row["created_at"]),
    ...(parent ? { parent } : {}),
    ...(row["owner_task"] !== null
      ? { owner: { taskId: Number(row["owner_task"]), conversationId: Number(row["owner_conversation"]) } }
      : {}),
  };
}

export function entryFromRow(row: Row): EntryRecord {
  const body = JSON.parse(String(row["body"])) as Omit<EntryRecord, "id" | "conversationId" | "kind" | "byTaskId">;
  return {
    ...body,
    id: Number(row["id"]),
    conversationId: Number(row["conversation_id"]),
    kind: String(row["kind"]),
    ...(row["by_task"] !== null ? { byTaskId: Number(row["by_task"]) } : {}),
  };
}

export const TASK_COLUMNS =
  "id, conversation_id, kind, version, owner_task, background, abort_requested, status, state, input, memos, started_at, ended_at";

export function submissionFromRow(row: Row): SubmissionRecord {
  const body = JSON.parse(String(row["body"])) as Omit<SubmissionRecord, "id" | "conversationId" | "requestId">;
  return {
    ...body,
    id: Number(row["id"]),
    conversationId: Number(row["conversation_id"]),
    ...(row["request_id"] !== null ? { requestId: String(row["request_id"]) } : {}),
  };
}
