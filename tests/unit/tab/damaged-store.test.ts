/**
 * The tab's "Download the damaged store" (src/lib/damaged-store.ts) assembles the database file from
 * IDBBatchAtomicVFS's block records without SQLite: per offset the newest version (the lowest number)
 * wins, a block past the file's end is cut, and bytes no block covers stay zeros and are counted.
 * The whole path (IndexedDB in Chromium, a damaged store, the download read back by SQLite) is
 * tests/e2e/storage-hostile.test.ts.
 */
import { expect, test } from "vitest";
import { assembleFile } from "../../../src/lib/damaged-store.ts";

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
