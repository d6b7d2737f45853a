/**
 * The chat view's message list and actions on the built app: "Jump to latest" never covers the
 * composer, message actions (copy, edit and resend as a fork, fork) on user and assistant messages
 * only, queued inputs withdrawn before they run, and a 5,000-entry conversation rendered as a window
 * that opens at its newest entries. Screenshots go to test-results/screenshots/.
 */
import type { Page, Route } from "playwright-core";
import { expect, test } from "vitest";
import { engine } from "./browser.ts";
import { openAiStream } from "./openai-stream.ts";
import { appSuite, appUrl, eachLook, say, settled, shot, uniqueStore, until } from "./page.ts";

const app = appSuite({ logTail: 100 });

/** The app on a fresh store, its composer ready. */
const openApp = (label: string, width = 1280, height = 800): Promise<Page> =>
  app.open({ label, viewport: { width, height }, composer: true });

const userTexts = (page: Page) =>
  page.locator('[data-testid="entries"] > [data-kind="pi.user"] .text').allTextContents();

/** Open a seeded conversation of `entries` messages (debug.seedChat) and wait for its newest answer. */
async function openSeeded(page: Page, entries: number): Promise<number> {
  const id = await engine<number>(page, "debug.seedChat", { entries });
  await page.evaluate((id) => {
    location.hash = `#/c/${id}`;
  }, id);
  await page.getByTestId("entries").getByText(`The newest answer, number ${entries}.`).waitFor();
  return id;
}

/** Where the newest seeded answer is, relative to the scroller's visible box. */
const newestOnScreen = (page: Page, entries: number) =>
  page.evaluate((entries) => {
    const scroller = document.querySelector(".scroller")!.getBoundingClientRect();
    const newest = [
      ...document.querySelectorAll('[data-testid="entries"] > [data-kind="pi.assistant"]'),
    ].find((e) => e.textContent?.includes(`The newest answer, number ${entries}.`));
    const box = newest?.getBoundingClientRect();
    return box !== undefined && box.bottom > scroller.top && box.top < scroller.bottom;
  }, entries);

const scrollUp = (page: Page, px: number) =>
  page.evaluate((px) => {
    const scroller = document.querySelector(".scroller")!;
    scroller.scrollTop = Math.max(0, scroller.scrollTop - px);
  }, px);

test("Jump to latest sits inside the transcript and never covers the composer, at 1280 and 390 px in light and dark", async () => {
  const page = await openApp("jump");
  await openSeeded(page, 200);
  await eachLook(page, async (look) => {
    const { scheme, width } = look;
    await scrollUp(page, 3000);
    const jump = page.getByTestId("jump-to-latest");
    await jump.waitFor();
    await page.screenshot({ path: look.shot("jump") });
    const boxes = await page.evaluate(() => {
      const rect = (selector: string) => {
        const r = document.querySelector(selector)!.getBoundingClientRect();
        return { top: r.top, bottom: r.bottom, left: r.left, right: r.right };
      };
      return {
        jump: rect('[data-testid="jump-to-latest"]'),
        composer: rect("form.composer"),
        scroller: rect(".scroller"),
      };
    });
    const { jump: j, composer: c, scroller: s } = boxes;
    const overlaps = j.left < c.right && c.left < j.right && j.top < c.bottom && c.top < j.bottom;
    expect(overlaps, `${scheme} ${width}: ${JSON.stringify(boxes)}`).toBe(false);
    // Within the scroller's visible box, near its bottom edge.
    expect(j.top).toBeGreaterThanOrEqual(s.top);
    expect(j.bottom).toBeLessThanOrEqual(s.bottom);
    await jump.click();
    await until(
      "the newest answer back on screen",
      () => newestOnScreen(page, 200),
      (v) => v,
    );
    await jump.waitFor({ state: "detached" });
  });
});

