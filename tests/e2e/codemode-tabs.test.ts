/**
 * Code mode in the app's default engine, the SharedWorker, which cannot start workers in Chromium:
 * each tab offers it script workers (a dedicated Worker the tab starts, handed over as a MessagePort),
 * so a script never runs on the engine's thread while a tab is open.
 * 1. The heavy-builtin runaway (`"x".repeat(1e5)` in a loop, which holds a thread ~15 s between two
 *    interrupt polls) is stopped with `CpuSliceExceeded` while a ticker in another conversation keeps
 *    committing: its longest gap between two commits during the runaway stays far below the
 *    runaway's own length (the figure is printed).
 * 2. Two tabs; the tab hosting a running script is closed mid-script: the call completes once, in
 *    the other tab's worker, with the same result (the rerun got its journaled results back).
 */
import type { Page } from "playwright-core";
import { expect, test } from "vitest";
import type { EntryRecord, ScriptProbe, ScriptWorkerStats } from "../../worker/protocol/index.ts";
import { engine } from "./browser.ts";
import { appSuite, appUrl, lastAnswer, say, settled, uniqueStore, until } from "./page.ts";

const app = appSuite({ logTail: 150 });

const scriptWorkers = (page: Page) => engine<ScriptWorkerStats>(page, "debug.scriptWorkers");
const tabIdOf = (page: Page) =>
  page.evaluate(() => (globalThis as unknown as { __engine: { tabId: string } }).__engine.tabId);

/** The ticker's commits (wall-clock ms, set in each tick's commit) in conversation `conversationId`. */
async function tickTimes(page: Page, conversationId: number): Promise<number[]> {
  const entries = await engine<EntryRecord[]>(page, "watches.entries", conversationId);
  return entries.filter((e) => e.kind === "test.tick").map((e) => e.timestamp ?? 0);
}

test("a heavy-builtin runaway runs in a tab's worker: the engine keeps committing another conversation", async () => {
  const page = await app.open({ label: "runaway" });
  await until(
    "the tab offers script workers",
    () => scriptWorkers(page),
    (s) => s.tabs.length === 1,
  );
  // A second conversation of its own for the ticker: one commit per tick, 50 ms apart.
  const conversationId = await engine<number>(page, "conversations.create");
  await engine<number>(page, "debug.startTicker", { phases: 2000, delayMs: 50, conversationId });
  await until(
    "the ticker committing",
    () => tickTimes(page, conversationId),
    (t) => t.length >= 5,
  );

  const from = Date.now();
  const probe = await engine<ScriptProbe>(page, "debug.runScript", {
    code: 'let n = 0; for (;;) n += "x".repeat(1e5).length;',
  });
  const to = Date.now();
  expect(probe.outcome).toBe("CpuSliceExceeded");
  const during = (await tickTimes(page, conversationId)).filter((t) => t >= from && t <= to);
  const points = [from, ...during, to];
  const longestGap = Math.max(...points.slice(1).map((t, i) => t - (points[i] ?? t)));
  console.log(
    `runaway in a tab's worker: ${Math.round(probe.ms)} ms to CpuSliceExceeded, ${during.length} ticks committed meanwhile, ` +
      `longest gap between commits ${longestGap} ms, engine thread's longest stall ${Math.round(probe.maxStallMs)} ms`,
  );
  expect((await scriptWorkers(page)).started).toBeGreaterThanOrEqual(1);
  // The runaway lasts its slice plus the watchdog's grace (over a second); the ticker kept going.
  expect(during.length).toBeGreaterThanOrEqual(3);
  // In the engine's thread the same loop stalls it for ~15 s; a generous bound for a loaded machine.
  expect(longestGap).toBeLessThan(3_000);
  expect(probe.maxStallMs).toBeLessThan(3_000);
}, 120_000);

test("the tab hosting a running script closes: the call completes once in the other tab's worker", async () => {
  const url = appUrl(app.server.url, { store: uniqueStore("codemode-tabs") });
  const first = await app.open({ label: "tab-1", url });
  // Two notes, so the slow script (a two-second sleep per file) runs about four seconds.
  await say(first, "write a note");
  await settled(first, 3);
  await say(first, "write a note");
  await settled(first, 6);
  const second = await app.open({ label: "tab-2", url });
  await until(
    "both tabs offer script workers",
    () => scriptWorkers(first),
    (s) => s.tabs.length === 2,
  );
  const pages = new Map([
    [await tabIdOf(first), first],
    [await tabIdOf(second), second],
  ]);

  await say(first, "sum the sizes of the files slowly");
  const busy = await until(
    "a tab's worker running the script",
    () => scriptWorkers(first),
    (s) => s.tabs.some((t) => t.busy > 0),
  );
  const hosting = busy.tabs.find((t) => t.busy > 0)!.tabId;
  const closing = pages.get(hosting)!;
  const staying = closing === first ? second : first;
  await closing.close();

  const last = await until(
    "the script's answer in the staying tab",
    async () => (await lastAnswer(staying).textContent()) ?? "",
    (text) => text.includes("My script ran"),
    90_000,
  );
  expect(last).toMatch(/"files":2,"totalBytes":[1-9]\d*/);
  const shown = (await staying.locator('[data-testid="entries"]').textContent()) ?? "";
  expect(shown).not.toContain("interrupted");
  expect(shown).not.toContain("replay diverged");
  expect(shown).not.toContain("Exceeded");
  // One codemode call, one result, and its output (the per-file lines) streamed once.
  const results = (await engine<EntryRecord[]>(staying, "watches.entries", 1)).filter(
    (e) => e.kind === "pi.tool-result" && JSON.stringify(e.model).includes('\\"files\\":2'),
  );
  expect(results.length).toBe(1);
  const text = JSON.stringify(results[0]?.model);
  expect(text.split("notes/note-1.md:").length - 1).toBe(1);
  const after = await scriptWorkers(staying);
  console.log(`tab closed mid-script: ${JSON.stringify(after)}`);
  expect(after.tabs.map((t) => t.tabId)).toEqual([await tabIdOf(staying)]);
  expect(after.lost.lock + after.lost.close).toBeGreaterThanOrEqual(1);
  expect(after.lost.start + after.lost.ping).toBe(0);
  // The rerun got a worker of the staying tab (the engine's thread only when no tab is left).
  expect(after.tabs[0]!.workers).toBeGreaterThanOrEqual(1);
}, 240_000);
