/**
 * The run's timeline and "Rerun this tool call" through the engine service (worker/app/timeline.ts,
 * worker/app/engine-service.ts `timeline`) on the memory store, with pi-ai's faux model: bars nested
 * by ownership (a subagent's call under its answer, the child's answer under the call), outcomes and
 * their words (a tool error, a denial), usage on the answers, paging by time range (only the tasks
 * that overlap it, at most the limit, the longest first), the watch's pages (one per change of the
 * watched run, none for another conversation's), and a rerun: a new call through the tool's approval
 * policy, the first kept, the same request answered once, refused while the conversation works.
 */
import { fauxAssistantMessage, fauxToolCall, type Message } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { Value } from "typebox/value";
import { afterAll, expect, test } from "vitest";
import { createRegistry } from "../../../worker/agent/extensions/registry.ts";
import { AgentHarness } from "../../../worker/agent/harness.ts";
import { builtinToolsExtension } from "../../../worker/agent/tools/builtin/index.ts";
import { textResult } from "../../../worker/agent/tools/contract.ts";
import { HarnessEngine } from "../../../worker/app/engine-service.ts";
import { rerunTask, watchTimeline } from "../../../worker/app/timeline.ts";
import { approvalSettings } from "../../../worker/app/tool-policies.ts";
import { DOC, defineTool, type LiveState } from "../../../worker/index.ts";
import { PROTOCOL_VERSION, type TimelineBar, type TimelinePage } from "../../../worker/protocol/index.ts";
import { METHODS } from "../../../worker/protocol/schema.ts";
import { deferred, fauxAgentModel, memoryStore, until } from "../../../worker/testing.ts";

const textOf = (m: Message | undefined) =>
  !m
    ? ""
    : typeof m.content === "string"
      ? m.content
      : m.content.flatMap((c) => (c.type === "text" ? [c.text] : [])).join(" ");

/** The model, by the last user message: "delegate" calls a subagent, "break" a failing tool, "note" a counting one. */
const faux = fauxAgentModel((request) => {
  const lastUser = request.messages.findLast((m) => m.role === "user");
  const said = textOf(lastUser);
  const answered = request.messages.at(-1)?.role === "toolResult";
  if (said.includes("child work")) return fauxAssistantMessage("child done");
  if (answered) return fauxAssistantMessage(`finished: ${said}`);
  if (said.includes("delegate"))
    return fauxAssistantMessage([fauxToolCall("subagent", { task: "child work" }, { id: "s1" })], {
      stopReason: "toolUse",
    });
  if (said.includes("break"))
    return fauxAssistantMessage([fauxToolCall("boom", {}, { id: "b1" })], { stopReason: "toolUse" });
  if (said.includes("note"))
    return fauxAssistantMessage(
      [fauxToolCall("note", { text: "hello" }, { id: `n${request.messages.length}` })],
      {
        stopReason: "toolUse",
      },
    );
  if (said.includes("hold"))
    return fauxAssistantMessage([fauxToolCall("hold", {}, { id: "h1" })], { stopReason: "toolUse" });
  return fauxAssistantMessage("hello");
});
afterAll(() => faux.unregister());

async function engine(options: { ask?: boolean; now?: () => number } = {}) {
  const ran: string[] = [];
  const gate = deferred<void>();
  const tools = [
    defineTool({
      name: "boom",
      description: "Always fails",
      parameters: Type.Object({}),
      readOnly: true,
      async execute() {
        throw new Error("the disk is on fire");
      },
    }),
    defineTool({
      name: "note",
      description: "Counts its runs",
      parameters: Type.Object({ text: Type.String() }),
      async execute(args) {
        ran.push(args.text);
        return textResult(`noted ${args.text}`);
      },
    }),
    defineTool({
      name: "hold",
      description: "Waits for the test",
      parameters: Type.Object({}),
      readOnly: true,
      async execute() {
        await gate.promise;
        return textResult("held");
      },
    }),
  ];
  const extensions = createRegistry();
  extensions.install(builtinToolsExtension);
  let opened: AgentHarness | undefined;
  const harness = await AgentHarness.open(await memoryStore(), {
    extensions,
    tools,
    models: faux.models,
    defaultModel: faux.ref,
    tasks: [rerunTask(() => opened!)],
    ...(options.ask
      ? {
          settings: approvalSettings(
            () => ({}),
            () => opened,
            { defaults: "ask" },
          ),
        }
      : {}),
    ...(options.now ? { now: options.now } : {}),
  });
  opened = harness;
  await harness.root();
  const service = new HarnessEngine({ harness: async () => harness, build: "test" });
  await service.hello({ tabId: "a", protocol: PROTOCOL_VERSION });
  return { harness, tab: service.tab("a"), ran, gate };
}

