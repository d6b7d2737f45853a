/**
 * The growth bench (issue 30, items 4 and 5): does what serves live work stay flat as a user's store
 * grows for months? The built app in the system Chromium, on stores of three sizes, each made in a
 * few big transactions (`debug.seedGrowth`, worker/core/bulk-seed.ts: copies of rows the engine
 * wrote, past the harness, then the engine is closed and the next one opens the store whole):
 *
 *   size  conversations  entries    terminal tasks  plus
 *   S     1,000          10,000     5,000           a 5,000-message chat
 *   M     10,000         100,000    50,000          the same chat
 *   L     100,000        1,000,000  500,000         the same chat
 *
 * Per size, BENCH_GROWTH_ROUNDS cold opens (a new tab once no SharedWorker is left, as the recovery
 * bench does), medians:
 * - recovery: navigation start to the first tick of a ticker that was running when the last engine
 *   went away (the ticker is started before each round's close and aborted after its first tick);
 * - list paint: navigation start to the conversation list's first row in the DOM;
 * - harness open: the engine's store opened (migrated) to the harness recovered (its timeline);
 * - search: a word only the oldest entry says, and a word every question says, from the tab's call
 *   to its answer: the list's paged search (`conversations.searchPage`, its first page) and the
 *   whole-store `conversations.search` beside it;
 * - open chat: the 5,000-message chat opened from another conversation, to its newest answer on
 *   screen (as the browser bench's long chat);
 * - commit: one commit (a document written), 20 in a row, median;
 * - engine memory after open: the SharedWorker's JS heap after a full GC (CDP `Runtime.getHeapUsage`
 *   on its target) and its store's wasm memory (`debug.memory`).
 * Then how each measure grows: its ratio between consecutive sizes beside the store's (10x). Flat is
 * 1.0x; a ratio near 10x is O(store). Sizes grow 10x, so timer noise under 1 ms reads as growth:
 * compare the large steps.
 *
 * Memory budgets (item 5), each beside a floor measured in the same run:
 * - The engine after open with the recovery bench's store (10,000 terminal tasks, 1,000 idle
 *   conversations): JS heap at most the empty store's engine + 2 MB, wasm memory at most 24 MB. Why:
 *   the open reads live work only (decision 0006), so terminal tasks must cost nothing; what may grow
 *   is one conversation record and one list summary per conversation (a few hundred bytes each:
 *   about 0.5 MB for 1,000), and 2 MB is four times that. The wasm instance starts at 16 MB and
 *   SQLite's page cache is bounded by its pragma (about 2 MB by default); 24 MB leaves room for the
 *   VFS's buffers: a memory grown past it would mean the store is being read whole into SQLite's heap.
 * - A tab with a 5,000-entry conversation open: JS heap at most the same tab on an empty
 *   conversation + 4 MB, and at most 1,500 DOM nodes in the document. Why: the watch carries the
 *   newest 150 entries (pages.ts) and the transcript renders a window of them (list-window.ts), so
 *   neither may grow with the conversation; 150 parsed messages of a few KB with their views are
 *   about 1 MB, and 4 MB leaves room for markdown's output and the measured heights. About 40
 *   entries fit a tall screen's window, at most 15 nodes each, plus the app's frame (a few hundred):
 *   1,500 nodes is room for a 4K screen, and a list rendered whole (5,000 entries) is far past it.
 * A missed budget prints FAIL; the run still exits 0 (figures only, never a timed test).
 *
 * Env: BENCH_GROWTH_MAX (how many sizes, 1-3, default 3), BENCH_GROWTH_DIVIDE (divide every size by
 * this, default 1: BENCH_GROWTH_MAX=2 BENCH_GROWTH_DIVIDE=100 is a quick check that the suite runs),
 * BENCH_GROWTH_ROUNDS (cold opens per size, default 3), BENCH_GROWTH_CHAT (the chat's messages,
 * default 5000), BENCH_GROWTH_ONLY=growth|memory (one part).
 * Print the load average beside the figures and judge only ratios from one run on a quiet machine.
 */
