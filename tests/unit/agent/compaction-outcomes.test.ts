/**
 * How a summary attempt is classified and pinned (spec §8.7): the request's maxTokens, a summary
 * that stops at `length` or has no model failing the compaction with nothing placed, and the status
 * leaving pi.live with the outcome, also one the scheduler writes (faulted, orphaned; spec §5.4).
 */
import { fauxAssistantMessage, fauxToolCall, streamSimple } from "@mariozechner/pi-ai";
import { expect, test } from "vitest";
import { SUMMARY_SYSTEM_PROMPT } from "../../../worker/agent/compaction/task.ts";
import type { Conversation, LiveState, UsageState } from "../../../worker/index.ts";
import {
  deferred,
  type FauxRequest,
  type FauxResponder,
  fauxError,
  memoryStore,
} from "../../../worker/testing.ts";
import { faultingHook, liveOf, open, reopen } from "./fixtures.ts";

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

test("the summary request's maxTokens is the model's maxTokens when floor(0.8 * reserveTokens) is larger", async () => {
  const maxTokens: unknown[] = [];
  const responder: FauxResponder = (req) =>
    isSummary(req) ? fauxAssistantMessage("SUMMARY") : fauxAssistantMessage(big("answer"));
  const { h, root, faux } = await open(responder, {
    // Threshold compaction off (a manual one ignores `enabled`), so the large reserve starts none.
    settings: { compaction: { enabled: false, keepRecentTokens: 150, reserveTokens: 10_000_000 } },
    stream: (model, context, options) => {
      if (context.systemPrompt === SUMMARY_SYSTEM_PROMPT) maxTokens.push(options?.maxTokens);
      return streamSimple(model, context, options);
    },
  });
  expect(faux.model.maxTokens).toBeGreaterThan(0);
  expect(faux.model.maxTokens).toBeLessThan(8_000_000);
  await chat(root, 3);
  const taskId = await root.compact();
  expect((await h.waitForTask(taskId)).state).toMatchObject({ outcome: { status: "completed" } });
  expect(maxTokens).toEqual([faux.model.maxTokens]);
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
    outcome: { status: "failed", error: { message: "length", detail: { reason: "model_error" } } },
  });
  expect((await root.entries()).length).toBe(before);
  expect((liveOf(h) as LiveState).compactions).toBeUndefined();
});

test("the summary request's maxTokens is floor(0.8 * reserveTokens) when the model states no positive maxTokens", async () => {
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
  await chat(root, 3);
  // The model's value counts only when positive (spec §8.7).
  faux.model.maxTokens = 0;
  const taskId = await root.compact();
  expect((await h.waitForTask(taskId)).state).toMatchObject({ outcome: { status: "completed" } });
  expect(maxTokens).toEqual([800]);
});

test("a compaction without a usable model fails no_model before any request, and before any beforeCompact hook is asked", async () => {
  const asked: unknown[] = [];
  const { h, root, faux } = await open(
    (req) => (isSummary(req) ? fauxAssistantMessage("SUMMARY") : fauxAssistantMessage(big("answer"))),
    {
      settings: { compaction: { keepRecentTokens: 150 } },
      hooks: { beforeCompact: [(input) => void asked.push(input)] },
    },
  );
  await chat(root, 3);
  const sent = faux.requests.length;
  await root.configure({ model: { provider: "nowhere", modelId: "nothing" } });
  const taskId = await root.compact();
  const record = await h.waitForTask(taskId);
  expect(record.state).toMatchObject({ status: "terminal", outcome: { status: "failed" } });
  expect(record.state).toMatchObject({
    outcome: {
      status: "failed",
      error: { message: "unknown model nowhere/nothing", detail: { reason: "no_model" } },
    },
  });
  expect(faux.requests.length).toBe(sent);
  expect(asked).toEqual([]);
  expect((liveOf(h) as LiveState).compactions).toBeUndefined();
  // With its model back, the same compaction asks the hook first.
  await root.configure({ model: faux.ref });
  await h.waitForTask(await root.compact());
  expect(asked).toHaveLength(1);
});

