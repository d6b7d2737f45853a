/**
 * Upstream generation scenarios (spec §8.3) that no other test asserted whole: a non-retryable
 * error fails at once though retries are on; an abort while the answer streams converts the committed
 * partial; a run whose input was settled by something else still ends and leaves that settlement.
 */
import { type AssistantMessage, fauxAssistantMessage, fauxToolCall } from "@mariozechner/pi-ai";
import { expect, test } from "vitest";
import { AgentHarness } from "../../../worker/index.ts";
import { deferred, fauxAgentModel, fauxError, memoryStore, until } from "../../../worker/testing.ts";
import { cleanups, echo, gatedTool, liveOf, messageOf, open, textOf, transcript } from "./fixtures.ts";

/**
 * Submit "hi" to `opened`'s root and read the run ended by the provider's 400 after `requests`
 * requests: the input unanswered model_error with the provider's words, the generation failed
 * with them as its message and the reason as detail, pi.live emptied.
 */
async function expectEndedOn400(opened: Awaited<ReturnType<typeof open>>, requests: number): Promise<void> {
  const { h, root, faux } = opened;
  const settled = await (await root.submit({ type: "input", content: "hi" })).wait();
  expect(settled).toMatchObject({
    status: "unanswered",
    reason: "model_error",
    detail: "400 Invalid request",
  });
  expect(faux.requests).toHaveLength(requests);
  const [generation] = await h.tasks({ kind: "pi.generation" });
  expect(generation!.state).toEqual({
    status: "terminal",
    outcome: {
      status: "failed",
      error: { message: "400 Invalid request", detail: { reason: "model_error" } },
    },
  });
  expect(liveOf(h).run).toBeUndefined();
}

test("a non-retryable provider error fails the run at once, though retries are on: unanswered model_error with the error text, the generation failed", async () => {
  const opened = await open((req, n) => (n === 1 ? fauxError("400 Invalid request") : echo(req, n)), {
    settings: { retry: { enabled: true, maxRetries: 3, baseDelayMs: 1 } },
  });
  await expectEndedOn400(opened, 1);
});

test("a non-retryable error on a retry's attempt fails the run there: a 503 retried once, then a 400 ends it with no third request (draw 34b-D)", async () => {
  // The test above fails on the first attempt; a run that had already retried (a retry sequence
  // taken for a reason to retry again) passed it.
  const opened = await open(
    (req, n) =>
      n === 1
        ? fauxError("503 Service Unavailable")
        : n === 2
          ? fauxError("400 Invalid request")
          : echo(req, n),
    { settings: { retry: { enabled: true, maxRetries: 3, baseDelayMs: 1 } } },
  );
  await expectEndedOn400(opened, 2);
});

test("an abort while the answer streams converts the committed partial into an aborted entry; the input is unanswered aborted and pi.live is emptied", async () => {
  const slow = fauxAgentModel(() => fauxAssistantMessage("word ".repeat(400).trim()), {
    tokensPerSecond: 200,
  });
  cleanups.push(async () => slow.unregister());
  const h = await AgentHarness.open(await memoryStore(), {
    models: slow.models,
    defaultModel: slow.ref,
    settings: { partialIntervalMs: 20 },
  });
  cleanups.push(() => h.close().catch(() => undefined));
  const root = await h.root();
  const submission = await root.submit({ type: "input", content: "hi" });
  const message = () => (liveOf(h).generation as { message?: AssistantMessage } | undefined)?.message;
  await until(() => (message()?.content.length ?? 0) > 0, { what: "a committed partial" });
  const partial = textOf(message()!);
  const taskId = liveOf(h).run!.taskId;
  expect(await h.abortTask(taskId)).toBe("marked");
  expect(await submission.wait()).toMatchObject({ status: "unanswered", reason: "aborted" });
  const entries = await transcript(root);
  expect(entries.map((e) => e.kind)).toEqual(["pi.user", "pi.assistant"]);
  const converted = messageOf(entries[1]!) as AssistantMessage;
  expect(converted.stopReason).toBe("aborted");
  expect(textOf(converted).startsWith(partial)).toBe(true);
  expect(liveOf(h)).toEqual({});
  // The generation itself ends aborted (not failed or faulted): its abort handler's outcome.
  expect((await h.waitForTask(taskId)).state).toEqual({
    status: "terminal",
    outcome: { status: "aborted", reason: "aborted" },
  });
});

