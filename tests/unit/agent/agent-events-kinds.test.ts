/**
 * Agent events (spec §9.4), one kind at a time: the retry and deferred-poll events from
 * `pi.live.generation`, `agent_changed` (read through pi.agent's definition, so an old store's
 * `{ provider, id }` shows as `{ provider, modelId }`), `usage_changed`, `inbox_update`,
 * `task_failed`, and tool slots that end without running or without an entry. Each test compares a
 * whole run's batches with the expected list, in the specification's order within a batch.
 */
import {
  type AssistantMessage,
  createAssistantMessageEventStream,
  fauxAssistantMessage,
  fauxText,
  fauxThinking,
  fauxToolCall,
} from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { expect, test } from "vitest";
import { EventDeriver, snapshotOf } from "../../../worker/agent/events/derive.ts";
import { zeroUsage } from "../../../worker/agent/records.ts";
import {
  type AgentEvent,
  type AgentEventStream,
  AgentHarness,
  type ConversationView,
  createModelResolver,
  createRegistry,
  type DeferredAnswer,
  DOC,
  defineExtension,
  defineTask,
  defineTool,
  type Json,
  type LiveState,
  type StreamFn,
  textResult,
  type UsageState,
  watchEvents,
} from "../../../worker/index.ts";
import { deferred, fauxAgentModel, fauxError, memoryStore, until } from "../../../worker/testing.ts";
import { collect, EventConsumer, render } from "./events-fixtures.ts";
import { callsThenAnswer, cleanups, echo, faultingHook, gatedTool, liveOf, open } from "./fixtures.ts";

type Of<T extends AgentEvent["type"]> = Extract<AgentEvent, { type: T }>;
const ofType = <T extends AgentEvent["type"]>(batches: AgentEvent[][], type: T): Of<T>[] =>
  batches.flat().filter((e): e is Of<T> => e.type === type);

/** Waits until the conversation is idle and every batch was delivered; checks a consumer ends clean. */
async function settled(h: AgentHarness, stream: AgentEventStream, batches: AgentEvent[][]) {
  await h.waitForConversationIdle(1);
  await until(() => stream.pending === 0, { what: "every batch delivered" });
  const consumer = new EventConsumer(stream.snapshot);
  for (const b of batches) consumer.apply(b);
  expect(consumer.problems()).toEqual([]);
  await stream.stop();
  return batches.map((b) => b.map(render));
}

const harnessError = (text: string) => `<harness>\n[error] ${text}\n</harness>`;
const runStart = ["message_start user go", "message_end pi.user", "submission input placed", "run_start 1"];

test("auto_retry_start when a failed attempt waits for its retry, auto_retry_end when the retry starts", async () => {
  let n = 0;
  const { h, root } = await open(
    () => (++n === 1 ? fauxError("503 Service Unavailable") : fauxAssistantMessage("ok")),
    { settings: { retry: { baseDelayMs: 5 } } },
  );
  const stream = await watchEvents(h, root.id);
  const { batches } = collect(stream);
  const before = Date.now();
  expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
  expect(await settled(h, stream, batches)).toEqual([
    [...runStart, "turn_start"],
    // The failed answer is kept (never sent again); the generation waits with `retry` set.
    ["auto_retry_start", "message_start assistant ", "message_end pi.assistant", "usage_changed"],
    ["auto_retry_end"],
    ["message_start assistant text:ok", "message_end pi.assistant", "turn_end", "run_end 1"].concat([
      "submission input done",
      "usage_changed",
    ]),
  ]);
  const [start] = ofType(batches, "auto_retry_start");
  expect(start).toMatchObject({ attempt: 1, errorMessage: "503 Service Unavailable" });
  expect(start!.at).toBeGreaterThanOrEqual(before + 5);
  expect(ofType(batches, "auto_retry_end")).toEqual([{ type: "auto_retry_end", attempt: 1 }]);
});

test("deferred_poll when an answer is deferred, and again each time its poll moves", async () => {
  const faux = fauxAgentModel(() => fauxAssistantMessage("unused"));
  const as = (model: { api: string; provider: string; id: string }, text: string) => ({
    ...fauxAssistantMessage(text),
    api: model.api,
    provider: model.provider,
    model: model.id,
  });
  let polls = 0;
  const models = createModelResolver({
    extra: [faux.model],
    deferred: {
      async fetchDeferred(model) {
        polls++;
        return polls === 1
          ? { ...as(model, ""), deferred: { id: "job-2", pollAfterMs: 20 } }
          : as(model, "ready");
      },
    },
  });
  const stream: StreamFn = (model) => {
    const s = createAssistantMessageEventStream();
    const message = {
      ...as(model, ""),
      content: [],
      usage: zeroUsage(),
      deferred: { id: "job-1", pollAfterMs: 20 },
    } satisfies DeferredAnswer as AssistantMessage;
    queueMicrotask(() => {
      s.push({ type: "done", reason: "stop", message });
      s.end(message);
    });
    return s;
  };
  const h = await AgentHarness.open(await memoryStore(), { models, defaultModel: faux.ref, stream });
  cleanups.push(async () => {
    await h.close();
    faux.unregister();
  });
  const root = await h.root();
  const events = await watchEvents(h, root.id);
  const { batches } = collect(events);
  expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
  expect(await settled(h, events, batches)).toEqual([
    [...runStart, "turn_start"],
    ["deferred_poll"],
    ["deferred_poll"],
    ["message_start assistant text:ready", "message_end pi.assistant", "turn_end", "run_end 1"].concat([
      "submission input done",
      "usage_changed",
    ]),
  ]);
  const [first, second] = ofType(batches, "deferred_poll").map((e) => e.pollAt);
  expect(second!).toBeGreaterThan(first!);
  expect(polls).toBe(2);
});

test("agent_changed carries pi.agent as configured", async () => {
  const { h, root, faux } = await open(echo);
  const stream = await watchEvents(h, root.id);
  expect(stream.snapshot.agent).toEqual({});
  const { batches } = collect(stream);
  await root.configure({ model: faux.ref, thinkingLevel: "low" });
  await root.configure({ thinkingLevel: "high" });
  expect(await settled(h, stream, batches)).toEqual([["agent_changed"], ["agent_changed"]]);
  expect(ofType(batches, "agent_changed").map((e) => e.agent)).toEqual([
    { model: faux.ref, thinkingLevel: "low" },
    { model: faux.ref, thinkingLevel: "high" },
  ]);
});

