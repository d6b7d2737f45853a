/**
 * Agent rules of the specification that held by construction but that no test asserted (issue 29
 * item 9), each asserted here in full: `output()` throws after the call ends and never spills to a
 * file (spec §7.3); every tool task's terminal outcome carries the `{entryId}` of its result entry
 * (§8.4); `pi.tool` is version 1, starts at `call` and reads its call from the assistant entry
 * (§8.4); built-in entries carry no data but a tool result's diagnostics, always present (§8.1);
 * every terminal path of a run clears run, generation and tools in the commit settling its input (§8.2);
 * a queued summary's timestamp is the compaction's finish time and the token estimate goes
 * by entry order, not timestamps (§12, §8.3).
 */
import { fauxAssistantMessage, fauxToolCall, type Message } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { describe, expect, test } from "vitest";
import { contextTokens } from "../../../worker/agent/compaction/policy.ts";
import { estimateMessageTokens } from "../../../worker/agent/compaction/range.ts";
import { SUMMARY_SYSTEM_PROMPT } from "../../../worker/agent/compaction/task.ts";
import { activeRange } from "../../../worker/agent/conversation/context.ts";
import { type ToolApi, textResult } from "../../../worker/agent/tools/contract.ts";
import {
  defineTool,
  type EntryRecord,
  MemoryFs,
  type TaskRecord,
  workspaceEnv,
} from "../../../worker/index.ts";
import { deferred, type FauxRequest, type FauxResponder, fauxError, until } from "../../../worker/testing.ts";
import {
  callsThenAnswer,
  diagnosticsOf,
  gatedTool,
  messageOf,
  open,
  textOf,
  toolResults,
  transcript,
} from "./fixtures.ts";

const toolTasks = async (h: { tasks(q: { kind: string }): Promise<TaskRecord[]> }) =>
  h.tasks({ kind: "pi.tool" });
const callIdOf = (t: TaskRecord) => (t.input as { callId: string }).callId;
const outcomeOf = (t: TaskRecord) =>
  t.state.status === "terminal"
    ? (t.state.outcome as { status: string; result?: { entryId?: number } })
    : undefined;

