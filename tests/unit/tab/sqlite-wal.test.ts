/**
 * A write-ahead log applied by hand (src/lib/sqlite-wal.ts), against logs SQLite itself wrote: a
 * memory store in WAL mode (exclusive locking, as the opfs kind runs it) whose files are taken
 * before any checkpoint, so its recent commits are in the log only. The database file alone lacks
 * them; with the log applied, SQLite reads every committed row; a torn or damaged frame ends the log
 * there, and a transaction without its commit frame is left out.
 */
import { afterEach, expect, test, vi } from "vitest";
import { readOpfsStoreFile } from "../../../src/lib/damaged-store.ts";
import { applyWal } from "../../../src/lib/sqlite-wal.ts";
import { type MemoryImage, openStore } from "../../../worker/store/open.ts";

/** A store in WAL mode with `commits` one-row commits of ~3 KB each, its files taken while open. */
async function walImage(commits: number): Promise<{ db: Uint8Array; wal: Uint8Array }> {
  const store = await openStore({ kind: "memory", name: "w" });
  await store.read((sql) => sql.run("PRAGMA locking_mode = EXCLUSIVE"));
  expect(await store.read((sql) => sql.get("PRAGMA journal_mode = WAL"))).toEqual({ journal_mode: "wal" });
  await store.read((sql) => sql.run("PRAGMA wal_autocheckpoint = 0"));
  await store.commit((sql) => sql.run("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)"));
  for (let i = 0; i < commits; i++)
    await store.commit((sql) =>
      sql.run("INSERT INTO t (id, body) VALUES (?, ?)", [i, `row ${i} `.repeat(400)]),
    );
  const image = store.image();
  const file = (suffix: string) => image.find((f) => f.path === `/w.db${suffix}`)?.bytes;
  const db = file("") ?? new Uint8Array(0);
  const wal = file("-wal");
  expect(wal?.byteLength).toBeGreaterThan(0);
  await store.close();
  return { db, wal: wal! };
}

/** The ids SQLite reads from a database file alone (undefined: SQLite refused it). */
async function idsIn(bytes: Uint8Array): Promise<number[] | undefined> {
  const image: MemoryImage = [{ path: "/r.db", bytes }];
  try {
    const store = await openStore({ kind: "memory", name: "r", image });
    const rows = await store.read((sql) => sql.all("SELECT id, body FROM t ORDER BY id"));
    await store.close();
    for (const r of rows) expect(r["body"]).toBe(`row ${r["id"]} `.repeat(400));
    return rows.map((r) => Number(r["id"]));
  } catch {
    return undefined;
  }
}

const PAGE_FRAME = 24 + 4096;

test("a log SQLite wrote, applied to its database file, gives every committed row; the file alone lacks them", async () => {
  const { db, wal } = await walImage(5);
  const alone = await idsIn(db);
  expect(alone ?? []).not.toEqual([0, 1, 2, 3, 4]);
  const applied = applyWal(db, wal);
  expect(applied.frames).toBe((wal.byteLength - 32) / PAGE_FRAME);
  // It stands alone: marked a rollback-journal file (header bytes 18 and 19), as the download is.
  expect([db[18], db[19], applied.bytes[18], applied.bytes[19]]).toEqual([2, 2, 1, 1]);
  expect(await idsIn(applied.bytes)).toEqual([0, 1, 2, 3, 4]);
});

test("a torn last frame leaves out its transaction only; a damaged frame ends the log there", async () => {
  const { db, wal } = await walImage(4);
  const frames = (wal.byteLength - 32) / PAGE_FRAME;
  // Torn: the last frame half written (a crash mid-commit): the last transaction is not there.
  const torn = applyWal(db, wal.subarray(0, wal.byteLength - PAGE_FRAME / 2));
  expect(torn.frames).toBeLessThan(frames);
  expect(await idsIn(torn.bytes)).toEqual([0, 1, 2]);
  // Damaged: one byte of the last frame's page changed: its checksum no longer chains.
  const damaged = wal.slice();
  damaged[wal.byteLength - 100]! ^= 0xff;
  expect(await idsIn(applyWal(db, damaged).bytes)).toEqual([0, 1, 2]);
  // A damaged salt in the last frame's header: the same.
  const salted = wal.slice();
  salted[wal.byteLength - PAGE_FRAME + 8]! ^= 0x01;
  expect(await idsIn(applyWal(db, salted).bytes)).toEqual([0, 1, 2]);
});

test("no log, a short one, or one whose header does not check out adds nothing", async () => {
  const { db, wal } = await walImage(2);
  // The file as it is, only marked a rollback-journal one (a store checkpointed whole says WAL in its
  // header too); the caller's bytes are left alone.
  const marked = db.slice();
  marked.set([1, 1], 18);
  for (const bad of [undefined, new Uint8Array(0), wal.subarray(0, 31)]) {
    const applied = applyWal(db, bad);
    expect(applied).toEqual({ bytes: marked, frames: 0 });
    expect([db[18], db[19]]).toEqual([2, 2]);
  }
  const wrongMagic = wal.slice();
  wrongMagic[3] = 0x00;
  expect(applyWal(db, wrongMagic).frames).toBe(0);
  const wrongHeaderSum = wal.slice();
  wrongHeaderSum[12]! ^= 0xff; // the checkpoint sequence, covered by the header's checksum
  expect(applyWal(db, wrongHeaderSum).frames).toBe(0);
});

afterEach(() => {
  vi.unstubAllGlobals();
});

test("the damaged store's download of an opfs store writes its log in: every committed row, also with no database file yet", async () => {
  const { db, wal } = await walImage(3);
  const opfs = (files: Record<string, Uint8Array>) => {
    const stores = {
      async getFileHandle(name: string) {
        const bytes = files[name];
        if (!bytes) throw new DOMException("not found", "NotFoundError");
        return { getFile: async () => new Blob([bytes as Uint8Array<ArrayBuffer>]) };
      },
    };
    const root = { getDirectoryHandle: async () => stores };
    vi.stubGlobal("navigator", { storage: { getDirectory: async () => root } });
  };
  opfs({ "s.db": db, "s.db-wal": wal });
  expect(await idsIn((await readOpfsStoreFile("s"))!.bytes)).toEqual([0, 1, 2]);
  // A store whose every page is still in its log (its database file empty).
  opfs({ "s.db": new Uint8Array(0), "s.db-wal": wal });
  expect(await idsIn((await readOpfsStoreFile("s"))!.bytes)).toEqual([0, 1, 2]);
  opfs({ "s.db-wal": new Uint8Array(0) });
  expect(await readOpfsStoreFile("s")).toBeUndefined();
});