test("agent_changed: a retired pi.agent reads as its initial value; a registry install and a settings change emit nothing", async () => {
  // Reading 23e: spec §9.4 "a retired one reads as its initial value, as in a snapshot. Registry
  // installs and settings changes make no commit and emit nothing"; neither was tried.
  const extensions = createRegistry();
  const settings: { toolExecution?: "parallel" | "sequential" } = {};
  const { h, root } = await open(echo, { extensions, settings });
  const stream = await watchEvents(h, root.id);
  const { batches } = collect(stream);
  await root.configure({ thinkingLevel: "low" });
  extensions.install(defineExtension({ name: "late", tools: [] }));
  settings.toolExecution = "sequential";
  await h.transaction((tx) => tx.retireDoc(root.id, DOC.agent));
  // A later commit's batch follows whatever the install or the settings change might have sent.
  await (await root.submit({ type: "write", entry: { kind: "note", data: {} } })).wait();
  expect(await settled(h, stream, batches)).toEqual([
    ["agent_changed"],
    ["agent_changed"],
    ["entry_appended note", "submission write done"],
  ]);
  expect(ofType(batches, "agent_changed").map((e) => e.agent)).toEqual([{ thinkingLevel: "low" }, {}]);
});

test("an old store's pi.agent ({ provider, id }) shows as { provider, modelId } in the snapshot, agent_changed and an overflow's snapshot", async () => {
  const store = await memoryStore();
  const first = await open(echo, { store });
  const v1 = (level: string) => ({
    model: { provider: first.faux.ref.provider, id: first.faux.ref.modelId },
    thinkingLevel: level,
  });
  const v2 = (level: string) => ({ model: first.faux.ref, thinkingLevel: level });
  await first.h.transaction((tx) => tx.writeDoc(1, DOC.agent, v1("low"), 1));
  const image = store.image();
  await first.h.close();

  const { h, root } = await open(echo, { store: await memoryStore(image) });
  expect(await h.docVersioned(root.id, DOC.agent)).toEqual({ value: v1("low"), version: 1 });
  const stream = await watchEvents(h, root.id, { limit: 1 });
  expect(stream.snapshot.agent).toEqual(v2("low"));
  const { batches } = collect(stream);
  await h.transaction((tx) => tx.writeDoc(1, DOC.agent, v1("medium"), 1));
  await until(() => batches.length === 1, { what: "the first write's batch" });
  expect(batches[0]).toEqual([{ type: "agent_changed", agent: v2("medium") }]);
  // Two commits while the listener is busy: the second overflows the one-batch bound.
  await stream.stop();
  const late = await watchEvents(h, root.id, { limit: 1 });
  await h.transaction((tx) => tx.writeDoc(1, DOC.agent, v1("high"), 1));
  await h.transaction((tx) => tx.writeDoc(1, DOC.usage, { models: {}, tools: {} }));
  expect(late.collapsed).toBe(1);
  const { batches: after, seen } = collect(late);
  await seen;
  expect(after[0]).toHaveLength(1);
  expect((after[0]![0] as Of<"snapshot">).agent).toEqual(v2("high"));
  await late.stop();
});

test("usage_changed carries the conversation's pi.usage after each answer", async () => {
  const { h, root, faux } = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "c1" })), {
    tools: [gatedTool("hold").tool],
  });
  const stream = await watchEvents(h, root.id);
  const { batches } = collect(stream);
  const input = await root.submit({ type: "input", content: "go" });
  await until(() => ofType(batches, "usage_changed").length === 1, { what: "the first answer's usage" });
  const once = (await h.doc<UsageState & Record<string, never>>(root.id, DOC.usage)) as UsageState;
  await root.abort();
  await input.wait();
  await settled(h, stream, batches);
  const usages = ofType(batches, "usage_changed").map((e) => e.usage);
  const key = `${faux.ref.provider}/${faux.ref.modelId}`;
  expect(usages[0]).toEqual(once);
  expect(Object.keys(usages[0]!.models)).toEqual([key]);
  expect(usages[0]!.models[key]!.totalTokens).toBeGreaterThan(0);
  expect(usages.at(-1)).toEqual(await h.doc(root.id, DOC.usage));
});

test("usage_changed and inbox_update follow the stream's own conversation: another conversation's run emits neither", async () => {
  const { h, root } = await open(echo);
  const stream = await watchEvents(h, root.id);
  const { batches } = collect(stream);
  const other = await h.createConversation({ ownership: { kind: "ownerless" } });
  // A run there changes its pi.usage and, with a follow-up queued behind it, its pi.inbox.
  const first = await other.submit({ type: "input", content: "one" });
  const queued = await other.submit({ type: "input", content: "two" });
  for (const s of [first, queued]) expect((await s.wait()).status).toBe("done");
  // A commit of the stream's own conversation after them: once its event is in, theirs would be too.
  await root.commit((tx) => tx.appendEntry(root.id, { kind: "app.note" }));
  await until(() => ofType(batches, "entry_appended").length === 1, { what: "the note" });
  expect(ofType(batches, "usage_changed")).toEqual([]);
  expect(ofType(batches, "inbox_update")).toEqual([]);
  await stream.stop();
});

test("agent_changed follows the stream's own conversation: another conversation configured emits none (draw 39b D)", async () => {
  const { h, root, faux } = await open(echo);
  const stream = await watchEvents(h, root.id);
  const { batches } = collect(stream);
  const other = await h.createConversation({ ownership: { kind: "ownerless" } });
  // Its pi.agent is written twice; the stream's own agent is never touched.
  await other.configure({ model: faux.ref, thinkingLevel: "low" });
  await other.configure({ thinkingLevel: "high" });
  // A commit of the stream's own conversation after them: once its event is in, theirs would be too.
  await root.commit((tx) => tx.appendEntry(root.id, { kind: "app.note" }));
  await until(() => ofType(batches, "entry_appended").length === 1, { what: "the note" });
  expect(ofType(batches, "agent_changed")).toEqual([]);
  expect(batches.flat().map((e) => e.type)).toEqual(["entry_appended"]);
  await stream.stop();
});

test("a fork's stream carries none of its parent's entries appended after the fork point: one conversation, not its parent (draw 40b D)", async () => {
  // Draw 40b D: the one-conversation tests' other conversations were unrelated or owned by a call; a
  // fork's stream that also took its parent's new entries (the view's history runs on into the
  // parent's) passed them.
  const { h, root } = await open(echo);
  const at = await root.commit((tx) => tx.appendEntry(root.id, { kind: "app.note", data: "before" }));
  const child = await root.fork(at.id, { ownership: { kind: "ownerless" } });
  const stream = await watchEvents(h, child.id);
  const { batches } = collect(stream);
  await root.commit((tx) => tx.appendEntry(root.id, { kind: "app.note", data: "parent's" }));
  // A commit of the stream's own conversation after it: once its event is in, the parent's would be too.
  await child.commit((tx) => tx.appendEntry(child.id, { kind: "app.note", data: "child's" }));
  await until(() => ofType(batches, "entry_appended").length >= 1, { what: "the child's note" });
  expect(ofType(batches, "entry_appended").map((e) => e.entry.data)).toEqual(["child's"]);
  await stream.stop();
});

