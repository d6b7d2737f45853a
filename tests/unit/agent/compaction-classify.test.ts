/**
 * How a summary attempt is classified (spec §8.7): in one commit that adds its usage to `pi.usage`;
 * only a `stop` with non-empty text and no tool call is a summary (text beside a tool call is not);
 * a retryable error retries only while the retry policy, read at classification, allows another
 * attempt (`enabled` and `attempt <= maxRetries`); anything else fails with `model_error`.
 */
import { fauxAssistantMessage, fauxToolCall } from "@mariozechner/pi-ai";
import { expect, test } from "vitest";
import { SUMMARY_SYSTEM_PROMPT } from "../../../worker/agent/compaction/task.ts";
import type { AgentHarness, ChangeSet, Conversation, UsageState } from "../../../worker/index.ts";
import { deferred, type FauxRequest, fauxError, until } from "../../../worker/testing.ts";
import { liveOf, open } from "./fixtures.ts";

const big = (label: string) => `${label} ${"x".repeat(400)}`; // about 100 tokens
const isSummary = (r: FauxRequest) => r.systemPrompt === SUMMARY_SYSTEM_PROMPT;

async function chat(root: Conversation, turns: number): Promise<void> {
  for (let i = 1; i <= turns; i++) await (await root.submit({ type: "input", content: big(`q${i}`) })).wait();
}

test("text beside a tool call is not a summary: the compaction fails model_error and nothing is placed; the usage lands in the classifying commit", async () => {
  const { h, root, faux } = await open(
    (req) =>
      isSummary(req)
        ? fauxAssistantMessage([{ type: "text", text: "SUMMARY" }, fauxToolCall("read", {})], {
            stopReason: "stop",
          })
        : fauxAssistantMessage(big("answer")),
    { settings: { compaction: { keepRecentTokens: 150 } } },
  );
  await chat(root, 3);
  const before = (await root.entries()).length;
  const commits: ChangeSet[] = [];
  h.subscribe((c) => void commits.push(c));
  const taskId = await root.compact();
  expect((await h.waitForTask(taskId)).state).toMatchObject({
    status: "terminal",
    outcome: { status: "failed", error: { detail: { reason: "model_error" } } },
  });
  expect((await root.entries()).length).toBe(before);
  expect(faux.requests.filter(isSummary)).toHaveLength(1);
  // The one commit that writes pi.usage after the request is the one that ends the task.
  const usageCommits = commits.filter((c) => c.docs.some((d) => d.name === "pi.usage"));
  expect(usageCommits).toHaveLength(1);
  expect(
    usageCommits[0]!.tasks.find((t) => t.id === taskId)?.state,
    "the usage commit classifies the attempt",
  ).toMatchObject({ status: "terminal", outcome: { status: "failed" } });
  const key = `${faux.ref.provider}/${faux.ref.modelId}`;
  const usage = usageCommits[0]!.docs.find((d) => d.name === "pi.usage")!.value as unknown as UsageState;
  expect(usage.models[key]!.input).toBe(
    (h.docNow(root.id, "pi.usage") as unknown as UsageState).models[key]!.input,
  );
});

/** Compact `root` now, expect the compaction completed, and read the text of the pi.compaction it placed last. */
async function compactedText(h: AgentHarness, root: Conversation): Promise<string> {
  const taskId = await root.compact();
  expect((await h.waitForTask(taskId)).state).toMatchObject({
    status: "terminal",
    outcome: { status: "completed" },
  });
  const placed = (await root.entries()).at(-1)!;
  expect(placed.kind).toBe("pi.compaction");
  const [message] = placed.model as unknown as Array<{ content: Array<{ text: string }> }>;
  return message!.content[0]!.text;
}

test("a stop whose text comes in several blocks is one summary: every block is placed, in order (break 29B)", async () => {
  const { h, root } = await open(
    (req) =>
      isSummary(req)
        ? fauxAssistantMessage(
            [
              { type: "text", text: "FIRST PART " },
              { type: "text", text: "SECOND PART" },
            ],
            { stopReason: "stop" },
          )
        : fauxAssistantMessage(big("answer")),
    { settings: { compaction: { keepRecentTokens: 150 } } },
  );
  await chat(root, 3);
  expect(await compactedText(h, root)).toContain("<summary>\nFIRST PART SECOND PART\n</summary>");
});

