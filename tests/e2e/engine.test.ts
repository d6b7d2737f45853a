/**
 * The engine host in a real Chromium, against the built app (`?debug=1` puts the EngineClient on
 * `globalThis.__engine` and asks the engine for its test endpoints, `__engine.api.debug.*`; the
 * production API has none). A `test.ticker` task commits one `test.tick` entry per phase; its trail (the
 * tick numbers in commit order) must come out exactly [1..N] whatever happens to the tabs, the
 * browser or the build in between. Every test starts from a fresh browser profile and its own store,
 * and waits only on observable state (a trail length, a status, text on screen).
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, rmSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { ConversationView } from "../../worker/core/observe.ts";
import {
  applyFrame,
  type EngineStats,
  type TickerStatus,
  type WatchFrame,
} from "../../worker/protocol/index.ts";
import { engine, type StaticServer, serveStatic } from "./browser.ts";
import { answersOnPage, appSuite, appUrl, entriesOf, say, uniqueStore, until, waitPhase } from "./page.ts";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

const app = appSuite();
const record = (page: Page, label: string) => app.record(page, label);

// ---------------------------------------------------------------------------------------------
// Helpers

const range = (n: number) => Array.from({ length: n }, (_, i) => i + 1);

const openApp = (url: string, label = "tab", phase = "ready") => app.open({ url, label, phase });

const startTicker = (page: Page, phases: number, delayMs: number, conversationId?: number) =>
  engine<number>(page, "debug.startTicker", {
    phases,
    delayMs,
    ...(conversationId ? { conversationId } : {}),
  });
const ticker = (page: Page, taskId: number) => engine<TickerStatus>(page, "debug.ticker", taskId);
const stats = (page: Page) => engine<EngineStats>(page, "debug.stats");

const tickerAt = (
  page: Page,
  taskId: number,
  what: string,
  ok: (t: TickerStatus) => boolean,
  timeoutMs?: number,
) => until(`ticker ${taskId}: ${what}`, () => ticker(page, taskId), ok, timeoutMs);

/** The tick numbers the tab shows, in order. */
async function ticksOnScreen(page: Page): Promise<number[]> {
  const texts = await page.locator('[data-kind="tick"]').allTextContents();
  return texts.map((t) => Number(/tick (\d+)/.exec(t)?.[1]));
}

async function waitTicksOnScreen(page: Page, n: number): Promise<number[]> {
  return until(
    `${n} ticks on screen`,
    () => ticksOnScreen(page),
    (t) => t.length >= n,
  );
}

/** Reload the only tab mid-run: the run finishes once, trail exactly [1..N]. Returns the tab and its URL. */
async function reloadMidRun(
  params: Record<string, string>,
  expectReady: (engine: { status: Record<string, unknown>; mode: string }) => void,
): Promise<{ page: Page; url: string }> {
  const phases = 40;
  const url = appUrl(app.server.url, { store: uniqueStore("reload"), ...params });
  const page = await openApp(url);
  expectReady(await clientState(page));
  const id = await startTicker(page, phases, 75);
  const before = await tickerAt(page, id, "5 ticks", (t) => t.trail.length >= 5);
  expect(before.trail).toEqual(range(before.trail.length));
  await page.reload();
  await waitPhase(page, "ready");
  expectReady(await clientState(page));
  const done = await tickerAt(page, id, "completed", (t) => t.status === "completed");
  expect(done.trail).toEqual(range(phases));
  expect(await waitTicksOnScreen(page, phases)).toEqual(range(phases));
  return { page, url };
}

const clientState = (page: Page) =>
  page.evaluate(() => {
    const e = (globalThis as unknown as { __engine: { status: Record<string, unknown>; mode: string } })
      .__engine;
    return { status: e.status, mode: e.mode };
  });

/**
 * Page-side recorders, installed before the app runs: every change of the status line's phase with
 * its time, and every handover message the engines of the page's store exchange.
 */
