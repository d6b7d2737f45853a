/**
 * Values out of line: an entry's or a submission's long strings kept in parts of their own rows, for
 * a store whose rows are bounded (a Durable Object's SQLite stores at most 2 MB in one; the harness's
 * `maxValueBytes` says so, decision 0016). Everything above the rows sees whole records: `spillBody`
 * runs where persist.ts writes a body, `unspill` where a row is read back. Invariants:
 * - a body is spilled only when its JSON is over the bound; then each string in it of at least
 *   `SPILL_MIN_CHARS` characters is replaced by its address (`sha256:<hex>` of its UTF-8) and the
 *   body gains `$spill`, the paths of those strings (no engine record has a `$spill` key of its own,
 *   so a body without it is read as it is: stores that never spill keep reading as before);
 * - parts are content-addressed: the same string (an image in the entry and in the submission it
 *   came from, a submission rewritten as its status moves) is stored once, and a part set is
 *   written whole in the transaction that first refers to it, so a stored address always resolves;
 * - each part holds at most `SPILL_PART_CHARS` UTF-16 units (at most 3 bytes of UTF-8 each: 1.5 MB),
 *   never cut inside a surrogate pair;
 * - `spill_refs` names each conversation whose rows refer to an address; deleting a conversation
 *   deletes its references and then every part no reference names (persist.ts).
 */
import type { Sql } from "../store/types.ts";

/** The shortest string a spilled body keeps out of line. */
export const SPILL_MIN_CHARS = 16 * 1024;
/** The most UTF-16 units a part row holds. */
export const SPILL_PART_CHARS = 500_000;

/** The key a spilled body lists its out-of-line paths under: reserved, no entry draft may carry it (tx.ts). */
export const SPILL_KEY = "$spill";
type Path = readonly (string | number)[];

/** The UTF-8 length of `text` (exact; stops counting once it is over `above`). */
export function utf8Length(text: string, above = Number.POSITIVE_INFINITY): number {
  if (text.length * 3 <= above) return text.length; // cannot be over: callers compare with `above`
  let bytes = 0;
  for (let i = 0; i < text.length && bytes <= above; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) bytes += 1;
    else if (c < 0x800) bytes += 2;
    else if (c >= 0xd800 && c < 0xdc00 && i + 1 < text.length) {
      const d = text.charCodeAt(i + 1);
      if (d >= 0xdc00 && d < 0xe000) {
        bytes += 4;
        i++;
      } else bytes += 3;
    } else bytes += 3;
  }
  return bytes;
}

/** `text` cut in parts of at most `SPILL_PART_CHARS` units, never inside a surrogate pair. */
export function cutParts(text: string, max = SPILL_PART_CHARS): string[] {
  const parts: string[] = [];
  let at = 0;
  while (at < text.length) {
    let end = Math.min(text.length, at + max);
    const last = text.charCodeAt(end - 1);
    if (end < text.length && last >= 0xd800 && last < 0xdc00) end--;
    parts.push(text.slice(at, end));
    at = end;
  }
  return parts;
}

async function address(text: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)));
  let hex = "";
  for (const b of digest) hex += b.toString(16).padStart(2, "0");
  return `sha256:${hex}`;
}

function longStrings(value: unknown, path: (string | number)[], out: Path[]): void {
  if (typeof value === "string") {
    if (value.length >= SPILL_MIN_CHARS) out.push([...path]);
  } else if (Array.isArray(value)) {
    value.forEach((item, i) => {
      path.push(i);
      longStrings(item, path, out);
      path.pop();
    });
  } else if (typeof value === "object" && value !== null) {
    for (const [key, item] of Object.entries(value)) {
      path.push(key);
      longStrings(item, path, out);
      path.pop();
    }
  }
}

/** A copy of `value` with the string at `path` replaced (plain JSON data only). */
function replaced(value: unknown, path: Path, at: number, text: string): unknown {
  if (at === path.length) return text;
  const key = path[at]!;
  if (Array.isArray(value)) {
    const copy = value.slice();
    copy[key as number] = replaced(value[key as number], path, at + 1, text);
    return copy;
  }
  const object = value as Record<string, unknown>;
  return { ...object, [key]: replaced(object[key as string], path, at + 1, text) };
}

function at(value: unknown, path: Path): unknown {
  let v = value;
  for (const key of path) v = (v as Record<string | number, unknown> | undefined)?.[key];
  return v;
}

/**
 * The text to store for `body` (a row's JSON) in conversation `conversationId`: its JSON as it is
 * when that fits `maxBytes` (or there is no bound), else with its long strings out of line, their
 * parts and references written through `sql` (inside the caller's transaction).
 */
export async function spillBody(
  sql: Sql,
  conversationId: number,
  body: object,
  maxBytes: number | undefined,
): Promise<string> {
  const text = JSON.stringify(body);
  if (maxBytes === undefined || utf8Length(text, maxBytes) <= maxBytes) return text;
  const paths: Path[] = [];
  longStrings(body, [], paths);
  if (paths.length === 0) return text;
  let out: unknown = body;
  for (const path of paths) {
    const value = at(body, path) as string;
    const key = await address(value);
    const stored = await sql.get("SELECT 1 AS x FROM spills WHERE hash = ? AND idx = 0", [key]);
    if (!stored) {
      const parts = cutParts(value);
      for (let i = 0; i < parts.length; i++)
        await sql.run("INSERT INTO spills (hash, idx, count, part) VALUES (?, ?, ?, ?)", [
          key,
          i,
          parts.length,
          parts[i]!,
        ]);
    }
    await sql.run("INSERT OR IGNORE INTO spill_refs (hash, conversation_id) VALUES (?, ?)", [
      key,
      conversationId,
    ]);
    out = replaced(out, path, 0, key);
  }
  return JSON.stringify({ ...(out as object), [SPILL_KEY]: paths });
}

/** Whether a parsed body has strings out of line (`unspill` joins them). */
export function isSpilled(body: object): boolean {
  return Array.isArray((body as Record<string, unknown>)[SPILL_KEY]);
}

/** A parsed body read back whole: its out-of-line strings joined from their parts (the same object when none). */
export async function unspill<T extends object>(sql: Sql, body: T): Promise<T> {
  const paths = (body as Record<string, unknown>)[SPILL_KEY];
  if (!Array.isArray(paths)) return body;
  const { [SPILL_KEY]: _, ...rest } = body as Record<string, unknown>;
  let out: unknown = rest;
  for (const path of paths as Path[]) {
    const key = at(rest, path);
    if (typeof key !== "string") throw new Error(`a spilled value's address is missing at ${path.join(".")}`);
    const rows = await sql.all("SELECT idx, count, part FROM spills WHERE hash = ? ORDER BY idx", [key]);
    const count = Number(rows[0]?.["count"] ?? -1);
    if (rows.length !== count || rows.some((row, i) => Number(row["idx"]) !== i))
      throw new Error(`the parts of the spilled value ${key} are not all stored`);
    out = replaced(out, path, 0, rows.map((row) => String(row["part"])).join(""));
  }
  return out as T;
}
