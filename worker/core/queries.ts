/**
 * Queries over the core's tables (schema.ts) for callers that hold a store but not a place on a
 * harness's commit line: the stored tasks (the harness's `tasks()`, a crash image's), a text search
 * over entries (the app's conversation search), and a bench's raw commit. They live here so that no
 * SQL over the core's tables is written outside the core. Reads go through the store's FIFO, so they
 * see committed rows only, after every commit requested before them.
 */
import type { Store } from "../store/types.ts";
import { readEntryRows, TASK_COLUMNS, taskFromRow } from "./persist.ts";
import type { EntryRecord, TaskId, TaskRecord, TaskStatus } from "./types.ts";

/**
 * Stored tasks (terminal ones included), oldest first, optionally of one kind or status. `known`
 * gives a record already in memory (parsed once), used instead of parsing its row again.
 */
export async function storedTasks(
  store: Store,
  filter: { kind?: string; status?: TaskStatus } = {},
  known: (id: TaskId) => TaskRecord | undefined = () => undefined,
): Promise<TaskRecord[]> {
  const where: string[] = [];
  const params: string[] = [];
  if (filter.kind !== undefined) {
    where.push("kind = ?");
    params.push(filter.kind);
  }
  if (filter.status !== undefined) {
    where.push("status = ?");
    params.push(filter.status);
  }
  const sqlText = `SELECT ${TASK_COLUMNS} FROM tasks${where.length ? ` WHERE ${where.join(" AND ")}` : ""} ORDER BY id`;
  const rows = await store.read((sql) => sql.all(sqlText, params));
  return rows.map((row) => known(Number(row["id"])) ?? taskFromRow(row).record);
}