test("a compaction in a conversation whose agent has no model at all fails no_model before any request or hook (spec §8.7)", async () => {
  const asked: unknown[] = [];
  const { root, faux, store } = await open(
    (req) => (isSummary(req) ? fauxAssistantMessage("SUMMARY") : fauxAssistantMessage(big("answer"))),
    { settings: { compaction: { keepRecentTokens: 150 } } },
  );
  await chat(root, 3);
  const sent = faux.requests.length;
  // Reopened without a host default: no model is stored or given (spec §7.1: "model: stored, else none").
  const h = await reopen(store, {
    models: faux.models,
    settings: { compaction: { keepRecentTokens: 150 } },
    hooks: { beforeCompact: [(input) => void asked.push(input)] },
  });
  const record = await h.waitForTask(await (await h.root()).compact());
  expect(record.state).toMatchObject({
    status: "terminal",
    outcome: { status: "failed", error: { detail: { reason: "no_model" } } },
  });
  expect(faux.requests.length).toBe(sent);
  expect(asked).toEqual([]);
  expect((liveOf(h) as LiveState).compactions).toBeUndefined();
});

test("with nothing to compact and no model, a compaction still fails no_model: the model is checked before the cut (spec §8.7)", async () => {
  // Break 30M: "nothing to compact" judged before the model completed `{}` here, and every no-model
  // test had a long transcript.
  const { root, faux, store } = await open(() => fauxAssistantMessage("answer"), {
    settings: { compaction: { keepRecentTokens: 150 } },
  });
  expect(await root.entries()).toEqual([]);
  const h = await reopen(store, { models: faux.models, settings: { compaction: { keepRecentTokens: 150 } } });
  const record = await h.waitForTask(await (await h.root()).compact());
  expect(record.state).toMatchObject({
    status: "terminal",
    outcome: { status: "failed", error: { detail: { reason: "no_model" } } },
  });
  expect(faux.requests).toEqual([]);
});

test("a faulted compaction's status is removed in the commit that writes the fault", async () => {
  // A hook's throw is reported; a reporter that throws as well faults the phase.
  const { h, root } = await open(
    (req) => (isSummary(req) ? fauxAssistantMessage("SUMMARY") : fauxAssistantMessage(big("answer"))),
    {
      settings: { compaction: { keepRecentTokens: 150 } },
      ...faultingHook("beforeCompact", "hook bug"),
    },
  );
  await chat(root, 3);
  const before = (await root.entries()).length;
  const taskId = await root.compact();
  expect((await h.waitForTask(taskId)).state).toMatchObject({
    status: "terminal",
    outcome: { status: "faulted", error: { message: "hook bug" } },
  });
  expect((liveOf(h) as LiveState).compactions).toBeUndefined();
  expect((await root.entries()).length).toBe(before);
});

/**
 * A compaction left summarizing (its summary request held by `gate`) after three exchanges: the
 * committed image at that moment as a new memory store, and the compaction's task id.
 */
async function summarizingImage() {
  const gate = deferred();
  const first = await open(
    async (req) => {
      if (!isSummary(req)) return fauxAssistantMessage(big("answer"));
      await gate.promise;
      return fauxAssistantMessage("SUMMARY");
    },
    { settings: { compaction: { keepRecentTokens: 150 } } },
  );
  await chat(first.root, 3);
  const taskId = await first.root.compact();
  await expect.poll(() => first.faux.requests.filter(isSummary).length).toBe(1);
  return { gate, store: await memoryStore(first.store.image()), taskId };
}

/**
 * A compaction summarizing when its engine stopped, reopened by an engine whose definition is older
 * than the stored task (so it cannot run: orphaned, task_too_old, once aborted); `orphaning` collects
 * the pi.live value each commit that ends the task writes.
 */
async function tooOldCompactionReopened() {
  // The committed image while it summarizes, opened by an engine whose definition is older.
  const { store, taskId } = await summarizingImage();
  await store.commit((sql) => sql.run("UPDATE tasks SET version = 99 WHERE id = ?", [taskId]));
  const { h, root } = await open(() => fauxAssistantMessage(big("answer")), { store });
  expect((liveOf(h) as LiveState).compactions?.map((s) => s.taskId)).toEqual([taskId]);
  const orphaning: unknown[] = [];
  h.subscribe((change) => {
    if (change.tasks.some((t) => t.id === taskId && t.state.status === "terminal"))
      orphaning.push(change.docs.find((d) => d.name === "pi.live")?.value ?? "pi.live not written");
  });
  return { h, root, taskId, orphaning };
}

