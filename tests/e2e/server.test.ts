/**
 * The app attached to a server space (issue 27), in real Chromium against a real local server:
 * workerd through miniflare (tests/server/miniflare.ts: the server's own front door, token check
 * and space, on a free port and a temporary folder). Shown here:
 * - with no server set the app opens no WebSocket and shows no server section;
 * - the address and token go in the settings' "Server" section; "Test connection" says it works;
 *   the list gains "On the server" with the space's name and a connected dot;
 * - a second browser profile (another device) attaches to the same space, makes a conversation
 *   there and sends a message to the demo model; the reply shows live on both devices, and a message
 *   sent from the first shows on the second; the conversation says it runs on the server, and its
 *   settings are the server's (no browser key offered for it);
 * - a wrong token: "Test connection" says the server refused it, and saved, the section says
 *   "Token refused" instead of trying again and again (another tab too), and "Disconnect" makes
 *   every tab browser-only again;
 * - axe finds nothing serious in the settings and the page with a server section; screenshots of
 *   both at 1280 and 390 px, light and dark, go to test-results/screenshots/.
 */
import type { Page } from "playwright-core";
import { afterAll, beforeAll, expect, test } from "vitest";
import { type ServerWorker, startServerWorker } from "../server/miniflare.ts";
import { seriousViolations } from "./axe.ts";
import { launchBrowser } from "./browser.ts";
import { appSuite, eachLook, lastAnswer, say, settleAnimations, settled, until } from "./page.ts";

const app = appSuite({ logTail: 120 });
let server: ServerWorker;

beforeAll(async () => {
  server = await startServerWorker({ entry: "space-entry.ts", objects: { SPACES: "TestSpace" } });
}, 120_000);
afterAll(async () => {
  await server?.stop();
});

const spaceUrl = (space: string) => new URL(`/space/${space}`, server.url()).toString();

/** Open the settings, fill the Server section with the server's address alone (the token names the space), save. */
async function attach(page: Page, token: string): Promise<void> {
  await page.getByTestId("open-settings").first().click();
  await page.getByTestId("server-url").fill(server.url().toString());
  await page.getByTestId("server-token").fill(token);
  await page.getByTestId("server-save").click();
}

const closeSettings = (page: Page) => page.getByRole("button", { name: "Close settings" }).click();

const serverState = (page: Page) =>
  page.evaluate(
    () => document.querySelector('[data-testid="server-section"]')?.getAttribute("data-state") ?? "",
  );

const serverTitles = (page: Page) =>
  page.locator('[data-testid="server-conversation-list"] li a .name').allTextContents();

/** On a phone the list is a drawer: open it when its content is out of view. */
async function showList(page: Page): Promise<void> {
  const toggle = page.getByRole("button", { name: "Conversations" });
  if ((await toggle.isVisible()) && (await toggle.getAttribute("aria-expanded")) !== "true") {
    await toggle.click();
    await settleAnimations(page);
  }
}