test("inbox_update lists the queued items (submission and mode) as inputs queue and leave", async () => {
  const gate = gatedTool("hold");
  const { h, root } = await open(
    (req, n) =>
      req.messages.some((m) => m.role === "toolResult")
        ? echo(req, n)
        : fauxAssistantMessage([fauxToolCall("hold", {}, { id: "c1" })], { stopReason: "toolUse" }),
    { tools: [gate.tool] },
  );
  const stream = await watchEvents(h, root.id);
  const { batches } = collect(stream);
  const input = await root.submit({ type: "input", content: "go" });
  await gate.started.promise;
  const follow = await root.submit({ type: "input", content: "after" });
  const steer = await root.submit({ type: "input", content: "steer", whenBusy: "steer" });
  gate.release.resolve();
  for (const s of [input, follow, steer]) expect((await s.wait()).status).toBe("done");
  const rendered = await settled(h, stream, batches);
  expect(ofType(batches, "inbox_update").map((e) => e.items)).toEqual([
    [{ id: follow.id, mode: "followUp" }],
    [
      { id: follow.id, mode: "followUp" },
      { id: steer.id, mode: "steer" },
    ],
    // The steer joins the run at the tools boundary; the follow-up waits for its answer.
    [{ id: follow.id, mode: "followUp" }],
    [],
  ]);
  // Queueing is a submission and an inbox change; the steer joining is no run event.
  expect(rendered.slice(3, 5)).toEqual([
    ["submission input queued", "inbox_update followUp"],
    ["submission input queued", "inbox_update followUp,steer"],
  ]);
  expect(rendered[6]).toEqual([
    "message_start user steer",
    "message_end pi.user",
    "turn_end",
    "submission input placed",
    "inbox_update followUp",
    "turn_start",
  ]);
});

test("task_failed when a task of the conversation faults, before its turn and run end", async () => {
  const { h, root } = await open(echo, {
    // A hook's throw is reported; a reporter that throws as well faults the generation.
    ...faultingHook("afterResponse", "hook bug"),
  });
  const stream = await watchEvents(h, root.id);
  const { batches } = collect(stream);
  expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("unanswered");
  expect(await settled(h, stream, batches)).toEqual([
    [...runStart, "turn_start"],
    ["task_failed pi.generation", "turn_end", "run_end 1", "submission input unanswered"],
  ]);
  const [generation] = await h.tasks({ kind: "pi.generation" });
  expect(ofType(batches, "task_failed")).toEqual([
    { type: "task_failed", taskId: generation!.id, kind: "pi.generation", message: "hook bug" },
  ]);
});

// Draw 37c: every faulting task built wrote a mounted document or entry in its faulting commit (a
// run's cleanup); a mount that handed its observers only the publications touching its view (no
// revision, and no events either) passed every test.
test("task_failed for a task whose faulting commit touches no entry and no document: the view makes no revision, the stream still gets the event (draw 37c)", async () => {
  const job = defineTask<null, { phase: "go" }, Json>({
    name: "app.quiet-job",
    version: 1,
    initial: () => ({ phase: "go" }),
    phases: {
      go: async () => {
        throw new Error("quiet bug");
      },
    },
    abort: async () => undefined,
  });
  const { h, root } = await open(echo, { tasks: [job] });
  const watch = await root.watch();
  const frames: unknown[] = [];
  watch.start(async (f) => void frames.push(f));
  const stream = await watchEvents(h, root.id);
  const { batches } = collect(stream);
  const before = watch.value;
  const id = await h.createTask(job, null, { ownership: { kind: "conversation" }, conversationId: root.id });
  expect((await h.waitForTask(id)).state).toMatchObject({ outcome: { status: "faulted" } });
  expect(frames).toEqual([]);
  expect(watch.value).toBe(before);
  // A commit of the stream's own conversation after it: once its event is in, the job's is too.
  await root.commit((tx) => tx.appendEntry(root.id, { kind: "app.note" }));
  await until(() => ofType(batches, "entry_appended").length === 1, { what: "the note" });
  expect(ofType(batches, "task_failed")).toEqual([
    { type: "task_failed", taskId: id, kind: "app.quiet-job", message: "quiet bug" },
  ]);
  await watch.stop();
  await stream.stop();
});

test("task_failed follows the stream's own conversation: a task that faults in another conversation emits none (break 31G)", async () => {
  // Break 31G: every faulting task in these tests was the stream's own; a deriver that took every
  // conversation's faulted tasks passed them.
  const { h, root } = await open(echo, { ...faultingHook("afterResponse", "hook bug") });
  const stream = await watchEvents(h, root.id);
  const { batches } = collect(stream);
  const other = await h.createConversation({ ownership: { kind: "ownerless" } });
  expect((await (await other.submit({ type: "input", content: "go" })).wait()).status).toBe("unanswered");
  expect((await h.tasks({ kind: "pi.generation" }))[0]?.state).toMatchObject({
    outcome: { status: "faulted" },
  });
  // A commit of the stream's own conversation after it: once its event is in, theirs would be too.
  await root.commit((tx) => tx.appendEntry(root.id, { kind: "app.note" }));
  await until(() => ofType(batches, "entry_appended").length === 1, { what: "the note" });
  expect(ofType(batches, "task_failed")).toEqual([]);
  await stream.stop();
});

test("a tool whose task faulted ends without an entry, before the task_failed of its task", async () => {
  const gate = gatedTool("hold");
  const { h, root } = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "c1" })), {
    tools: [gate.tool],
    ...faultingHook("afterTool", "afterTool bug"),
  });
  const stream = await watchEvents(h, root.id);
  const { batches } = collect(stream);
  const input = await root.submit({ type: "input", content: "go" });
  await gate.started.promise;
  gate.release.resolve();
  expect((await input.wait()).status).toBe("done");
  const rendered = await settled(h, stream, batches);
  expect(rendered.slice(2, 4)).toEqual([
    [
      "tool_execution_start hold {}",
      "message_start assistant toolCall:{}",
      "message_end pi.assistant",
    ].concat("usage_changed"),
    ["tool_execution_end hold", "task_failed pi.tool"],
  ]);
  const [tool] = await h.tasks({ kind: "pi.tool" });
  expect(ofType(batches, "tool_execution_end")).toEqual([
    { type: "tool_execution_end", toolCallId: "c1", toolName: "hold" },
  ]);
  expect(ofType(batches, "task_failed")).toEqual([
    { type: "task_failed", taskId: tool!.id, kind: "pi.tool", message: "afterTool bug" },
  ]);
});

