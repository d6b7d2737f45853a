/**
 * How a summary attempt is classified and pinned (spec §8.7): the request's maxTokens, a summary
 * that stops at `length` or has no model failing the compaction with nothing placed, and the status
 * leaving pi.live with the outcome.
 */
import { fauxAssistantMessage, streamSimple } from "@mariozechner/pi-ai";
import { expect, test } from "vitest";
import { SUMMARY_SYSTEM_PROMPT } from "../../worker/agent/compaction/task.ts";
import type { Conversation, LiveState } from "../../worker/index.ts";
import type { FauxRequest, FauxResponder } from "../../worker/testing.ts";
import { liveOf, open } from "./agent-fixtures.ts";

const big = (label: string) => `${label} ${"x".repeat(400)}`; // about 100 tokens
const isSummary = (r: FauxRequest) => r.systemPrompt === SUMMARY_SYSTEM_PROMPT;

async function chat(root: Conversation, turns: number): Promise<void> {
  for (let i = 1; i <= turns; i++) await (await root.submit({ type: "input", content: big(`q${i}`) })).wait();
}

test("the summary request's maxTokens is floor(0.8 * reserveTokens) when the model allows more", async () => {
  const maxTokens: unknown[] = [];
  const responder: FauxResponder = (req) =>
    isSummary(req) ? fauxAssistantMessage("SUMMARY") : fauxAssistantMessage(big("answer"));
  const { h, root, faux } = await open(responder, {
    settings: { compaction: { keepRecentTokens: 150, reserveTokens: 1001 } },
    stream: (model, context, options) => {
      if (context.systemPrompt === SUMMARY_SYSTEM_PROMPT) maxTokens.push(options?.maxTokens);
      return streamSimple(model, context, options);
    },
  });
  expect(faux.model.maxTokens).toBeGreaterThan(800);
  await chat(root, 3);
  const taskId = await root.compact();
  expect((await h.waitForTask(taskId)).state).toMatchObject({ outcome: { status: "completed" } });
  expect(maxTokens).toEqual([800]);
});

test("a summary that stops at length fails the compaction with model_error; nothing is placed and the status goes", async () => {
  const responder: FauxResponder = (req) =>
    isSummary(req)
      ? fauxAssistantMessage("SUMMA", { stopReason: "length" })
      : fauxAssistantMessage(big("answer"));
  const { h, root } = await open(responder, { settings: { compaction: { keepRecentTokens: 150 } } });
  await chat(root, 3);
  const before = (await root.entries()).length;
  const taskId = await root.compact();
  const record = await h.waitForTask(taskId);
  expect(record.state).toMatchObject({
    status: "terminal",
    outcome: { status: "failed", error: { message: "model_error" } },
  });
  expect((await root.entries()).length).toBe(before);
  expect((liveOf(h) as LiveState).compactions).toBeUndefined();
});

test("a compaction without a usable model fails no_model before any request", async () => {
  const { h, root, faux } = await open(
    (req) => (isSummary(req) ? fauxAssistantMessage("SUMMARY") : fauxAssistantMessage(big("answer"))),
    { settings: { compaction: { keepRecentTokens: 150 } } },
  );
  await chat(root, 3);
  const sent = faux.requests.length;
  await root.configure({ model: { provider: "nowhere", modelId: "nothing" } });
  const taskId = await root.compact();
  const record = await h.waitForTask(taskId);
  expect(record.state).toMatchObject({ status: "terminal", outcome: { status: "failed" } });
  expect(JSON.stringify(record.state)).toContain("no_model");
  expect(faux.requests.length).toBe(sent);
  expect((liveOf(h) as LiveState).compactions).toBeUndefined();
});
