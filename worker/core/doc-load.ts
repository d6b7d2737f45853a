/**
 * Reading one conversation's documents from the store: the rows, their patches replayed in the order
 * they were stored, and the newest head marker's head. Ordinary documents are not scanned at open
 * (spec §3.3): the session reads a conversation's documents with this when live work needs them at
 * open, or on first access. Never throws on bad data: an unreadable document reads as absent (its
 * owner rebuilds it), and a patch that no longer applies is skipped, like that document.
 */
import { allOf, type Query, type Row, type Sql } from "../store/types.ts";
import { applyDocPatches, type DocPatch } from "./doc-patch.ts";
import { markerQuery, newestMarker, type Segment } from "./fork.ts";
import { sealLoaded } from "./persist.ts";
import type { DocMeta, LoadedDocs } from "./records.ts";
import type { ConversationId, Json } from "./types.ts";

/**
 * `segments` is the conversation's visible history (fork.ts `ancestry`): a fork without a head marker
 * of its own starts its active range where its parent's did at its entry.
 */
export async function readConversationDocs(
  sql: Sql,
  conversationId: ConversationId,
  segments: readonly Segment[] = [{ conversationId, cap: Number.MAX_SAFE_INTEGER }],
): Promise<LoadedDocs> {
  return conversationDocsFrom(sql, segments, await allOf(sql, conversationDocQueries(segments)));
}

/**
 * The statements `readConversationDocs` starts with (sent together): the documents of the first of
 * `segments` (the conversation itself) with their incarnations, their patches, and its newest head
 * marker. The open sends them for each conversation it loads with its other reads (session.ts).
 */
export function conversationDocQueries(segments: readonly Segment[]): Query[] {
  const own = segments[0]!;
  return [
    // Each row with its incarnation (spec §3.2): one query, the record read by its primary key.
    {
      sql: "SELECT d.name, d.value, d.version, d.doc_id, r.created_at, r.history, r.fork FROM documents d LEFT JOIN doc_records r ON r.id = d.doc_id WHERE d.conversation_id = ?",
      params: [own.conversationId],
    },
    {
      sql: "SELECT name, op FROM doc_patches WHERE conversation_id = ? ORDER BY id",
      params: [own.conversationId],
    },
    markerQuery(own),
  ];
}

/**
 * A conversation's documents from the rows of `conversationDocQueries(segments)` (in its order); the
 * head marker read on through the ancestors' segments when the conversation has none of its own.
 */
export async function conversationDocsFrom(
  sql: Sql,
  segments: readonly Segment[],
  [docRows = [], patches = [], marker = []]: readonly (readonly Row[])[],
): Promise<LoadedDocs> {
  const docs = new Map<string, { value: Json; version: number; meta: DocMeta }>();
  const patchRows = new Map<string, number>();
  for (const row of docRows) {
    try {
      docs.set(String(row["name"]), {
        value: JSON.parse(String(row["value"])) as Json,
        version: Number(row["version"]),
        meta: docMeta(row),
      });
    } catch {
      // Unreadable: absent.
    }
  }
  for (const row of patches) {
    const name = String(row["name"]);
    patchRows.set(name, (patchRows.get(name) ?? 0) + 1);
    const doc = docs.get(name);
    if (!doc) continue; // a patch needs its document: skipped, like one that does not apply
    try {
      const value = applyDocPatches(doc.value, [JSON.parse(String(row["op"])) as DocPatch]);
      docs.set(name, { value, version: doc.version, meta: doc.meta });
    } catch {
      // Skipped.
    }
  }
  // Frozen like a committed value: the loaded value is what every reader is handed.
  for (const { value } of docs.values()) sealLoaded(value);
  return { docs, patchRows, head: (await newestMarker(sql, segments, undefined, marker))?.head };
}

const HISTORIES = new Set(["latest", "rewindable"]);
const FORKS = new Set(["asOf", "current", "initial"]);

