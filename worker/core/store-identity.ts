/**
 * A store's identity and the verdict on a store found at open against the marker its last engine
 * left outside it. A browser may delete a site's IndexedDB on its own (Chromium does when it finds
 * its LevelDB damaged after a crash: docs/ARCHITECTURE.md, "The kill storm in the browser"); the
 * engine would then open an empty store and the person would see an empty app without a word. The
 * marker (worker/browser/store-marker.ts keeps it in OPFS) says "a store with this identity held
 * data here", so an empty store under a marker is named for what it is: discarded by the browser.
 * Invariants:
 * - the identity is a random id in the store's `meta` table (`store_id`), committed before the
 *   marker is written: a marker therefore names a store that durably held data;
 * - the verdict never says a store is fine when the marker names a store that is not there (empty,
 *   without an identity, or with another one): those are all "discarded", and only a person's
 *   choice (start fresh) lets the engine go on with what is there;
 * - no marker is no evidence: a new store, or a store older than markers, is taken as it is.
 * Pure apart from the two statements on the store; no platform API.
 */
import type { Store } from "../store/types.ts";

/** What the marker outside the store holds. */
export interface StoreMarker {
  /** The identity of the store that held data here (its `meta` row `store_id`). */
  readonly storeId: string;
  /** When that store got its identity (ms since the epoch). */
  readonly createdAt: number;
  /** The newest export made from that store, if any: the person may still have the file. */
  readonly lastExport?: { readonly at: number; readonly fileName: string };
}

/** What an open found, against the marker. */
export type StoreVerdict =
  /** No marker and an empty store: a new store. */
  | { readonly kind: "new" }
  /** The marker names this store. */
  | { readonly kind: "same"; readonly storeId: string }
  /** The store has data and no marker names it (older than markers, or the marker was lost): keep it, mark it. */
  | { readonly kind: "unmarked" }
  /** The marker names a store that is not here: the browser discarded it. */
  | {
      readonly kind: "discarded";
      readonly marker: StoreMarker;
      /** What is here instead: nothing, data without an identity, or another store's identity. */
      readonly found: "empty" | "unnamed" | "other";
    };

/** What the open saw of the store: its schema version at open (0: empty) and its identity, if any. */
export interface StoreFound {
  readonly schemaVersion: number;
  readonly storeId: string | undefined;
}

export function judgeStore(found: StoreFound, marker: StoreMarker | undefined): StoreVerdict {
  const empty = found.schemaVersion === 0;
  if (!marker) return empty ? { kind: "new" } : { kind: "unmarked" };
  if (empty) return { kind: "discarded", marker, found: "empty" };
  if (found.storeId === undefined) return { kind: "discarded", marker, found: "unnamed" };
  if (found.storeId !== marker.storeId) return { kind: "discarded", marker, found: "other" };
  return { kind: "same", storeId: found.storeId };
}

const READ_ID = "SELECT value FROM meta WHERE key = 'store_id'";

/** The store's identity; undefined for an empty store (no tables yet) or one that never got one. */
export async function readStoreId(store: Store): Promise<string | undefined> {
  if (store.schemaVersion === 0) return undefined;
  const row = await store.read((sql) => sql.get(READ_ID));
  const value = row?.["value"];
  return typeof value === "string" ? value : undefined;
}

/**
 * Give a migrated store an identity if it has none (one commit); returns it. `newId` is for tests.
 */
export async function ensureStoreId(
  store: Store,
  newId: () => string = () => crypto.randomUUID(),
): Promise<string> {
  return store.commit(async (sql) => {
    const row = await sql.get(READ_ID);
    const value = row?.["value"];
    if (typeof value === "string") return value;
    const id = newId();
    await sql.run("INSERT INTO meta (key, value) VALUES ('store_id', ?)", [id]);
    return id;
  });
}
