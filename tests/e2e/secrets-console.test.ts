/**
 * Issue 28, part 3, logs: the tab's console in Chromium (page.on("console") and the console of the
 * engine's dedicated worker, page.on("worker")) through a run that uses a saved API key and a saved
 * server token, where the provider rejects the request with an error that quotes both back. Neither
 * secret appears in any console line; the key is not in the page's DOM or localStorage. (The engine's own
 * console on Node is tests/unit/app/secrets-logs.test.ts; the SharedWorker's and the service
 * worker's consoles for a key are transcript.test.ts.)
 */
import type { Route } from "playwright-core";
import { expect, test } from "vitest";
import { engine } from "./browser.ts";
import { appSuite, appUrl, say, uniqueStore, until, useRoutedModel } from "./page.ts";

const app = appSuite({ logTail: 150 });

const KEY = "sk-e2e-TABCONSOLE-7d6c5b4a39281706";
const TOKEN = "home.TABCONSOLEtoken_0f1e2d3c4b5a6978";
const OPENAI = { provider: "openai", modelId: "gpt-4o-mini" };

test("a saved key and server token, quoted back in a provider's error, reach neither the tab's console nor its engine worker's", async () => {
  const lines: string[] = [];
  const page = app.record(await app.browser.newPage(), "secrets");
  page.on("console", (m) => lines.push(`[page ${m.type()}] ${m.text()}`));
  page.on("pageerror", (e) => lines.push(`[page error] ${e.message}\n${e.stack}`));
  page.on("worker", (worker) => worker.on("console", (m) => lines.push(`[worker ${m.type()}] ${m.text()}`)));
  await app.browser.context.route("https://api.openai.com/**", async (route: Route) => {
    const auth = route.request().headers().authorization ?? "";
    await route.fulfill({
      status: 401,
      contentType: "application/json",
      body: JSON.stringify({
        error: {
          message: `Incorrect API key provided: ${auth.replace(/^Bearer /, "")} (server token ${TOKEN}).`,
          type: "invalid_request_error",
        },
      }),
    });
  });
  // The engine in a dedicated worker: its fetches are routed, and its console is the page's worker's.
  await page.goto(appUrl(app.server.url, { store: uniqueStore("secrets"), engine: "dedicated" }));
  await page.getByLabel("message").waitFor();
  await engine(page, "remote.set", "http://127.0.0.1:9", TOKEN);
  await useRoutedModel(page, OPENAI, KEY);
  await say(page, "hello with a saved key");
  const failure = await until(
    "the rejection said in words",
    () => page.locator('[data-testid="entries"] > [data-kind="pi.assistant"]').last().textContent(),
    (t) => /API key/i.test(t ?? ""),
    90_000,
  );
  // The key the call used and the saved server token the provider quoted back are both redacted from
  // the stored error (agent/services.ts withoutSecrets, with the app's saved secrets).
  expect(failure).not.toContain(KEY);
  expect(failure).not.toContain(TOKEN);
  // The listening works: a line logged in the page and one in the engine's worker are heard.
  await page.evaluate(() => console.log("probe: page heard"));
  expect(page.workers().length).toBeGreaterThan(0);
  for (const worker of page.workers()) await worker.evaluate(() => console.log("probe: worker heard"));
  await until(
    "the probes heard",
    async () => lines.join("\n"),
    (all) => all.includes("probe: page heard") && all.includes("probe: worker heard"),
  );
  const holding = lines.filter((line) => line.includes(KEY) || line.includes(TOKEN));
  expect(holding).toEqual([]);
  const html = await page.evaluate(() => document.documentElement.outerHTML + JSON.stringify(localStorage));
  expect(html).not.toContain(KEY);
});
