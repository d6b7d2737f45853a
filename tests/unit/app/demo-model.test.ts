import {
  type Api,
  type AssistantMessage,
  type AssistantMessageEvent,
  type Context,
  getApiProvider,
  type Message,
  type Model,
  type SimpleStreamOptions,
  streamSimple,
  type ToolCall,
  type ToolResultMessage,
} from "@mariozechner/pi-ai";
import { afterEach, beforeAll, describe, expect, test } from "vitest";
import { SUMMARY_SYSTEM_PROMPT } from "../../../worker/agent/compaction/range.ts";
import { workspaceEnv } from "../../../worker/agent/env.ts";
import { createModelResolver } from "../../../worker/agent/models/resolver.ts";
import { builtinTools, toolByName } from "../../../worker/agent/tools/builtin/index.ts";
import type { ToolApi } from "../../../worker/agent/tools/contract.ts";
import { toPiTool } from "../../../worker/agent/tools/contract.ts";
import type { WorkspaceFs } from "../../../worker/agent/workspace/fs.ts";
import { MemoryFs } from "../../../worker/agent/workspace/memory-fs.ts";
import {
  DEFAULT_DEMO_SPEED,
  demoModel,
  planDemoReply,
  registerDemoProvider,
  setDemoSpeed,
  sumSizesScript,
} from "../../../worker/app/demo-model.ts";
import { AgentHarness } from "../../../worker/index.ts";
import { detachedToolApi, memoryStore } from "../../../worker/testing.ts";

const tools = builtinTools.map(toPiTool);
const user = (text: string): Message => ({ role: "user", content: text, timestamp: 1 });

async function collect(
  context: Context,
  options: SimpleStreamOptions = {},
  onEvent?: (e: AssistantMessageEvent) => void,
) {
  const stream = streamSimple(demoModel, context, options);
  const events: AssistantMessageEvent[] = [];
  for await (const event of stream) {
    events.push(event);
    onEvent?.(event);
  }
  return { events, message: await stream.result() };
}

function textOf(message: AssistantMessage): string {
  return message.content.map((c) => (c.type === "text" ? c.text : "")).join("");
}

function toolCallsOf(message: AssistantMessage): ToolCall[] {
  return message.content.filter((c): c is ToolCall => c.type === "toolCall");
}

/** Run the tool calls of `message` against `fs` the way the engine would, giving the result messages. */
async function runTools(message: AssistantMessage, fs: WorkspaceFs): Promise<ToolResultMessage[]> {
  const out: ToolResultMessage[] = [];
  for (const call of toolCallsOf(message)) {
    const tool = toolByName(call.name)!;
    const api: ToolApi = detachedToolApi({ toolCallId: call.id, fs, output: () => {} });
    const result = await tool.execute(call.arguments as never, api);
    out.push({
      role: "toolResult",
      toolCallId: call.id,
      toolName: call.name,
      content: result.content,
      isError: result.isError ?? false,
      timestamp: 2,
    });
  }
  return out;
}

/**
 * One user turn: the model's first answer, then tool rounds until it answers without a call; gives
 * every answer that called tools (`calls`), the last round's results and the final answer.
 */
async function turn(messages: Message[], said: string, fs: WorkspaceFs) {
  messages.push(user(said));
  const first = (await collect({ messages, tools })).message;
  messages.push(first);
  if (first.stopReason !== "toolUse") return { first, calls: [], results: [], answer: undefined };
  const calls = [first];
  for (;;) {
    const results = await runTools(calls.at(-1)!, fs);
    messages.push(...results);
    const answer = (await collect({ messages, tools })).message;
    messages.push(answer);
    if (answer.stopReason !== "toolUse") return { first, calls, results, answer };
    calls.push(answer);
  }
}

const stripTimestamps = (events: AssistantMessageEvent[]) =>
  JSON.parse(JSON.stringify(events, (key, value) => (key === "timestamp" ? 0 : value)));

beforeAll(() => {
  registerDemoProvider();
  registerDemoProvider(); // idempotent
  setDemoSpeed({ charsPerChunk: 8, chunkDelayMs: 0 });
});

