/**
 * The agent layer's rules, one test each, against pi-ai's faux provider. Responders derive their
 * answer from the request they receive (tool-call ids are fixed), so a request sent again gets the
 * same answer; gates hold a request or a tool open while the test acts on a busy conversation.
 */
import {
  type AssistantMessage,
  fauxAssistantMessage,
  fauxToolCall,
  type ToolResultMessage,
  type Usage,
} from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { describe, expect, test } from "vitest";
import { addUsage } from "../../worker/agent/records.ts";
import { textResult } from "../../worker/agent/tools/contract.ts";
import {
  AgentHarness,
  type AgentHarnessOptions,
  type ChangeSet,
  ConversationBusy,
  type ConversationView,
  DOC,
  defineTool,
  deriveContext,
  type EntryRecord,
  type Frame,
  type UsageState,
} from "../../worker/index.ts";
import { deferred, fauxError, KeyedEffects, keyedEffectTool, memoryStore } from "../../worker/testing.ts";
import {
  alternationProblems,
  callsThenAnswer,
  cleanups,
  diagnosticsOf,
  echo,
  gatedTool,
  inboxOf,
  kinds,
  last,
  liveOf,
  messageOf,
  open,
  roles,
  textOf,
  transcript,
} from "./agent-fixtures.ts";

// ---------------------------------------------------------------------------------------------
// Submissions and the inbox

