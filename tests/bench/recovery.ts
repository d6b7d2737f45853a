/**
 * The browser bench's recovery (browser.bench.ts, part 2): a store holding BENCH_SEED terminal tasks,
 * BENCH_CONVERSATIONS idle conversations and one live ticker, opened again by the app, timed from the
 * page's navigation start (`performance.timeOrigin`) to the first tick the new engine commits
 * (stamped by the engine after COMMIT); beside it, in the same rounds, the machine's floor: a bare
 * page (tests/e2e/fixtures/recovery-floor.html, served on the app's origin) whose SharedWorker opens
 * the same store with the store layer alone (no engine) and commits one row.
 *
 * Clean rounds: an old engine or floor worker still holding the store would make the next open wait
 * for it (a page left by navigation stays in the back/forward cache, its SharedWorker alive, for up
 * to about a minute). So each timed page is a new tab, opened once the previous tab is closed and
 * the browser has no SharedWorker left (CDP `Target.getTargets`); how long that took is printed. The
 * timed app page then opens a store whose engine is gone, as a reload does once the old engine ended.
 *
 * Parts, recovery: the tab up to creating the engine's worker (tab), the engine's script up to its
 * first line, from that line the wasm compile and the store's Web Lock (both run at once), the
 * store's open once both are here, the harness's open, the first resumed tick. Floor: the page up to
 * creating its worker, its script, the wasm compile, the store's open, the one commit.
 * Figures only: a missed aim prints FAIL.
 *
 * BENCH_RECOVERY_PROFILE=1 also records a CPU profile of each app round's engine (its SharedWorker,
 * from before its first line: the browser waits for the profiler at the worker's start) to
 * test-results/profiles/recovery-engine-<round>.cpuprofile, and prints its busy time in the parts of
 * the engine's timeline (to the store opened, the harness open, to the first tick). The profiler's
 * own cost slows those rounds: read their shares, not their times. A build with `--minify false`
 * names the functions.
 *
 * The store kind (`BENCH_RECOVERY_KIND`, default `opfs-lent`, the kind a new store gets; `idb` for
 * the stores made before it): the app is opened with it forced, and the floor opens the same store the
 * same way (for opfs-lent, its page lends the SharedWorker the app's own lent store worker).
 */
import type { Page } from "playwright-core";
import { LENT_PARTS } from "../../worker/browser/platform.ts";
import type { EngineStats, EngineTimeline, TickerStatus } from "../../worker/protocol/index.ts";
import type { LentOpenParts } from "../../worker/store/lent/wire.ts";
import { Cdp, engine, type LaunchedBrowser, type StaticServer } from "../e2e/browser.ts";
import type { FloorKind, FloorResult } from "../e2e/fixtures/recovery-floor/protocol.ts";
import { type CpuProfile, saveProfile, selfTime } from "./cpu-profile.ts";
import type { BenchKit } from "./long-chat.ts";
import { machineLoad } from "./report.ts";

const env = (name: string, fallback: number): number => Number(process.env[name] ?? fallback);
const ROUNDS = env("BENCH_RECOVERY_ROUNDS", 5);
const SEED = env("BENCH_SEED", 10_000);
const SEED_CONVERSATIONS = env("BENCH_CONVERSATIONS", 1000);
const AIM_MS = 300;
const KIND: FloorKind = process.env.BENCH_RECOVERY_KIND === "idb" ? "idb" : "opfs-lent";
const PROFILE = process.env.BENCH_RECOVERY_PROFILE === "1";
/** How long an old SharedWorker may take to go away before the round gives up. */
const WORKER_GONE_TIMEOUT_MS = 120_000;

const RECOVERY_PARTS = [
  "tab",
  "engine script",
  "wasm compile*",
  "lock wait*",
  "store open",
  "harness open",
  "to first tick",
] as const;
const FLOOR_PARTS = ["page", "worker script", "wasm compile", "store open", "commit"] as const;

/**
 * Close `page` and wait until the browser has no SharedWorker left; resolves with a new page and the
 * wait in ms. Closed, not navigated away: a page left by navigation stays alive in the back/forward
 * cache (up to about a minute here), and so does its SharedWorker, which then still holds the store.
 */
async function freshPage(b: LaunchedBrowser, page: Page): Promise<{ page: Page; waitedMs: number }> {
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
  return { page: await b.newPage(), waitedMs: Date.now() - started };
}

/**
 * Profile the next SharedWorker the browser starts from before its first line (it waits for the
 * profiler: CDP auto-attach with waitForDebuggerOnStart; every other new target is let go at once).
 * The returned stop ends the profile, saves it, and prints its busy time in the parts of `timeline`.
 */
