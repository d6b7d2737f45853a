/**
 * What the issue for the app asks to be shown of the transcript, on the built app with the demo
 * model (and a routed network model where a provider's answer must be chosen):
 * - a reload mid-stream shows the partial answer in the very first frame of the transcript, and the
 *   answer is committed once;
 * - a steer sent while a tool runs lands after that tool round, a follow-up after the answer, and the
 *   conversation list marks the conversation busy meanwhile;
 * - an image in a tool result shows inline, an SVG one is refused in words;
 * - a missing key, then a rejected one, are said in words, and Try again answers once the right key
 *   is saved (the answer's thinking folded under "Thinking");
 * - a fake API key reaches no console: the page's, the engine's (a dedicated worker, or the
 *   SharedWorker) or the service worker's, even when the provider's rejection quotes it.
 */
import type { Page, Route } from "playwright-core";
import { expect, test } from "vitest";
import { engine } from "./browser.ts";
import { openAiStream } from "./openai-stream.ts";
import {
  appSuite,
  appUrl,
  entriesOf,
  lastAnswer,
  say,
  settled,
  shot,
  uniqueStore,
  until,
  useRoutedModel,
  waitPhase,
} from "./page.ts";
import { listenToWorkers } from "./worker-console.ts";

const app = appSuite({ logTail: 150 });

interface StoredEntry {
  readonly kind: string;
  readonly model?: Array<{ role: string; content: unknown; stopReason?: string; errorMessage?: string }>;
}

/** The conversation's stored messages (prompt bookkeeping aside), as "role: text" lines. */
async function stored(page: Page, conversation: number): Promise<string[]> {
  const entries = await engine<StoredEntry[]>(page, "watches.entries", conversation);
  return entries.flatMap((e) => {
    const m = e.model?.[0];
    if (!m || e.kind === "pi.system") return [];
    const text =
      typeof m.content === "string"
        ? m.content
        : (m.content as Array<{ type: string; text?: string; name?: string }>)
            .map((c) => (c.type === "text" ? c.text : c.type === "toolCall" ? `call ${c.name}` : c.type))
            .join(" ");
    return [`${m.role}${m.stopReason === "aborted" ? " (aborted)" : ""}: ${text}`];
  });
}

