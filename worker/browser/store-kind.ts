/**
 * Which store kind the SharedWorker engine opens (issue 30; decision 0015): the opfs store in a
 * dedicated worker a tab lends (`opfs-lent`, worker/browser/store-lenders.ts) where the browser has
 * OPFS sync access handles, the idb store (IDBBatchAtomicVFS) otherwise. Invariants:
 * - **an existing store keeps its kind.** A store that lives in IndexedDB (an IndexedDB database of
 *   the store's name, or the idb store's marker in OPFS, store-marker.ts) opens as idb, so a profile
 *   from a build before this choice opens with its conversations, and an idb store the browser
 *   discarded is still reported as discarded (its marker survives it). Nothing is copied between
 *   kinds: no store is ever moved, so no crash can leave two stores or none in charge;
 * - a store that cannot be told apart safely (the browser cannot list its IndexedDB databases, and
 *   no opfs-lent marker says the store is in OPFS) opens as idb, the kind of every store before;
 * - only a new store gets `opfs-lent`, and it falls back to idb when the lent worker says OPFS sync
 *   access handles are missing (`unsupported` at its open: the probe is the real open, in the tab's
 *   dedicated worker, where they would exist); an error of any other reason is the store's own and
 *   is reported, never hidden by a fallback;
 * - the choice is made under the store's lock (`openStore`), where no other engine can create
 *   either kind's store meanwhile; a page may force a kind (`storeKind=idb|opfs-lent`: tests and
 *   benches), which skips the choice.
 */
import { StoreOpenError } from "../store/types.ts";
import type { HostPlatform, OpenStamp } from "./platform.ts";
import { opfsMarker } from "./store-marker.ts";

/** The kinds a SharedWorker engine can open. */
export type SharedStoreKind = "idb" | "opfs-lent";

/** What the browser shows of the store's name before it opens (`readKindEvidence`). */
export interface KindEvidence {
  /** An IndexedDB database of the store's name exists; undefined where the browser cannot list them. */
  readonly idbDatabase: boolean | undefined;
  /** The idb store's marker (it once held data in IndexedDB). */
  readonly idbMarker: boolean;
  /** The opfs-lent store's marker (it once held data in OPFS). */
  readonly opfsLentMarker: boolean;
  /** This context reaches OPFS at all (`navigator.storage.getDirectory`). */
  readonly opfs: boolean;
}

/** The kind to open and why; `fallback`: open idb instead if the lent worker has no OPFS sync handles. */
export type KindChoice =
  | { readonly kind: "idb"; readonly why: string }
  | { readonly kind: "opfs-lent"; readonly why: string; readonly fallback: boolean };

/** The query parameter (page URL and worker name) with which a page forces a store kind. */
export const STORE_KIND_PARAM = "storeKind";

/** The kind a page forced, if it named one this engine knows. */
export function requestedStoreKind(params: URLSearchParams): SharedStoreKind | undefined {
  const kind = params.get(STORE_KIND_PARAM);
  return kind === "idb" || kind === "opfs-lent" ? kind : undefined;
}

/** Choose the kind for a store from what the browser shows of it (pure: unit-tested on every case). */
export function chooseStoreKind(evidence: KindEvidence): KindChoice {
  const { idbDatabase, idbMarker, opfsLentMarker, opfs } = evidence;
  if (idbMarker) return { kind: "idb", why: "the store's marker says it lives in IndexedDB" };
  if (opfsLentMarker)
    return { kind: "opfs-lent", why: "the store's marker says it lives in OPFS", fallback: false };
  if (idbDatabase) return { kind: "idb", why: "the store's IndexedDB database exists" };
  if (idbDatabase === undefined)
    return {
      kind: "idb",
      why: "this browser cannot list IndexedDB databases, so an existing store might be there",
    };
  if (!opfs) return { kind: "idb", why: "this context has no OPFS" };
  return {
    kind: "opfs-lent",
    why: "a new store, on OPFS where the browser has sync access handles",
    fallback: true,
  };
}

async function hasMarker(kind: SharedStoreKind, name: string): Promise<boolean> {
  try {
    return (await opfsMarker(kind, name).read()) !== undefined;
  } catch {
    return false;
  }
}

/**
 * Read what `chooseStoreKind` needs from this browser context (a worker or a page). The probes run
 * at once, not one after another: IndexedDB's list beside OPFS's directory and then the two markers
 * (the caller holds the store's lock while it waits: `choosingPlatform`).
 */
export async function readKindEvidence(name: string): Promise<KindEvidence> {
  const opfsProbe = (async () => {
    try {
      if (typeof navigator !== "undefined" && typeof navigator.storage?.getDirectory === "function") {
        await navigator.storage.getDirectory();
        return true;
      }
    } catch {
      // Storage refused (a private window, a site setting): no OPFS here.
    }
    return false;
  })();
  const idbProbe = (async () => {
    try {
      return typeof indexedDB !== "undefined" && typeof indexedDB.databases === "function"
        ? (await indexedDB.databases()).some((d) => d.name === name)
        : undefined;
    } catch {
      return undefined;
    }
  })();
  const markers = opfsProbe.then((opfs): Promise<[boolean, boolean]> | [boolean, boolean] =>
    opfs ? Promise.all([hasMarker("idb", name), hasMarker("opfs-lent", name)]) : [false, false],
  );
  const [opfs, idbDatabase, [idbMarker, opfsLentMarker]] = await Promise.all([opfsProbe, idbProbe, markers]);
  return { idbDatabase, idbMarker, opfsLentMarker, opfs };
}

/** A platform whose kind is chosen when the store opens (`choosingPlatform`); `choice` says which and why. */
export interface ChoosingPlatform extends HostPlatform {
  readonly choice: KindChoice | undefined;
}

/**
 * The SharedWorker's platform when the page forced no kind: `openStore` (called under the store's
 * lock) chooses with `decide`, opens that kind's platform, and from then on every field (kind, jspi,
 * marker, scratch stores) is the chosen platform's. Before the open they are idb's (nothing reads
 * them then: the status says the kind once ready).
 */
export function choosingPlatform(options: {
  readonly platforms: Readonly<Record<SharedStoreKind, HostPlatform>>;
  decide(): Promise<KindChoice>;
}): ChoosingPlatform {
  const { platforms } = options;
  let chosen: HostPlatform | undefined;
  let choice: KindChoice | undefined;
  const current = () => chosen ?? platforms.idb;
  return {
    get storeName() {
      return current().storeName;
    },
    get build() {
      return current().build;
    },
    get storeKind() {
      return current().storeKind;
    },
    get jspi() {
      return current().jspi;
    },
    get marker() {
      return current().marker;
    },
    get choice() {
      return choice;
    },
    async openStore(stamp?: OpenStamp) {
      choice = await options.decide();
      stamp?.("kindAt");
      if (choice.kind === "opfs-lent") {
        try {
          const store = await platforms["opfs-lent"].openStore(stamp);
          chosen = platforms["opfs-lent"];
          return store;
        } catch (error) {
          if (!choice.fallback || !(error instanceof StoreOpenError) || error.reason !== "unsupported")
            throw error;
          choice = { kind: "idb", why: `a new store, on IndexedDB: ${error.message}` };
        }
      }
      chosen = platforms.idb;
      return platforms.idb.openStore(stamp);
    },
    openScratchStore: (name) => current().openScratchStore(name),
    deleteScratchStore: (name) => current().deleteScratchStore(name),
  };
}
