/**
 * Which aborts reach a compaction (spec §8.7): a background compaction is a boundary for
 * Conversation.abort() (only abortTask or `{ background: true }` stops it); a blocking one is owned
 * by the generation that waits for it and is aborted with it, before the generation's abort handler
 * runs; a summary already queued as a write survives the abort of the run, and Submission.abort()
 * withdraws it. (A manual compaction under way is aborted by Conversation.abort(): `compaction`.)
 */
import { fauxAssistantMessage, fauxToolCall } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { expect, test } from "vitest";
import { startBackgroundCompaction } from "../../../worker/agent/compaction/start.ts";
import { SUMMARY_SYSTEM_PROMPT } from "../../../worker/agent/compaction/task.ts";
import { textResult } from "../../../worker/agent/tools/contract.ts";
import {
  AgentHarness,
  type Conversation,
  defineTool,
  type LiveState,
  type TaskId,
} from "../../../worker/index.ts";
import {
  deferred,
  type FauxRequest,
  type FauxResponder,
  fauxAgentModel,
  memoryStore,
  until,
} from "../../../worker/testing.ts";
import { cleanups, gatedTool, liveOf, open, textOf } from "./fixtures.ts";

const big = (label: string) => `${label} ${"x".repeat(400)}`; // about 100 tokens
const isSummary = (r: FauxRequest) => r.systemPrompt === SUMMARY_SYSTEM_PROMPT;

/**
 * The model of the queued-summary tests: a summary request answers "SUMMARY"; an input that starts
 * with "hold" (or is a key of `calls`) calls the `hold` tool (or the named one) until its result is
 * in; anything else answers with about 100 tokens.
 */
function holdingResponder(calls: Record<string, string> = {}): FauxResponder {
  return (req) => {
    if (isSummary(req)) return fauxAssistantMessage("SUMMARY");
    const lastUser = textOf([...req.messages].reverse().find((m) => m.role === "user")!);
    const answered = req.messages.at(-1)?.role === "toolResult";
    const call = lastUser.startsWith("hold") ? "hold" : calls[lastUser];
    return call && !answered
      ? fauxAssistantMessage([fauxToolCall(call, {}, { id: `call-${req.messages.length}` })], {
          stopReason: "toolUse",
        })
      : fauxAssistantMessage(big("answer"));
  };
}

/** The summary submission a finished background compaction queued (checked still queued). */
async function queuedSummary(h: AgentHarness, taskId: TaskId): Promise<number> {
  const record = await h.waitForTask(taskId);
  const id = (record.state as unknown as { outcome: { result: { submissionId: number } } }).outcome.result
    .submissionId;
  expect((await h.submissionRecord(id))?.status).toBe("queued");
  return id;
}

/** A 100-token answer for the conversation; "SUMMARY" for the summarizer once `gate` opens. */
function gatedSummaries() {
  const gate = deferred();
  const responder: FauxResponder = async (req) => {
    if (!isSummary(req)) return fauxAssistantMessage(big("answer"));
    await gate.promise;
    return fauxAssistantMessage("SUMMARY");
  };
  return { gate, responder };
}

async function chat(root: Conversation, turns: number): Promise<void> {
  for (let i = 1; i <= turns; i++) await (await root.submit({ type: "input", content: big(`q${i}`) })).wait();
}

const compactionsOf = (h: AgentHarness) => (liveOf(h) as LiveState).compactions ?? [];

