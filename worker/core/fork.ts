/**
 * Forks (spec §3.7): a conversation whose record names `parent: { conversationId, at }` sees its
 * parent's history through entry `at` (even if the commit that appended `at` appended later ones),
 * then its own entries. Nothing is copied: a conversation's visible history is a chain of segments,
 * its own entries and then each ancestor's capped at the smallest `at` on the way (`ancestry`), read
 * root first (entry ids are global and increasing, so the concatenation is in id order).
 *
 * A fork point (`loadForkPoint`) is what a fork commit needs from the store and cannot read inside a
 * callback: whether `at` is visible from the parent, the newest head marker at or before it (where
 * the child's active range starts until it writes a head of its own), and the values "asOf" documents
 * (by their records' fork rule, spec §3.7) had at the end of the commit that appended `at`, read from
 * `doc_history`. A history row
 * `(conversation, name, since_entry, value)` is written by every commit that writes such a document,
 * `since_entry` being the first entry id that commit could append: the value at the end of the commit
 * holding entry E is the newest row with `since_entry <= E` (earlier commits and E's own have
 * `since_entry <= E`, later ones `> E`). A conversation with no such row (created after E) reads
 * through to its parent; a document with no row at all (stored before history existed) reads as its
 * current value.
 */
import type { Query, Row, Sql } from "../store/types.ts";
import { readEntryRow } from "./persist.ts";
import type { ForkPoint } from "./records.ts";
import type { ConversationId, ConversationRecord, EntryId, EntryRecord, Json } from "./types.ts";

/** How a conversation document behaves in a fork (spec §3.1, §3.7). */
export type DocumentFork = "asOf" | "current" | "initial";

/** One segment of a visible history: a conversation's entries up to `cap` (inclusive). */
export interface Segment {
  readonly conversationId: ConversationId;
  readonly cap: EntryId;
}

/** A conversation's visible history as segments, the conversation itself first, then its ancestors. */
export function ancestry(
  conversation: (id: ConversationId) => ConversationRecord | undefined,
  id: ConversationId,
): Segment[] {
  const out: Segment[] = [];
  let cap = Number.MAX_SAFE_INTEGER;
  let record = conversation(id);
  const seen = new Set<ConversationId>();
  out.push({ conversationId: id, cap });
  while (record?.parent && !seen.has(record.id)) {
    seen.add(record.id);
    cap = Math.min(cap, record.parent.at);
    out.push({ conversationId: record.parent.conversationId, cap });
    record = conversation(record.parent.conversationId);
  }
  return out;
}

/** Visible entries in id order: after `afterId` (exclusive), up to `upTo`, at most `limit` (-1: all). */
export async function readVisibleEntries(
  sql: Sql,
  segments: readonly Segment[],
  options: { afterId?: number; upTo?: number; limit?: number } = {},
): Promise<EntryRecord[]> {
  const out: EntryRecord[] = [];
  const limit = options.limit ?? -1;
  for (let i = segments.length - 1; i >= 0; i--) {
    const segment = segments[i]!;
    const hi = Math.min(options.upTo ?? Number.MAX_SAFE_INTEGER, segment.cap);
    const lo = options.afterId ?? 0;
    if (hi <= lo) continue;
    const rows = await sql.all(
      "SELECT * FROM entries WHERE conversation_id = ? AND id > ? AND id <= ? ORDER BY id LIMIT ?",
      [segment.conversationId, lo, hi, limit < 0 ? -1 : limit - out.length],
    );
    for (const row of rows) out.push(await readEntryRow(sql, row));
    if (limit >= 0 && out.length >= limit) break;
  }
  return out;
}

/**
 * The newest `limit` visible entries after `afterId` and before `before` (both exclusive), in id
 * order: read newest first, the conversation's own segment first (its ids are the highest), so the
 * rows read are only the ones returned. `markers: false` leaves head markers out.
 */
export async function readNewestEntries(
  sql: Sql,
  segments: readonly Segment[],
  options: { afterId?: number; before?: number; limit: number; markers?: boolean },
): Promise<EntryRecord[]> {
  const newestFirst: EntryRecord[] = [];
  const markers = options.markers === false ? " AND head IS NULL" : "";
  for (const segment of segments) {
    if (newestFirst.length >= options.limit) break;
    const hi = Math.min((options.before ?? Number.MAX_SAFE_INTEGER) - 1, segment.cap);
    const lo = options.afterId ?? 0;
    if (hi <= lo) continue;
    const rows = await sql.all(
      `SELECT * FROM entries WHERE conversation_id = ? AND id > ? AND id <= ?${markers} ORDER BY id DESC LIMIT ?`,
      [segment.conversationId, lo, hi, options.limit - newestFirst.length],
    );
    for (const row of rows) newestFirst.push(await readEntryRow(sql, row));
  }
  return newestFirst.reverse();
}

/**
 * How many visible entries lie after `afterId` and before `before` (both exclusive); `markers:
 * false` does not count head markers. Index-only: the total, less the markers (a partial index).
 */
