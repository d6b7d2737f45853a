/**
 * The memory store's VFS: wa-sqlite's example MemoryVFS (files are ArrayBuffers in a map, so a crash
 * image is a copy of them), with the per-call paths rewritten to touch the wasm heap directly.
 * FacadeVFS wraps every read and write in proxy objects that re-resolve the heap on each access; for
 * a store whose whole cost is these calls that wrapper was a third of every transaction.
 *
 * Invariants: the heap view is taken at call time (memory growth between calls detaches old views);
 * reads past the end are zero-filled and reported short, as SQLite requires; files never shrink their
 * buffer, only their size.
 */
import { MemoryVFS } from "@journeyapps/wa-sqlite/src/examples/MemoryVFS.js";
import * as VFS from "@journeyapps/wa-sqlite/src/VFS.js";

interface MemoryFile {
  pathname: string;
  flags: number;
  size: number;
  data: ArrayBuffer;
}

interface HeapModule {
  HEAPU8: Uint8Array;
}

/** 64-bit file offsets arrive as two signed 32-bit halves. */
const offsetOf = (lo: number, hi: number): number => hi * 0x100000000 + lo + (lo < 0 ? 2 ** 32 : 0);

export class FastMemoryVFS extends MemoryVFS {
  declare mapNameToFile: Map<string, MemoryFile>;
  declare mapIdToFile: Map<number, MemoryFile>;

  static async create(name: string, module: object): Promise<FastMemoryVFS> {
    const vfs = new FastMemoryVFS(name, module);
    await vfs.isReady();
    return vfs;
  }

  get #heap(): Uint8Array {
    return (this._module as HeapModule).HEAPU8;
  }

  override xRead(pFile: number, pData: number, iAmt: number, iOffsetLo: number, iOffsetHi: number): number {
    const file = this.mapIdToFile.get(pFile);
    if (!file) return VFS.SQLITE_IOERR;
    const offset = offsetOf(iOffsetLo, iOffsetHi);
    const heap = this.#heap;
    const available = Math.max(0, Math.min(iAmt, file.size - offset));
    if (available > 0) heap.set(new Uint8Array(file.data, offset, available), pData);
    if (available < iAmt) {
      heap.fill(0, pData + available, pData + iAmt);
      return VFS.SQLITE_IOERR_SHORT_READ;
    }
    return VFS.SQLITE_OK;
  }

  override xWrite(pFile: number, pData: number, iAmt: number, iOffsetLo: number, iOffsetHi: number): number {
    const file = this.mapIdToFile.get(pFile);
    if (!file) return VFS.SQLITE_IOERR;
    const offset = offsetOf(iOffsetLo, iOffsetHi);
    const end = offset + iAmt;
    if (end > file.data.byteLength) {
      const grown = new ArrayBuffer(Math.max(end, 2 * file.data.byteLength));
      new Uint8Array(grown).set(new Uint8Array(file.data, 0, file.size));
      file.data = grown;
    }
    new Uint8Array(file.data, offset, iAmt).set(this.#heap.subarray(pData, end - offset + pData));
    if (end > file.size) file.size = end;
    return VFS.SQLITE_OK;
  }

  override xTruncate(pFile: number, sizeLo: number, sizeHi: number): number {
    const file = this.mapIdToFile.get(pFile);
    if (!file) return VFS.SQLITE_IOERR;
    file.size = Math.min(file.size, offsetOf(sizeLo, sizeHi));
    return VFS.SQLITE_OK;
  }

  override xFileSize(pFile: number, pSize: number): number {
    const file = this.mapIdToFile.get(pFile);
    if (!file) return VFS.SQLITE_IOERR;
    const heap = this.#heap;
    new DataView(heap.buffer, heap.byteOffset + pSize, 8).setBigInt64(0, BigInt(file.size), true);
    return VFS.SQLITE_OK;
  }

  override xSync(): number {
    return VFS.SQLITE_OK;
  }

  override xLock(): number {
    return VFS.SQLITE_OK;
  }

  override xUnlock(): number {
    return VFS.SQLITE_OK;
  }

  override xCheckReservedLock(_pFile: number, pResOut: number): number {
    const heap = this.#heap;
    new DataView(heap.buffer, heap.byteOffset + pResOut, 4).setInt32(0, 0, true);
    return VFS.SQLITE_OK;
  }

  override xFileControl(): number {
    return VFS.SQLITE_NOTFOUND;
  }

  override xDeviceCharacteristics(): number {
    return 0;
  }
}
