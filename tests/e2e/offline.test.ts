/**
 * Offline with the server stopped, on the built app: an input to a network model (groq, a fake key)
 * shows the durable retry's countdown while the provider fails, then, with the app's server stopped
 * and the provider unreachable, waits for the network in words while the header says Offline; a
 * reload with the server still stopped loads the app and the conversation's history from the service
 * worker's cache, and the wait goes on; when the server is back the request goes again and the answer
 * arrives once. Screenshots of the wait in light and dark at 1280 and 390 px.
 *
 * How the provider is faked, and why the engine runs in its dedicated worker (`?engine=dedicated`):
 * verified in Chromium with playwright-core 1.65 over CDP, `context.route` and `page.route` reach a
 * page's dedicated workers but not a SharedWorker (its fetch of a routed URL went to the network:
 * "Failed to fetch"), and `context.setOffline(true)` sets `navigator.onLine` to false in both kinds
 * of worker but fires no `online`/`offline` event in them. So the routed provider needs the dedicated
 * engine, and the engine's wait for the network cannot count on an `online` event (it probes the
 * server). Why the retry line never appeared in this test's first draft: a browser's network failure
 * reaches the engine as "Connection error." (the OpenAI SDK's words for a failed fetch), which was not
 * a retryable error then, so the run failed at once instead of retrying.
 */
import type { Page } from "playwright-core";
import { afterEach, expect, test } from "vitest";
import { appDir, type StaticServer, serveStatic } from "./browser.ts";
import { openAiStream, routeProvider } from "./openai-stream.ts";
import {
  appSuite,
  appUrl,
  eachLook,
  say,
  settleAnimations,
  uniqueStore,
  until,
  useRoutedModel,
  waitPhase,
} from "./page.ts";

const app = appSuite({ logTail: 150 });

/** This file's own server: stopped and started again on the same port (the suite's stays up). */
let server: StaticServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

const KEY = "gsk-e2e-FAKE-0a1b2c3d4e5f60718293";
const MODEL = { provider: "groq", modelId: "llama-3.1-8b-instant" };
const ANSWER = "Back online: here is the answer.";

/** A streamed completion of ANSWER. */
const completion = () =>
  openAiStream(ANSWER, { model: MODEL.modelId, usage: { prompt_tokens: 12, completion_tokens: 7 } });

/** The header's status label. */
const status = (page: Page) => page.getByTestId("engine-status").textContent();

/** How many committed answers on the page carry ANSWER. */
const answersShown = (page: Page) =>
  page.locator('[data-testid="entries"] > [data-kind="pi.assistant"]').filter({ hasText: ANSWER }).count();

async function screenshots(page: Page, name: string): Promise<void> {
  await eachLook(page, async (look) => {
    await settleAnimations(page);
    await page.getByTestId("network-wait").waitFor();
    await page.screenshot({ path: look.shot(name) });
  });
  await page.emulateMedia({ colorScheme: null });
  await page.setViewportSize({ width: 1280, height: 800 });
}

test("offline with the server stopped: a network model's input shows its countdown, then waits for the network in words; the app and its history load from the cache; the answer arrives once when the server is back", async () => {
  server = await serveStatic(appDir());
  const { port } = server;
  const url = appUrl(server.url, { store: uniqueStore("offline"), engine: "dedicated" });
  const page = await app.open({
    url,
    label: "offline",
    viewport: { width: 1280, height: 800 },
    composer: true,
  });
  // The reload below is served by the service worker: it must control this page first. It does not
  // claim the page that installed it, so that page is loaded once more while the server is up.
  await page.evaluate(() => navigator.serviceWorker.ready);
  if (!(await page.evaluate(() => navigator.serviceWorker.controller !== null))) {
    await page.reload();
    await waitPhase(page, "ready");
    await page.getByLabel("message").waitFor();
  }
  await until(
    "the service worker controls the page",
    () => page.evaluate(() => navigator.serviceWorker.controller !== null),
    (controlled) => controlled,
  );

  // The provider, routed (this reaches the dedicated engine's fetches): 503, then down, then up.
  const provider = await routeProvider(app.browser.context, { completion });
  await useRoutedModel(page, MODEL, KEY);

  // Online, the provider busy: the durable retry's countdown, in seconds.
  await say(page, "hello over the network");
  const retry = page.getByTestId("retry");
  await retry.waitFor({ timeout: 60_000 });
  expect(await retry.textContent()).toMatch(/Retrying in \d+ s|Retrying now/);

  // The server stops and the provider is unreachable: the run waits for the network, uncounted.
  provider.mode = "down";
  await server.close();
  const wait = page.getByTestId("network-wait");
  await wait.waitFor({ timeout: 60_000 });
  expect(await wait.textContent()).toContain("Waiting for the network");
  expect(await retry.count()).toBe(0);
  // The tab probes on an online event (and every 15 s): it finds the server gone.
  await page.evaluate(() => dispatchEvent(new Event("online")));
  await until(
    "the header says Offline while the run waits",
    () => status(page),
    (t) => t?.trim() === "Offline · waiting to go on",
  );

  // A reload with the server stopped: the app and the history load; the engine waits again.
  await page.reload();
  await waitPhase(page, "ready");
  await page
    .locator('[data-testid="entries"] [data-kind="pi.user"]')
    .filter({ hasText: "hello over the network" })
    .waitFor();
  await wait.waitFor({ timeout: 60_000 });
  await until(
    "the header says Offline after the reload",
    () => status(page),
    (t) => t?.trim() === "Offline · waiting to go on",
  );
  await screenshots(page, "offline-wait");
  expect(provider.sent.up).toBe(0);

  // The network is back: the engine's probe finds the server, the request goes again, once.
  provider.mode = "up";
  server = await serveStatic(appDir(), { port });
  await until(
    "the answer",
    () => answersShown(page),
    (n) => n === 1,
    60_000,
  );
  await wait.waitFor({ state: "detached" });
  await page.evaluate(() => dispatchEvent(new Event("online")));
  await until(
    "the header says Ready",
    () => status(page),
    (t) => t?.trim() === "Ready",
  );
  expect(await answersShown(page)).toBe(1);
  expect(provider.sent.up).toBe(1);
  // The fake key reached neither the page nor its logs.
  expect(await page.evaluate(() => document.documentElement.outerHTML)).not.toContain(KEY);
  expect(app.logs.join("\n")).not.toContain(KEY);
}, 240_000);
