/**
 * The tab as a person uses it, on the built app with the demo model: the layout at 1280 and 390 px
 * in light and dark (no horizontal scroll; screenshots kept under test-results/screenshots/), model
 * text rendered as markdown with code blocks while any HTML or javascript: link in it stays inert,
 * and the composer's keys (Enter sends and keeps focus, Esc stops a running task).
 */
import { readFile } from "node:fs/promises";
import type { Page } from "playwright-core";
import { expect, test } from "vitest";
import { seriousViolations } from "./axe.ts";
import {
  appSuite,
  eachLook,
  lastAnswer,
  say,
  settleAnimations,
  settled,
  shot,
  until,
  waitPhase,
} from "./page.ts";

const app = appSuite({ logTail: 100 });

/** The app on a fresh store, its composer ready. */
const openApp = (label: string, width = 1280, height = 800): Promise<Page> =>
  app.open({ label, viewport: { width, height }, composer: true });

// The note the demo model writes quotes what the user asked; reading it back makes the model's
// answer carry this text (markdown, a code block, and hostile HTML and links) as a quote.
const PAYLOAD = [
  "write a note <img src=x onerror=window.__pwned=1> <script>window.__pwned=2</script> [go](javascript:window.__pwned=3)",
  "```js",
  "const answer = 42;",
  "```",
].join("\n");

/** What of a hostile payload reached the transcript's DOM: a handler that ran, images, scripts, handlers, links. */
const hostileDom = (page: Page) =>
  page.evaluate(() => {
    const entries = document.querySelector('[data-testid="entries"]')!;
    const all = [...entries.querySelectorAll("*")];
    return {
      pwned: (globalThis as { __pwned?: unknown }).__pwned ?? null,
      images: entries.querySelectorAll("img").length,
      scripts: entries.querySelectorAll("script").length,
      handlers: all.flatMap((e) =>
        [...e.attributes].filter((a) => a.name.startsWith("on")).map((a) => a.name),
      ),
      jsLinks: all.filter((e) => /javascript:/i.test(e.getAttribute("href") ?? "")).length,
    };
  });

/** "write a note" (three answers: a listing for a free name, the write, the summary), then a read. */
async function demoConversation(page: Page): Promise<void> {
  await say(page, PAYLOAD);
  await settled(page, 3);
  await say(page, "read notes/note-1.md");
  await settled(page, 5);
}

test("model text renders as markdown with a code block and its HTML, script and javascript: link stay inert", async () => {
  const page = await openApp("inert");
  await demoConversation(page);
  const answer = lastAnswer(page);
  // Markdown became elements: the quoted note's heading and code block, with a Copy button.
  expect(await answer.locator("blockquote h1").textContent()).toBe("Note 1");
  expect(await answer.locator('pre > code[class="language-js"]').textContent()).toContain(
    "const answer = 42;",
  );
  expect(await answer.locator("pre > button.copy").count()).toBe(1);
  // The hostile parts are in the answer, as text only.
  const text = (await answer.textContent()) ?? "";
  expect(text).toContain("<img src=x onerror=window.__pwned=1>");
  expect(text).toContain("<script>window.__pwned=2</script>");
  expect(await hostileDom(page)).toEqual({ pwned: null, images: 0, scripts: 0, handlers: [], jsLinks: 0 });
  // The write call (after the listing) shows as a card with its arguments as written, not as raw JSON.
  const card = page.locator('[data-testid="tool-call"]').nth(1);
  expect(await card.getAttribute("data-status")).toBe("done");
  expect(await card.locator("dt").allTextContents()).toEqual(["path", "content"]);
  expect(await card.locator("dd").nth(0).textContent()).toBe("notes/note-1.md");
});

