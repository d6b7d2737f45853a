/**
 * The tab's "Download the damaged store" (src/lib/damaged-store.ts) assembles the database file from
 * IDBBatchAtomicVFS's block records without SQLite: per offset the newest version (the lowest number)
 * wins, a block past the file's end is cut, and bytes no block covers stay zeros and are counted.
 * The whole path (IndexedDB in Chromium, a damaged store, the download read back by SQLite) is
 * tests/e2e/storage-hostile.test.ts. An opfs store's file is read as it is from `stores/<store>.db`
 * in OPFS (faked here), and a store with no file there has nothing to download.
 */
import { afterEach, expect, test, vi } from "vitest";
import { assembleFile, readOpfsStoreFile } from "../../../src/lib/damaged-store.ts";

const block = (offset: number, version: number, ...bytes: number[]) => ({
  path: "/s.db",
  offset: -offset,
  version,
  data: new Uint8Array(bytes),
});

test("the newest version of each block wins, in file order, and gaps stay zeros and are counted", () => {
  const file = assembleFile(
    [block(4, 0, 9, 9, 9, 9), block(0, 0, 1, 1, 1, 1), block(0, -1, 2, 2, 2, 2), block(12, 0, 7, 7, 7, 7)],
    14,
  );
  expect([...file.bytes]).toEqual([2, 2, 2, 2, 9, 9, 9, 9, 0, 0, 0, 0, 7, 7]);
  expect(file.missing).toBe(4);
});

test("no blocks: a file of zeros of the recorded size, all of it missing", () => {
  const file = assembleFile([], 8);
  expect([...file.bytes]).toEqual([0, 0, 0, 0, 0, 0, 0, 0]);
  expect(file.missing).toBe(8);
});

afterEach(() => {
  vi.unstubAllGlobals();
});

/** OPFS holding `files` under `stores/` (or no `stores/` directory at all). */
function fakeOpfs(files: Record<string, Uint8Array> | undefined) {
  const notFound = () => new DOMException("not found", "NotFoundError");
  const stores = {
    async getFileHandle(name: string) {
      const bytes = files?.[name];
      if (!bytes) throw notFound();
      return { getFile: async () => new Blob([bytes as Uint8Array<ArrayBuffer>]) };
    },
  };
  const root = {
    async getDirectoryHandle(name: string) {
      if (name !== "stores" || !files) throw notFound();
      return stores;
    },
  };
  vi.stubGlobal("navigator", { storage: { getDirectory: async () => root } });
}

test("an opfs store's file is read whole from OPFS; no file, no directory or no OPFS is nothing to download", async () => {
  fakeOpfs({ "s.db": new Uint8Array([1, 2, 3, 4]) });
  const file = await readOpfsStoreFile("s");
  expect([...(file?.bytes ?? [])]).toEqual([1, 2, 3, 4]);
  expect(file?.missing).toBe(0);
  expect(await readOpfsStoreFile("other")).toBeUndefined();
  fakeOpfs({ "e.db": new Uint8Array(0) });
  expect(await readOpfsStoreFile("e")).toBeUndefined();
  fakeOpfs(undefined);
  expect(await readOpfsStoreFile("s")).toBeUndefined();
  vi.unstubAllGlobals();
  vi.stubGlobal("navigator", undefined);
  expect(await readOpfsStoreFile("s")).toBeUndefined();
});