test("an abort while the answer streams with a follow-up queued converts the committed partial too, before the abort's final boundary places the follow-up (NOT-APPLICABLE [6], draw 38C)", async () => {
  // Draw 38C: the abort handler converting the partial only when it ends the run bare (the route
  // with a queued follow-up removing pi.live's generation, and the partial with it, unconverted)
  // passed every test: none aborted a run holding a partial while an input was queued.
  const slow = fauxAgentModel(() => fauxAssistantMessage("word ".repeat(400).trim()), {
    tokensPerSecond: 200,
  });
  cleanups.push(async () => slow.unregister());
  const h = await AgentHarness.open(await memoryStore(), {
    models: slow.models,
    defaultModel: slow.ref,
    settings: { partialIntervalMs: 20 },
  });
  cleanups.push(() => h.close().catch(() => undefined));
  const root = await h.root();
  const submission = await root.submit({ type: "input", content: "hi" });
  const message = () => (liveOf(h).generation as { message?: AssistantMessage } | undefined)?.message;
  await until(() => (message()?.content.length ?? 0) > 0, { what: "a committed partial" });
  const partial = textOf(message()!);
  const follow = await root.submit({ type: "input", content: "then" });
  const taskId = liveOf(h).run!.taskId;
  expect(await h.abortTask(taskId)).toBe("marked");
  expect(await submission.wait()).toMatchObject({ status: "unanswered", reason: "aborted" });
  const entries = await transcript(root);
  // The aborted run's converted partial comes before the follow-up's pi.user entry.
  expect(entries.slice(0, 3).map((e) => e.kind)).toEqual(["pi.user", "pi.assistant", "pi.user"]);
  const converted = messageOf(entries[1]!) as AssistantMessage;
  expect(converted.stopReason).toBe("aborted");
  expect(textOf(converted).startsWith(partial)).toBe(true);
  expect(textOf(messageOf(entries[2]!))).toBe("then");
  expect((await h.waitForTask(taskId)).state).toEqual({
    status: "terminal",
    outcome: { status: "aborted", reason: "aborted" },
  });
  expect(await follow.wait()).toMatchObject({ status: "done" });
});

test("a run whose input something else already settled still ends on abort; the earlier settlement stays", async () => {
  const hold = deferred();
  const { h, root } = await open(async (req, n) => {
    await hold.promise;
    return echo(req, n);
  });
  const submission = await root.submit({ type: "input", content: "hi" });
  await until(() => liveOf(h).run !== undefined, { what: "the run" });
  await h.transaction((tx) => {
    const record = tx.submission(submission.id)!;
    const { payload: _p, ...rest } = record as typeof record & { payload?: unknown };
    tx.updateSubmission({ ...rest, status: "unanswered", reason: "withdrawn" } as typeof record);
  });
  const taskId = liveOf(h).run!.taskId;
  expect(await h.abortTask(taskId)).toBe("marked");
  hold.resolve();
  expect((await h.waitForTask(taskId)).state).toMatchObject({
    status: "terminal",
    outcome: { status: "aborted" },
  });
  expect(await submission.record()).toMatchObject({ status: "unanswered", reason: "withdrawn" });
  // The run's cleanup is whole: no run, no generation state left in pi.live.
  expect(liveOf(h)).toEqual({});
});

test("a run whose input something else already answered done still ends on abort; the done answer stays, not overwritten by unanswered aborted (draw 36c)", async () => {
  // Draw 36c: every earlier settlement was unanswered; settling a run's inputs that skipped only
  // unanswered ones (overwriting a done answer with unanswered aborted) passed every test.
  const hold = deferred();
  const { h, root } = await open(async (req, n) => {
    await hold.promise;
    return echo(req, n);
  });
  const submission = await root.submit({ type: "input", content: "hi" });
  await until(() => liveOf(h).run !== undefined, { what: "the run" });
  await h.transaction((tx) => {
    const record = tx.submission(submission.id)!;
    const { payload: _p, ...rest } = record as typeof record & { payload?: unknown };
    tx.updateSubmission({ ...rest, status: "done", answer: 1 } as typeof record);
  });
  const taskId = liveOf(h).run!.taskId;
  expect(await h.abortTask(taskId)).toBe("marked");
  hold.resolve();
  expect((await h.waitForTask(taskId)).state).toMatchObject({
    status: "terminal",
    outcome: { status: "aborted" },
  });
  expect(await submission.record()).toMatchObject({ status: "done", answer: 1 });
  expect(liveOf(h)).toEqual({});
});