describe("output() (spec §7.3)", () => {
  test("throws after the call ends, and never spills to a file: output past every bound writes nothing to the environment", async () => {
    const fs = new MemoryFs();
    let kept: ToolApi | undefined;
    const loud = defineTool({
      name: "loud",
      description: "Print a lot",
      parameters: Type.Object({}),
      async execute(_args, api) {
        kept = api;
        for (let i = 0; i < 6000; i++) api.output(`line ${i} ${"y".repeat(20)}\n`);
        return { content: [], isError: false };
      },
    });
    const { root } = await open(callsThenAnswer(fauxToolCall("loud", {}, { id: "l1" })), {
      tools: [loud],
      fs,
      env: workspaceEnv(fs),
    });
    expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
    expect(() => kept!.output("late")).toThrow(/after the call ended/);
    // Bounded, with a truncation diagnostic; no file anywhere and no path in the result.
    const [result] = await toolResults(root);
    expect(diagnosticsOf(result!).map((d) => d.code)).toContain("truncated");
    expect(fs.snapshot()).toEqual({});
    expect(JSON.stringify(messageOf(result!))).not.toMatch(/\.(log|txt|out)\b/);
  });

  test("throws after an aborted call ends too, and after a call whose execute threw (break 30C)", async () => {
    const kept: ToolApi[] = [];
    const started = deferred();
    const stuck = defineTool({
      name: "stuck",
      description: "Wait for the abort",
      parameters: Type.Object({}),
      async execute(_args, api) {
        kept.push(api);
        started.resolve();
        await new Promise((_, reject) =>
          api.signal.addEventListener("abort", () => reject(api.signal.reason), { once: true }),
        );
        return textResult("never");
      },
    });
    const broken = defineTool({
      name: "broken",
      description: "Throw",
      parameters: Type.Object({}),
      async execute(_args, api) {
        kept.push(api);
        api.output("before the throw\n");
        throw new Error("broken tool");
      },
    });
    const { root } = await open(callsThenAnswer(fauxToolCall("stuck", {}, { id: "s1" })), { tools: [stuck] });
    const sub = await root.submit({ type: "input", content: "go" });
    await started.promise;
    await root.abort();
    expect(await sub.wait()).toMatchObject({ status: "unanswered", reason: "aborted" });
    expect(() => kept[0]!.output("late")).toThrow(/after the call ended/);
    const second = await open(callsThenAnswer(fauxToolCall("broken", {}, { id: "b1" })), { tools: [broken] });
    expect((await (await second.root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
    expect(() => kept[1]!.output("late")).toThrow(/after the call ended/);
  });

  test("throws after a call the engine's close ended too: a wait refused during the close's grace, rethrown by the tool (draw 41b)", async () => {
    // Draw 41b, 3: the named tests ended calls normally, by an abort, and by a throw of the tool's
    // own; a call ended by the engine closing under it (HarnessClosed inside the grace, before the
    // signal fires) leaves through its own branch, and an api that kept taking output there passed.
    const kept: ToolApi[] = [];
    const started = deferred();
    const gate = deferred();
    const closing = defineTool({
      name: "closing",
      description: "Wait once the engine closes",
      parameters: Type.Object({}),
      async execute(_args, api) {
        kept.push(api);
        api.output("before the close\n");
        started.resolve();
        await gate.promise;
        // Sealed at once, so this rejects with HarnessClosed, before the grace ends and the signal fires.
        await (await api.conversation(api.conversationId))!.waitForIdle();
        return textResult("never");
      },
    });
    const { h, root } = await open(callsThenAnswer(fauxToolCall("closing", {}, { id: "c1" })), {
      tools: [closing],
    });
    await root.submit({ type: "input", content: "go" });
    await started.promise;
    const closed = h.close({ graceMs: 2_000 });
    gate.resolve();
    await closed;
    expect(() => kept[0]!.output("late")).toThrow(/after the call ended/);
  });
});

describe("tool tasks end with { entryId } (spec §8.4)", () => {
  test("completed, an isError result, a throw, invalid arguments, a blocked call and an abort: each terminal outcome carries the entryId of its call's result entry", async () => {
    const ok = defineTool({
      name: "ok",
      description: "ok",
      parameters: Type.Object({}),
      execute: async () => textResult("fine"),
    });
    const soft = defineTool({
      name: "soft",
      description: "soft error",
      parameters: Type.Object({}),
      execute: async () => ({ content: [{ type: "text", text: "not quite" }], isError: true }),
    });
    const boom = defineTool({
      name: "boom",
      description: "throws",
      parameters: Type.Object({}),
      execute: async () => {
        throw new Error("boom");
      },
    });
    const strict = defineTool({
      name: "strict",
      description: "needs x",
      parameters: Type.Object({ x: Type.String() }),
      execute: async () => textResult("never"),
    });
    const guarded = defineTool({
      name: "guarded",
      description: "blocked by a hook",
      parameters: Type.Object({}),
      execute: async () => textResult("never"),
    });
    const calls = [
      fauxToolCall("ok", {}, { id: "c-ok" }),
      fauxToolCall("soft", {}, { id: "c-soft" }),
      fauxToolCall("boom", {}, { id: "c-boom" }),
      fauxToolCall("strict", {}, { id: "c-strict" }),
      fauxToolCall("guarded", {}, { id: "c-guarded" }),
    ];
    const { h, root } = await open(callsThenAnswer(...calls), {
      tools: [ok, soft, boom, strict, guarded],
      hooks: {
        beforeTool: [(call) => (call.name === "guarded" ? { block: "no" } : undefined)],
      },
    });
    expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
    const results = await toolResults(root);
    const entryOf = new Map(
      results.map((e) => [(messageOf(e) as { toolCallId: string }).toolCallId, e.id] as const),
    );
    const ended = new Map((await toolTasks(h)).map((t) => [callIdOf(t), outcomeOf(t)] as const));
    expect(ended.get("c-ok")).toMatchObject({
      status: "completed",
      result: { entryId: entryOf.get("c-ok") },
    });
    expect(ended.get("c-soft")).toMatchObject({
      status: "completed",
      result: { entryId: entryOf.get("c-soft") },
    });
    expect(ended.get("c-boom")).toMatchObject({
      status: "failed",
      result: { entryId: entryOf.get("c-boom") },
    });
    for (const id of ["c-strict", "c-guarded"])
      expect(ended.get(id)?.result?.entryId, id).toBe(entryOf.get(id));
    // Aborted mid-call: the abort handler's result entry is in the outcome too, also when onAbort
    // hooks shape that result (a path of its own in the handler).
    const hold = gatedTool();
    const other = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "c-hold" })), {
      tools: [hold.tool],
      hooks: { onAbort: [() => undefined] },
    });
    await other.root.submit({ type: "input", content: "go" });
    await hold.started.promise;
    await other.root.abort();
    const [aborted] = await toolTasks(other.h);
    const [abortResult] = await toolResults(other.root);
    expect(outcomeOf(aborted!)).toMatchObject({ status: "aborted", result: { entryId: abortResult!.id } });
  });
});