test("an aborted round's unstarted call ends with its result entry, directly before its message, and never started", async () => {
  const gate = gatedTool("hold");
  const { h, root } = await open(
    callsThenAnswer(
      fauxToolCall("hold", {}, { id: "c1" }),
      fauxToolCall("hold", {}, { id: "c2" }),
      fauxToolCall("hold", {}, { id: "c3" }),
    ),
    { tools: [gate.tool], settings: { toolExecution: "sequential" } },
  );
  const stream = await watchEvents(h, root.id);
  const { batches } = collect(stream);
  const input = await root.submit({ type: "input", content: "go" });
  await gate.started.promise;
  await root.abort();
  expect((await input.wait()).status).toBe("unanswered");
  const rendered = await settled(h, stream, batches);
  // Two calls never started: each ends with its own result entry, directly before that result's
  // message, in call order.
  const unstarted = [
    "tool_execution_end hold pi.tool-result",
    `message_start toolResult text:${harnessError("the run was aborted before this call started")}`,
    "message_end pi.tool-result",
  ];
  expect(rendered.slice(3)).toEqual([
    [
      "tool_execution_end hold pi.tool-result",
      `message_start toolResult text:${harnessError("the tool call was aborted")}`,
      "message_end pi.tool-result",
    ],
    [...unstarted, ...unstarted, "turn_end", "run_end 1", "submission input unanswered"],
  ]);
  expect(ofType(batches, "tool_execution_start").map((e) => e.toolCallId)).toEqual(["c1"]);
  expect(ofType(batches, "tool_execution_end").map((e) => e.toolCallId)).toEqual(["c1", "c2", "c3"]);
  expect(
    ofType(batches, "message_end").flatMap((e) =>
      e.entry.kind === "pi.tool-result"
        ? [(e.entry.model as unknown as { toolCallId?: string }[])[0]?.toolCallId]
        : [],
    ),
  ).toEqual(["c1", "c2", "c3"]);
});

test("tool_execution_update carries a running slot's details and diagnostics when they change", async () => {
  const gate = deferred();
  const noted = deferred();
  const tool = defineTool({
    name: "probe",
    description: "Reports details and a diagnostic while it runs",
    parameters: Type.Object({}),
    async execute(_args, api) {
      await api.details({ step: 1 });
      api.diagnostic({ severity: "warn", message: "file changed on disk", code: "changed" });
      noted.resolve();
      await gate.promise;
      // A later change of details alone: its update carries the current details, not the diagnostics.
      await api.details({ step: 2 });
      return textResult("probed");
    },
  });
  const { h, root } = await open(callsThenAnswer(fauxToolCall("probe", {}, { id: "c1" })), {
    tools: [tool],
    settings: { outputIntervalMs: 1 },
  });
  const stream = await watchEvents(h, root.id);
  const { batches } = collect(stream);
  const input = await root.submit({ type: "input", content: "go" });
  await noted.promise;
  await until(() => (h.docNow(root.id, DOC.live) as LiveState).tools?.[0]?.diagnostics !== undefined, {
    what: "the diagnostic committed to the slot",
  });
  gate.resolve();
  expect((await input.wait()).status).toBe("done");
  await settled(h, stream, batches);
  const updates = ofType(batches, "tool_execution_update");
  // Each is sent when it changes, and only then: details twice (its current value), diagnostics once.
  expect(updates.filter((u) => u.details !== undefined).map((u) => u.details)).toEqual([
    { step: 1 },
    { step: 2 },
  ]);
  expect(updates.filter((u) => u.diagnostics !== undefined).map((u) => u.diagnostics)).toEqual([
    [{ severity: "warn", message: "file changed on disk", code: "changed" }],
  ]);
});

test("tool_execution_update of a running slot whose details and diagnostics were removed (a safe replay restarting the call) sends null and []", () => {
  const deriver = new EventDeriver(1, [], undefined);
  const slot = { callId: "c1", name: "probe", taskId: 7, status: "running" as const };
  const viewWith = (live: LiveState): ConversationView => ({
    conversation: { id: 1, createdAt: 0 },
    entries: [],
    docs: { [DOC.live]: live as unknown as Json },
  });
  const before = viewWith({
    tools: [
      {
        ...slot,
        output: "so far\n",
        details: { step: 1 },
        diagnostics: [{ severity: "warn", message: "file changed on disk" }],
      },
    ],
  });
  const after = viewWith({ tools: [{ ...slot }] });
  const change = { seq: 2, tasks: [], entries: [], conversations: [], submissions: [], docs: [] };
  const events = deriver.derive(change, before, after).filter((e) => e.type === "tool_execution_update");
  expect(events).toEqual([
    {
      type: "tool_execution_update",
      toolCallId: "c1",
      toolName: "probe",
      output: { set: "" },
      details: null,
      diagnostics: [],
    },
  ]);
  // One removed alone, the output unchanged: the update carries that one field, and nothing else.
  const kept = { ...slot, output: "so far\n" };
  const both = viewWith({
    tools: [{ ...kept, details: { step: 1 }, diagnostics: [{ severity: "warn", message: "w" }] }],
  });
  const noDetails = viewWith({ tools: [{ ...kept, diagnostics: [{ severity: "warn", message: "w" }] }] });
  const noDiagnostics = viewWith({ tools: [{ ...kept, details: { step: 1 } }] });
  const updates = (a: ConversationView, b: ConversationView) =>
    new EventDeriver(1, [], undefined).derive(change, a, b).filter((e) => e.type === "tool_execution_update");
  expect(updates(both, noDetails)).toEqual([
    { type: "tool_execution_update", toolCallId: "c1", toolName: "probe", details: null },
  ]);
  expect(updates(both, noDiagnostics)).toEqual([
    { type: "tool_execution_update", toolCallId: "c1", toolName: "probe", diagnostics: [] },
  ]);
  // Draw 35C: only a removed value sends null: details that are present but falsy (0, false, "") are
  // sent as they are (a deriver sending `details || null` passed, every details here being an
  // object), and removing one of them sends null.
  const withDetails = (details: Json) => viewWith({ tools: [{ ...kept, details }] });
  const bare = viewWith({ tools: [{ ...kept }] });
  expect(updates(bare, withDetails(0))).toEqual([
    { type: "tool_execution_update", toolCallId: "c1", toolName: "probe", details: 0 },
  ]);
  expect(updates(withDetails(0), withDetails(false))).toEqual([
    { type: "tool_execution_update", toolCallId: "c1", toolName: "probe", details: false },
  ]);
  expect(updates(withDetails(false), withDetails(""))).toEqual([
    { type: "tool_execution_update", toolCallId: "c1", toolName: "probe", details: "" },
  ]);
  expect(updates(withDetails(0), bare)).toEqual([
    { type: "tool_execution_update", toolCallId: "c1", toolName: "probe", details: null },
  ]);
});