async function run(h: AgentHarness, tab: Awaited<ReturnType<typeof engine>>["tab"], text: string, c = 1) {
  await tab.run.submit(c, { text, requestId: crypto.randomUUID() });
  await h.waitForIdle();
}

const byKind = (bars: readonly TimelineBar[], kind: TimelineBar["kind"]) =>
  bars.filter((b) => b.kind === kind);

test("a run with a subagent and a tool error: bars nested by ownership, outcomes and words, usage on answers", async () => {
  const { harness, tab } = await engine();
  await run(harness, tab, "delegate this");
  await run(harness, tab, "break it");
  const page = await tab.timeline.page(1, {});
  const bars = page.bars;
  const [subagent] = byKind(bars, "subagent");
  expect(subagent).toMatchObject({ label: "subagent", outcome: "ok", taskKind: "pi.tool" });
  // The subagent's call is owned by the answer that made it; the child's answer by the call.
  const parentOf = (bar: TimelineBar) => bars.find((b) => b.id === bar.parent);
  expect(parentOf(subagent!)).toMatchObject({ kind: "generation", conversationId: 1 });
  const child = bars.find((b) => b.kind === "generation" && b.conversationId !== 1);
  expect(child).toBeDefined();
  expect(child!.parent).toBe(subagent!.id);
  expect(child!.why).toBe("answered");
  // The failing tool: an error, said in words, under its own answer.
  const [boom] = bars.filter((b) => b.label === "boom tool");
  expect(boom).toMatchObject({ kind: "tool", outcome: "error" });
  expect(boom!.why).toContain("the disk is on fire");
  expect(parentOf(boom!)).toMatchObject({ kind: "generation", why: "answered with 1 tool call" });
  // Every task has a start and an end, and answers carry their tokens.
  for (const bar of bars) expect(bar.end).toBeGreaterThanOrEqual(bar.start);
  const answers = byKind(bars, "generation");
  expect(answers.length).toBe(5);
  for (const a of answers) expect(a.usage?.total).toBeGreaterThan(0);
  expect(page.total).toBe(bars.length);
  expect(page.span.tasks).toBe(bars.length);

  // Opening a bar: its entries (the call, its error result) and why it ended.
  const detail = await tab.timeline.detail(1, boom!.taskId);
  expect(detail.bar.why).toBe(boom!.why);
  expect(detail.entries.map((e) => e.kind)).toEqual(["pi.assistant", "pi.tool-result"]);
  await expect(tab.timeline.detail(1, 9999)).rejects.toMatchObject({ name: "UnknownTask" });
  await expect(tab.timeline.page(77, {})).rejects.toMatchObject({ name: "UnknownConversation" });
});

test("paging by range: only the tasks that overlap it, at most the limit, the longest first", async () => {
  let clock = 1_000_000;
  const { harness, tab } = await engine({ now: () => clock });
  await run(harness, tab, "note one");
  const firstRunEnd = clock;
  clock += 60_000;
  await run(harness, tab, "note two");
  const all = await tab.timeline.page(1, {});
  expect(all.bars.length).toBe(6);
  // The second run only (it started a minute after the first ended).
  const later = await tab.timeline.page(1, { from: firstRunEnd + 1, to: clock + 1 });
  expect(later.total).toBe(3);
  expect(later.bars.every((b) => b.start > firstRunEnd)).toBe(true);
  // A limit below the count: the total says how many overlap.
  const cut = await tab.timeline.page(1, { limit: 2 });
  expect(cut.total).toBe(6);
  expect(cut.bars.length).toBe(2);
  // A range where nothing ran.
  const empty = await tab.timeline.page(1, { from: firstRunEnd + 10, to: firstRunEnd + 20 });
  expect(empty).toMatchObject({ total: 0, bars: [] });
});

