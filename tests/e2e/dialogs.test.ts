/**
 * What a person sees of the dialogs, the task panel and the composer, on the built app: the
 * settings and files dialogs keep their title and close button in view while their body scrolls, fit
 * the window at 1280 and 390 px in light and dark, close on Esc and give the focus back to what opened
 * them (on a phone, to the drawer's button when the opener went away with the drawer); on a desktop the
 * task panel shows one row per task, its name cut short with an ellipsis (in full in a tooltip) and
 * Stop at the right; while a run is busy, the composer's "when busy" choice, Stop and Send share one
 * row from 360 px up; by keyboard the transcript is one Tab stop (arrow keys move between its
 * messages, Tab enters the focused one's actions), so Shift+Tab from the composer reaches the header in
 * a bounded number of stops. Geometry is read from the page (bounding boxes, what is on top at a
 * point), and each look is kept as a screenshot under test-results/screenshots/.
 */
import type { Locator, Page } from "playwright-core";
import { expect, test } from "vitest";
import { seriousViolations } from "./axe.ts";
import { engine } from "./browser.ts";
import {
  appSuite,
  appUrl,
  eachLook,
  type Look,
  say,
  settleAnimations,
  settled,
  shot,
  uniqueStore,
  until,
} from "./page.ts";

const app = appSuite({ logTail: 100 });
const POLL = { timeout: 20_000, interval: 100 };

/** The app on a fresh store, its composer ready. */
const openApp = (label: string, width = 1280, height = 800): Promise<Page> =>
  app.open({ label, viewport: { width, height }, composer: true });

type Box = { x: number; y: number; width: number; height: number };
const boxOf = async (l: Locator): Promise<Box> => {
  const box = await l.boundingBox();
  if (!box) throw new Error(`${l} has no box`);
  return box;
};

/** Whether `l`'s middle is in the window and `l` (or something inside it) is what a click there hits. */
const onTop = (l: Locator) =>
  l.evaluate((e) => {
    const r = e.getBoundingClientRect();
    const [x, y] = [r.left + r.width / 2, r.top + r.height / 2];
    if (x < 0 || y < 0 || x > innerWidth || y > innerHeight) return false;
    const hit = document.elementFromPoint(x, y);
    return hit !== null && (e === hit || e.contains(hit));
  });

const isFocused = (l: Locator) => l.evaluate((e) => e === document.activeElement);

/**
 * The open dialog, scrolled to `last`: its title and close button stay where they were and on top,
 * while `last` came up into view; the card is inside the window with nothing wider than it.
 */
async function checkDialog(
  dialog: Locator,
  { last, look, what }: { last: Locator; look: Look; what: string },
) {
  const where = `${what}, ${look.scheme} at ${look.width} px`;
  const title = dialog.getByRole("heading", { level: 2 });
  const close = dialog.getByRole("button", { name: /^Close/ });
  const before = { title: await boxOf(title), close: await boxOf(close), last: await boxOf(last) };
  await last.evaluate((e) => e.scrollIntoView({ block: "end" }));
  const after = { title: await boxOf(title), close: await boxOf(close), last: await boxOf(last) };
  // The body did scroll (the last control moved up), and the header did not.
  const sizes = await dialog.evaluate((d) => `dialog ${d.clientHeight} px, content ${d.scrollHeight} px`);
  expect(after.last.y, `${where}: the body scrolled (${sizes})`).toBeLessThan(before.last.y);
  expect(after.title.y, `${where}: the title stayed`).toBeCloseTo(before.title.y, 0);
  expect(after.close.y, `${where}: the close button stayed`).toBeCloseTo(before.close.y, 0);
  expect(await onTop(title), `${where}: the title in view`).toBe(true);
  expect(await onTop(close), `${where}: the close button in view`).toBe(true);
  expect(after.last.y + after.last.height, `${where}: the last control in view`).toBeLessThanOrEqual(
    look.height,
  );
  // The card fits the window, and nothing in it is wider than it.
  const card = await boxOf(dialog);
  expect(card.x, where).toBeGreaterThanOrEqual(0);
  expect(card.y, where).toBeGreaterThanOrEqual(0);
  expect(card.x + card.width, where).toBeLessThanOrEqual(look.width);
  expect(card.y + card.height, where).toBeLessThanOrEqual(look.height);
  expect(
    await dialog.evaluate(
      (d) =>
        [d, ...d.querySelectorAll("*")].filter(
          (e) => e.scrollWidth > e.clientWidth + 1 && e.tagName !== "PRE",
        ).length,
    ),
    `${where}: nothing scrolls sideways`,
  ).toBe(0);
}

