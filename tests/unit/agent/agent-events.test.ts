/**
 * Agent events (spec §9.4): `watchEvents` turns one conversation's commits into batches in the
 * specification's order; a consumer more than 100 batches behind gets one `snapshot`; a consumer of a
 * store reopened after a crash gets a snapshot and then events that continue it (never half a message).
 */
import { fauxAssistantMessage, fauxText, fauxThinking, fauxToolCall } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { expect, test } from "vitest";
import { SUMMARY_SYSTEM_PROMPT } from "../../../worker/agent/compaction/task.ts";
import { textResult } from "../../../worker/agent/tools/contract.ts";
import type { OutputLimits } from "../../../worker/agent/tools/limits.ts";
import { type AgentEvent, DOC, defineTool, type LiveState, watchEvents } from "../../../worker/index.ts";
import { deferred, memoryStore, until } from "../../../worker/testing.ts";
import { collect, EventConsumer, render, scriptedModel } from "./events-fixtures.ts";
import { open } from "./fixtures.ts";

const SUMMARY_TEXT =
  "The conversation history before this point was compacted into the following summary:\n\n<summary>\nSUMMARY\n</summary>";

/**
 * A tool that prints `chunks` under `limits`, each once the test lets it (`go[i]`), reporting each
 * printed (`printed[i]`); it answers its label once `go[chunks.length]` is resolved.
 */
function printer(name: string, chunks: readonly string[], limits: OutputLimits) {
  const printed = chunks.map(() => deferred());
  const go = [...chunks, "finish"].map(() => deferred());
  const tool = defineTool({
    name,
    description: `Print ${chunks.length} chunks`,
    parameters: Type.Object({ label: Type.Optional(Type.String()) }),
    outputLimits: limits,
    async execute(args, api) {
      for (let i = 0; i < chunks.length; i++) {
        await go[i]!.promise;
        api.output(chunks[i]!);
        printed[i]!.resolve();
      }
      await go[chunks.length]!.promise;
      return textResult(args.label ?? "ok");
    },
  });
  return { tool, printed, go };
}

