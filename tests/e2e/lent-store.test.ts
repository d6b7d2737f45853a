/**
 * The `opfs-lent` store kind in Chromium: the SharedWorker engine's store is the opfs store in a
 * dedicated worker a tab lends it (worker/browser/store-lenders.ts, worker/store/lent/). Two tabs;
 * a ticker commits one entry per tick while the user chats; the lending tab (the older one) closes
 * mid-run. The store moves to the other tab's worker: the pause is measured and printed, every tick
 * is committed exactly once and in order (none acknowledged before the close is lost, none stored
 * twice), and each message gets exactly one answer.
 */
import type { Page } from "playwright-core";
import { expect, test } from "vitest";
import type { EngineStats, TickerStatus } from "../../worker/protocol/index.ts";
import { engine } from "./browser.ts";
import { answersOnPage, appSuite, appUrl, entriesOf, say, settled, uniqueStore, until } from "./page.ts";

const app = appSuite({ logTail: 150 });

const stats = (page: Page) => engine<EngineStats>(page, "debug.stats");
const tabIdOf = (page: Page) =>
  page.evaluate(() => (globalThis as unknown as { __engine: { tabId: string } }).__engine.tabId);

test("the lending tab closes mid-run: the store moves to the other tab's worker, nothing acknowledged is lost", async () => {
  const url = appUrl(app.server.url, { store: uniqueStore("lent"), storeKind: "opfs-lent" });
  const first = await app.open({ label: "lender", url });
  const second = await app.open({ label: "stays", url });
  const [firstId, secondId] = [await tabIdOf(first), await tabIdOf(second)];
  const before = await until(
    "both tabs can lend, the first lends",
    () => stats(second),
    (s) => s.lentStore?.lenders === 2 && s.lentStore.lending.some((l) => l.tabId === firstId),
  );
  expect(before.lentStore?.handovers).toEqual([]);
  // The store opened on the worker the first tab's first script lent with its hello (src/lib/
  // engine-start.ts), not on one the engine asked the tab for once the app had loaded.
  expect(before.lentStore?.lending).toEqual([{ store: expect.any(String), tabId: firstId, spare: true }]);

  const PHASES = 300;
  const conversationId = await engine<number>(second, "conversations.create");
  const taskId = await engine<number>(second, "debug.startTicker", {
    phases: PHASES,
    delayMs: 10,
    conversationId,
  });
  const ticker = () => engine<TickerStatus>(second, "debug.ticker", taskId);
  await say(second, "hello before the lender goes");
  const acknowledged = await until("the ticker halfway", ticker, (t) => t.trail.length >= 60);
  await first.close();
  await say(second, "hello after the lender went");

  const done = await until("the ticker completed", ticker, (t) => t.status === "completed", 120_000);
  // Every tick once, in order: the ones acknowledged before the close among them.
  expect(done.trail).toEqual(Array.from({ length: PHASES }, (_, i) => i + 1));
  expect(done.trail.slice(0, acknowledged.trail.length)).toEqual(acknowledged.trail);

  await settled(second, 2, 120_000);
  const users = await entriesOf(second, "pi.user").count();
  const { count } = await answersOnPage(second);
  expect({ users, answers: count }).toEqual({ users: 2, answers: 2 });

  const after = (await stats(second)).lentStore!;
  expect(after.lending.map((l) => l.tabId)).toContain(secondId);
  expect(after.lending.map((l) => l.tabId)).not.toContain(firstId);
  expect(after.handovers.length).toBeGreaterThanOrEqual(1);
  for (const h of after.handovers)
    console.log(
      `lent store handed over (${h.reason}): paused ${Math.round(h.pauseMs)} ms, commit in flight ${h.foundStored ? "found stored" : `sent again (${h.replayed} messages)`}`,
    );
}, 240_000);