// A note long enough to make the files dialog scroll once it is viewed.
const LONG_NOTE = [
  "write a note",
  ...Array.from({ length: 40 }, (_, i) => `line ${i + 1} of a long note`),
].join("\n");

test("the settings and files dialogs keep their title and close button in view while the body scrolls, fit 1280 and 390 px in light and dark, close on Esc and give the focus back", async () => {
  const page = await openApp("dialogs");
  await say(page, LONG_NOTE);
  await settled(page, 3);
  await eachLook(page, async (look) => {
    // Settings, opened from the header's button with the keyboard.
    const gear = page.getByTestId("open-settings");
    await gear.focus();
    await page.keyboard.press("Enter");
    const settings = page.getByTestId("settings");
    await settings.waitFor();
    await expect
      .poll(() => settings.getByTestId("model-list").getByRole("button").count(), POLL)
      .toBeGreaterThan(0);
    await settleAnimations(page);
    await checkDialog(settings, { last: settings.getByTestId("demo-speed"), look, what: "settings" });
    await page.screenshot({ path: look.shot("settings-scrolled") });
    expect(await seriousViolations(page, '[data-testid="settings"]'), `settings, ${look.scheme}`).toEqual([]);
    await page.keyboard.press("Escape");
    await settings.waitFor({ state: "detached" });
    expect(await isFocused(gear), "focus back on the settings button").toBe(true);

    // Files, from the conversation list (a drawer on a phone), the note viewed, in a window short
    // enough (a phone on its side) for the note to make the dialog scroll.
    const short = { ...look, height: 400 };
    await page.setViewportSize({ width: short.width, height: short.height });
    const drawerButton = page.getByRole("button", { name: "Conversations" });
    const phone = look.width < 760;
    if (phone) {
      await drawerButton.click();
      await settleAnimations(page);
    }
    const opener = page.getByTestId("open-files");
    await opener.focus();
    await page.keyboard.press("Enter");
    const files = page.getByTestId("files");
    await files.getByTestId("file").first().waitFor();
    await files.getByRole("button", { name: "View" }).click();
    const text = files.getByTestId("file-text");
    await expect.poll(() => text.textContent(), POLL).toContain("committed to SQLite");
    await settleAnimations(page);
    await checkDialog(files, { last: text, look: short, what: "files" });
    await page.screenshot({ path: look.shot("files-scrolled-short") });
    await page.keyboard.press("Escape");
    await files.waitFor({ state: "detached" });
    // On a phone the drawer closed when the dialog opened: focus goes to the button that opens it.
    expect(await isFocused(phone ? drawerButton : opener), "focus back where the files were opened").toBe(
      true,
    );
  });
}, 240_000);