test("one full run: thinking, text, tool calls whose output appends, trims and is replaced, then a compaction, as the expected batches", async () => {
  const model = scriptedModel({
    auto: (prompt) => (prompt === SUMMARY_SYSTEM_PROMPT ? fauxAssistantMessage("SUMMARY") : undefined),
  });
  // A tail window of 8 bytes drops "one\n" from the front when "six\n" arrives; a head window of
  // two lines cuts "a\nb\n" back to "a\nb" when a third line arrives: a replacement.
  const count = printer("count", ["one\n", "two\n", "six\n"], { maxBytes: 8, maxLines: 100, retain: "tail" });
  const head = printer("head", ["a\nb\n", "c\n"], { maxBytes: 1000, maxLines: 2, retain: "head" });
  const { h, root } = await open(() => fauxAssistantMessage("unused"), {
    stream: model.stream as never,
    tools: [count.tool, head.tool],
    settings: { partialIntervalMs: 0, outputIntervalMs: 0, compaction: { keepRecentTokens: 5 } },
  });
  const live = () => (h.docNow<LiveState & Record<string, never>>(1, DOC.live) ?? {}) as LiveState;
  const committed = (text: string) =>
    until(() => JSON.stringify(live().generation?.message?.content ?? []).includes(text), { what: text });
  const outputOf = (callId: string) => live().tools?.find((s) => s.callId === callId)?.output;
  /** Lets the tool print chunk `i`, then waits until the slot holds `output`. */
  const step = async (p: typeof count, i: number, callId: string, output: string) => {
    p.go[i]!.resolve();
    await p.printed[i]!.promise;
    await until(() => outputOf(callId) === output, { what: `${callId} output ${JSON.stringify(output)}` });
  };

  const stream = await watchEvents(h, root.id);
  expect(stream.snapshot).toMatchObject({ type: "snapshot", tools: [], compactions: [], inbox: [] });
  const { batches } = collect(stream);

  const input = await root.submit({ type: "input", content: "hello" });
  let answer = await model.next();
  answer.partial([fauxThinking("Let me")]);
  await committed("Let me");
  answer.partial([fauxThinking("Let me think")]);
  await committed("Let me think");
  answer.partial([fauxThinking("Let me think"), fauxText("Counting")]);
  await committed("Counting");
  const call = (args: Record<string, string>) => fauxToolCall("count", args, { id: "call-1" });
  answer.partial([fauxThinking("Let me think"), fauxText("Counting"), call({})]);
  await committed('"arguments":{}');
  answer.partial([fauxThinking("Let me think"), fauxText("Counting"), call({ label: "ab" })]);
  await committed('"ab"');
  answer.partial([fauxThinking("Let me think"), fauxText("Counting"), call({ label: "abc" })]);
  await committed('"abc"');
  const second = fauxToolCall("head", {}, { id: "call-2" });
  answer.done(
    [fauxThinking("Let me think"), fauxText("Counting"), call({ label: "abc" }), second],
    "toolUse",
  );
  // The calls run in parallel; the test lets one print at a time.
  await step(count, 0, "call-1", "one\n");
  await step(count, 1, "call-1", "one\ntwo\n");
  await step(count, 2, "call-1", "two\nsix\n");
  count.go[3]!.resolve();
  await until(() => live().tools?.find((s) => s.callId === "call-1")?.status === "done", {
    what: "count done",
  });
  await step(head, 0, "call-2", "a\nb\n");
  await step(head, 1, "call-2", "a\nb");
  head.go[2]!.resolve();
  answer = await model.next();
  answer.partial([fauxText("Counted")]);
  await committed("Counted");
  answer.done([fauxText("Counted abc.")]);
  expect((await input.wait()).status).toBe("done");
  await h.waitForConversationIdle(root.id);
  const compaction = await root.compact();
  await h.waitForTask(compaction);
  await until(() => batches.flat().some((e) => e.type === "compaction_end"), { what: "compaction end" });
  await until(
    () => batches.flat().some((e) => e.type === "message_end" && e.entry.kind === "pi.compaction"),
    {
      what: "summary placed",
    },
  );
  await stream.stop();

  expect(batches.map((b) => b.map(render))).toEqual([
    // The input is admitted and placed; the run and its first turn start.
    [
      "message_start user hello",
      "message_end pi.user",
      "submission input placed",
      "run_start 1",
      "turn_start",
    ],
    // The request's system prompt (its tool set) is recorded, then the answer streams.
    ["message_start system ", "message_end pi.system"],
    ["message_start assistant thinking:Let me"],
    ["message_update thinking_delta@0: think"],
    ["message_update text_start@1:Counting"],
    ["message_update toolcall_start@2:{}"],
    // A key that appears in the arguments is no append to a string: the block is sent whole.
    ['message_update block@2:{"label":"ab"}'],
    ['message_update toolcall_delta@2["label"]:c'],
    // The answer ends the message and starts both calls (first in the batch).
    [
      'tool_execution_start count {"label":"abc"}',
      "tool_execution_start head {}",
      "message_end pi.assistant",
      "usage_changed",
    ],
    // Appends, then a front trim of the tail window with the new text appended.
    ['tool_execution_update count {"append":"one\\n"}'],
    ['tool_execution_update count {"append":"two\\n"}'],
    ['tool_execution_update count {"trimStart":4,"append":"six\\n"}'],
    [
      "tool_execution_end count pi.tool-result",
      "message_start toolResult text:abc",
      "message_end pi.tool-result",
    ],
    // The head window's cut is no append: the window is replaced.
    ['tool_execution_update head {"append":"a\\nb\\n"}'],
    ['tool_execution_update head {"set":"a\\nb"}'],
    [
      "tool_execution_end head pi.tool-result",
      "message_start toolResult text:ok",
      "message_end pi.tool-result",
    ],
    // The generation's outcome ends its turn; its successor's turn starts after it.
    ["turn_end", "turn_start"],
    ["message_start assistant text:Counted"],
    // The final answer (never committed as a partial) ends the message, the turn and the run.
    ["message_end pi.assistant", "turn_end", "run_end 1", "submission input done", "usage_changed"],
    ["compaction_start manual"],
    // The summary is placed at once (idle): its entry, the status gone, its write submission done.
    [
      `message_start user text:${SUMMARY_TEXT}`,
      "message_end pi.compaction",
      "compaction_end manual",
      "submission write done",
      "usage_changed",
    ],
  ]);
  // Whatever the batches, a consumer applying them ends where the engine is.
  const consumer = new EventConsumer(stream.snapshot);
  for (const b of batches) consumer.apply(b);
  expect(consumer.problems()).toEqual([]);
  expect(consumer.entries.map((e) => e.id)).toEqual((await root.viewState()).entries.map((e) => e.id));
});

