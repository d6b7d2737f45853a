/**
 * The memory store's VFS: wa-sqlite's MemoryVFS example, with each name SQLite hands it turned into
 * its file's key once. The example keys files by `new URL(name, "file://").pathname` and parsed that
 * URL on every open, access check and delete: SQLite checks for a hot journal and opens the journal
 * at each transaction, so the parsing was a few percent of the agent bench. Invariants: the keys are
 * the example's (a store's image and a crash image name the same files), and so is every answer.
 */
import { SQLITE_CANTOPEN, SQLITE_OK, SQLITE_OPEN_CREATE } from "@journeyapps/wa-sqlite";

/** One file of the memory VFS, as the example keeps it. */
export interface MemoryFile {
  pathname: string;
  flags: number;
  size: number;
  data: ArrayBuffer;
}

/** The surface of the example's VFS this store uses. */
export interface MemoryVfs {
  readonly name: string;
  readonly mapNameToFile: Map<string, MemoryFile>;
  readonly mapIdToFile: Map<number, MemoryFile>;
  close(): void;
}

interface MemoryVfsMethods extends MemoryVfs {
  isReady(): Promise<boolean>;
  jOpen(filename: string | null, fileId: number, flags: number, pOutFlags: DataView): number;
  jDelete(name: string, syncDir: number): number;
  jAccess(name: string, flags: number, pResOut: DataView): number;
}

/** Names kept before the cache starts again (SQLite names a database and its journal; temp files have none). */
const KEPT_NAMES = 64;

/** A memory VFS named `name` on the sync build `module`, ready to register. */
export async function createMemoryVfs(name: string, module: unknown): Promise<MemoryVfs> {
  const { MemoryVFS } = (await import("@journeyapps/wa-sqlite/src/examples/MemoryVFS.js")) as unknown as {
    MemoryVFS: new (name: string, module: unknown) => MemoryVfsMethods;
  };

  class KeyedMemoryVFS extends MemoryVFS {
    readonly #keys = new Map<string, string>();

    /** The example's key of `name`: the path of the file URL it names. */
    #key(name: string): string {
      let key = this.#keys.get(name);
      if (key === undefined) {
        if (this.#keys.size >= KEPT_NAMES) this.#keys.clear();
        key = new URL(name, "file://").pathname;
        this.#keys.set(name, key);
      }
      return key;
    }

    override jOpen(filename: string | null, fileId: number, flags: number, pOutFlags: DataView): number {
      // A temporary file (no name) gets a fresh random one, as in the example: not worth keeping.
      const pathname = filename
        ? this.#key(filename)
        : new URL(Math.random().toString(36).slice(2), "file://").pathname;
      let file = this.mapNameToFile.get(pathname);
      if (!file) {
        if (!(flags & SQLITE_OPEN_CREATE)) return SQLITE_CANTOPEN;
        file = { pathname, flags, size: 0, data: new ArrayBuffer(0) };
        this.mapNameToFile.set(pathname, file);
      }
      this.mapIdToFile.set(fileId, file);
      pOutFlags.setInt32(0, flags, true);
      return SQLITE_OK;
    }

    override jDelete(name: string, _syncDir: number): number {
      this.mapNameToFile.delete(this.#key(name));
      return SQLITE_OK;
    }

    override jAccess(name: string, _flags: number, pResOut: DataView): number {
      pResOut.setInt32(0, this.mapNameToFile.has(this.#key(name)) ? 1 : 0, true);
      return SQLITE_OK;
    }
  }

  const vfs = new KeyedMemoryVFS(name, module);
  await vfs.isReady();
  return vfs;
}