async function profileNextEngine(
  b: LaunchedBrowser,
  round: number,
): Promise<(t: EngineTimeline) => Promise<void>> {
  const cdp = await Cdp.connect(b.wsEndpoint);
  let engineSession: string | undefined;
  cdp.onEvent((method, params) => {
    if (method !== "Target.attachedToTarget") return;
    const { sessionId, targetInfo } = params as { sessionId: string; targetInfo: { type: string } };
    void (async () => {
      if (targetInfo.type === "shared_worker" && !engineSession) {
        engineSession = sessionId;
        await cdp.send("Profiler.enable", {}, sessionId);
        await cdp.send("Profiler.setSamplingInterval", { interval: 100 }, sessionId);
        await cdp.send("Profiler.start", {}, sessionId);
      }
      await cdp.send("Runtime.runIfWaitingForDebugger", {}, sessionId).catch(() => undefined);
    })();
  });
  await cdp.send("Target.setAutoAttach", { autoAttach: true, waitForDebuggerOnStart: true, flatten: true });
  return async (t) => {
    try {
      if (!engineSession) throw new Error("no SharedWorker started to profile");
      const { profile } = await cdp.send<{ profile: CpuProfile }>("Profiler.stop", {}, engineSession);
      saveProfile(`recovery-engine-${round}.cpuprofile`, profile);
      // The profile starts about when the worker does: its parts are taken from its start.
      const opened = (t.migratedAt ?? t.openedAt!) - t.startedAt;
      const parts: Array<[string, number, number]> = [
        ["first line to store opened", 0, opened],
        ["harness open", opened, t.readyAt! - t.startedAt],
        ["to the first tick", t.readyAt! - t.startedAt, t.firstTickAt! - t.startedAt],
      ];
      console.log(
        `  engine profile, round ${round} (test-results/profiles/recovery-engine-${round}.cpuprofile):`,
      );
      for (const [name, from, to] of parts) {
        const self = selfTime(profile, { within: { from, to }, startedAt: 0 });
        const busy = self.reduce((sum, [, ms]) => sum + ms, 0);
        const top = self.slice(0, 5).map(([fn, ms]) => `${fn} ${ms.toFixed(1)}`);
        console.log(
          `    ${name}: ${busy.toFixed(0)} ms busy of ${(to - from).toFixed(0)}; ${top.join(" | ")}`,
        );
      }
    } finally {
      cdp.close();
    }
  };
}

/**
 * One floor round: the bare page's worker opens `store` and commits one row; its parts (FLOOR_PARTS)
 * and the total. The app's service worker would answer this navigation with index.html: bypassed.
 */
async function floorRound(
  page: Page,
  server: StaticServer,
  store: string,
  kit: BenchKit,
): Promise<{ parts: number[]; lent: number[]; steps: number[] }> {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send("Network.enable");
  await cdp.send("Network.setBypassServiceWorker", { bypass: true });
  try {
    await page.goto(`${server.url}recovery-floor.html?${new URLSearchParams({ store, kind: KIND })}`);
    const r = await kit.until(
      "the floor's commit",
      () => page.evaluate(() => (globalThis as unknown as { floor?: FloorResult }).floor),
      (v) => v !== undefined,
    );
    if (!r || r.error) throw new Error(`the recovery floor failed: ${r?.error}`);
    const origin = await page.evaluate(() => performance.timeOrigin);
    return {
      parts: [
        r.createdAt - origin,
        r.scriptAt - r.createdAt,
        r.wasmAt - r.scriptAt,
        r.openedAt - r.wasmAt,
        r.committedAt - r.openedAt,
        r.committedAt - origin,
      ],
      lent: lentSteps(r.lent, origin, r.wasmAt),
      steps: await pageSteps(page, r.createdAt),
    };
  } finally {
    await cdp.send("Network.setBypassServiceWorker", { bypass: false }).catch(() => undefined);
    await cdp.detach().catch(() => undefined);
  }
}

const PAGE_STEPS = [
  "its service worker started",
  "the document fetched",
  "the first script fetched",
  "the document parsed",
  "its script asked for the worker",
  "the worker created (its time origin)",
] as const;

/**
 * The page's own steps up to creating its worker (PAGE_STEPS), in ms from its navigation start, by
 * Navigation and Resource Timing: the service worker's start (NaN: none answered), the document's
 * response end, the first script's response end, the parse's end (domInteractive), when its script
 * asked for the worker (the mark src/lib/engine-start.ts WORKER_ASKED_MARK), and `createdAt`.
 */