describe("pi.tool (spec §8.4)", () => {
  test("is version 1, starts at call, and reads its call from the assistant entry: its input names only the entry and the call id", async () => {
    const held = deferred();
    const release = deferred();
    const seen: unknown[] = [];
    const echoTool = defineTool({
      name: "echo",
      description: "echo",
      parameters: Type.Object({ item: Type.String() }),
      execute: async (args) => {
        seen.push(args);
        return textResult(args.item);
      },
    });
    const { h, root } = await open(
      callsThenAnswer(fauxToolCall("echo", { item: "from the entry" }, { id: "c1" })),
      {
        tools: [echoTool],
        hooks: {
          beforeTool: [
            async () => {
              held.resolve();
              await release.promise;
              return undefined;
            },
          ],
        },
      },
    );
    const sub = await root.submit({ type: "input", content: "go" });
    await held.promise;
    const [task] = await toolTasks(h);
    expect(task).toMatchObject({
      kind: "pi.tool",
      version: 1,
      state: { status: "running", checkpoint: { phase: "call" } },
    });
    const assistant = (await transcript(root)).find((e) => e.kind === "pi.assistant")!;
    expect(task!.input).toEqual({ assistant: assistant.id, callId: "c1" });
    const call = (
      messageOf(assistant) as { content: Array<{ type: string; id?: string; arguments?: unknown }> }
    ).content.find((b) => b.type === "toolCall" && b.id === "c1");
    expect(call?.arguments).toEqual({ item: "from the entry" });
    release.resolve();
    expect((await sub.wait()).status).toBe("done");
    expect(seen).toEqual([{ item: "from the entry" }]);
  });

  test("with no beforeTool hook too (created at execute, NOT-APPLICABLE [8.2]), each call's task input names only its entry and call id (draw 34C)", async () => {
    const echoTool = defineTool({
      name: "echo",
      description: "echo",
      parameters: Type.Object({ item: Type.String() }),
      execute: async (args) => textResult(args.item),
    });
    const { h, root } = await open(
      callsThenAnswer(
        fauxToolCall("echo", { item: "one" }, { id: "c1" }),
        fauxToolCall("echo", { item: "two" }, { id: "c2" }),
      ),
      { tools: [echoTool] },
    );
    expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
    const assistant = (await transcript(root)).find((e) => e.kind === "pi.assistant")!;
    const tasks = (await toolTasks(h)).sort((a, b) => a.id - b.id);
    expect(tasks.map((t) => [t.version, t.input])).toEqual([
      [1, { assistant: assistant.id, callId: "c1" }],
      [1, { assistant: assistant.id, callId: "c2" }],
    ]);
  });

  test("reads its call from its own assistant entry: a later answer reusing an earlier call id runs with its own arguments (draw 34C)", async () => {
    const seen: unknown[] = [];
    const echoTool = defineTool({
      name: "echo",
      description: "echo",
      parameters: Type.Object({ item: Type.String() }),
      execute: async (args) => {
        seen.push(args);
        return textResult(args.item);
      },
    });
    // Two answers calling the same tool under the same id (providers may number calls per answer).
    const { h, root } = await open(
      (req) => {
        const answers = req.messages.filter((m) => m.role === "assistant").length;
        if (answers >= 2) return fauxAssistantMessage("done");
        const item = answers === 0 ? "first" : "second";
        return fauxAssistantMessage([fauxToolCall("echo", { item }, { id: "c1" })], {
          stopReason: "toolUse",
        });
      },
      // A beforeTool hook, so each task starts at call and reads its call (with none, the answer's
      // commit records the intent from the answer it has in hand: NOT-APPLICABLE [8.2]).
      { tools: [echoTool], hooks: { beforeTool: [async () => undefined] } },
    );
    expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
    expect(seen).toEqual([{ item: "first" }, { item: "second" }]);
    const assistants = (await transcript(root)).filter((e) => e.kind === "pi.assistant");
    const tasks = (await toolTasks(h)).sort((a, b) => a.id - b.id);
    expect(tasks.map((t) => t.input)).toEqual(
      assistants.slice(0, 2).map((a) => ({ assistant: a.id, callId: "c1" })),
    );
  });
});