test("message actions are on user and assistant messages only: Copy says Copied and fills the clipboard; Edit resends as a fork", async () => {
  const page = await openApp("actions");
  await app.browser.context.grantPermissions(["clipboard-read", "clipboard-write"], {
    origin: app.server.url,
  });
  await say(page, "first question");
  await settled(page, 1);
  await say(page, "write a note");
  await settled(page, 3);
  const parentHash = await page.evaluate(() => location.hash);

  // Tool results and notes carry no actions; every user and assistant message has them.
  const entries = page.locator('[data-testid="entries"] > [data-kind]');
  const actions = await entries.evaluateAll((els) =>
    els.map((e) => [
      e.getAttribute("data-kind"),
      e.querySelector('[data-testid="message-actions"]') !== null,
    ]),
  );
  expect(actions.some(([kind]) => kind === "pi.tool-result")).toBe(true);
  for (const [kind, has] of actions)
    expect(has, String(kind)).toBe(kind === "pi.user" || kind === "pi.assistant");
  await page.screenshot({ path: shot("actions-dark-1280") });

  // Copy, by keyboard: the message's text on the clipboard, and "Copied" where the button was.
  const first = page.locator('[data-testid="entries"] > [data-kind="pi.user"]').first();
  const copy = first.getByRole("button", { name: "Copy the text" });
  await copy.focus();
  await page.keyboard.press("Enter");
  await first.getByRole("button", { name: "Copied" }).waitFor();
  expect(await page.evaluate(() => navigator.clipboard.readText())).toBe("first question");

  // Edit the second question and resend it: a fork before it, with the edited text, opens.
  const second = page.locator('[data-testid="entries"] > [data-kind="pi.user"]').nth(1);
  await second.getByRole("button", { name: "Edit and resend as a fork" }).click();
  const editor = second.getByLabel("edited text");
  expect(await editor.inputValue()).toBe("write a note");
  expect(await editor.evaluate((el) => el === document.activeElement)).toBe(true);
  await editor.fill("list the files");
  await editor.press("Enter");
  await until(
    "the fork open",
    () => page.evaluate(() => location.hash),
    (h) => /^#\/c\/\d+$/.test(h) && h !== parentHash && h !== "#/c/1",
  );
  await until(
    "the fork's transcript",
    () => userTexts(page),
    (t) => t.join("|") === "first question|list the files",
  );
  await settled(page, 3);
  expect(
    await page.locator('[data-testid="entries"] > [data-kind="pi.tool-result"]').first().textContent(),
  ).toMatch(/tool · ls/);
  // The parent is as it was.
  await page.evaluate((h) => {
    location.hash = h;
  }, parentHash);
  await until(
    "the parent's transcript",
    () => userTexts(page),
    (t) => t.join("|") === "first question|write a note",
  );
});

test("editing the first message resends it in a new conversation; Esc cancels an edit", async () => {
  const page = await openApp("edit-first");
  await say(page, "hello there");
  await settled(page, 1);
  const parentHash = await page.evaluate(() => location.hash);
  const first = page.locator('[data-testid="entries"] > [data-kind="pi.user"]').first();
  await first.getByRole("button", { name: "Edit and resend as a fork" }).click();
  await first.getByLabel("edited text").press("Escape");
  await first.getByTestId("edit-form").waitFor({ state: "detached" });
  expect(await userTexts(page)).toEqual(["hello there"]);

  await first.getByRole("button", { name: "Edit and resend as a fork" }).click();
  await first.getByLabel("edited text").fill("hello again");
  await first.getByRole("button", { name: "Resend as a fork" }).click();
  await until(
    "the new conversation open",
    () => page.evaluate(() => location.hash),
    (h) => /^#\/c\/\d+$/.test(h) && h !== parentHash,
  );
  await until(
    "its transcript",
    () => userTexts(page),
    (t) => t.join("|") === "hello again",
  );
  await settled(page, 1);
});

/** A network model the withdraw test routes (the engine's dedicated worker is what routes reach). */
const ROUTED = { provider: "groq", modelId: "llama-3.1-8b-instant", key: "gsk-e2e-FAKE-withdraw-0a1b2c3d" };

/** An OpenAI-style streamed completion answering `text`. */
const streamedAnswer = (text: string) => openAiStream(text, { model: ROUTED.modelId });