test("thinking is not summary text: a stop with thinking only fails model_error with nothing placed; beside text, only the text is placed (draw 35b C)", async () => {
  // Draw 35b C: thinking blocks read as the summary's text passed every test (no summary answer
  // carried thinking).
  let withText = false;
  const { h, root } = await open(
    (req) =>
      isSummary(req)
        ? fauxAssistantMessage(
            [
              { type: "thinking", thinking: "PRIVATE REASONING" },
              ...(withText ? [{ type: "text" as const, text: "THE SUMMARY" }] : []),
            ],
            { stopReason: "stop" },
          )
        : fauxAssistantMessage(big("answer")),
    { settings: { compaction: { keepRecentTokens: 150 } } },
  );
  await chat(root, 3);
  const before = (await root.entries()).length;
  const first = await root.compact();
  expect((await h.waitForTask(first)).state).toMatchObject({
    status: "terminal",
    outcome: { status: "failed", error: { message: "empty summary", detail: { reason: "model_error" } } },
  });
  expect((await root.entries()).length).toBe(before);
  withText = true;
  const text = await compactedText(h, root);
  expect(text).toContain("<summary>\nTHE SUMMARY\n</summary>");
  expect(text).not.toContain("PRIVATE REASONING");
});

test("a retryable summary error retries only while the policy read at classification allows it: maxRetries counts retries, and a policy turned off while the attempt is out fails it", async () => {
  // maxRetries 1: the first attempt and one retry, then model_error.
  const exhausted = await open(
    (req) => (isSummary(req) ? fauxError("503 Service Unavailable") : fauxAssistantMessage(big("answer"))),
    {
      settings: { compaction: { keepRecentTokens: 150 }, retry: { baseDelayMs: 1, maxRetries: 1 } },
    },
  );
  await chat(exhausted.root, 3);
  const first = await exhausted.root.compact();
  expect((await exhausted.h.waitForTask(first)).state).toMatchObject({
    outcome: {
      status: "failed",
      error: { message: "503 Service Unavailable", detail: { reason: "model_error" } },
    },
  });
  expect(exhausted.faux.requests.filter(isSummary)).toHaveLength(2);

  // Retries on when the request goes out, off before its answer is classified: no retry.
  const gate = deferred();
  let retry = { enabled: true };
  const flipped = await open(
    async (req) => {
      if (!isSummary(req)) return fauxAssistantMessage(big("answer"));
      await gate.promise;
      return fauxError("503 Service Unavailable");
    },
    { settings: () => ({ compaction: { keepRecentTokens: 150 }, retry: { ...retry, baseDelayMs: 1 } }) },
  );
  await chat(flipped.root, 3);
  const second = await flipped.root.compact();
  await until(() => flipped.faux.requests.filter(isSummary).length === 1, { what: "summary sent" });
  retry = { enabled: false };
  gate.resolve();
  expect((await flipped.h.waitForTask(second)).state).toMatchObject({
    outcome: { status: "failed", error: { detail: { reason: "model_error" } } },
  });
  expect(flipped.faux.requests.filter(isSummary)).toHaveLength(1);
});

test("a summary's retry policy is read anew at each classification: retried once, then turned off while the retry is out, the retry's error fails it (draw 35d)", async () => {
  // Spec §2.2: settings are read at every resolution. A policy kept from the summary's first
  // classification (enabled, maxRetries 3) would retry the second error too.
  const gate = deferred();
  let retry = { enabled: true, maxRetries: 3 };
  const { h, root, faux } = await open(
    async (req) => {
      if (!isSummary(req)) return fauxAssistantMessage(big("answer"));
      if (faux.requests.filter(isSummary).length === 2) await gate.promise;
      return fauxError("503 Service Unavailable");
    },
    { settings: () => ({ compaction: { keepRecentTokens: 150 }, retry: { ...retry, baseDelayMs: 1 } }) },
  );
  await chat(root, 3);
  const task = await root.compact();
  await until(() => faux.requests.filter(isSummary).length === 2, { what: "summary retried" });
  retry = { enabled: false, maxRetries: 3 };
  gate.resolve();
  expect((await h.waitForTask(task)).state).toMatchObject({
    outcome: { status: "failed", error: { detail: { reason: "model_error" } } },
  });
  expect(faux.requests.filter(isSummary)).toHaveLength(2);
});

