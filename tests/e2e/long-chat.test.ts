/**
 * The windowed transcript on the built app (Chat.svelte, lib/transcript-window.svelte.ts): a long
 * chat keeps only a window of its entries in the DOM; Home, End, repeated PageUp and the wheel reach
 * its first and newest messages, and scrolling up never jumps back down while measured heights
 * replace estimates; the view follows the stream when pinned and holds still when scrolled up.
 * Chats are seeded by `debug.seedChat` (entry i says "Question i+1" or "Answer i+1"; the last "The
 * newest answer, number N"). Screenshots go to test-results/screenshots/. The transcript is paged:
 * the watch's first frame carries the newest entries only, and older pages load as the reader
 * scrolls up (the scroller's `data-older`: entries not loaded yet).
 */
import type { Page } from "playwright-core";
import { expect, test } from "vitest";
import { engine } from "./browser.ts";
import { appSuite, eachLook, say, until } from "./page.ts";

const app = appSuite({ logTail: 100 });

/** More entries than this in the DOM is not a window (the view shows a dozen or two). */
const WINDOW_MAX = 100;

async function openSeeded(page: Page, entries: number): Promise<void> {
  const id = await engine<number>(page, "debug.seedChat", { entries });
  await page.evaluate((id) => {
    location.hash = `#/c/${id}`;
  }, id);
  await page.getByTestId("entries").getByText(`The newest answer, number ${entries}.`).waitFor();
}

interface Look {
  /** The seeded number of the first and last entries at least partly on screen (0: none). */
  first: number;
  last: number;
  /** The first one's top relative to the scroller's top edge, px. */
  firstOffset: number;
  /** Entries in the DOM. */
  rendered: number;
  scrollTop: number;
  atBottom: boolean;
  /** The top spacer's height, px. */
  before: number;
}

/** What the transcript shows now. */
const look = (page: Page): Promise<Look> =>
  page.evaluate(() => {
    const scroller = document.querySelector(".scroller")!;
    const view = scroller.getBoundingClientRect();
    const entries = [...document.querySelectorAll('[data-testid="entries"] > *')];
    const number = (e: Element) => {
      const m = /(?:Question|Answer|newest answer, number) (\d+)/.exec(e.textContent ?? "");
      return m ? Number(m[1]) : -1;
    };
    const seen = entries.filter((e) => {
      const r = e.getBoundingClientRect();
      return r.bottom > view.top && r.top < view.bottom;
    });
    return {
      first: seen.length ? number(seen[0]!) : 0,
      last: seen.length ? number(seen.at(-1)!) : 0,
      firstOffset: seen.length ? seen[0]!.getBoundingClientRect().top - view.top : 0,
      rendered: entries.length,
      scrollTop: scroller.scrollTop,
      atBottom: scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 2,
      before: document.querySelector<HTMLElement>('[data-testid="spacer-before"]')!.offsetHeight,
    };
  });

/** Two animation frames: the window and the scroll position have caught up with an input. */
const frames = (page: Page) =>
  page.evaluate(() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done))));

/**
 * Press `key` (or turn the wheel) until the first message is at the top, checking after each step
 * that the view only ever moved up (the first entry on screen never a later one than before).
 */
async function walkUp(page: Page, step: () => Promise<void>, what: string): Promise<number> {
  let previous = await look(page);
  for (let steps = 1; steps <= 600; steps++) {
    await step();
    await frames(page);
    const now = await look(page);
    expect(now.first, `${what} step ${steps}: ${JSON.stringify({ previous, now })}`).toBeGreaterThan(0);
    expect(now.first, `${what} step ${steps}: ${JSON.stringify({ previous, now })}`).toBeLessThanOrEqual(
      previous.first,
    );
    expect(now.rendered).toBeLessThanOrEqual(WINDOW_MAX);
    if (now.first === 1 && now.scrollTop === 0) return steps;
    previous = now;
  }
  throw new Error(`${what}: the first message not reached; last ${JSON.stringify(previous)}`);
}