test("a background compaction survives Conversation.abort(); abort({ background: true }) stops it", async () => {
  let gate = deferred();
  // The second summary request is a manual compaction's, held by its own gate.
  const manualGate = deferred();
  let summaries = 0;
  const responder: FauxResponder = async (req) => {
    if (!isSummary(req)) return fauxAssistantMessage(big("answer"));
    summaries++;
    await (summaries === 2 ? manualGate.promise : gate.promise);
    return fauxAssistantMessage("SUMMARY");
  };
  const { h, root, faux } = await open(responder, { settings: { compaction: { keepRecentTokens: 150 } } });
  await chat(root, 3);
  const first = await h.transaction((tx) => startBackgroundCompaction(tx, h.builtin.compaction, root.id));
  await until(() => faux.requests.filter(isSummary).length === 1, { what: "summarizing" });
  // A manual compaction beside it is the conversation's ordinary work: the abort ends it, and its
  // abort handler removes its own status only (break 31G: a handler that cleared every status in
  // pi.live passed every test, each aborting a lone compaction).
  const manual = await root.compact();
  await until(() => faux.requests.filter(isSummary).length === 2, { what: "the manual one summarizing" });
  // The faux provider does not watch the signal while its responder waits: release it once marked.
  const abortingManual = root.abort();
  await until(() => h.inspect().tasks.some((t) => t.record.id === manual && t.record.abortRequested), {
    what: "the manual one marked",
  });
  manualGate.resolve();
  await abortingManual;
  expect((await h.waitForTask(manual)).state).toMatchObject({ outcome: { status: "aborted" } });
  expect((await h.getTask(first))?.abortRequested).toBe(false);
  expect(compactionsOf(h).map((s) => s.taskId)).toEqual([first]);
  gate.resolve();
  expect((await h.waitForTask(first)).state).toMatchObject({ outcome: { status: "completed" } });
  expect((await root.entries()).at(-1)?.kind).toBe("pi.compaction");
  // Crossing the boundary: a second one under way is aborted.
  gate = deferred();
  await chat(root, 3);
  const second = await h.transaction((tx) => startBackgroundCompaction(tx, h.builtin.compaction, root.id));
  await until(() => faux.requests.filter(isSummary).length === 3, { what: "summarizing again" });
  // The faux provider does not watch the signal while its responder waits: release it once marked.
  const aborting = root.abort({ background: true });
  await until(() => h.inspect().tasks.some((t) => t.record.id === second && t.record.abortRequested), {
    what: "marked",
  });
  gate.resolve();
  await aborting;
  expect((await h.waitForTask(second)).state).toMatchObject({ outcome: { status: "aborted" } });
  expect(compactionsOf(h)).toEqual([]);
});

test("a blocking compaction is aborted with its generation, before the generation's abort handler runs", async () => {
  const { gate, responder } = gatedSummaries();
  const faux = fauxAgentModel(responder, { contextWindow: 1200 });
  const h = await AgentHarness.open(await memoryStore(), {
    models: faux.models,
    defaultModel: faux.ref,
    settings: { compaction: { reserveTokens: 100, keepRecentTokens: 150, backgroundTokens: 0 } },
  });
  cleanups.push(async () => {
    await h.close().catch(() => undefined);
    faux.unregister();
  });
  const root = await h.root();
  let input: Awaited<ReturnType<Conversation["submit"]>> | undefined;
  for (let turn = 1; turn <= 12 && !faux.requests.some(isSummary); turn++) {
    input = await root.submit({ type: "input", content: big(`q${turn}`) });
    const settled = input.wait();
    await Promise.race([settled, until(() => faux.requests.some(isSummary), { timeoutMs: 10_000 })]);
  }
  const [compaction] = await h.tasks({ kind: "pi.compaction" });
  expect(compaction).toMatchObject({ input: { reason: "threshold", blocking: true } });
  const generation = (liveOf(h) as LiveState).run!.taskId;
  expect(compaction!.owner).toBe(generation);
  // In commit order: the compaction's end, and the generation's abort handler's commit (it settles
  // the run's input and ends the generation, or holds it while owned work lives).
  const order: string[] = [];
  h.subscribe((change) => {
    for (const t of change.tasks)
      if (t.id === compaction!.id && t.state.status === "terminal") order.push("compaction ended");
    if (change.submissions.some((s) => s.id === input!.id && s.status === "unanswered"))
      order.push("generation's handler");
  });
  const aborting = root.abort();
  await until(
    () => h.inspect().tasks.some((t) => t.record.id === compaction!.id && t.record.abortRequested),
    {
      what: "marked",
    },
  );
  gate.resolve();
  await aborting;
  expect(await input!.wait()).toEqual({ status: "unanswered", reason: "aborted" });
  const ended = await h.waitForTask(compaction!.id);
  const owner = await h.waitForTask(generation);
  expect(ended.state).toMatchObject({ outcome: { status: "aborted" } });
  expect(owner.state).toMatchObject({ outcome: { status: "aborted" } });
  // The compaction ended first: the generation's handler ran once its owned work had drained.
  expect(ended.endedAt!).toBeLessThanOrEqual(owner.endedAt!);
  expect(order).toEqual(["compaction ended", "generation's handler"]);
  expect(compactionsOf(h)).toEqual([]);
  expect((await root.entries()).some((e) => e.kind === "pi.compaction")).toBe(false);
  expect(liveOf(h)).toEqual({});
});