test("a summary's maxRetries is read at classification: lowered while a retried summary request is out, its error fails the compaction (draw 39, 19)", async () => {
  // Draw 39, 19: maxRetries taken from the policy read as the summary request was sent (enabled read
  // at classification) passed every test: each moved enabled while a request was out, never maxRetries.
  const gate = deferred();
  let maxRetries = 3;
  const { h, root, faux } = await open(
    async (req) => {
      if (!isSummary(req)) return fauxAssistantMessage(big("answer"));
      if (faux.requests.filter(isSummary).length === 2) await gate.promise;
      return fauxError("503 Service Unavailable");
    },
    { settings: () => ({ compaction: { keepRecentTokens: 150 }, retry: { baseDelayMs: 1, maxRetries } }) },
  );
  await chat(root, 3);
  const task = await root.compact();
  await until(() => faux.requests.filter(isSummary).length === 2, { what: "summary retried" });
  maxRetries = 1;
  gate.resolve();
  expect((await h.waitForTask(task)).state).toMatchObject({
    outcome: { status: "failed", error: { detail: { reason: "model_error" } } },
  });
  expect(faux.requests.filter(isSummary)).toHaveLength(2);
});

test("a summary's backoff delay is read at classification too: baseDelayMs changed while the summary request is out sets that retry's deadline (draw 39, 19)", async () => {
  // Spec §8.3 / §8.7: the retry policy is read when the attempt's result is classified, its backoff
  // delay too. Draw 39, 19: a delay computed from the policy read as the summary request was sent
  // passed every test (each summary test kept baseDelayMs fixed while the request was out).
  let clock = 1_000_000_000;
  let baseDelayMs = 40;
  const gate = deferred();
  const { h, root, faux } = await open(
    async (req) => {
      if (!isSummary(req)) return fauxAssistantMessage(big("answer"));
      if (faux.requests.filter(isSummary).length === 1) {
        await gate.promise;
        return fauxError("503 Service Unavailable");
      }
      return fauxAssistantMessage("SUMMARY");
    },
    {
      now: () => clock,
      settings: () => ({ compaction: { keepRecentTokens: 150 }, retry: { baseDelayMs, maxDelayMs: 60_000 } }),
    },
  );
  await chat(root, 3);
  const task = await root.compact();
  await until(() => faux.requests.filter(isSummary).length === 1, { what: "summary sent" });
  baseDelayMs = 300;
  const at = clock;
  gate.resolve();
  await until(() => liveOf(h, root.id).compactions?.[0]?.retry !== undefined, {
    what: "summary retry scheduled",
  });
  expect(liveOf(h, root.id).compactions![0]!.retry!.at - at).toBe(300);
  clock += 10_000; // past the deadline: the sleep ends at its next look at the clock
  expect((await h.waitForTask(task)).state).toMatchObject({
    status: "terminal",
    outcome: { status: "completed" },
  });
  expect(faux.requests.filter(isSummary)).toHaveLength(2);
});

test("a summary's durable retries count against settings.retry alone: stream.maxRetries is the provider's own, inside each request (break 30F)", async () => {
  // Spec §2.2: stream.maxRetries is the provider's retries inside one request; the retry policy
  // counts durable attempts, for a summary as for generation. Break 30F: a summary retry budget
  // read from the pinned stream.maxRetries passed every test (none set the two apart for a summary).
  let summaries = 0;
  const setup = await open(
    (req) => {
      if (!isSummary(req)) return fauxAssistantMessage(big("answer"));
      return ++summaries <= 2 ? fauxError("503 Service Unavailable") : fauxAssistantMessage("SUMMARY");
    },
    {
      settings: {
        compaction: { keepRecentTokens: 150 },
        retry: { baseDelayMs: 1, maxRetries: 2 },
        stream: { maxRetries: 0 },
      },
    },
  );
  await chat(setup.root, 3);
  const id = await setup.root.compact();
  expect((await setup.h.waitForTask(id)).state).toMatchObject({ outcome: { status: "completed" } });
  expect(setup.faux.requests.filter(isSummary)).toHaveLength(3);
});