test("Enter sends and focus stays in the composer; Esc stops a long task, shown as aborted in words", async () => {
  const page = await openApp("keys");
  const box = page.getByLabel("message");
  await say(page, "hello there");
  expect(await box.inputValue()).toBe("");
  expect(await box.evaluate((el) => el === document.activeElement)).toBe(true);
  await page.locator('[data-testid="entries"] > [data-kind="pi.user"]').first().waitFor();
  await settled(page, 1);
  // Shift+Enter is a new line, not a send.
  await box.press("a");
  await box.press("Shift+Enter");
  await box.press("b");
  expect(await box.inputValue()).toBe("a\nb");
  expect(await page.locator('[data-testid="entries"] > [data-kind="pi.user"]').count()).toBe(1);
  // Send by button: focus comes back to the composer.
  await page.getByRole("button", { name: "Send", exact: true }).click();
  await until(
    "focus back in the composer",
    () => box.evaluate((el) => el === document.activeElement),
    (v) => v,
  );
  await settled(page, 2);

  await say(page, "run a long task");
  await page.locator('[data-testid="tool-slot"][data-status="running"]').waitFor();
  await box.press("Escape");
  const aborted = page.locator('[data-testid="tool-call"][data-status="aborted"]');
  await aborted.waitFor({ timeout: 30_000 });
  await until(
    "the run to end",
    () => page.locator('[data-testid="partial"], [data-testid="tool-slot"]').count(),
    (n) => n === 0,
  );
  await until(
    "the Stop button gone",
    () => page.getByRole("button", { name: "Stop", exact: true }).count(),
    (n) => n === 0,
  );
  const shown = (await page.locator('[data-testid="entries"]').textContent()) ?? "";
  expect(shown).toContain("tool · sleep · aborted");
  expect(shown).not.toContain("<harness>");
});

test("the layout fits 390 px without horizontal scroll, in light and dark, with drawers and a persisted theme switch", async () => {
  const page = await openApp("layout");
  await demoConversation(page);
  await eachLook(page, async (look) => {
    const { scheme, width } = look;
    await settleAnimations(page);
    await page.screenshot({ path: look.shot("main") });
    const fit = await page.evaluate(() => ({
      scrollWidth: document.documentElement.scrollWidth,
      innerWidth,
      background: getComputedStyle(document.body).backgroundColor,
      // What sticks out, to name it when the width is wrong.
      wide: [...document.querySelectorAll("body *")]
        .filter(
          (e) =>
            e.getBoundingClientRect().right > innerWidth + 0.5 && getComputedStyle(e).visibility !== "hidden",
        )
        .slice(0, 5)
        .map(
          (e) => `${e.tagName.toLowerCase()}.${e.className} ${Math.round(e.getBoundingClientRect().right)}`,
        ),
    }));
    expect(fit.scrollWidth, `${scheme} at ${width} px: ${fit.wide.join("; ")}`).toBe(width);
    expect(fit.innerWidth).toBe(width);
    expect(fit.background).toBe(scheme === "light" ? "rgb(255, 255, 255)" : "rgb(15, 23, 42)");
  });
  // At 390 px the conversation list is a drawer behind a button; the task panel too.
  const list = page.locator("nav#conversations");
  expect(await list.isVisible()).toBe(false);
  await page.getByRole("button", { name: "Conversations" }).click();
  await until(
    "the drawer open",
    () => list.isVisible(),
    (v) => v,
  );
  await until(
    "the drawer slid in",
    () => list.evaluate((e) => e.getBoundingClientRect().left),
    (x) => x === 0,
  );
  await page.screenshot({ path: shot("drawer-dark-390") });
  await page.keyboard.press("Escape");
  await until(
    "the drawer closed",
    () => list.isVisible(),
    (v) => !v,
  );
  await settleAnimations(page);
  expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBe(390);

  // The switch overrides the system and is remembered across a reload.
  await page.emulateMedia({ colorScheme: "dark" });
  const background = () => page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  await page.getByTestId("theme-switch").click(); // system -> light
  expect(await page.evaluate(() => document.documentElement.dataset.theme)).toBe("light");
  expect(await background()).toBe("rgb(255, 255, 255)");
  await page.reload();
  await page.getByTestId("theme-switch").waitFor();
  expect(await page.evaluate(() => document.documentElement.dataset.theme)).toBe("light");
  expect(await background()).toBe("rgb(255, 255, 255)");
});

