/**
 * The pragmas each browser store kind sets at open, and the opfs kind's idle checkpoint: their own
 * module so that the memory store (open.ts, which must not load browser.ts in Node) can run the opfs
 * kind's setup too (`journal: "wal"`: the opfs kind's WAL behaviour, tested in Node).
 */

/**
 * Default pragmas per kind.
 * - `synchronous = FULL` is SQLite's default, stated so nobody relaxes it by accident: for idb every
 *   COMMIT then waits for a strict-durability IndexedDB transaction (no acknowledged commit lost to a
 *   browser SIGKILL; tests/e2e/store.test.ts proves it).
 * - `locking_mode = EXCLUSIVE`: the engine host holds the store's Web Lock for the connection's whole
 *   life, so nobody else may read or write the file anyway. Keeping SQLite's lock saves re-taking it
 *   (an IndexedDB round trip and a sync for idb) on every transaction. The lock goes when the store
 *   closes.
 * - idb: `journal_mode = MEMORY`, `temp_store = MEMORY`. IDBBatchAtomicVFS makes every write
 *   transaction atomic by itself (blocks of a new version, a pending mark that the next connection
 *   uses to drop an unfinished transaction's blocks), so a rollback journal file adds nothing to crash
 *   safety. A journal file is harmful here: a transaction bigger than the page cache spills its journal
 *   to a file, and rewriting that file at unaligned offsets throws inside the VFS (`RangeError: offset
 *   is out of bounds`, then `disk I/O error` on every later commit; known upstream as
 *   rhashimoto/wa-sqlite pull request 351, open at the time of writing); and exclusive mode set on an empty
 *   database keeps a real journal open, costing about 4 strict IndexedDB transactions per commit
 *   instead of 1. In memory, the journal still serves ROLLBACK while the engine lives;
 *   `temp_store = MEMORY` keeps statement journals out of IndexedDB too.
 * - opfs: `journal_mode = WAL`. OPFSCoopSyncVFS has no atomic batch writes, so a journal file is what
 *   makes a transaction atomic across a crash; a write-ahead log does it with one flush per commit
 *   (the log's) where the rollback journal took several (journal, database, journal header): about
 *   2.5x the commits per second (decision 0002). Exclusive locking is set first, so SQLite keeps the
 *   log's index in memory and never asks the VFS for shared memory (which it does not have). The
 *   log is checkpointed into the database every 1,000 pages, after 2 s without a commit
 *   (OPFS_IDLE_CHECKPOINT_MS) and at close. `temp_store = MEMORY`: the
 *   VFS is opened without a temporary-file pool (opfs-vfs.ts), so no temporary file may be asked for.
 */
export const PRAGMAS: Record<"idb" | "opfs", string> = {
  idb:
    "PRAGMA locking_mode = EXCLUSIVE; PRAGMA journal_mode = MEMORY; PRAGMA temp_store = MEMORY; " +
    "PRAGMA synchronous = FULL;",
  opfs:
    "PRAGMA locking_mode = EXCLUSIVE; PRAGMA journal_mode = WAL; PRAGMA temp_store = MEMORY; " +
    "PRAGMA synchronous = FULL;",
};

/**
 * How long an opfs store's line waits without a commit before it checkpoints its log into the
 * database file (SqliteLine's `idleCheckpoint`): long enough that a run's steady commits never pay
 * for one, short enough that a quiet store's file stands alone (the damaged store's download, the
 * next open's replay).
 */
export const OPFS_IDLE_CHECKPOINT_MS = 2_000;