function installRecorders(): void {
  type Rec = {
    last?: string;
    phases: Array<{ phase: string; t: number }>;
    messages: Array<{ type: string; build: string; t: number }>;
  };
  const rec: Rec = { phases: [], messages: [] };
  (globalThis as unknown as { __rec: Rec }).__rec = rec;
  const now = () => performance.timeOrigin + performance.now();
  const store = new URLSearchParams(location.search).get("store");
  if (!store) return;
  const channel = new BroadcastChannel(`engine:${store}`);
  channel.onmessage = (e: MessageEvent<{ type: string; build: string }>) =>
    rec.messages.push({ type: e.data.type, build: e.data.build, t: now() });
  const look = () => {
    const phase = document.querySelector('[data-testid="engine-status"]')?.getAttribute("data-phase");
    if (phase && phase !== rec.last) {
      rec.last = phase;
      rec.phases.push({ phase, t: now() });
    }
  };
  new MutationObserver(look).observe(document, { subtree: true, childList: true, attributes: true });
}

type Recording = {
  phases: Array<{ phase: string; t: number }>;
  messages: Array<{ type: string; build: string; t: number }>;
};
const recording = (page: Page) => page.evaluate(() => (globalThis as unknown as { __rec: Recording }).__rec);

/** The time intervals during which a tab showed `ready`. */
function readyIntervals(rec: Recording, end: number): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  rec.phases.forEach((p, i) => {
    if (p.phase === "ready") out.push([p.t, rec.phases[i + 1]?.t ?? end]);
  });
  return out;
}

// ---------------------------------------------------------------------------------------------