test("a 5,000-entry chat renders only a window; Home reaches the first message and End the newest", async () => {
  const page = await app.open({ label: "window", composer: true });
  await openSeeded(page, 5000);
  const opened = await until(
    "the newest answer on screen",
    () => look(page),
    (l) => l.last === 5000,
  );
  expect(opened.rendered).toBeLessThanOrEqual(WINDOW_MAX);
  expect(opened.before).toBeGreaterThan(100_000);
  // The first frame was a page of the newest entries, the rest counted, not sent.
  const firstFrame = await page.evaluate(
    () =>
      (performance.getEntriesByName("watch:applied", "mark").at(-1) as PerformanceMark | undefined)?.detail as
        | { entries: number; older: number }
        | undefined,
  );
  expect(firstFrame?.entries).toBeLessThanOrEqual(200);
  expect(firstFrame!.entries + firstFrame!.older).toBe(5000);
  expect(Number(await page.locator(".scroller").getAttribute("data-older"))).toBeGreaterThan(4000);

  const transcript = page.getByRole("region", { name: "transcript" });
  await transcript.focus();
  await page.keyboard.press("Home");
  const top = await until(
    "the first message at the top",
    () => look(page),
    (l) => l.first === 1 && l.scrollTop === 0,
  );
  expect(top.before).toBe(0);
  expect(top.firstOffset).toBeGreaterThanOrEqual(0);
  // Scrolled to the top: every older page is loaded.
  expect(await page.locator(".scroller").getAttribute("data-older")).toBe("0");
  expect(top.rendered).toBeLessThanOrEqual(WINDOW_MAX);
  await page.getByTestId("jump-to-latest").waitFor();
  await eachLook(page, async (scene) => {
    await until(
      "still at the first message",
      () => look(page),
      (l) => l.first === 1,
    );
    await page.screenshot({ path: scene.shot("long-top") });
  });

  await transcript.focus();
  await page.keyboard.press("End");
  const end = await until(
    "the newest answer back on screen",
    () => look(page),
    (l) => l.last === 5000 && l.atBottom,
  );
  expect(end.rendered).toBeLessThanOrEqual(WINDOW_MAX);
  await page.getByTestId("jump-to-latest").waitFor({ state: "detached" });
});

test("repeated PageUp, then the wheel, walk a windowed chat up to its first message without ever jumping down", async () => {
  const page = await app.open({ label: "pageup", composer: true, viewport: { width: 390, height: 844 } });
  await openSeeded(page, 600);
  await until(
    "the newest answer on screen",
    () => look(page),
    (l) => l.last === 600,
  );
  const transcript = page.getByRole("region", { name: "transcript" });
  await transcript.focus();
  const presses = await walkUp(page, () => page.keyboard.press("PageUp"), "PageUp");
  // Many pages: the walk went through the estimated part, not one jump.
  expect(presses).toBeGreaterThan(20);

  await page.keyboard.press("End");
  await until(
    "back at the newest",
    () => look(page),
    (l) => l.last === 600 && l.atBottom,
  );
  const box = (await transcript.boundingBox())!;
  await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
  const turns = await walkUp(page, () => page.mouse.wheel(0, -1200), "wheel");
  expect(turns).toBeGreaterThan(10);
});

test("dragging the scrollbar: a jump to any point shows the entries there, and the view holds still as they are measured", async () => {
  const page = await app.open({ label: "drag", composer: true });
  await openSeeded(page, 5000);
  await until(
    "the newest answer on screen",
    () => look(page),
    (l) => l.last === 5000,
  );
  let previous = Number.POSITIVE_INFINITY;
  for (const fraction of [0.75, 0.5, 0.25, 0.05, 0]) {
    await page.evaluate((fraction) => {
      const scroller = document.querySelector(".scroller")!;
      scroller.scrollTop = fraction * (scroller.scrollHeight - scroller.clientHeight);
    }, fraction);
    // Roughly that far into the chat, and earlier than the previous point.
    const there = await until(
      `entries at ${fraction} on screen`,
      () => look(page),
      (l) => l.first > 0 && Math.abs(l.first / 5000 - fraction) < 0.1,
    );
    expect(there.first).toBeLessThan(previous);
    previous = there.first;
    // Measured: nothing moves any more.
    await frames(page);
    const settledLook = await look(page);
    await frames(page);
    expect(await look(page)).toEqual(settledLook);
  }
  expect(previous).toBe(1);
});

