/**
 * What a new user found trying the app (issue 31, "Also found, tried as a new user would"), each as a
 * person meets it in the built app, with screenshots at 1280 and 390 px in light and dark:
 * - a code block's Copy button never covers its first line, however long that line;
 * - the task panel appearing with the first task moves and narrows nothing a person is reading;
 * - the task panel says what runs in a person's words, the technical names on demand;
 * - a conversation's rename and delete buttons take no room from its title until hovered or focused;
 * - fully offline, the wait says when the engine next looks; no usage line of zeros before an answer;
 * - a provider stream the app cannot read is an error said in words, with Try again.
 * The routed provider (groq, faked by tests/e2e/openai-stream.ts) needs the dedicated engine.
 */
import type { Page } from "playwright-core";
import { expect, test } from "vitest";
import { seriousViolations } from "./axe.ts";
import { engine } from "./browser.ts";
import { openAiStream, routeProvider } from "./openai-stream.ts";
import {
  appSuite,
  appUrl,
  eachLook,
  lastAnswer,
  say,
  settleAnimations,
  settled,
  shot,
  uniqueStore,
  until,
  useRoutedModel,
} from "./page.ts";

const app = appSuite({ logTail: 150 });

const KEY = "gsk-e2e-FAKE-5e4d3c2b1a0f9e8d7c6b";
const MODEL = { provider: "groq", modelId: "llama-3.1-8b-instant" };

/** The app on a fresh store with the engine in its dedicated worker (so a routed provider reaches it). */
const openDedicated = (label: string) =>
  app.open({
    url: appUrl(app.server.url, { store: uniqueStore(label), engine: "dedicated" }),
    label,
    viewport: { width: 1280, height: 800 },
    composer: true,
  });

/** Back to the default look after `eachLook`. */
async function plain(page: Page): Promise<void> {
  await page.emulateMedia({ colorScheme: null });
  await page.setViewportSize({ width: 1280, height: 800 });
  await settleAnimations(page);
}

// A code block whose first line runs wider than a phone's window (it scrolls sideways).
const CODE_FIRST_LINE = 'const greeting = "a first line of code long enough to run under the Copy button";';
const CODE_ANSWER = ["Here it is:", "", "```js", CODE_FIRST_LINE, "console.log(greeting);", "```"].join("\n");

test("a code block's Copy button covers no part of its first line, at 1280 and 390 px, light and dark", async () => {
  const page = await openDedicated("copy-button");
  await routeProvider(app.browser.context, {
    mode: "up",
    completion: () =>
      openAiStream(CODE_ANSWER, { model: MODEL.modelId, usage: { prompt_tokens: 9, completion_tokens: 30 } }),
  });
  await useRoutedModel(page, MODEL, KEY);
  await say(page, "show me some code");
  await settled(page, 1);
  const answer = lastAnswer(page);
  await answer.locator("pre > button.copy").waitFor();
  await eachLook(page, async (look) => {
    await answer.scrollIntoViewIfNeeded();
    await page.screenshot({ path: look.shot("code-copy") });
    // The first line's boxes (clipped to what the block shows) against the button's box.
    const overlap = await answer.locator("pre").evaluate((pre) => {
      const code = pre.querySelector("code")!;
      const text = code.firstChild!;
      const line = (text.textContent ?? "").split("\n")[0]!;
      const range = document.createRange();
      range.setStart(text, 0);
      range.setEnd(text, line.length);
      const view = pre.getBoundingClientRect();
      const button = pre.querySelector("button.copy")!.getBoundingClientRect();
      const hits = [...range.getClientRects()].filter((r) => {
        const left = Math.max(r.left, view.left);
        const right = Math.min(r.right, view.right);
        return (
          right > left &&
          r.right > button.left &&
          r.left < button.right &&
          r.bottom > button.top &&
          r.top < button.bottom
        );
      });
      return hits.length;
    });
    expect(overlap, `${look.scheme} ${look.width}: the Copy button over the first line`).toBe(0);
  });
  await plain(page);
  // The button still copies the whole block.
  await app.browser.context.grantPermissions(["clipboard-read", "clipboard-write"]);
  await answer.locator("pre > button.copy").click();
  await until(
    "Copied",
    () => answer.locator("pre > button.copy").textContent(),
    (t) => t === "Copied",
  );
  expect(await page.evaluate(() => navigator.clipboard.readText())).toContain(CODE_FIRST_LINE);
});