test("the header speaks a person's words: Ready, Working while a task runs, Offline when the server is unreachable, engine details on demand; the idle task panel keeps its room and says nothing runs", async () => {
  const page = await openApp("status");
  const status = page.locator('[data-testid="engine-status"]');
  await until(
    "Ready",
    () => status.textContent(),
    (t) => t?.trim() === "Ready",
  );
  // The engine's words (store kind, build, worker) are not in the header, only in the details.
  const header = (await page.locator("header").textContent()) ?? "";
  expect(header).not.toMatch(/idb|opfs|JSPI|worker|evicted/i);
  await page.getByRole("button", { name: "About the engine" }).click();
  const panel = page.locator('[data-testid="engine-details"]');
  const details = (await panel.textContent()) ?? "";
  expect(details).toMatch(/Kept by the browser/);
  // First, in a person's words, where the data is; the engine's words only under "Technical details".
  expect(await panel.locator("dd").first().textContent()).toMatch(
    /^Stored in this browser \((IndexedDB|its private file system)\)$/,
  );
  const technical = panel.getByTestId("engine-technical");
  expect(await technical.locator("dl").isVisible()).toBe(false);
  await technical.locator("summary").click();
  expect(await technical.locator("dl").textContent()).toMatch(/SQLite on .*\((idb|opfs)\).*Database build/);
  await page.keyboard.press("Escape");
  await page.locator('[data-testid="engine-details"]').waitFor({ state: "detached" });

  // Nothing runs: on a desktop the task panel keeps its room (it appearing moved the transcript) and says so.
  const tasks = page.locator("aside#tasks");
  expect(await tasks.textContent()).toContain("Nothing is running.");
  await say(page, "run a long task");
  await until(
    "Working",
    () => status.textContent(),
    (t) => t?.trim() === "Working",
    30_000,
  );
  expect(await tasks.isVisible()).toBe(true);
  await tasks.locator("li").first().waitFor();
  await page.getByLabel("message").press("Escape");
  await until(
    "Ready again",
    () => status.textContent(),
    (t) => t?.trim() === "Ready",
    30_000,
  );
  await until(
    "the panel says nothing runs",
    () => tasks.textContent(),
    (t) => (t ?? "").includes("Nothing is running."),
    30_000,
  );

  // The browser still says "online", but the server does not answer: the probe says Offline.
  await page.route("**/*network-probe*", (route) => route.abort("connectionrefused"));
  await page.evaluate(() => dispatchEvent(new Event("online")));
  await until(
    "Offline",
    () => status.textContent(),
    (t) => t?.trim() === "Offline",
  );
  await page.unroute("**/*network-probe*");
  await page.evaluate(() => dispatchEvent(new Event("online")));
  await until(
    "Ready once the server answers",
    () => status.textContent(),
    (t) => t?.trim() === "Ready",
  );
});

test("an unknown deep link says there is no such conversation and offers the way back", async () => {
  const page = await openApp("deeplink");
  const errors: string[] = [];
  page.on("pageerror", (e) => errors.push(e.message));
  await page.evaluate(() => {
    location.hash = "#/c/99999";
  });
  const missing = page.locator('[data-testid="no-such-conversation"]');
  await missing.waitFor({ timeout: 15_000 });
  expect(await missing.textContent()).toMatch(/No such conversation/);
  await missing.getByRole("link", { name: "Back to the main conversation" }).click();
  await page.getByLabel("message").waitFor();
  expect(await missing.count()).toBe(0);
  expect(errors).toEqual([]);
});

test("the conversation list is live in every tab: titled from the first input, renamed in place, searched by title and text", async () => {
  const a = await openApp("list");
  const b2 = await app.open({ url: a.url(), label: "list-2", viewport: { width: 1280, height: 800 } });
  const titles = (page: Page) =>
    page.locator('[data-testid="conversation-list"] li a .name').allTextContents();

  await say(a, "hello from the main conversation");
  await settled(a, 1);
  await a.getByRole("button", { name: "New conversation" }).click();
  await until(
    "the new conversation open",
    () => a.evaluate(() => location.hash),
    (h) => h !== "" && h !== "#/c/1",
  );
  await say(a, "Plan a trip to Rome\nwith two stops");
  // The other tab's list shows it, titled from the first line of its first input.
  await until(
    "the title in the other tab",
    () => titles(b2),
    (t) => t.includes("Plan a trip to Rome"),
  );
  expect((await titles(b2))[0]).toBe("Plan a trip to Rome");

  // Rename in the second tab (the row's buttons show on hover); the first follows.
  await b2.locator('[data-testid="conversation-list"] li').filter({ hasText: "Plan a trip to Rome" }).hover();
  await b2.getByRole("button", { name: "Rename Plan a trip to Rome" }).click();
  const field = b2.getByLabel("New title");
  await field.fill("Rome, in May");
  await field.press("Enter");
  await until(
    "the rename in the first tab",
    () => titles(a),
    (t) => t.includes("Rome, in May"),
  );

  // Search: by title at once, by text through the engine.
  const search = a.getByLabel("Search conversations");
  await search.fill("may");
  await until(
    "a title match",
    () => titles(a),
    (t) => t.length === 1 && t[0] === "Rome, in May",
  );
  // "two stops" is only in the second line of the input, not in any title.
  await search.fill("two stops");
  await until(
    "a text match",
    () => titles(a),
    (t) => t.length === 1 && t[0] === "Rome, in May",
  );
  await search.fill("nothing says this");
  await a.getByText("No conversation matches.").waitFor();
});