test("tool_execution_update of a running slot that records a second diagnostic carries the slot's whole current list, not the new one alone", () => {
  const deriver = new EventDeriver(1, [], undefined);
  const slot = { callId: "c1", name: "probe", taskId: 7, status: "running" as const };
  const viewWith = (live: LiveState): ConversationView => ({
    conversation: { id: 1, createdAt: 0 },
    entries: [],
    docs: { [DOC.live]: live as unknown as Json },
  });
  const first = { severity: "warn" as const, message: "file changed on disk" };
  const second = { severity: "info" as const, message: "retrying the read" };
  const before = viewWith({ tools: [{ ...slot, details: { step: 1 }, diagnostics: [first] }] });
  const after = viewWith({ tools: [{ ...slot, details: { step: 1 }, diagnostics: [first, second] }] });
  const change = { seq: 2, tasks: [], entries: [], conversations: [], submissions: [], docs: [] };
  const events = deriver.derive(change, before, after).filter((e) => e.type === "tool_execution_update");
  // The details did not change: not sent.
  expect(events).toEqual([
    { type: "tool_execution_update", toolCallId: "c1", toolName: "probe", diagnostics: [first, second] },
  ]);
});

test("an orphaned task of the conversation gives task_failed too, and its tool slot ends without an entry, before it", () => {
  const deriver = new EventDeriver(1, [], undefined);
  const slot = { callId: "c1", name: "probe", taskId: 8 };
  const viewWith = (live: LiveState): ConversationView => ({
    conversation: { id: 1, createdAt: 0 },
    entries: [],
    docs: { [DOC.live]: live as unknown as Json },
  });
  const before = viewWith({ tools: [{ ...slot, status: "running" }] });
  // The orphaning commit: the task settles orphaned, its slot done without an entry.
  const after = viewWith({ tools: [{ ...slot, status: "done" }] });
  const orphaned = { status: "terminal", outcome: { status: "orphaned", reason: "task_too_old" } };
  const change = {
    seq: 3,
    tasks: [{ id: 8, conversationId: 1, kind: "pi.tool", state: orphaned }],
    entries: [],
    conversations: [],
    submissions: [],
    docs: [{ conversationId: 1, name: DOC.live, value: {} }],
  };
  expect(deriver.derive(change as never, before, after)).toEqual([
    { type: "tool_execution_end", toolCallId: "c1", toolName: "probe" },
    { type: "task_failed", taskId: 8, kind: "pi.tool", message: "orphaned: task_too_old" },
  ]);
});

test("task_failed only for faulted or orphaned: tasks of the conversation that settle failed, aborted or completed give none (draw 40d)", () => {
  // Spec §9.4: task_failed when a task of the conversation settles faulted or orphaned. Draw 40d-D:
  // a deriver that also took a `failed` outcome (an error message like a fault's) passed every test.
  const deriver = new EventDeriver(1, [], undefined);
  const view: ConversationView = { conversation: { id: 1, createdAt: 0 }, entries: [], docs: {} };
  const settled = (id: number, outcome: Json) => ({
    id,
    conversationId: 1,
    kind: "app.job",
    state: { status: "terminal", outcome },
  });
  const change = {
    seq: 3,
    tasks: [
      settled(8, { status: "failed", error: { message: "declined" } }),
      settled(9, { status: "aborted", reason: "stop" }),
      settled(10, { status: "completed", result: null }),
      settled(11, { status: "faulted", error: { message: "boom" } }),
    ],
    entries: [],
    conversations: [],
    submissions: [],
    docs: [],
  };
  expect(deriver.derive(change as never, view, view)).toEqual([
    { type: "task_failed", taskId: 11, kind: "app.job", message: "boom" },
  ]);
});

test("one commit with every kind of change gives its events in the specification's order", () => {
  // Generation 5 holds the turn; this commit ends it, fails task 7, ends compaction 20, hands the
  // run to a successor (inputs [3]) whose generation 6 starts with a partial, starts compaction 21,
  // drops the retry, starts call "new" and ends "old" without an entry, appends a model-less entry,
  // settles submissions 4 and 2, and touches the usage, the agent and the inbox (written in that order).
  const deriver = new EventDeriver(
    1,
    [{ id: 5, kind: "pi.generation", conversationId: 1, state: { status: "running" } }] as never,
    undefined,
  );
  const slot = (callId: string, taskId: number) => ({
    callId,
    name: "probe",
    taskId,
    status: "running" as const,
  });
  const partial = fauxAssistantMessage("Hel");
  const viewWith = (live: LiveState): ConversationView => ({
    conversation: { id: 1, createdAt: 0 },
    entries: [],
    docs: {
      [DOC.live]: live as unknown as Json,
      [DOC.agent]: {},
      [DOC.inbox]: { items: [] },
      [DOC.usage]: { models: {}, tools: {} },
    },
  });
  const before = viewWith({
    run: { taskId: 5 as never, inputs: [1 as never] },
    generation: { taskId: 5 as never, attempt: 1, retry: { at: 10, error: "503" } },
    tools: [slot("old", 8) as never],
    compactions: [{ taskId: 20, reason: "manual", blocking: false, attempt: 1 }],
  });
  const after = viewWith({
    run: { taskId: 6 as never, inputs: [3 as never] },
    generation: { taskId: 6 as never, attempt: 1, message: partial },
    tools: [slot("new", 9) as never],
    compactions: [{ taskId: 21, reason: "threshold", blocking: false, attempt: 1 }],
  });
  const task = (id: number, kind: string, state: unknown) => ({ id, conversationId: 1, kind, state });
  const sub = (id: number) => ({ id, conversationId: 1, type: "input", status: "done" });
  const change = {
    seq: 9,
    tasks: [
      task(6, "pi.generation", { status: "running" }),
      task(7, "app.job", { status: "terminal", outcome: { status: "faulted", error: { message: "boom" } } }),
      task(5, "pi.generation", { status: "terminal", outcome: { status: "completed", result: {} } }),
    ],
    entries: [{ id: 30, conversationId: 1, kind: "note", data: {} }],
    conversations: [],
    submissions: [sub(4), sub(2)],
    docs: [DOC.usage, DOC.agent, DOC.inbox, DOC.live].map((name) => ({ conversationId: 1, name, value: {} })),
  };
  const events = deriver.derive(change as never, before, after);
  expect(
    events.map((e) =>
      e.type === "submission"
        ? `submission ${e.record.id}`
        : e.type.startsWith("compaction")
          ? `${e.type} ${(e as { taskId: number }).taskId}`
          : e.type,
    ),
  ).toEqual([
    "tool_execution_start",
    "message_start",
    "auto_retry_end",
    "entry_appended",
    "tool_execution_end",
    "compaction_end 20",
    "task_failed",
    "turn_end",
    "run_end",
    "submission 2",
    "submission 4",
    "inbox_update",
    "agent_changed",
    "usage_changed",
    "compaction_start 21",
    "run_start",
    "turn_start",
  ]);
});

