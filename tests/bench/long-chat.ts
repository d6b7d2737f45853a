/**
 * The browser bench's long chat (browser.bench.ts, part 5): a conversation of BENCH_CHAT_ENTRIES
 * committed messages (`debug.seedChat`) opened from another conversation, then scrolled to the top.
 *
 * Open: from setting the tab's hash to its newest answer inside the scroller's visible box (polled
 * every frame), median of CHAT_OPEN_ROUNDS, and where the time went, from performance marks on one
 * clock (`timeOrigin + startTime`) in the tab (lib/conversation.svelte.ts: watch asked, first frame
 * received, applied) and the engine (app/engine-host.ts: watch called, view read): "route" hash -> watch
 * asked; "engine" asked -> view read (the call's hop and the read); "transfer" view read -> frame
 * received (structured clone out and in, the message's wait); "apply" the frame applied; "render"
 * applied -> on screen (Svelte, markdown, layout, the window settling).
 * The first frame's entries (a page: the rest load as the reader scrolls up) are printed with it.
 * Scroll: from the bottom to the top 600 px a frame, the long tasks (PerformanceObserver "longtask",
 * > 50 ms; the aim is none) and the longest frame, and one row per long task: when it started, and
 * where it fell among the older pages' applies (the tab marks each "page:applied").
 * BENCH_CHAT_PROFILE=1 also records CPU profiles of the tab and the engine over one open and the
 * scroll, written to test-results/profiles/*.cpuprofile (DevTools opens them), with their top
 * functions by self time printed, and each long task's top functions (cpu-profile.ts).
 */
import type { CDPSession, Page } from "playwright-core";
import {
  Cdp,
  engine,
  evaluateInSharedWorker,
  type LaunchedBrowser,
  type StaticServer,
  waitForSharedWorker,
} from "../e2e/browser.ts";
import { type CpuProfile, printTop, saveProfile, selfTime } from "./cpu-profile.ts";

const CHAT_ENTRIES = Number(process.env.BENCH_CHAT_ENTRIES ?? 5000);
const PROFILE = process.env.BENCH_CHAT_PROFILE === "1";
const CHAT_OPEN_AIM_MS = 300;
const CHAT_OPEN_ROUNDS = 5;
const PARTS = ["route", "engine", "transfer", "apply", "render"] as const;

/** The browser bench's shared helpers. */
export interface BenchKit {
  fmt(n: number, digits?: number): string;
  median(values: number[]): number;
  table(rows: string[][]): void;
  until<T>(what: string, probe: () => Promise<T>, ok: (v: T) => boolean): Promise<T>;
  waitReady(page: Page): Promise<void>;
  appUrl(server: StaticServer, params: Record<string, string>): string;
  uniqueStore(label: string): string;
}

/** The newest time of each mark named in `names`, on the shared clock (`timeOrigin + startTime`). */
const marksExpression = (names: readonly string[]) => `(() => {
  const out = {};
  for (const name of ${JSON.stringify(names)}) {
    const m = performance.getEntriesByName(name, "mark").at(-1);
    if (m) out[name] = performance.timeOrigin + m.startTime;
  }
  return out;
})()`;

/** One CPU profiler: the tab's (a Playwright CDP session) or the engine's (its SharedWorker target). */
interface Profiler {
  start(): Promise<void>;
  /** Stop, write the profile to `file` and print its top functions; the profile. */
  stop(file: string): Promise<CpuProfile>;
  close(): Promise<void>;
}

async function tabProfiler(page: Page): Promise<Profiler> {
  const session: CDPSession = await page.context().newCDPSession(page);
  await session.send("Profiler.enable");
  await session.send("Profiler.setSamplingInterval", { interval: 200 });
  return {
    start: async () => void (await session.send("Profiler.start")),
    stop: async (file) => save(file, (await session.send("Profiler.stop")).profile as CpuProfile),
    close: () => session.detach(),
  };
}

async function engineProfiler(b: LaunchedBrowser): Promise<Profiler> {
  const target = await waitForSharedWorker(b);
  const cdp = await Cdp.connect(b.wsEndpoint);
  const { sessionId } = await cdp.send<{ sessionId: string }>("Target.attachToTarget", {
    targetId: target.targetId,
    flatten: true,
  });
  await cdp.send("Profiler.enable", {}, sessionId);
  await cdp.send("Profiler.setSamplingInterval", { interval: 200 }, sessionId);
  return {
    start: async () => void (await cdp.send("Profiler.start", {}, sessionId)),
    stop: async (file) =>
      save(file, (await cdp.send<{ profile: CpuProfile }>("Profiler.stop", {}, sessionId)).profile),
    close: async () => cdp.close(),
  };
}

function save(file: string, profile: CpuProfile): CpuProfile {
  saveProfile(file, profile);
  printTop(file, profile);
  return profile;
}