/** An incarnation's meta from its row; a history or fork rule the store does not hold (or garbles) is left out. */
function docMeta(row: Record<string, unknown>): DocMeta {
  const meta: {
    id: number;
    createdAt: number;
    history?: "latest" | "rewindable";
    fork?: "asOf" | "current" | "initial";
  } = { id: Number(row["doc_id"]), createdAt: Number(row["created_at"] ?? 0) };
  if (HISTORIES.has(row["history"] as string)) meta.history = row["history"] as "latest" | "rewindable";
  if (FORKS.has(row["fork"] as string)) meta.fork = row["fork"] as "asOf" | "current" | "initial";
  return meta;
}

/**
 * One document's stored value in every conversation `wanted` accepts, patches replayed (for reads
 * across conversations, such as a usage total or a list of titles, without loading each one).
 */
export async function readDocsNamed(
  sql: Sql,
  name: string,
  wanted: (conversationId: ConversationId) => boolean,
): Promise<Map<ConversationId, Json>> {
  const out = new Map<ConversationId, Json>();
  for (const row of await sql.all("SELECT conversation_id, value FROM documents WHERE name = ?", [name])) {
    const c = Number(row["conversation_id"]);
    if (c <= 0 || !wanted(c)) continue; // session and task documents belong to no conversation
    try {
      out.set(c, JSON.parse(String(row["value"])) as Json);
    } catch {
      // Unreadable: absent.
    }
  }
  for (const row of await sql.all("SELECT conversation_id, op FROM doc_patches WHERE name = ? ORDER BY id", [
    name,
  ])) {
    const c = Number(row["conversation_id"]);
    if (!wanted(c)) continue;
    try {
      out.set(c, applyDocPatches(out.get(c), [JSON.parse(String(row["op"])) as DocPatch]));
    } catch {
      // Skipped.
    }
  }
  return out;
}

/**
 * Documents `names` of conversations `ids` as stored, patches replayed, by conversation then name
 * (for a page of a list: its titles and run states), without loading the conversations. Reads by the
 * documents' primary key and the patches' index: O(ids), whatever the store holds. The ids and names
 * travel as JSON arrays, so one prepared statement serves every page size.
 */
export async function readDocsIn(
  sql: Sql,
  names: readonly string[],
  ids: readonly ConversationId[],
): Promise<Map<ConversationId, Map<string, Json>>> {
  const out = new Map<ConversationId, Map<string, Json>>();
  if (ids.length === 0 || names.length === 0) return out;
  const params = [JSON.stringify(ids), JSON.stringify(names)];
  const put = (c: ConversationId, name: string, value: Json) => {
    let docs = out.get(c);
    if (!docs) out.set(c, (docs = new Map()));
    docs.set(name, value);
  };
  for (const row of await sql.all(
    "SELECT conversation_id, name, value FROM documents WHERE conversation_id IN (SELECT value FROM json_each(?)) AND name IN (SELECT value FROM json_each(?))",
    params,
  )) {
    const c = Number(row["conversation_id"]);
    if (c <= 0) continue; // session and task documents belong to no conversation
    try {
      put(c, String(row["name"]), JSON.parse(String(row["value"])) as Json);
    } catch {
      // Unreadable: absent.
    }
  }
  for (const row of await sql.all(
    "SELECT conversation_id, name, op FROM doc_patches WHERE conversation_id IN (SELECT value FROM json_each(?)) AND name IN (SELECT value FROM json_each(?)) ORDER BY id",
    params,
  )) {
    const c = Number(row["conversation_id"]);
    const name = String(row["name"]);
    const value = out.get(c)?.get(name);
    if (value === undefined) continue; // a patch needs its document: skipped
    try {
      put(c, name, applyDocPatches(value, [JSON.parse(String(row["op"])) as DocPatch]));
    } catch {
      // Skipped.
    }
  }
  return out;
}