test("a windowed chat follows the stream when pinned, holds still when scrolled up, and Jump to latest returns", async () => {
  const page = await app.open({ label: "follow", composer: true });
  await openSeeded(page, 300);
  await until(
    "the newest answer on screen",
    () => look(page),
    (l) => l.last === 300,
  );
  await say(page, "hello there");
  const demoAnswer = page
    .getByTestId("entries")
    .locator('[data-kind="pi.assistant"]', { hasText: "offline demo model" });
  await demoAnswer.waitFor();
  // Followed: the answer is on screen at the bottom, the window still small.
  await until(
    "the answer on screen, at the bottom",
    () =>
      page.evaluate(() => {
        const scroller = document.querySelector(".scroller")!;
        const view = scroller.getBoundingClientRect();
        const answer = [
          ...document.querySelectorAll('[data-testid="entries"] > [data-kind="pi.assistant"]'),
        ].at(-1)!;
        const r = answer.getBoundingClientRect();
        return (
          r.top < view.bottom &&
          r.bottom > view.top &&
          scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 2
        );
      }),
    (v) => v,
  );
  expect((await look(page)).rendered).toBeLessThanOrEqual(WINDOW_MAX);

  // Scrolled up while a run adds entries: what the reader sees does not move.
  await say(page, "run a long task");
  await page.getByTestId("tool-slot").first().waitFor();
  await page.evaluate(() => {
    const scroller = document.querySelector(".scroller")!;
    scroller.scrollTop -= 6000;
  });
  await page.getByTestId("jump-to-latest").waitFor();
  await frames(page);
  const held = await look(page);
  expect(held.first).toBeGreaterThan(0);
  // The run ends (its entries are committed below the window, out of the DOM).
  await until(
    "the run ended",
    () => page.getByRole("button", { name: "Stop", exact: true }).count(),
    (n) => n === 0,
  );
  await frames(page);
  const after = await look(page);
  expect({ first: after.first, offset: Math.round(after.firstOffset) }).toEqual({
    first: held.first,
    offset: Math.round(held.firstOffset),
  });

  await page.getByTestId("jump-to-latest").click();
  await until(
    "back at the bottom",
    () => look(page),
    (l) => l.atBottom,
  );
  await page.getByTestId("jump-to-latest").waitFor({ state: "detached" });
  expect(await page.getByTestId("entries").locator('[data-kind="pi.tool-result"]').count()).toBe(1);
});

test("an edit box with the focus stays rendered, with its text and the focus, while the reader scrolls far away and back", async () => {
  const page = await app.open({ label: "kept", composer: true });
  await openSeeded(page, 600);
  await until(
    "the newest answer on screen",
    () => look(page),
    (l) => l.last === 600,
  );
  const question = page.getByTestId("entries").locator('[data-kind="pi.user"]', { hasText: "Question 599:" });
  await question.getByRole("button", { name: "Edit and resend as a fork" }).click();
  const editor = page.getByLabel("edited text");
  await editor.fill("a draft that must survive scrolling");
  const focused = () =>
    page.evaluate(() => {
      const a = document.activeElement;
      return a instanceof HTMLTextAreaElement && a.getAttribute("aria-label") === "edited text"
        ? a.value
        : "";
    });
  expect(await focused()).toBe("a draft that must survive scrolling");

  // Far up: the window is at the first messages; the edit box is still there, focused, and still small.
  await page.evaluate(() => {
    document.querySelector(".scroller")!.scrollTop = 0;
  });
  const top = await until(
    "the first message at the top",
    () => look(page),
    (l) => l.first === 1 && l.scrollTop === 0,
  );
  expect(top.rendered).toBeLessThanOrEqual(WINDOW_MAX);
  await frames(page);
  expect(await focused()).toBe("a draft that must survive scrolling");

  // Back down: the edit box is where its message is, with the text, and typing goes on into it.
  await page.evaluate(() => {
    const scroller = document.querySelector(".scroller")!;
    scroller.scrollTop = scroller.scrollHeight;
  });
  await until(
    "the newest answer back on screen",
    () => look(page),
    (l) => l.last === 600,
  );
  await page.keyboard.type(", typed later");
  expect(await focused()).toBe("a draft that must survive scrolling, typed later");
  const placed = await page.evaluate(() => {
    const form = document.querySelector('[data-testid="edit-form"]')!.getBoundingClientRect();
    const view = document.querySelector(".scroller")!.getBoundingClientRect();
    return form.bottom > view.top && form.top < view.bottom;
  });
  expect(placed).toBe(true);
});