test("on a desktop the task panel shows one row per task: its words wrapped, never cut, the technical name in its tooltip, Stop at the right", async () => {
  const page = await openApp("task-rows");
  await say(page, "run a long task of 60 seconds");
  await page.locator('[data-testid="tool-slot"][data-status="running"]').waitFor();
  const tree = page.getByTestId("task-tree");
  await tree.waitFor();
  await until(
    "two tasks in the panel",
    () => tree.getByRole("button", { name: /^Stop task/ }).count(),
    (n) => n >= 2,
  );
  await settleAnimations(page);
  await page.locator("aside#tasks").screenshot({ path: shot("task-panel-1280") });
  const panel = await boxOf(page.locator("aside#tasks"));
  const rows = await page.locator("aside#tasks li").evaluateAll((items) =>
    items.map((li) => {
      // This task's own parts (not those of the tasks nested under it): its Stop and its kind.
      const own = (e: Element) => e.closest("li") === li;
      const stop = [...li.querySelectorAll('button[aria-label^="Stop task"]')].find(own);
      const name = [...li.querySelectorAll('[data-testid="task-label"]')].find(own);
      const box = (e: Element | null | undefined) => {
        const r = e?.getBoundingClientRect();
        return r ? { top: r.top, bottom: r.bottom, right: r.right } : undefined;
      };
      // The element that carries the technical name in a tooltip, and whether its words are cut.
      const titled = [...li.querySelectorAll("[title^='pi.']")].find(own);
      return {
        name: box(name),
        stop: box(stop),
        title: titled?.getAttribute("title") ?? null,
        cut: titled
          ? titled.scrollWidth > titled.clientWidth || getComputedStyle(titled).textOverflow === "ellipsis"
          : null,
      };
    }),
  );
  const tasks = rows.filter((r) => r.stop !== undefined);
  expect(tasks.length).toBeGreaterThanOrEqual(2);
  for (const [i, r] of tasks.entries()) {
    // Stop sits on the name's line (no wrap under it), at the panel's right edge.
    expect(r.name, `row ${i}`).toBeDefined();
    expect(r.stop!.top, `row ${i}: Stop on the name's line`).toBeLessThan(r.name!.bottom);
    expect(r.stop!.bottom, `row ${i}: Stop on the name's line`).toBeGreaterThan(r.name!.top);
    expect(panel.x + panel.width - r.stop!.right, `row ${i}: Stop at the right edge`).toBeLessThan(16);
    expect(r.title, `row ${i}: the full name in a tooltip`).toMatch(/^pi\.\S+ #\d+ \w+ · \w+/);
    // The words wrap onto more lines rather than being cut (a phone reads "waiting for your approval
    // to run the write tool" whole: approval.test.ts).
    expect(r.cut, `row ${i}: words never cut`).toBe(false);
  }
  // The Stop buttons line up: one right edge for all.
  expect(new Set(tasks.map((r) => Math.round(r.stop!.right))).size).toBe(1);
  // On demand, under each name its status and phase, never cut; the model turn says what it waits on.
  await page.getByTestId("task-technical-toggle").click();
  const statuses = await page
    .getByTestId("task-status")
    .evaluateAll((els) =>
      els.map((e) => ({ text: e.textContent ?? "", whole: e.scrollWidth <= e.clientWidth })),
    );
  expect(statuses.length).toBe(tasks.length);
  for (const s of statuses) {
    expect(s.text).toMatch(/^pi\.[\w-]+ #\d+ · (pending|running|waiting) · \w+/);
    expect(s.whole, s.text).toBe(true);
  }
  expect(await page.locator("aside#tasks").textContent()).toMatch(/waits on #\d+ until all settle/);
  await page.getByLabel("message").press("Escape");
});

test("a new user on a phone, by keyboard, in dark: an empty conversation offers first steps, a drawer opened from the keyboard takes the focus, the engine details fit the window", async () => {
  const page = await openApp("phone-walk", 390, 844);
  await page.emulateMedia({ colorScheme: "dark" });
  // The empty conversation says what to try; a step fills the composer and focuses it.
  const steps = page.getByTestId("first-steps");
  await steps.waitFor();
  await steps.getByRole("button", { name: "write a note" }).focus();
  await page.keyboard.press("Enter");
  const box = page.getByLabel("message");
  expect(await box.inputValue()).toBe("write a note");
  expect(await isFocused(box)).toBe(true);
  await page.screenshot({ path: shot("first-steps-dark-390") });
  await box.press("Enter");
  await settled(page, 3);
  expect(await steps.count()).toBe(0);

  // The conversations drawer, opened with Enter: the focus moves into it, and Esc brings it back.
  const menu = page.getByRole("button", { name: "Conversations" });
  await menu.focus();
  await page.keyboard.press("Enter");
  await until(
    "the focus inside the drawer",
    () =>
      page.evaluate(
        () => document.getElementById("conversations")?.contains(document.activeElement) ?? false,
      ),
    (inside) => inside,
    5_000,
  );
  await page.keyboard.press("Escape");
  await until(
    "the focus back on the menu button",
    () => isFocused(menu),
    (v) => v,
    5_000,
  );

  // The engine details, from the header's middle: the whole card in the window.
  await page.getByRole("button", { name: "About the engine" }).click();
  const details = page.getByTestId("engine-details");
  await details.waitFor();
  const card = await boxOf(details);
  expect(card.x).toBeGreaterThanOrEqual(0);
  expect(card.x + card.width).toBeLessThanOrEqual(390);
  expect(card.y + card.height).toBeLessThanOrEqual(844);
  await page.screenshot({ path: shot("engine-details-dark-390") });
  expect(await seriousViolations(page, '[data-testid="engine-details"]')).toEqual([]);
  await page.keyboard.press("Escape");
  await details.waitFor({ state: "detached" });
});

test("while a run is busy the composer is one tidy layout from 360 px up: the usage line, then the when-busy choice, Stop and Send on one row inside the window", async () => {
  // The run is kept busy by a network model whose provider never answers (a route reaches the
  // engine's fetches in a dedicated worker, not in a SharedWorker: hence the engine mode).
  const page = await app.open({
    url: appUrl(app.server.url, { store: uniqueStore("busy-composer"), engine: "dedicated" }),
    label: "busy-composer",
    viewport: { width: 390, height: 844 },
    composer: true,
  });
  // A first answer from the demo model, so the usage line shows too.
  await say(page, "hello there");
  await settled(page, 1);
  await app.browser.context.route("https://api.groq.com/**", () => {
    // Never answered: the run waits for its model until it is stopped.
  });
  await engine(page, "keys.set", "groq", "gsk-e2e-FAKE-busy-composer-0a1b2c");
  const conversation = Number(/#\/c\/(\d+)/.exec(page.url())?.[1] ?? "1");
  await engine(page, "settings.setModel", conversation, {
    provider: "groq",
    modelId: "llama-3.1-8b-instant",
  });
  await say(page, "and now a slow one");
  const stop = page.getByRole("button", { name: "Stop", exact: true });
  await stop.waitFor();
  const parts = {
    usage: page.locator('[data-testid="usage"] summary'),
    when: page.getByRole("combobox", { name: /^when busy/ }),
    stop,
    send: page.getByRole("button", { name: "Send", exact: true }),
    message: page.getByLabel("message"),
  };
  for (const width of [360, 390, 1280]) {
    await page.setViewportSize({ width, height: width < 760 ? 740 : 800 });
    await settleAnimations(page);
    const where = `at ${width} px`;
    const box = {
      usage: await boxOf(parts.usage),
      when: await boxOf(parts.when),
      stop: await boxOf(parts.stop),
      send: await boxOf(parts.send),
      message: await boxOf(parts.message),
    };
    // The choice, Stop and Send on one row: their middles at one height.
    const middle = (b: Box) => b.y + b.height / 2;
    expect(Math.abs(middle(box.stop) - middle(box.when)), `${where}: Stop beside the choice`).toBeLessThan(2);
    expect(Math.abs(middle(box.send) - middle(box.when)), `${where}: Send beside the choice`).toBeLessThan(2);
    // In that order, not overlapping, Send's right edge on the message box's.
    expect(box.when.x + box.when.width, where).toBeLessThanOrEqual(box.stop.x);
    expect(box.stop.x + box.stop.width, where).toBeLessThanOrEqual(box.send.x);
    expect(Math.abs(box.send.x + box.send.width - (box.message.x + box.message.width)), where).toBeLessThan(
      1,
    );
    expect(box.when.x, where).toBeGreaterThanOrEqual(box.message.x);
    // The choice stays wide enough to read its words.
    expect(box.when.width, `${where}: the choice readable`).toBeGreaterThanOrEqual(140);
    // The usage line above the row on a phone, beside it on a desktop; never below.
    if (width < 760) expect(box.usage.y + box.usage.height, where).toBeLessThanOrEqual(box.when.y);
    else expect(Math.abs(middle(box.usage) - middle(box.when)), where).toBeLessThan(4);
    expect(
      await page.evaluate(() => document.documentElement.scrollWidth),
      `${where}: no horizontal scroll`,
    ).toBe(width);
    await page.screenshot({ path: shot(`busy-composer-light-${width}`) });
  }
  await parts.message.press("Escape");
  await stop.waitFor({ state: "detached", timeout: 30_000 });
});

/** Where the focus is, in words: `header`, `transcript`, `entry`, `in-entry:<label>`, `composer` or the element. */
const focusAt = (page: Page) =>
  page.evaluate(() => {
    const a = document.activeElement;
    if (!a || a === document.body) return "body";
    if (a.closest("header")) return "header";
    if (a.getAttribute("aria-label") === "message") return "composer";
    if (a.getAttribute("aria-label") === "transcript") return "transcript";
    const list = document.querySelector('[data-testid="entries"]');
    if (a.parentElement === list) return "entry";
    if (list?.contains(a)) return `in-entry:${a.getAttribute("aria-label") ?? a.textContent?.trim()}`;
    return `${a.tagName.toLowerCase()}:${a.getAttribute("aria-label") ?? a.textContent?.trim().slice(0, 30)}`;
  });

/** The Tab stops Shift+Tab walks from the composer until the header (at most `max`). */
async function stopsBackToHeader(page: Page, max = 60): Promise<string[]> {
  await page.getByLabel("message").focus();
  const stops: string[] = [];
  while (stops.length < max) {
    await page.keyboard.press("Shift+Tab");
    const at = await focusAt(page);
    stops.push(at);
    if (at === "header") break;
  }
  return stops;
}

test("by keyboard the transcript is one Tab stop: Shift+Tab from the composer reaches the header in a few stops however many messages; arrow keys move between messages and Tab enters the focused one's actions", async () => {
  const page = await openApp("roving", 390, 844);
  await say(page, "write a note");
  await settled(page, 3);
  // On a phone (the lists are drawers) the composer, the conversation's "Scheduled runs" disclosure
  // (closed: one stop), the transcript, then the header.
  const phoneStops = ["summary:Scheduled runs", "transcript", "header"];
  expect(await stopsBackToHeader(page)).toEqual(phoneStops);
  // Twice the messages: the same stops.
  await say(page, "list the files");
  await settled(page, 5);
  expect(await stopsBackToHeader(page)).toEqual(phoneStops);

  // Arrow Up from the transcript: the newest message in view; again: the one before it.
  const transcript = page.getByRole("region", { name: "transcript" });
  await transcript.focus();
  const entries = page.locator('[data-testid="entries"] > *');
  const focusedIndex = () => entries.evaluateAll((els) => els.findIndex((e) => e === document.activeElement));
  await page.keyboard.press("ArrowUp");
  expect(await focusAt(page)).toBe("entry");
  const newest = await focusedIndex();
  expect(newest).toBe((await entries.count()) - 1);
  await page.keyboard.press("ArrowUp");
  expect(await focusedIndex()).toBe(newest - 1);
  await page.keyboard.press("ArrowDown");
  expect(await focusedIndex()).toBe(newest);
  // The newest message is an answer: Tab enters its actions, Copy first.
  await page.keyboard.press("Tab");
  expect(await focusAt(page)).toBe("in-entry:Copy the text");
  await page.keyboard.press("Tab");
  expect(await focusAt(page)).toBe("in-entry:Fork from here");
  // From its actions, Arrow Up goes on to the message before.
  await page.keyboard.press("ArrowUp");
  expect(await focusedIndex()).toBe(newest - 1);
  // The message last visited keeps its actions in the Tab order: still a bounded walk back.
  const stops = await stopsBackToHeader(page);
  expect(stops.at(-1)).toBe("header");
  expect(stops.length).toBeLessThanOrEqual(8);
  expect(await seriousViolations(page), "the chat after moving by keyboard").toEqual([]);

  // A user message: its Edit opens the editor, Esc gives the focus back to Edit.
  await transcript.focus();
  await page.keyboard.press("ArrowDown");
  for (let i = 0; i < 20; i++) {
    if ((await entries.nth(await focusedIndex()).getAttribute("data-kind")) === "pi.user") break;
    await page.keyboard.press("ArrowDown");
  }
  await page.keyboard.press("Tab");
  await page.keyboard.press("Tab");
  expect(await focusAt(page)).toBe("in-entry:Edit and resend as a fork");
  await page.keyboard.press("Enter");
  await until(
    "the focus in the editor",
    () => focusAt(page),
    (at) => at === "in-entry:edited text",
    5_000,
  );
  await page.keyboard.press("Escape");
  await until(
    "the focus back on Edit",
    () => focusAt(page),
    (at) => at === "in-entry:Edit and resend as a fork",
    5_000,
  );
  // End from a focused message: the newest in view, the focus on the transcript.
  await page.keyboard.press("ArrowUp");
  await page.keyboard.press("End");
  expect(await focusAt(page)).toBe("transcript");
});
