/**
 * Exported traces (issue 31 part 5, worker/app/trace.ts): a conversation's run as OTLP JSON spans,
 * checked against the `ExportTraceServiceRequest` shape (otlp-schema.ts): one span per task nested
 * by ownership (a subagent's conversation beneath the tool call that ran it), GenAI attributes, the
 * outcome as status, a tool call's approval wait, ids stable and valid hex, times as nanosecond
 * strings, and neither message content nor a secret anywhere in the file.
 */
import { fauxAssistantMessage, fauxToolCall } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { Value } from "typebox/value";
import { describe, expect, test } from "vitest";
import {
  conversationTrace,
  nanos,
  type OtlpSpan,
  type OtlpTrace,
  otlpTrace,
  STATUS,
} from "../../../worker/app/trace.ts";
import type { ConversationRecord, TaskRecord } from "../../../worker/core/types.ts";
import { createSubagentTool, defineTool, textResult } from "../../../worker/index.ts";
import { until } from "../../../worker/testing.ts";
import { liveOf, open } from "../agent/fixtures.ts";
import { ExportTraceServiceRequestSchema } from "./otlp-schema.ts";

const SECRET = "sk-test-TRACE-0123456789abcdef";
const PROMPT = `please run the tools, my key is ${SECRET}`;

/** The file parsed and checked against the OTLP JSON shape; its spans. */
function parsed(text: string): OtlpSpan[] {
  const value: unknown = JSON.parse(text);
  const errors = [...Value.Errors(ExportTraceServiceRequestSchema, value)].map(
    (e) => `${e.instancePath} ${e.message}`,
  );
  expect(errors).toEqual([]);
  return (value as OtlpTrace).resourceSpans.flatMap((r) => r.scopeSpans.flatMap((s) => s.spans));
}

const attr = (span: OtlpSpan, key: string) => {
  const v = span.attributes.find((a) => a.key === key)?.value;
  if (!v) return undefined;
  if ("stringValue" in v) return v.stringValue;
  if ("intValue" in v) return Number(v.intValue);
  if ("doubleValue" in v) return v.doubleValue;
  if ("boolValue" in v) return v.boolValue;
  return v.arrayValue.values.map((x) => ("stringValue" in x ? x.stringValue : undefined));
};

/** A parent that runs a subagent, a tool that throws and a tool that asks first, then answers. */
async function runWithTools() {
  const boom = defineTool({
    name: "boom",
    description: "Fail",
    parameters: Type.Object({}),
    execute: async () => {
      throw new Error(`it broke near ${SECRET}`);
    },
  });
  const note = defineTool({
    name: "note",
    description: "Write a note",
    parameters: Type.Object({ text: Type.String() }),
    execute: async (args) => textResult(`wrote ${args.text}`),
  });
  const setup = await open(
    (req) => {
      const first = req.messages.find((m) => m.role === "user");
      const text = first?.role === "user" && typeof first.content === "string" ? first.content : "";
      if (text === "child task") return fauxAssistantMessage("child done");
      if (req.messages.some((m) => m.role === "toolResult")) return fauxAssistantMessage("all done");
      return fauxAssistantMessage(
        [
          fauxToolCall("subagent", { task: "child task" }, { id: "sub-1" }),
          fauxToolCall("boom", {}, { id: "boom-1" }),
          fauxToolCall("note", { text: SECRET }, { id: "note-1" }),
        ],
        { stopReason: "toolUse" },
      );
    },
    {
      tools: [createSubagentTool(), boom, note],
      settings: { approval: { tools: { note: "ask" }, fallback: "allow" } },
    },
  );
  await setup.root.submit({ type: "input", content: PROMPT });
  return setup;
}

