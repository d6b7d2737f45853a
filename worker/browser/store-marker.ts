/**
 * The store's marker outside the store (core/store-identity.ts says what it is for): a small JSON
 * file in the origin's private file system (OPFS), `store-markers/<kind>-<store>.json`, beside the agent's
 * workspace and never inside IndexedDB, whose loss it is there to notice. Invariants:
 * - written whole (a writable stream replaces the file only when it closes), so a kill leaves the
 *   old marker or the new one, never half;
 * - a file that is not a marker (unparsable, wrong fields) reads as no marker, with a warning: it
 *   cannot name a store, so it must not make one look discarded;
 * - where OPFS is missing (an old browser, storage refused) there is no marker: reads find none and
 *   writes do nothing, which is the behaviour from before markers.
 */
import type { StoreMarker } from "../core/store-identity.ts";

/** Where an engine keeps its store's marker. */
export interface MarkerFile {
  read(): Promise<StoreMarker | undefined>;
  write(marker: StoreMarker): Promise<void>;
}

const DIR = "store-markers";

/** The marker's fields, checked: anything else is not a marker. */
export function parseMarker(text: string): StoreMarker | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof value !== "object" || value === null) return undefined;
  const { storeId, createdAt, lastExport } = value as Record<string, unknown>;
  if (typeof storeId !== "string" || storeId.length === 0 || typeof createdAt !== "number") return undefined;
  if (lastExport !== undefined) {
    const e = lastExport as Record<string, unknown> | null;
    if (
      typeof e !== "object" ||
      e === null ||
      typeof e["at"] !== "number" ||
      typeof e["fileName"] !== "string"
    )
      return undefined;
    return { storeId, createdAt, lastExport: { at: e["at"], fileName: e["fileName"] } };
  }
  return { storeId, createdAt };
}

async function markerDir(): Promise<FileSystemDirectoryHandle | undefined> {
  if (typeof navigator === "undefined" || typeof navigator.storage?.getDirectory !== "function") return;
  const root = await navigator.storage.getDirectory();
  return root.getDirectoryHandle(DIR, { create: true });
}

/** The OPFS marker of store `name` of `kind` (an idb and an opfs store of one name are two stores). */
export function opfsMarker(kind: "idb" | "opfs" | "opfs-lent", name: string): MarkerFile {
  const file = `${kind}-${encodeURIComponent(name)}.json`;
  return {
    async read() {
      const dir = await markerDir();
      if (!dir) return undefined;
      let text: string;
      try {
        text = await (await (await dir.getFileHandle(file)).getFile()).text();
      } catch (error) {
        if (error instanceof DOMException && error.name === "NotFoundError") return undefined;
        throw error;
      }
      const marker = parseMarker(text);
      if (!marker) console.warn(`store marker ${DIR}/${file} is not a marker; ignored`);
      return marker;
    },
    async write(marker) {
      const dir = await markerDir();
      if (!dir) return;
      const writable = await (await dir.getFileHandle(file, { create: true })).createWritable();
      await writable.write(JSON.stringify(marker));
      await writable.close();
    },
  };
}