test("a summary already queued survives Conversation.abort(); Submission.abort() withdraws it", async () => {
  const hold = gatedTool();
  const responder = holdingResponder();
  const { h, root } = await open(responder, {
    tools: [hold.tool],
    settings: { compaction: { keepRecentTokens: 150 } },
  });
  await chat(root, 3);
  const holdThenCompact = async () => {
    const run = await root.submit({ type: "input", content: "hold on" });
    await until(() => (liveOf(h) as LiveState).tools?.[0]?.status === "running", { what: "tool running" });
    const taskId = await root.compact();
    return { run, id: await queuedSummary(h, taskId) };
  };
  const first = await holdThenCompact();
  await root.abort();
  expect((await first.run.wait()).status).toBe("unanswered");
  expect((await h.submissionRecord(first.id))?.status).toBe("queued");
  // The next submission's boundary places it.
  await (await root.submit({ type: "input", content: "next" })).wait();
  expect((await h.submissionRecord(first.id))?.status).toBe("done");
  const placed = (await root.entries()).filter((e) => e.kind === "pi.compaction");
  expect(placed).toHaveLength(1);
  const second = await holdThenCompact();
  await (await h.submission(second.id))!.abort();
  expect((await h.submissionRecord(second.id))?.status).toBe("unanswered");
  hold.release.resolve();
  expect((await second.run.wait()).status).toBe("done");
  expect((await root.entries()).filter((e) => e.kind === "pi.compaction")).toHaveLength(1);
});

test("a summary already queued survives Conversation.abort({ background: true }) too; the next boundary places it (draw 35b)", async () => {
  // Draw 35b: abort({ background: true }) withdrawing the queued writes of the conversations it
  // reaches (as it withdraws their queued inputs) passed every test, each aborting without it.
  const hold = gatedTool();
  const responder = holdingResponder();
  const { h, root } = await open(responder, {
    tools: [hold.tool],
    settings: { compaction: { keepRecentTokens: 150 } },
  });
  await chat(root, 3);
  const run = await root.submit({ type: "input", content: "hold on" });
  await until(() => (liveOf(h) as LiveState).tools?.[0]?.status === "running", { what: "tool running" });
  const id = await queuedSummary(h, await root.compact());
  await root.abort({ background: true });
  expect((await run.wait()).status).toBe("unanswered");
  expect((await h.submissionRecord(id))?.status).toBe("queued");
  await (await root.submit({ type: "input", content: "next" })).wait();
  expect((await h.submissionRecord(id))?.status).toBe("done");
  expect((await root.entries()).filter((e) => e.kind === "pi.compaction")).toHaveLength(1);
});

test("a summary already queued survives a tool's conversation handle abort() too; the next boundary places it (draw 35b)", async () => {
  // Draw 35b: a tool's conversation handle abort() withdrawing the queued writes (a queued summary)
  // of the conversations it reaches passed every test, none of which aborts through that handle.
  const hold = gatedTool();
  let target = 0;
  const aborter = defineTool({
    name: "aborter",
    description: "Abort another conversation",
    parameters: Type.Object({}),
    async execute(_args, api) {
      await api.conversation(target)!.abort();
      return textResult("aborted it");
    },
  });
  const responder = holdingResponder({ "abort it": "aborter" });
  const { h, root } = await open(responder, {
    tools: [hold.tool, aborter],
    settings: { compaction: { keepRecentTokens: 150 } },
  });
  const other = await h.createConversation({ ownership: { kind: "ownerless" } });
  target = other.id;
  await chat(other, 3);
  const run = await other.submit({ type: "input", content: "hold on" });
  await hold.started.promise;
  const id = await queuedSummary(h, await other.compact());
  expect((await (await root.submit({ type: "input", content: "abort it" })).wait()).status).toBe("done");
  expect((await run.wait()).status).toBe("unanswered");
  expect((await h.submissionRecord(id))?.status).toBe("queued");
  await (await other.submit({ type: "input", content: "next" })).wait();
  expect((await h.submissionRecord(id))?.status).toBe("done");
  expect((await other.entries()).filter((e) => e.kind === "pi.compaction")).toHaveLength(1);
});