async function pageSteps(page: Page, createdAt: number): Promise<number[]> {
  const [origin, steps] = await page.evaluate(() => {
    const nav = performance.getEntriesByType("navigation")[0] as PerformanceNavigationTiming | undefined;
    const scripts = performance
      .getEntriesByType("resource")
      .filter((r) => (r as PerformanceResourceTiming).initiatorType === "script")
      .map((r) => (r as PerformanceResourceTiming).responseEnd);
    return [
      performance.timeOrigin,
      [
        nav && nav.workerStart > 0 ? nav.workerStart : Number.NaN,
        nav?.responseEnd ?? Number.NaN,
        scripts.length > 0 ? Math.min(...scripts) : Number.NaN,
        nav?.domInteractive ?? Number.NaN,
        performance.getEntriesByName("durable-agent:worker-asked")[0]?.startTime ?? Number.NaN,
      ],
    ] as const;
  });
  return [...steps, createdAt - origin];
}

/**
 * What a person sees, in ms from the navigation start: the first contentful paint (index.html's
 * static shell), the app's mount (the mark src/main.ts sets once the engine has left "starting"),
 * and the engine's phase at the mount.
 */
async function tabPaints(page: Page): Promise<{ paint: number; mounted: number; phase: string }> {
  return page.evaluate(() => {
    const mount = performance.getEntriesByName("durable-agent:app-mounted")[0] as PerformanceMark | undefined;
    return {
      paint: performance.getEntriesByName("first-contentful-paint")[0]?.startTime ?? Number.NaN,
      mounted: mount?.startTime ?? Number.NaN,
      phase: String((mount?.detail as { phase?: unknown } | undefined)?.phase ?? "-"),
    };
  });
}

/** The lent worker's steps (LentOpenParts), and when its port reached the SharedWorker. */
const LENT_STEPS = [
  "lent worker's first line",
  "its wasm compile began",
  "its wasm compiled",
  "its port at the SharedWorker",
  "the open asked there",
  "its wasm instance made",
  "its VFS made (OPFS handles)",
  "SQLite opened the file",
  "the database open there",
] as const;

/** The lent worker's steps (LENT_STEPS) in ms from `origin` (NaN: not stamped; none for the idb kind). */
function lentSteps(parts: LentOpenParts | undefined, origin: number, portAt: number | undefined): number[] {
  if (!parts) return [];
  return [
    parts.scriptAt,
    parts.compileAt,
    parts.wasmAt,
    portAt,
    parts.askedAt,
    parts.instanceAt,
    parts.vfsAt,
    parts.fileAt,
    parts.openedAt,
  ].map((at) => (at === undefined ? Number.NaN : at - origin));
}

const STORE_OPEN_PARTS = [
  "kind chosen",
  "a lender at hand",
  "lent port arrived",
  "lent worker opened",
  "sequence read",
] as const;

/**
 * The store open's parts (STORE_OPEN_PARTS), each from the end of the one before (from the later of
 * the lock and the compile); a part the open did not stamp (a forced kind, the idb kind) is 0.
 */
function storeOpenParts(t: EngineTimeline): number[] {
  const from = Math.max(t.lockedAt!, t.wasmAt ?? t.lockedAt!);
  const migratedAt = t.migratedAt ?? t.openedAt!;
  const stamps = [t.kindAt, t.lenderAt, t.lentPortAt, t.lentOpenAt, migratedAt];
  let last = from;
  return stamps.map((at) => {
    if (at === undefined) return 0;
    const part = at - last;
    last = at;
    return part;
  });
}

/** The recovery parts (RECOVERY_PARTS) of one engine start, and the total, from its timeline. */
function recoveryParts(t: EngineTimeline, origin: number): number[] {
  const lockedAt = t.lockedAt!;
  const wasmAt = t.wasmAt ?? lockedAt;
  const migratedAt = t.migratedAt ?? t.openedAt!;
  return [
    t.createdAt! - origin,
    t.startedAt - t.createdAt!,
    wasmAt - t.startedAt,
    lockedAt - t.startedAt,
    migratedAt - Math.max(lockedAt, wasmAt),
    t.readyAt! - migratedAt,
    t.firstTickAt! - t.readyAt!,
    t.firstTickAt! - origin,
  ];
}

