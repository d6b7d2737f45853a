/**
 * Code mode in the app, with the demo model and no key: "sum the sizes of the files slowly" makes the
 * model write a script that `codemode` runs (ls, then a two-second sleep per file); the tab is
 * reloaded while the call runs, and the call still ends once, with the sizes summed: the rerun script
 * got its journaled results back and finished.
 */
import type { Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, beforeEach, expect, test } from "vitest";
import { appDir, type LaunchedBrowser, launchBrowser, type StaticServer, serveStatic } from "./browser.ts";

let server: StaticServer;
let b: LaunchedBrowser;
const logs: string[] = [];

beforeAll(async () => {
  server = await serveStatic(appDir());
});
afterAll(async () => {
  await server?.close();
});
beforeEach(async () => {
  logs.length = 0;
  b = await launchBrowser();
});
afterEach(async (context) => {
  if (context.task.result?.state === "fail") console.log(`page logs:\n${logs.slice(-100).join("\n")}`);
  await b?.close();
});

/** Poll `probe` until `ok` holds (observable state, never a fixed sleep). */
async function until<T>(what: string, probe: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const last = await probe();
    if (ok(last)) return last;
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what}; last: ${JSON.stringify(last)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const ready = (page: Page) =>
  page
    .locator('[data-testid="engine-status"][data-phase="ready"]')
    .waitFor({ state: "attached", timeout: 60_000 });

async function say(page: Page, text: string): Promise<void> {
  const box = page.getByLabel("message");
  await box.fill(text);
  await box.press("Enter");
}

const answers = (page: Page) =>
  page.evaluate(() => ({
    busy: document.querySelectorAll('[data-testid="partial"], [data-testid="tool-slot"]').length,
    count: document.querySelectorAll('[data-testid="entries"] > [data-kind="pi.assistant"]').length,
  }));

test("the demo model's script runs in codemode and survives a reload mid-call", async () => {
  const page = await b.newPage();
  page.on("console", (m) => logs.push(`[${m.type()}] ${m.text()}`));
  page.on("pageerror", (e) => logs.push(`[pageerror] ${e.message}`));
  const store = `codemode-${Date.now().toString(36)}`;
  await page.goto(`${server.url}?${new URLSearchParams({ debug: "1", store })}`);
  await ready(page);
  await say(page, "write a note");
  await until(
    "the note written",
    () => answers(page),
    (s) => s.busy === 0 && s.count >= 2,
  );

  await say(page, "sum the sizes of the files slowly");
  await page.locator('[data-testid="tool-slot"][data-status="running"]').waitFor({ timeout: 60_000 });
  await page.reload();
  await ready(page);
  await until(
    "the summed answer",
    () => answers(page),
    (s) => s.busy === 0 && s.count >= 4,
  );

  const last =
    (await page.locator('[data-testid="entries"] > [data-kind="pi.assistant"]').last().textContent()) ?? "";
  expect(last).toContain("My script ran");
  expect(last).toMatch(/"files":1,"totalBytes":[1-9]\d*/);
  expect(last).toContain("notes/note-1.md:");
  const shown = (await page.locator('[data-testid="entries"]').textContent()) ?? "";
  expect(shown).not.toContain("interrupted");
  expect(shown).not.toContain("replay diverged");
}, 180_000);
