/**
 * User tools in the app (issue 14 item 6), on the built app with the demo model and no key: a person
 * adds a tool in the settings (bad code is refused with the sandbox's error and nothing is listed;
 * an edit shows "version 2, active"), the demo model calls it through `codemode`, and the tab is
 * reloaded while the call runs: the answer still completes once. Then the per-conversation switch
 * drops the tool from one conversation, and the new settings sections are screenshotted at 1280 and
 * 390 px in light and dark and checked with axe-core.
 */
import { mkdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, beforeEach, expect, test } from "vitest";
import { appDir, type LaunchedBrowser, launchBrowser, type StaticServer, serveStatic } from "./browser.ts";

const require = createRequire(import.meta.url);
const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const shots = join(root, "test-results", "screenshots");

let server: StaticServer;
let b: LaunchedBrowser;
const logs: string[] = [];

beforeAll(async () => {
  server = await serveStatic(appDir());
  mkdirSync(shots, { recursive: true });
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

const POLL = { timeout: 30_000, interval: 100 };

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

async function openApp(label: string, width = 1280, height = 800): Promise<Page> {
  const page = await b.newPage();
  page.on("console", (m) => logs.push(`[${m.type()}] ${m.text()}`));
  page.on("pageerror", (e) => logs.push(`[pageerror] ${e.message}`));
  await page.setViewportSize({ width, height });
  const store = `${label}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
  await page.goto(`${server.url}?${new URLSearchParams({ debug: "1", store })}`);
  await ready(page);
  await page.getByLabel("message").waitFor();
  return page;
}

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

const lastAnswer = async (page: Page) =>
  (await page.locator('[data-testid="entries"] > [data-kind="pi.assistant"]').last().textContent()) ?? "";

async function openSettings(page: Page) {
  await page.getByTestId("open-settings").click();
  const dialog = page.getByTestId("settings");
  await dialog.waitFor();
  await dialog.getByTestId("user-tools").waitFor();
  return dialog;
}

/** The greeting tool, slow: it runs a three-second `sleep` (a nested call) before it answers. */
const SLOW_BODY = [
  "async (args, tools) => {",
  "  await tools.sleep({ seconds: 3, steps: 3 });",
  '  return "Hello, " + args.name + "!";',
  "}",
].join("\n");

async function saveTool(dialog: ReturnType<Page["getByTestId"]>, body: string) {
  await dialog.getByTestId("tool-body").fill(body);
  await dialog.getByTestId("save-tool").click();
}

test("a tool added in the settings is used by the demo model through codemode and survives a reload mid-call", async () => {
  const page = await openApp("user-tools");
  let dialog = await openSettings(page);
  // Bad code is refused with the sandbox's error; nothing is listed.
  await saveTool(dialog, "async (args) => {");
  await expect.poll(() => dialog.getByTestId("user-tools-error").textContent(), POLL).toMatch(/SyntaxError/);
  expect(await dialog.getByTestId("user-tool-greet").count()).toBe(0);
  // The example draft (greet) saved, then edited: the app shows the reload took effect.
  await saveTool(dialog, 'async (args, tools) => "Hi " + args.name');
  await expect
    .poll(() => dialog.getByTestId("user-tool-greet").getByTestId("tool-status").textContent(), POLL)
    .toBe("version 1, active");
  await saveTool(dialog, SLOW_BODY);
  await expect
    .poll(() => dialog.getByTestId("user-tool-greet").getByTestId("tool-status").textContent(), POLL)
    .toBe("version 2, active");
  await page.keyboard.press("Escape");
  await dialog.waitFor({ state: "detached" });

  await say(page, 'use my tool greet with {"name": "Ada"}');
  await page.locator('[data-testid="tool-slot"][data-status="running"]').waitFor({ timeout: 60_000 });
  await page.reload();
  await ready(page);
  await until(
    "the greeting answer",
    () => answers(page),
    (s) => s.busy === 0 && s.count >= 2,
  );
  expect(await lastAnswer(page)).toContain("greet answered: Hello, Ada!");
  const shown = (await page.locator('[data-testid="entries"]').textContent()) ?? "";
  expect(shown).not.toContain("interrupted");
  expect(shown).not.toContain("replay diverged");
  // Exactly one codemode call and one answer for the request: the run completed once.
  expect(await page.locator('[data-testid="entries"] > [data-kind="pi.assistant"]').count()).toBe(2);

  // Still stored after the reload, at the version the engine runs.
  dialog = await openSettings(page);
  await expect
    .poll(() => dialog.getByTestId("user-tool-greet").getByTestId("tool-status").textContent(), POLL)
    .toBe("version 2, active");
}, 240_000);

let axeCode: string | undefined;
const axeSource = () => (axeCode ??= readFileSync(require.resolve("axe-core/axe.min.js"), "utf8"));

/** axe-core's serious and critical violations inside `selector` (rule id and a few targets). */
async function seriousViolations(page: Page, selector: string): Promise<string[]> {
  // The app's CSP refuses inline scripts; the devtools protocol's evaluation is not bound by it.
  if (!(await page.evaluate(() => "axe" in globalThis))) await page.evaluate(axeSource());
  return page.evaluate(async (selector) => {
    const axe = (
      globalThis as unknown as {
        axe: {
          run(ctx: Element): Promise<{
            violations: Array<{ id: string; impact: string; nodes: Array<{ target: string[] }> }>;
          }>;
        };
      }
    ).axe;
    const result = await axe.run(document.querySelector(selector)!);
    return result.violations
      .filter((v) => v.impact === "serious" || v.impact === "critical")
      .map(
        (v) =>
          `${v.id}: ${v.nodes
            .slice(0, 3)
            .map((n) => n.target.join(" "))
            .join(", ")}`,
      );
  }, selector);
}

test("the per-conversation switch drops a user tool; the sections pass axe-core and fit at 1280 and 390 px, light and dark", async () => {
  const page = await openApp("user-tools-ui");
  let dialog = await openSettings(page);
  await saveTool(dialog, 'async (args) => "Hi " + args.name');
  await expect
    .poll(() => dialog.getByTestId("user-tool-greet").getByTestId("tool-status").textContent(), POLL)
    .toBe("version 1, active");
  const toggle = dialog.getByTestId("extension-user:greet");
  await expect.poll(() => toggle.isChecked(), POLL).toBe(true);
  await toggle.uncheck();
  await expect
    .poll(() => dialog.getByTestId("user-tools-note").textContent(), POLL)
    .toContain("Disabled user:greet");
  await page.keyboard.press("Escape");
  await dialog.waitFor({ state: "detached" });
  await say(page, 'use my tool greet with {"name": "Ada"}');
  await until(
    "the answer",
    () => answers(page),
    (s) => s.busy === 0 && s.count >= 1,
  );
  expect(await lastAnswer(page)).toContain("I don't see a tool named greet in this conversation");

  for (const scheme of ["light", "dark"] as const) {
    await page.emulateMedia({ colorScheme: scheme });
    for (const [width, height] of [
      [1280, 800],
      [390, 844],
    ] as const) {
      await page.setViewportSize({ width, height });
      dialog = await openSettings(page);
      await expect.poll(() => dialog.getByTestId("extension-user:greet").isChecked(), POLL).toBe(false);
      // Nothing wider than the dialog.
      const overflow = await dialog.evaluate((d) => d.scrollWidth - d.clientWidth);
      expect(overflow, `horizontal overflow at ${width} px, ${scheme}`).toBeLessThanOrEqual(0);
      const extensions = dialog.getByTestId("conversation-extensions");
      await extensions.scrollIntoViewIfNeeded();
      await extensions.screenshot({ path: join(shots, `extensions-${scheme}-${width}.png`) });
      const tools = dialog.getByTestId("user-tools");
      await tools.scrollIntoViewIfNeeded();
      await tools.screenshot({ path: join(shots, `user-tools-${scheme}-${width}.png`) });
      expect(
        await seriousViolations(page, '[data-testid="user-tools"]'),
        `your tools, ${scheme}, ${width}`,
      ).toEqual([]);
      expect(
        await seriousViolations(page, '[data-testid="conversation-extensions"]'),
        `extensions, ${scheme}, ${width}`,
      ).toEqual([]);
      await page.keyboard.press("Escape");
      await dialog.waitFor({ state: "detached" });
    }
  }
}, 240_000);