test("an orphaned compaction's status is removed in the commit that orphans it", async () => {
  const { h, root, taskId, orphaning } = await tooOldCompactionReopened();
  const before = (await root.entries()).length;
  // The commit that writes the orphaned outcome: its pi.live write (sample 22b: the status was only
  // read afterwards, so a removal in a later commit passed).
  expect(await h.abortTask(taskId)).toBe("marked");
  expect(orphaning).toEqual([{}]);
  expect((await h.getTask(taskId))?.state).toMatchObject({
    status: "terminal",
    outcome: { status: "orphaned", reason: "task_too_old" },
  });
  expect((liveOf(h) as LiveState).compactions).toBeUndefined();
  expect((await root.entries()).length).toBe(before);
});

test("a compaction the scheduler orphans (marked by Conversation.abort(), settled at its reservation) has its status removed in the commit that orphans it", async () => {
  // Spec §5.4: the orphaning commit runs the kind's cleanup whichever path orphans it. The test
  // above orphans in abortTask's marking commit; here the mark comes from Conversation.abort() and
  // the scheduler writes the outcome when it would reserve the abort invocation.
  const { h, root, taskId, orphaning } = await tooOldCompactionReopened();
  await root.abort();
  expect((await h.getTask(taskId))?.state).toMatchObject({
    status: "terminal",
    outcome: { status: "orphaned", reason: "task_too_old" },
  });
  expect(orphaning).toEqual([{}]);
  expect((liveOf(h) as LiveState).compactions).toBeUndefined();
});

test("a compaction whose stored row is unreadable at a reopen faults with the diagnostic, and its status is removed in the commit that writes the fault (draw 34b)", async () => {
  // Draw 34b: every named faulted compaction faulted by a throwing hook, live; the scheduler's fault
  // of an unreadable row at open skipping the kind's cleanup (its status kept) passed them all.
  const { gate, store, taskId } = await summarizingImage();
  await store.commit((sql) => sql.run("UPDATE tasks SET state = '{bad' WHERE id = ?", [taskId]));
  const { h } = await open(() => fauxAssistantMessage(big("answer")), { store });
  expect((await h.waitForTask(taskId)).state).toMatchObject({
    status: "terminal",
    outcome: {
      status: "faulted",
      error: { message: expect.stringMatching(/column state is not valid JSON/) },
    },
  });
  // Read, not waited on: the fault and its cleanup are one commit.
  expect(liveOf(h).compactions).toBeUndefined();
  expect(liveOf(h)).toEqual({});
  gate.resolve();
});

test.each([
  ["a length stop", () => fauxAssistantMessage("SUMMA", { stopReason: "length" }), "length"],
  ["an empty text", () => fauxAssistantMessage("   "), "empty summary"],
  [
    "a tool call",
    () => fauxAssistantMessage([fauxToolCall("read", {})], { stopReason: "stop" }),
    "empty summary",
  ],
  ["a non-retryable error", () => fauxError("400 Bad Request: no"), "400 Bad Request: no"],
] as const)(
  "a summary attempt that is not a non-empty text stop (%s) fails the compaction with model_error, nothing placed, its spend counted",
  async (_name, summary, words) => {
    // Each sent once, retries on as by default (draw 34b-D: a summary's non-retryable error retried
    // like a 503 still ended model_error after its retries, 14 s later, and passed).
    let summaries = 0;
    const responder: FauxResponder = (req) => {
      if (!isSummary(req)) return fauxAssistantMessage(big("answer"));
      summaries++;
      return summary();
    };
    const { h, root, faux } = await open(responder, { settings: { compaction: { keepRecentTokens: 150 } } });
    await chat(root, 3);
    const key = `${faux.ref.provider}/${faux.ref.modelId}`;
    const spent = () => (h.docNow(1, "pi.usage") as unknown as UsageState).models[key]!.input;
    const before = { entries: (await root.entries()).length, spent: spent() };
    const taskId = await root.compact();
    const record = await h.waitForTask(taskId);
    expect(record.state).toMatchObject({
      status: "terminal",
      outcome: { status: "failed", error: { message: words, detail: { reason: "model_error" } } },
    });
    expect((await root.entries()).length).toBe(before.entries);
    expect((liveOf(h) as LiveState).compactions).toBeUndefined();
    expect(spent()).toBeGreaterThan(before.spent);
    expect(summaries).toBe(1);
  },
);