describe("built-in entries (spec §8.1)", () => {
  test("carry no data, except a tool result's diagnostics: always there, an empty list when the call had none", async () => {
    const remark = { severity: "info" as const, message: "one remark" };
    const tool = defineTool({
      name: "note",
      description: "note",
      parameters: Type.Object({ remark: Type.Boolean() }),
      execute: async (args) => ({
        ...textResult("noted"),
        ...(args.remark ? { diagnostics: [remark] } : {}),
      }),
    });
    const { root } = await open(
      callsThenAnswer(
        fauxToolCall("note", { remark: true }, { id: "c1" }),
        fauxToolCall("note", { remark: false }, { id: "c2" }),
      ),
      { tools: [tool] },
    );
    expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
    await (await root.reset("handoff")).wait();
    await (await root.reset()).wait();
    const entries = await root.entries();
    // Every kind a run and a reset write, each entry's data by kind.
    expect([...new Set(entries.map((e) => e.kind))].sort()).toEqual(
      ["pi.assistant", "pi.reset", "pi.system", "pi.tool-result", "pi.user"].sort(),
    );
    for (const e of entries.filter((x) => x.kind !== "pi.tool-result")) expect(e.data).toBeUndefined();
    const results = entries.filter((e) => e.kind === "pi.tool-result");
    const byCall = results.map((e) => [(messageOf(e) as { toolCallId: string }).toolCallId, e.data] as const);
    // Sorted by call: the two calls run in parallel and either may commit first.
    expect(byCall.sort(([a], [b]) => a.localeCompare(b))).toEqual([
      ["c1", { diagnostics: [remark] }],
      ["c2", { diagnostics: [] }],
    ]);
  });

  test("carry no data on a run's failing paths too: a failed attempt's error entry, and a tool call cut by an abort", async () => {
    // Break 28C: the test above writes a clean run only; an error or aborted answer given data of
    // its own passed it.
    const failed = await open((_req, n) =>
      n === 1 ? fauxError("400 bad request") : fauxAssistantMessage("ok"),
    );
    expect((await (await failed.root.submit({ type: "input", content: "x" })).wait()).status).toBe(
      "unanswered",
    );
    const errors = (await failed.root.entries()).filter((e) => e.kind === "pi.assistant");
    expect(errors.map((e) => (messageOf(e) as { stopReason: string }).stopReason)).toEqual(["error"]);
    for (const e of await failed.root.entries()) expect(e.data).toBeUndefined();

    const gate = gatedTool();
    const cut = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "c1" })), { tools: [gate.tool] });
    const input = await cut.root.submit({ type: "input", content: "go" });
    await gate.started.promise;
    await cut.root.abort();
    expect((await input.wait()).status).toBe("unanswered");
    const entries = await cut.root.entries();
    const results = entries.filter((e) => e.kind === "pi.tool-result");
    expect(results).toHaveLength(1);
    expect(Object.keys(results[0]!.data as object)).toEqual(["diagnostics"]);
    expect(Array.isArray((results[0]!.data as { diagnostics: unknown }).diagnostics)).toBe(true);
    for (const e of entries.filter((x) => x.kind !== "pi.tool-result")) expect(e.data).toBeUndefined();
  });

  test("carry no data when an onYield continuation writes the user entry, besides a submission", async () => {
    // Sweep 42c, 101: every pi.user the tests above read was a submission's; a continuation's own
    // pi.user given data of its own passed them.
    let yields = 0;
    const { root } = await open((_req, n) => fauxAssistantMessage(`answer ${n}`), {
      hooks: { onYield: [() => (++yields === 1 ? "continue please" : undefined)] },
    });
    expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
    const entries = await root.entries();
    const users = entries.filter((e) => e.kind === "pi.user");
    expect(users.map((e) => textOf(messageOf(e)))).toEqual(["go", "continue please"]);
    for (const e of entries) expect(e.data).toBeUndefined();
  });
});