afterEach(() => {
  setDemoSpeed({ charsPerChunk: 8, chunkDelayMs: 0 });
});

describe("demo provider", () => {
  test("is registered under api demo and described as a free offline model", () => {
    expect(getApiProvider("demo")).toBeDefined();
    expect(demoModel).toMatchObject({ api: "demo", provider: "demo", id: "demo-1" });
    expect(demoModel.cost).toEqual({ input: 0, output: 0, cacheRead: 0, cacheWrite: 0 });
    expect(DEFAULT_DEMO_SPEED.chunkDelayMs).toBeGreaterThan(0);
  });

  test("'list the files' calls ls with the event contract, then summarises", async () => {
    const fs = new MemoryFs({ "a.md": "A", "notes/n.md": "N" });
    const context: Context = { messages: [user("Please list the files")], tools };
    const { events, message } = await collect(context);

    const types = events.map((e) => e.type);
    expect(types[0]).toBe("start");
    expect(types[1]).toBe("text_start");
    expect(types.indexOf("text_end")).toBeGreaterThan(2);
    expect(types.slice(types.indexOf("text_end") + 1, types.indexOf("text_end") + 3)).toEqual([
      "toolcall_start",
      "toolcall_delta",
    ]);
    expect(types.at(-2)).toBe("toolcall_end");
    expect(types.at(-1)).toBe("done");
    expect(types.filter((t) => t === "text_delta").length).toBeGreaterThan(1);

    const deltas = events.flatMap((e) => (e.type === "text_delta" ? [e.delta] : []));
    expect(deltas.every((d) => d.length <= 8)).toBe(true);
    expect(deltas.join("")).toBe(textOf(message));
    const argDeltas = events.flatMap((e) => (e.type === "toolcall_delta" ? [e.delta] : []));
    expect(JSON.parse(argDeltas.join(""))).toEqual({ path: "." });

    const end = events.find((e) => e.type === "toolcall_end");
    expect(end?.type === "toolcall_end" && end.toolCall).toEqual({
      type: "toolCall",
      id: "demo_1_0",
      name: "ls",
      arguments: { path: "." },
    });
    const done = events.at(-1)!;
    expect(done.type === "done" && done.reason).toBe("toolUse");
    expect(message.stopReason).toBe("toolUse");
    expect(message).toMatchObject({ api: "demo", provider: "demo", model: "demo-1" });
    // Usage is estimated (about four characters a token) and costs nothing.
    expect(message.usage.input).toBeGreaterThan(0);
    expect(message.usage.output).toBe(Math.ceil(JSON.stringify(message.content).length / 4));
    expect(message.usage.totalTokens).toBe(message.usage.input + message.usage.output);
    expect(message.usage.cost.total).toBe(0);

    // The follow-up after the tool result.
    const results = await runTools(message, fs);
    const answer = (await collect({ messages: [...context.messages, message, ...results], tools })).message;
    expect(answer.stopReason).toBe("stop");
    expect(toolCallsOf(answer)).toEqual([]);
    expect(textOf(answer)).toBe("I found 2 entries in the workspace: a.md, notes/.");
  });

  test("partials are snapshots: later deltas do not change earlier events", async () => {
    const { events } = await collect({ messages: [user("hello")], tools });
    const firstDelta = events.find((e) => e.type === "text_delta");
    expect(firstDelta?.type === "text_delta" && firstDelta.partial.content).toEqual([
      { type: "text", text: firstDelta?.type === "text_delta" ? firstDelta.delta : "" },
    ]);
  });

  test("'write a note', 'read <path>', a second note: a whole conversation on a workspace", async () => {
    const fs = new MemoryFs();
    const messages: Message[] = [];

    const w = await turn(messages, "write a note", fs);
    // It lists the workspace first (no notes directory yet), then writes the first name.
    expect(w.calls.map((c) => toolCallsOf(c))).toMatchObject([
      [{ name: "ls", arguments: { path: "." } }],
      [{ name: "write", arguments: { path: "notes/note-1.md" } }],
    ]);
    expect(Object.keys(fs.snapshot())).toEqual(["notes/note-1.md"]);
    expect(fs.snapshot()["notes/note-1.md"]).toMatch(/^# Note 1\n/);
    expect(textOf(w.answer!)).toMatch(
      /^Done: Wrote \d+ bytes to notes\/note-1\.md\. Say "read notes\/note-1\.md"/,
    );

    const r = await turn(messages, "read notes/note-1.md", fs);
    expect(toolCallsOf(r.first)).toMatchObject([{ name: "read", arguments: { path: "notes/note-1.md" } }]);
    expect(textOf(r.answer!)).toMatch(/^Here is notes\/note-1\.md:\n\n> # Note 1/);

    // Now there is a notes directory: it is listed too, and the next number taken.
    const w2 = await turn(messages, "Write another note please", fs);
    expect(w2.calls.map((c) => toolCallsOf(c))).toMatchObject([
      [{ name: "ls", arguments: { path: "." } }],
      [{ name: "ls", arguments: { path: "notes" } }],
      [{ name: "write", arguments: { path: "notes/note-2.md" } }],
    ]);

    const missing = await turn(messages, "read nothing-here.md", fs);
    expect(missing.results[0]?.isError).toBe(true);
    expect(textOf(missing.answer!)).toBe(
      "The `read` tool reported a problem: File not found: nothing-here.md",
    );

    // Ids derive from the transcript length: unique within the conversation.
    const ids = messages.flatMap((m) => (m.role === "assistant" ? toolCallsOf(m).map((c) => c.id) : []));
    expect(new Set(ids).size).toBe(ids.length);
  });

  test("'write a note' in a second conversation picks a free name: the first conversation's note stays", async () => {
    const fs = new MemoryFs();
    const first = await turn([], "write a note", fs);
    expect(textOf(first.answer!)).toMatch(/to notes\/note-1\.md\./);
    const before = fs.snapshot()["notes/note-1.md"];
    // A new conversation knows nothing of the first one's write: only the listing tells it.
    await fs.write("notes/note-7.md", "# Note 7\n");
    await fs.write("notes/other.md", "not a numbered note");
    const second = await turn([], "write a note", fs);
    expect(toolCallsOf(second.calls[2]!)).toMatchObject([
      { name: "write", arguments: { path: "notes/note-8.md" } },
    ]);
    expect(fs.snapshot()["notes/note-1.md"]).toBe(before);
    expect(fs.snapshot()["notes/note-8.md"]).toMatch(/^# Note 8\n/);
    expect(Object.keys(fs.snapshot()).sort()).toEqual([
      "notes/note-1.md",
      "notes/note-7.md",
      "notes/note-8.md",
      "notes/other.md",
    ]);
  });

  test("'write a note' without ls offered writes at once, numbered after this conversation's writes", () => {
    const writeOnly = tools.filter((t) => t.name === "write");
    const reply = planDemoReply({ messages: [user("write a note")], tools: writeOnly });
    expect(reply.toolCalls).toMatchObject([{ name: "write", arguments: { path: "notes/note-1.md" } }]);
  });

  test("'call the tool <name> with {json}' calls that tool directly, when offered", () => {
    const mcpTool = { name: "docs_echo", description: "echo", parameters: { type: "object" } } as never;
    const reply = planDemoReply({
      messages: [user('Call the tool docs_echo with {"text": "hi"}')],
      tools: [...tools, mcpTool],
    });
    expect(reply.toolCalls).toMatchObject([{ name: "docs_echo", arguments: { text: "hi" } }]);
    const missing = planDemoReply({ messages: [user("call the tool docs_echo")], tools });
    expect(missing.toolCalls).toEqual([]);
  });

  test("'run a long task of 60 seconds' sleeps as long as asked, a step a second, at most ten minutes", () => {
    const sleepOf = (text: string) =>
      planDemoReply({ messages: [user(text)], tools }).toolCalls[0]?.arguments;
    expect(sleepOf("run a long task of 60 seconds")).toEqual({ seconds: 60, steps: 60 });
    expect(sleepOf("Run a long task of 999 seconds")).toEqual({ seconds: 600, steps: 600 });
  });

  test("'run a long task' calls sleep with 3 seconds in 6 steps", async () => {
    const { message } = await collect({ messages: [user("Run a long task")], tools });
    expect(toolCallsOf(message)).toEqual([
      { type: "toolCall", id: "demo_1_0", name: "sleep", arguments: { seconds: 3, steps: 6 } },
    ]);
    const followUp = planDemoReply({
      messages: [
        user("run a long task"),
        message,
        {
          role: "toolResult",
          toolCallId: "demo_1_0",
          toolName: "sleep",
          content: [{ type: "text", text: "Finished the long task: 6 steps in 3 seconds" }],
          isError: false,
          timestamp: 3,
        },
      ],
      tools,
    });
    expect(followUp.toolCalls).toEqual([]);
    expect(followUp.text).toBe("The long task is finished. Finished the long task: 6 steps in 3 seconds.");
  });

  test("anything else: a friendly answer naming what it can do", async () => {
    const { message, events } = await collect({ messages: [user("What can you do?")], tools });
    expect(message.stopReason).toBe("stop");
    expect(events.some((e) => e.type.startsWith("toolcall"))).toBe(false);
    const text = textOf(message);
    for (const phrase of [
      "list the files",
      "write a note",
      "read notes/note-1.md",
      "run a long task",
      "sum the sizes of the files",
    ]) {
      expect(text).toContain(phrase);
    }
    expect(text).toContain('You said: "What can you do?"');
    expect(textOf((await collect({ messages: [], tools })).message)).toMatch(/^Hello!/);
  });

  test("a tool the context does not offer is not called", async () => {
    const { message } = await collect({ messages: [user("list the files")] });
    expect(message.stopReason).toBe("stop");
    expect(toolCallsOf(message)).toEqual([]);
    expect(textOf(message)).toMatch(/`ls` tool .* not available/);
  });

  test("abort mid-stream ends with stopReason aborted and the partial so far", async () => {
    setDemoSpeed({ charsPerChunk: 4, chunkDelayMs: 5 });
    const controller = new AbortController();
    let deltas = 0;
    const { events, message } = await collect(
      { messages: [user("tell me something")], tools },
      { signal: controller.signal },
      (e) => {
        if (e.type === "text_delta" && ++deltas === 2) controller.abort();
      },
    );
    const last = events.at(-1)!;
    expect(last.type).toBe("error");
    expect(last.type === "error" && last.reason).toBe("aborted");
    expect(message.stopReason).toBe("aborted");
    expect(message.errorMessage).toBe("Request was aborted");
    expect(textOf(message).length).toBe(8);
    expect(events.some((e) => e.type === "done" || e.type === "text_end")).toBe(false);
  });

  test("abort during a tool call's arguments, and before the start", async () => {
    setDemoSpeed({ charsPerChunk: 2, chunkDelayMs: 3 });
    const controller = new AbortController();
    const { message } = await collect(
      { messages: [user("write a note")], tools },
      { signal: controller.signal },
      (e) => {
        if (e.type === "toolcall_delta") controller.abort();
      },
    );
    expect(message.stopReason).toBe("aborted");
    expect(message.content.at(-1)?.type).toBe("toolCall");

    const early = new AbortController();
    early.abort();
    const { events } = await collect({ messages: [user("hi")], tools }, { signal: early.signal });
    expect(events.map((e) => e.type)).toEqual(["error"]);
  });

  test("deterministic: the same context gives the same events", async () => {
    for (const said of ["list the files", "write a note", "read a.md", "run a long task", "hello there"]) {
      const context: Context = { messages: [user("earlier"), user(said)], tools };
      const a = await collect(context);
      const b = await collect(context);
      expect(stripTimestamps(a.events)).toEqual(stripTimestamps(b.events));
    }
  });

  test("the default speed streams over time", async () => {
    setDemoSpeed(DEFAULT_DEMO_SPEED);
    const started = performance.now();
    const { events } = await collect({ messages: [user("hi")], tools });
    const deltas = events.filter((e) => e.type === "text_delta").length;
    expect(performance.now() - started).toBeGreaterThanOrEqual(
      deltas * DEFAULT_DEMO_SPEED.chunkDelayMs * 0.5,
    );
  });

  test("a compaction's summary request gets a summary listing what the user asked, never a tool call", () => {
    const conversation =
      '<conversation>\n[User]: list the files\n\n[Assistant tool calls]: ls(path=".")\n\n[Tool result]: a.md\n\n' +
      "[User]: write a note\n</conversation>\n\nSummarize the conversation above.";
    const reply = planDemoReply({
      systemPrompt: SUMMARY_SYSTEM_PROMPT,
      messages: [user(conversation)],
      tools,
    });
    expect(reply.toolCalls).toEqual([]);
    expect(reply.text).toContain('The user asked:\n- "list the files"\n- "write a note"');
    expect(reply.text).toContain("Tool rounds so far: 1.");
    // The same words from a user (no summarizer prompt) still call the tool.
    expect(planDemoReply({ messages: [user("list the files")], tools }).toolCalls).toHaveLength(1);
  });

  test("sum the sizes of the files: the demo model writes a script that codemode runs over ls", async () => {
    const reply = planDemoReply({ messages: [user("Sum the sizes of the files, please")], tools });
    expect(reply.toolCalls.map((c) => c.name)).toEqual(["codemode"]);
    expect(reply.toolCalls[0]!.arguments).toEqual({ script: sumSizesScript(false) });
    const fs = new MemoryFs();
    await fs.write("a.md", "12345");
    await fs.write("notes/b.md", "x");
    await fs.write("c.txt", "123");
    const h = await AgentHarness.open(await memoryStore(), {
      models: createModelResolver({ extra: [demoModel as unknown as Model<Api>] }),
      defaultModel: { provider: demoModel.provider, modelId: demoModel.id },
      tools: builtinTools,
      fs,
      env: workspaceEnv(fs),
    });
    try {
      const root = await h.root();
      await (await root.submit({ type: "input", content: "sum the sizes of the files" })).wait();
      const answer = (await root.entries()).filter((e) => e.kind === "pi.assistant").at(-1);
      const text = JSON.stringify(answer?.model);
      expect(text).toContain("My script ran");
      expect(text).toContain("a.md: 5 bytes");
      expect(text).toContain("notes/b.md: 1 bytes");
      expect(text).toContain('Result: {\\"files\\":3,\\"totalBytes\\":9}');
    } finally {
      await h.close();
    }
  });

  test("Compact works with the demo model: its summary is placed and the next request starts from it", async () => {
    const h = await AgentHarness.open(await memoryStore(), {
      models: createModelResolver({ extra: [demoModel as unknown as Model<Api>] }),
      defaultModel: { provider: demoModel.provider, modelId: demoModel.id },
      tools: builtinTools,
      fs: new MemoryFs(),
      settings: { compaction: { keepRecentTokens: 60 } },
    });
    try {
      const root = await h.root();
      for (const text of ["list the files", "write a note", "hello there", "what can you do?"])
        expect((await (await root.submit({ type: "input", content: text })).wait()).status).toBe("done");
      const taskId = await root.compact();
      expect((await h.waitForTask(taskId)).state).toMatchObject({ outcome: { status: "completed" } });
      const summary = (await root.entries()).find((e) => e.kind === "pi.compaction");
      expect(JSON.stringify(summary?.model)).toContain("list the files");
      expect((await root.viewState()).entries[0]?.kind).toBe("pi.compaction");
    } finally {
      await h.close();
    }
  });
});

describe("model resolver", () => {
  test("extras first, then pi-ai's catalogue", () => {
    const resolver = createModelResolver({ extra: [demoModel] });
    expect(resolver.resolve({ provider: "demo", modelId: "demo-1" })).toBe(demoModel);
    expect(resolver.resolve({ provider: "demo", modelId: "nope" })).toBeUndefined();
    expect(resolver.resolve({ provider: "no-such-provider", modelId: "x" })).toBeUndefined();
    const list = resolver.list();
    expect(list[0]).toEqual({ provider: "demo", id: "demo-1", name: "Demo (offline)" });
    const real = list.find((m) => m.provider === "anthropic");
    expect(real).toBeDefined();
    expect(resolver.resolve({ provider: real!.provider, modelId: real!.id })).toMatchObject({
      provider: "anthropic",
      id: real!.id,
    });
  });
});
