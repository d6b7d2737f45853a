/**
 * Usage over time and exported traces (issue 31 part 5), on the built app with a network model
 * (groq, a fake key) whose provider is routed to stream answers that report their tokens (the engine
 * runs in its dedicated worker, `?engine=dedicated`, so the route reaches it: offline.test.ts).
 * After three answers: the settings' "Usage over time" draws its charts (uPlot, loaded on demand)
 * and its table says the same figures as the stored answers; "Export trace (OTLP JSON)" downloads a
 * file that parses as an OTLP `ExportTraceServiceRequest` with one `chat` span per answer, each
 * with the model and its tokens, beneath the conversation's span, and no key or message in it.
 * Screenshots of the section at 390 and 1280 px, light and dark, are kept in /work/notes/shots.
 */
import { mkdirSync, readFileSync } from "node:fs";
import type { Page } from "playwright-core";
import { Value } from "typebox/value";
import { expect, test } from "vitest";
import type { OtlpSpan, OtlpTrace } from "../../worker/app/trace.ts";
import { ExportTraceServiceRequestSchema } from "../unit/app/otlp-schema.ts";
import { engine } from "./browser.ts";
import { openAiStream, routeProvider } from "./openai-stream.ts";
import {
  appSuite,
  appUrl,
  eachLook,
  say,
  settleAnimations,
  settled,
  uniqueStore,
  useRoutedModel,
} from "./page.ts";

const app = appSuite({ logTail: 150 });

const KEY = "gsk-e2e-FAKE-usage-trace-7a6b5c4d3e2f";
const MODEL = { provider: "groq", modelId: "llama-3.1-8b-instant" };
const ANSWER = "Here is a counted answer.";
const SHOTS = "/work/notes/shots";
const completion = () =>
  openAiStream(ANSWER, { model: MODEL.modelId, usage: { prompt_tokens: 12, completion_tokens: 7 } });

/** Wait until the charts were drawn for the section's current width and the page's colour scheme. */
async function chartsDrawn(page: Page): Promise<void> {
  await page.waitForFunction(() => {
    const el = document.querySelector('[data-testid="usage-charts"]') as HTMLElement | null;
    if (!el) return false;
    const scheme = matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
    return el.dataset["drawn"] === `${scheme} ${el.clientWidth}`;
  });
}

test("three answers: the usage chart and its table show their tokens, and the trace downloads as OTLP JSON with a span per answer", async () => {
  const url = appUrl(app.server.url, { store: uniqueStore("usage"), engine: "dedicated" });
  const page = await app.open({
    url,
    label: "usage",
    viewport: { width: 1280, height: 800 },
    composer: true,
  });
  await routeProvider(app.browser.context, { completion, mode: "up" });
  const conversation = await useRoutedModel(page, MODEL, KEY);
  for (const [i, text] of ["first question", "second question", "third question"].entries()) {
    await say(page, text);
    await settled(page, i + 1);
  }
  // What the store holds: three answers of 12 tokens in and 7 out.
  const stored = (
    await engine<Array<{ kind: string; model?: Array<{ usage: { input: number; output: number } }> }>>(
      page,
      "watches.entries",
      conversation,
    )
  ).filter((e) => e.kind === "pi.assistant");
  expect(stored.map((e) => [e.model![0]!.usage.input, e.model![0]!.usage.output])).toEqual([
    [12, 7],
    [12, 7],
    [12, 7],
  ]);

  // The trace, downloaded as a person does.
  const [download] = await Promise.all([
    page.waitForEvent("download"),
    page.getByTestId("export-trace").click(),
  ]);
  expect(download.suggestedFilename()).toBe(`trace-conversation-${conversation}.otlp.json`);
  const text = readFileSync((await download.path()) as string, "utf8");
  const parsed: unknown = JSON.parse(text);
  expect(
    [...Value.Errors(ExportTraceServiceRequestSchema, parsed)].map((e) => `${e.instancePath} ${e.message}`),
  ).toEqual([]);
  const spans: OtlpSpan[] = (parsed as OtlpTrace).resourceSpans.flatMap((r) =>
    r.scopeSpans.flatMap((s) => s.spans),
  );
  const value = (s: OtlpSpan, key: string) => {
    const v = s.attributes.find((a) => a.key === key)?.value;
    return v && "stringValue" in v ? v.stringValue : v && "intValue" in v ? Number(v.intValue) : undefined;
  };
  const root = spans.find((s) => s.name === "invoke_agent conversation")!;
  expect(root.parentSpanId).toBeUndefined();
  const chats = spans.filter((s) => value(s, "gen_ai.operation.name") === "chat");
  expect(
    chats.map((s) => [
      s.name,
      s.parentSpanId === root.spanId,
      value(s, "gen_ai.request.model"),
      value(s, "gen_ai.usage.input_tokens"),
      value(s, "gen_ai.usage.output_tokens"),
      s.status.code,
    ]),
  ).toEqual(Array.from({ length: 3 }, () => [`chat ${MODEL.modelId}`, true, MODEL.modelId, 12, 7, 1]));
  for (const words of [KEY, ANSWER, "first question"]) expect(text).not.toContain(words);

  // Usage over time, in the settings.
  await page.getByTestId("open-settings").click();
  const section = page.getByTestId("usage-history");
  await section.scrollIntoViewIfNeeded();
  await chartsDrawn(page);
  expect(await section.getByTestId("usage-history-summary").textContent()).toBe(
    "57 tokens · <$0.01 in the last 30 days",
  );
  // Two charts (tokens, cost), each a canvas uPlot drew.
  expect(await section.locator('[data-testid^="usage-chart-"] canvas').count()).toBe(2);
  await section.getByText("Figures as a table").click();
  const cells = await section
    .getByTestId("usage-table")
    .locator("tbody tr")
    .evaluateAll((rows) => rows.map((r) => [...r.children].map((c) => c.textContent?.trim())));
  const today = await page.evaluate(() => {
    const p = Object.fromEntries(
      new Intl.DateTimeFormat("en-US", { year: "numeric", month: "2-digit", day: "2-digit" })
        .formatToParts(new Date())
        .map((x) => [x.type, x.value]),
    );
    return `${p["year"]}-${p["month"]}-${p["day"]}`;
  });
  expect(cells).toEqual([[today, `${MODEL.provider}/${MODEL.modelId}`, "36", "21", "0", "<$0.01"]]);
  // The engine's own answer says the same (the days in the tab's zone).
  const zone = await page.evaluate(() => Intl.DateTimeFormat().resolvedOptions().timeZone);
  const days = await engine<{
    rows: Array<{ day: string; input: number; output: number; requests: number }>;
  }>(page, "usage.days", { timeZone: zone, from: today, to: today });
  expect(days.rows.map((r) => [r.day, r.input, r.output, r.requests])).toEqual([[today, 36, 21, 3]]);

  mkdirSync(SHOTS, { recursive: true });
  await eachLook(page, async (look) => {
    await settleAnimations(page);
    await chartsDrawn(page);
    await section.scrollIntoViewIfNeeded();
    await page.screenshot({ path: `${SHOTS}/usage-${look.scheme}-${look.width}.png` });
    await page.screenshot({ path: look.shot("usage-over-time") });
  });
});
