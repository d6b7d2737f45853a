/**
 * Ten tabs submitting at once, 1,000 inputs in all (issue 28 part 3): ten engine clients (each its
 * own tab of the engine service, as ten pages of one browser are ten ports of the one engine) send
 * 100 inputs each, all at once, spread over ten conversations, on the memory store with a model that
 * answers each input by name. Each input is admitted once and answered once; in each conversation
 * the inputs stand in the order they were admitted (their submission ids), each followed by its
 * answer, and each tab's inputs to a conversation in the order that tab sent them.
 */
import { afterEach, expect, test } from "vitest";
import { AgentHarness } from "../../../worker/agent/harness.ts";
import { createModelResolver } from "../../../worker/agent/models/resolver.ts";
import { HarnessEngine } from "../../../worker/app/engine-service.ts";
import { entryText } from "../../../worker/app/search.ts";
import { memoryStore } from "../../../worker/testing.ts";
import { lastMessageModel } from "./hostile-fixtures.ts";

const closing: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of closing.splice(0)) await c();
});

const TABS = 10;
const PER_TAB = 100;
const CONVERSATIONS = 10;

test("ten tabs submit 1,000 inputs at once over ten conversations: each answered once, in per-conversation order", async () => {
  const light = lastMessageModel(Promise.resolve());
  const harness = await AgentHarness.open(await memoryStore(), {
    models: createModelResolver({ extra: [light.model] }),
    defaultModel: { provider: light.model.provider, modelId: light.model.id },
  });
  closing.push(async () => {
    await harness.close();
    light.unregister();
  });
  const service = new HarnessEngine({
    harness: async () => harness,
    build: "ten-tabs",
    tabArrived: () => {},
  });
  const tabs = Array.from({ length: TABS }, (_, t) => service.tab(`tab-${t}`));
  const conversations = await Promise.all(
    Array.from({ length: CONVERSATIONS }, (_, i) => tabs[i % TABS]!.conversations.create()),
  );
  // Every tab sends all its inputs without waiting for any answer.
  const sent = await Promise.all(
    tabs.map((tab, t) =>
      Promise.all(
        Array.from({ length: PER_TAB }, async (_, j) => {
          const conversation = conversations[(t + j) % CONVERSATIONS]!;
          const text = `tab ${t} input ${j}`;
          const submission = await tab.run.submit(conversation, { text, requestId: `t${t}-${j}` });
          return { t, j, conversation, text, submission };
        }),
      ),
    ),
  );
  const all = sent.flat();
  expect(all).toHaveLength(TABS * PER_TAB);
  expect(new Set(all.map((s) => s.submission)).size).toBe(TABS * PER_TAB);
  await harness.waitForIdle();

  for (const conversation of conversations) {
    const mine = all.filter((s) => s.conversation === conversation);
    const admitted = [...mine].sort((a, b) => a.submission - b.submission).map((s) => s.text);
    const entries = await tabs[0]!.watches.entries(conversation);
    const said = entries
      .filter((e) => e.kind === "pi.user" || e.kind === "pi.assistant")
      .map((e) => [e.kind, entryText(e)]);
    // Each input once, in admission order, each followed by its one answer.
    expect(said).toEqual(
      admitted.flatMap((text) => [
        ["pi.user", text],
        ["pi.assistant", `answer to ${text}`],
      ]),
    );
    // Each tab's inputs to this conversation in the order it sent them.
    for (let t = 0; t < TABS; t++) {
      const order = admitted
        .filter((text) => text.startsWith(`tab ${t} `))
        .map((text) => Number(text.split(" ").at(-1)));
      expect(order).toEqual([...order].sort((a, b) => a - b));
    }
  }
  for (const s of all) expect((await harness.submissionRecord(s.submission))?.status).toBe("done");
}, 300_000);