test("a run whose input something else already settled, with a follow-up queued, still ends on abort at its final boundary: the settlement stays and the follow-up starts the next run (draw 38b)", async () => {
  // Draw 38b: the abort handler placing the queued follow-up only when the run still had an input
  // of its own to settle (the follow-up left queued, nothing live to answer it) passed every test:
  // none aborted a run whose input was settled elsewhere while an input was queued.
  const hold = deferred();
  const { h, root } = await open(async (req, n) => {
    if (n === 1) await hold.promise;
    return echo(req, n);
  });
  const submission = await root.submit({ type: "input", content: "hi" });
  await until(() => liveOf(h).run !== undefined, { what: "the run" });
  const follow = await root.submit({ type: "input", content: "then" });
  await h.transaction((tx) => {
    const record = tx.submission(submission.id)!;
    const { payload: _p, ...rest } = record as typeof record & { payload?: unknown };
    tx.updateSubmission({ ...rest, status: "unanswered", reason: "withdrawn" } as typeof record);
  });
  const taskId = liveOf(h).run!.taskId;
  // The held responder ignores the abort signal: release it while the abort joins the invocation.
  const marking = h.abortTask(taskId);
  await until(() => h.inspect().tasks.some((t) => t.record.id === taskId && t.record.abortRequested), {
    what: "the mark",
  });
  hold.resolve();
  expect(await marking).toBe("marked");
  expect((await h.waitForTask(taskId)).state).toMatchObject({
    status: "terminal",
    outcome: { status: "aborted" },
  });
  expect(await submission.record()).toMatchObject({ status: "unanswered", reason: "withdrawn" });
  // The abort's own commit placed the follow-up (its final boundary): not left queued.
  expect(["placed", "done"]).toContain((await follow.record()).status);
  expect(await follow.wait()).toMatchObject({ status: "done" });
  expect(liveOf(h)).toEqual({});
});

test("a run of two inputs, the first settled by something else, still ends on abort: the earlier settlement stays and the other input is unanswered aborted (break 31H)", async () => {
  const gate = gatedTool();
  const hold = deferred();
  const { h, root, faux } = await open(
    async (req, n) => {
      if (n === 1)
        return fauxAssistantMessage([fauxToolCall("hold", {}, { id: "c1" })], { stopReason: "toolUse" });
      await hold.promise;
      return echo(req, n);
    },
    { tools: [gate.tool] },
  );
  const first = await root.submit({ type: "input", content: "go" });
  await gate.started.promise;
  const steer = await root.submit({ type: "input", content: "steer", whenBusy: "steer" });
  gate.release.resolve();
  await until(() => faux.requests.length === 2, { what: "the second request" });
  expect(liveOf(h).run?.inputs).toEqual([first.id, steer.id]);
  await h.transaction((tx) => {
    const record = tx.submission(first.id)!;
    const { payload: _p, ...rest } = record as typeof record & { payload?: unknown };
    tx.updateSubmission({ ...rest, status: "unanswered", reason: "withdrawn" } as typeof record);
  });
  const taskId = liveOf(h).run!.taskId;
  // The held responder ignores the abort signal: release it while the abort joins the invocation.
  const marking = h.abortTask(taskId);
  await until(() => h.inspect().tasks.some((t) => t.record.id === taskId && t.record.abortRequested), {
    what: "the mark",
  });
  hold.resolve();
  expect(await marking).toBe("marked");
  expect((await h.waitForTask(taskId)).state).toMatchObject({
    status: "terminal",
    outcome: { status: "aborted" },
  });
  expect(await first.record()).toMatchObject({ status: "unanswered", reason: "withdrawn" });
  expect(await steer.record()).toMatchObject({ status: "unanswered", reason: "aborted" });
  expect(liveOf(h)).toEqual({});
});

test("a non-retryable provider error in a conversation with history to compact fails the run at once: no summary, no second request", async () => {
  // Break 28C: the test above has one input, nothing to compact; a 400 taken for a context
  // overflow (compacted, then sent again) passed it.
  const big = (label: string) => `${label} ${"x".repeat(400)}`;
  const requests: string[] = [];
  const faux = fauxAgentModel(
    (req) => {
      const last = textOf([...req.messages].reverse().find((m) => m.role === "user")!);
      requests.push(req.systemPrompt?.includes("summar") ? "summary" : last.slice(0, 2));
      if (last.startsWith("q4")) return fauxError("400 Invalid request");
      return fauxAssistantMessage(big("answer"));
    },
    { contextWindow: 1_000_000 },
  );
  cleanups.push(async () => faux.unregister());
  const h = await AgentHarness.open(await memoryStore(), {
    models: faux.models,
    defaultModel: faux.ref,
    settings: {
      compaction: { enabled: true, reserveTokens: 100, keepRecentTokens: 150, backgroundTokens: 0 },
      retry: { enabled: true, maxRetries: 3, baseDelayMs: 1 },
    },
  });
  cleanups.push(() => h.close().catch(() => undefined));
  const root = await h.root();
  for (let i = 1; i <= 3; i++)
    expect((await (await root.submit({ type: "input", content: big(`q${i}`) })).wait()).status).toBe("done");
  const settled = await (await root.submit({ type: "input", content: big("q4") })).wait();
  expect(settled).toMatchObject({
    status: "unanswered",
    reason: "model_error",
    detail: "400 Invalid request",
  });
  expect(requests).toEqual(["q1", "q2", "q3", "q4"]);
  expect(await h.tasks({ kind: "pi.compaction" })).toEqual([]);
  const generations = await h.tasks({ kind: "pi.generation" });
  expect(generations.at(-1)!.state).toEqual({
    status: "terminal",
    outcome: {
      status: "failed",
      error: { message: "400 Invalid request", detail: { reason: "model_error" } },
    },
  });
});