test("the task panel appearing with the first task at 1280 px moves and narrows nothing a person reads", async () => {
  const page = await app.open({
    label: "panel-shift",
    viewport: { width: 1280, height: 800 },
    composer: true,
  });
  await say(page, "hello there");
  await settled(page, 1);
  const column = page.locator(".column");
  const before = await column.boundingBox();
  // Layout shifts from now on (a task started by the engine API: no recent input excuses a shift).
  await page.evaluate(() => {
    const w = globalThis as unknown as { __shifts: unknown[] };
    w.__shifts = [];
    new PerformanceObserver((list) => {
      for (const e of list.getEntries() as unknown as Array<{
        value: number;
        sources: Array<{ node?: Node; previousRect: DOMRectReadOnly; currentRect: DOMRectReadOnly }>;
      }>) {
        w.__shifts.push({
          value: e.value,
          sources: e.sources.map((s) => ({
            node:
              s.node instanceof Element ? `${s.node.tagName}.${s.node.className}` : String(s.node?.nodeName),
            inMain: s.node ? (document.querySelector("main")?.contains(s.node) ?? false) : false,
            from: [s.previousRect.x, s.previousRect.width],
            to: [s.currentRect.x, s.currentRect.width],
          })),
        });
      }
    }).observe({ type: "layout-shift" });
  });
  await engine(page, "run.submit", 1, { text: "run a long task", requestId: crypto.randomUUID() });
  await page.getByTestId("task-tree").waitFor();
  await page.locator('[data-testid="tool-slot"][data-status="running"]').waitFor();
  await settleAnimations(page);
  const after = await column.boundingBox();
  // Where the column starts and how wide it is (its height grows with the answer).
  expect({ x: after?.x, y: after?.y, width: after?.width }).toEqual({
    x: before?.x,
    y: before?.y,
    width: before?.width,
  });
  const shifts = (await page.evaluate(
    () => (globalThis as unknown as { __shifts: unknown[] }).__shifts,
  )) as Array<{
    value: number;
    sources: Array<{ node: string; inMain: boolean; from: number[]; to: number[] }>;
  }>;
  // Nothing in the transcript moved sideways or changed width.
  const sideways = shifts.flatMap((s) =>
    s.sources.filter((src) => src.inMain && (src.from[0] !== src.to[0] || src.from[1] !== src.to[1])),
  );
  expect(sideways).toEqual([]);
  await page.getByLabel("message").press("Escape");
});

