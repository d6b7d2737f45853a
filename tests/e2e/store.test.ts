/**
 * The browser store kinds in a real Chromium: idb with the JSPI and the Asyncify build inside a
 * SharedWorker, opfs inside a dedicated Worker. Each must keep its commits across close/reopen, a page
 * reload, and a SIGKILL of the whole browser. Workers are served with the app's CSP as a header, so
 * the wasm must run under `script-src 'self' 'wasm-unsafe-eval'`.
 */
import type { Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from "vitest";
import {
  APP_CSP,
  evaluateInSharedWorker,
  fixtureDir,
  killAndRelaunch,
  type LaunchedBrowser,
  launchBrowser,
  type StaticServer,
  serveStatic,
} from "./browser.ts";
import type { WriteResult } from "./fixtures/store-probe/protocol.ts";
import { openProbe, type ProbeTarget, probe, waitReady } from "./probe-client.ts";

interface Case {
  label: string;
  target: ProbeTarget;
  kind: "idb" | "opfs";
  build?: "jspi" | "asyncify";
  expectBuild: string;
}

const cases: Case[] = [
  {
    label: "idb (JSPI) in a SharedWorker",
    target: "shared",
    kind: "idb",
    build: "jspi",
    expectBuild: "jspi",
  },
  {
    label: "idb (Asyncify) in a SharedWorker",
    target: "shared",
    kind: "idb",
    build: "asyncify",
    expectBuild: "asyncify",
  },
  { label: "opfs in a dedicated Worker", target: "dedicated", kind: "opfs", expectBuild: "sync" },
];

const sum = (n: number) => (n * (n - 1)) / 2;
const MB = 1 << 20;
const BIG_BYTES = 6 * MB;
const AFTER = 100;
const bigTimes: Array<{ label: string; ms: number }> = [];
const rates: Array<{ label: string; mode: string; result: WriteResult }> = [];

let server: StaticServer;
let b: LaunchedBrowser;
let page: Page;
const logs: string[] = [];

beforeAll(async () => {
  server = await serveStatic(fixtureDir(), { headers: { "Content-Security-Policy": APP_CSP } });
});

afterAll(async () => {
  await server?.close();
  for (const { label, ms } of bigTimes)
    console.log(`  ${label.padEnd(34)} ${BIG_BYTES / MB} MB commit in ${ms} ms`);
  if (rates.length > 0) {
    console.log("raw commit rates (full durability, this machine):");
    for (const { label, mode, result } of rates) {
      console.log(
        `  ${label.padEnd(34)} ${mode.padEnd(10)} ${String(result.committed).padStart(4)} commits in ` +
          `${String(result.ms).padStart(5)} ms = ${String(result.perSecond).padStart(5)}/s (${result.transactions} transactions)`,
      );
    }
  }
});

beforeEach(async () => {
  logs.length = 0;
  b = await launchBrowser();
  page = await openProbe(b, server);
  page.on("console", (m) => logs.push(`[${m.type()}] ${m.text()}`));
  page.on("pageerror", (e) => logs.push(`[pageerror] ${e.message}`));
});

afterEach(async (context) => {
  if (context.task.result?.state === "fail") {
    console.log(`page log:\n${logs.join("\n")}\nchromium stderr (tail):\n${b.log().slice(-3000)}`);
  }
  await b?.close();
});

describe("browser store kinds", () => {
  test("the SharedWorker has JSPI (WebAssembly.Suspending) and picks the JSPI build", async () => {
    const info = await probe.info(page, "shared");
    const viaCdp = await evaluateInSharedWorker<string>(b, "typeof WebAssembly.Suspending", "shared-worker");
    console.log(
      `SharedWorker (${info.context}): typeof WebAssembly.Suspending = ${info.suspending} (CDP: ${viaCdp}); default idb build ${info.idbBuild}`,
    );
    expect(viaCdp).toBe(info.suspending);
    expect(info.context).toBe("SharedWorkerGlobalScope");
    expect(info.jspi).toBe(true);
    expect(info.idbBuild).toBe("jspi");
    expect(info.opfsSyncHandles).toBe(false);
    const dedicated = await probe.info(page, "dedicated");
    expect(dedicated.context).toBe("DedicatedWorkerGlobalScope");
    expect(dedicated.opfsSyncHandles).toBe(true);
  });

  test("opfs is refused, with a reason, outside a dedicated worker", async () => {
    for (const target of ["shared", "page"] as const) {
      const result = await probe.open(page, target, { kind: "opfs", name: "nowhere" });
      expect(result.ok).toBe(false);
      expect(result.error?.name).toBe("StoreOpenError");
      expect(result.error?.reason).toBe("unsupported");
    }
  });

  test("opfs: an older build's temporary-file pools are deleted by the sweep, except one whose Web Lock is held", async () => {
    // The build before made a pool (a `.ahp-*` directory of files, under a Web Lock of its name) on
    // every open; a closed connection's pool stayed until the next open deleted it.
    await page.evaluate(async () => {
      const root = await navigator.storage.getDirectory();
      for (const name of [".ahp-left", ".ahp-held"]) {
        const dir = await root.getDirectoryHandle(name, { create: true });
        await dir.getFileHandle("0.tmp", { create: true });
      }
      await root.getDirectoryHandle("ahp-not-a-pool", { create: true });
      // A connection of the older build still running holds its pool's lock.
      await new Promise<void>((held) => {
        void navigator.locks.request(".ahp-held", () => {
          held();
          return new Promise(() => undefined);
        });
      });
    });
    const swept = await probe.sweepPools(page, "dedicated");
    expect(swept).toEqual({ removed: 1, left: [".ahp-held"] });
    const rootNow = await page.evaluate(async () => {
      const root = (await navigator.storage.getDirectory()) as unknown as { keys(): AsyncIterable<string> };
      const names: string[] = [];
      for await (const key of root.keys()) names.push(key);
      return names;
    });
    expect(rootNow).toContain("ahp-not-a-pool");
  });

  for (const c of cases) {
    const options = {
      kind: c.kind,
      name: `probe-${c.kind}-${c.build ?? "sync"}`,
      ...(c.build ? { build: c.build } : {}),
    };

    test(`${c.label}: commits survive close/reopen and a page reload`, async () => {
      const first = await probe.write(page, c.target, {
        ...options,
        tag: "a",
        count: 200,
        mode: "sequential",
        close: true,
      });
      expect(first.build).toBe(c.expectBuild);
      expect(first.schemaVersion).toBeGreaterThan(0);
      rates.push({ label: c.label, mode: "sequential", result: first });

      let read = await probe.read(page, c.target, options);
      expect(read.tags).toEqual({ a: { count: 200, sum: sum(200) } });

      const burst = await probe.write(page, c.target, {
        ...options,
        tag: "b",
        count: 500,
        mode: "burst",
        close: true,
      });
      // One transaction per store commit: grouping commits is the engine's (core/session.ts), not the store's.
      expect(burst.transactions).toBe(500);
      rates.push({ label: c.label, mode: "burst", result: burst });

      read = await probe.read(page, c.target, options);
      expect(read.tags).toEqual({ a: { count: 200, sum: sum(200) }, b: { count: 500, sum: sum(500) } });

      await page.reload();
      await waitReady(page);
      read = await probe.read(page, c.target, options);
      expect(read.build).toBe(c.expectBuild);
      expect(read.tags).toEqual({ a: { count: 200, sum: sum(200) }, b: { count: 500, sum: sum(500) } });
    });

    // Both kinds keep SQLite's temporary storage in memory (temp_store = MEMORY); the opfs VFS is opened
    // without its pool of temporary files (worker/store/opfs-vfs.ts), so a statement that asked for a
    // temporary file would fail here, and a pool made anyway would show in OPFS's root.
    test(`${c.label}: a statement journal rolls back a failed UPDATE, a temporary table and a VACUUM work, and no temporary-file pool is made`, async () => {
      const result = await probe.temp(page, c.target, { ...options, name: `${options.name}-temp` });
      expect(result).toEqual({ sum: sum(2000) + 2000, tempRows: 2000, integrity: "ok", pools: 0 });
    });

    test(`${c.label}: acknowledged commits survive SIGKILL of the browser`, async () => {
      // The store stays open: nothing but the commits' own durability protects these rows.
      await probe.write(page, c.target, {
        ...options,
        tag: "k",
        count: 150,
        mode: "sequential",
        close: false,
      });
      await probe.write(page, c.target, { ...options, tag: "g", count: 300, mode: "burst", close: false });
      b = await killAndRelaunch(b);
      page = await openProbe(b, server);
      const read = await probe.read(page, c.target, options);
      expect(read.tags).toEqual({ g: { count: 300, sum: sum(300) }, k: { count: 150, sum: sum(150) } });
    });

    // A transaction bigger than SQLite's page cache (default about 2 MB) once made the journal spill
    // to a file, where IDBBatchAtomicVFS's overwrite path threw and every later commit failed.
    test(`${c.label}: a ${BIG_BYTES / MB} MB transaction, then ${AFTER} commits, then a reopen`, async () => {
      const written = await probe.big(page, c.target, {
        ...options,
        bytes: BIG_BYTES,
        after: AFTER,
        close: true,
      });
      expect(written.afterCommitted).toBe(AFTER);
      bigTimes.push({ label: c.label, ms: written.bigMs });
      const read = await probe.read(page, c.target, options);
      expect(read.big).toEqual({ rows: BIG_BYTES / MB, bytes: BIG_BYTES, intact: true });
      expect(read.tags).toEqual({ after: { count: AFTER, sum: sum(AFTER) } });
      // A second big transaction of another shape on the reopened store: its journal (if any) lands
      // on the first one's at different offsets.
      await probe.big(page, c.target, {
        ...options,
        bytes: 3 * MB + 777,
        rowBytes: 300_001,
        after: AFTER,
        close: true,
      });
      const twice = await probe.read(page, c.target, options);
      expect(twice.big).toEqual({ rows: BIG_BYTES / MB + 11, bytes: BIG_BYTES + 3 * MB + 777, intact: true });
      expect(twice.tags).toEqual({ after: { count: 2 * AFTER, sum: 2 * sum(AFTER) } });
      // And the store keeps working after the reopen.
      await probe.write(page, c.target, {
        ...options,
        tag: "later",
        count: 20,
        mode: "sequential",
        close: true,
      });
      const again = await probe.read(page, c.target, options);
      expect(again.tags).toEqual({
        after: { count: 2 * AFTER, sum: 2 * sum(AFTER) },
        later: { count: 20, sum: sum(20) },
      });
      expect(again.big.intact).toBe(true);
    });

    test(`${c.label}: a browser kill right after a ${BIG_BYTES / MB} MB commit loses nothing`, async () => {
      await probe.big(page, c.target, { ...options, bytes: BIG_BYTES, after: 0, close: false });
      b = await killAndRelaunch(b);
      page = await openProbe(b, server);
      await probe.write(page, c.target, {
        ...options,
        tag: "after",
        count: AFTER,
        mode: "sequential",
        close: true,
      });
      const read = await probe.read(page, c.target, options);
      expect(read.big).toEqual({ rows: BIG_BYTES / MB, bytes: BIG_BYTES, intact: true });
      expect(read.tags).toEqual({ after: { count: AFTER, sum: sum(AFTER) } });
    });
  }
});
