/**
 * A SQLite write-ahead log applied to its database file by hand, without SQLite: what "Download the
 * damaged store" (damaged-store.ts) does for an opfs store, whose recent commits live in
 * `stores/<store>.db-wal` until a checkpoint copies them into the database file.
 *
 * The log's format (https://www.sqlite.org/fileformat2.html#walformat): a 32-byte header (magic,
 * version, page size, checkpoint sequence, two salts, a checksum of its first 24 bytes), then frames,
 * each a 24-byte header (page number, the database's size in pages after a commit or 0, the two
 * salts, a running checksum) and one page. Invariants, as SQLite's own recovery has them:
 * - a frame counts only if its salts match the header's and its checksum continues the chain from
 *   the header's (over the frame header's first 8 bytes and the page);
 * - frames are applied only up to the last commit frame of that valid run; a transaction whose
 *   commit frame never landed is left out;
 * - the file is cut or grown to the last commit's size in pages, and marked a rollback-journal file
 *   (it stands alone now).
 * A log that is missing, too short, or whose header does not check out applies nothing; the file is
 * marked a rollback-journal one all the same (a store checkpointed whole still says WAL in its header).
 */

export interface WalApplied {
  /** A copy of the database file with the log's committed frames written in, standing alone. */
  readonly bytes: Uint8Array;
  /** How many frames were written in (0: the log added nothing). */
  readonly frames: number;
}

const HEADER = 32;
const FRAME_HEADER = 24;
const MAGIC_LITTLE = 0x377f0682;
const MAGIC_BIG = 0x377f0683;

/** SQLite's WAL checksum over `bytes` (a multiple of 8), continuing from `s`. */
function checksum(bytes: Uint8Array, bigEndian: boolean, s: readonly [number, number]): [number, number] {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let s1 = s[0];
  let s2 = s[1];
  for (let i = 0; i + 8 <= bytes.byteLength; i += 8) {
    s1 = (s1 + view.getUint32(i, !bigEndian) + s2) >>> 0;
    s2 = (s2 + view.getUint32(i + 4, !bigEndian) + s1) >>> 0;
  }
  return [s1, s2];
}

/**
 * Mark a database file as a rollback-journal one (header bytes 18 and 19, the write and read format
 * versions: 2 is WAL, 1 legacy): its log is written in, so it stands alone, and SQLite opens it
 * without looking for a log or shared memory.
 */
function asRollbackFile(bytes: Uint8Array): void {
  if (bytes.byteLength >= 100 && bytes[18] === 2 && bytes[19] === 2) {
    bytes[18] = 1;
    bytes[19] = 1;
  }
}

/** A copy of `db` marked a rollback-journal file: the result when the log adds no frame. */
function standalone(db: Uint8Array): WalApplied {
  const bytes = db.slice();
  asRollbackFile(bytes);
  return { bytes, frames: 0 };
}

/** `db` with the committed frames of `wal` written in (see the module's invariants). */
export function applyWal(db: Uint8Array, wal: Uint8Array | undefined): WalApplied {
  if (!wal || wal.byteLength < HEADER) return standalone(db);
  const view = new DataView(wal.buffer, wal.byteOffset, wal.byteLength);
  const magic = view.getUint32(0);
  if (magic !== MAGIC_LITTLE && magic !== MAGIC_BIG) return standalone(db);
  const bigEndian = magic === MAGIC_BIG;
  const pageSize = view.getUint32(8) === 1 ? 65536 : view.getUint32(8);
  if (pageSize < 512 || pageSize > 65536 || (pageSize & (pageSize - 1)) !== 0) return standalone(db);
  const salt1 = view.getUint32(16);
  const salt2 = view.getUint32(20);
  let sum = checksum(wal.subarray(0, 24), bigEndian, [0, 0]);
  if (sum[0] !== view.getUint32(24) || sum[1] !== view.getUint32(28)) return standalone(db);

  // The valid run of frames, and where its last commit ends.
  const frames: Array<{ page: number; at: number }> = [];
  let committed = 0;
  let pages = 0;
  for (let at = HEADER; at + FRAME_HEADER + pageSize <= wal.byteLength; at += FRAME_HEADER + pageSize) {
    if (view.getUint32(at + 8) !== salt1 || view.getUint32(at + 12) !== salt2) break;
    sum = checksum(wal.subarray(at, at + 8), bigEndian, sum);
    sum = checksum(wal.subarray(at + FRAME_HEADER, at + FRAME_HEADER + pageSize), bigEndian, sum);
    if (sum[0] !== view.getUint32(at + 16) || sum[1] !== view.getUint32(at + 20)) break;
    const page = view.getUint32(at);
    if (page === 0) break;
    frames.push({ page, at: at + FRAME_HEADER });
    const sizeAfterCommit = view.getUint32(at + 4);
    if (sizeAfterCommit !== 0) {
      committed = frames.length;
      pages = sizeAfterCommit;
    }
  }
  if (committed === 0) return standalone(db);

  const bytes = new Uint8Array(pages * pageSize);
  bytes.set(db.subarray(0, Math.min(db.byteLength, bytes.byteLength)));
  for (const { page, at } of frames.slice(0, committed)) {
    if (page > pages) continue;
    bytes.set(wal.subarray(at, at + pageSize), (page - 1) * pageSize);
  }
  asRollbackFile(bytes);
  return { bytes, frames: committed };
}