export async function longChat(b: LaunchedBrowser, server: StaticServer, kit: BenchKit): Promise<void> {
  const { fmt, median, table, until } = kit;
  console.log(
    `\nlong chat: ${CHAT_ENTRIES} committed messages, opened ${CHAT_OPEN_ROUNDS} times, then scrolled to the top`,
  );
  const page = await b.newPage();
  await page.setViewportSize({ width: 1280, height: 800 });
  await page.goto(kit.appUrl(server, { store: kit.uniqueStore("chat") }));
  await kit.waitReady(page);
  const id = await engine<number>(page, "debug.seedChat", { entries: CHAT_ENTRIES });
  const newest = `The newest answer, number ${CHAT_ENTRIES}.`;
  // A string, not a function: tsx would wrap named closures in a helper the page lacks.
  const open = `(() => new Promise((done) => {
    const started = performance.now();
    location.hash = "#/c/${id}";
    const look = () => {
      const scroller = document.querySelector(".scroller");
      const entry = [...document.querySelectorAll('[data-testid="entries"] > [data-kind="pi.assistant"]')]
        .findLast((e) => e.textContent.includes(${JSON.stringify(newest)}));
      if (scroller && entry) {
        const s = scroller.getBoundingClientRect();
        const r = entry.getBoundingClientRect();
        if (r.bottom > s.top && r.top < s.bottom)
          return done({ started: performance.timeOrigin + started, shown: performance.timeOrigin + performance.now(), nodes: document.querySelector('[data-testid="entries"]').querySelectorAll("*").length });
      }
      requestAnimationFrame(look);
    };
    requestAnimationFrame(look);
  }))()`;
  const tabMarks = ["watch:asked", "watch:received", "watch:applied"];
  const engineMarks = ["watch:called", "watch:read"];
  const profilers = PROFILE ? [await tabProfiler(page), await engineProfiler(b)] : [];
  const opens: number[] = [];
  const splits: number[][] = [];
  let nodes = 0;
  let firstFrame = "";
  for (let round = 1; round <= CHAT_OPEN_ROUNDS; round++) {
    await page.evaluate(() => {
      location.hash = "#/c/1";
    });
    await page.locator('[data-testid="entries"]').waitFor({ state: "attached" });
    await until(
      "conversation 1 shown",
      () => page.getByText(newest).count(),
      (n) => n === 0,
    );
    const profiled = round === CHAT_OPEN_ROUNDS;
    if (profiled) for (const p of profilers) await p.start();
    const result = (await page.evaluate(open)) as { started: number; shown: number; nodes: number };
    if (profiled)
      for (const [i, p] of profilers.entries())
        await p.stop(`long-chat-open-${i === 0 ? "tab" : "engine"}.cpuprofile`);
    const tab = (await page.evaluate(marksExpression(tabMarks))) as Record<string, number>;
    const eng = await evaluateInSharedWorker<Record<string, number>>(b, marksExpression(engineMarks));
    opens.push(result.shown - result.started);
    const detail = (await page.evaluate(
      `performance.getEntriesByName("watch:applied", "mark").at(-1)?.detail`,
    )) as { entries: number; older: number } | undefined;
    firstFrame = detail ? `${detail.entries} (+${detail.older} later)` : "?";
    nodes = result.nodes;
    const asked = tab["watch:asked"] ?? Number.NaN;
    const read = eng["watch:read"] ?? Number.NaN;
    const received = tab["watch:received"] ?? Number.NaN;
    const applied = tab["watch:applied"] ?? Number.NaN;
    splits.push([
      asked - result.started,
      read - asked,
      received - read,
      applied - received,
      result.shown - applied,
    ]);
  }
  // The renderer's counters (layouts, style recalcs, their time, script time) around the scroll.
  const metrics = await page.context().newCDPSession(page);
  await metrics.send("Performance.enable");
  const counters = async () =>
    new Map((await metrics.send("Performance.getMetrics")).metrics.map((m) => [m.name, m.value]));
  const countersBefore = await counters();
  // The tab's clock when its profiler started (long tasks are attributed on it), then the scroll.
  let profiledFrom = 0;
  if (PROFILE) {
    for (const p of profilers) await p.start();
    profiledFrom = (await page.evaluate("performance.now()")) as number;
  }
  const scroll = (await page.evaluate(`(() => new Promise((done) => {
    const long = [];
    const observer = new PerformanceObserver((list) => {
      for (const e of list.getEntries()) long.push({ start: e.startTime, ms: e.duration });
    });
    observer.observe({ type: "longtask" });
    const scroller = document.querySelector(".scroller");
    let last = performance.now();
    let worst = 0;
    let frames = 0;
    const started = last;
    const step = () => {
      const now = performance.now();
      worst = Math.max(worst, now - last);
      last = now;
      frames++;
      if (scroller.scrollTop <= 0 || frames > 20000) {
        setTimeout(() => {
          observer.disconnect();
          const pages = performance.getEntriesByName("page:applied", "mark")
            .filter((m) => m.startTime >= started)
            .map((m) => ({ at: m.startTime, entries: m.detail?.entries ?? 0 }));
          done({ long, pages, worst, frames, started, ms: now - started, found: document.body.textContent.includes("Question 1: what comes next?") });
        }, 100);
        return;
      }
      scroller.scrollTop = Math.max(0, scroller.scrollTop - 600);
      requestAnimationFrame(step);
    };
    requestAnimationFrame(step);
  }))()`)) as ScrollResult;
  const countersAfter = await counters();
  await metrics.detach();
  const spent = (name: string) => (countersAfter.get(name) ?? 0) - (countersBefore.get(name) ?? 0);
  let tabProfile: CpuProfile | undefined;
  if (PROFILE) {
    for (const [i, p] of profilers.entries()) {
      const profile = await p.stop(`long-chat-scroll-${i === 0 ? "tab" : "engine"}.cpuprofile`);
      if (i === 0) tabProfile = profile;
    }
    for (const p of profilers) await p.close();
  }
  await page.close();
  const m = median(opens);
  table([
    [
      "open to newest on screen",
      "median",
      "max",
      `aim ${CHAT_OPEN_AIM_MS} ms`,
      "DOM nodes in the list",
      "first frame entries",
    ],
    [
      opens.map((ms) => fmt(ms)).join(", "),
      `${fmt(m)} ms`,
      `${fmt(Math.max(...opens))} ms`,
      m < CHAT_OPEN_AIM_MS ? "PASS" : "FAIL",
      String(nodes),
      firstFrame,
    ],
  ]);
  table([
    ["open, where the time went", ...PARTS],
    ...splits.map((s, i) => [`round ${i + 1}`, ...s.map((ms) => `${fmt(ms)} ms`)]),
    ["median", ...PARTS.map((_, k) => `${fmt(median(splits.map((s) => s[k]!)))} ms`)],
  ]);
  table([
    [
      "scroll to the top",
      "frames",
      "took",
      "older pages",
      "long tasks",
      "longest task",
      "longest frame",
      "aim: no long task",
      "reached the first",
    ],
    [
      "600 px a frame",
      String(scroll.frames),
      `${fmt(scroll.ms)} ms`,
      String(scroll.pages.length),
      String(scroll.long.length),
      scroll.long.length ? `${fmt(Math.max(...scroll.long.map((t) => t.ms)))} ms` : "none",
      `${fmt(scroll.worst, 1)} ms`,
      scroll.long.length === 0 ? "PASS" : "FAIL",
      scroll.found ? "yes" : "NO",
    ],
  ]);
  const perFrame = (n: number, digits = 1) => fmt(n / Math.max(1, scroll.frames), digits);
  table([
    ["scroll, the renderer's work", "layouts", "style recalcs", "layout", "style", "script", "tasks"],
    [
      "per frame",
      perFrame(spent("LayoutCount"), 2),
      perFrame(spent("RecalcStyleCount"), 2),
      `${perFrame(spent("LayoutDuration") * 1000)} ms`,
      `${perFrame(spent("RecalcStyleDuration") * 1000)} ms`,
      `${perFrame(spent("ScriptDuration") * 1000)} ms`,
      `${perFrame(spent("TaskDuration") * 1000)} ms`,
    ],
  ]);
  printLongTasks(scroll, kit, tabProfile && { profile: tabProfile, startedAt: profiledFrom });
}

