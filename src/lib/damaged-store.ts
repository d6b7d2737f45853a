/**
 * "Download the damaged store": when the engine says its store is corrupt, the tab reads the store's
 * database file straight out of the browser's storage, without SQLite and without the engine, so a
 * person keeps every byte that is still readable (a SQLite recovery tool, `sqlite3 damaged.sqlite
 * .recover`, gets back the rows of the pages that are intact). Both store kinds:
 * - idb: wa-sqlite's IDBBatchAtomicVFS layout: one IndexedDB database per store, named after it;
 *   `metadata` keyed by the file's path (`/<store>.db`) holding its size and version; `blocks` keyed by
 *   [path, -offset, version], where the lowest version at an offset is the newest;
 * - opfs and opfs-lent (OPFSCoopSyncVFS): the plain file `stores/<store>.db` in the origin's private
 *   file system, read whole (the engine closed it when it stopped, which frees its sync access handle),
 *   with the committed frames of its write-ahead log `stores/<store>.db-wal` written in (sqlite-wal.ts).
 * An existing store keeps its kind (worker/browser/store-kind.ts: a store with an IndexedDB database
 * is an idb store), so the IndexedDB database is looked for first and OPFS after.
 * Invariant: it only reads; a database or a directory that is not there is never created (an open
 * that would create it is aborted), and a block that is missing leaves zeros, so the file keeps its
 * size.
 */

import { applyWal } from "./sqlite-wal.ts";

export interface StoreFile {
  /** The database file's bytes, as far as its blocks are readable. */
  readonly bytes: Uint8Array;
  /** How many bytes of the file no block covered (left as zeros). */
  readonly missing: number;
}

interface Block {
  readonly path: string;
  readonly offset: number;
  readonly version: number;
  readonly data: Uint8Array;
}

function request<T>(r: IDBRequest<T>): Promise<T> {
  return new Promise((resolve, reject) => {
    r.onsuccess = () => resolve(r.result);
    r.onerror = () => reject(r.error);
  });
}

/** Open the store's IndexedDB database as it is; undefined when it does not exist. */
function openExisting(name: string): Promise<IDBDatabase | undefined> {
  return new Promise((resolve, reject) => {
    let created = false;
    const open = indexedDB.open(name);
    open.onupgradeneeded = () => {
      created = true;
      open.transaction?.abort();
    };
    open.onsuccess = () => resolve(open.result);
    open.onerror = () => (created ? resolve(undefined) : reject(open.error));
  });
}

/** Assemble a file from its blocks: per offset the lowest version (the newest) wins. */
export function assembleFile(blocks: readonly Block[], fileSize: number): StoreFile {
  const bytes = new Uint8Array(fileSize);
  const newest = new Map<number, Block>();
  for (const block of blocks) {
    const start = -block.offset;
    const seen = newest.get(start);
    if (!seen || block.version < seen.version) newest.set(start, block);
  }
  let covered = 0;
  for (const [start, block] of [...newest].sort((a, b) => a[0] - b[0])) {
    if (start >= fileSize) continue;
    const data = block.data.subarray(0, Math.max(0, Math.min(block.data.byteLength, fileSize - start)));
    bytes.set(data, start);
    covered += data.byteLength;
  }
  return { bytes, missing: Math.max(0, fileSize - covered) };
}

/** The store's database file, from IndexedDB (idb) or else from OPFS (opfs); undefined when neither has it. */
export async function readStoreFile(store: string): Promise<StoreFile | undefined> {
  return (await readIdbStoreFile(store)) ?? (await readOpfsStoreFile(store));
}

/** The opfs store `store`'s database file (`stores/<store>.db` in OPFS); undefined when there is none. */
export async function readOpfsStoreFile(store: string): Promise<StoreFile | undefined> {
  if (typeof navigator === "undefined" || typeof navigator.storage?.getDirectory !== "function") return;
  let dir: FileSystemDirectoryHandle;
  try {
    dir = await (await navigator.storage.getDirectory()).getDirectoryHandle("stores");
  } catch (error) {
    if (isAbsent(error)) return undefined;
    throw error;
  }
  const db = await readOpfsFile(dir, `${store}.db`);
  // The store's write-ahead log holds the commits since the last checkpoint: written in, they are
  // part of the download (a log that does not check out adds nothing; sqlite-wal.ts).
  const { bytes } = applyWal(db ?? new Uint8Array(0), await readOpfsFile(dir, `${store}.db-wal`));
  if (bytes.byteLength === 0) return undefined;
  return { bytes, missing: 0 };
}

function isAbsent(error: unknown): boolean {
  return (
    error instanceof DOMException && (error.name === "NotFoundError" || error.name === "TypeMismatchError")
  );
}

/** A file of `dir` read whole; undefined when it is not there. */
async function readOpfsFile(dir: FileSystemDirectoryHandle, name: string): Promise<Uint8Array | undefined> {
  try {
    const file = await (await dir.getFileHandle(name)).getFile();
    return new Uint8Array(await file.arrayBuffer());
  } catch (error) {
    if (isAbsent(error)) return undefined;
    throw error;
  }
}

/** The idb store `store`'s database file, read from IndexedDB; undefined when there is none. */
export async function readIdbStoreFile(store: string): Promise<StoreFile | undefined> {
  const db = await openExisting(store);
  if (!db) return undefined;
  try {
    if (!db.objectStoreNames.contains("blocks") || !db.objectStoreNames.contains("metadata"))
      return undefined;
    const path = `/${store}.db`;
    const tx = db.transaction(["blocks", "metadata"], "readonly");
    const meta = (await request(tx.objectStore("metadata").get(path))) as { fileSize?: number } | undefined;
    const range = IDBKeyRange.bound([path, Number.NEGATIVE_INFINITY], [path, Number.POSITIVE_INFINITY]);
    const blocks = ((await request(tx.objectStore("blocks").getAll(range))) as Block[]).filter(
      (b) => typeof b.offset === "number" && b.data instanceof Uint8Array,
    );
    const end = Math.max(0, ...blocks.map((b) => -b.offset + b.data.byteLength));
    const size = typeof meta?.fileSize === "number" && meta.fileSize > 0 ? meta.fileSize : end;
    return assembleFile(blocks, size);
  } finally {
    db.close();
  }
}
