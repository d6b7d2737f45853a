/**
 * Text search over conversations: which conversations have a user or assistant message containing a
 * text (case-insensitive). The core's `entriesContaining` narrows the rows with SQLite's LIKE over
 * the stored entry body (which also holds JSON keys and tool data); each candidate is then confirmed
 * on the message text itself, so a search for "role" or "content" matches only conversations that
 * say it; the rows are narrowed by the needle as JSON spells it (a quote, a backslash, a control
 * character is stored escaped). Reads committed rows only. A saved secret (secrets.ts) is redacted from the text before it
 * is matched: no search finds a conversation by a key or token pasted into it, nor by a piece of one.
 */

import { modelMessages } from "../agent/records.ts";
import { entriesContaining } from "../core/queries.ts";
import type { EntryRecord } from "../core/types.ts";
import type { Store } from "../store/types.ts";
import { redactSecrets } from "./secrets.ts";

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

/** Conversation ids (newest activity first) whose messages contain `text`. */
export async function searchConversationText(
  store: Store,
  text: string,
  options: { secrets?: readonly string[] } = {},
): Promise<number[]> {
  const needle = text.trim().toLowerCase();
  if (!needle) return [];
  // The rows hold JSON: a quote, a backslash, a control character or a lone surrogate is stored
  // escaped, so the rows are narrowed by the needle as JSON writes it.
  const candidates = await entriesContaining(store, JSON.stringify(needle).slice(1, -1), {
    kinds: ["pi.user", "pi.assistant"],
    limit: SEARCH_ROW_LIMIT,
  });
  const found: number[] = [];
  const seen = new Set<number>();
  for (const entry of candidates) {
    const id = entry.conversationId;
    if (seen.has(id)) continue;
    if (
      redactSecrets(entryText(entry), options.secrets ?? [])
        .toLowerCase()
        .includes(needle)
    ) {
      seen.add(id);
      found.push(id);
    }
  }
  return found;
}