test("a consumer more than 100 batches behind gets one snapshot of the newest state, then events again", async () => {
  const { h, root } = await open(() => fauxAssistantMessage("unused"));
  const stream = await watchEvents(h, root.id);
  const write = async (n: number) =>
    (await root.submit({ type: "write", entry: { kind: "note", data: { n } } })).wait();
  for (let n = 1; n <= 100; n++) await write(n);
  // One batch per commit, all still waiting: exactly at the bound nothing collapses.
  expect(stream.pending).toBe(100);
  expect(stream.collapsed).toBe(0);
  await write(101);
  expect(stream.pending).toBe(1);
  expect(stream.collapsed).toBe(100);
  const { batches, seen } = collect(stream);
  await seen;
  expect(batches).toHaveLength(1);
  const [snapshot] = batches[0]!;
  expect(batches[0]).toHaveLength(1);
  expect(snapshot?.type).toBe("snapshot");
  const notes = (snapshot as Extract<AgentEvent, { type: "snapshot" }>).entries.filter(
    (e) => e.kind === "note",
  );
  expect(notes.map((e) => (e.data as { n: number }).n)).toEqual(Array.from({ length: 101 }, (_, i) => i + 1));
  await write(102);
  await until(() => batches.length === 2, { what: "the next commit's batch" });
  expect(batches[1]!.map(render)).toEqual(["entry_appended note", "submission write done"]);
  await stream.stop();
});

test("an overflow counts a commit that changes only what the snapshot shows: a consumer 100 batches behind gets a compaction's retry backoff in one snapshot (draw 38c)", async () => {
  const { h, root } = await open(() => fauxAssistantMessage("unused"));
  const stream = await watchEvents(h, root.id);
  const status = { taskId: 900, reason: "manual" as const, blocking: false, attempt: 1 };
  const writeLive = (live: LiveState) => h.transaction((tx) => tx.writeDoc(root.id, DOC.live, live as never));
  await writeLive({ compactions: [status] });
  for (let n = 2; n <= 100; n++)
    await (await root.submit({ type: "write", entry: { kind: "note", data: { n } } })).wait();
  expect(stream.pending).toBe(100);
  // A retry backoff emits no event (it shows only in a snapshot's compactions), yet it is a commit.
  const retried = { ...status, attempt: 2, retry: { at: 123_456, error: "overloaded" } };
  await writeLive({ compactions: [retried] });
  expect(stream.pending).toBe(1);
  expect(stream.collapsed).toBe(100);
  const { batches, seen } = collect(stream);
  await seen;
  expect(batches).toHaveLength(1);
  const [snapshot] = batches[0]!;
  expect(snapshot?.type).toBe("snapshot");
  expect((snapshot as Extract<AgentEvent, { type: "snapshot" }>).compactions).toEqual([retried]);
  await stream.stop();
});

/**
 * A tool printing `lines` one by one into a window of `maxBytes` that keeps its tail (sized to hold
 * two lines), each committed before the next is printed: the tool_execution_update events' outputs,
 * and for each update the consumer's rebuilt window beside the engine's (which must be equal).
 */