test("usage and cost show per conversation under the composer and for all conversations in the details", async () => {
  const page = await openApp("usage");
  await say(page, "hello there");
  await settled(page, 1);
  const line = page.locator('[data-testid="usage"] summary');
  await until(
    "the usage line",
    () => line.textContent(),
    (t) => /^\d[\d.]*k? in · \d[\d.]*k? out · \$0$/.test(t ?? ""),
  );
  await line.click();
  expect(await page.locator('[data-testid="usage"] th').allTextContents()).toEqual(["demo/demo-1"]);
  await page.getByRole("button", { name: "About the engine" }).click();
  const total = page.locator('[data-testid="usage-total"]');
  await total.waitFor();
  expect(await total.textContent()).toBe(await line.textContent());
});

const POLL = { timeout: 20_000, interval: 100 };

test("settings: a model found by search, a key saved, tested and removed without ever showing, thinking, instructions and the demo speed kept", async () => {
  const KEY = "sk-e2e-FAKE-9f8e7d6c5b4a39281706";
  const page = await openApp("settings");
  await page.getByTestId("open-settings").click();
  const dialog = page.getByTestId("settings");
  await dialog.waitFor();
  await expect.poll(() => dialog.getByTestId("current-model").textContent(), POLL).toContain("Demo");
  // Search narrows the grouped list; providers a browser cannot use are not offered at all.
  await dialog.getByTestId("model-search").fill("gpt-4o-mini");
  const list = dialog.getByTestId("model-list");
  await expect.poll(() => list.getByRole("group").count(), POLL).toBeGreaterThan(0);
  const groups = await list
    .getByRole("group")
    .evaluateAll((els) => els.map((e) => e.getAttribute("aria-label")));
  expect(groups).toContain("OpenAI");
  expect(groups).not.toContain("Azure OpenAI");
  await list.getByRole("group", { name: "OpenAI", exact: true }).getByRole("button").first().click();
  await expect.poll(() => dialog.getByTestId("current-model").textContent(), POLL).toContain("(OpenAI)");
  // The note names the key it needs in words: the provider's name, with its article.
  await dialog.getByText(/It needs an OpenAI API key: add one below\./).waitFor();
  // The provider's key row appears; the key is saved and the field empties.
  const row = dialog.getByTestId("key-openai");
  await expect.poll(() => row.textContent(), POLL).toContain("no key");
  await row.getByLabel("OpenAI API key").fill(KEY);
  await row.getByRole("button", { name: "Save" }).click();
  await expect.poll(() => row.textContent(), POLL).toContain("key saved");
  expect(await row.getByLabel("OpenAI API key").inputValue()).toBe("");
  // Testing it sends a tiny request: offline here it cannot be reached, online the fake key is rejected.
  await row.getByRole("button", { name: "Test" }).click();
  const words = await until(
    "the key check's answer",
    () => row.locator(".check").textContent(),
    (t) => Boolean(t && !t.startsWith("Checking")),
    40_000,
  );
  expect(words).toMatch(/could not be reached|rejected the API key/);
  // The key is in no part of the page, its storage or the console.
  const everywhere = await page.evaluate(
    () => document.documentElement.outerHTML + JSON.stringify(localStorage),
  );
  expect(everywhere).not.toContain(KEY);
  expect(app.logs.join("\n")).not.toContain(KEY);
  await row.getByRole("button", { name: "Remove" }).click();
  await expect.poll(() => row.textContent(), POLL).toContain("no key");
  // A reasoning model's thinking level, instructions, and the demo speed, kept across a reload.
  await dialog.getByLabel("Instructions").fill("Answer in one sentence.");
  await dialog.getByRole("button", { name: "Save instructions" }).click();
  await expect
    .poll(() => dialog.getByRole("status").first().textContent(), POLL)
    .toContain("Saved the instructions");
  await dialog.getByTestId("demo-speed").selectOption("fast");
  await expect.poll(() => dialog.getByRole("status").first().textContent(), POLL).toContain("fast");
  await page.screenshot({ path: shot("settings-1280") });
  await page.keyboard.press("Escape");
  await dialog.waitFor({ state: "detached" });
  await page.reload();
  await waitPhase(page, "ready");
  await page.getByTestId("open-settings").click();
  await expect.poll(() => page.getByLabel("Instructions").inputValue(), POLL).toBe("Answer in one sentence.");
  expect(await page.getByTestId("demo-speed").inputValue()).toBe("fast");
  await expect.poll(() => page.getByTestId("current-model").textContent(), POLL).toContain("(OpenAI)");
});

