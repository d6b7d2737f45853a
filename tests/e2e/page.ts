/**
 * Page helpers shared by the e2e files that drive the built app: the suite's server and browser
 * (`appSuite()` registers the hooks: one static server per file, a fresh browser and log per test,
 * the page logs and Chromium's stderr printed when a test fails), opening the app on its own store,
 * polling observable state (`until`, never a fixed sleep), the chat's composer and answers, and
 * the screenshots (`shot`, and `eachLook` for the light/dark x 1280/390 px looks).
 * Invariant: every wait here polls what a page shows or reports; nothing sleeps a fixed time.
 */
import { mkdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, beforeEach } from "vitest";
import {
  appDir,
  engine,
  killAndRelaunch,
  type LaunchedBrowser,
  launchBrowser,
  type StaticServer,
  serveStatic,
} from "./browser.ts";

/**
 * Poll `probe` until `ok` holds. A probe that throws (a page mid-reload) is retried; on timeout the
 * error names `what`, the last value and the last error.
 */
export async function until<T>(
  what: string,
  probe: () => Promise<T>,
  ok: (value: T) => boolean,
  timeoutMs = 60_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: T | undefined;
  let lastError: unknown;
  for (;;) {
    try {
      last = await probe();
      if (ok(last)) return last;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}; last value ${JSON.stringify(last)?.slice(0, 500)}` +
          (lastError ? `; last error ${String(lastError)}` : ""),
      );
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A store name no other test or run uses. */
export const uniqueStore = (label: string) =>
  `${label}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;

/** The app at `base` in debug mode (`__engine` on the page, the engine's `debug.*` endpoints). */
export function appUrl(base: string, params: Record<string, string>): string {
  return `${base}?${new URLSearchParams({ debug: "1", ...params })}`;
}

/** The store kind the tab's engine said it opened (its `ready` status; undefined before). */
export function storeKindOf(page: Page): Promise<string | undefined> {
  return page.evaluate(
    () =>
      (globalThis as unknown as { __engine: { status: { storeKind?: string } } }).__engine.status.storeKind,
  );
}

/** Wait until the tab's status line shows `phase` (the engine's status as the tab last heard it). */
export async function waitPhase(page: Page, phase: string, timeout = 60_000): Promise<void> {
  await page
    .locator(`[data-testid="engine-status"][data-phase="${phase}"]`)
    .waitFor({ state: "attached", timeout });
}

export interface OpenOptions {
  /** The page's URL; by default the app on a fresh store named after `label`. */
  url?: string;
  /** Names the page in the logs (and the fresh store). */
  label?: string;
  /** The status phase to wait for; "ready" by default. */
  phase?: string;
  /** Set before the page loads. */
  viewport?: { width: number; height: number };
  /** Also wait for the chat's composer. */
  composer?: boolean;
  /** Another browser than the suite's. */
  browser?: LaunchedBrowser;
}

export interface AppSuite {
  readonly server: StaticServer;
  readonly browser: LaunchedBrowser;
  /** This test's page logs so far. */
  readonly logs: string[];
  /** Log the page's console and errors under `label`. */
  record(page: Page, label: string): Page;
  /** Open the app in a new page and wait for its status (and composer). */
  open(options?: OpenOptions): Promise<Page>;
  /** SIGKILL the browser and start it again on its profile, as after a crash. */
  relaunch(): Promise<LaunchedBrowser>;
}

/**
 * For a failed test's report: each open page's address, the words of its alerts and status lines
 * (an error the app showed but never logged) and what its composer still holds (a message never
 * sent), read with a short bound.
 */
async function shown(browser: LaunchedBrowser | undefined): Promise<string> {
  const pages = browser?.browser.contexts().flatMap((c) => c.pages()) ?? [];
  const lines = await Promise.all(
    pages.map(async (page, i) => {
      const words = await Promise.race([
        page
          .evaluate(() => {
            const words = [...document.querySelectorAll('[role="alert"], [role="status"], [aria-live]')]
              .map((el) => (el.textContent ?? "").trim())
              .filter(Boolean);
            const box = document.querySelector<HTMLTextAreaElement>('[aria-label="message"]');
            if (box?.value) words.push(`composer still holds: ${box.value.slice(0, 200)}`);
            return words.join(" | ");
          })
          .catch((e: unknown) => `(unreadable: ${e instanceof Error ? e.message : String(e)})`),
        new Promise<string>((resolve) => setTimeout(() => resolve("(no answer in 2 s)"), 2000)),
      ]);
      return `[page ${i}] ${page.url()}: ${words || "(no alert or status text)"}`;
    }),
  );
  return lines.join("\n") || "(no page open)";
}

/** Register the file's hooks and hand back its server, browser and page opener. */
export function appSuite(options: { logTail?: number } = {}): AppSuite {
  const tail = options.logTail ?? 200;
  let server: StaticServer | undefined;
  let browser: LaunchedBrowser | undefined;
  const logs: string[] = [];

  beforeAll(async () => {
    server = await serveStatic(appDir());
  });
  afterAll(async () => {
    await server?.close();
  });
  beforeEach(async () => {
    logs.length = 0;
    browser = await launchBrowser();
  });
  afterEach(async (context) => {
    if (context.task.result?.state === "fail") {
      console.log(
        `page logs:\n${logs.slice(-tail).join("\n")}\nwhat the pages showed:\n${await shown(browser)}\nchromium stderr (tail):\n${browser?.log().slice(-3000)}`,
      );
    }
    await browser?.close();
  });

  const suite: AppSuite = {
    get server() {
      if (!server) throw new Error("the suite's server is not up yet");
      return server;
    },
    get browser() {
      if (!browser) throw new Error("the suite's browser is not up yet");
      return browser;
    },
    logs,
    record(page, label) {
      page.on("console", (m) => logs.push(`[${label} ${m.type()}] ${m.text()}`));
      page.on("pageerror", (e) => logs.push(`[${label} pageerror] ${e.message}`));
      return page;
    },
    async open(o = {}) {
      const label = o.label ?? "tab";
      const page = suite.record(await (o.browser ?? suite.browser).newPage(), label);
      if (o.viewport) await page.setViewportSize(o.viewport);
      await page.goto(o.url ?? appUrl(suite.server.url, { store: uniqueStore(label) }));
      await waitPhase(page, o.phase ?? "ready");
      if (o.composer) await page.getByLabel("message").waitFor();
      return page;
    },
    async relaunch() {
      browser = await killAndRelaunch(suite.browser);
      return browser;
    },
  };
  return suite;
}

// ---------------------------------------------------------------------------------------------
// The chat

/**
 * Give the open conversation (the one the page's URL names, the first by default) a network `model`
 * whose provider holds `key`, through the engine's debug endpoints; hands back the conversation.
 */
export async function useRoutedModel(
  page: Page,
  model: { readonly provider: string; readonly modelId: string },
  key: string,
): Promise<number> {
  await engine(page, "keys.set", model.provider, key);
  const conversation = Number(/#\/c\/(\d+)/.exec(page.url())?.[1] ?? "1");
  await engine(page, "settings.setModel", conversation, model);
  return conversation;
}

/** Send `text` from the composer the way a user does (Enter). */
export async function say(page: Page, text: string): Promise<void> {
  const box = page.getByLabel("message");
  await box.fill(text);
  await box.press("Enter");
}

/**
 * What the transcript shows in one look: how many answers are committed and whether anything still
 * streams or runs. Read apart, a partial appearing in between (it renders as a pi.assistant too)
 * passed for a settled answer.
 */
export const answersOnPage = (page: Page) =>
  page.evaluate(() => ({
    busy: document.querySelectorAll('[data-testid="partial"], [data-testid="tool-slot"]').length,
    // Committed entries only: the partial's pi.assistant sits inside its own wrapper.
    count: document.querySelectorAll('[data-testid="entries"] > [data-kind="pi.assistant"]').length,
  }));

/** Wait until `n` assistant entries are committed and nothing streams or runs. */
export const settled = (page: Page, n: number, timeoutMs = 60_000) =>
  until(
    `${n} settled answers`,
    () => answersOnPage(page),
    (s) => s.busy === 0 && s.count >= n,
    timeoutMs,
  );

/** The newest committed answer. */
export const lastAnswer = (page: Page) =>
  page.locator('[data-testid="entries"] > [data-kind="pi.assistant"]').last();

/** The transcript's entries of one kind. */
export const entriesOf = (page: Page, kind: string) =>
  page.locator(`[data-testid="entries"] [data-kind="${kind}"]`);

/** Let running CSS transitions (a drawer sliding after a resize) finish. */
export const settleAnimations = (page: Page) =>
  page.evaluate(() =>
    Promise.all(
      document
        .getAnimations()
        .filter((a) => a.effect?.getComputedTiming().endTime !== Number.POSITIVE_INFINITY)
        .map((a) => a.finished.catch(() => undefined)),
    ),
  );

// ---------------------------------------------------------------------------------------------
// Screenshots

/** Where the suite's screenshots are kept as test artifacts. */
export const screenshotDir = join(
  resolve(dirname(fileURLToPath(import.meta.url)), "../.."),
  "test-results",
  "screenshots",
);

/** The path of the screenshot `name`.png (its folder made on first use). */
export function shot(name: string): string {
  mkdirSync(screenshotDir, { recursive: true });
  return join(screenshotDir, `${name}.png`);
}

/** One of the four ways a person sees the app: a colour scheme at a window size. */
export interface Look {
  readonly scheme: "light" | "dark";
  readonly width: number;
  readonly height: number;
  /** The path of this look's screenshot `name-<scheme>-<width>`.png. */
  shot(name: string): string;
}

/** The window sizes every look is taken at: a desktop and a phone. */
export const LOOK_SIZES = [
  { width: 1280, height: 800 },
  { width: 390, height: 844 },
] as const;

/**
 * Run `body` in each look, light then dark, each at 1280 then 390 px: the page's colour scheme is
 * emulated and its window resized before `body` runs. The scheme stays emulated afterwards.
 */
export async function eachLook(page: Page, body: (look: Look) => Promise<void>): Promise<void> {
  for (const scheme of ["light", "dark"] as const) {
    await page.emulateMedia({ colorScheme: scheme });
    for (const { width, height } of LOOK_SIZES) {
      await page.setViewportSize({ width, height });
      // A width change starts transitions (the sidebar becomes a drawer and slides away at 390 px):
      // a screenshot taken mid-slide showed the drawer half over the chat.
      await settleAnimations(page);
      await body({ scheme, width, height, shot: (name) => shot(`${name}-${scheme}-${width}`) });
    }
  }
}