test("two compactions under way at once: pi.live lists a status for each, and each outcome removes its own", async () => {
  // Break 30K: every test ran one compaction at a time; a status write that dropped the others passed.
  const gate = deferred();
  const { h, root } = await open(
    async (req) => {
      if (!isSummary(req)) return fauxAssistantMessage(big("answer"));
      await gate.promise;
      return fauxAssistantMessage("SUMMARY");
    },
    { settings: { compaction: { keepRecentTokens: 150 } } },
  );
  await chat(root, 3);
  const first = await root.compact();
  const second = await root.compact();
  expect((liveOf(h) as LiveState).compactions).toEqual([
    { taskId: first, reason: "manual", blocking: false, attempt: 1 },
    { taskId: second, reason: "manual", blocking: false, attempt: 1 },
  ]);
  gate.resolve();
  await h.waitForTask(first);
  await h.waitForTask(second);
  expect((liveOf(h) as LiveState).compactions).toBeUndefined();
});

test("two compactions under way at once stay listed in task id order when the first enters its retry: its status keeps its place (draw 37C)", async () => {
  // Draw 37, 4 (spec §8.2: pi.live.compactions lists the live compaction tasks in task id order):
  // the named tests rewrote a status only while it was the only one, or the last one.
  const gate = deferred();
  let summaries = 0;
  const { h, root } = await open(
    async (req) => {
      if (!isSummary(req)) return fauxAssistantMessage(big("answer"));
      if (++summaries === 1) return fauxError("503 Service Unavailable");
      await gate.promise;
      return fauxAssistantMessage("SUMMARY");
    },
    { settings: { compaction: { keepRecentTokens: 150 }, retry: { baseDelayMs: 60_000 } } },
  );
  await chat(root, 3);
  const first = await root.compact();
  const second = await root.compact();
  await expect
    .poll(() => ((liveOf(h) as LiveState).compactions ?? []).filter((s) => s.retry !== undefined).length)
    .toBe(1);
  const statuses = (liveOf(h) as LiveState).compactions!;
  expect(statuses.map((s) => s.taskId)).toEqual([first, second]);
  expect(statuses.map((s) => s.attempt)).toEqual([1, 1]);
  gate.resolve();
});

test("a compaction that faults beside another under way removes only its own status: the other's stays until its own outcome (break 31E)", async () => {
  // Break 31E: the faulted compaction of the named test ran alone, so a fault's cleanup that emptied
  // pi.live.compactions passed it. The second beforeCompact call throws (its reporter too).
  const gate = deferred();
  let calls = 0;
  const { h, root, faux } = await open(
    async (req) => {
      if (!isSummary(req)) return fauxAssistantMessage(big("answer"));
      await gate.promise;
      return fauxAssistantMessage("SUMMARY");
    },
    {
      settings: { compaction: { keepRecentTokens: 150 } },
      ...faultingHook("beforeCompact", "hook bug", () => ++calls === 2),
    },
  );
  await chat(root, 3);
  const summarizing = await root.compact();
  await expect.poll(() => faux.requests.filter(isSummary).length).toBe(1);
  const faulting = await root.compact();
  expect((await h.waitForTask(faulting)).state).toMatchObject({
    status: "terminal",
    outcome: { status: "faulted", error: { message: "hook bug" } },
  });
  expect((liveOf(h) as LiveState).compactions?.map((s) => s.taskId)).toEqual([summarizing]);
  gate.resolve();
  await h.waitForTask(summarizing);
  expect((liveOf(h) as LiveState).compactions).toBeUndefined();
});
