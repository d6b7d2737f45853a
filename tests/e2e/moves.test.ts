/**
 * Moving a conversation between homes from the app (issue 27, item 4), in real Chromium against a
 * real local server (workerd through miniflare: tests/server/miniflare.ts). Shown here:
 * - "Run on the server" in the middle of a long task (the demo model's "run a long task": a
 *   `sleep` tool call running): the conversation opens on the server; the browser's copy is listed
 *   "Lives on the server" and is read-only; then the whole first browser is closed (its
 *   SharedWorker goes with it), the run goes on and finishes on the server, and a second browser
 *   profile (another device) with the same address and token sees it finished, every step once
 *   (one call, one tool result, one answer);
 * - "Bring back to this browser" of a server conversation in the middle of its long task: it opens
 *   in this browser, finishes here with every step once and takes a new message (live); the
 *   server's copy is listed "Lives in a browser" and is read-only;
 * - a token the server refuses: "Run on the server" says so, and the conversation stays here,
 *   unmarked and running.
 */
import type { Page } from "playwright-core";
import { afterAll, beforeAll, expect, test } from "vitest";
import { type ServerWorker, startServerWorker } from "../server/miniflare.ts";
import { seriousViolations } from "./axe.ts";
import { launchBrowser } from "./browser.ts";
import { appSuite, entriesOf, say, settled, shot, until } from "./page.ts";

const app = appSuite({ logTail: 150 });
let server: ServerWorker;

beforeAll(async () => {
  server = await startServerWorker({ entry: "space-entry.ts", objects: { SPACES: "TestSpace" } });
}, 120_000);
afterAll(async () => {
  await server?.stop();
});

/** Fill the settings' Server section with the server's address and a token, save, close. */
async function attach(page: Page, token: string, state = "connected"): Promise<void> {
  await page.getByTestId("open-settings").first().click();
  await page.getByTestId("server-url").fill(server.url().toString());
  await page.getByTestId("server-token").fill(token);
  await page.getByTestId("server-save").click();
  await until(
    `the server section ${state}`,
    () =>
      page.evaluate(
        () => document.querySelector('[data-testid="server-section"]')?.getAttribute("data-state") ?? "",
      ),
    (s) => s === state,
  );
  await page.getByRole("button", { name: "Close settings" }).click();
}

const hashOf = (page: Page) => page.evaluate(() => location.hash);

/** Wait until the open conversation's long task is running (its tool slot shows). */
const toolRunning = (page: Page) =>
  page.locator('[data-testid="tool-slot"]').first().waitFor({ state: "attached", timeout: 60_000 });

/** The committed entries of the open conversation, counted by kind. */
async function counts(page: Page): Promise<{ user: number; assistant: number; results: number }> {
  return {
    user: await page.locator('[data-testid="entries"] > [data-kind="pi.user"]').count(),
    assistant: await page.locator('[data-testid="entries"] > [data-kind="pi.assistant"]').count(),
    results: await entriesOf(page, "pi.tool-result").count(),
  };
}

interface View {
  readonly busy: boolean;
  readonly live: number;
  readonly entries: ReadonlyArray<{ id: number; kind: string }>;
}