describe("a conversation's run as OTLP JSON", () => {
  test("one span per task nested by ownership, a subagent beneath its call, GenAI attributes, statuses; stable ids, nanosecond times, no content or secret", async () => {
    const { h, root } = await runWithTools();
    const waiting = () => (liveOf(h).tools ?? []).find((s) => s.status === "awaiting_approval");
    await until(() => waiting() !== undefined, { what: "the note call awaits approval" });

    // While the call waits: its approval wait is an open span (UNSET) that ends at the export's time.
    const midNow = h.now();
    const mid = parsed((await conversationTrace(h, root.id, { secrets: [SECRET], now: midNow })).text);
    const waitingSpan = mid.find((s) => s.name === "approval wait")!;
    expect(waitingSpan.status).toEqual({ code: STATUS.unset });
    expect(waitingSpan.endTimeUnixNano).toBe(nanos(midNow));
    expect(attr(waitingSpan, "app.approval.decision")).toBe("waiting");
    expect(mid.find((s) => s.name === "invoke_agent conversation")!.status.code).toBe(STATUS.unset);

    await h.decideApproval(root.id, { taskId: waiting()!.taskId!, decision: "approve", requestId: "r1" });
    await h.waitForIdle();
    const now = h.now();
    const file = await conversationTrace(h, root.id, { secrets: [SECRET], now });
    expect(file.fileName).toBe(`trace-conversation-${root.id}.otlp.json`);
    const spans = parsed(file.text);

    // No message content (the prompt, the answers, the arguments, the error's text) and no secret.
    for (const words of [SECRET, "please run the tools", "all done", "child done", "it broke"])
      expect(file.text).not.toContain(words);

    // Ids: one trace, valid hex, unique span ids; the same file again gives the same ids.
    const traceIds = new Set(spans.map((s) => s.traceId));
    expect(traceIds.size).toBe(1);
    expect(new Set(spans.map((s) => s.spanId)).size).toBe(spans.length);
    expect((await conversationTrace(h, root.id, { secrets: [SECRET], now })).text).toBe(file.text);

    // Every task of the conversation and of its subagent is a span, under its owner's span or its
    // conversation's; the subagent's conversation is under the tool call that ran it.
    const child = h.conversationRecords().find((c) => c.owner?.conversationId === root.id)!;
    expect(child).toBeDefined();
    const tasks = (await h.tasks()).filter(
      (t) => t.conversationId === root.id || t.conversationId === child.id,
    );
    const byTask = new Map(
      spans
        .filter((s) => attr(s, "app.task.id") !== undefined && s.name !== "approval wait")
        .map((s) => [attr(s, "app.task.id"), s]),
    );
    const byConversation = (id: number) =>
      spans.find((s) => s.name.startsWith("invoke_agent") && attr(s, "app.conversation.id") === id)!;
    expect(byTask.size).toBe(tasks.length);
    for (const t of tasks) {
      const span = byTask.get(t.id)!;
      const parent = t.owner !== undefined ? byTask.get(t.owner)! : byConversation(t.conversationId);
      expect(span.parentSpanId, `task ${t.id} (${t.kind})`).toBe(parent.spanId);
      expect(span.startTimeUnixNano).toBe(nanos(t.startedAt!));
      expect(span.endTimeUnixNano).toBe(nanos(t.endedAt!));
      expect(BigInt(span.endTimeUnixNano) >= BigInt(span.startTimeUnixNano)).toBe(true);
    }
    const rootSpan = byConversation(root.id);
    expect(rootSpan.parentSpanId).toBeUndefined();
    expect(rootSpan.status).toEqual({ code: STATUS.ok });
    const subagentCall = spans.find((s) => s.name === "execute_tool subagent")!;
    expect(byConversation(child.id).parentSpanId).toBe(subagentCall.spanId);
    expect(attr(byConversation(child.id), "gen_ai.operation.name")).toBe("invoke_agent");

    // Generations: CLIENT spans with the model and the tokens their answers spent.
    const model = (await root.entries()).find((e) => e.kind === "pi.assistant")!.model as unknown as [
      { model: string },
    ];
    const generations = spans.filter((s) => attr(s, "gen_ai.operation.name") === "chat");
    expect(generations.length).toBeGreaterThanOrEqual(2);
    for (const g of generations) {
      expect(g.name).toBe(`chat ${model[0].model}`);
      expect(g.kind).toBe(3);
      expect(attr(g, "gen_ai.request.model")).toBe(model[0].model);
      expect(g.status).toEqual({ code: STATUS.ok });
    }
    const spent = async (c: number) =>
      (await h.entries(c))
        .filter((e) => e.kind === "pi.assistant")
        .reduce((n, e) => n + (e.model as unknown as [{ usage: { input: number } }])[0].usage.input, 0);
    const inputTokens = generations.reduce((n, g) => n + (attr(g, "gen_ai.usage.input_tokens") as number), 0);
    expect(inputTokens).toBe((await spent(root.id)) + (await spent(child.id)));
    expect(inputTokens).toBeGreaterThan(0);
    expect(generations.some((g) => g.parentSpanId === byConversation(child.id).spanId)).toBe(true);

    // Tool calls: their names; the one that threw is an ERROR with its code only.
    const boom = spans.find((s) => s.name === "execute_tool boom")!;
    expect(attr(boom, "gen_ai.tool.name")).toBe("boom");
    expect(attr(boom, "gen_ai.tool.call.id")).toBe("boom-1");
    expect(boom.status).toEqual({ code: STATUS.error, message: "tool_error" });
    const noteCall = spans.find((s) => s.name === "execute_tool note")!;
    expect(noteCall.status).toEqual({ code: STATUS.ok });
    // Its approval wait, decided: beneath it, OK, between the wait's start and the decision.
    const approval = spans.find((s) => s.name === "approval wait")!;
    expect(approval.parentSpanId).toBe(noteCall.spanId);
    expect(approval.status).toEqual({ code: STATUS.ok });
    expect(attr(approval, "app.approval.decision")).toBe("approve");
    expect(approval.startTimeUnixNano).toBe(waitingSpan.startTimeUnixNano);
  });
});