describe("engine host", () => {
  test("1. reloading the only tab mid-run (the shipped kind, opfs-lent: the lending tab is the one reloaded): the run finishes once, trail exactly [1..40]", async () => {
    await reloadMidRun({}, ({ status, mode }) => {
      expect(status).toMatchObject({ phase: "ready", storeKind: "opfs-lent", jspi: false });
      expect(mode).toBe("shared");
    });
  });

  test("1i. the idb kind (JSPI build), forced: reload mid-run, trail exactly [1..40]", async () => {
    await reloadMidRun({ storeKind: "idb" }, ({ status, mode }) => {
      expect(status).toMatchObject({ phase: "ready", storeKind: "idb", jspi: true });
      expect(mode).toBe("shared");
    });
  });

  // The shipped kind (a new store is opfs-lent) and the idb kind (existing stores, no OPFS): the
  // durability promise of each, kept across a SIGKILL of the whole browser.
  test.each([
    { kind: "opfs-lent", params: {} },
    { kind: "idb", params: { storeKind: "idb" } },
  ])(
    "2. SIGKILL of the browser mid-run ($kind): the ticker resumes, every acknowledged tick kept",
    async ({ kind, params }) => {
      const phases = 40;
      const url = appUrl(app.server.url, { store: uniqueStore("kill"), ...params });
      let page = await openApp(url, "before-kill");
      expect((await clientState(page)).status).toMatchObject({ storeKind: kind });
      const id = await startTicker(page, phases, 75);
      const before = await tickerAt(page, id, "8 ticks", (t) => t.trail.length >= 8);
      expect(before.status).not.toBe("completed");
      await app.relaunch();
      page = await openApp(url, "after-kill");
      expect((await clientState(page)).status).toMatchObject({ storeKind: kind });
      const resumed = await ticker(page, id);
      expect(resumed.trail.slice(0, before.trail.length)).toEqual(before.trail);
      expect(resumed.trail.length).toBeLessThan(phases);
      const done = await tickerAt(page, id, "completed", (t) => t.status === "completed");
      expect(done.trail.slice(0, before.trail.length)).toEqual(before.trail);
      expect(done.trail).toEqual(range(phases));
      expect(await waitTicksOnScreen(page, phases)).toEqual(range(phases));
    },
  );

  test("3. two tabs see the same commits live; closing one disturbs nothing and drops its watches", async () => {
    const url = appUrl(app.server.url, { store: uniqueStore("two-tabs") });
    const tabA = await openApp(url, "A");
    const tabB = await openApp(url, "B");
    // Each tab also keeps its own watch of the root conversation, recording every tick it is sent.
    for (const tab of [tabA, tabB]) {
      await tab.locator('[data-testid="entries"]').waitFor({ state: "attached" });
      await tab.evaluate(() => {
        type Tick = { taskId: number; n: number };
        const g = globalThis as unknown as {
          __ticks: Tick[];
          __engine: { watch(c: number, l: (f: WatchFrame) => void): Promise<number> };
        };
        g.__ticks = [];
        const take = (entries: readonly { kind: string; data?: unknown }[]) => {
          for (const e of entries) if (e.kind === "test.tick") g.__ticks.push(e.data as Tick);
        };
        return g.__engine.watch(1, (frame) => {
          if (frame.value) {
            g.__ticks = [];
            take(frame.value.entries);
          } else for (const op of frame.ops) if (op.op === "append" || op.op === "head") take(op.entries);
        });
      });
    }
    const received = (tab: Page, taskId: number) =>
      tab.evaluate(
        (taskId) =>
          (globalThis as unknown as { __ticks: Array<{ taskId: number; n: number }> }).__ticks
            .filter((t) => t.taskId === taskId)
            .map((t) => t.n),
        taskId,
      );
    const watching = await until(
      "both tabs' watches",
      () => stats(tabA),
      (s) => s.watches >= 6,
    );
    expect(watching.watches).toBe(6); // each tab: the chat's view, the recorder and the task graph

    // A first run: both tabs receive every tick, in order, and both show them.
    const first = await startTicker(tabA, 15, 40);
    await tickerAt(tabA, first, "completed", (t) => t.status === "completed");
    for (const tab of [tabA, tabB]) {
      expect(
        await until(
          "all ticks received",
          () => received(tab, first),
          (r) => r.length >= 15,
        ),
      ).toEqual(range(15));
      expect(await waitTicksOnScreen(tab, 15)).toEqual(range(15));
    }

    // A second run, started from B: close B mid-run; A still gets every tick and the run finishes.
    const second = await startTicker(tabB, 30, 75);
    const seenByB = await until(
      "B receives 5 ticks",
      () => received(tabB, second),
      (r) => r.length >= 5,
    );
    expect(seenByB).toEqual(range(seenByB.length));
    await tabB.close();
    const after = await until(
      "the engine drops B's watches",
      () => stats(tabA),
      (s) => s.watches < watching.watches,
    );
    expect(after.watches).toBe(3);
    const done = await tickerAt(tabA, second, "completed", (t) => t.status === "completed");
    expect(done.trail).toEqual(range(30));
    expect(
      await until(
        "A receives all ticks",
        () => received(tabA, second),
        (r) => r.length >= 30,
      ),
    ).toEqual(range(30));
    expect(await waitTicksOnScreen(tabA, 45)).toEqual([...range(15), ...range(30)]);
  });

  test("4. ten reloads in a row during one run: trail still exactly [1..N]", async () => {
    const phases = 200;
    const page = await openApp(appUrl(app.server.url, { store: uniqueStore("ten-reloads") }));
    const id = await startTicker(page, phases, 50);
    let seen = 0;
    for (let i = 1; i <= 10; i++) {
      const now = await tickerAt(page, id, `a new tick before reload ${i}`, (t) => t.trail.length > seen);
      expect(now.status).not.toBe("completed");
      expect(now.trail).toEqual(range(now.trail.length));
      seen = now.trail.length;
      await page.reload();
      await waitPhase(page, "ready");
    }
    const done = await tickerAt(page, id, "completed", (t) => t.status === "completed");
    expect(done.trail).toEqual(range(phases));
  });

  test("5. a stalled subscriber during 500 commits: bounded backlog, then one catch-up to the current view", async () => {
    const page = await openApp(appUrl(app.server.url, { store: uniqueStore("stall") }));
    const conversation = await engine<number>(page, "conversations.create", "stalled");
    // A watch whose listener does not return until released (from its very first frame).
    await page.evaluate((conversation) => {
      const g = globalThis as unknown as {
        __frames: WatchFrame[];
        __ticksSeen: number;
        __release: () => void;
        __stalled: Promise<number>;
        __engine: { watch(c: number, l: (f: WatchFrame) => Promise<void>): Promise<number> };
      };
      g.__frames = [];
      g.__ticksSeen = 0;
      const gate = new Promise<void>((release) => {
        g.__release = release;
      });
      g.__stalled = g.__engine.watch(conversation, async (frame) => {
        g.__frames.push(frame);
        const ticks = (entries: readonly { kind: string }[]) =>
          entries.filter((e) => e.kind === "test.tick").length;
        if (frame.value) g.__ticksSeen = ticks(frame.value.entries);
        else for (const op of frame.ops) if (op.op === "append") g.__ticksSeen += ticks(op.entries);
        await gate;
      });
    }, conversation);
    await until(
      "the stalled watch is registered",
      () => stats(page),
      (s) => s.watches >= 2,
    );

    const commits = 500;
    const id = await startTicker(page, commits, 0, conversation);
    let maxPending = 0;
    const done = await until(
      "500 ticks committed",
      async () => {
        const [s, t] = await Promise.all([stats(page), ticker(page, id)]);
        maxPending = Math.max(maxPending, s.pendingFrames);
        return t;
      },
      (t) => t.status === "completed",
    );
    expect(done.trail).toEqual(range(commits));
    const stalled = await stats(page);
    maxPending = Math.max(maxPending, stalled.pendingFrames);
    expect(maxPending).toBeLessThanOrEqual(100);
    expect(stalled.pendingFrames).toBeGreaterThan(0); // the backlog is real, and bounded
    expect(
      await page.evaluate(() => (globalThis as unknown as { __frames: unknown[] }).__frames.length),
    ).toBe(1);

    await page.evaluate(() => (globalThis as unknown as { __release: () => void }).__release());
    await until(
      "the released listener catches up",
      () => page.evaluate(() => (globalThis as unknown as { __ticksSeen: number }).__ticksSeen),
      (n) => n >= commits,
    );
    expect((await stats(page)).pendingFrames).toBe(0);
    const frames = await page.evaluate(() => (globalThis as unknown as { __frames: WatchFrame[] }).__frames);
    expect(frames.length).toBeLessThanOrEqual(101);
    expect(frames.length).toBeGreaterThan(1);
    let view: ConversationView | undefined;
    for (const frame of frames) view = applyFrame(view, frame);
    // The current view, as a fresh watch's first frame gives it.
    const current = await page.evaluate(async (conversation) => {
      const g = globalThis as unknown as {
        __engine: {
          watch(c: number, l: (f: WatchFrame) => void): Promise<number>;
          api: { watches: { unwatch(id: number): Promise<void> } };
        };
      };
      let first: WatchFrame | undefined;
      const watchId = await g.__engine.watch(conversation, (f) => {
        first ??= f;
      });
      await g.__engine.api.watches.unwatch(watchId);
      return first?.value;
    }, conversation);
    expect(current?.entries.filter((e) => e.kind === "test.tick")).toHaveLength(commits);
    expect(view).toEqual(current);
  });

  describe("6. two engines of different builds on one store", () => {
    const OLD = "2026-01-01T00:00:00.000Z";
    const NEW = "2026-06-01T00:00:00.000Z";
    const skewRoot = join(root, "test-results/e2e-skew");
    let skew: StaticServer;

    beforeAll(async () => {
      rmSync(skewRoot, { recursive: true, force: true });
      mkdirSync(skewRoot, { recursive: true });
      for (const [folder, buildId] of [
        ["a", OLD],
        ["b", NEW],
      ] as const) {
        const started = Date.now();
        const result = spawnSync(
          process.execPath,
          [
            join(root, "node_modules/vite/bin/vite.js"),
            "build",
            "--logLevel",
            "warn",
            "--outDir",
            join(skewRoot, folder),
            "--emptyOutDir",
            "--base",
            `/${folder}/`,
          ],
          { cwd: root, stdio: ["ignore", "ignore", "inherit"], env: { ...process.env, BUILD_ID: buildId } },
        );
        if (result.status !== 0)
          throw new Error(
            `building /${folder}/ (BUILD_ID ${buildId}) failed: exit ${result.status ?? result.signal}`,
          );
        console.log(`[e2e] built /${folder}/ (BUILD_ID ${buildId}) in ${Date.now() - started} ms`);
      }
      // One origin serves both builds, so they share IndexedDB, Web Locks and BroadcastChannel.
      skew = await serveStatic(skewRoot);
    });

    afterAll(async () => {
      await skew?.close();
    });

    test("a newer build takes the store over with the run intact; an older one never takes it back", async () => {
      const phases = 60;
      const store = uniqueStore("skew");
      await app.browser.context.addInitScript(installRecorders);
      const tabA = await openApp(appUrl(`${skew.url}a/`, { store }), "A(old)");
      expect((await stats(tabA)).build).toBe(OLD);
      const id = await startTicker(tabA, phases, 75);
      const before = await tickerAt(tabA, id, "5 ticks under A", (t) => t.trail.length >= 5);
      expect(before.status).not.toBe("completed");

      const tabB = record(await app.browser.newPage(), "B(new)");
      await tabB.goto(appUrl(`${skew.url}b/`, { store }));
      await tabA.locator('[data-testid="handed-over"]').waitFor({ timeout: 60_000 });
      await waitPhase(tabB, "ready");
      expect((await stats(tabB)).build).toBe(NEW);
      const done = await tickerAt(tabB, id, "completed under B", (t) => t.status === "completed");
      expect(done.trail).toEqual(range(phases));
      expect(await waitTicksOnScreen(tabB, phases)).toEqual(range(phases));

      // Never both ready: A's ready ended before B's began, and the handover messages came in order.
      const end = Date.now() + 60_000;
      const [recA, recB] = [await recording(tabA), await recording(tabB)];
      const readyA = readyIntervals(recA, end);
      const readyB = readyIntervals(recB, end);
      expect(readyA).toHaveLength(1);
      expect(readyB).toHaveLength(1);
      expect(readyA[0]![1]).toBeLessThanOrEqual(readyB[0]![0]);
      // After its one ready interval, A only hands over (a fast handover may show only its end).
      const afterReady = recA.phases
        .slice(recA.phases.findIndex((p) => p.phase === "ready") + 1)
        .map((p) => p.phase);
      expect(afterReady.at(-1)).toBe("handed-over");
      expect(afterReady.every((p) => p === "handing-over" || p === "handed-over")).toBe(true);
      const order = recA.messages.map((m) => `${m.type}:${m.build}`);
      expect(order).toEqual([
        `owner-ready:${OLD}`,
        `handover-request:${NEW}`,
        `handover-released:${OLD}`,
        `owner-ready:${NEW}`,
      ]);
      const released = recA.messages[2]!.t;
      expect(released).toBeLessThanOrEqual(recA.messages[3]!.t);
      expect(released).toBeLessThanOrEqual(readyB[0]![0]);

      // The old build again, in a fresh tab: it waits; B stays the owner and keeps working.
      await tabA.close();
      const tabA2 = await openApp(appUrl(`${skew.url}a/`, { store }), "A(old) again", "waiting-for-lock");
      await until(
        "A's handover request reached B",
        () => recording(tabB),
        (r) => r.messages.some((m) => m.type === "handover-request" && m.build === OLD),
      );
      const next = await startTicker(tabB, 10, 30);
      const nextDone = await tickerAt(tabB, next, "completed under B", (t) => t.status === "completed");
      expect(nextDone.trail).toEqual(range(10));
      expect((await stats(tabB)).build).toBe(NEW);
      const [recA2, recB2] = [await recording(tabA2), await recording(tabB)];
      expect(recA2.phases.map((p) => p.phase)).not.toContain("ready");
      expect(recB2.phases.at(-1)?.phase).toBe("ready");
      expect(readyIntervals(recB2, end)).toHaveLength(1);
      expect(recB2.messages.map((m) => `${m.type}:${m.build}`)).not.toContain(`handover-released:${NEW}`);
      await waitPhase(tabA2, "waiting-for-lock");
    });
  });

  test("7. dedicated-worker fallback (opfs): reload mid-run; a second tab says the app is open elsewhere and takes over when asked", async () => {
    const { page: first, url } = await reloadMidRun({ engine: "dedicated" }, ({ status, mode }) => {
      expect(status).toMatchObject({ phase: "ready", storeKind: "opfs", jspi: false });
      expect(mode).toBe("dedicated");
    });
    const second = await openApp(url, "second", "waiting-for-lock");
    await second.locator('[data-testid="elsewhere"]').waitFor();
    expect((await clientState(second)).mode).toBe("elsewhere");
    // "Use it here": the first tab hands the store over (same build, so not "a newer version") and
    // the second one runs the engine with the finished run intact.
    const id = await startTicker(first, 3, 30);
    await tickerAt(first, id, "completed under the first tab", (t) => t.status === "completed");
    await second.getByRole("button", { name: "Use it here" }).click();
    const banner = first.locator('[data-testid="handed-over"]');
    await banner.waitFor({ timeout: 60_000 });
    expect(await banner.textContent()).toContain("Another tab took over the app");
    expect(await banner.textContent()).not.toContain("newer version");
    await waitPhase(second, "ready");
    expect(
      (await tickerAt(second, id, "read under the second tab", (t) => t.status === "completed")).trail,
    ).toEqual(range(3));
  });

  test("8. the Asyncify idb build: reload mid-run, trail exactly [1..40]", async () => {
    await reloadMidRun({ build: "asyncify", storeKind: "idb" }, ({ status, mode }) => {
      expect(status).toMatchObject({ phase: "ready", storeKind: "idb", jspi: false });
      expect(mode).toBe("shared");
    });
  });

  test("9a. a damaged store shows the reason and advice, never a blank page or a hang", async () => {
    const store = uniqueStore("corrupt");
    const first = await openApp(appUrl(app.server.url, { store: uniqueStore("other") }), "other");
    // Lay out IndexedDB as IDBBatchAtomicVFS does, with garbage where the database file's first page is.
    await first.evaluate(async (store) => {
      const db = await new Promise<IDBDatabase>((resolve, reject) => {
        const request = indexedDB.open(store, 6);
        request.onupgradeneeded = () => {
          request.result.createObjectStore("blocks", { keyPath: ["path", "offset", "version"] });
          request.result.createObjectStore("metadata", { keyPath: "name" });
        };
        request.onsuccess = () => resolve(request.result);
        request.onerror = () => reject(request.error);
      });
      const path = `/${store}.db`;
      const tx = db.transaction(["blocks", "metadata"], "readwrite");
      tx.objectStore("metadata").put({ name: path, fileSize: 8192, version: 0 });
      tx.objectStore("blocks").put({ path, offset: 0, version: 0, data: new Uint8Array(8192).fill(0x5a) });
      await new Promise((resolve, reject) => {
        tx.oncomplete = resolve;
        tx.onerror = () => reject(tx.error);
      });
      db.close();
    }, store);
    const page = await openApp(appUrl(app.server.url, { store }), "corrupt", "failed");
    const error = page.locator('[data-testid="engine-error"]');
    await error.waitFor();
    expect(await error.textContent()).toMatch(/could not be opened \(corrupt\)/);
    expect(await error.textContent()).toMatch(/reset the store/);
    expect(await page.locator('[data-testid="engine-status"]').textContent()).toMatch(/damaged/);
  });

  test("9b. a store that cannot be written (storage quota used up) says so, with advice", async () => {
    const probe = record(await app.browser.newPage(), "quota");
    const cdp = await app.browser.context.newCDPSession(probe);
    // A quota of 1 KB for the app's origin: the first write of a new store fails.
    await cdp.send("Storage.overrideQuotaForOrigin", {
      origin: new URL(app.server.url).origin,
      quotaSize: 1024,
    });
    await probe.goto(appUrl(app.server.url, { store: uniqueStore("quota") }));
    await waitPhase(probe, "failed");
    const error = probe.locator('[data-testid="engine-error"]');
    await error.waitFor();
    expect(await error.textContent()).toMatch(/could not be opened \(quota\)/);
    expect(await error.textContent()).toMatch(/Free up space/);
    expect(await error.textContent()).toMatch(/everything committed so far is kept/);
    expect(await probe.locator('[data-testid="engine-status"]').textContent()).toMatch(/storage is full/);
    await cdp.detach();
  });

  test("9d. storage fills up mid-run: the engine stops saying so, and after space is freed a reload resumes with every committed tick", async () => {
    // The ticker's run outlasts any wait for the quota (10,000 ticks 50 ms apart: over 8 minutes), so
    // the quota always bites mid-run, and the test waits for states, never for the run's end: Chromium
    // notices the shrunk quota only now and then (20-30 s after the override on this machine), and
    // the 1,000-tick run this replaced could end first, or leave more ticks after the reload than a
    // loaded machine ran in the wait for completion. After the reload the run is seen to go on from
    // its last committed tick, then aborted.
    const phases = 10_000;
    const url = appUrl(app.server.url, { store: uniqueStore("quota-mid") });
    const origin = new URL(app.server.url).origin;
    const page = await openApp(url, "quota-mid");
    const cdp = await app.browser.context.newCDPSession(page);
    const id = await startTicker(page, phases, 50);
    const before = await tickerAt(page, id, "5 ticks", (t) => t.trail.length >= 5);
    // Take the quota away, then commit something that grows the store (overwriting pages in place
    // needs no new space): that COMMIT fails for want of space, mid-run.
    await cdp.send("Storage.overrideQuotaForOrigin", { origin, quotaSize: 1024 });
    // IndexedDB re-reads the space left only now and then (about every 10 s here): keep growing the
    // store until a COMMIT fails.
    const refused = await until(
      "a commit refused for want of space",
      () =>
        engine(page, "debug.seed", { tasks: 200, batch: 200 }).then(
          () => "",
          (e: unknown) => String(e),
        ),
      (e) => e !== "",
    );
    expect(refused).toMatch(/transaction failed|engine stopped|closed/);
    await waitPhase(page, "failed");
    const status = await page.locator('[data-testid="engine-status"]').textContent();
    expect(status).toMatch(/storage is full/i);
    const error = await page.locator('[data-testid="engine-error"]').textContent();
    expect(error).toMatch(/The engine stopped \(quota\)/);
    expect(error).toMatch(/Free up space/);
    expect(error).toMatch(/everything committed so far is kept/);
    // The conversation stays readable as last committed; the run stopped short of its end.
    await page.locator('[data-testid="composer-stopped"]').waitFor();
    // A transcript this long is windowed (src/lib/list-window.ts): the newest ticks are on screen, in
    // order and without a gap, and the run stopped short of its end.
    const shown = await ticksOnScreen(page);
    const first = shown[0] ?? 1;
    expect(shown).toEqual(range(shown.length).map((n) => n + first - 1));
    const last = shown.at(-1) ?? 0;
    expect(last).toBeGreaterThanOrEqual(before.trail.length);
    expect(last).toBeLessThan(phases);
    // Space comes back (the override lifted); a reload reopens the store and the ticker resumes.
    await cdp.send("Storage.overrideQuotaForOrigin", { origin });
    await cdp.detach();
    await page.reload();
    await waitPhase(page, "ready");
    const resumed = await ticker(page, id);
    expect(resumed.trail.slice(0, last)).toEqual(range(last));
    // The run goes on from there: every tick once, in order, on the store and on screen.
    const further = await tickerAt(page, id, "10 ticks past the stop", (t) => t.trail.length >= last + 10);
    expect(further.trail).toEqual(range(further.trail.length));
    const end = await until(
      "the newer ticks on screen",
      () => ticksOnScreen(page),
      (t) => (t.at(-1) ?? 0) >= last + 10,
    );
    expect(end).toEqual(range(end.length).map((n) => n + end[0]! - 1));
    expect(await engine(page, "tasks.abort", id)).toBe("marked");
    const stopped = await tickerAt(page, id, "aborted", (t) => t.status === "aborted");
    expect(stopped.trail).toEqual(range(stopped.trail.length));
  });

  test("9c. a protocol mismatch gives a clear failed state", async () => {
    const page = await openApp(
      appUrl(app.server.url, { store: uniqueStore("protocol"), protocol: "999" }),
      "mismatch",
      "failed",
    );
    const error = page.locator('[data-testid="engine-error"]');
    await error.waitFor();
    expect(await error.textContent()).toMatch(/\(unsupported\)/);
    expect(await error.textContent()).toMatch(/Reload the page/);
    expect(await page.locator('[data-testid="engine-status"]').textContent()).toMatch(/protocol 999/);
  });
});

