/**
 * Reads LevelDB log-format files (a write-ahead `NNNNNN.log` and `MANIFEST-NNNNNN`) record by record
 * and says where each one breaks: a record whose checksum does not match (what LevelDB reports as
 * "Corruption: checksum mismatch" and Chromium's IndexedDB then deletes the origin's store for), a
 * bad length, or a torn tail (a record cut off by the end of the file: LevelDB takes it for a writer
 * that died and drops it silently). For the kill storm's debug mode (`STORM_KEEP_IDB`, see
 * docs/ARCHITECTURE.md "The kill storm in the browser"): `node scripts/leveldb-log-check.mjs <dir or
 * file>...` checks every log-format file under each argument. Exit 1 when a checksum mismatch or a bad
 * length is found. The format (32 KiB blocks; a 7-byte header: masked CRC-32C of type and data, data
 * length, type) is LevelDB's published log format; the code is our own.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { basename, join } from "node:path";

const BLOCK = 32768;
const HEADER = 7;
const TYPES = ["zero", "full", "first", "middle", "last"];

const TABLE = new Uint32Array(256);
for (let n = 0; n < 256; n++) {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0x82f63b78 ^ (c >>> 1) : c >>> 1;
  TABLE[n] = c >>> 0;
}
function crc32c(bytes, start, end) {
  let c = 0xffffffff;
  for (let i = start; i < end; i++) c = TABLE[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}
const unmask = (m) => {
  const rot = (m - 0xa282ead8) >>> 0;
  return ((rot >>> 17) | (rot << 15)) >>> 0;
};

/** Every problem in one log-format file, with its offset. */
export function checkLog(bytes) {
  const problems = [];
  let records = 0;
  for (let block = 0; block < bytes.length; block += BLOCK) {
    const end = Math.min(block + BLOCK, bytes.length);
    let at = block;
    while (end - at >= HEADER) {
      const length = bytes[at + 4] | (bytes[at + 5] << 8);
      const type = bytes[at + 6];
      const stored = (bytes[at] | (bytes[at + 1] << 8) | (bytes[at + 2] << 16) | (bytes[at + 3] << 24)) >>> 0;
      if (type === 0 && length === 0) break; // preallocated zeros: the rest of the block is empty
      if (at + HEADER + length > end) {
        if (end === bytes.length)
          problems.push({
            at,
            kind: "torn tail",
            detail: `${TYPES[type] ?? type} record of ${length} bytes, ${end - at - HEADER} written`,
          });
        else problems.push({ at, kind: "bad record length", detail: `${length} bytes past the block` });
        break;
      }
      const actual = crc32c(bytes, at + 6, at + HEADER + length);
      if (unmask(stored) !== actual)
        problems.push({
          at,
          kind: "checksum mismatch",
          detail: `${TYPES[type] ?? type} record of ${length} bytes`,
        });
      records++;
      at += HEADER + length;
    }
  }
  return { records, problems };
}

function* logFiles(path) {
  if (statSync(path).isDirectory()) {
    for (const name of readdirSync(path).sort()) yield* logFiles(join(path, name));
  } else if (/^(\d+\.log|MANIFEST-\d+)$/.test(basename(path))) yield path;
}

if (process.argv[1] && import.meta.url.endsWith(basename(process.argv[1]))) {
  let bad = false;
  for (const arg of process.argv.slice(2)) {
    for (const file of logFiles(arg)) {
      const bytes = readFileSync(file);
      const { records, problems } = checkLog(bytes);
      const verdict =
        problems.length === 0 ? "ok" : problems.map((p) => `${p.kind} at ${p.at} (${p.detail})`).join("; ");
      if (problems.some((p) => p.kind !== "torn tail")) bad = true;
      console.log(`${file}: ${bytes.length} bytes, ${records} records: ${verdict}`);
    }
  }
  process.exit(bad ? 1 : 0);
}
