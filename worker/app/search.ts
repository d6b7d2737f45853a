/**
 * Text search over conversations: which conversations have a user or assistant message containing a
 * text (case-insensitive). The core's `entriesContaining` narrows the rows with SQLite's LIKE over
 * the stored entry body (which also holds JSON keys and tool data); each candidate is then confirmed
 * on the message text itself, so a search for "role" or "content" matches only conversations that
 * say it; the rows are narrowed by the needle as JSON spells it (a quote, a backslash, a control
 * character is stored escaped). Reads committed rows only. A saved secret (secrets.ts) is redacted from the text before it
 * is matched: no search finds a conversation by a key or token pasted into it, nor by a piece of one.
 *
 * Paged (`searchConversationPage`, what the tab uses): a page walks the entries newest first in id
 * windows on the primary key and stops once it found `limit` conversations or read `scanRows` ids'
 * worth of rows, and says where the next page starts. So a page costs the same on any store, and a
 * rare word in old messages is found by asking for further pages, never by one call reading the
 * whole table. `searchConversationText` (the whole-store answer) stays for callers that want it.
 */

import { modelMessages } from "../agent/records.ts";
import { entriesContaining, entriesContainingIn, newestEntryId } from "../core/queries.ts";
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

/** Ids of stored entries one search page reads at most (its window on the primary key). */
export const SEARCH_PAGE_ROWS = 20_000;
/** Ids one window covers: a page reads windows until its limit or `SEARCH_PAGE_ROWS`. */
const SEARCH_WINDOW = 5_000;

/** A page of text matches: conversation ids (newest match first) and where the next page starts. */
export interface TextPage {
  ids: number[];
  /** The entry id the next page searches below; absent once the oldest entry was searched. */
  before?: number;
}

/**
 * Up to `limit` conversations (their newest matching message first) whose user or assistant text
 * contains `text`, among the entries below `before` (all, when absent), reading at most `scanRows`
 * entry ids. `accept` filters the conversations (the top-level ones: of the ids it is given, those
 * it resolves with; asked once per window); `skip` ones are not counted.
 */
export async function searchConversationPage(
  store: Store,
  text: string,
  options: {
    limit: number;
    before?: number;
    secrets?: readonly string[];
    accept?: (ids: readonly number[]) => Promise<ReadonlySet<number>>;
    skip?: ReadonlySet<number>;
    scanRows?: number;
    window?: number;
  },
): Promise<TextPage> {
  const needle = text.trim().toLowerCase();
  if (!needle || options.limit < 1) return { ids: [] };
  const pattern = JSON.stringify(needle).slice(1, -1);
  const scanRows = Math.max(1, options.scanRows ?? SEARCH_PAGE_ROWS);
  const window = Math.max(1, Math.min(scanRows, options.window ?? SEARCH_WINDOW));
  let to = options.before ?? (await newestEntryId(store)) + 1;
  const ids: number[] = [];
  const seen = new Set<number>(options.skip);
  let read = 0;
  while (to > 1 && read < scanRows) {
    const from = Math.max(1, to - Math.min(window, scanRows - read));
    const candidates = await entriesContainingIn(store, pattern, {
      kinds: ["pi.user", "pi.assistant"],
      from,
      to,
    });
    read += to - from;
    const accepted = options.accept
      ? await options.accept(
          [...new Set(candidates.map((e) => e.conversationId))].filter((id) => !seen.has(id)),
        )
      : undefined;
    for (const entry of candidates) {
      const id = entry.conversationId;
      if (seen.has(id) || (accepted !== undefined && !accepted.has(id))) continue;
      if (
        !redactSecrets(entryText(entry), options.secrets ?? [])
          .toLowerCase()
          .includes(needle)
      )
        continue;
      seen.add(id);
      ids.push(id);
      // The page is full: the next one starts below this entry (an older one of it may match again).
      if (ids.length === options.limit) return { ids, before: entry.id };
    }
    to = from;
  }
  return to > 1 ? { ids, before: to } : { ids };
}
