/**
 * The smallest attempt at Chromium's IndexedDB discard after a SIGKILL (docs/ARCHITECTURE.md, "The
 * kill storm in the browser"): no app, one bare page that commits strict-durability IndexedDB
 * transactions as IDBBatchAtomicVFS does (each puts a few blocks under a new version and deletes the
 * old version, and counts the commit), and a loop that SIGKILLs the whole Chromium at a random moment
 * and relaunches it on the same profile. After each relaunch the page reports what it found; a count
 * below one the page had acknowledged, a database gone, or Chromium's "corrupt" log lines are
 * reported as a problem.
 *   node scripts/idb-kill-loop.mjs            KILLS=80 (default 40), MODE=big (16 x 32 KiB values per
 *                                             transaction; default 1 to 8 blocks of 4 KiB),
 *                                             FLAGS="--enable-features=IdbSqliteBackingStore",
 *                                             KEEP=<dir> (copy the IndexedDB folder after each kill)
 * Exit 1 when a problem was seen. Not part of any test run.
 */
import { spawn } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CHROMIUM_FLAGS, findChromium } from "./chromium.mjs";

const KILLS = Number(process.env.KILLS ?? 40);
const MODE = process.env.MODE === "big" ? "big" : "blocks";
const EXTRA = (process.env.FLAGS ?? "").split(/\s+/).filter(Boolean);
const KEEP = process.env.KEEP;

const PAGE = `<!doctype html><meta charset="utf-8"><title>idb kill loop</title>
<script type="module">
const big = ${JSON.stringify(MODE === "big")};
const report = (path, body) => fetch(path, { method: "POST", body: JSON.stringify(body) }).catch(() => {});
const done = (r) => new Promise((ok, fail) => { r.onsuccess = () => ok(r.result); r.onerror = () => fail(r.error); });
const open = indexedDB.open("probe", 1);
open.onupgradeneeded = () => { open.result.createObjectStore("blocks"); open.result.createObjectStore("meta"); };
const db = await done(open);
const found = await done(db.transaction("meta").objectStore("meta").get("count"));
await report("/started", { count: found ?? 0, existed: found !== undefined });
for (let n = (found ?? 0) + 1; ; n++) {
  const tx = db.transaction(["blocks", "meta"], "readwrite", { durability: "strict" });
  const blocks = tx.objectStore("blocks");
  const count = big ? 16 : 1 + (n % 8);
  for (let p = 0; p < count; p++) {
    const value = new Uint8Array(big ? 32768 : 4096);
    crypto.getRandomValues(value.subarray(0, big ? 32768 : 1024));
    blocks.put(value, ["f", p, -n]);
    blocks.delete(["f", p, -(n - 1)]);
  }
  tx.objectStore("meta").put(n, "count");
  await new Promise((ok, fail) => { tx.oncomplete = ok; tx.onabort = () => fail(tx.error); });
  if (n % 10 === 0) report("/acked", { count: n });
}
</script>`;

let started;
let acked = 0;
const server = createServer(async (req, res) => {
  let body = "";
  for await (const chunk of req) body += chunk;
  if (req.url === "/started") started = JSON.parse(body);
  else if (req.url === "/acked") acked = Math.max(acked, JSON.parse(body).count);
  res.writeHead(200, { "content-type": "text/html; charset=utf-8" }).end(req.method === "GET" ? PAGE : "");
});
await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
const url = `http://127.0.0.1:${server.address().port}/`;
const profile = mkdtempSync(join(tmpdir(), "idb-kill-loop-"));
const chromium = findChromium();
const args = [...CHROMIUM_FLAGS, `--user-data-dir=${profile}`, "--no-default-browser-check", ...EXTRA, url];
const alive = (pid) => {
  try {
    process.kill(-pid, 0);
    return true;
  } catch {
    return false;
  }
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

let problems = 0;
for (let cycle = 0; cycle <= KILLS; cycle++) {
  started = undefined;
  // What the page acknowledged before the kill (the new page acknowledges more once it started).
  const before = acked;
  const child = spawn(chromium, args, { detached: true, stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (d) => {
    stderr += d;
  });
  const since = Date.now();
  while (!started && Date.now() - since < 60_000) await sleep(20);
  const corrupt = stderr.split("\n").filter((l) => /corrupt|Failed to open LevelDB/i.test(l));
  if (!started) {
    problems++;
    console.log(`cycle ${cycle}: the page never started`);
  } else if (corrupt.length > 0 || (cycle > 0 && (!started.existed || started.count < before))) {
    problems++;
    console.log(
      `cycle ${cycle}: PROBLEM: found ${JSON.stringify(started)}, acknowledged ${before}\n${corrupt.join("\n")}`,
    );
  } else console.log(`cycle ${cycle}: found ${started.count} (acknowledged ${before})`);
  // A random moment of the writing, then the whole process group at once.
  if (cycle < KILLS) await sleep(200 + Math.random() * 1500);
  process.kill(-child.pid, "SIGKILL");
  while (alive(child.pid)) await sleep(20);
  const idb = join(profile, "Default", "IndexedDB");
  if (KEEP && cycle < KILLS && existsSync(idb))
    cpSync(idb, join(KEEP, `kill-${cycle + 1}`), { recursive: true });
}
console.log(`${problems} problems in ${KILLS} kills (${MODE}${EXTRA.length ? `, ${EXTRA.join(" ")}` : ""})`);
server.close();
rmSync(profile, { recursive: true, force: true });
process.exit(problems > 0 ? 1 : 0);