async function trimmedWindowUpdates(
  lines: readonly string[],
  maxBytes: number,
): Promise<{ outputs: Array<{ consumer: string; engine: string }>; updates: unknown[] }> {
  const printed = lines.map(() => deferred());
  const go = lines.map(() => deferred());
  const tail = defineTool({
    name: "tail",
    description: "Print lines, keeping the last ones",
    parameters: Type.Object({}),
    outputLimits: { maxBytes, maxLines: 100, retain: "tail" },
    async execute(_args, api) {
      for (let i = 0; i < lines.length; i++) {
        api.output(lines[i]!);
        printed[i]!.resolve();
        await go[i]!.promise;
      }
      return textResult("printed");
    },
  });
  const { h, root } = await open(
    (req) =>
      req.messages.some((m) => m.role === "assistant")
        ? fauxAssistantMessage("done")
        : fauxAssistantMessage([fauxToolCall("tail", {}, { id: "call-t" })], { stopReason: "toolUse" }),
    { tools: [tail], settings: { outputIntervalMs: 0 } },
  );
  const live = () => (h.docNow<LiveState & Record<string, never>>(1, DOC.live) ?? {}) as LiveState;
  const stream = await watchEvents(h, root.id);
  const consumer = new EventConsumer(stream.snapshot);
  const outputs: Array<{ consumer: string; engine: string }> = [];
  const updates: AgentEvent[] = [];
  stream.start((events) => {
    consumer.apply(events);
    for (const e of events) {
      if (e.type !== "tool_execution_update") continue;
      updates.push(e);
      outputs.push({ consumer: consumer.tools.get("call-t")!.output, engine: "" });
    }
  });
  const input = await root.submit({ type: "input", content: "go" });
  for (let i = 0; i < lines.length; i++) {
    await printed[i]!.promise;
    // Whole lines are dropped from the front while over maxBytes: the last two lines stay.
    const expected = lines.slice(Math.max(0, i - 1), i + 1).join("");
    await until(() => live().tools?.[0]?.output === expected, { what: `output ${i + 1} committed` });
    await until(() => outputs.length === i + 1, { what: `update ${i + 1} delivered` });
    outputs[i]!.engine = expected;
    go[i]!.resolve();
  }
  await input.wait();
  await stream.stop();
  return { outputs, updates: updates.map((e) => (e as { output?: unknown }).output) };
}

test("a front-trimmed output window travels as trims and appends that rebuild it exactly", async () => {
  const { outputs, updates } = await trimmedWindowUpdates(["aaaa\n", "bbbb\n", "cccc\n", "dddd\n"], 12);
  expect(outputs.map((o) => o.consumer)).toEqual(outputs.map((o) => o.engine));
  expect(updates).toEqual([
    { append: "aaaa\n" },
    { append: "bbbb\n" },
    { trimStart: 5, append: "cccc\n" },
    { trimStart: 5, append: "dddd\n" },
  ]);
});

test("a front trim of non-ASCII output travels as a trim too: bytes dropped are counted back into characters", async () => {
  // Break 29C: the trimmed output above is ASCII, where a byte is a character; a deriver that took
  // the slot's dropped bytes as characters sent every non-ASCII trim as a whole-window replacement.
  const lines = ["ééé1\n", "ééé2\n", "ééé3\n", "ééé4\n"]; // 8 bytes, 5 characters each
  const { outputs, updates } = await trimmedWindowUpdates(lines, 16);
  expect(outputs.map((o) => o.consumer)).toEqual(outputs.map((o) => o.engine));
  expect(updates).toEqual([
    { append: "ééé1\n" },
    { append: "ééé2\n" },
    { trimStart: 5, append: "ééé3\n" },
    { trimStart: 5, append: "ééé4\n" },
  ]);
});