// Draw 37c: every commit built appended one model-less entry, or none, beside message entries never
// after them; the model-less entries' events moved behind every message's passed every test.
test("one commit's entries keep their append order across kinds: a model-less entry between two messages is appended between their events (draw 37c)", () => {
  const deriver = new EventDeriver(1, [], undefined);
  const view: ConversationView = {
    conversation: { id: 1, createdAt: 0 },
    entries: [],
    docs: { [DOC.live]: {} },
  };
  const user = (id: number, text: string) => ({
    id,
    conversationId: 1,
    kind: "pi.user",
    model: [{ role: "user", content: text, timestamp: 0 }],
  });
  const change = {
    seq: 4,
    tasks: [],
    entries: [
      user(40, "first"),
      { id: 41, conversationId: 1, kind: "app.note", data: {} },
      user(42, "second"),
    ],
    conversations: [],
    submissions: [],
    docs: [],
  };
  const events = deriver.derive(change as never, view, view);
  expect(
    events.map((e) =>
      e.type === "message_end" || e.type === "entry_appended" ? `${e.type} ${e.entry.id}` : e.type,
    ),
  ).toEqual(["message_start", "message_end 40", "entry_appended 41", "message_start", "message_end 42"]);
});

test("one commit's first group keeps its order (starts, partial update, tool updates, retry/deferred), and a tool result's end precedes its message, before tools ending without an entry", () => {
  // Reading 23e: the every-kind commit above has no message_update, no tool_execution_update and no
  // result entry, so the first positions and a result's end were never told apart in one batch.
  // Generation 5's attempt 2 holds a partial and polls a deferred answer; this commit extends the
  // partial, moves the poll, starts call "new", prints to "busy", appends "old"'s result and a note,
  // and ends "gone" without an entry.
  const deriver = new EventDeriver(
    1,
    [{ id: 5, kind: "pi.generation", conversationId: 1, state: { status: "running" } }] as never,
    undefined,
  );
  const slot = (callId: string, taskId: number, status: "pending" | "running" | "done", output?: string) => ({
    callId,
    name: "probe",
    taskId,
    status,
    ...(output === undefined ? {} : { output }),
  });
  const viewWith = (live: LiveState): ConversationView => ({
    conversation: { id: 1, createdAt: 0 },
    entries: [],
    docs: { [DOC.live]: live as unknown as Json },
  });
  const before = viewWith({
    run: { taskId: 5 as never, inputs: [1 as never] },
    generation: {
      taskId: 5 as never,
      attempt: 2,
      message: fauxAssistantMessage("Hel"),
      deferred: { pollAt: 10 },
    } as never,
    tools: [
      slot("new", 9, "pending"),
      slot("busy", 10, "running", "a"),
      slot("old", 8, "running"),
      slot("gone", 11, "running"),
    ] as never,
  });
  const after = viewWith({
    run: { taskId: 5 as never, inputs: [1 as never] },
    generation: {
      taskId: 5 as never,
      attempt: 2,
      message: fauxAssistantMessage("Hello"),
      deferred: { pollAt: 20 },
    } as never,
    tools: [
      slot("new", 9, "running"),
      slot("busy", 10, "running", "ab"),
      slot("old", 8, "done"),
      slot("gone", 11, "done"),
    ] as never,
  });
  const result = {
    role: "toolResult",
    toolCallId: "old",
    toolName: "probe",
    content: [{ type: "text", text: "done" }],
    isError: false,
    timestamp: 0,
  };
  const change = {
    seq: 9,
    tasks: [],
    entries: [
      { id: 30, conversationId: 1, kind: "pi.tool-result", model: [result] },
      { id: 31, conversationId: 1, kind: "note", data: {} },
    ],
    conversations: [],
    submissions: [],
    docs: [{ conversationId: 1, name: DOC.live, value: {} }],
  };
  const events = deriver.derive(change as never, before, after);
  expect(
    events.map((e) =>
      "toolCallId" in e
        ? `${e.type} ${e.toolCallId}${e.type === "tool_execution_end" && e.entry ? " entry" : ""}`
        : e.type,
    ),
  ).toEqual([
    "tool_execution_start new",
    "message_update",
    "tool_execution_update busy",
    "deferred_poll",
    "tool_execution_end old entry",
    "message_start",
    "message_end",
    "entry_appended",
    "tool_execution_end gone",
  ]);
});

test("message_update carries the partial's current usage, also when only the usage changed (no changes); a thinking block starts; a new attempt's first partial starts a new message", () => {
  // Reading 23e: the wire renders dropped the usage, so "each update carries the partial's current
  // usage" and the usage-only update were asserted only on the diff, never on the event.
  const deriver = new EventDeriver(
    1,
    [{ id: 5, kind: "pi.generation", conversationId: 1, state: { status: "running" } }] as never,
    undefined,
  );
  const withUsage = (content: AssistantMessage["content"], output: number): AssistantMessage => {
    const m = fauxAssistantMessage(content as never);
    return { ...m, usage: { ...m.usage, output, totalTokens: output } };
  };
  const viewWith = (attempt: number, message: AssistantMessage): ConversationView => ({
    conversation: { id: 1, createdAt: 0 },
    entries: [],
    docs: {
      [DOC.live]: {
        run: { taskId: 5, inputs: [1] },
        generation: { taskId: 5, attempt, message },
      } as unknown as Json,
    },
  });
  const change = {
    seq: 4,
    tasks: [],
    entries: [],
    conversations: [],
    submissions: [],
    docs: [{ conversationId: 1, name: DOC.live, value: {} }],
  };
  const first = withUsage([fauxText("Hel")], 3);
  const grown = withUsage([fauxText("Hello"), fauxThinking("hm")], 7);
  expect(deriver.derive(change as never, viewWith(1, first), viewWith(1, grown))).toEqual([
    {
      type: "message_update",
      usage: grown.usage,
      changes: [
        { type: "text_delta", contentIndex: 0, delta: "lo" },
        { type: "thinking_start", contentIndex: 1, block: { type: "thinking", thinking: "hm" } },
      ],
    },
  ]);
  const costlier = withUsage([fauxText("Hello"), fauxThinking("hm")], 9);
  expect(deriver.derive(change as never, viewWith(1, grown), viewWith(1, costlier))).toEqual([
    { type: "message_update", usage: costlier.usage, changes: [] },
  ]);
  // The next attempt's first partial is a new message, even when it extends the last one.
  const retried = withUsage([fauxText("Hello there")], 2);
  expect(deriver.derive(change as never, viewWith(1, costlier), viewWith(2, retried))).toEqual([
    { type: "message_start", message: retried },
  ]);
});