const conversationOf = (page: Page) => Number(/#\/c\/(\d+)/.exec(page.url())?.[1] ?? "1");

test("a reload mid-stream shows the partial answer in the transcript's first frame, and the answer is committed once", async () => {
  const page = await app.open({
    label: "mid-stream",
    viewport: { width: 1280, height: 800 },
    composer: true,
  });
  await engine(page, "settings.setDemoSpeed", "slow");
  await say(page, "hello there");
  const before = await until(
    "a partial answer of some length",
    () => page.getByTestId("partial").textContent(),
    (t) => (t ?? "").includes("You said"),
  );
  // From the first moment the reloaded page shows the transcript: what it shows of the partial.
  await page.addInitScript(() => {
    const seen = new MutationObserver(() => {
      if (!document.querySelector('[data-testid="entries"]')) return;
      seen.disconnect();
      (globalThis as unknown as { __firstFrame: unknown }).__firstFrame = {
        // The answer so far: the live partial, or (when the engine's next request converted it
        // before this frame) the interrupted attempt, listed until the turn answers again.
        shown: document.querySelector('[data-testid="entries"]')?.parentElement?.textContent ?? "",
        users: document.querySelectorAll('[data-testid="entries"] > [data-kind="pi.user"]').length,
      };
    });
    seen.observe(document, { childList: true, subtree: true });
  });
  await page.reload();
  await waitPhase(page, "ready");
  const first = await until(
    "the transcript's first frame",
    () =>
      page.evaluate(
        () => (globalThis as unknown as { __firstFrame?: { shown: string; users: number } }).__firstFrame,
      ),
    (f) => f !== undefined,
  );
  expect(first?.users).toBe(1);
  // What was streamed before the reload is on screen at once, not only after the run resumed.
  expect(first?.shown ?? "").toContain("You said");
  expect(before ?? "").toContain("You said");
  await engine(page, "settings.setDemoSpeed", "instant");
  // The cut-short partial was kept as an aborted entry (spec §8.3) and the answer came once, whole.
  const lines = await until(
    "the whole answer stored",
    () => stored(page, conversationOf(page)),
    (l) => l.some((line) => line.startsWith("assistant: ") && line.includes("sum the sizes of the files")),
  );
  expect(lines).toHaveLength(3);
  expect(lines[0]).toBe("user: hello there");
  expect(lines[1]).toMatch(/^assistant \(aborted\): You said/);
  const whole = lines[2]!.replace(/^assistant: /, "");
  expect(whole).toMatch(/^You said: "hello there"\. I'm the offline demo model/);
  expect(whole.startsWith(lines[1]!.replace(/^assistant \(aborted\): /, ""))).toBe(true);
  // On screen: the answer once, the cut-short try as one quiet line.
  await settled(page, 1);
  expect(await entriesOf(page, "pi.assistant").count()).toBe(1);
  expect(await page.getByTestId("failed-attempts").textContent()).toMatch(/1 attempt failed: interrupted/);
  expect(await lastAnswer(page).textContent()).toContain("sum the sizes of the files");
});

test("while a tool runs, a steer lands after that tool round and a follow-up after the answer", async () => {
  const page = await app.open({ label: "steer", viewport: { width: 1280, height: 800 }, composer: true });
  await say(page, "run a long task");
  await page.locator('[data-testid="tool-slot"][data-status="running"]').waitFor();
  const when = page.getByLabel("when busy");
  await when.selectOption("steer");
  await say(page, "steer: skip the rest");
  await when.selectOption("followUp");
  await say(page, "follow: and then this");
  // Both wait in the inbox while the tool still runs (the order below is only meaningful then).
  const queued = await until(
    "both inputs queued",
    () => page.getByTestId("queued-item").allTextContents(),
    (t) => t.length === 2,
  );
  expect(queued.join("|")).toMatch(/steer: skip the rest.*\|.*follow: and then this/);
  expect(await page.locator('[data-testid="tool-slot"][data-status="running"]').count()).toBe(1);
  await page.screenshot({ path: shot("steer-queued-1280") });
  // The conversation list marks the busy conversation, and only while it works.
  const list = page.getByTestId("conversation-list");
  expect(await list.getByRole("img", { name: "working" }).count()).toBe(1);
  await settled(page, 3);
  await until(
    "the busy mark gone",
    () => list.getByRole("img", { name: "working" }).count(),
    (n) => n === 0,
  );
  const lines = await stored(page, conversationOf(page));
  expect(lines.map((l) => l.split(":")[0]).join(" ")).toBe(
    "user assistant toolResult user assistant user assistant",
  );
  expect(lines[0]).toBe("user: run a long task");
  expect(lines[1]).toMatch(/call sleep/);
  expect(lines[3]).toBe("user: steer: skip the rest");
  expect(lines[4]).toContain("steer: skip the rest");
  expect(lines[5]).toBe("user: follow: and then this");
  expect(lines[6]).toContain("follow: and then this");
});

// A 1x1 PNG.
const PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=";

test("an image in a tool result shows inline; an SVG one is refused in words and never loads", async () => {
  const page = await app.open({ label: "images", viewport: { width: 1280, height: 800 }, composer: true });
  await say(page, "list the files");
  await settled(page, 2);
  const { text } = await engine<{ text: string }>(page, "conversations.export", conversationOf(page));
  const file = JSON.parse(text) as { entries: StoredEntry[] };
  const result = file.entries.find((e) => e.kind === "pi.tool-result")!;
  const svg = Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" onload="window.__pwned=1"/>').toString(
    "base64",
  );
  result.model![0]!.content = [
    { type: "text", text: "Here is the picture:" },
    { type: "image", data: PIXEL, mimeType: "image/png" },
    { type: "image", data: svg, mimeType: "image/svg+xml" },
  ];
  const id = await engine<number>(page, "conversations.import", JSON.stringify(file));
  await page.evaluate((to) => {
    location.hash = `#/c/${to}`;
  }, id);
  const image = page.getByTestId("result-image").locator("img");
  await image.waitFor();
  await until(
    "the image decoded",
    () =>
      image.evaluate((img) => (img as HTMLImageElement).complete && (img as HTMLImageElement).naturalWidth),
    (w) => w === 1,
  );
  expect(await image.getAttribute("alt")).toBe("Image (png, 68 bytes)");
  expect(await page.getByTestId("result-image-refused").textContent()).toMatch(/svg\+xml, not shown/);
  expect(
    await page.evaluate(() => document.querySelectorAll('img[src^="data:image/svg"], svg[onload]').length),
  ).toBe(0);
  expect(
    await page.evaluate(() => (globalThis as unknown as { __pwned?: number }).__pwned ?? null),
  ).toBeNull();
  await page.screenshot({ path: shot("result-image-1280") });
});

const KEY = "sk-e2e-CONSOLE-0a1b2c3d4e5f66778899";
const OPENAI = { provider: "openai", modelId: "gpt-4o-mini" };

test("a fake key quoted back by the provider reaches no console: page, engine, service worker, nor the DOM", async () => {
  // The engine in a dedicated worker, so the provider can be routed to reject the key by quoting it.
  const url = appUrl(app.server.url, { store: uniqueStore("key-consoles"), engine: "dedicated" });
  const engineLines: string[] = [];
  const page = app.record(await app.browser.newPage(), "key-consoles");
  page.on("worker", (worker) =>
    worker.on("console", (m) => engineLines.push(`[engine ${m.type()}] ${m.text()}`)),
  );
  await page.setViewportSize({ width: 1280, height: 800 });
  const workers = await listenToWorkers(app.browser);
  try {
    await app.browser.context.route("https://api.openai.com/**", async (route: Route) => {
      const auth = route.request().headers().authorization ?? "";
      await route.fulfill({
        status: 401,
        contentType: "application/json",
        body: JSON.stringify({
          error: {
            message: `Incorrect API key provided: ${auth.replace(/^Bearer /, "")}.`,
            type: "invalid_request_error",
          },
        }),
      });
    });
    await page.goto(url);
    await waitPhase(page, "ready");
    await page.getByLabel("message").waitFor();
    await useRoutedModel(page, OPENAI, KEY);
    await say(page, "hello with a key");
    const failure = await until(
      "the rejection said in words",
      () => page.locator('[data-testid="entries"] > [data-kind="pi.assistant"]').last().textContent(),
      (t) => /API key/i.test(t ?? ""),
      90_000,
    );
    expect(failure).toContain("[redacted]");
    // The listening works: a line logged inside each worker is heard.
    await until(
      "the service worker attached",
      async () => {
        await page.evaluate(() => navigator.serviceWorker.ready.then(() => true));
        return workers.kinds();
      },
      (k) => k.includes("service_worker"),
    );
    await workers.probe("service_worker", "probe: service worker heard");
    await page.evaluate(() => {
      // The engine worker logs through its own console: a line from the tab's side cannot reach it,
      // so this one proves the page's console is heard.
      console.log("probe: page heard");
    });
    await until(
      "the probes heard",
      async () => [...workers.lines(), ...app.logs].join("\n"),
      (all) => all.includes("probe: service worker heard") && all.includes("probe: page heard"),
    );
    const html = await page.evaluate(() => document.documentElement.outerHTML + JSON.stringify(localStorage));
    expect(html).not.toContain(KEY);
    expect(app.logs.join("\n")).not.toContain(KEY);
    expect(engineLines.join("\n")).not.toContain(KEY);
    expect(workers.lines().join("\n")).not.toContain(KEY);
    // The same key in the SharedWorker engine (the default), where the provider cannot be reached.
    const shared = app.record(await app.browser.newPage(), "key-shared");
    await shared.goto(appUrl(app.server.url, { store: uniqueStore("key-shared") }));
    await waitPhase(shared, "ready");
    await shared.getByLabel("message").waitFor();
    await until(
      "the SharedWorker attached",
      async () => workers.kinds(),
      (k) => k.includes("shared_worker"),
    );
    await useRoutedModel(shared, OPENAI, KEY);
    await say(shared, "hello from the shared engine");
    await until(
      "the failure said in words",
      () => shared.locator('[data-testid="entries"] > [data-kind="pi.assistant"]').last().textContent(),
      (t) => (t ?? "").length > 0,
      90_000,
    );
    await workers.probe("shared_worker", "probe: engine heard");
    await until(
      "the engine's probe heard",
      async () => workers.lines().join("\n"),
      (all) => all.includes("probe: engine heard"),
    );
    expect(workers.lines().join("\n")).not.toContain(KEY);
    expect(app.logs.join("\n")).not.toContain(KEY);
  } finally {
    workers.close();
  }
});

test("a missing key, then a rejected one, are said in words; with the right key saved, Try again answers once, its thinking folded", async () => {
  const GOOD = "gsk-e2e-GOOD-1a2b3c4d5e6f";
  const BAD = "gsk-e2e-BAD-6f5e4d3c2b1a";
  const MODEL = "llama-3.1-8b-instant";
  const THOUGHT = "The person asked twice; answer briefly.";
  // The engine in a dedicated worker, so the provider can be routed: the right key gets an answer.
  const url = appUrl(app.server.url, { store: uniqueStore("key-fixed"), engine: "dedicated" });
  const page = await app.open({
    url,
    label: "key-fixed",
    viewport: { width: 1280, height: 800 },
    composer: true,
  });
  const asked: string[] = [];
  await app.browser.context.route("https://api.groq.com/**", async (route: Route) => {
    const auth = route.request().headers().authorization ?? "";
    asked.push(auth);
    if (auth === `Bearer ${GOOD}`)
      await route.fulfill({
        status: 200,
        contentType: "text/event-stream",
        // The model's reasoning first (a reasoning_content delta), then the answer.
        body: `data: ${JSON.stringify({
          id: "chatcmpl-e2e",
          object: "chat.completion.chunk",
          created: 1,
          model: MODEL,
          choices: [
            { index: 0, delta: { role: "assistant", reasoning_content: THOUGHT }, finish_reason: null },
          ],
        })}\n\n${openAiStream("Fixed: here is the answer.", { model: MODEL })}`,
      });
    else
      await route.fulfill({
        status: 401,
        contentType: "application/json",
        body: JSON.stringify({ error: { message: "Invalid API Key", type: "invalid_request_error" } }),
      });
  });
  await engine(page, "settings.setModel", conversationOf(page), { provider: "groq", modelId: MODEL });
  const problem = () => page.locator("[data-problem]").last().textContent();
  await say(page, "hello groq");
  await until("the missing key said", problem, (t) => /No API key is saved for groq/.test(t ?? ""));
  expect(asked).toEqual([]);
  // Said once, in the app's words: the engine's own message is not repeated under it.
  const missing = (await entriesOf(page, "pi.assistant").first().textContent()) ?? "";
  expect(missing.split("No API key is saved for groq").length - 1).toBe(1);
  await engine(page, "keys.set", "groq", BAD);
  await page.getByTestId("try-again").click();
  await until("the rejected key said", problem, (t) => /groq rejected the API key/.test(t ?? ""));
  expect(asked.every((a) => a === `Bearer ${BAD}`)).toBe(true);
  await engine(page, "keys.set", "groq", GOOD);
  await page.getByTestId("try-again").click();
  await until(
    "the answer",
    () => lastAnswer(page).textContent(),
    (t) => (t ?? "").includes("Fixed: here is the answer."),
  );
  await settled(page, 3);
  expect(await page.getByTestId("try-again").count()).toBe(0);
  // The answer's thinking is folded away under "Thinking", open on demand.
  const thinking = lastAnswer(page).locator("details.thinking");
  expect(await thinking.evaluate((d) => (d as HTMLDetailsElement).open)).toBe(false);
  expect(await thinking.locator("summary").textContent()).toBe("Thinking");
  expect(await thinking.locator(".text").isVisible()).toBe(false);
  await thinking.locator("summary").click();
  expect(await thinking.locator(".text").textContent()).toBe(THOUGHT);
  expect(await thinking.locator(".text").isVisible()).toBe(true);
  const answers = await entriesOf(page, "pi.assistant").allTextContents();
  expect(answers.filter((t) => t.includes("Fixed: here is the answer."))).toHaveLength(1);
  expect(asked.filter((a) => a === `Bearer ${GOOD}`)).toHaveLength(1);
  await page.screenshot({ path: shot("key-fixed-1280") });
});