test("the longest tasks come first when a page is cut", async () => {
  let clock = 5_000_000;
  const { harness, tab, gate } = await engine({ now: () => clock });
  // A short run first: its task comes first by id, but not by length.
  await run(harness, tab, "hello");
  await tab.run.submit(1, { text: "hold on", requestId: "r1" });
  await until(() => Object.values(harness.taskGraph().tasks).some((t) => t.kind === "pi.tool"), {
    what: "the hold runs",
  });
  clock += 30_000;
  gate.resolve();
  await harness.waitForIdle();
  const page = await tab.timeline.page(1, { limit: 2 });
  expect(page.total).toBe(4);
  // The answer that waited for the tool and the tool: the two that lasted 30 s, not the short last answer.
  expect(page.bars.map((b) => b.kind).sort()).toEqual(["generation", "tool"]);
  expect(page.bars.every((b) => (b.end ?? 0) - b.start >= 30_000)).toBe(true);
});

test("the watch: a page at once, one after changes of the watched run, none for another conversation's", async () => {
  const { harness, tab, gate } = await engine();
  const other = await tab.conversations.create("other");
  const pages: TimelinePage[] = [];
  const watch = await watchTimeline(harness, 1, {}, (page) => {
    pages.push(page);
  });
  expect(pages.length).toBe(1);
  expect(pages[0]!.bars).toEqual([]);
  await run(harness, tab, "hello", other);
  expect(pages.length).toBe(1);
  await tab.run.submit(1, { text: "hold on", requestId: "r2" });
  await until(() => pages.at(-1)?.bars.some((b) => b.kind === "tool" && b.outcome === "running") === true, {
    what: "the running tool's bar",
  });
  const running = pages.at(-1)!.bars.find((b) => b.kind === "tool")!;
  expect(running.end).toBeUndefined();
  expect(running.why).toBe("running the hold tool");
  gate.resolve();
  await harness.waitForIdle();
  await until(() => pages.at(-1)?.bars.length === 3 && pages.at(-1)!.bars.every((b) => b.outcome === "ok"), {
    what: "the finished run",
  });
  watch.stop();
  const seen = pages.length;
  await run(harness, tab, "hello again");
  expect(pages.length).toBe(seen);
  await watch.closed;
});