test("tool_execution_start carries the arguments of the call's intent, as a beforeTool hook left them, not the answer's", async () => {
  const tool = defineTool({
    name: "apply",
    description: "Apply an item",
    parameters: Type.Object({ item: Type.String() }),
    execute: async (args) => textResult(args.item),
  });
  const { h, root } = await open(callsThenAnswer(fauxToolCall("apply", { item: "asked" }, { id: "c1" })), {
    tools: [tool],
    hooks: { beforeTool: [() => ({ arguments: { item: "rewritten" } })] },
  });
  const stream = await watchEvents(h, root.id);
  const { batches } = collect(stream);
  expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
  await until(() => batches.flat().some((e) => e.type === "run_end"), { what: "run end" });
  await stream.stop();
  expect(ofType(batches, "tool_execution_start").map((e) => e.args)).toEqual([{ item: "rewritten" }]);
});

test("tool_execution_start carries an intent whose arguments a beforeTool hook emptied to {}, not the answer's (draw 36c)", async () => {
  // Draw 36c: every intent had a member; a deriver taking an empty intent as absent (falling back to
  // the answer's call) passed every test.
  const tool = defineTool({
    name: "apply",
    description: "Apply an item",
    parameters: Type.Object({ item: Type.Optional(Type.String()) }),
    execute: async (args) => textResult(args.item ?? "none"),
  });
  const { h, root } = await open(callsThenAnswer(fauxToolCall("apply", { item: "asked" }, { id: "c1" })), {
    tools: [tool],
    hooks: { beforeTool: [() => ({ arguments: {} })] },
  });
  const stream = await watchEvents(h, root.id);
  const { batches } = collect(stream);
  expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
  await until(() => batches.flat().some((e) => e.type === "run_end"), { what: "run end" });
  await stream.stop();
  expect(ofType(batches, "tool_execution_start").map((e) => e.args)).toEqual([{}]);
});

test("a call that waited for approval gets tool_execution_start once it is approved and runs, with its arguments; none while it waits", async () => {
  // Break 29C: every start was derived from a slot going pending to running; a deriver that started
  // only those (not a slot leaving awaiting_approval) sent no start for an approved call, and passed.
  const tool = defineTool({
    name: "apply",
    description: "Apply an item",
    parameters: Type.Object({ item: Type.String() }),
    execute: async (args) => textResult(args.item),
  });
  const { h, root } = await open(callsThenAnswer(fauxToolCall("apply", { item: "asked" }, { id: "c1" })), {
    tools: [tool],
    settings: { approval: {} },
  });
  const stream = await watchEvents(h, root.id);
  const { batches } = collect(stream);
  const sub = await root.submit({ type: "input", content: "go" });
  const waiting = () => (liveOf(h).tools ?? []).find((s) => s.status === "awaiting_approval");
  await until(() => waiting() !== undefined, { what: "the call awaits approval" });
  await until(() => stream.pending === 0, { what: "every batch delivered" });
  expect(ofType(batches, "tool_execution_start")).toEqual([]);
  await h.decideApproval(1, { taskId: waiting()!.taskId!, decision: "approve", requestId: "r1" });
  expect((await sub.wait()).status).toBe("done");
  await settled(h, stream, batches);
  expect(ofType(batches, "tool_execution_start")).toEqual([
    { type: "tool_execution_start", toolCallId: "c1", toolName: "apply", args: { item: "asked" } },
  ]);
  expect(ofType(batches, "tool_execution_end").map((e) => e.toolCallId)).toEqual(["c1"]);
});

test("a slot that becomes done without running (a call not offered, invalid arguments, a block) gets only tool_execution_end, with its result entry", async () => {
  // Reading 23e: the spec's tool_execution_start paragraph says so; only unstarted calls of an
  // aborted round were ever derived.
  const tool = defineTool({
    name: "apply",
    description: "Apply an item",
    parameters: Type.Object({ item: Type.String() }),
    execute: async (args) => textResult(args.item),
  });
  const { h, root } = await open(
    callsThenAnswer(
      fauxToolCall("nope", {}, { id: "c-missing" }),
      fauxToolCall("apply", {}, { id: "c-invalid" }),
      fauxToolCall("apply", { item: "blocked" }, { id: "c-blocked" }),
      fauxToolCall("apply", { item: "ok" }, { id: "c-ok" }),
    ),
    {
      tools: [tool],
      hooks: {
        beforeTool: [
          (call) => ((call.arguments as { item?: unknown }).item === "blocked" ? { block: "no" } : undefined),
        ],
      },
    },
  );
  const stream = await watchEvents(h, root.id);
  const { batches } = collect(stream);
  expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
  await settled(h, stream, batches);
  expect(ofType(batches, "tool_execution_start").map((e) => e.toolCallId)).toEqual(["c-ok"]);
  const ends = ofType(batches, "tool_execution_end");
  expect(ends.map((e) => e.toolCallId).sort()).toEqual(["c-blocked", "c-invalid", "c-missing", "c-ok"]);
  for (const e of ends) {
    expect(e.entry?.kind).toBe("pi.tool-result");
    const result = (e.entry!.model as unknown as Array<{ isError: boolean }>)[0]!;
    expect(result.isError).toBe(e.toolCallId !== "c-ok");
  }
  const updated = ofType(batches, "tool_execution_update").map((e) => e.toolCallId);
  expect(updated.filter((id) => id !== "c-ok")).toEqual([]);
});

