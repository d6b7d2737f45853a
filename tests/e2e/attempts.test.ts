/**
 * Failed attempts, shown quietly, on the built app with a network model (groq, a fake key) whose
 * provider is routed (this reaches the engine in its dedicated worker, `?engine=dedicated`; see
 * offline.test.ts for why not a SharedWorker): the attempts a turn retried after are one muted line
 * ("2 attempts failed: ...", each attempt on demand), never red entries, while the countdown runs and
 * after the answer came; a run whose retries ran out ends with its last failure shown as an error.
 * The engine's entries are unchanged: every attempt is still a pi.assistant entry in the store.
 */
import type { Page } from "playwright-core";
import { expect, test } from "vitest";
import { engine } from "./browser.ts";
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
} from "./page.ts";

const app = appSuite({ logTail: 150 });

const KEY = "gsk-e2e-FAKE-attempts-5f4e3d2c1b0a";
const MODEL = { provider: "groq", modelId: "llama-3.1-8b-instant" };
const ANSWER = "Third time lucky: here is the answer.";

/** A streamed completion of ANSWER. */
const completion = () =>
  openAiStream(ANSWER, { model: MODEL.modelId, usage: { prompt_tokens: 12, completion_tokens: 7 } });

/** What the transcript shows of the failures: quiet lines (with their counts) and red entries. */
const failuresShown = (page: Page) =>
  page.evaluate(() => {
    const entries = document.querySelector('[data-testid="entries"]');
    return {
      quiet: [...(entries?.querySelectorAll('[data-testid="failed-attempts"]') ?? [])].map((e) =>
        Number(e.getAttribute("data-count")),
      ),
      red: entries?.querySelectorAll(".error").length ?? 0,
      answers: [...(entries?.querySelectorAll(':scope > [data-kind="pi.assistant"]') ?? [])].map(
        (e) => e.textContent ?? "",
      ),
    };
  });

/** The conversation's stored pi.assistant entries and how each ended. */
const storedAnswers = async (page: Page, conversation: number) =>
  (
    await engine<Array<{ kind: string; model?: Array<{ stopReason?: string }> }>>(
      page,
      "watches.entries",
      conversation,
    )
  )
    .filter((e) => e.kind === "pi.assistant")
    .map((e) => e.model?.[0]?.stopReason);

test("the attempts a turn retried after show as one quiet line, never red; a run whose retries ran out ends in one red error after them", async () => {
  const url = appUrl(app.server.url, { store: uniqueStore("attempts"), engine: "dedicated" });
  const page = await app.open({
    url,
    label: "attempts",
    viewport: { width: 1280, height: 800 },
    composer: true,
  });
  // The provider answers 503 while busy (the SDK's own retries within an attempt included), then
  // streams ANSWER.
  const provider = await routeProvider(app.browser.context, { completion });
  const conversation = await useRoutedModel(page, MODEL, KEY);

  await say(page, "hello, eventually");
  // While the countdown runs, the failed attempt is a quiet line, not a red answer.
  await page.getByTestId("retry").waitFor({ timeout: 60_000 });
  expect(await failuresShown(page)).toEqual({ quiet: [1], red: 0, answers: [] });
  const line = page.getByTestId("failed-attempts");
  expect(await line.locator("summary").textContent()).toMatch(/^1 attempt failed: .*503/);
  // The second attempt fails too; the third (after a backoff of seconds) gets the answer.
  await until(
    "two failed attempts stored",
    () => storedAnswers(page, conversation),
    (stored) => stored.length === 2,
    60_000,
  );
  provider.mode = "up";
  await until(
    "the answer after two failed attempts",
    () => failuresShown(page),
    (s) => s.answers.length === 1,
    60_000,
  );
  expect(await failuresShown(page)).toEqual({
    quiet: [2],
    red: 0,
    answers: [expect.stringContaining(ANSWER)],
  });
  expect(await line.locator("summary").textContent()).toMatch(/^2 attempts failed: .*503/);
  // Each attempt on demand, with its own time.
  await line.locator("summary").click();
  // Its time, then why: "8:38:04 AM · 503 Service Unavailable".
  expect(await line.locator("li").allTextContents()).toEqual([
    expect.stringMatching(/^[^·]*\d[^·]* · [^·]*503/),
    expect.stringMatching(/^[^·]*\d[^·]* · [^·]*503/),
  ]);
  const times = await line
    .locator("li > time")
    .evaluateAll((ts) => ts.map((t) => t.getAttribute("datetime")));
  expect(times).toEqual([
    expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
    expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
  ]);
  // The store keeps every attempt: errors are data.
  expect(await storedAnswers(page, conversation)).toEqual(["error", "error", "stop"]);
  await eachLook(page, async (look) => {
    await settleAnimations(page);
    await line.scrollIntoViewIfNeeded();
    await page.screenshot({ path: look.shot("failed-attempts") });
  });
  await page.emulateMedia({ colorScheme: null });
  await page.setViewportSize({ width: 1280, height: 800 });

  // The retries run out (three, then the run fails): three quiet attempts, then the failure in red.
  provider.mode = "busy";
  await say(page, "and once more");
  await until(
    "the run's final failure",
    () => failuresShown(page),
    (s) => s.red === 1,
    90_000,
  );
  const shown = await failuresShown(page);
  expect(shown.quiet).toEqual([2, 3]);
  expect(shown.answers).toHaveLength(2);
  expect(shown.answers[1]).toMatch(/503/);
  const last = page.locator('[data-testid="entries"] > *').last();
  expect(await last.getAttribute("data-kind")).toBe("pi.assistant");
  expect(await last.evaluate((e) => e.classList.contains("error"))).toBe(true);
  expect(await storedAnswers(page, conversation)).toEqual([
    "error",
    "error",
    "stop",
    "error",
    "error",
    "error",
    "error",
  ]);
}, 240_000);