describe("a run's end (spec §8.2)", () => {
  test("every terminal path removes run, generation and tools in the commit that settles the run's input: an answer, a provider error, an abort mid-tool", async () => {
    // For each commit settling a submission: the pi.live it wrote (or "not written").
    const settling = (h: {
      subscribe(f: (c: import("../../../worker/index.ts").ChangeSet) => void): unknown;
    }) => {
      const seen: unknown[] = [];
      h.subscribe((change) => {
        if (!change.submissions.some((s) => s.status === "done" || s.status === "unanswered")) return;
        const live = change.docs.find((d) => d.name === "pi.live" && d.conversationId === 1);
        seen.push(live ? live.value : "not written");
      });
      return seen;
    };
    const answered = await open((_req, n) =>
      n === 1 ? fauxError("400 bad request") : fauxAssistantMessage("ok"),
    );
    const a = settling(answered.h);
    expect((await (await answered.root.submit({ type: "input", content: "x" })).wait()).status).toBe(
      "unanswered",
    );
    expect((await (await answered.root.submit({ type: "input", content: "y" })).wait()).status).toBe("done");
    expect(a).toEqual([{}, {}]);

    const gate = gatedTool();
    const aborted = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "c1" })), {
      tools: [gate.tool],
    });
    const b = settling(aborted.h);
    const input = await aborted.root.submit({ type: "input", content: "go" });
    await gate.started.promise;
    await aborted.root.abort();
    expect((await input.wait()).status).toBe("unanswered");
    expect(b).toEqual([{}]);

    // The other paths (reading 23d: only three were read): a terminating round, whose tools phase
    // settles; a reset placed at post-tools, which leaves the inputs unanswered; a model the resolver
    // does not know.
    const finish = defineTool({
      name: "finish",
      description: "finish",
      parameters: Type.Object({}),
      execute: async () => ({ ...textResult("finished"), control: { terminate: true } }),
    });
    const terminated = await open(callsThenAnswer(fauxToolCall("finish", {}, { id: "t1" })), {
      tools: [finish],
    });
    const c = settling(terminated.h);
    expect((await (await terminated.root.submit({ type: "input", content: "go" })).wait()).status).toBe(
      "done",
    );
    expect(c).toEqual([{}]);

    const held = gatedTool();
    const reset = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "r1" })), {
      tools: [held.tool],
    });
    const d = settling(reset.h);
    const cut = await reset.root.submit({ type: "input", content: "go" });
    await held.started.promise;
    await reset.root.reset();
    held.release.resolve();
    expect(await cut.wait()).toMatchObject({ status: "unanswered", reason: "reset" });
    expect(d).toEqual([{}]);

    const unknown = await open(callsThenAnswer());
    await unknown.root.configure({ model: { provider: "nowhere", modelId: "none" } });
    const e = settling(unknown.h);
    expect(await (await unknown.root.submit({ type: "input", content: "go" })).wait()).toMatchObject({
      status: "unanswered",
      reason: "no_model",
    });
    expect(e).toEqual([{}]);
  });

  test("a generation aborted mid-tool with a follow-up queued hands the run over with none of its tools: the settling commit's pi.live holds only the new run (break 30C)", async () => {
    const hold = gatedTool();
    const { h, root } = await open(
      (req) =>
        textOf([...req.messages].reverse().find((m) => m.role === "user")!) === "go"
          ? fauxAssistantMessage([fauxToolCall("hold", {}, { id: "h1" })], { stopReason: "toolUse" })
          : fauxAssistantMessage("next answered"),
      { tools: [hold.tool] },
    );
    const written: unknown[] = [];
    h.subscribe((change) => {
      if (!change.submissions.some((s) => s.status === "done" || s.status === "unanswered")) return;
      const live = change.docs.find((d) => d.name === "pi.live" && d.conversationId === 1);
      written.push(live ? live.value : "not written");
    });
    const first = await root.submit({ type: "input", content: "go" });
    await hold.started.promise;
    const next = await root.submit({ type: "input", content: "next" });
    // The generation alone, not the conversation: the queued follow-up stays and starts the next run.
    const [generation] = await h.tasks({ kind: "pi.generation" });
    await h.abortTask(generation!.id);
    expect(await first.wait()).toMatchObject({ status: "unanswered", reason: "aborted" });
    expect((await next.wait()).status).toBe("done");
    // The aborting commit: the next run started there, and nothing of the ended one stays.
    const handed = written[0] as {
      run?: { taskId: number; inputs: number[] };
      tools?: unknown;
      generation?: { taskId: number };
    };
    expect(handed.tools).toBeUndefined();
    expect(handed.run!.inputs).toEqual([next.id]);
    expect(handed.run!.taskId).not.toBe(generation!.id);
    if (handed.generation) expect(handed.generation.taskId).toBe(handed.run!.taskId);
    expect(Object.keys(handed).filter((k) => k !== "run" && k !== "generation")).toEqual([]);
    expect(written.at(-1)).toEqual({});
  });
});