import { spawnSync } from "node:child_process";
import { existsSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { Page } from "playwright-core";
import { findChromium } from "../../scripts/chromium.mjs";
import type { EngineStats, SearchPage, TickerStatus } from "../../worker/protocol/index.ts";
import {
  Cdp,
  engine,
  type LaunchedBrowser,
  launchBrowser,
  type StaticServer,
  serveStatic,
  waitForSharedWorker,
} from "../e2e/browser.ts";
import { fmt, machineLoad, median, table } from "./report.ts";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const env = (name: string, fallback: number): number => Number(process.env[name] ?? fallback);
const MAX = Math.max(1, Math.min(3, env("BENCH_GROWTH_MAX", 3)));
const DIVIDE = Math.max(1, env("BENCH_GROWTH_DIVIDE", 1));
const ROUNDS = Math.max(1, env("BENCH_GROWTH_ROUNDS", 3));
const CHAT = env("BENCH_GROWTH_CHAT", 5000);
const ONLY = process.env.BENCH_GROWTH_ONLY;
/** A word only the oldest seeded entry says (worker/core/bulk-seed.ts RARE_WORD), and one every question says. */
const RARE = "zebrafinch";
const COMMON = "question";
const SEARCH_LIMIT = 50;
const COMMITS = 20;
const WORKER_GONE_TIMEOUT_MS = 120_000;

const SIZES = [
  { label: "S", conversations: 1_000, entries: 10_000 },
  { label: "M", conversations: 10_000, entries: 100_000 },
  { label: "L", conversations: 100_000, entries: 1_000_000 },
]
  .slice(0, MAX)
  .map((s) => ({
    ...s,
    conversations: Math.max(1, Math.round(s.conversations / DIVIDE)),
    entries: Math.round(s.entries / DIVIDE),
    tasks: Math.round(s.entries / 2 / DIVIDE),
  }));

const MB = 1024 * 1024;
const ENGINE_HEAP_BUDGET_MB = 2;
const ENGINE_WASM_BUDGET_MB = 24;
const TAB_HEAP_BUDGET_MB = 4;
const TAB_NODES_BUDGET = 1500;

// ---------------------------------------------------------------------------------------------
// Pages and the engine

const uniqueStore = (label: string) => `bench-growth-${label}-${Date.now().toString(36)}`;
const appUrl = (server: StaticServer, store: string) =>
  `${server.url}?${new URLSearchParams({ debug: "1", store })}`;

async function waitReady(page: Page): Promise<void> {
  await page
    .locator('[data-testid="engine-status"][data-phase="ready"]')
    .waitFor({ state: "attached", timeout: 600_000 });
}

async function until<T>(what: string, probe: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 600_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const value = await probe();
      if (ok(value)) return value;
    } catch {
      // A page mid-reload: try again.
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Close `page`, wait until no SharedWorker is left (its engine gone, the store free), open a new tab. */
async function freshPage(b: LaunchedBrowser, page: Page): Promise<Page> {
  await page.close();
  const started = Date.now();
  const cdp = await Cdp.connect(b.wsEndpoint);
  try {
    for (;;) {
      const { targetInfos } = await cdp.send<{ targetInfos: Array<{ type: string }> }>("Target.getTargets");
      if (!targetInfos.some((t) => t.type === "shared_worker")) break;
      if (Date.now() - started > WORKER_GONE_TIMEOUT_MS)
        throw new Error(`a SharedWorker was still alive ${WORKER_GONE_TIMEOUT_MS} ms after its tab closed`);
      await new Promise((r) => setTimeout(r, 50));
    }
  } finally {
    cdp.close();
  }
  const next = await b.newPage();
  await next.setViewportSize({ width: 1280, height: 800 });
  // When the browser's conversation list first shows a row (ms since navigation start).
  await next.addInitScript(`(() => {
    const look = () => {
      if (globalThis.__listPaint === undefined && document.querySelector('[data-testid="conversation-list"] li[data-id]'))
        globalThis.__listPaint = performance.now();
    };
    new MutationObserver(look).observe(document, { subtree: true, childList: true });
  })()`);
  return next;
}

/** Heap used (bytes) after a full GC, in the engine's SharedWorker or in `page`. */
async function heapUsed(b: LaunchedBrowser, page?: Page): Promise<number> {
  if (page) {
    const session = await page.context().newCDPSession(page);
    try {
      await session.send("HeapProfiler.collectGarbage");
      return (await session.send("Runtime.getHeapUsage")).usedSize;
    } finally {
      await session.detach().catch(() => undefined);
    }
  }
  const target = await waitForSharedWorker(b);
  const cdp = await Cdp.connect(b.wsEndpoint);
  try {
    const { sessionId } = await cdp.send<{ sessionId: string }>("Target.attachToTarget", {
      targetId: target.targetId,
      flatten: true,
    });
    await cdp.send("HeapProfiler.collectGarbage", {}, sessionId);
    const usage = await cdp.send<{ usedSize: number }>("Runtime.getHeapUsage", {}, sessionId);
    await cdp.send("Target.detachFromTarget", { sessionId }).catch(() => undefined);
    return usage.usedSize;
  } finally {
    cdp.close();
  }
}

/** ms the tab waits for `method`'s answer, timed in the page (no CDP hop in the figure). */
async function timedCall<T>(
  page: Page,
  method: string,
  ...args: unknown[]
): Promise<{ ms: number; value: T }> {
  return page.evaluate(
    async ({ method, args }) => {
      const path = method.split(".");
      let target = (globalThis as unknown as { __engine: { api: Record<string, unknown> } }).__engine.api;
      for (const key of path.slice(0, -1)) target = target[key] as Record<string, unknown>;
      const started = performance.now();
      const value = await (target[path.at(-1)!] as (...a: unknown[]) => Promise<unknown>)(...args);
      return { ms: performance.now() - started, value };
    },
    { method, args },
  ) as Promise<{ ms: number; value: T }>;
}

/** From setting the hash to conversation `id` to its newest answer (`newest`) on screen, ms. */
async function openChat(page: Page, id: number, newest: string): Promise<number> {
  await page.evaluate(() => {
    location.hash = "#/c/1";
  });
  await until(
    "conversation 1 shown",
    () => page.getByText(newest).count(),
    (n) => n === 0,
  );
  return (await page.evaluate(`(() => new Promise((done) => {
    const started = performance.now();
    location.hash = "#/c/${id}";
    const look = () => {
      const scroller = document.querySelector(".scroller");
      const entry = [...document.querySelectorAll('[data-testid="entries"] > [data-kind="pi.assistant"]')]
        .findLast((e) => e.textContent.includes(${JSON.stringify(newest)}));
      if (scroller && entry) {
        const s = scroller.getBoundingClientRect();
        const r = entry.getBoundingClientRect();
        if (r.bottom > s.top && r.top < s.bottom) return done(performance.now() - started);
      }
      requestAnimationFrame(look);
    };
    requestAnimationFrame(look);
  }))()`)) as number;
}

// ---------------------------------------------------------------------------------------------
// Growth

/** The measures of one size, in the order of MEASURES. */
const MEASURES = [
  "recovery",
  "harness open",
  "list paint",
  "search rare, page",
  "search common, page",
  "search rare, whole",
  "open chat",
  "commit",
  "engine heap",
  "engine wasm",
] as const;
const UNIT: Record<(typeof MEASURES)[number], "ms" | "MB"> = {
  recovery: "ms",
  "harness open": "ms",
  "list paint": "ms",
  "search rare, page": "ms",
  "search common, page": "ms",
  "search rare, whole": "ms",
  "open chat": "ms",
  commit: "ms",
  "engine heap": "MB",
  "engine wasm": "MB",
};

async function measureSize(
  b: LaunchedBrowser,
  server: StaticServer,
  size: (typeof SIZES)[number],
): Promise<{ values: number[]; note: string }> {
  const store = uniqueStore(size.label);
  const url = appUrl(server, store);
  let page = await b.newPage();
  await page.goto(url);
  await waitReady(page);
  const seeded = await engine<{ chatId: number; ms: number }>(page, "debug.seedGrowth", {
    conversations: size.conversations,
    entries: size.entries,
    tasks: size.tasks,
    chatEntries: CHAT,
  });
  const newest = `The newest answer, number ${CHAT}.`;
  console.log(
    `  ${size.label}: seeded ${size.conversations} conversations, ${size.entries} entries, ${size.tasks} terminal tasks and a ${CHAT}-message chat in ${fmt(seeded.ms / 1000, 1)} s`,
  );
  // The seeding engine wrote past its harness: it goes away before anything else runs.
  page = await freshPage(b, page);
  await page.goto(url);
  await waitReady(page);
  const ticker = await engine<number>(page, "conversations.create", "growth ticker");

  const rounds: number[][] = [];
  for (let round = 1; round <= ROUNDS; round++) {
    // A ticker running when the engine goes away: the next one resumes it.
    const taskId = await engine<number>(page, "debug.startTicker", {
      phases: 10_000,
      delayMs: 0,
      conversationId: ticker,
    });
    await until(
      "the ticker to run",
      () => engine<TickerStatus>(page, "debug.ticker", taskId),
      (t) => t.trail.length >= 3,
    );
    page = await freshPage(b, page);
    await page.goto(url);
    await waitReady(page);
    const origin = await page.evaluate(() => performance.timeOrigin);
    const stats = await until(
      "the new engine's first tick",
      () => engine<EngineStats>(page, "debug.stats"),
      (s) => s.timeline.firstTickAt !== undefined,
    );
    await engine(page, "tasks.abort", taskId);
    const listPaint = await until(
      "the conversation list's first row",
      () => page.evaluate(() => (globalThis as unknown as { __listPaint?: number }).__listPaint),
      (v) => v !== undefined,
    );
    const t = stats.timeline;
    const heap = round === ROUNDS ? await heapUsed(b) : Number.NaN;
    const wasm =
      round === ROUNDS ? (await engine<{ wasmBytes: number }>(page, "debug.memory")).wasmBytes : Number.NaN;
    const rare = await timedCall<SearchPage>(page, "conversations.searchPage", RARE, { limit: SEARCH_LIMIT });
    const common = await timedCall<SearchPage>(page, "conversations.searchPage", COMMON, {
      limit: SEARCH_LIMIT,
    });
    const whole = await timedCall<number[]>(page, "conversations.search", RARE);
    const chat = await openChat(page, seeded.chatId, newest);
    const commits = await engine<number[]>(page, "debug.commitLatency", {
      conversationId: ticker,
      commits: COMMITS,
    });
    rounds.push([
      t.firstTickAt! - origin,
      t.readyAt! - (t.migratedAt ?? t.openedAt!),
      listPaint!,
      rare.ms,
      common.ms,
      whole.ms,
      chat,
      median(commits),
      heap / MB,
      wasm / MB,
    ]);
    if (round === 1)
      console.log(
        `    search "${RARE}": first page ${rare.value.items.length} conversation(s)${rare.value.before === undefined ? ", the whole store" : `, more before entry ${rare.value.before}`}; whole store ${whole.value.length}`,
      );
  }
  await page.close();
  const values = MEASURES.map((_, i) => median(rounds.map((r) => r[i]!).filter((v) => !Number.isNaN(v))));
  return { values, note: machineLoad() };
}

async function growth(b: LaunchedBrowser, server: StaticServer): Promise<void> {
  console.log(
    `\ngrowth: ${SIZES.length} store size(s), ${ROUNDS} cold open(s) each, medians (load ${machineLoad()})`,
  );
  const results: Array<{ label: string; values: number[]; note: string }> = [];
  for (const size of SIZES) results.push({ label: size.label, ...(await measureSize(b, server, size)) });
  const value = (m: number, v: number) =>
    UNIT[MEASURES[m]!] === "MB" ? `${fmt(v, 1)} MB` : `${fmt(v, 1)} ms`;
  table([
    ["size", "conversations", "entries", ...MEASURES, "load after"],
    ...results.map((r, k) => [
      r.label,
      fmt(SIZES[k]!.conversations),
      fmt(SIZES[k]!.entries),
      ...r.values.map((v, m) => value(m, v)),
      r.note,
    ]),
  ]);
  if (results.length < 2) return;
  console.log(
    "\nhow each grows: the ratio between consecutive sizes (the store grows 10x a step; flat is 1.0x)",
  );
  table([
    ["measure", ...results.slice(1).map((r, k) => `${results[k]!.label} -> ${r.label}`)],
    ...MEASURES.map((name, m) => [
      name,
      ...results.slice(1).map((r, k) => `${fmt(r.values[m]! / results[k]!.values[m]!, 2)}x`),
    ]),
  ]);
}

// ---------------------------------------------------------------------------------------------
// Memory budgets

async function memory(b: LaunchedBrowser, server: StaticServer): Promise<void> {
  console.log(`\nmemory budgets (load ${machineLoad()})`);
  // The engine: an empty store's, then the recovery bench's store (10,000 tasks, 1,000 conversations).
  const engineAfterOpen = async (seed?: { conversations: number; tasks: number; entries: number }) => {
    const url = appUrl(server, uniqueStore(seed ? "tasks" : "empty"));
    let page = await freshPage(b, await b.newPage());
    await page.goto(url);
    await waitReady(page);
    if (seed) {
      await engine(page, "debug.seedGrowth", { ...seed, chatEntries: 0 });
      page = await freshPage(b, page);
      await page.goto(url);
      await waitReady(page);
    }
    await engine(page, "conversations.list");
    const heap = await heapUsed(b);
    const wasm = (await engine<{ wasmBytes: number }>(page, "debug.memory")).wasmBytes;
    await page.close();
    return { heap, wasm };
  };
  const empty = await engineAfterOpen();
  const full = await engineAfterOpen({ conversations: 1000, tasks: 10_000, entries: 2000 });
  const heapOver = (full.heap - empty.heap) / MB;
  table([
    [
      "engine after open",
      "JS heap",
      "wasm memory",
      `heap budget: empty + ${ENGINE_HEAP_BUDGET_MB} MB`,
      `wasm budget ${ENGINE_WASM_BUDGET_MB} MB`,
    ],
    ["empty store", `${fmt(empty.heap / MB, 1)} MB`, `${fmt(empty.wasm / MB, 1)} MB`, "", ""],
    [
      "10,000 terminal tasks, 1,000 conversations",
      `${fmt(full.heap / MB, 1)} MB (+${fmt(heapOver, 1)})`,
      `${fmt(full.wasm / MB, 1)} MB`,
      heapOver <= ENGINE_HEAP_BUDGET_MB ? "PASS" : "FAIL",
      full.wasm / MB <= ENGINE_WASM_BUDGET_MB ? "PASS" : "FAIL",
    ],
  ]);

  // The tab: on an empty conversation, then with the 5,000-entry chat open.
  const page = await freshPage(b, await b.newPage());
  await page.goto(appUrl(server, uniqueStore("tab")));
  await waitReady(page);
  const chatId = await engine<number>(page, "debug.seedChat", { entries: 5000 });
  const emptyId = await engine<number>(page, "conversations.create", "empty");
  const tabNow = async () => {
    const session = await page.context().newCDPSession(page);
    try {
      await session.send("HeapProfiler.collectGarbage");
      const heap = (await session.send("Runtime.getHeapUsage")).usedSize;
      const nodes = (await page.evaluate(() => document.getElementsByTagName("*").length)) as number;
      return { heap, nodes };
    } finally {
      await session.detach().catch(() => undefined);
    }
  };
  await page.evaluate((id) => {
    location.hash = `#/c/${id}`;
  }, emptyId);
  await page.locator('[data-testid="entries"]').waitFor({ state: "attached" });
  await new Promise((r) => setTimeout(r, 500));
  const before = await tabNow();
  await openChat(page, chatId, "The newest answer, number 5000.");
  await new Promise((r) => setTimeout(r, 500));
  const open = await tabNow();
  await page.close();
  const tabOver = (open.heap - before.heap) / MB;
  table([
    [
      "tab",
      "JS heap",
      "DOM nodes",
      `heap budget: empty + ${TAB_HEAP_BUDGET_MB} MB`,
      `nodes budget ${TAB_NODES_BUDGET}`,
    ],
    ["an empty conversation open", `${fmt(before.heap / MB, 1)} MB`, fmt(before.nodes), "", ""],
    [
      "the 5,000-entry conversation open",
      `${fmt(open.heap / MB, 1)} MB (+${fmt(tabOver, 1)})`,
      fmt(open.nodes),
      tabOver <= TAB_HEAP_BUDGET_MB ? "PASS" : "FAIL",
      open.nodes <= TAB_NODES_BUDGET ? "PASS" : "FAIL",
    ],
  ]);
}

// ---------------------------------------------------------------------------------------------

function ensureBuilt(): void {
  if (existsSync(join(root, "dist/index.html"))) {
    console.log(
      `[bench] the app from dist/ as built ${new Date(statSync(join(root, "dist/index.html")).mtimeMs).toISOString()} (npx vite build first after a change)`,
    );
    return;
  }
  console.log("[bench] dist/ is missing: building the app");
  const built = spawnSync(
    process.execPath,
    [join(root, "node_modules/vite/bin/vite.js"), "build", "--logLevel", "warn"],
    {
      cwd: root,
      stdio: "inherit",
    },
  );
  if (built.status !== 0) throw new Error("vite build failed");
}

async function main(): Promise<void> {
  const started = performance.now();
  ensureBuilt();
  const server = await serveStatic(join(root, "dist"));
  const b = await launchBrowser({ executablePath: findChromium() });
  try {
    console.log(`growth bench: Chromium ${await b.browser.version()}`);
    if (!ONLY || ONLY === "growth") await growth(b, server);
    if (!ONLY || ONLY === "memory") await memory(b, server);
  } finally {
    await b.close();
    await server.close();
  }
  console.log(
    `\ngrowth bench took ${fmt((performance.now() - started) / 1000, 1)} s (PASS/FAIL are reported, never an error)`,
  );
}

await main();