test("a front trim of output outside the BMP (surrogate pairs) travels as a trim too: a 4-byte character is two UTF-16 units (draw 32c)", async () => {
  // Draw 32c: the test above trims two-byte characters only; a deriver counting every character as one
  // UTF-16 unit cut a 4-byte character's surrogate pair in two and sent each such trim as a replacement.
  const lines = ["😀1\n", "😀2\n", "😀3\n", "😀4\n"]; // 6 bytes, 4 UTF-16 units each
  const { outputs, updates } = await trimmedWindowUpdates(lines, 12);
  expect(outputs.map((o) => o.consumer)).toEqual(outputs.map((o) => o.engine));
  expect(updates).toEqual([
    { append: "😀1\n" },
    { append: "😀2\n" },
    { trimStart: 4, append: "😀3\n" },
    { trimStart: 4, append: "😀4\n" },
  ]);
});

test("covers exactly one conversation, not its owned subtree, and emits an event only once its commit is readable", async () => {
  const delegate = defineTool({
    name: "delegate",
    description: "Runs a subagent in a conversation the call owns",
    parameters: Type.Object({}),
    async execute(_args, api) {
      const child = await api.commit((tx) => tx.createConversation({ kind: "task", taskId: api.taskId }).id);
      const settled = await (await api.conversation(child)!.submit({ content: "child work" })).wait();
      return textResult(`child ${settled.status}`);
    },
  });
  const { h, root, store } = await open(
    (req) => {
      const users = req.messages.filter((m) => m.role === "user");
      const last = JSON.stringify(users.at(-1)?.content ?? "");
      if (last.includes("child work")) return fauxAssistantMessage("child answer");
      return req.messages.some((m) => m.role === "assistant")
        ? fauxAssistantMessage("root answer")
        : fauxAssistantMessage([fauxToolCall("delegate", {}, { id: "d1" })], { stopReason: "toolUse" });
    },
    { tools: [delegate] },
  );
  const stream = await watchEvents(h, root.id);
  const events: AgentEvent[] = [];
  const unreadable: string[] = [];
  stream.start(async (batch) => {
    for (const e of batch) {
      events.push(e);
      // Each entry an event carries is already committed and readable when the event arrives: the
      // harness reads it, and the store's committed image (taken at arrival) holds its row.
      if (e.type === "message_end" || e.type === "entry_appended") {
        const image = store.image();
        const stored = await h.entry(e.entry.id);
        if (stored?.id !== e.entry.id) unreadable.push(`${e.type} ${e.entry.id}`);
        const copy = await memoryStore(image);
        const row = await copy.read((sql) => sql.get("SELECT id FROM entries WHERE id = ?", [e.entry.id]));
        if (row === undefined) unreadable.push(`${e.type} ${e.entry.id} not stored`);
      }
    }
  });
  expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
  const child = h.conversationRecords().find((c) => c.owner !== undefined)!;
  expect((await h.conversation(child.id)!.entries()).map((e) => e.kind)).toContain("pi.assistant");
  await until(() => events.some((e) => e.type === "run_end"), { what: "root's run end" });
  await stream.stop();
  expect(unreadable).toEqual([]);
  const entries = events.flatMap((e) => ("entry" in e && e.entry ? [e.entry] : []));
  expect(entries.length).toBeGreaterThan(0);
  expect(entries.every((e) => e.conversationId === root.id)).toBe(true);
  const records = events.flatMap((e) => (e.type === "submission" ? [e.record] : []));
  expect(records.every((r) => r.conversationId === root.id)).toBe(true);
  // The root's two generations only: the child's own turn and run are not this stream's.
  expect(events.filter((e) => e.type === "turn_start")).toHaveLength(2);
  expect(events.filter((e) => e.type === "run_start")).toHaveLength(1);
  expect(JSON.stringify(events)).not.toContain("child work");
});

