/**
 * Text search over conversations: which conversations have a user or assistant message containing a
 * text (case-insensitive). SQLite narrows the rows with LIKE over the stored entry body (which also
 * holds JSON keys and tool data); each candidate is then confirmed on the message text itself, so a
 * search for "role" or "content" matches only conversations that say it. Reads committed rows only.
 */

import { modelMessages } from "../agent/records.ts";
import type { EntryRecord } from "../core/types.ts";
import type { Store } from "../store/types.ts";

/** How many candidate rows one search looks at (newest first): a bound on its cost. */
export const SEARCH_ROW_LIMIT = 5000;

/** The words a person reads in an entry: user and assistant text (no tool data, no thinking). */
export function entryText(entry: Pick<EntryRecord, "model">): string {
  const parts: string[] = [];
  for (const m of modelMessages(entry)) {
    if (m.role !== "user" && m.role !== "assistant") continue;
    if (typeof m.content === "string") parts.push(m.content);
    else for (const c of m.content) if (c.type === "text") parts.push(c.text);
  }
  return parts.join("\n");
}

function likePattern(text: string): string {
  return `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

/** Conversation ids (newest activity first) whose messages contain `text`. */
export async function searchConversationText(store: Store, text: string): Promise<number[]> {
  const needle = text.trim().toLowerCase();
  if (!needle) return [];
  const rows = await store.read((sql) =>
    sql.all(
      "SELECT conversation_id, body FROM entries WHERE kind IN ('pi.user', 'pi.assistant') AND body LIKE ? ESCAPE '\\' ORDER BY id DESC LIMIT ?",
      [likePattern(needle), SEARCH_ROW_LIMIT],
    ),
  );
  const found: number[] = [];
  const seen = new Set<number>();
  for (const row of rows) {
    const id = Number(row["conversation_id"]);
    if (seen.has(id)) continue;
    const body = JSON.parse(String(row["body"])) as Pick<EntryRecord, "model">;
    if (entryText(body).toLowerCase().includes(needle)) {
      seen.add(id);
      found.push(id);
    }
  }
  return found;
}