function likePattern(text: string): string {
  return `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

/**
 * Entries of the given kinds whose stored row (the entry's JSON: its data, model message, tool data)
 * contains `text`, compared by SQLite's LIKE (case-insensitive for ASCII; `%` and `_` are literal),
 * newest first, at most `limit`: candidates a caller confirms on the text it means.
 */
export async function entriesContaining(
  store: Store,
  text: string,
  options: { kinds: readonly string[]; limit: number },
): Promise<EntryRecord[]> {
  if (options.kinds.length === 0) return [];
  const kinds = options.kinds.map(() => "?").join(", ");
  return store.read(async (sql) => {
    const rows = await sql.all(
      `SELECT id, conversation_id, kind, body, by_task FROM entries WHERE kind IN (${kinds}) AND body LIKE ? ESCAPE '\\' ORDER BY id DESC LIMIT ?`,
      [...options.kinds, likePattern(text), options.limit],
    );
    return readEntryRows(sql, rows);
  });
}

/**
 * Entries of the given kinds with `from <= id < to` whose stored row contains `text` (as
 * `entriesContaining` compares), newest first. The id range is walked on the primary key, so a call
 * reads at most `to - from` rows however large the table is: a search that pages by id windows.
 */
export async function entriesContainingIn(
  store: Store,
  text: string,
  options: { kinds: readonly string[]; from: number; to: number },
): Promise<EntryRecord[]> {
  if (options.kinds.length === 0 || options.to <= options.from) return [];
  const kinds = options.kinds.map(() => "?").join(", ");
  return store.read(async (sql) => {
    const rows = await sql.all(
      `SELECT id, conversation_id, kind, body, by_task FROM entries WHERE id >= ? AND id < ? AND kind IN (${kinds}) AND body LIKE ? ESCAPE '\\' ORDER BY id DESC`,
      [options.from, options.to, ...options.kinds, likePattern(text)],
    );
    return readEntryRows(sql, rows);
  });
}

/**
 * Values picked out of the stored entries of the given kinds by SQLite's `json_extract`, one array
 * per entry (`paths[i]`'s value at index i; an object or array comes back as its JSON text, a
 * missing path as null), in id order, only entries whose number at `where.path` lies in
 * [`where.from`, `where.to`). The entries' bodies are never handed out or parsed here: a caller
 * that needs a few fields of many entries (the usage per day) reads only those.
 */
export async function entryValues(
  store: Store,
  options: {
    kinds: readonly string[];
    paths: readonly string[];
    where: { path: string; from: number; to: number };
  },
): Promise<unknown[][]> {
  if (options.kinds.length === 0 || options.paths.length === 0) return [];
  const kinds = options.kinds.map(() => "?").join(", ");
  const columns = options.paths.map((_, i) => `json_extract(body, ?) AS v${i}`).join(", ");
  const rows = await store.read((sql) =>
    sql.all(
      `SELECT ${columns} FROM entries WHERE kind IN (${kinds}) AND json_extract(body, ?) >= ? AND json_extract(body, ?) < ? ORDER BY id`,
      [
        ...options.paths,
        ...options.kinds,
        options.where.path,
        options.where.from,
        options.where.path,
        options.where.to,
      ],
    ),
  );
  return rows.map((row) => options.paths.map((_, i) => row[`v${i}`] ?? null));
}

/** The newest entry's id, 0 when there is none (one step down the primary key). */
export async function newestEntryId(store: Store): Promise<number> {
  const row = await store.read((sql) => sql.get("SELECT max(id) AS m FROM entries"));
  return Number(row?.["m"] ?? 0);
}

/**
 * One row appended to `entries` in a transaction of its own, outside any harness: the raw commit a
 * bench compares the engine with (the store's own cost for one small write; the statement is the
 * one the store probe's commit bench times, tests/e2e/fixtures/store-probe). The store must have
 * the core's schema (`migrateStore`).
 */
export async function commitBenchEntry(store: Store, body: string): Promise<void> {
  await store.commit((sql) =>
    sql.run("INSERT INTO entries (conversation_id, kind, body) VALUES (1, 'bench', ?)", [body]),
  );
}

/**
 * Which tasks a time range shows (the app's run timeline, worker/app/timeline.ts): the tasks of
 * `conversations` whose run overlaps `[from, to)`, read as `[startedAt, endedAt]` where a task not
 * started yet starts at its end (or `now`) and a live one ends at `now`. At most `limit` of them,
 * the longest first (what a picture of that range shows best), and how many there are in all. One
 * read; it never parses more than `limit` rows.
 */
export async function tasksOverlapping(
  store: Store,
  options: { conversations: readonly number[]; from: number; to: number; now: number; limit: number },
): Promise<{ tasks: TaskRecord[]; total: number }> {
  if (options.conversations.length === 0 || options.limit < 1) return { tasks: [], total: 0 };
  const marks = options.conversations.map(() => "?").join(", ");
  const start = "COALESCE(started_at, ended_at, ?)";
  const end = "COALESCE(ended_at, ?)";
  const where = `conversation_id IN (${marks}) AND ${start} < ? AND ${end} >= ?`;
  const params = [...options.conversations, options.now, options.to, options.now, options.from];
  return store.read(async (sql) => {
    const counted = await sql.get(`SELECT count(*) AS n FROM tasks WHERE ${where}`, params);
    const total = Number(counted?.["n"] ?? 0);
    const rows = await sql.all(
      `SELECT ${TASK_COLUMNS} FROM tasks WHERE ${where} ORDER BY ${end} - ${start} DESC, id LIMIT ?`,
      [...params, options.now, options.now, options.limit],
    );
    return { tasks: rows.map((row) => taskFromRow(row).record), total };
  });
}

/** The time the tasks of `conversations` span (their first start, their last end or `now`) and their count. */
export async function tasksSpan(
  store: Store,
  options: { conversations: readonly number[]; now: number },
): Promise<{ start?: number; end?: number; count: number }> {
  if (options.conversations.length === 0) return { count: 0 };
  const marks = options.conversations.map(() => "?").join(", ");
  const row = await store.read((sql) =>
    sql.get(
      `SELECT min(COALESCE(started_at, ended_at, ?)) AS s, max(COALESCE(ended_at, ?)) AS e, count(*) AS n FROM tasks WHERE conversation_id IN (${marks})`,
      [options.now, options.now, ...options.conversations],
    ),
  );
  const count = Number(row?.["n"] ?? 0);
  if (count === 0) return { count };
  return { start: Number(row?.["s"]), end: Number(row?.["e"]), count };
}

/**
 * The entries the given tasks appended in `conversations` (an entry's `byTaskId`), oldest first, at
 * most `limit`: what a timeline's bar shows (an answer's usage, a tool's result and why it ended).
 */
export async function entriesByTasks(
  store: Store,
  options: { conversations: readonly number[]; tasks: readonly TaskId[]; limit: number },
): Promise<EntryRecord[]> {
  if (options.conversations.length === 0 || options.tasks.length === 0) return [];
  const cs = options.conversations.map(() => "?").join(", ");
  const ts = options.tasks.map(() => "?").join(", ");
  return store.read(async (sql) => {
    const rows = await sql.all(
      `SELECT id, conversation_id, kind, body, by_task FROM entries WHERE conversation_id IN (${cs}) AND by_task IN (${ts}) ORDER BY id LIMIT ?`,
      [...options.conversations, ...options.tasks, options.limit],
    );
    return readEntryRows(sql, rows);
  });
}

/**
 * Top-level conversations (owned by no task: the list's), by the `conversations_top_level` index:
 * their ids newest first, below `before` when given, at most `limit` (all when absent), and with
 * `total`, how many there are; one read job.
 */
export async function topLevelConversations(
  store: Store,
  options: { limit?: number; before?: number; total?: boolean } = {},
): Promise<{ ids: number[]; total?: number }> {
  return store.read(async (sql) => {
    const rows = await sql.all(
      `SELECT id FROM conversations WHERE owner_task IS NULL AND id < ? ORDER BY id DESC LIMIT ?`,
      [options.before ?? Number.MAX_SAFE_INTEGER, options.limit ?? -1],
    );
    const ids = rows.map((row) => Number(row["id"]));
    if (!options.total) return { ids };
    const count = await sql.get(`SELECT count(*) AS n FROM conversations WHERE owner_task IS NULL`);
    return { ids, total: Number(count?.["n"] ?? 0) };
  });
}

/** Those of `ids` that are stored top-level conversations (one read, the ids as one JSON parameter). */
export async function topLevelAmong(store: Store, ids: readonly number[]): Promise<Set<number>> {
  if (ids.length === 0) return new Set();
  const rows = await store.read((sql) =>
    sql.all(
      `SELECT id FROM conversations WHERE id IN (SELECT value FROM json_each(?)) AND owner_task IS NULL`,
      [JSON.stringify(ids)],
    ),
  );
  return new Set(rows.map((row) => Number(row["id"])));
}