describe("a queued summary (spec §12, §8.3)", () => {
  const big = (label: string) => `${label} ${"x".repeat(400)}`;
  const isSummary = (r: FauxRequest) => r.systemPrompt === SUMMARY_SYSTEM_PROMPT;

  test("its timestamp is the compaction's finish time, not its placement; the token estimate goes by entry order", async () => {
    let clock = 1_000_000;
    const hold = gatedTool();
    const responder: FauxResponder = (req) => {
      if (isSummary(req)) {
        clock += 5000; // the summary request takes a while: the compaction finishes later than it began
        return fauxAssistantMessage("SUMMARY");
      }
      const lastUser = textOf([...req.messages].reverse().find((m) => m.role === "user")!);
      const answered = req.messages.at(-1)?.role === "toolResult";
      return lastUser.startsWith("hold") && !answered
        ? fauxAssistantMessage([fauxToolCall("hold", {}, { id: `call-${req.messages.length}` })], {
            stopReason: "toolUse",
          })
        : fauxAssistantMessage(big("answer"));
    };
    const { h, root } = await open(responder, {
      tools: [hold.tool],
      settings: { compaction: { keepRecentTokens: 150 } },
      now: () => clock,
    });
    for (let i = 1; i <= 3; i++) {
      clock += 1000;
      await (await root.submit({ type: "input", content: big(`q${i}`) })).wait();
    }
    clock += 1000;
    const run = await root.submit({ type: "input", content: "hold on" });
    await hold.started.promise;
    const began = (clock += 1000);
    const compaction = await h.waitForTask(await root.compact());
    const finished = began + 5000;
    expect(compaction.endedAt).toBe(finished);
    // Placed later, at the run's next boundary, when the clock reads much later.
    clock += 60_000;
    hold.release.resolve();
    expect((await run.wait()).status).toBe("done");
    const entries = await transcript(root);
    const summaryAt = entries.findIndex((e) => e.kind === "pi.compaction");
    const summary = entries[summaryAt]!;
    expect((messageOf(summary) as { timestamp: number }).timestamp).toBe(finished);
    // In entry order it follows the tool's result, stamped at placement time, later than its own.
    const before = entries[summaryAt - 1]!;
    expect((messageOf(before) as { timestamp: number }).timestamp).toBeGreaterThan(finished);
    // The estimate before a request goes by entry order: every answer in the range was appended
    // before the summary's marker, though stamped later than the summary, so none starts it (spec
    // §8.3: only an answer appended after the head marker does; reading 22b corrected this, it had
    // started at the newest answer before the marker); every message of the active range is estimated.
    const range = entries.slice(0, summaryAt + 1);
    const expected = activeRange(range)
      .filter((e) => e.kind !== "pi.system")
      .flatMap((e) => e.model as unknown as Message[])
      .reduce((n, m) => n + estimateMessageTokens(m), 0);
    expect(contextTokens(range)).toBe(expected);
  });

  test("a summary queued while the run's last request is in flight, placed at the run's final boundary, keeps the compaction's finish time", async () => {
    // Break 29I: the final boundary re-stamping a queued write with the clock passed the test above,
    // whose summary is placed at a post-tools boundary.
    let clock = 1_000_000;
    const answer = deferred();
    let waiting = false;
    const responder: FauxResponder = async (req) => {
      if (isSummary(req)) {
        clock += 5000;
        return fauxAssistantMessage("SUMMARY");
      }
      const lastUser = textOf([...req.messages].reverse().find((m) => m.role === "user")!);
      if (lastUser.startsWith("last")) {
        waiting = true;
        await answer.promise;
      }
      return fauxAssistantMessage(big("answer"));
    };
    const { h, root } = await open(responder, {
      settings: { compaction: { keepRecentTokens: 150 } },
      now: () => clock,
    });
    for (let i = 1; i <= 3; i++) {
      clock += 1000;
      await (await root.submit({ type: "input", content: big(`q${i}`) })).wait();
    }
    clock += 1000;
    const run = await root.submit({ type: "input", content: "last one" });
    await until(() => waiting, { what: "the run's request in flight" });
    const began = (clock += 1000);
    const compaction = await h.waitForTask(await root.compact());
    const finished = began + 5000;
    expect(compaction.endedAt).toBe(finished);
    expect((await transcript(root)).some((e) => e.kind === "pi.compaction")).toBe(false); // queued
    clock += 60_000;
    answer.resolve();
    expect((await run.wait()).status).toBe("done");
    const entries = await transcript(root);
    const summaryAt = entries.findIndex((e) => e.kind === "pi.compaction");
    expect(summaryAt).toBeGreaterThan(0);
    expect(entries[summaryAt - 1]!.kind).toBe("pi.assistant"); // placed after the run's answer
    expect((messageOf(entries[summaryAt]!) as { timestamp: number }).timestamp).toBe(finished);
  });

  test("the estimate counts a summary placed after an answer although its timestamp is earlier (entry order, not timestamps)", () => {
    const entry = (id: number, kind: string, message: Record<string, unknown>, head?: number): EntryRecord =>
      ({
        id,
        conversationId: 1,
        kind,
        model: [message],
        ...(head ? { head } : {}),
      }) as unknown as EntryRecord;
    const summaryMessage = {
      role: "user",
      content: [{ type: "text", text: big("summary") }],
      timestamp: 150,
    };
    const question = { role: "user", content: big("next"), timestamp: 300 };
    const entries = [
      entry(1, "pi.user", { role: "user", content: "a", timestamp: 100 }),
      entry(2, "pi.assistant", {
        role: "assistant",
        content: [{ type: "text", text: "b" }],
        usage: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 1000 },
        stopReason: "stop",
        timestamp: 200,
      }),
      entry(3, "pi.compaction", summaryMessage, 2),
      entry(4, "pi.user", question, undefined),
    ];
    // By entry order the answer (2) precedes the summary's marker (3), though stamped later: its usage
    // was reported on the context the summary replaced, so it does not start the estimate (spec §8.3;
    // reading 22b corrected this test, which had started there). Every message is estimated.
    const answer = (entries[1]!.model as unknown as Message[])[0]!;
    expect(contextTokens(entries)).toBe(
      estimateMessageTokens(summaryMessage as Message) +
        estimateMessageTokens(answer) +
        estimateMessageTokens(question as Message),
    );
    // An answer appended after the marker starts it, whatever its timestamp.
    const later = {
      ...entries[1]!,
      id: 5,
      model: [{ ...answer, timestamp: 50 }],
    } as unknown as EntryRecord;
    expect(contextTokens([...entries, later, entry(6, "pi.user", question)])).toBe(
      1000 + estimateMessageTokens(question as Message),
    );
  });
});