test("the task panel says what runs in a person's words (the conversation's title, what each task does), the technical names on demand", async () => {
  const page = await app.open({
    label: "panel-words",
    viewport: { width: 1280, height: 800 },
    composer: true,
  });
  await engine(page, "conversations.rename", 1, "Planning the garden");
  await say(page, "run a long task of 120 seconds");
  await page.locator('[data-testid="tool-slot"][data-status="running"]').waitFor();
  const panel = page.locator("aside#tasks");
  const tree = page.getByTestId("task-tree");
  await until(
    "the turn waiting for its tool and the tool running, in words",
    () => page.getByTestId("task-label").allTextContents(),
    (labels) => labels.includes("waiting for the sleep tool") && labels.includes("running the sleep tool"),
    30_000,
  );
  expect(await tree.getByTestId("task-conversation").first().textContent()).toBe("Planning the garden");
  const words = (await panel.textContent()) ?? "";
  expect(words).not.toMatch(/pi\.|#\d|settle|conversation \d/);
  // The Stop buttons say what they stop.
  expect(await tree.getByRole("button", { name: "Stop task: running the sleep tool" }).count()).toBe(1);
  expect(await seriousViolations(page, "aside#tasks")).toEqual([]);

  // On demand: the kinds, ids, phases and what waits on what.
  const toggle = page.getByTestId("task-technical-toggle");
  await toggle.click();
  expect(await toggle.getAttribute("aria-pressed")).toBe("true");
  await until(
    "the technical names",
    () => panel.textContent(),
    (t) =>
      /pi\.generation #\d+/.test(t ?? "") &&
      /pi\.tool #\d+/.test(t ?? "") &&
      /waits on #\d+ until all settle/.test(t ?? ""),
    10_000,
  );
  await page.screenshot({ path: shot("task-words-technical-light-1280") });
  expect(await seriousViolations(page, "aside#tasks")).toEqual([]);
  await toggle.click();
  expect(await panel.textContent()).not.toMatch(/pi\./);

  await eachLook(page, async (look) => {
    if (look.width < 1100) {
      await page.getByRole("button", { name: "Tasks", exact: true }).click();
      await settleAnimations(page);
    }
    await page.screenshot({ path: look.shot("task-words") });
    if (look.width < 1100) {
      await page.keyboard.press("Escape");
      await settleAnimations(page);
    }
  });
  await plain(page);
  expect(await page.getByTestId("task-label").allTextContents()).toContain("running the sleep tool");
  await page.getByLabel("message").press("Escape");
});

test("a conversation's rename and delete buttons take no room from its title: shown on hover or focus, reached by Tab", async () => {
  const page = await app.open({
    label: "row-actions",
    viewport: { width: 1280, height: 800 },
    composer: true,
  });
  const TITLE = "Notes on rivers of Spain";
  const id = await engine<number>(page, "conversations.create");
  await engine(page, "conversations.rename", id, TITLE);
  const row = page.locator(`[data-testid="conversation-list"] li[data-id="${id}"]`);
  await row.getByText(TITLE).waitFor();
  await page.mouse.move(900, 400);
  const name = row.locator(".name");
  const actions = row.getByTestId("row-actions");
  // Neither hovered nor focused (nor open): the whole title shows, the buttons do not.
  expect(await name.evaluate((e) => e.scrollWidth <= e.clientWidth)).toBe(true);
  expect(await actions.evaluate((e) => getComputedStyle(e).opacity)).toBe("0");
  await eachLook(page, async (look) => {
    if (look.width < 760) {
      await page.getByRole("button", { name: "Conversations" }).click();
      await settleAnimations(page);
    }
    await page.mouse.move(900, 700);
    expect(await name.evaluate((e) => e.scrollWidth <= e.clientWidth), `${look.scheme} ${look.width}`).toBe(
      true,
    );
    await page.screenshot({ path: look.shot("conversation-rows") });
    await row.hover();
    expect(await actions.evaluate((e) => getComputedStyle(e).opacity)).toBe("1");
    await page.screenshot({ path: look.shot("conversation-rows-hover") });
    if (look.width < 760) {
      await page.keyboard.press("Escape");
      await settleAnimations(page);
    }
  });
  await plain(page);
  await page.mouse.move(900, 700);
  // By keyboard: the row's link, then its Rename button, visible when focused.
  await row.locator("a").focus();
  expect(await actions.evaluate((e) => getComputedStyle(e).opacity)).toBe("1");
  await page.keyboard.press("Tab");
  const rename = row.getByRole("button", { name: `Rename ${TITLE}` });
  expect(await rename.evaluate((e) => e === document.activeElement)).toBe(true);
  await page.keyboard.press("Enter");
  await row.getByLabel("New title").waitFor();
  await page.keyboard.press("Escape");
  await row.getByText(TITLE).waitFor();
  expect(await seriousViolations(page, "#conversations")).toEqual([]);
});

test("a provider stream the app cannot read (chat completions where the Responses format is expected) is an error said in words, with Try again", async () => {
  const page = await openDedicated("unreadable-stream");
  // An OpenAI model speaks the Responses format; this provider answers in chat-completions chunks.
  const provider = await routeProvider(app.browser.context, {
    mode: "up",
    pattern: "https://api.openai.com/**",
    completion: () => openAiStream("Words in a format the app does not read.", { model: "gpt-4o-mini" }),
  });
  await useRoutedModel(
    page,
    { provider: "openai", modelId: "gpt-4o-mini" },
    "sk-e2e-FAKE-1a2b3c4d5e6f7a8b9c0d",
  );
  await say(page, "hello over a stream in the wrong format");
  await settled(page, 1);
  const answer = lastAnswer(page);
  await until(
    "the error in words",
    () => answer.textContent(),
    (t) => (t ?? "").includes("came back empty (no text and no tool call)"),
    30_000,
  );
  // Kept as an error answer (Try again shows only after an answer whose stopReason is "error").
  expect(await answer.locator(".meta").first().textContent()).toMatch(
    /^failed: The model's answer came back empty/,
  );
  const tryAgain = page.getByTestId("try-again");
  await tryAgain.waitFor();
  // No usage line of zeros for an answer that never came.
  expect(await page.getByTestId("usage").count()).toBe(0);
  await eachLook(page, async (look) => {
    await page.screenshot({ path: look.shot("unreadable-stream") });
  });
  await plain(page);
  expect(await seriousViolations(page, "main")).toEqual([]);
  const sent = provider.sent.up;
  await tryAgain.click();
  await until(
    "the second request",
    async () => provider.sent.up,
    (n) => n > sent,
    30_000,
  );
  await settled(page, 2);
});

test("fully offline, the wait says when the engine next looks for the network (live, as it schedules each look); no usage line before an answer", async () => {
  const page = await openDedicated("offline-next-look");
  // The provider unreachable and the app's own server too: the engine's probe fails, it is offline.
  const provider = await routeProvider(app.browser.context, {
    mode: "down",
    completion: () =>
      openAiStream("Back: the answer.", {
        model: MODEL.modelId,
        usage: { prompt_tokens: 5, completion_tokens: 4 },
      }),
  });
  let serverDown = true;
  await app.browser.context.route("**/*network-probe*", (route) =>
    serverDown ? route.abort("internetdisconnected") : route.fallback(),
  );
  await useRoutedModel(page, MODEL, KEY);
  await say(page, "hello while offline");
  const next = page.getByTestId("network-next-check");
  await next.waitFor({ timeout: 60_000 });
  const first = Number(await next.getAttribute("data-at"));
  expect(((await page.getByTestId("network-wait").textContent()) ?? "").replace(/\s+/g, " ")).toMatch(
    /Waiting for the network: the request goes again as soon as it is back \(since [^)]+\)\. (Next look in \d+ s \(at [^)]+\)\.|Looking now…)/,
  );
  // The time is the engine's next probe, a probe's interval (10 s) from when it was scheduled.
  expect(first).toBeGreaterThan(Date.now() - 10_000);
  expect(first).toBeLessThanOrEqual(Date.now() + 10_000);
  // No answer yet: no usage line of zeros.
  expect(await page.getByTestId("usage").count()).toBe(0);
  await eachLook(page, async (look) => {
    await page.screenshot({ path: look.shot("offline-next-look") });
  });
  await plain(page);
  expect(await seriousViolations(page, "main")).toEqual([]);
  // The next look failed too: the wait says the one after.
  await until(
    "the next look after that",
    async () => Number(await next.getAttribute("data-at")),
    (at) => at > first,
    30_000,
  );
  // The network is back: the engine's next look finds it, the request goes again, the wait is gone.
  serverDown = false;
  provider.mode = "up";
  await until(
    "the answer",
    () => lastAnswer(page).textContent(),
    (t) => (t ?? "").includes("Back: the answer."),
    60_000,
  );
  expect(await page.getByTestId("network-wait").count()).toBe(0);
  expect(await page.getByTestId("usage").count()).toBe(1);
});