test("export and import: the file carries no key and imports as a new conversation; a malformed file is refused; hostile imported text stays inert; the workspace files are listed, viewed and deleted", async () => {
  const KEY = "sk-e2e-EXPORT-5a4b3c2d1e0f99887766";
  const page = await openApp("transfer");
  await page.evaluate(
    (key) =>
      (
        globalThis as unknown as { __engine: { api: { keys: { set(p: string, k: string): Promise<void> } } } }
      ).__engine.api.keys.set("openai", key),
    KEY,
  );
  await say(page, "write a note");
  await settled(page, 3);
  // The workspace browser shows the note, its text, and deletes it after a confirming click.
  await page.getByTestId("open-files").click();
  const files = page.getByTestId("files");
  await expect
    .poll(() => files.getByTestId("file").allTextContents(), POLL)
    .toEqual([expect.stringContaining("notes/note-1.md")]);
  await files.getByRole("button", { name: "View" }).click();
  await expect.poll(() => files.getByTestId("file-text").textContent(), POLL).toMatch(/^# Note 1/);
  const [saved] = await Promise.all([
    page.waitForEvent("download"),
    files.getByRole("button", { name: "Download" }).click(),
  ]);
  expect(saved.suggestedFilename()).toBe("note-1.md");
  expect(await readFile((await saved.path())!, "utf8")).toMatch(/^# Note 1/);
  await page.screenshot({ path: shot("files-1280") });
  await files.getByRole("button", { name: "Delete" }).click();
  await files.getByRole("button", { name: "Really delete?" }).click();
  await expect.poll(() => files.textContent(), POLL).toContain("The workspace is empty");
  await page.keyboard.press("Escape");
  await files.waitFor({ state: "detached" });
  // Export: a download of versioned JSON without the key.
  const [download] = await Promise.all([page.waitForEvent("download"), page.getByTestId("export").click()]);
  const exported = await readFile((await download.path())!, "utf8");
  expect(exported).not.toContain(KEY);
  const file = JSON.parse(exported) as { format: string; version: number; entries: Array<{ kind: string }> };
  expect(file.format).toBe("durable-agent/conversation");
  expect(file.entries.filter((e) => e.kind === "pi.assistant")).toHaveLength(3);
  // A malformed file is refused in words and adds no conversation.
  const listed = () => page.locator('[data-testid="conversation-list"] li').count();
  const before = await listed();
  await page.getByTestId("import-file").setInputFiles({
    name: "broken.json",
    mimeType: "application/json",
    buffer: Buffer.from('{"format":"durable-agent/conversation","version":1,"entries":{}}'),
  });
  await expect
    .poll(() => page.getByTestId("transfer-message").textContent(), POLL)
    .toMatch(/cannot be imported: it has no entries list\. Nothing was written/);
  expect(await listed()).toBe(before);
  // A crafted file whose assistant text is hostile HTML imports as a new conversation, rendered inert.
  const hostile = JSON.parse(exported) as {
    entries: Array<{ kind: string; model?: Array<{ role: string; content: unknown }> }>;
  };
  const answer = hostile.entries.findLast((e) => e.kind === "pi.assistant")!;
  answer.model![0]!.content = [
    {
      type: "text",
      text: 'Look: <img src=x onerror="window.__pwned=1"> <script>window.__pwned=2</script> [go](javascript:window.__pwned=3) <a href="javascript:window.__pwned=4">x</a>',
    },
  ];
  await page.getByTestId("import-file").setInputFiles({
    name: "hostile.json",
    mimeType: "application/json",
    buffer: Buffer.from(JSON.stringify(hostile)),
  });
  await until(
    "the imported conversation open",
    () => page.evaluate(() => location.hash),
    (h) => /^#\/c\/\d+$/.test(h) && h !== "#/c/1",
  );
  await expect.poll(listed, POLL).toBe(before + 1);
  await expect
    .poll(() => lastAnswer(page).textContent(), POLL)
    .toContain("<script>window.__pwned=2</script>");
  expect(await hostileDom(page)).toEqual({ pwned: null, images: 0, scripts: 0, handlers: [], jsLinks: 0 });
});

test("a task is stopped from the task panel: its tool call ends aborted and the panel empties", async () => {
  const page = await openApp("abort-task");
  await say(page, "run a long task");
  await page.locator('[data-testid="tool-slot"][data-status="running"]').waitFor();
  const tree = page.getByTestId("task-tree");
  await tree.waitFor();
  // The tool task's own Stop button: its call ends aborted, and the run goes on to an answer.
  // The panel says it in a person's words: "Stop task: running the sleep tool" (lib/task-rows.ts).
  await tree.getByRole("button", { name: /^Stop task: running the \w+ tool$/ }).click();
  await page.locator('[data-testid="tool-call"][data-status="aborted"]').waitFor({ timeout: 30_000 });
  await until(
    "the task panel empty",
    () => page.getByTestId("task-tree").count(),
    (n) => n === 0,
    30_000,
  );
  expect(await page.getByRole("alert").count()).toBe(0);
});

test("axe-core finds no serious or critical violation on the chat, settings and files, in light and dark", async () => {
  const page = await openApp("axe");
  await say(page, "write a note");
  await settled(page, 3);
  for (const scheme of ["light", "dark"] as const) {
    await page.emulateMedia({ colorScheme: scheme });
    expect(await seriousViolations(page), `chat, ${scheme}`).toEqual([]);
    await page.getByTestId("open-settings").click();
    await page.getByTestId("settings").waitFor();
    await expect
      .poll(() => page.getByTestId("model-list").getByRole("button").count(), POLL)
      .toBeGreaterThan(0);
    expect(await seriousViolations(page), `settings, ${scheme}`).toEqual([]);
    await page.keyboard.press("Escape");
    await page.getByTestId("open-files").click();
    await page.getByTestId("files").getByTestId("file").first().waitFor();
    expect(await seriousViolations(page), `files, ${scheme}`).toEqual([]);
    await page.keyboard.press("Escape");
    await page.getByTestId("files").waitFor({ state: "detached" });
  }
});

test("Fork from here opens a new conversation that has the transcript through that message and continues on its own", async () => {
  const page = await openApp("fork");
  await say(page, "first question");
  await settled(page, 1);
  await say(page, "second question");
  await settled(page, 2);
  const userTexts = () =>
    page.locator('[data-testid="entries"] > [data-kind="pi.user"] .text').allTextContents();
  const parentHash = await page.evaluate(() => location.hash);
  // The first answer's action: the fork sees the first exchange, not the second.
  const firstAnswer = page.locator('[data-testid="entries"] > [data-kind="pi.assistant"]').first();
  await firstAnswer.hover();
  await firstAnswer.getByRole("button", { name: "Fork from here" }).click();
  const forkHash = await until(
    "the fork open",
    () => page.evaluate(() => location.hash),
    (h) => /^#\/c\/\d+$/.test(h) && h !== parentHash && h !== "#/c/1",
  );
  await until("the fork's transcript", userTexts, (t) => t.length === 1 && t[0] === "first question");
  expect(await page.locator('[data-testid="entries"] > [data-kind="pi.assistant"]').count()).toBe(1);
  await until(
    "the fork in the list",
    () => page.locator('[data-testid="conversation-list"] li a .name').allTextContents(),
    (t) => t.includes("first question (fork)"),
  );
  await say(page, "only in the fork");
  await settled(page, 2);
  expect(await userTexts()).toEqual(["first question", "only in the fork"]);
  expect(await page.evaluate(() => location.hash)).toBe(forkHash);
});