test("two devices on one server conversation: the demo model's reply shows live on both; no socket without a server", async () => {
  const space = "e2e-live";
  const token = server.token(space);
  const a = await app.open({ label: "device-a", viewport: { width: 1280, height: 800 }, composer: true });
  const sockets: string[] = [];
  a.on("websocket", (ws) => sockets.push(ws.url()));

  // Browser-only by default: no server section, and no socket opened.
  expect(await a.getByTestId("server-section").count()).toBe(0);
  await a.getByTestId("open-settings").first().click();
  await a.getByTestId("server-settings").waitFor();
  expect(sockets).toEqual([]);

  // The settings' Server section: test, then save and connect.
  await a.getByTestId("server-url").fill(spaceUrl(space));
  await a.getByTestId("server-token").fill(token);
  await a.getByTestId("server-test").click();
  await until(
    "the test's words",
    () => a.getByTestId("server-test-result").textContent(),
    (t) => (t ?? "").includes("answered"),
  );
  expect(await a.getByTestId("server-test-result").textContent()).toBe(
    `Connected: the space “${space}” answered.`,
  );
  await a.getByTestId("server-save").click();
  await until(
    "connected",
    () => serverState(a),
    (s) => s === "connected",
  );
  expect(await a.getByTestId("server-now").textContent()).toContain(`Attached to ${space}: Connected`);
  // The token is never shown again, nor kept in the page.
  expect(await a.getByTestId("server-token").inputValue()).toBe("");
  expect(await a.content()).not.toContain(token);
  await closeSettings(a);
  expect(await a.getByTestId("server-state").textContent()).toContain(space);

  // Another device: a second Chromium on a fresh profile.
  const otherBrowser = await launchBrowser();
  try {
    const b = await app.open({
      label: "device-b",
      browser: otherBrowser,
      viewport: { width: 1280, height: 800 },
      composer: true,
    });
    await attach(b, token);
    await until(
      "b connected",
      () => serverState(b),
      (s) => s === "connected",
    );
    await closeSettings(b);

    // B makes a conversation on the server and sends a message to the demo model.
    await b.getByTestId("server-new").click();
    await until(
      "b on the new server conversation",
      () => b.evaluate(() => location.hash),
      (h) => /^#\/s\/\d+$/.test(h),
    );
    const hash = await b.evaluate(() => location.hash);
    await b.getByTestId("server-home").waitFor();
    expect(await b.getByTestId("server-home").textContent()).toContain(
      `Runs on the server, in the space ${space}`,
    );
    await say(b, "Hello from device B");
    await settled(b, 1);
    const reply = (await lastAnswer(b).textContent()) ?? "";
    expect(reply.length).toBeGreaterThan(0);

    // A sees it in its server section, opens it, and sees the same reply.
    await until(
      "A lists it",
      () => serverTitles(a),
      (t) => t.includes("Hello from device B"),
    );
    await a.locator('[data-testid="server-conversation-list"] a', { hasText: "Hello from device B" }).click();
    expect(await a.evaluate(() => location.hash)).toBe(hash);
    await settled(a, 1);
    expect(await lastAnswer(a).textContent()).toBe(reply);

    // A sends; B, still on it, sees the second reply arrive.
    await say(a, "And hello from device A");
    await settled(a, 2);
    await settled(b, 2);
    expect(await lastAnswer(b).textContent()).toBe(await lastAnswer(a).textContent());
    const userTexts = (p: Page) =>
      p.locator('[data-testid="entries"] > [data-kind="pi.user"]').allTextContents();
    expect(await userTexts(b)).toEqual(await userTexts(a));
    expect((await userTexts(b)).length).toBe(2);

    // The browser's own list is untouched: the server's conversation is not in it.
    const local = await a.locator('[data-testid="conversation-list"] li a .name').allTextContents();
    expect(local).not.toContain("Hello from device B");

    // The page with a server section passes axe, and looks right in every look.
    expect(await seriousViolations(a)).toEqual([]);
    await eachLook(a, async (look) => {
      await showList(a);
      await a.screenshot({ path: look.shot("server-list") });
      // The conversation itself, with its bar saying where it runs (a phone's drawer closed first).
      if (await a.getByRole("button", { name: "Close the panel" }).isVisible()) {
        await a.keyboard.press("Escape");
        await settleAnimations(a);
      }
      await a.screenshot({ path: look.shot("server-chat") });
    });
    await a.setViewportSize({ width: 1280, height: 800 });
    await a.getByTestId("open-settings").first().click();
    await a.getByTestId("server-settings").waitFor();
    // The open conversation's settings are the server's: its model, no browser keys offered for it.
    await a.getByTestId("server-keys").waitFor();
    await until(
      "the server's models",
      () => a.getByTestId("current-model").textContent(),
      (t) => (t ?? "").includes("Demo"),
    );
    expect(await a.getByTestId("settings").textContent()).not.toContain("no conversation");
    expect(await seriousViolations(a, '[data-testid="settings"]')).toEqual([]);
    await eachLook(a, async (look) => {
      await a.getByTestId("server-settings").scrollIntoViewIfNeeded();
      await a.screenshot({ path: look.shot("server-settings") });
    });
  } finally {
    await otherBrowser.close();
  }
});

test("a wrong token: the test says the server refused it, and saved, the list says Token refused", async () => {
  const space = "e2e-refused";
  // A token of the right shape that the server did not make.
  const wrong = `${space}.${"A".repeat(43)}`;
  const page = await app.open({ label: "refused", viewport: { width: 1280, height: 800 }, composer: true });
  await page.getByTestId("open-settings").first().click();
  await page.getByTestId("server-url").fill(spaceUrl(space));
  await page.getByTestId("server-token").fill(wrong);
  await page.getByTestId("server-test").click();
  await until(
    "the test's words",
    () => page.getByTestId("server-test-result").textContent(),
    (t) => (t ?? "").includes("refused"),
  );
  expect(await page.getByTestId("server-test-result").textContent()).toContain(
    `The server refused the token for “${space}”`,
  );
  await page.getByTestId("server-save").click();
  await until(
    "unauthorized",
    () => serverState(page),
    (s) => s === "unauthorized",
  );
  expect(await page.getByTestId("server-state").textContent()).toContain("Token refused");
  expect(await page.getByTestId("server-now").textContent()).toContain("Token refused");
  expect(await seriousViolations(page, '[data-testid="settings"]')).toEqual([]);
  await closeSettings(page);
  expect(await page.getByTestId("server-section").textContent()).toContain("paste a new one in Settings");
  expect(await page.content()).not.toContain(wrong);
  expect(await seriousViolations(page)).toEqual([]);
  await eachLook(page, async (look) => {
    await showList(page);
    await page.screenshot({ path: look.shot("server-refused") });
  });
  await page.setViewportSize({ width: 1280, height: 800 });

  // Disconnect: the section leaves, the app is browser-only again.
  await page.getByTestId("open-settings").first().click();
  await page.getByTestId("server-disconnect").click();
  await until(
    "the section gone",
    () => page.getByTestId("server-section").count(),
    (n) => n === 0,
  );
});