test("rerun a tool call: a new call through its approval policy, the first kept, the same request once", async () => {
  const { harness, tab, ran } = await engine({ ask: true });
  const waiting = () =>
    ((harness.docNow(1, DOC.live) as LiveState | undefined)?.tools ?? []).find(
      (s) => s.status === "awaiting_approval" && !s.approval?.decision,
    );
  await tab.run.submit(1, { text: "note it", requestId: "r1" });
  await until(() => waiting() !== undefined, { what: "the note waits for approval" });
  await tab.approvals.decide(1, { taskId: waiting()!.taskId!, decision: "approve", requestId: "d1" });
  await harness.waitForIdle();
  expect(ran).toEqual(["hello"]);
  const first = (await tab.timeline.page(1, {})).bars.find((b) => b.label === "note tool")!;
  expect(first.call).toBeDefined();

  const answer = await tab.timeline.rerunTool(1, { ...first.call!, requestId: "again-1" });
  // The policy asks first for the new call too: it waits, nothing ran yet.
  await until(() => waiting() !== undefined, { what: "the rerun waits for approval" });
  expect(ran).toEqual(["hello"]);
  const paused = await tab.timeline.page(1, {});
  const wait = paused.bars.find((b) => b.kind === "approval");
  expect(wait).toMatchObject({ outcome: "waiting", label: "waiting for your approval" });
  expect(paused.bars.find((b) => b.id === wait!.parent)).toMatchObject({ kind: "tool", outcome: "waiting" });
  expect(wait!.why).toContain("waiting for your approval to run the note tool");
  // The rerun holds pi.live.run, which makes the conversation busy (spec §1; draw 39d-C: a rerun
  // that listed only its tool slot passed, the conversation idle while its call waited).
  expect((harness.docNow(1, DOC.live) as LiveState).run).toMatchObject({ inputs: [] });
  expect(harness.requireConversation(1).busy).toBe(true);
  // Busy: a second rerun is refused while this one works, and nothing is written.
  const entriesBefore = (await harness.requireConversation(1).entries()).length;
  await expect(tab.timeline.rerunTool(1, { ...first.call!, requestId: "again-2" })).rejects.toMatchObject({
    name: "RerunRefused",
    code: "busy",
  });
  expect((await harness.requireConversation(1).entries()).length).toBe(entriesBefore);
  await tab.approvals.decide(1, { taskId: waiting()!.taskId!, decision: "approve", requestId: "d2" });
  await harness.waitForIdle();
  expect(ran).toEqual(["hello", "hello"]);

  // Both calls are in the history, each answered once; the new one names the original.
  const entries = await harness.requireConversation(1).entries();
  const calls = entries.flatMap((e) =>
    e.kind === "pi.assistant"
      ? (e.model as unknown as Message[]).flatMap((m) =>
          m.role === "assistant" ? m.content.flatMap((c) => (c.type === "toolCall" ? [c] : [])) : [],
        )
      : [],
  );
  expect(calls.map((c) => c.name)).toEqual(["note", "note"]);
  expect(calls[1]!.id).toBe(answer.callId);
  expect(calls[1]!.arguments).toEqual(calls[0]!.arguments);
  const results = entries.filter((e) => e.kind === "pi.tool-result");
  expect(results.length).toBe(2);
  expect(entries.find((e) => e.id === answer.entryId)?.data).toEqual({
    rerunOf: { entryId: first.call!.entryId, callId: first.call!.callId },
  });
  // The run ended: the conversation is idle again, and the same request answers the same call.
  expect((harness.docNow(1, DOC.live) as LiveState).run).toBeUndefined();
  expect(await tab.timeline.rerunTool(1, { ...first.call!, requestId: "again-1" })).toEqual(answer);
  await harness.waitForIdle();
  expect(ran).toEqual(["hello", "hello"]);
  // The rerun shows on the timeline: its run, the new call under it.
  const bars = (await tab.timeline.page(1, {})).bars;
  const rerun = bars.find((b) => b.taskKind === "app.rerun")!;
  expect(bars.filter((b) => b.parent === rerun.id).map((b) => b.label)).toEqual(["note tool"]);
});

test("rerun refusals: not a call of the conversation, and the door's checks", async () => {
  const { harness, tab } = await engine();
  await run(harness, tab, "note it");
  const first = (await tab.timeline.page(1, {})).bars.find((b) => b.label === "note tool")!;
  await expect(
    tab.timeline.rerunTool(1, { entryId: first.call!.entryId, callId: "nope", requestId: "x" }),
  ).rejects.toMatchObject({ name: "RerunRefused", code: "not_a_call" });
  const other = await tab.conversations.create("other");
  await expect(tab.timeline.rerunTool(other, { ...first.call!, requestId: "y" })).rejects.toMatchObject({
    name: "RerunRefused",
    code: "not_a_call",
  });
  // The door: a request id is required, no unknown field passes, a range's limit is bounded.
  const schema = METHODS["timeline.rerunTool"];
  expect(Value.Check(schema, [1, { entryId: 2, callId: "c" }])).toBe(false);
  expect(Value.Check(schema, [1, { entryId: 2, callId: "c", requestId: "r", extra: 1 }])).toBe(false);
  expect(Value.Check(schema, [1, { entryId: 2, callId: "c", requestId: "r" }])).toBe(true);
  expect(Value.Check(METHODS["timeline.page"], [1, { limit: 501 }])).toBe(false);
  expect(Value.Check(METHODS["timeline.watch"], [1, { from: 1, to: 2 }])).toBe(true);
});