describe("the app with the demo model", () => {
  const toolResultsOnScreen = (page: Page, n: number) =>
    until(
      `${n} tool results on screen`,
      () => entriesOf(page, "pi.tool-result").count(),
      (count) => count >= n,
    );
  /** Wait for the n-th answer (a pi.assistant entry with text and no tool call still pending). */
  const answers = (page: Page, n: number) =>
    until(
      `${n} settled answers`,
      () => answersOnPage(page),
      (s) => s.busy === 0 && s.count >= n,
    );

  test("10. a chat drives real tool calls: a note written to OPFS, listed, read back, and all of it there after a reload", async () => {
    const page = await openApp(appUrl(app.server.url, { store: uniqueStore("chat") }), "chat");
    // The model lists the workspace for a free name, then writes: two tool results, three answers.
    await say(page, "write a note");
    await toolResultsOnScreen(page, 2);
    await answers(page, 3);
    expect(await entriesOf(page, "pi.tool-result").first().textContent()).toMatch(/tool · ls/);
    expect(await entriesOf(page, "pi.tool-result").nth(1).textContent()).toMatch(/tool · write/);

    await say(page, "list the files");
    await toolResultsOnScreen(page, 3);
    await answers(page, 5);
    expect(await entriesOf(page, "pi.tool-result").nth(2).textContent()).toMatch(/notes\//);

    await say(page, "read notes/note-1.md");
    await toolResultsOnScreen(page, 4);
    await answers(page, 7);
    const read = await entriesOf(page, "pi.tool-result").nth(3).textContent();
    expect(read).toMatch(/tool · read/);
    expect(read).toMatch(/committed to SQLite in your browser/);
    // Nothing failed along the way.
    expect(await page.locator('[data-testid="entries"] .error').count()).toBe(0);

    const before = await page.locator('[data-testid="entries"] [data-kind]').allTextContents();
    await page.reload();
    await waitPhase(page, "ready");
    await until(
      "the transcript after the reload",
      () => page.locator('[data-testid="entries"] [data-kind]').allTextContents(),
      (after) => after.length >= before.length,
    );
    expect(await page.locator('[data-testid="entries"] [data-kind]').allTextContents()).toEqual(before);
  });

  test("11. Compact says when there is nothing to compact; New context starts the chat over at a reset note, and a reload shows the same", async () => {
    const page = await openApp(appUrl(app.server.url, { store: uniqueStore("reset") }), "chat");
    await say(page, "hello there");
    await answers(page, 1);
    // A short chat has nothing to compact, and the tab says so.
    await page.getByRole("button", { name: "Compact" }).click();
    await page.getByTestId("notice").waitFor();
    expect(await page.getByTestId("notice").textContent()).toMatch(/Nothing to compact yet/);
    await page.getByRole("button", { name: "New context" }).click();
    await entriesOf(page, "pi.reset").waitFor();
    // The view is the active range: the earlier turn is stored but no longer shown.
    expect(await entriesOf(page, "pi.user").count()).toBe(0);
    await say(page, "and again");
    await answers(page, 1);
    const shown = await page
      .locator('[data-testid="entries"] [data-kind]')
      .evaluateAll((els) => els.map((e) => e.getAttribute("data-kind")));
    expect(shown).toEqual(["pi.reset", "pi.user", "pi.assistant"]);
    await page.reload();
    await waitPhase(page, "ready");
    await entriesOf(page, "pi.reset").waitFor();
    const after = await page
      .locator('[data-testid="entries"] [data-kind]')
      .evaluateAll((els) => els.map((e) => e.getAttribute("data-kind")));
    expect(after).toEqual(shown);
  });
});