test("a first attachment whose mount is read while a turn starts takes the task graph with the view: the turn that began before it ends once, and never starts again", async () => {
  const gate = deferred();
  const requested = deferred();
  const store = await memoryStore();
  const { h, root } = await open(
    async () => {
      requested.resolve();
      await gate.promise;
      return fauxAssistantMessage("done");
    },
    { store },
  );
  // Hold the mount's read open: the input is admitted and its generation starts its turn after the
  // read point, before the view is set and the stream attaches (the mount replays those commits).
  const read = store.read.bind(store);
  let submitted: Awaited<ReturnType<typeof root.submit>> | undefined;
  store.read = async <T>(work: (sql: never) => Promise<T> | T): Promise<T> => {
    const result = await read(work as never);
    if (!submitted) {
      submitted = await root.submit({ type: "input", content: "go" });
      await requested.promise;
    }
    return result as T;
  };
  const stream = await watchEvents(h, root.id);
  store.read = read;
  expect(submitted).toBeDefined();
  const { batches } = collect(stream);
  gate.resolve();
  expect((await submitted!.wait()).status).toBe("done");
  const turns = () => batches.flat().filter((e) => e.type === "turn_start" || e.type === "turn_end");
  await expect.poll(() => turns().map((e) => e.type)).toEqual(["turn_end"]);
  await stream.stop();
});

test("attachment is atomic: a consumer attached at any point of a run, or attaching again, holds exactly the engine's entries and nothing half", async () => {
  const steps = printer("steps", ["one\n", "two\n", "three\n"], {
    maxLines: 100,
    maxBytes: 10_000,
    retain: "head",
  });
  const { h, root } = await open(
    (req) =>
      req.messages.some((m) => m.role === "toolResult")
        ? fauxAssistantMessage("all three printed")
        : fauxAssistantMessage([fauxText("printing"), fauxToolCall("steps", {}, { id: "s1" })], {
            stopReason: "toolUse",
          }),
    { tools: [steps.tool], settings: { outputIntervalMs: 0 } },
  );
  const attached: Array<{
    stream: Awaited<ReturnType<typeof watchEvents>>;
    consumer: EventConsumer;
    errors: string[];
  }> = [];
  const attach = async () => {
    const stream = await watchEvents(h, root.id);
    const consumer = new EventConsumer(stream.snapshot);
    const errors: string[] = [];
    stream.start(async (events) => {
      try {
        consumer.apply(events);
      } catch (error) {
        errors.push(String(error));
      }
    });
    attached.push({ stream, consumer, errors });
  };
  await attach();
  // Consumers attach while the run's commits (input, answer, intent, outputs, result, answer) land:
  // one in the same turn as the submission, then, after each step the tool is let go, one at each of
  // the next few task turns.
  const attaching = [attach()];
  const sub = await root.submit({ type: "input", content: "go" });
  const settle = () => new Promise<void>((r) => setTimeout(r, 0));
  for (let i = 0; i <= 3; i++) {
    steps.go[i]!.resolve();
    for (let k = 0; k < 4; k++) {
      attaching.push(attach());
      await settle();
    }
  }
  await Promise.all(attaching);
  // A consumer that stops and attaches again starts from a new snapshot: nothing is replayed.
  await attached[1]!.stream.stop();
  await attach();
  expect((await sub.wait()).status).toBe("done");
  await root.waitForIdle();
  const view = (await root.viewState()).entries.map((e) => e.id);
  const live = attached.filter((_, i) => i !== 1);
  // Every commit is published by now: once nothing is pending, each consumer holds all it will get.
  await until(() => live.every((a) => a.stream.pending === 0), { what: "every consumer caught up" });
  for (const [i, a] of live.entries()) {
    expect(a.errors, `consumer ${i}`).toEqual([]);
    expect(a.consumer.problems(), `consumer ${i}`).toEqual([]);
    expect(
      a.consumer.entries.map((e) => e.id),
      `consumer ${i}`,
    ).toEqual(view);
    expect(a.consumer.snapshots, `consumer ${i}`).toBe(1);
  }
  await Promise.all(live.map((a) => a.stream.stop()));
});