test("compaction_start carries the status's task, reason and blocking flag; a retry backoff shows only in the snapshot; compaction_end when the status goes", () => {
  // Reading 23e: `blocking` was never read from an event, and a compaction's retry never derived.
  const deriver = new EventDeriver(1, [], undefined);
  const viewWith = (compactions: LiveState["compactions"]): ConversationView => ({
    conversation: { id: 1, createdAt: 0 },
    entries: [],
    docs: { [DOC.live]: (compactions ? { compactions } : {}) as unknown as Json },
  });
  const change = {
    seq: 4,
    tasks: [],
    entries: [],
    conversations: [],
    submissions: [],
    docs: [{ conversationId: 1, name: DOC.live, value: {} }],
  };
  const status = { taskId: 20, reason: "threshold" as const, blocking: true, attempt: 1 };
  const waiting = { ...status, retry: { at: 500, error: "503" } };
  const retried = { ...status, attempt: 2 };
  const views = [
    viewWith(undefined),
    viewWith([status]),
    viewWith([waiting]),
    viewWith([retried]),
    viewWith([]),
  ];
  const derived = views.slice(1).map((after, i) => deriver.derive(change as never, views[i]!, after));
  expect(derived).toEqual([
    [{ type: "compaction_start", taskId: 20, reason: "threshold", blocking: true }],
    [],
    [],
    [{ type: "compaction_end", taskId: 20, reason: "threshold" }],
  ]);
  expect(snapshotOf(views[2]!, {}).compactions).toEqual([waiting]);
});

test("a queued summary: compaction_end when its task ends, then at the next boundary its own message and submission events", async () => {
  const hold = gatedTool();
  const summaryPrompt = "You summarize conversations";
  const responder = ((req: { systemPrompt?: string; messages: Array<{ role: string }> }) => {
    if (req.systemPrompt?.startsWith(summaryPrompt)) return fauxAssistantMessage("SUMMARY");
    const texts = JSON.stringify(req.messages);
    const answered = req.messages.at(-1)?.role === "toolResult";
    return texts.includes("hold on") && !answered
      ? fauxAssistantMessage([fauxToolCall("hold", {}, { id: `call-${req.messages.length}` })], {
          stopReason: "toolUse",
        })
      : fauxAssistantMessage(`answer ${"x".repeat(400)}`);
  }) as never;
  const { h, root } = await open(responder, {
    tools: [hold.tool],
    settings: { compaction: { keepRecentTokens: 150 } },
  });
  for (let i = 1; i <= 3; i++)
    await (await root.submit({ type: "input", content: `q${i} ${"x".repeat(400)}` })).wait();
  const run = await root.submit({ type: "input", content: "hold on" });
  await hold.started.promise;
  const stream = await watchEvents(h, root.id);
  const { batches } = collect(stream);
  const taskId = await root.compact();
  await h.waitForTask(taskId);
  await until(() => batches.flat().some((e) => e.type === "compaction_end"), { what: "compaction end" });
  // The task ended with its summary queued: no summary entry yet, no settled write.
  // The task ended with its summary queued as a write: no summary entry yet; the queued write's own
  // submission event and the inbox change come in the same batch, its spend after them.
  expect(batches.map((b) => b.map(render))).toEqual([
    ["compaction_start manual"],
    ["compaction_end manual", "submission write queued", "inbox_update write", "usage_changed"],
  ]);
  hold.release.resolve();
  expect((await run.wait()).status).toBe("done");
  await until(() => batches.flat().some((e) => e.type === "run_end"), { what: "run end" });
  await stream.stop();
  // Placed at the boundary after the tool round, in its own commit's batch: its message, then its write.
  const placed = batches.find((b) =>
    b.some((e) => e.type === "message_end" && e.entry.kind === "pi.compaction"),
  )!;
  const rendered = placed.map(render);
  expect(
    rendered.filter(
      (r) =>
        r.includes("pi.compaction") || r.startsWith("message_start user") || r.startsWith("submission write"),
    ),
  ).toEqual([
    expect.stringMatching(/^message_start user text:The conversation history before this point/),
    "message_end pi.compaction",
    "submission write done",
  ]);
  expect(batches.flat().filter((e) => e.type === "compaction_end")).toHaveLength(1);
});

test("inbox_update and usage_changed: a retired pi.inbox or pi.usage reads as its initial value (reading 24f)", async () => {
  const { h, root } = await open(echo);
  await (await root.submit({ type: "input", content: "one" })).wait();
  const stream = await watchEvents(h, root.id);
  const { batches } = collect(stream);
  await h.transaction((tx) => tx.retireDoc(root.id, DOC.usage));
  await h.transaction((tx) => tx.retireDoc(root.id, DOC.inbox));
  await (await root.submit({ type: "write", entry: { kind: "note", data: {} } })).wait();
  await settled(h, stream, batches);
  expect(ofType(batches, "usage_changed").map((e) => e.usage)).toEqual([{ models: {}, tools: {} }]);
  expect(ofType(batches, "inbox_update").map((e) => e.items)).toEqual([[]]);
});

test("a commit that clears the open partial ends it with the assistant entry only: another message entry before it gets its own message_start (draw 38b)", () => {
  // Draw 38b: in every named commit that cleared a partial the assistant entry came first; a deriver
  // that closed the open partial with whatever message entry came first (a user entry given only
  // its message_end, the assistant entry a second message_start) passed them.
  const deriver = new EventDeriver(
    1,
    [{ id: 5, kind: "pi.generation", conversationId: 1, state: { status: "running" } }] as never,
    undefined,
  );
  const partial = fauxAssistantMessage("Hel");
  const answer = fauxAssistantMessage("Hello");
  const viewWith = (live: LiveState): ConversationView => ({
    conversation: { id: 1, createdAt: 0 },
    entries: [],
    docs: { [DOC.live]: live as unknown as Json },
  });
  const before = viewWith({ generation: { taskId: 5 as never, attempt: 1, message: partial } });
  const after = viewWith({});
  const user = { role: "user" as const, content: "note", timestamp: 0 };
  const userEntry = { id: 30, conversationId: 1, kind: "pi.user", model: [user] };
  const assistantEntry = { id: 31, conversationId: 1, kind: "pi.assistant", model: [answer] };
  const change = {
    seq: 4,
    tasks: [],
    entries: [userEntry, assistantEntry],
    conversations: [],
    submissions: [],
    docs: [{ conversationId: 1, name: DOC.live, value: {} }],
  };
  expect(deriver.derive(change as never, before, after)).toEqual([
    { type: "message_start", message: user },
    { type: "message_end", entry: userEntry },
    { type: "message_end", entry: assistantEntry },
  ]);
});
