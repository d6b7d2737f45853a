/**
 * A conversation's active range in pages, newest first, for a view that carries only its newest
 * entries (the tab's watch) and fetches older ones as the reader scrolls up. The active range in
 * view order (view-ops.ts) is its newest head marker, if any, then the other entries from the
 * marker's head on in id order; a page is the `limit` entries that precede a given entry in that
 * order (none given: the newest `limit`), and `older` counts the entries before the page. Reads only
 * the page's rows and index-only counts, never the whole range, and honours forks' segments (fork.ts).
 */
import type { Sql } from "../store/types.ts";
import { countVisibleEntries, newestMarker, readNewestEntries, type Segment } from "./fork.ts";
import type { EntryId, EntryRecord } from "./types.ts";

/** A page of the active range: entries in view order, and how many entries of the range precede them. */
export interface EntryPage {
  readonly entries: readonly EntryRecord[];
  readonly older: number;
}

/** Entries of the first page of a paged view (the tab's watch). */
export const FIRST_PAGE = 150;
/** Entries a tab asks for at most in one older page. */
export const MAX_PAGE = 1000;

/**
 * The `limit` entries of the active range that precede entry `before` in view order (before
 * undefined: the newest `limit`). When the page reaches the range's start it also holds the head
 * marker (so it may hold `limit + 1`). An entry `before` outside the range gives what precedes
 * its place in id order; the range's marker itself has nothing before it.
 */
export async function readActivePage(
  sql: Sql,
  segments: readonly Segment[],
  options: { before?: EntryId; limit: number },
): Promise<EntryPage> {
  const marker = await newestMarker(sql, segments);
  if (marker && options.before === marker.id) return { entries: [], older: 0 };
  const afterId = (marker?.head ?? 0) - 1;
  const limit = Math.max(1, Math.floor(options.limit));
  const page = await readNewestEntries(sql, segments, {
    afterId,
    ...(options.before !== undefined ? { before: options.before } : {}),
    limit,
    markers: false,
  });
  if (page.length < limit) return { entries: marker ? [marker, ...page] : page, older: 0 };
  const before = await countVisibleEntries(sql, segments, { afterId, before: page[0]!.id, markers: false });
  return { entries: page, older: before + (marker ? 1 : 0) };
}
