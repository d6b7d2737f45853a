/**
 * Durability of each IndexedDB VFS choice the browser bench compares (issue 30): an acknowledged
 * commit survives a SIGKILL of the whole browser. In the store probe's SharedWorker (the engine's
 * home), one bare wa-sqlite connection per variant (tests/e2e/fixtures/store-probe/vfs-variants.ts:
 * IDBBatchAtomicVFS as the idb store ships it, the same with the pipelined request queue (without
 * and with an explicit commit() at sync),
 * IDBMirrorVFS as published, and IDBMirrorVFS with strict transactions), each at the idb store's
 * pragmas (synchronous=FULL), commits one row at a time while the test polls how many were
 * acknowledged. Once each has acknowledged some, the browser's process group is SIGKILLed mid-stream
 * (as store.test.ts and kill-storm.test.ts do) and relaunched on the same profile. Each database must
 * then hold at least every commit acknowledged before the kill, and exactly a prefix of the stream
 * (rows 0..n-1: no torn or reordered commit).
 * Then, on the relaunched browser, 10 MB written in transactions larger than SQLite's page cache must
 * read back whole after a reopen on the pipelined queues (and, beside them, the shipped VFS and the
 * strict mirror).
 * The shipped store (openBrowserStore on IDBBatchAtomicVFS) has its own kill tests in store.test.ts.
 */
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import {
  APP_CSP,
  fixtureDir,
  killAndRelaunch,
  type LaunchedBrowser,
  launchBrowser,
  type StaticServer,
  serveStatic,
} from "./browser.ts";
import { VFS_VARIANTS, type VfsVariant } from "./fixtures/store-probe/protocol.ts";
import { openProbe, probe } from "./probe-client.ts";

/** Commits each writer has acknowledged before the kill is allowed: enough that some are in flight. */
const BEFORE_KILL = 40;

const name = (variant: VfsVariant) => `durable-${variant}`;
const sum = (n: number) => (n * (n - 1)) / 2;

let server: StaticServer;
let b: LaunchedBrowser;
let page: Page;
/** Per variant, the acknowledged count read just before the kill. */
const ackedAtKill = new Map<VfsVariant, number>();
const readBack = new Map<VfsVariant, { count: number; sum: number; integrity: string }>();

beforeAll(async () => {
  server = await serveStatic(fixtureDir(), { headers: { "Content-Security-Policy": APP_CSP } });
  b = await launchBrowser();
  page = await openProbe(b, server);
  for (const variant of VFS_VARIANTS)
    await probe.vfsWrite(page, "shared", {
      variant,
      name: name(variant),
      count: 1_000_000,
      background: true,
    });
  // Wait until every writer has had BEFORE_KILL commits acknowledged (they keep committing).
  const deadline = Date.now() + 120_000;
  for (const variant of VFS_VARIANTS) {
    while ((await probe.vfsAcked(page, "shared", { variant, name: name(variant) })) < BEFORE_KILL) {
      if (Date.now() > deadline) throw new Error(`${variant}: fewer than ${BEFORE_KILL} commits in 120 s`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }
  // Read each count, then kill at once: whatever was acknowledged by then must survive.
  for (const variant of VFS_VARIANTS)
    ackedAtKill.set(variant, await probe.vfsAcked(page, "shared", { variant, name: name(variant) }));
  b = await killAndRelaunch(b);
  page = await openProbe(b, server);
  for (const variant of VFS_VARIANTS)
    readBack.set(variant, await probe.vfsRead(page, "shared", { variant, name: name(variant) }));
  console.log(
    `acknowledged before the kill / rows after it: ${VFS_VARIANTS.map((v) => `${v} ${ackedAtKill.get(v)}/${readBack.get(v)?.count}`).join(", ")}`,
  );
});

afterAll(async () => {
  await b?.close();
  await server?.close();
});

describe("an acknowledged commit survives a browser SIGKILL, per IndexedDB VFS", () => {
  for (const variant of VFS_VARIANTS) {
    test(`${variant}: every commit acknowledged before the kill is there, as a prefix of the stream`, () => {
      const acked = ackedAtKill.get(variant)!;
      const read = readBack.get(variant)!;
      expect(acked).toBeGreaterThanOrEqual(BEFORE_KILL);
      expect(read.count).toBeGreaterThanOrEqual(acked);
      // Rows 0..count-1, each once: the commits kept are exactly the first ones.
      expect(read.sum).toBe(sum(read.count));
      expect(read.integrity).toBe("ok");
    });
  }
});

// Transactions bigger than the page cache: SQLite spills pages mid-transaction, so the VFS's writes
// arrive over several tasks, not in one burst. The pipelined queue must then fall back to waiting
// (or a new IndexedDB transaction) without losing or reordering a write.
describe("transactions larger than the page cache, then a reopen", () => {
  for (const variant of [
    "batch-atomic",
    "batch-atomic-pipelined",
    "batch-atomic-pipelined-commit",
    "mirror-strict",
  ] as const) {
    test(`${variant}: 10 MB in 4 MB transactions reads back whole`, async () => {
      const big = `big-${variant}`;
      const filled = await probe.vfsFill(page, "shared", { variant, name: big, mb: 10 });
      if (variant.startsWith("batch-atomic-pipelined"))
        console.log(`pipelined queue over the fill: ${JSON.stringify(filled.pipeline)}`);
      const read = await probe.vfsRead(page, "shared", { variant, name: big });
      expect(read.fillRows).toBe(160);
      expect(read.integrity).toBe("ok");
    });
  }
});
