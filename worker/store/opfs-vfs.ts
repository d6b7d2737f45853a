/**
 * The opfs kind's VFS: wa-sqlite's OPFSCoopSyncVFS without its temporary-file pool, and its release.
 *
 * `OPFSCoopSyncVFS.create` does two things on every open beyond the VFS itself: it walks OPFS's root
 * to delete the pools (`.ahp-*` directories) of connections that closed, then makes a new pool: a
 * directory under a Web Lock holding 10 files, each with a sync access handle, for SQLite's temporary
 * files. That is 10 access handles, a lock and a directory per open, a walk of the whole root (which
 * the agent's workspace files share, so it grows with them), and it is where an open was seen to hang:
 * twice in CI and once in 60 local runs a store open waited forever inside the browser's
 * `createSyncAccessHandle()` on a pool file (tests/e2e/store-conformance.test.ts reports the storage
 * calls a hung open waits on).
 *
 * Invariants:
 * - The store never needs a temporary file: the opfs pragmas set `temp_store = MEMORY`, so statement
 *   journals, sorts and temporary tables stay in memory. The database, its rollback journal and its
 *   WAL are the VFS's persistent files, untouched here. Should SQLite ask for a temporary file anyway,
 *   the open is refused with SQLITE_CANTOPEN and a message saying why, not a TypeError later.
 * - A released VFS holds nothing: SQLite's close frees the files' access handles and lock, and the
 *   release closes its per-file BroadcastChannels (a channel with a listener keeps the whole wasm
 *   instance alive).
 * - Pools left by builds before this one are deleted once per worker, later and off the open's path,
 *   and only those whose Web Lock is free (a connection of an older build still running keeps its own).
 */
import * as SQLite from "@journeyapps/wa-sqlite/src/sqlite-constants.js";

/** The part of the OPFSCoopSyncVFS instance this module touches. */
export interface OpfsVfs {
  readonly name: string;
  persistentFiles?: Map<string, { handleRequestChannel?: BroadcastChannel | null }>;
  lastError: unknown;
  isReady(): Promise<boolean>;
  close(): void | Promise<void>;
}

type OpfsVfsClass = new (
  name: string,
  module: unknown,
) => OpfsVfs & {
  jOpen(zName: string | null, fileId: number, flags: number, pOutFlags: DataView): number;
};

/** The files SQLite may open through this VFS: the database, its rollback journal, its WAL. */
const PERSISTENT_FILES =
  SQLite.SQLITE_OPEN_MAIN_DB | SQLite.SQLITE_OPEN_MAIN_JOURNAL | SQLite.SQLITE_OPEN_WAL;

/** How long after the first open the sweep of older builds' pools starts. */
const SWEEP_DELAY_MS = 10_000;
let sweepScheduled = false;

/** A VFS named `name` for `module`, ready, with no temporary-file pool. */
export async function createOpfsVfs(name: string, module: unknown): Promise<OpfsVfs> {
  const { OPFSCoopSyncVFS } = (await import(
    "@journeyapps/wa-sqlite/src/examples/OPFSCoopSyncVFS.js"
  )) as unknown as {
    OPFSCoopSyncVFS: OpfsVfsClass;
  };
  class PoolFreeVfs extends OPFSCoopSyncVFS {
    override jOpen(zName: string | null, fileId: number, flags: number, pOutFlags: DataView): number {
      if (!(flags & PERSISTENT_FILES)) {
        this.lastError = new Error(
          `the opfs store keeps temporary files in memory (temp_store = MEMORY); SQLite asked for one (${zName ?? "unnamed"}, flags 0x${flags.toString(16)})`,
        );
        return SQLite.SQLITE_CANTOPEN;
      }
      return super.jOpen(zName, fileId, flags, pOutFlags);
    }
  }
  const vfs = new PoolFreeVfs(name, module);
  await vfs.isReady();
  if (!sweepScheduled) {
    sweepScheduled = true;
    setTimeout(() => void sweepOldPools(), SWEEP_DELAY_MS);
  }
  return vfs;
}

/** Release what the VFS holds beyond the database file itself (which SQLite's close releases). */
export function releaseOpfsVfs(vfs: OpfsVfs): void {
  // No temporary-file pool was made (createOpfsVfs), so no pool handles or pool lock are left to free.
  // A channel with a listener stays alive, and its listener holds the VFS and so the whole wasm
  // instance (its memory and its address-space reservation): left open, every store opened and
  // closed in one worker stayed in memory until wasm instantiation failed with "Out of memory"
  // (the store conformance suite's opfs run, tests/e2e/store-conformance.test.ts).
  for (const file of vfs.persistentFiles?.values() ?? []) {
    const channel = file.handleRequestChannel;
    if (!channel) continue;
    channel.onmessage = null;
    channel.close();
  }
}

/**
 * Delete the temporary-file pools (`.ahp-*` directories in OPFS's root) that builds before this one
 * left, each only if its Web Lock is free. Best effort: a failure is logged and changes nothing else.
 */
export async function sweepOldPools(): Promise<number> {
  let removed = 0;
  try {
    const root = (await navigator.storage.getDirectory()) as FileSystemDirectoryHandle & {
      keys(): AsyncIterable<string>;
    };
    const pools: string[] = [];
    for await (const key of root.keys()) if (key.startsWith(".ahp-")) pools.push(key);
    for (const pool of pools) {
      await navigator.locks.request(pool, { ifAvailable: true }, async (lock) => {
        if (!lock) return;
        await root.removeEntry(pool, { recursive: true });
        removed++;
      });
    }
  } catch (error) {
    console.warn(`opfs: an older build's temporary-file pools were not all deleted: ${String(error)}`);
  }
  return removed;
}