test("a long task moved to the server goes on with every tab closed; another device sees it finished, every step once", async () => {
  const space = "e2e-move-out";
  const token = server.token(space);
  const first = await launchBrowser();
  let remote: number;
  try {
    const a = await app.open({
      label: "device-a",
      browser: first,
      viewport: { width: 1280, height: 800 },
      composer: true,
    });
    await attach(a, token);
    await say(a, "run a long task");
    await toolRunning(a);
    const local = Number(/#\/c\/(\d+)/.exec(await hashOf(a))?.[1] ?? "1");

    await a.getByTestId("move-to-server").click();
    await until(
      "the conversation opened on the server",
      () => hashOf(a),
      (h) => /^#\/s\/\d+$/.test(h),
    );
    remote = Number((await hashOf(a)).slice("#/s/".length));
    await a.getByTestId("server-home").waitFor();
    // The browser's copy: listed as living on the server, read-only, with a link to the server copy.
    const badge = a.locator(
      `[data-testid="conversation-list"] li[data-id="${local}"] [data-testid="away-badge"]`,
    );
    await badge.waitFor({ state: "attached" });
    expect(await badge.textContent()).toBe("Lives on the server");
    await a.evaluate((id) => {
      location.hash = `#/c/${id}`;
    }, local);
    await a.getByTestId("composer-away").waitFor();
    expect(await a.getByTestId("away").textContent()).toContain("Lives on the server");
    expect(await a.getByTestId("away-link").getAttribute("href")).toBe(`#/s/${remote}`);
    expect(await a.getByLabel("message").count()).toBe(0);
    expect(await a.getByTestId("move-to-server").count()).toBe(0);
    expect(await seriousViolations(a)).toEqual([]);
    await a.screenshot({ path: shot("moved-to-server-local-copy") });
  } finally {
    // Every tab, the SharedWorker and the whole browser go.
    await first.close();
  }

  // With no browser open anywhere, the run goes on on the server and finishes.
  let finished: View | undefined;
  await until(
    "the run finished on the server",
    async () => (finished = await server.call<View>(`/space/${space}/view?conversation=${remote}`)),
    (v) => !v.busy && v.live === 0 && v.entries.filter((e) => e.kind === "pi.assistant").length === 2,
    90_000,
  );
  const kinds = finished!.entries.map((e) => e.kind).filter((k) => k !== "pi.system");
  expect(kinds).toEqual(["pi.user", "pi.assistant", "pi.tool-result", "pi.assistant"]);

  // Another device: a second profile with the same address and token sees it finished, once.
  const b = await app.open({ label: "device-b", viewport: { width: 1280, height: 800 }, composer: true });
  await attach(b, token);
  await b.locator(`[data-testid="server-conversation-list"] li[data-id="${remote}"] a`).click();
  await settled(b, 2);
  expect(await counts(b)).toEqual({ user: 1, assistant: 2, results: 1 });
  expect(await b.getByTestId("home-bar").textContent()).toContain("Bring back to this browser");
});

test("Bring back to this browser in the middle of a long task: it finishes here once and stays live; the server's copy is read-only", async () => {
  const space = "e2e-bring-back";
  const page = await app.open({ label: "back", viewport: { width: 1280, height: 800 }, composer: true });
  await attach(page, server.token(space));
  await page.getByTestId("server-new").click();
  await until(
    "a new server conversation",
    () => hashOf(page),
    (h) => /^#\/s\/\d+$/.test(h),
  );
  const remote = Number((await hashOf(page)).slice("#/s/".length));
  await page.getByLabel("message").waitFor();
  await say(page, "run a long task");
  await toolRunning(page);
  await page.screenshot({ path: shot("server-conversation-bring-back") });

  await page.getByTestId("bring-back").click();
  await until(
    "the conversation opened in this browser",
    () => hashOf(page),
    (h) => /^#\/c\/\d+$/.test(h),
  );
  await page.getByLabel("message").waitFor();
  await settled(page, 2);
  expect(await counts(page)).toEqual({ user: 1, assistant: 2, results: 1 });
  // Live here: a new message gets an answer.
  await say(page, "hello again");
  await settled(page, 3);
  expect(await counts(page)).toMatchObject({ user: 2, assistant: 3 });

  // The server's copy: listed as living in a browser, read-only, and it ran no more.
  const badge = page.locator(
    `[data-testid="server-conversation-list"] li[data-id="${remote}"] [data-testid="away-badge"]`,
  );
  await badge.waitFor({ state: "attached" });
  expect(await badge.textContent()).toBe("Lives in a browser");
  const there = await server.call<View>(`/space/${space}/view?conversation=${remote}`);
  expect(there.live).toBe(0);
  expect(there.entries.some((e) => e.kind === "pi.tool-result")).toBe(false);
  await page.locator(`[data-testid="server-conversation-list"] li[data-id="${remote}"] a`).click();
  await page.getByTestId("composer-away").waitFor();
  expect(await page.getByTestId("bring-back").count()).toBe(0);
  expect(await seriousViolations(page)).toEqual([]);
  await page.screenshot({ path: shot("brought-back-server-copy") });
});

test("a token the server refuses: Run on the server says so, and the conversation stays here, running", async () => {
  const space = "e2e-move-refused";
  const page = await app.open({ label: "refused", viewport: { width: 1280, height: 800 }, composer: true });
  await attach(page, `${space}.${"A".repeat(43)}`, "unauthorized");
  await say(page, "run a long task");
  await toolRunning(page);
  await page.getByTestId("move-to-server").click();
  await page.getByTestId("move-error").waitFor();
  expect(await page.getByTestId("move-error").textContent()).toContain("the server refused the token");
  expect(await page.locator('[data-testid="away-badge"]').count()).toBe(0);
  await settled(page, 2);
  expect(await counts(page)).toEqual({ user: 1, assistant: 2, results: 1 });
});