/** What the scroll reports: long tasks and page applies on the tab's clock (`performance.now()`). */
interface ScrollResult {
  long: Array<{ start: number; ms: number }>;
  pages: Array<{ at: number; entries: number }>;
  worst: number;
  frames: number;
  started: number;
  ms: number;
  found: boolean;
}

/**
 * One row per long task: when (ms into the scroll), how long, where it fell among the older pages'
 * applies (during one, or how long after the last), and with a tab profile its top functions.
 */
function printLongTasks(
  scroll: ScrollResult,
  kit: BenchKit,
  profiled: { profile: CpuProfile; startedAt: number } | undefined,
): void {
  if (scroll.long.length === 0) return;
  const { fmt, table } = kit;
  const pageAt = (t: { start: number; ms: number }): string => {
    const k = scroll.pages.findIndex((p) => p.at >= t.start && p.at <= t.start + t.ms);
    if (k >= 0) return `applying page ${k + 1} (${scroll.pages[k]!.entries} entries)`;
    const before = scroll.pages.filter((p) => p.at < t.start);
    if (before.length === 0) return "before any page";
    return `${fmt(t.start - before.at(-1)!.at)} ms after page ${before.length}`;
  };
  const top = (t: { start: number; ms: number }): string =>
    profiled
      ? selfTime(profiled.profile, {
          within: { from: t.start, to: t.start + t.ms },
          startedAt: profiled.startedAt,
        })
          .slice(0, 3)
          .map(([name, ms]) => `${name} ${fmt(ms)}`)
          .join(", ")
      : "(BENCH_CHAT_PROFILE=1)";
  table([
    ["long task", "at", "took", "older pages", "top self time (ms)"],
    ...scroll.long.map((t, i) => [
      String(i + 1),
      `${fmt(t.start - scroll.started)} ms`,
      `${fmt(t.ms)} ms`,
      pageAt(t),
      top(t),
    ]),
  ]);
}