export async function recovery(b: LaunchedBrowser, server: StaticServer, kit: BenchKit): Promise<void> {
  const { fmt, median, table, until, waitReady } = kit;
  console.log(
    `\nrecovery (${KIND} store): ${SEED} terminal tasks, ${SEED_CONVERSATIONS} idle conversations and one live ticker; ${ROUNDS} rounds of floor then app, each page started once no SharedWorker is left`,
  );
  let page = await b.newPage();
  const store = kit.uniqueStore("recovery");
  const url = kit.appUrl(server, { store, storeKind: KIND });
  await page.goto(url);
  await waitReady(page);
  const seeded = await engine<{ tasks: number; conversations: number; ms: number }>(page, "debug.seed", {
    tasks: SEED,
    conversations: SEED_CONVERSATIONS,
  });
  console.log(
    `  seeded ${seeded.tasks} terminal tasks and ${seeded.conversations} conversations in ${fmt(seeded.ms / 1000, 1)} s`,
  );
  const conversationId = await engine<number>(page, "conversations.create", "recovery ticker");
  const taskId = await engine<number>(page, "debug.startTicker", {
    phases: 100_000,
    delayMs: 0,
    conversationId,
  });
  await until(
    "the ticker to run",
    () => engine<TickerStatus>(page, "debug.ticker", taskId),
    (t) => t.trail.length >= 3,
  );

  const recoveries: number[][] = [];
  const floors: number[][] = [];
  const rows: string[][] = [["round", ...RECOVERY_PARTS, "first resumed tick", `aim ${AIM_MS} ms`]];
  const floorRows: string[][] = [["round", ...FLOOR_PARTS, "floor: first commit"]];
  const waitRows: string[][] = [
    ["round", "old engine gone after", "floor worker gone after", "load (1, 5, 15 min)"],
  ];
  const codeRows: string[][] = [
    ["round", "engine API loaded", "pi-ai loaded", "harness modules", "store opened", "harness open"],
  ];
  const openRows: string[][] = [["round", ...STORE_OPEN_PARTS, "store open"]];
  const opens: number[][] = [];
  const lentFloor: number[][] = [];
  const lentApp: number[][] = [];
  const pageFloor: number[][] = [];
  const pageApp: number[][] = [];
  const paintRows: string[][] = [
    ["round", "first paint (shell)", "app mounted", "engine then", "first resumed tick"],
  ];
  let ticks = 0;
  for (let round = 1; round <= ROUNDS; round++) {
    const leftApp = await freshPage(b, page);
    page = leftApp.page;
    const { parts: floor, lent, steps } = await floorRound(page, server, store, kit);
    floors.push(floor);
    pageFloor.push(steps);
    if (lent.length > 0) lentFloor.push(lent);
    floorRows.push([String(round), ...floor.map((ms) => `${fmt(ms)} ms`)]);
    const leftFloor = await freshPage(b, page);
    page = leftFloor.page;
    const profiled = PROFILE ? await profileNextEngine(b, round) : undefined;
    await page.goto(url);
    await waitReady(page);
    const origin = await page.evaluate(() => performance.timeOrigin);
    const stats = await until(
      "the new engine's first tick",
      () => engine<EngineStats>(page, "debug.stats"),
      (s) => s.timeline.firstTickAt !== undefined,
    );
    await profiled?.(stats.timeline);
    pageApp.push(await pageSteps(page, stats.timeline.createdAt!));
    const parts = recoveryParts(stats.timeline, origin);
    const seen = await tabPaints(page);
    paintRows.push([
      String(round),
      `${fmt(seen.paint)} ms`,
      `${fmt(seen.mounted)} ms`,
      seen.phase,
      `${fmt(parts.at(-1)!)} ms`,
    ]);
    recoveries.push(parts);
    const total = parts.at(-1)!;
    rows.push([String(round), ...parts.map((ms) => `${fmt(ms)} ms`), total < AIM_MS ? "PASS" : "FAIL"]);
    waitRows.push([
      String(round),
      `${fmt(leftApp.waitedMs)} ms`,
      `${fmt(leftFloor.waitedMs)} ms`,
      machineLoad(),
    ]);
    const { startedAt, apiAt, piAiAt, modulesAt, migratedAt, readyAt } = stats.timeline;
    const since = (at: number | undefined) => (at === undefined ? "-" : `+${fmt(at - startedAt)} ms`);
    codeRows.push([
      String(round),
      since(apiAt),
      since(piAiAt),
      since(modulesAt),
      since(migratedAt),
      since(readyAt),
    ]);
    const t = stats.timeline;
    const appLent = lentSteps(
      t.lentScriptAt === undefined
        ? undefined
        : {
            scriptAt: t.lentScriptAt,
            ...Object.fromEntries(
              Object.entries(LENT_PARTS)
                .map(([step, part]) => [step, t[part]])
                .filter(([, at]) => at !== undefined),
            ),
          },
      origin,
      t.lentPortAt,
    );
    if (appLent.length > 0) lentApp.push(appLent);
    const open = storeOpenParts(stats.timeline);
    opens.push(open);
    openRows.push([String(round), ...open.map((ms) => `${fmt(ms)} ms`), `${fmt(parts[4]!)} ms`]);
    // Nothing lost, nothing doubled: the trail goes on from where the last engine left it.
    const status = await until(
      "the ticker to run again",
      () => engine<TickerStatus>(page, "debug.ticker", taskId),
      (t) => t.trail.length > ticks + 1,
    );
    if (!status.trail.every((n, i) => n === i + 1))
      throw new Error("the ticker's trail is not exactly [1..N]");
    ticks = status.trail.length;
  }
  const medians = (runs: number[][]) => runs[0]!.map((_, i) => median(runs.map((r) => r[i]!)));
  const m = medians(recoveries);
  const f = medians(floors);
  rows.push(["median", ...m.map((ms) => `${fmt(ms)} ms`), m.at(-1)! < AIM_MS ? "PASS" : "FAIL"]);
  floorRows.push(["median", ...f.map((ms) => `${fmt(ms)} ms`)]);
  table(rows);
  console.log(
    "(from the new page's navigation start; * from the engine's first line, at the same time: store open starts once both are done)",
  );
  console.log(
    "\nrecovery floor: a bare page in a new tab, its SharedWorker opens the same store (no engine) and commits one row",
  );
  table(floorRows);
  console.log("\nside by side (medians)");
  const ms = (n: number | undefined) => (n === undefined ? "-" : `${fmt(n)} ms`);
  table([
    ["part", "floor", "recovery"],
    ["page, up to creating the worker", ms(f[0]), ms(m[0])],
    ["worker script, up to its first line", ms(f[1]), ms(m[1])],
    [
      KIND === "idb" ? "wasm compile (from the first line)" : "wasm compile (floor: the lent port's arrival)",
      ms(f[2]),
      ms(m[2]),
    ],
    ["store lock (from the first line)", "-", ms(m[3])],
    ["store open", ms(f[3]), ms(m[4])],
    ["harness open", "-", ms(m[5])],
    ["first commit (floor) / first resumed tick", ms(f[4]), ms(m[6])],
    ["total", ms(f[5]), ms(m[7])],
    ["recovery / floor", "", `${fmt(m[7]! / f[5]!, 2)}x`],
  ]);
  console.log("\nthe engine's code beside its store (from the engine's first line)");
  table(codeRows);
  const o = medians(opens);
  openRows.push(["median", ...o.map((ms) => `${fmt(ms)} ms`), ms(m[4])]);
  console.log(
    "\nthe app's store open in parts (each from the end of the one before, the first from the later of the lock and the compile; 0: not stamped)",
  );
  table(openRows);
  // A step some round did not stamp (a spare that compiled inside the open) counts in none.
  const stamped = (runs: number[][]) =>
    runs[0]!.map((_, i) => {
      const xs = runs.map((r) => r[i]!).filter((x) => !Number.isNaN(x));
      return xs.length === 0 ? undefined : median(xs);
    });
  const pf = stamped(pageFloor);
  const pa = stamped(pageApp);
  console.log(
    "\nthe page up to creating its worker, from its navigation start (medians; Navigation and Resource Timing; -: none)",
  );
  table([["step", "floor", "recovery"], ...PAGE_STEPS.map((step, i) => [step, ms(pf[i]), ms(pa[i])])]);
  console.log(
    '\nwhat the tab shows, from its navigation start (the app mounts once the engine has left "starting", or after a second)',
  );
  table(paintRows);
  if (lentFloor.length > 0 && lentApp.length > 0) {
    const lf = stamped(lentFloor);
    const la = stamped(lentApp);
    const between = (a: number | undefined, b: number | undefined) =>
      a === undefined || b === undefined ? undefined : b - a;
    console.log(
      "\nthe lent store worker's steps, from the page's navigation start (medians; its own clock; the port: when the SharedWorker had it)",
    );
    table([
      ["step", "floor", "recovery"],
      ...LENT_STEPS.map((step, i) => [step, ms(lf[i]), ms(la[i])]),
      ["open asked to database open", ms(between(lf[3], lf[7])), ms(between(la[3], la[7]))],
    ]);
  }
  console.log(
    "\nbefore each page: how long the previous page's SharedWorker lived on, and the machine's load",
  );
  table(waitRows);
  console.log(`  ticker trail after ${ROUNDS} rounds: ${ticks} ticks, exactly [1..N]`);
  await page.close();
}