describe("submissions", () => {
  test("an input on an idle conversation is placed at once, starts a run, and settles done with the answer", async () => {
    const { h, root } = await open(echo);
    const sub = await root.submit({ type: "input", content: "hello" });
    const record = await sub.record();
    expect(record.status).toBe("placed");
    expect(liveOf(h).run?.inputs).toEqual([sub.id]);
    expect(root.busy).toBe(true);
    const settled = await sub.wait();
    const entries = await transcript(root);
    expect(kinds(entries)).toEqual(["pi.user", "pi.assistant"]);
    expect(settled).toEqual({ status: "done", answer: entries[1]!.id, entry: entries[0]!.id });
    expect(textOf(messageOf(entries[1]!))).toBe("echo: hello");
    expect(alternationProblems(entries)).toEqual([]);
    expect(root.busy).toBe(false);
  });

  test("followUp (the default): queued while busy, placed when the run answers, and starts the next run", async () => {
    const hold = deferred();
    const { h, root, faux } = await open(async (req, n) => {
      if (n === 1) await hold.promise;
      return echo(req, n);
    });
    const first = await root.submit({ type: "input", content: "one" });
    const second = await root.submit({ type: "input", content: "two" });
    expect((await second.record()).status).toBe("queued");
    expect(inboxOf(h).items.map((i) => [i.id, i.mode])).toEqual([[second.id, "followUp"]]);
    expect(kinds(await transcript(root)).filter((k) => k === "pi.user")).toHaveLength(1);
    hold.resolve();
    const a = await first.wait();
    const b = await second.wait();
    const entries = await transcript(root);
    expect(kinds(entries)).toEqual(["pi.user", "pi.assistant", "pi.user", "pi.assistant"]);
    expect(a).toEqual({ status: "done", answer: entries[1]!.id, entry: entries[0]!.id });
    expect(b).toEqual({ status: "done", answer: entries[3]!.id, entry: entries[2]!.id });
    expect(textOf(messageOf(entries[3]!))).toBe("echo: two");
    expect(faux.requests.map(roles)).toEqual([["user"], ["user", "assistant", "user"]]);
    expect(alternationProblems(entries)).toEqual([]);
    expect(inboxOf(h).items).toEqual([]);
  });

  test("steer: placed after the current tool round and joins the run", async () => {
    const { tool, started, release } = gatedTool();
    const { h, root, faux } = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "call-1" })), {
      tools: [tool],
    });
    const input = await root.submit({ type: "input", content: "work" });
    await started.promise;
    const steer = await root.submit({ type: "input", content: "also this", whenBusy: "steer" });
    expect((await steer.record()).status).toBe("queued");
    expect(inboxOf(h).items.map((i) => i.mode)).toEqual(["steer"]);
    expect(kinds(await transcript(root))).toEqual(["pi.user", "pi.assistant"]);
    release.resolve();
    const a = await input.wait();
    const b = await steer.wait();
    const entries = await transcript(root);
    expect(kinds(entries)).toEqual(["pi.user", "pi.assistant", "pi.tool-result", "pi.user", "pi.assistant"]);
    expect(messageOf(entries[3]!)).toMatchObject({ role: "user", content: "also this" });
    expect(a).toEqual({ status: "done", answer: entries[4]!.id, entry: entries[0]!.id });
    expect(b).toEqual({ status: "done", answer: entries[4]!.id, entry: entries[3]!.id });
    expect(faux.requests.map(roles)).toEqual([["user"], ["user", "assistant", "toolResult", "user"]]);
    expect(alternationProblems(entries)).toEqual([]);
  });

  test("whenBusy reject: throws ConversationBusy and writes nothing", async () => {
    const hold = deferred();
    const { h, root, faux } = await open(async (req, n) => {
      await hold.promise;
      return echo(req, n);
    });
    const first = await root.submit({ type: "input", content: "one" });
    await expect.poll(() => faux.requests.length).toBe(1); // the run waits in its request: nothing commits
    const before = await transcript(root);
    const changes: ChangeSet[] = [];
    const stop = h.subscribe((change) => changes.push(change));
    await expect(root.submit({ type: "input", content: "two", whenBusy: "reject" })).rejects.toBeInstanceOf(
      ConversationBusy,
    );
    stop();
    expect(changes).toEqual([]);
    expect(await transcript(root)).toEqual(before);
    expect(inboxOf(h).items).toEqual([]);
    // No submission record was written: the next one takes the very next id.
    const note = await root.submit({ type: "write", entry: { kind: "note", data: { n: 1 } } });
    expect(note.id).toBe(first.id + 1);
    hold.resolve();
    expect((await first.wait()).status).toBe("done");
  });

  test.each([
    [
      "one-at-a-time",
      ["pi.user", "pi.assistant", "pi.tool-result", "pi.user", "pi.assistant", "pi.user", "pi.assistant"],
    ],
    ["all", ["pi.user", "pi.assistant", "pi.tool-result", "pi.user", "pi.user", "pi.assistant"]],
  ] as const)("steeringMode %s: how many steers a tool round places", async (mode, expected) => {
    const { tool, started, release } = gatedTool();
    const { root } = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "call-1" })), {
      tools: [tool],
      settings: { steeringMode: mode },
    });
    const input = await root.submit({ type: "input", content: "work" });
    await started.promise;
    const a = await root.submit({ type: "input", content: "steer A", whenBusy: "steer" });
    const b = await root.submit({ type: "input", content: "steer B", whenBusy: "steer" });
    release.resolve();
    await input.wait();
    await a.wait();
    const settledB = await b.wait();
    const entries = await transcript(root);
    expect(kinds(entries)).toEqual(expected);
    expect(entries.filter((e) => e.kind === "pi.user").map((e) => textOf(messageOf(e)))).toEqual([
      "work",
      "steer A",
      "steer B",
    ]);
    expect(settledB).toMatchObject({ status: "done", answer: last(entries).id });
    expect(alternationProblems(entries)).toEqual([]);
  });

  test.each([
    ["one-at-a-time", ["pi.user", "pi.assistant", "pi.user", "pi.assistant", "pi.user", "pi.assistant"]],
    ["all", ["pi.user", "pi.assistant", "pi.user", "pi.user", "pi.assistant"]],
  ] as const)("followUpMode %s: how many follow-ups an answer places", async (mode, expected) => {
    const hold = deferred();
    const { root } = await open(
      async (req, n) => {
        if (n === 1) await hold.promise;
        return echo(req, n);
      },
      { settings: { followUpMode: mode } },
    );
    const input = await root.submit({ type: "input", content: "one" });
    const a = await root.submit({ type: "input", content: "A" });
    const b = await root.submit({ type: "input", content: "B" });
    hold.resolve();
    await input.wait();
    await a.wait();
    const settledB = await b.wait();
    const entries = await transcript(root);
    expect(kinds(entries)).toEqual(expected);
    expect(settledB).toMatchObject({ status: "done", answer: last(entries).id });
    expect(alternationProblems(entries)).toEqual([]);
  });

  test("a display-only write is appended at once, even mid-run", async () => {
    const hold = deferred();
    const { root, faux } = await open(async (req, n) => {
      await hold.promise;
      return echo(req, n);
    });
    const input = await root.submit({ type: "input", content: "one" });
    await expect.poll(() => faux.requests.length).toBe(1); // the request is in flight
    const note = await root.submit({ type: "write", entry: { kind: "note", data: { text: "fyi" } } });
    const settled = await note.wait();
    expect(root.busy).toBe(true);
    const during = await transcript(root);
    expect(kinds(during)).toEqual(["pi.user", "note"]);
    expect(settled).toEqual({ status: "done", entry: during[1]!.id });
    expect(during[1]!.data).toEqual({ text: "fyi" });
    hold.resolve();
    await input.wait();
    expect(kinds(await transcript(root))).toEqual(["pi.user", "note", "pi.assistant"]);
  });

  test("a model-visible write while busy is queued and placed at the next boundary", async () => {
    const { tool, started, release } = gatedTool();
    const { h, root, faux } = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "call-1" })), {
      tools: [tool],
    });
    const input = await root.submit({ type: "input", content: "work" });
    await started.promise;
    const hint = { role: "user", content: "a hint", timestamp: 0 };
    const write = await root.submit({ type: "write", entry: { kind: "app.hint", model: [hint] } });
    expect((await write.record()).status).toBe("queued");
    expect(inboxOf(h).items.map((i) => i.mode)).toEqual(["write"]);
    expect(kinds(await transcript(root))).toEqual(["pi.user", "pi.assistant"]);
    release.resolve();
    await input.wait();
    const entries = await transcript(root);
    expect(kinds(entries)).toEqual(["pi.user", "pi.assistant", "pi.tool-result", "app.hint", "pi.assistant"]);
    expect(await write.wait()).toEqual({ status: "done", entry: entries[3]!.id });
    expect(faux.requests[1]!.messages.map((m) => [m.role, textOf(m)])).toContainEqual(["user", "a hint"]);
    expect(alternationProblems(entries)).toEqual([]);
  });

  test("requestId: the same requestId returns the same submission, also after close and reopen", async () => {
    const { h, root, store, faux } = await open(echo);
    const a = await root.submit({ type: "input", content: "once", requestId: "req-1" });
    const b = await root.submit({ type: "input", content: "once", requestId: "req-1" });
    expect(b.id).toBe(a.id);
    await a.wait();
    await h.close();
    const reopened = await AgentHarness.open(await memoryStore(store.image()), {
      models: faux.models,
      defaultModel: faux.ref,
    });
    cleanups.push(() => reopened.close().catch(() => undefined));
    const again = await (await reopened.root()).submit({
      type: "input",
      content: "once",
      requestId: "req-1",
    });
    expect(again.id).toBe(a.id);
    expect((await again.wait()).status).toBe("done");
    const entries = await transcript(await reopened.root());
    expect(kinds(entries)).toEqual(["pi.user", "pi.assistant"]);
    expect(faux.requests).toHaveLength(1);
  });

  test("a failed run leaves queued follow-ups in the inbox until the next submission places them", async () => {
    const hold = deferred();
    const { h, root } = await open(async (req, n) => {
      if (n === 1) {
        await hold.promise;
        return fauxError("400 invalid request");
      }
      return echo(req, n);
    });
    const first = await root.submit({ type: "input", content: "one" });
    const followUp = await root.submit({ type: "input", content: "two" });
    hold.resolve();
    expect(await first.wait()).toMatchObject({ status: "unanswered", reason: "model_error" });
    await root.waitForIdle();
    expect(root.busy).toBe(false);
    expect((await followUp.record()).status).toBe("queued");
    expect(inboxOf(h).items.map((i) => i.id)).toEqual([followUp.id]);
    const third = await root.submit({ type: "input", content: "three" });
    // The queued follow-up goes first; the new input waits behind it.
    expect((await followUp.record()).status).toBe("placed");
    expect((await third.record()).status).toBe("queued");
    expect(await followUp.wait()).toMatchObject({ status: "done" });
    expect(await third.wait()).toMatchObject({ status: "done" });
    const users = (await transcript(root))
      .filter((e) => e.kind === "pi.user")
      .map((e) => textOf(messageOf(e)));
    expect(users).toEqual(["one", "two", "three"]);
    expect(alternationProblems(await transcript(root))).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------
// Retries

describe("retry", () => {
  test("a retryable provider error is retried after a durable backoff, then answered", async () => {
    const { root, faux } = await open(
      (req, n) => (n <= 2 ? fauxError("503 Service Unavailable") : echo(req, n)),
      {
        settings: { retry: { baseDelayMs: 5, maxDelayMs: 20 } },
      },
    );
    const sub = await root.submit({ type: "input", content: "hi" });
    const settled = await sub.wait();
    const entries = await transcript(root);
    const answers = entries
      .filter((e) => e.kind === "pi.assistant")
      .map((e) => messageOf(e) as AssistantMessage);
    expect(answers.map((m) => [m.stopReason, m.errorMessage])).toEqual([
      ["error", "503 Service Unavailable"],
      ["error", "503 Service Unavailable"],
      ["stop", undefined],
    ]);
    expect(settled).toEqual({ status: "done", answer: last(entries).id, entry: entries[0]!.id });
    expect(faux.requests).toHaveLength(3);
    expect(alternationProblems(entries)).toEqual([]);
  });

  test("giving up after maxRetries: unanswered model_error, the run is gone, a new input is answered", async () => {
    const { h, root, faux } = await open(() => fauxError("503 Service Unavailable"), {
      settings: { retry: { baseDelayMs: 5, maxDelayMs: 20, maxRetries: 2 } },
    });
    const sub = await root.submit({ type: "input", content: "hi" });
    const settled = await sub.wait();
    expect(settled).toMatchObject({ status: "unanswered", reason: "model_error" });
    expect(faux.requests).toHaveLength(3);
    const errors = (await transcript(root)).filter((e) => e.kind === "pi.assistant");
    expect(errors.map((e) => (messageOf(e) as AssistantMessage).stopReason)).toEqual([
      "error",
      "error",
      "error",
    ]);
    await root.waitForIdle();
    expect(liveOf(h).run).toBeUndefined();
    expect(liveOf(h).generation).toBeUndefined();
    expect(root.busy).toBe(false);
    faux.respond = echo;
    const next = await root.submit({ type: "input", content: "again" });
    const answered = await next.wait();
    expect(answered.status).toBe("done");
    const entries = await transcript(root);
    expect(textOf(messageOf(last(entries)))).toBe("echo: again");
    expect(alternationProblems(entries)).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------
// Tools

describe("tools", () => {
  test("transactions per tool round: 2 with no hooks; a beforeTool or afterTools hook adds its own commit", async () => {
    /** Transactions of a run with `rounds` one-call tool rounds, minus a run without tools. */
    async function perRound(hooks: AgentHarnessOptions["hooks"]): Promise<number> {
      const cost = async (rounds: number) => {
        const effects = new KeyedEffects();
        const { root, store } = await open(
          (req) => {
            const done = req.messages.filter((m) => m.role === "toolResult").length;
            return done >= rounds
              ? fauxAssistantMessage("done")
              : fauxAssistantMessage([fauxToolCall("apply", { item: `i${done}` }, { id: `call-${done}` })], {
                  stopReason: "toolUse",
                });
          },
          { tools: [keyedEffectTool(effects, { name: "apply" })], ...(hooks ? { hooks } : {}) },
        );
        const before = store.stats.transactions;
        expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
        await root.waitForIdle();
        expect(effects.applied).toHaveLength(rounds);
        return store.stats.transactions - before;
      };
      return ((await cost(5)) - (await cost(0))) / 5;
    }
    expect(await perRound(undefined)).toBe(2);
    expect(await perRound({ beforeTool: [() => undefined] })).toBe(3);
    expect(await perRound({ afterTools: [() => undefined] })).toBe(3);
  });

  test("beforeTool can block a call: an error result with code blocked, the tool never runs", async () => {
    const effects = new KeyedEffects();
    const seen: Array<{ item: string }> = [];
    const { root } = await open(callsThenAnswer(fauxToolCall("apply", { item: "x" }, { id: "call-1" })), {
      tools: [keyedEffectTool(effects, { name: "apply", seen })],
      hooks: { beforeTool: [(call) => (call.name === "apply" ? { block: "not allowed here" } : undefined)] },
    });
    const sub = await root.submit({ type: "input", content: "go" });
    expect((await sub.wait()).status).toBe("done");
    const result = (await transcript(root)).find((e) => e.kind === "pi.tool-result")!;
    expect(messageOf(result)).toMatchObject({ role: "toolResult", toolCallId: "call-1", isError: true });
    expect(diagnosticsOf(result)).toEqual([
      { severity: "error", code: "blocked", message: "not allowed here" },
    ]);
    expect(seen).toEqual([]);
    expect(effects.calls).toBe(0);
  });

  test("beforeTool can rewrite the arguments: the tool sees the rewritten ones", async () => {
    const effects = new KeyedEffects();
    const seen: Array<{ item: string }> = [];
    const { root } = await open(
      callsThenAnswer(fauxToolCall("apply", { item: "original" }, { id: "call-1" })),
      {
        tools: [keyedEffectTool(effects, { name: "apply", seen })],
        hooks: { beforeTool: [() => ({ arguments: { item: "rewritten" } })] },
      },
    );
    const sub = await root.submit({ type: "input", content: "go" });
    expect((await sub.wait()).status).toBe("done");
    expect(seen).toEqual([{ item: "rewritten" }]);
    const result = (await transcript(root)).find((e) => e.kind === "pi.tool-result")!;
    expect(textOf(messageOf(result))).toBe("apply applied rewritten");
    expect(effects.applied.map((a) => a.ref)).toEqual(["rewritten"]);
  });

  test("invalid arguments from the model: an error result the model sees in its next request", async () => {
    const effects = new KeyedEffects();
    const seen: Array<{ item: string }> = [];
    const { root, faux } = await open(
      callsThenAnswer(fauxToolCall("apply", { wrong: 1 }, { id: "call-1" })),
      {
        tools: [keyedEffectTool(effects, { name: "apply", seen })],
      },
    );
    const sub = await root.submit({ type: "input", content: "go" });
    expect((await sub.wait()).status).toBe("done");
    expect(seen).toEqual([]);
    const result = (await transcript(root)).find((e) => e.kind === "pi.tool-result")!;
    expect(diagnosticsOf(result).map((d) => d.code)).toEqual(["invalid_arguments"]);
    const seenByModel = faux.requests[1]!.messages.find(
      (m): m is ToolResultMessage => m.role === "toolResult",
    );
    expect(seenByModel).toMatchObject({ toolCallId: "call-1", isError: true });
    expect(textOf(seenByModel!)).toContain("Validation failed");
  });

  test("an unknown tool gets a tool_unavailable result and the run continues", async () => {
    const { root, faux } = await open(callsThenAnswer(fauxToolCall("nope", {}, { id: "call-1" })));
    const sub = await root.submit({ type: "input", content: "go" });
    const settled = await sub.wait();
    const entries = await transcript(root);
    expect(kinds(entries)).toEqual(["pi.user", "pi.assistant", "pi.tool-result", "pi.assistant"]);
    expect(diagnosticsOf(entries[2]!).map((d) => d.code)).toEqual(["tool_unavailable"]);
    expect(messageOf(entries[2]!)).toMatchObject({ toolCallId: "call-1", toolName: "nope", isError: true });
    expect(settled).toMatchObject({ status: "done", answer: entries[3]!.id });
    expect(faux.requests).toHaveLength(2);
  });

  test("output caps: a result over 2,000 lines is bounded and carries a truncated diagnostic", async () => {
    const lines = Array.from({ length: 2500 }, (_, i) => `line ${i + 1}`).join("\n");
    const big = defineTool({
      name: "big",
      description: "A lot of output",
      parameters: Type.Object({}),
      execute: async () => textResult(lines),
    });
    const { root } = await open(callsThenAnswer(fauxToolCall("big", {}, { id: "call-1" })), { tools: [big] });
    await (await root.submit({ type: "input", content: "go" })).wait();
    const result = (await transcript(root)).find((e) => e.kind === "pi.tool-result")!;
    const message = messageOf(result) as ToolResultMessage;
    expect(message.isError).toBe(false);
    const shown = (message.content[0] as { text: string }).text;
    expect(shown.split("\n")).toHaveLength(2000);
    expect(shown.endsWith("line 2000")).toBe(true);
    expect(diagnosticsOf(result)).toEqual([expect.objectContaining({ severity: "warn", code: "truncated" })]);
    expect((last(message.content) as { text: string }).text).toMatch(/^<harness>\n\[warn\] .*500 lines/);
  });

  const finish = defineTool({
    name: "finish",
    description: "End the run",
    parameters: Type.Object({}),
    execute: async () => ({ content: [{ type: "text", text: "finished" }], control: { terminate: true } }),
  });

  test("terminate on every call of a round ends the run with the tool-calling answer as the answer", async () => {
    const { root, faux } = await open(
      callsThenAnswer(
        fauxToolCall("finish", {}, { id: "call-1" }),
        fauxToolCall("finish", {}, { id: "call-2" }),
      ),
      { tools: [finish] },
    );
    const sub = await root.submit({ type: "input", content: "go" });
    const settled = await sub.wait();
    const entries = await transcript(root);
    expect(kinds(entries)).toEqual(["pi.user", "pi.assistant", "pi.tool-result", "pi.tool-result"]);
    expect(settled).toMatchObject({ status: "done", answer: entries[1]!.id });
    expect(faux.requests).toHaveLength(1);
    await root.waitForIdle();
    expect(root.busy).toBe(false);
  });

  test("terminate on only some calls of a round does not end the run", async () => {
    const effects = new KeyedEffects();
    const { root, faux } = await open(
      callsThenAnswer(
        fauxToolCall("finish", {}, { id: "call-1" }),
        fauxToolCall("apply", { item: "x" }, { id: "call-2" }),
      ),
      { tools: [finish, keyedEffectTool(effects, { name: "apply" })] },
    );
    const settled = await (await root.submit({ type: "input", content: "go" })).wait();
    const entries = await transcript(root);
    expect(last(entries).kind).toBe("pi.assistant");
    expect(settled).toMatchObject({ status: "done", answer: last(entries).id });
    expect(faux.requests).toHaveLength(2);
  });

  test("abort mid-tool: the tool's result is an aborted error, the input unanswered aborted, the conversation idle", async () => {
    const { tool, started } = gatedTool();
    const { h, root } = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "call-1" })), {
      tools: [tool],
    });
    const sub = await root.submit({ type: "input", content: "go" });
    await started.promise;
    await root.abort();
    expect(await sub.wait()).toEqual({ status: "unanswered", reason: "aborted" });
    const entries = await transcript(root);
    expect(kinds(entries)).toEqual(["pi.user", "pi.assistant", "pi.tool-result"]);
    expect(messageOf(entries[2]!)).toMatchObject({ toolCallId: "call-1", isError: true });
    expect(diagnosticsOf(entries[2]!).map((d) => d.code)).toEqual(["aborted"]);
    expect(root.busy).toBe(false);
    expect(liveOf(h)).toEqual({});
    expect((await h.tasks()).filter((t) => t.state.status !== "terminal")).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------
// Context derivation

describe("deriveContext", () => {
  let nextId = 0;
  const entry = (kind: string, message: object): EntryRecord => ({
    id: ++nextId,
    conversationId: 1,
    kind,
    model: [message] as never,
  });
  const user = (text: string) => entry("pi.user", { role: "user", content: text, timestamp: 1 });
  const assistant = (
    content: string | AssistantMessage["content"],
    stopReason: AssistantMessage["stopReason"] = "stop",
  ) => entry("pi.assistant", { ...fauxAssistantMessage(content, { stopReason, timestamp: 1 }) });
  const result = (callId: string, text: string) =>
    entry("pi.tool-result", {
      role: "toolResult",
      toolCallId: callId,
      toolName: "t",
      content: [{ type: "text", text }],
      isError: false,
      timestamp: 1,
    });
  const call = (id: string) => fauxToolCall("t", {}, { id });

  test("a tool call without a result gets a synthetic error result", () => {
    const { messages } = deriveContext([
      user("q"),
      assistant([call("c1"), call("c2")], "toolUse"),
      result("c1", "r1"),
      user("next"),
    ]);
    expect(messages.map((m) => [m.role, m.role === "toolResult" ? m.toolCallId : textOf(m)])).toEqual([
      ["user", "q"],
      ["assistant", "call:tcall:t"],
      ["toolResult", "c1"],
      ["toolResult", "c2"],
      ["user", "next"],
    ]);
    expect(messages[3]).toMatchObject({ role: "toolResult", toolCallId: "c2", toolName: "t", isError: true });
    expect(messages[2]).toMatchObject({ isError: false });
  });

  test("edits: the newest edit per target omits or replaces its messages; the raw entries stay", () => {
    const first = user("first");
    const second = user("second");
    const answer = assistant("answer");
    const edit = (edits: NonNullable<EntryRecord["edits"]>): EntryRecord => {
      const { model: _model, ...base } = entry("app.edit", {});
      return { ...base, edits };
    };
    const texts = (entries: EntryRecord[]) => deriveContext(entries).messages.map(textOf);
    expect(texts([first, second, answer, edit([{ target: first.id, action: "omit" }])])).toEqual([
      "second",
      "answer",
    ]);
    const replacement = [{ role: "user", content: "second, shortened", timestamp: 1 }];
    expect(
      texts([
        first,
        second,
        answer,
        edit([{ target: second.id, action: "omit" }]),
        edit([{ target: second.id, action: "replace", messages: replacement as never }]),
      ]),
    ).toEqual(["first", "second, shortened", "answer"]);
  });

  test("a tool result whose call is nowhere in the context is dropped", () => {
    const { messages } = deriveContext([user("q"), result("ghost", "orphaned"), assistant("a")]);
    expect(messages.map((m) => m.role)).toEqual(["user", "assistant"]);
  });

  test("a tool result that appears after a later user message is moved right after its call", () => {
    const { messages } = deriveContext([
      user("q"),
      assistant([call("c1")], "toolUse"),
      user("steer"),
      result("c1", "r1"),
      assistant("answer"),
    ]);
    expect(
      messages.map((m) => (m.role === "toolResult" ? `result:${m.toolCallId}` : `${m.role}:${textOf(m)}`)),
    ).toEqual(["user:q", "assistant:call:t", "result:c1", "user:steer", "assistant:answer"]);
  });

  test("aborted and error answers are left out", () => {
    const { messages } = deriveContext([
      user("q"),
      assistant("half an ans", "aborted"),
      entry(
        "pi.assistant",
        fauxAssistantMessage([], { stopReason: "error", errorMessage: "503", timestamp: 1 }),
      ),
      assistant("the answer"),
    ]);
    expect(messages.map((m) => `${m.role}:${textOf(m)}`)).toEqual(["user:q", "assistant:the answer"]);
  });
});

// ---------------------------------------------------------------------------------------------
// Usage

test("pi.usage counts the usage of every assistant entry, failed attempts included", async () => {
  const { h, root } = await open(
    (req, n) => (n === 1 ? fauxError("503 Service Unavailable") : echo(req, n)),
    {
      settings: { retry: { baseDelayMs: 5, maxDelayMs: 20 } },
    },
  );
  await (await root.submit({ type: "input", content: "count me" })).wait();
  const answers = (await transcript(root))
    .filter((e) => e.kind === "pi.assistant")
    .map((e) => messageOf(e) as AssistantMessage);
  expect(answers.map((a) => a.stopReason)).toEqual(["error", "stop"]);
  expect(answers[0]!.usage.totalTokens).toBeGreaterThan(0);
  const sum = (list: Usage[]): Usage => list.reduce((a, b) => addUsage(a, b));
  const usage = h.session.records.getDoc(1, DOC.usage) as unknown as UsageState;
  expect(Object.keys(usage.models)).toEqual(["faux/faux-1"]);
  expect(usage.models["faux/faux-1"]).toEqual(sum(answers.map((a) => a.usage)));
  expect((await h.usage()).models["faux/faux-1"]).toEqual(sum(answers.map((a) => a.usage)));
});

// ---------------------------------------------------------------------------------------------
// Observation (the chapter's exercise 6)

test("a stalled watch gets at most 101 frames for 500 commits, a replace frame, and ends on the committed view", async () => {
  const { root } = await open(echo);
  const w = await root.watch();
  const frames: Frame<ConversationView>[] = [];
  const stalled = deferred();
  w.start(async (frame) => {
    frames.push(frame);
    if (frames.length === 1) await stalled.promise;
  });
  for (let i = 0; i < 500; i++) await root.submit({ type: "write", entry: { kind: "note", data: { i } } });
  expect(frames).toHaveLength(1); // the listener is still stalled on the first frame
  stalled.resolve();
  await expect.poll(() => last(frames).value.entries.length).toBe(500);
  // The frame of the last commit was delivered, and nothing is queued behind it.
  expect(w.pending).toBe(0);
  expect(frames.length).toBeLessThanOrEqual(101);
  expect(frames.some((f) => f.ops[0]?.op === "replace")).toBe(true);
  const view = await root.viewState();
  expect(view.entries).toHaveLength(500);
  expect(last(frames).value).toEqual(view);
  await w.stop();
});