test("queued inputs are listed with Withdraw while the agent works; a withdrawn one never runs, the other does", async () => {
  // The agent is kept at work by its model's first answer, held by the test until the withdrawal has
  // landed, so the steps below wait for states, not against a clock. (With the demo model's 3 s task
  // the agent finished first under load and took the input before its Withdraw was clicked.) A
  // provider route reaches a dedicated worker's fetches, not a SharedWorker's: hence the engine mode.
  const page = await app.open({
    url: appUrl(app.server.url, { store: uniqueStore("withdraw"), engine: "dedicated" }),
    label: "withdraw",
    viewport: { width: 1280, height: 800 },
    composer: true,
  });
  let release!: () => void;
  const held = new Promise<void>((resolve) => {
    release = resolve;
  });
  const requests: string[] = [];
  await app.browser.context.route("https://api.groq.com/**/chat/completions", async (route: Route) => {
    const body = route.request().postData() ?? "";
    requests.push(body);
    if (requests.length === 1) await held;
    const asked = requests.length === 1 ? "the long task" : "the next input";
    await route.fulfill({
      status: 200,
      contentType: "text/event-stream",
      body: streamedAnswer(`Done: ${asked}.`),
    });
  });
  await engine(page, "keys.set", ROUTED.provider, ROUTED.key);
  const conversation = Number(/#\/c\/(\d+)/.exec(page.url())?.[1] ?? "1");
  await engine(page, "settings.setModel", conversation, {
    provider: ROUTED.provider,
    modelId: ROUTED.modelId,
  });

  await say(page, "run a long task");
  await until(
    "the model asked, its answer held",
    async () => requests.length,
    (n) => n === 1,
  );
  await say(page, "never mind this one");
  await say(page, "hello after the task");
  const queued = page.getByTestId("queued-item");
  await until(
    "two queued inputs",
    () => queued.allTextContents(),
    (t) => t.length === 2,
  );
  expect((await queued.allTextContents()).join("|")).toMatch(/never mind this one.*\|.*hello after the task/);
  await page.screenshot({ path: shot("inbox-dark-1280") });
  await page.getByRole("button", { name: "Withdraw the queued input: never mind this one" }).click();
  await until(
    "one queued input left",
    () => queued.allTextContents(),
    (t) => t.length === 1 && t[0]!.includes("hello after the task"),
  );
  release();
  await settled(page, 2);
  await until(
    "the queued input answered",
    () => userTexts(page),
    (t) => t.includes("hello after the task"),
  );
  expect(await userTexts(page)).toEqual(["run a long task", "hello after the task"]);
  expect(await queued.count()).toBe(0);
  // The withdrawn input never reached the model; the other one did, in the second request.
  expect(requests).toHaveLength(2);
  expect(requests.some((r) => r.includes("never mind this one"))).toBe(false);
  expect(requests[1]).toContain("hello after the task");
});

test("a 5,000-entry conversation opens at its newest entries and scrolls up to its first", async () => {
  const page = await openApp("long", 390, 844);
  await openSeeded(page, 5000);
  await until(
    "the newest answer on screen",
    () => newestOnScreen(page, 5000),
    (v) => v,
  );
  await page.screenshot({ path: shot("long-dark-390") });
  // Every entry stays reachable: scrolled all the way up, the first message is on screen.
  await scrollUp(page, Number.MAX_SAFE_INTEGER);
  await until(
    "the first message on screen",
    () =>
      page.evaluate(() => {
        const scroller = document.querySelector(".scroller")!.getBoundingClientRect();
        const first = document.querySelector('[data-testid="entries"] > *')?.getBoundingClientRect();
        return first !== undefined && first.bottom > scroller.top && first.top < scroller.bottom;
      }),
    (v) => v,
  );
  // Only a window of them is in the DOM (tests/e2e/long-chat.test.ts walks the window further).
  expect(await page.locator('[data-testid="entries"] > *').count()).toBeLessThanOrEqual(100);
});