describe("the mapping's rules", () => {
  const conversation: ConversationRecord = { id: 7, createdAt: 1_700_000_000_000 };
  const task = (
    id: number,
    state: TaskRecord["state"],
    extra: Partial<TaskRecord> = {},
    options: { started: boolean } = { started: true },
  ): TaskRecord => ({
    id,
    conversationId: 7,
    kind: "pi.generation",
    version: 1,
    input: null,
    background: false,
    abortRequested: false,
    state,
    ...(options.started ? { startedAt: 1_700_000_000_123 } : {}),
    ...extra,
  });

  test("times are exact nanosecond strings; an outcome maps to a status; a live task ends at the export, UNSET", async () => {
    expect(nanos(1_700_000_000_123)).toBe("1700000000123000000");
    expect(nanos(0)).toBe("0");
    const now = 1_700_000_009_000;
    const trace = await otlpTrace({
      conversation,
      conversations: [conversation],
      tasks: [
        task(
          1,
          { status: "terminal", outcome: { status: "failed", error: { message: `secret ${SECRET}` } } },
          { endedAt: 1_700_000_000_500 },
        ),
        task(2, { status: "terminal", outcome: { status: "aborted" } }, { endedAt: 1_700_000_000_600 }),
        task(3, { status: "waiting", checkpoint: { phase: "tools" }, on: [4], policy: "all" } as never),
        task(
          4,
          { status: "pending", checkpoint: { phase: "call" } },
          { kind: "pi.compaction", owner: 3 },
          { started: false },
        ),
      ],
      entries: [],
      live: new Map(),
      now,
    });
    const spans = parsed(JSON.stringify(trace));
    const of = (id: number) => spans.find((s) => attr(s, "app.task.id") === id)!;
    expect(of(1).status).toEqual({ code: STATUS.error, message: "failed" });
    expect(JSON.stringify(trace)).not.toContain(SECRET);
    expect(of(2).status).toEqual({ code: STATUS.error, message: "aborted" });
    expect(of(3).status).toEqual({ code: STATUS.unset });
    expect(of(3).endTimeUnixNano).toBe(nanos(now));
    expect(attr(of(3), "app.task.status")).toBe("waiting");
    // Never started: a zero-length span at the export's time, beneath its owner.
    expect(of(4).name).toBe("compaction");
    expect(of(4).parentSpanId).toBe(of(3).spanId);
    expect(of(4).startTimeUnixNano).toBe(nanos(now));
    // The trace id is the conversation's, whatever the tasks: the same conversation, the same id.
    const again = await otlpTrace({
      conversation,
      conversations: [conversation],
      tasks: [],
      entries: [],
      live: new Map(),
      now,
    });
    expect(again.resourceSpans[0]!.scopeSpans[0]!.spans[0]!.traceId).toBe(spans[0]!.traceId);
    const other = await otlpTrace({
      conversation: { id: 8, createdAt: 1 },
      conversations: [{ id: 8, createdAt: 1 }],
      tasks: [],
      entries: [],
      live: new Map(),
      now,
    });
    expect(other.resourceSpans[0]!.scopeSpans[0]!.spans[0]!.traceId).not.toBe(spans[0]!.traceId);
  });
});
