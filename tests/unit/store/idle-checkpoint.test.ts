/**
 * The opfs kind's write-ahead log and its idle checkpoint (SqliteLine's `idleCheckpoint`, set by
 * worker/store/browser.ts for opfs), on a memory store with the same setup (`journal: "wal"`): the
 * commits stay in the log while they keep coming; once none came for the delay, the line copies the
 * log into the database file and empties it, and a reopen from that file alone has every row. The
 * timer is faked; SQLite's work is real.
 */
import { afterEach, expect, test, vi } from "vitest";
import { type MemoryStore, openStore } from "../../../worker/store/open.ts";

afterEach(() => {
  vi.useRealTimers();
});

const DELAY = 1_000;
const sizes = (store: MemoryStore) => {
  const image = store.image();
  const size = (suffix: string) => image.find((f) => f.path === `/c.db${suffix}`)?.bytes.byteLength ?? 0;
  return { db: size(""), wal: size("-wal") };
};
const insert = (store: MemoryStore, n: number) =>
  store.commit((sql) => sql.run("INSERT INTO t (n) VALUES (?)", [n]));

test("commits stay in the log while they keep coming; after the delay without one the log is checkpointed into the file, which then stands alone", async () => {
  vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
  const store = await openStore({ kind: "memory", name: "c", journal: "wal", idleCheckpointMs: DELAY });
  expect(await store.read((sql) => sql.get("PRAGMA journal_mode"))).toEqual({ journal_mode: "wal" });
  await store.commit((sql) => sql.run("CREATE TABLE t (n INTEGER NOT NULL)"));
  for (let n = 0; n < 5; n++) {
    await insert(store, n);
    // Each commit starts the quiet spell again: most of the delay passes between commits.
    vi.advanceTimersByTime(DELAY - 1);
  }
  expect(store.checkpoints).toBe(0);
  const before = sizes(store);
  expect(before.wal).toBeGreaterThan(0);
  // The file alone (the log left behind) has none of the rows yet.
  const alone = await openStore({
    kind: "memory",
    name: "a",
    journal: "wal",
    image: [{ path: "/a.db", bytes: store.image().find((f) => f.path === "/c.db")!.bytes }],
  });
  expect(
    await alone.read((sql) => sql.get("SELECT count(*) AS n FROM sqlite_master WHERE name = 't'")),
  ).toEqual({ n: 0 });
  await alone.close();

  vi.advanceTimersByTime(1);
  await vi.waitFor(() => expect(store.checkpoints).toBe(1));
  const after = sizes(store);
  expect(after.wal).toBe(0);
  expect(after.db).toBeGreaterThan(0);
  const image = store.image().filter((f) => f.path === "/c.db");
  const reopened = await openStore({ kind: "memory", name: "c", image, journal: "wal" });
  expect(await reopened.read((sql) => sql.all("SELECT n FROM t ORDER BY n"))).toEqual(
    [0, 1, 2, 3, 4].map((n) => ({ n })),
  );
  await reopened.close();

  // Quiet again without a commit: no further checkpoint; a commit arms it once more.
  vi.advanceTimersByTime(10 * DELAY);
  expect(store.checkpoints).toBe(1);
  await insert(store, 5);
  vi.advanceTimersByTime(DELAY);
  await vi.waitFor(() => expect(store.checkpoints).toBe(2));
  await store.close();
});

test("a closed or killed line checkpoints nothing later; a rollback-journal store has no idle checkpoint", async () => {
  vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
  const closed = await openStore({ kind: "memory", name: "c", journal: "wal", idleCheckpointMs: DELAY });
  await closed.commit((sql) => sql.run("CREATE TABLE t (n INTEGER NOT NULL)"));
  await closed.close();
  const killed = await openStore({ kind: "memory", name: "c", journal: "wal", idleCheckpointMs: DELAY });
  await killed.commit((sql) => sql.run("CREATE TABLE t (n INTEGER NOT NULL)"));
  killed.kill("test");
  const persist = await openStore({ kind: "memory", name: "c" });
  await persist.commit((sql) => sql.run("CREATE TABLE t (n INTEGER NOT NULL)"));
  expect(vi.getTimerCount()).toBe(0);
  vi.advanceTimersByTime(10 * DELAY);
  expect([closed.checkpoints, killed.checkpoints, persist.checkpoints]).toEqual([0, 0, 0]);
  await persist.close();
});

test("close closes the connection: a log holding commits is checkpointed into the file and removed, which then stands alone (draw 41-D)", async () => {
  // Draw 41-D: a close whose finish skipped closing the SQLite connection (the statements finalized,
  // the VFS released) passed every store test; the log, still open, stayed beside the file.
  const store = await openStore({ kind: "memory", name: "c", journal: "wal", idleCheckpointMs: 10 * DELAY });
  await store.commit((sql) => sql.run("CREATE TABLE t (n INTEGER NOT NULL)"));
  for (let n = 0; n < 3; n++) await insert(store, n);
  expect(store.checkpoints).toBe(0);
  expect(sizes(store).wal).toBeGreaterThan(0);
  await store.close();
  expect(sizes(store).wal).toBe(0);
  const image = store.image().filter((f) => f.path === "/c.db");
  const reopened = await openStore({ kind: "memory", name: "c", image, journal: "wal" });
  expect(await reopened.read((sql) => sql.all("SELECT n FROM t ORDER BY n"))).toEqual(
    [0, 1, 2].map((n) => ({ n })),
  );
  await reopened.close();
});
