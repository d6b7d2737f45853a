/**
 * Writes the PWA icons (public/icon-192.png, public/icon-512.png) with no dependencies: a ring on
 * a dark, maskable-safe background. Run `node scripts/make-icons.mjs` after changing the drawing.
 */
import { writeFileSync } from "node:fs";
import { deflateSync } from "node:zlib";

const CRC_TABLE = new Uint32Array(256).map((_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

function crc32(bytes) {
  let c = 0xffffffff;
  for (const b of bytes) c = CRC_TABLE[(c ^ b) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

function chunk(type, data) {
  const out = Buffer.alloc(12 + data.length);
  out.writeUInt32BE(data.length, 0);
  out.write(type, 4, "ascii");
  data.copy(out, 8);
  out.writeUInt32BE(crc32(out.subarray(4, 8 + data.length)), 8 + data.length);
  return out;
}

function png(size, pixel) {
  const raw = Buffer.alloc(size * (size * 4 + 1));
  for (let y = 0; y < size; y++) {
    raw[y * (size * 4 + 1)] = 0; // filter: none
    for (let x = 0; x < size; x++) raw.set(pixel(x, y), y * (size * 4 + 1) + 1 + x * 4);
  }
  const header = Buffer.alloc(13);
  header.writeUInt32BE(size, 0);
  header.writeUInt32BE(size, 4);
  header[8] = 8; // bit depth
  header[9] = 6; // RGBA
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk("IHDR", header),
    chunk("IDAT", deflateSync(raw, { level: 9 })),
    chunk("IEND", Buffer.alloc(0)),
  ]);
}

const BG = [15, 23, 42];
const RING = [56, 189, 248];
const DOT = [250, 204, 21];

function icon(size) {
  const c = size / 2;
  return png(size, (x, y) => {
    const d = Math.hypot(x + 0.5 - c, y + 0.5 - c) / size;
    // Anti-aliased bands: ring between 0.20 and 0.30 of the size, a dot inside 0.09.
    const cover = (inner, outer) =>
      Math.max(0, Math.min(1, (d - inner) * size + 0.5, (outer - d) * size + 0.5));
    const ring = cover(0.2, 0.3);
    const dot = cover(-1, 0.09);
    const mix = (a, b, t) => Math.round(a + (b - a) * t);
    let rgb = BG.map((v, i) => mix(v, RING[i], ring));
    rgb = rgb.map((v, i) => mix(v, DOT[i], dot));
    return [...rgb, 255];
  });
}

for (const size of [192, 512]) {
  writeFileSync(new URL(`../public/icon-${size}.png`, import.meta.url), icon(size));
  console.log(`wrote public/icon-${size}.png`);
}