export async function countVisibleEntries(
  sql: Sql,
  segments: readonly Segment[],
  options: { afterId?: number; before?: number; markers?: boolean } = {},
): Promise<number> {
  let n = 0;
  for (const segment of segments) {
    const hi = Math.min((options.before ?? Number.MAX_SAFE_INTEGER) - 1, segment.cap);
    const lo = options.afterId ?? 0;
    if (hi <= lo) continue;
    const where = "conversation_id = ? AND id > ? AND id <= ?";
    const all = await sql.get(`SELECT count(*) AS n FROM entries WHERE ${where}`, [
      segment.conversationId,
      lo,
      hi,
    ]);
    n += Number(all?.["n"] ?? 0);
    if (options.markers === false) {
      const heads = await sql.get(`SELECT count(*) AS n FROM entries WHERE ${where} AND head IS NOT NULL`, [
        segment.conversationId,
        lo,
        hi,
      ]);
      n -= Number(heads?.["n"] ?? 0);
    }
  }
  return n;
}

/** The newest head marker visible through `upTo`, or undefined. */
export async function newestMarker(
  sql: Sql,
  segments: readonly Segment[],
  upTo = Number.MAX_SAFE_INTEGER,
  /** The rows `markerQuery(segments[0], upTo)` read already (the open sends it with its other reads). */
  first?: readonly Row[],
): Promise<EntryRecord | undefined> {
  for (const [i, segment] of segments.entries()) {
    const query = markerQuery(segment, upTo);
    const row = i === 0 && first ? first[0] : await sql.get(query.sql, query.params);
    if (row) return readEntryRow(sql, row);
  }
  return undefined;
}

/** The statement reading the newest head marker of one segment, through `upTo`. */
export function markerQuery(segment: Segment, upTo = Number.MAX_SAFE_INTEGER): Query {
  return {
    sql: "SELECT * FROM entries WHERE conversation_id = ? AND head IS NOT NULL AND id <= ? ORDER BY id DESC LIMIT 1",
    params: [segment.conversationId, Math.min(upTo, segment.cap)],
  };
}

/** The `head` of the newest head marker visible through `upTo`, or undefined (from the start). */
export async function newestHead(
  sql: Sql,
  segments: readonly Segment[],
  upTo = Number.MAX_SAFE_INTEGER,
): Promise<EntryId | undefined> {
  return (await newestMarker(sql, segments, upTo))?.head;
}

export const forkPointKey = (parent: ConversationId, at: EntryId): string => `${parent}:${at}`;
/** Whether `at` can name an entry at all (a positive safe integer): the string "3" must not share entry 3's fork point key. */
export const isEntryId = (at: unknown): at is EntryId => Number.isSafeInteger(at) && (at as number) >= 1;

/**
 * The fork point of the conversation whose visible history is `segments` at entry `at`. Which
 * documents are read "asOf" is their records' rule (spec §3.7: the policy persisted in the document's
 * record), those of the conversation that owns `at` (whose documents were the state at `at`): any of
 * its incarnations of a name stored with fork "asOf", or stored before records kept the fork rule
 * (schema 7) with its history kept and `rules` asking "asOf" for the name (records.ts
 * `storedSemantics`).
 */
export async function loadForkPoint(
  sql: Sql,
  segments: readonly Segment[],
  at: EntryId,
  rules: (name: string) => { readonly fork: "asOf" | "current" | "initial" },
): Promise<ForkPoint> {
  const row = Number.isInteger(at)
    ? await sql.get("SELECT conversation_id FROM entries WHERE id = ?", [at])
    : undefined;
  const owner = row === undefined ? undefined : Number(row["conversation_id"]);
  const visible = segments.some((s) => s.conversationId === owner && at <= s.cap);
  if (!visible) return { visible, head: undefined, asOf: new Map() };
  const asOfNames = new Set<string>();
  for (const r of await sql.all(
    "SELECT DISTINCT kind, history, fork FROM doc_records WHERE row_key = ? AND (fork = 'asOf' OR (fork IS NULL AND history = 'rewindable'))",
    [owner!],
  )) {
    const name = String(r["kind"]);
    if (r["fork"] === "asOf" || rules(name).fork === "asOf") asOfNames.add(name);
  }
  const asOf = new Map<string, { value: Json | undefined; version: number }>();
  for (const name of asOfNames) {
    for (const segment of segments) {
      const found = await sql.get(
        "SELECT value, version FROM doc_history WHERE conversation_id = ? AND name = ? AND since_entry <= ? ORDER BY since_entry DESC, id DESC LIMIT 1",
        [segment.conversationId, name, at],
      );
      if (!found) continue;
      const text = found["value"];
      let value: Json | undefined;
      try {
        value = text === null || text === undefined ? undefined : (JSON.parse(String(text)) as Json);
      } catch {
        value = undefined; // unreadable: absent, like an unreadable document
      }
      asOf.set(name, { value, version: Number(found["version"]) });
      break;
    }
  }
  return { visible, head: await newestHead(sql, segments, at), asOf };
}
