/**
 * Tool rounds, against pi-ai's faux provider: transactions per round, tool hooks (block, rewrite,
 * replace a result, onAbort), invalid or unknown calls, terminate, parallel and sequential rounds,
 * and aborting mid-tool.
 */
import { fauxAssistantMessage, fauxToolCall, type ToolResultMessage } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { describe, expect, test } from "vitest";
import { textResult } from "../../../worker/agent/tools/contract.ts";
import {
  type AgentHarness,
  type AgentHarnessOptions,
  type ChangeSet,
  createRegistry,
  defineExtension,
  defineTool,
  type EntryRecord,
  type TaskId,
} from "../../../worker/index.ts";
import { deferred, type FauxRequest, until } from "../../../worker/testing.ts";
import { KeyedEffects, keyedEffectTool } from "../core/fixtures/fakes.ts";
import { single, untilAborted } from "../core/fixtures.ts";
import {
  callsThenAnswer,
  diagnosticsOf,
  gatedTool,
  itemTool,
  kinds,
  last,
  liveOf,
  messageOf,
  open,
  reopen,
  textOf,
  toolResults,
  transcript,
} from "./fixtures.ts";

/**
 * A tool_unavailable result as spec §2.2 gives it (reading 23b): an error result with an error
 * diagnostic of that code stating the tool is not available, which the next request shows the model.
 */
function expectUnavailable(result: EntryRecord, name: string, next: FauxRequest | undefined) {
  expect(messageOf(result)).toMatchObject({ toolName: name, isError: true });
  expect(diagnosticsOf(result)).toContainEqual(
    expect.objectContaining({
      severity: "error",
      code: "tool_unavailable",
      message: `tool ${name} is not available`,
    }),
  );
  const shown = next?.messages.find(
    (m) => m.role === "toolResult" && m.toolCallId === (messageOf(result) as ToolResultMessage).toolCallId,
  );
  expect(textOf(shown!)).toContain(`tool ${name} is not available`);
}

/** A tool that must run alone in its round (`executionMode: "sequential"`), answering "serial done". */
const serialTool = defineTool({
  name: "serial",
  description: "One at a time",
  parameters: Type.Object({}),
  executionMode: "sequential",
  execute: async () => textResult("serial done"),
});

describe("tools", () => {
  test("external effects run outside the transaction: a model request and a tool each await a commit of their own", async () => {
    let harness: AgentHarness | undefined;
    const note = (data: string) =>
      harness!.transaction((tx) => tx.appendEntry(2, { kind: "app.note", data }));
    const tool = defineTool({
      name: "note",
      description: "Commit a note, then answer",
      parameters: Type.Object({}),
      async execute() {
        await note("from the tool");
        return textResult("noted");
      },
    });
    const calls = callsThenAnswer(fauxToolCall("note", {}, { id: "call-1" }));
    const { h, root } = await open(
      async (req, n) => {
        await note(`from request ${n}`);
        return calls(req, n);
      },
      { tools: [tool] },
    );
    harness = h;
    await h.createConversation({ ownership: { kind: "ownerless" } });
    expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
    const notes = (await h.conversation(2)!.entries())
      .filter((e) => e.kind === "app.note")
      .map((e) => e.data);
    expect(notes).toEqual(["from request 1", "from the tool", "from request 2"]);
  });

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
          {
            tools: [keyedEffectTool(effects, { name: "apply" })],
            ...(hooks ? { hooks } : {}),
            // Streamed partials are paced by wall time: on a loaded machine a slow stream committed
            // one more partial in either run (read 1.8 per round once). Paced out of reach here.
            settings: { partialIntervalMs: 60_000 },
          },
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

  test.each(["does not resolve", "has invalid arguments", "is blocked"] as const)(
    "a call that %s commits its error result without intent: its task never reaches execute and its slot never runs (spec §8.4)",
    async (path) => {
      const effects = new KeyedEffects();
      const hold = deferred();
      const args = path === "has invalid arguments" ? { wrong: 1 } : { item: "x" };
      const calls = callsThenAnswer(fauxToolCall("apply", args, { id: "call-1" }));
      const { h, root, faux } = await open(
        async (req, n) => {
          if (n === 1 && path === "does not resolve") await hold.promise;
          return calls(req, n);
        },
        {
          tools: [keyedEffectTool(effects, { name: "apply", seen: [] })],
          ...(path === "is blocked" ? { hooks: { beforeTool: [() => ({ block: "no" })] } } : {}),
        },
      );
      // Every checkpoint phase of the tool task and every slot status, commit by commit.
      const phases: string[] = [];
      const slots: string[] = [];
      h.subscribe((change: ChangeSet) => {
        for (const t of change.tasks)
          if (t.kind === "pi.tool" && "checkpoint" in t.state)
            phases.push((t.state.checkpoint as { phase: string }).phase);
        const live = change.docs.find((d) => d.name === "pi.live")?.value as
          | { tools?: { status: string }[] }
          | undefined;
        for (const slot of live?.tools ?? []) slots.push(slot.status);
      });
      const sub = await root.submit({ type: "input", content: "go" });
      if (path === "does not resolve") {
        await until(() => faux.requests.length === 1, { what: "first request sent" });
        await root.configure({ tools: [] });
        hold.resolve();
      }
      expect((await sub.wait()).status).toBe("done");
      const [result] = await toolResults(root);
      const code = {
        "does not resolve": "tool_unavailable",
        "has invalid arguments": "invalid_arguments",
        "is blocked": "blocked",
      }[path];
      expect(diagnosticsOf(result!).map((d) => d.code)).toEqual([code]);
      expect(effects.calls).toBe(0);
      expect(phases.length).toBeGreaterThan(0);
      expect(phases).not.toContain("execute");
      expect(slots).toContain("done");
      expect(slots).not.toContain("running");
    },
  );

  test("several calls in one answer are each judged on their own: a valid call's intent does not carry a later call with invalid arguments, which commits its error result without intent (draw 36c)", async () => {
    // Draw 36c: the named test has one call per answer; a round whose first call's decision was
    // reused for the next (its validation skipped) passed every test.
    const effects = new KeyedEffects();
    const seen: Array<{ item: string }> = [];
    const { h, root } = await open(
      callsThenAnswer(
        fauxToolCall("apply", { item: "x" }, { id: "call-1" }),
        fauxToolCall("apply", { wrong: 1 }, { id: "call-2" }),
      ),
      { tools: [keyedEffectTool(effects, { name: "apply", seen })] },
    );
    const phases = new Map<string, string[]>();
    h.subscribe((change: ChangeSet) => {
      for (const t of change.tasks)
        if (t.kind === "pi.tool" && "checkpoint" in t.state) {
          const callId = (t.input as { callId: string }).callId;
          phases.set(callId, [
            ...(phases.get(callId) ?? []),
            (t.state.checkpoint as { phase: string }).phase,
          ]);
        }
    });
    const sub = await root.submit({ type: "input", content: "go" });
    expect((await sub.wait()).status).toBe("done");
    expect(seen).toEqual([{ item: "x" }]);
    const results = await toolResults(root);
    const second = results.find((r) => (messageOf(r) as ToolResultMessage).toolCallId === "call-2");
    expect(results).toHaveLength(2);
    expect(diagnosticsOf(second!).map((d) => d.code)).toEqual(["invalid_arguments"]);
    expect(phases.get("call-2") ?? []).not.toContain("execute");
  });

  test("beforeTool can rewrite the arguments: the tool sees the rewritten ones", async () => {
    const effects = new KeyedEffects();
    const seen: Array<{ item: string }> = [];
    const afterSeen: unknown[] = [];
    const { root } = await open(
      callsThenAnswer(fauxToolCall("apply", { item: "original" }, { id: "call-1" })),
      {
        tools: [keyedEffectTool(effects, { name: "apply", seen })],
        hooks: {
          beforeTool: [() => ({ arguments: { item: "rewritten" } })],
          // Break 28O: afterTool given the model's arguments, not the final ones, passed every named test.
          afterTool: [
            (call) => {
              afterSeen.push(call.arguments);
              return undefined;
            },
          ],
        },
      },
    );
    const sub = await root.submit({ type: "input", content: "go" });
    expect((await sub.wait()).status).toBe("done");
    expect(seen).toEqual([{ item: "rewritten" }]);
    // afterTool runs on the call as executed: with the rewritten arguments.
    expect(afterSeen).toEqual([{ item: "rewritten" }]);
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

  test("a tool the agent names but nobody registered is not offered, and the request goes out without it", async () => {
    const { tool } = itemTool({});
    const { root, faux, h } = await open(
      callsThenAnswer(fauxToolCall("apply", { item: "a" }, { id: "call-1" })),
      {
        tools: [tool],
      },
    );
    await root.configure({ tools: ["ghost", "apply"] });
    expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
    expect(faux.requests.map((r) => r.tools)).toEqual([["apply"], ["apply"]]);
    // The stored filter keeps the name, and it takes effect once a tool of that name is installed
    // (break 31B: a preparation that dropped unresolved names from the stored filter passed).
    expect(await root.agentState()).toEqual({ tools: ["ghost", "apply"] });
    h.extensions.install(
      defineExtension({
        name: "late",
        tools: [
          defineTool({
            name: "ghost",
            description: "Now installed",
            parameters: Type.Object({}),
            execute: async () => textResult("boo"),
          }),
        ],
      }),
    );
    expect((await (await root.submit({ type: "input", content: "again" })).wait()).status).toBe("done");
    expect(faux.requests.at(-1)!.tools).toEqual(["ghost", "apply"]);
  });

  test("a tool offered by a pinned request that no longer resolves when it is resent after a reopen is left out, and the request goes out without it", async () => {
    // Break 28M: the named test's ghost never reached the transcript; here the pinned request's
    // context offers a tool the reopened engine does not have.
    const { tool } = itemTool({});
    const hold = deferred();
    const { faux, store, root } = await open(
      async (_req, n) => {
        if (n === 1) await hold.promise;
        return fauxAssistantMessage("done");
      },
      { tools: [tool] },
    );
    await root.submit({ type: "input", content: "go" });
    await until(() => faux.requests.length === 1, { what: "first request sent" });
    expect(faux.requests[0]!.tools).toEqual(["apply"]);
    const h = await reopen(store, { models: faux.models, defaultModel: faux.ref, tools: [] });
    await h.waitForIdle();
    expect(faux.requests.map((r) => r.tools)).toEqual([["apply"], []]);
    const answer = (await h.entries(root.id)).at(-1)!;
    expect(answer.kind).toBe("pi.assistant");
    expect(textOf(messageOf(answer))).toBe("done");
    hold.resolve();
  });

  test("a called tool is resolved when its task runs: taken out of the agent's tools meanwhile, the call gets tool_unavailable", async () => {
    const hold = deferred();
    const { tool, seen } = itemTool({});
    const calls = callsThenAnswer(fauxToolCall("apply", { item: "a" }, { id: "call-1" }));
    const { root, faux } = await open(
      async (req, n) => {
        if (n === 1) await hold.promise;
        return calls(req, n);
      },
      { tools: [tool] },
    );
    const sub = await root.submit({ type: "input", content: "go" });
    await until(() => faux.requests.length === 1, { what: "first request sent" });
    expect(faux.requests[0]!.tools).toEqual(["apply"]);
    await root.configure({ tools: [] });
    hold.resolve();
    expect((await sub.wait()).status).toBe("done");
    expect(seen).toEqual([]);
    const [result] = await toolResults(root);
    expect(diagnosticsOf(result!).map((d) => d.code)).toContain("tool_unavailable");
    expectUnavailable(result!, "apply", faux.requests[1]);
  });

  test("a called tool is resolved when its task runs: deselected or uninstalled meanwhile, the call gets tool_unavailable", async () => {
    // Sample 22: the spec names three ways a called tool leaves the agent's tools (the filter, the
    // selection, the registry); the test above tries the filter only.
    for (const change of ["selection", "registry"] as const) {
      const hold = deferred();
      const { tool, seen } = itemTool({});
      const extensions = createRegistry();
      extensions.install(defineExtension({ name: "kit", tools: [tool] }));
      const calls = callsThenAnswer(fauxToolCall("apply", { item: "a" }, { id: "call-1" }));
      const { root, faux } = await open(
        async (req, n) => {
          if (n === 1) await hold.promise;
          return calls(req, n);
        },
        { extensions },
      );
      const sub = await root.submit({ type: "input", content: "go" });
      await until(() => faux.requests.length === 1, { what: "first request sent" });
      expect(faux.requests[0]!.tools).toEqual(["apply"]);
      if (change === "selection") await root.configure({ extensions: [] });
      else extensions.uninstall("kit");
      hold.resolve();
      expect((await sub.wait()).status, change).toBe("done");
      expect(seen, change).toEqual([]);
      const [result] = await toolResults(root);
      expect(
        diagnosticsOf(result!).map((d) => d.code),
        change,
      ).toEqual(["tool_unavailable"]);
    }
  });

  test("a called tool is resolved again when its task resumes after a reopen: a safe call interrupted after its tool was filtered out is not run again", async () => {
    // Draw 32b: every case above stays live; a resumed execute phase that found the tool among
    // every installed one, not the agent's, ran the call again though the agent no longer has it.
    const first = itemTool({ replay: "safe", holdFirst: true });
    const respond = callsThenAnswer(fauxToolCall("apply", { item: "x" }, { id: "call-1" }));
    const { root, store, faux } = await open(respond, { tools: [first.tool] });
    await root.submit({ type: "input", content: "go" });
    await first.started.promise;
    await root.configure({ tools: [] });

    const second = itemTool({ replay: "safe" });
    const h2 = await reopen(store, { models: faux.models, defaultModel: faux.ref, tools: [second.tool] });
    const root2 = await h2.root();
    await root2.waitForIdle();
    expect(second.seen).toEqual([]);
    const [result] = await toolResults(root2);
    expect(messageOf(result!)).toMatchObject({ toolName: "apply", isError: true });
    expect(diagnosticsOf(result!).map((d) => d.code)).toEqual(["interrupted"]);
    first.release.resolve();
  });

  test("a call cut off in its call phase (a beforeTool hook under way) and resumed after a reopen without its tool gets tool_unavailable, not interrupted: it never ran (draw 33c)", async () => {
    // Draw 33cA: every resolution above runs live or resumes an execute phase; a resumed call phase
    // settling a tool it cannot resolve as interrupted (like a resumed execute) passed them all.
    const hooked = deferred();
    const hold = deferred();
    const first = itemTool({});
    const respond = callsThenAnswer(fauxToolCall("apply", { item: "x" }, { id: "call-1" }));
    const { root, store, faux } = await open(respond, {
      tools: [first.tool],
      hooks: {
        beforeTool: [
          async () => {
            hooked.resolve();
            await hold.promise;
            return undefined;
          },
        ],
      },
    });
    await root.submit({ type: "input", content: "go" });
    await hooked.promise;
    await root.configure({ tools: [] });
    const second = itemTool({});
    const h2 = await reopen(store, { models: faux.models, defaultModel: faux.ref, tools: [second.tool] });
    const root2 = await h2.root();
    await root2.waitForIdle();
    expect(second.seen).toEqual([]);
    const [result] = await toolResults(root2);
    expect(messageOf(result!)).toMatchObject({ toolName: "apply", isError: true });
    expect(diagnosticsOf(result!).map((d) => d.code)).toEqual(["tool_unavailable"]);
    hold.resolve();
  });

  test("a called tool is resolved when its task's execute phase starts, after the answer's commit: deselected right after that commit, the call gets tool_unavailable", async () => {
    // Sample 25: every change above came before the answer's commit, which records the intent with
    // the tools as resolved then; an execute phase that trusted that resolution passed them all.
    const { tool, seen } = itemTool({});
    const extensions = createRegistry();
    extensions.install(defineExtension({ name: "kit", tools: [tool] }));
    const { h, root } = await open(callsThenAnswer(fauxToolCall("apply", { item: "a" }, { id: "call-1" })), {
      extensions,
    });
    let deselected: Promise<unknown> | undefined;
    const stop = h.subscribe((change) => {
      if (deselected || !change.entries.some((e) => e.kind === "pi.assistant")) return;
      // Requested as the answer's commit is published: the next commit on the line, before the tool
      // task's first step.
      deselected = root.configure({ extensions: [] });
    });
    const sub = await root.submit({ type: "input", content: "go" });
    expect((await sub.wait()).status).toBe("done");
    stop();
    await deselected;
    expect(seen).toEqual([]);
    const [result] = await toolResults(root);
    expect(diagnosticsOf(result!).map((d) => d.code)).toEqual(["tool_unavailable"]);
  });

  test("a called tool is resolved when its own task runs, not when the round starts: filtered out while an earlier call of a sequential round runs, the later call gets tool_unavailable", async () => {
    // Reading 24b: the tests above change the agent while the request is in flight, before any tool
    // task exists, so a tool resolved once when the round begins passed them.
    const gate = gatedTool();
    const { tool, seen } = itemTool({});
    const { h, root } = await open(
      callsThenAnswer(
        fauxToolCall("hold", {}, { id: "c1" }),
        fauxToolCall("apply", { item: "a" }, { id: "c2" }),
      ),
      { tools: [gate.tool, tool], settings: { toolExecution: "sequential" } },
    );
    const sub = await root.submit({ type: "input", content: "go" });
    await gate.started.promise;
    // The round has begun: the later call waits in pi.live for its turn.
    expect(liveOf(h).tools?.map((t) => t.callId)).toEqual(["c1", "c2"]);
    await root.configure({ tools: [gate.tool] });
    gate.release.resolve();
    expect((await sub.wait()).status).toBe("done");
    expect(seen).toEqual([]);
    const [first, second] = await toolResults(root);
    expect(diagnosticsOf(first!).map((d) => d.code)).toEqual([]);
    expect(diagnosticsOf(second!).map((d) => d.code)).toEqual(["tool_unavailable"]);
  });

  test("a called tool is resolved from its own conversation's agent when its task runs: taken out of a second conversation's tools meanwhile (in flight, or right after the answer's commit), its call gets tool_unavailable while the root keeps the tool", async () => {
    // Draw 32A: every test above calls in the root, so a tool task resolving its tool from the root's
    // agent (not its own conversation's) passed them all. Taken out while the request is in flight,
    // the task starts in its call phase; right after the answer's commit (the intent committed with
    // it), in its execute phase: each resolves on its own.
    const hold = deferred();
    const { tool, seen } = itemTool({});
    const calls = callsThenAnswer(fauxToolCall("apply", { item: "a" }, { id: "call-1" }));
    const { h, root, faux } = await open(
      async (req, n) => {
        if (n === 1) await hold.promise;
        return calls(req, n);
      },
      { tools: [tool] },
    );
    const other = await h.createConversation({ ownership: { kind: "ownerless" } });
    const sub = await other.submit({ type: "input", content: "go" });
    await until(() => faux.requests.length === 1, { what: "first request sent" });
    expect(faux.requests[0]!.tools).toEqual(["apply"]);
    await other.configure({ tools: [] });
    hold.resolve();
    expect((await sub.wait()).status).toBe("done");
    expect(seen).toEqual([]);
    const [result] = await toolResults(other);
    expect(diagnosticsOf(result!).map((d) => d.code)).toEqual(["tool_unavailable"]);
    // Right after the answer's commit, in a third conversation.
    const third = await h.createConversation({ ownership: { kind: "ownerless" } });
    let filtered: Promise<unknown> | undefined;
    const stop = h.subscribe((change) => {
      if (filtered || !change.entries.some((e) => e.kind === "pi.assistant" && e.conversationId === third.id))
        return;
      filtered = third.configure({ tools: [] });
    });
    expect((await (await third.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
    stop();
    await filtered;
    expect(seen).toEqual([]);
    const [late] = await toolResults(third);
    expect(diagnosticsOf(late!).map((d) => d.code)).toEqual(["tool_unavailable"]);
    // The root's agent still has it: a call there runs.
    expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
    expect(seen).toEqual([{ item: "a" }]);
  });

  test("a call to a tool its request did not offer gets tool_unavailable at once, with no task, though the agent has it now", async () => {
    const hold = deferred();
    const { tool, seen } = itemTool({});
    const calls = callsThenAnswer(fauxToolCall("apply", { item: "a" }, { id: "call-1" }));
    const { h, root, faux } = await open(
      async (req, n) => {
        if (n === 1) await hold.promise;
        return calls(req, n);
      },
      { tools: [tool] },
    );
    await root.configure({ tools: [] });
    const sub = await root.submit({ type: "input", content: "go" });
    await until(() => faux.requests.length === 1, { what: "first request sent" });
    expect(faux.requests[0]!.tools).toEqual([]);
    // After preparation the agent offers the tool again; the request's cutoff still decides.
    await root.configure({ tools: null });
    hold.resolve();
    expect((await sub.wait()).status).toBe("done");
    expect(seen).toEqual([]);
    const entries = await transcript(root);
    const answer = entries.find((e) => e.kind === "pi.assistant")!;
    const [result] = await toolResults(root);
    expect(diagnosticsOf(result!).map((d) => d.code)).toEqual(["tool_unavailable"]);
    // Written with the answer, not by a tool task that ran later.
    expect(result!.id).toBe(answer.id + 1);
    const tasks = [];
    for (let id = 1; id <= 20; id++) tasks.push(await h.getTask(id));
    expect(tasks.filter((t) => t?.kind === "pi.tool")).toEqual([]);
    expect(faux.requests[1]!.tools).toEqual(["apply"]);
    expectUnavailable(result!, "apply", faux.requests[1]);
  });

  test("a call to a tool its request offered gets a tool task, though the agent no longer has it: the task writes its tool_unavailable result", async () => {
    // Sweep 42c, 102: every test above built a call not offered, or offered and still there; a
    // round that checked the agent's current tools beside the request's, and so wrote the result
    // itself with no task, passed them all.
    const hold = deferred();
    const { tool, seen } = itemTool({});
    const calls = callsThenAnswer(fauxToolCall("apply", { item: "a" }, { id: "call-1" }));
    const { h, root, faux } = await open(
      async (req, n) => {
        if (n === 1) await hold.promise;
        return calls(req, n);
      },
      { tools: [tool] },
    );
    const sub = await root.submit({ type: "input", content: "go" });
    await until(() => faux.requests.length === 1, { what: "first request sent" });
    expect(faux.requests[0]!.tools).toEqual(["apply"]);
    // After preparation the agent drops the tool; the request offered it, so the call gets a task.
    await root.configure({ tools: [] });
    hold.resolve();
    expect((await sub.wait()).status).toBe("done");
    expect(seen).toEqual([]);
    const [result] = await toolResults(root);
    expect(diagnosticsOf(result!).map((d) => d.code)).toEqual(["tool_unavailable"]);
    const toolTasks = await h.tasks({ kind: "pi.tool" });
    expect(toolTasks.map((t) => (t.input as { callId: string }).callId)).toEqual(["call-1"]);
    expect(result!.byTaskId).toBe(toolTasks[0]!.id);
  });

  test("each pi.tool-result is written by its call's tool task, or by the generation for a call its request did not offer", async () => {
    const { tool } = itemTool({});
    const { h, root } = await open(
      callsThenAnswer(
        fauxToolCall("apply", { item: "a" }, { id: "call-1" }),
        fauxToolCall("nope", {}, { id: "call-2" }),
      ),
      { tools: [tool] },
    );
    await (await root.submit({ type: "input", content: "go" })).wait();
    const entries = await transcript(root);
    const answer = entries.find((e) => e.kind === "pi.assistant")!;
    const generation = await h.getTask(answer.byTaskId!);
    expect(generation?.kind).toBe("pi.generation");
    const byCall = new Map(
      (await toolResults(root)).map((e) => [(messageOf(e) as ToolResultMessage).toolCallId, e.byTaskId]),
    );
    const toolTasks = await h.tasks({ kind: "pi.tool" });
    expect(toolTasks.map((t) => (t.input as { callId: string }).callId)).toEqual(["call-1"]);
    expect(byCall.get("call-1")).toBe(toolTasks[0]!.id);
    expect(byCall.get("call-2")).toBe(generation!.id);
  });

  test("in a sequential round, a call its request did not offer after an offered one gets tool_unavailable in the answer's commit, by the generation, with no task", async () => {
    // Break 28J: every test above offered-checked the first or only call of a parallel round; a
    // sequential round that queued the later calls before the offered check passed them all.
    const { tool } = itemTool({});
    const { h, root } = await open(
      callsThenAnswer(
        fauxToolCall("apply", { item: "a" }, { id: "call-1" }),
        fauxToolCall("nope", {}, { id: "call-2" }),
        fauxToolCall("apply", { item: "b" }, { id: "call-3" }),
      ),
      { tools: [tool], settings: { toolExecution: "sequential" } },
    );
    await (await root.submit({ type: "input", content: "go" })).wait();
    const entries = await transcript(root);
    const answer = entries.find((e) => e.kind === "pi.assistant")!;
    const results = await toolResults(root);
    const byCall = new Map(results.map((e) => [(messageOf(e) as ToolResultMessage).toolCallId, e]));
    const unavailable = byCall.get("call-2")!;
    expect(diagnosticsOf(unavailable).map((d) => d.code)).toEqual(["tool_unavailable"]);
    expect(unavailable.byTaskId).toBe(answer.byTaskId);
    expect(unavailable.id).toBe(answer.id + 1);
    const toolTasks = await h.tasks({ kind: "pi.tool" });
    expect(toolTasks.map((t) => (t.input as { callId: string }).callId)).toEqual(["call-1", "call-3"]);
    expect(byCall.get("call-1")!.byTaskId).toBe(toolTasks[0]!.id);
    expect(byCall.get("call-3")!.byTaskId).toBe(toolTasks[1]!.id);
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
    expectUnavailable(entries[2]!, "nope", faux.requests[1]);
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

  test("a terminating round ends the run at a final boundary: the input is done with the tool-calling answer and a follow-up queued meanwhile starts the next run", async () => {
    const hold = deferred();
    const { root, faux } = await open(
      async (_req, n) => {
        if (n > 1) return fauxAssistantMessage(`later answer ${n}`);
        await hold.promise;
        return fauxAssistantMessage([fauxToolCall("finish", {}, { id: "call-1" })], {
          stopReason: "toolUse",
        });
      },
      { tools: [finish] },
    );
    const go = await root.submit({ type: "input", content: "go" });
    await until(() => faux.requests.length === 1, { what: "the first request" });
    const later = await root.submit({ type: "input", content: "later", whenBusy: "followUp" });
    expect((await later.record()).status).toBe("queued");
    hold.resolve();
    const [first, second] = [await go.wait(), await later.wait()];
    const entries = await transcript(root);
    expect(kinds(entries)).toEqual(["pi.user", "pi.assistant", "pi.tool-result", "pi.user", "pi.assistant"]);
    // The terminating round's answer is the tool-calling one; the follow-up was placed at the final
    // boundary (after the round's results) and answered by a run of its own.
    expect(first).toMatchObject({ status: "done", answer: entries[1]!.id });
    expect(second).toMatchObject({ status: "done", answer: entries[4]!.id });
    expect(textOf(messageOf(entries[3]!))).toBe("later");
    expect(faux.requests).toHaveLength(2);
  });

  test("a terminating round settles every input of the run, a steer that joined it at an earlier round's boundary too, done with the tool-calling answer", async () => {
    // Break 28D: every terminating round's run held one input; settling only the first passed.
    const gate = gatedTool();
    const { h, root, faux } = await open(
      (_req, n) =>
        n === 1
          ? fauxAssistantMessage([fauxToolCall("hold", {}, { id: "c1" })], { stopReason: "toolUse" })
          : n === 2
            ? fauxAssistantMessage([fauxToolCall("finish", {}, { id: "c2" })], { stopReason: "toolUse" })
            : fauxAssistantMessage(`answer ${n}`),
      { tools: [gate.tool, finish] },
    );
    const go = await root.submit({ type: "input", content: "go" });
    await gate.started.promise;
    const steer = await root.submit({ type: "input", content: "steer", whenBusy: "steer" });
    gate.release.resolve();
    const first = await go.wait();
    // Settled in the one commit that ends the run: read, not awaited.
    const joined = await steer.record();
    const entries = await transcript(root);
    const answer = entries.filter((e) => e.kind === "pi.assistant").at(-1)!;
    expect(first).toMatchObject({ status: "done", answer: answer.id });
    expect(joined).toMatchObject({ status: "done", answer: answer.id });
    expect(faux.requests).toHaveLength(2);
    expect((h.docNow(root.id, "pi.live") as { run?: unknown }).run).toBeUndefined();
  });

  test("a terminating round uses final behaviour: a follow-up queued during it is placed when the round ends the run, and starts the next run", async () => {
    const { root, faux, gate, h } = await openTerminatingRound("next answer");
    const changes: ChangeSet[] = [];
    h.subscribe((change) => changes.push(change));
    const first = await root.submit({ type: "input", content: "go" });
    await until(() => faux.requests.length === 1, { what: "the round running" });
    const follow = await root.submit({ type: "input", content: "then this" });
    expect((await follow.record()).status).toBe("queued");
    gate.resolve();
    const entries = () => transcript(root);
    expect(await first.wait()).toMatchObject({ status: "done" });
    // The commit that settles the first input applies the final boundary (spec §6: a terminating
    // round is a successful run end): the follow-up has left the inbox by then (draw 38C, 7: a
    // terminating round ending the run bare, the follow-up left queued, failed here only by a timeout).
    expect((await follow.record()).status).not.toBe("queued");
    // Draw 39, 13: that commit places it and hands it a successor run of its own (a boundary that
    // placed it and ended the run bare failed here only by a timeout).
    const placing = changes.find((c) =>
      c.submissions.some((x) => x.id === follow.id && x.status === "placed"),
    );
    const live = placing?.docs.find((d) => d.name === "pi.live")?.value as
      | { run?: { inputs: number[] } }
      | undefined;
    expect(live?.run?.inputs).toEqual([follow.id]);
    // No further submission: the final boundary of the terminating round placed it.
    expect((await follow.wait()).status).toBe("done");
    expect(kinds(await entries())).toEqual([
      "pi.user",
      "pi.assistant",
      "pi.tool-result",
      "pi.user",
      "pi.assistant",
    ]);
    expect(faux.requests).toHaveLength(2);
  });

  test("a terminating round uses final behaviour for a steer too: a steer queued during it does not join the ended run; the final boundary places it and it starts the next run, answered by its own answer (break 31E)", async () => {
    // Break 31E: the named tests queued follow-ups only; a closing commit that placed steers at
    // post-tools first (joining the ended run, settled with its tool-calling answer) passed them.
    const { root, faux, gate } = await openTerminatingRound("steer answer");
    const first = await root.submit({ type: "input", content: "go" });
    await until(() => faux.requests.length === 1, { what: "the round running" });
    const steer = await root.submit({ type: "input", content: "steer this", whenBusy: "steer" });
    expect((await steer.record()).status).toBe("queued");
    gate.resolve();
    const firstDone = await first.wait();
    const steerDone = await steer.wait();
    expect(steerDone.status).toBe("done");
    const entries = await transcript(root);
    expect(kinds(entries)).toEqual(["pi.user", "pi.assistant", "pi.tool-result", "pi.user", "pi.assistant"]);
    // The first input's answer is the tool-calling answer; the steer's is the next run's answer.
    expect(firstDone).toMatchObject({ status: "done", answer: entries[1]!.id });
    expect(steerDone).toMatchObject({ answer: entries[4]!.id });
    expect(faux.requests).toHaveLength(2);
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

describe("tool hooks", () => {
  test("onAbort can replace an aborted call's result (its partial output by default); a throwing hook is reported and skipped", async () => {
    const release = deferred();
    const started = deferred();
    const slow = defineTool({
      name: "slow",
      description: "Works until aborted",
      parameters: Type.Object({}),
      async execute(_args, api) {
        api.output("half done\n");
        started.resolve();
        await new Promise<void>((resolve, reject) => {
          void release.promise.then(() => resolve());
          api.signal.addEventListener("abort", () => reject(api.signal.reason), { once: true });
        });
        return textResult("finished");
      },
    });
    const reported: unknown[] = [];
    const seen: string[] = [];
    const failure = new Error("cleanup hook broke");
    // An async hook's rejection is a throw too, and so is a thrown value that is no Error (draw 32,
    // 16: a chain that caught only synchronous throws let it escape the abort handler, and one that
    // reported only Error instances swallowed it; both passed while every hook threw an Error synchronously).
    const rejection = { reason: "async cleanup hook broke" };
    // An abort error of the hook's own, thrown while the abort invocation is not signalled, is an
    // ordinary failure too (draw 33cC: a chain that skipped errors named AbortError without looking
    // at its signal passed: reported neither nor propagated).
    const ownAbort = new DOMException("the cleanup hook's own request was aborted", "AbortError");
    const { h, root } = await open(callsThenAnswer(fauxToolCall("slow", {}, { id: "call-1" })), {
      tools: [slow],
      onReport: (error) => void reported.push(error),
      hooks: {
        onAbort: [
          () => {
            throw failure;
          },
          async () => {
            await Promise.resolve();
            throw rejection;
          },
          () => {
            throw ownAbort;
          },
          // A rejection without a reason (undefined) is a failure too (draw 36D: a chain that
          // reported only truthy errors swallowed it).
          () => Promise.reject(),
          (call, result) => {
            seen.push(`${call.name}: ${textOf(result as never)}`);
            return textResult(`rolled back (${textOf(result as never).trim()})`);
          },
        ],
      },
    });
    await root.submit({ type: "input", content: "go" });
    await started.promise;
    await until(() => Boolean(liveOf(h).tools?.[0]?.output));
    await root.abort();
    expect(seen).toEqual(["slow: half done\n"]);
    // Each hook's failure itself is reported, once (not a copy or a wrapper).
    expect(reported).toEqual([failure, rejection, ownAbort, undefined]);
    expect(reported[0]).toBe(failure);
    expect(reported[1]).toBe(rejection);
    expect(reported[2]).toBe(ownAbort);
    const [result] = await toolResults(root);
    expect(messageOf(result!)).toMatchObject({ isError: true });
    expect(textOf(messageOf(result!))).toContain("rolled back (half done)");
    expect(diagnosticsOf(result!).map((d) => d.code)).toEqual(["aborted"]);
  });

  test("onAbort runs in the abort invocation only after the call's owned work drained (its owned task's abort handler has ended), with that invocation's live context", async () => {
    const release = deferred();
    const log: string[] = [];
    const owned = single("tools.owned", async (_t, _r, signal) => untilAborted(signal), {
      abort: async (_t, runtime) => {
        log.push("owned abort started");
        await release.promise;
        await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }));
        log.push("owned aborted");
      },
    });
    const started = deferred();
    const delegate = defineTool({
      name: "delegate",
      description: "Starts owned work, then works until aborted",
      parameters: Type.Object({}),
      async execute(_args, api) {
        await api.commit((tx) =>
          tx.createTask(owned, null, { ownership: { kind: "task", taskId: api.taskId } }),
        );
        api.output("started\n");
        started.resolve();
        await untilAborted(api.signal);
        return textResult("never");
      },
    });
    let ownedLiveAtHook: boolean | undefined;
    let hookSignalAborted: boolean | undefined;
    const { h, root } = await open(callsThenAnswer(fauxToolCall("delegate", {}, { id: "call-1" })), {
      tools: [delegate],
      tasks: [owned],
      hooks: {
        onAbort: [
          (_call, result, _api, ctx) => {
            log.push("onAbort");
            ownedLiveAtHook = h.inspect().tasks.some((t) => t.record.kind === "tools.owned");
            // The abort invocation's context, not the cancelled execution's.
            hookSignalAborted = ctx.signal.aborted;
            return result;
          },
        ],
      },
    });
    await root.submit({ type: "input", content: "go" });
    await started.promise;
    const aborting = root.abort();
    await until(() => log.includes("owned abort started"), { what: "the owned task's abort handler" });
    expect(log).toEqual(["owned abort started"]);
    release.resolve();
    await aborting;
    expect(log).toEqual(["owned abort started", "owned aborted", "onAbort"]);
    expect(ownedLiveAtHook).toBe(false);
    expect(hookSignalAborted).toBe(false);
    const [result] = await toolResults(root);
    expect(diagnosticsOf(result!).map((d) => d.code)).toEqual(["aborted"]);
  });

  test("afterTool can replace a result: the replacement is what is stored and what the model sees", async () => {
    const { tool } = itemTool({});
    const { root, faux } = await open(
      callsThenAnswer(fauxToolCall("apply", { item: "a" }, { id: "call-1" })),
      {
        tools: [tool],
        hooks: {
          afterTool: [(call) => textResult(`${call.name} replaced (was: ${textOf(call.result as never)})`)],
        },
      },
    );
    expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
    const [result] = await toolResults(root);
    expect(textOf(messageOf(result!))).toBe("apply replaced (was: applied a)");
    expect(textOf(faux.requests[1]!.messages.at(-1)!)).toBe("apply replaced (was: applied a)");
  });

  test("afterTool runs on a throwing tool's error result too: it sees the error and its replacement is what is stored", async () => {
    // Break 28O: afterTool skipped for a call whose tool threw passed every named test.
    const boom = defineTool({
      name: "boom",
      description: "Throws",
      parameters: Type.Object({}),
      execute: async () => {
        throw new Error("kaput");
      },
    });
    const seen: unknown[] = [];
    const { root } = await open(callsThenAnswer(fauxToolCall("boom", {}, { id: "call-1" })), {
      tools: [boom],
      hooks: {
        afterTool: [
          (call) => {
            seen.push(call.result.isError);
            return textResult(`recovered from: ${textOf(call.result as never)}`);
          },
        ],
      },
    });
    expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
    expect(seen).toEqual([true]);
    const [result] = await toolResults(root);
    expect(textOf(messageOf(result!))).toContain("recovered from: Error: kaput");
  });

  test("a beforeTool rewrite is validated again: invalid rewritten arguments give invalid_arguments and the tool never runs", async () => {
    const { tool, seen } = itemTool({});
    const { root } = await open(callsThenAnswer(fauxToolCall("apply", { item: "a" }, { id: "call-1" })), {
      tools: [tool],
      hooks: { beforeTool: [() => ({ arguments: { other: 1 } })] },
    });
    expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
    const [result] = await toolResults(root);
    expect(messageOf(result!)).toMatchObject({ isError: true });
    expect(diagnosticsOf(result!).map((d) => d.code)).toEqual(["invalid_arguments"]);
    expect(seen).toEqual([]);
  });

  test("the call validates before beforeTool too: the hook sees the model's arguments converted to the schema, and invalid ones never reach it", async () => {
    const hookSaw: unknown[] = [];
    const ran: unknown[] = [];
    const counter = defineTool({
      name: "count",
      description: "counts",
      parameters: Type.Object({ n: Type.Number() }),
      execute: async (args) => {
        ran.push(args);
        return textResult(`counted ${args.n}`);
      },
    });
    const { root } = await open(
      callsThenAnswer(
        fauxToolCall("count", { n: "5" }, { id: "call-1" }),
        fauxToolCall("count", { n: "five" }, { id: "call-2" }),
      ),
      { tools: [counter], hooks: { beforeTool: [(call) => void hookSaw.push(call.arguments)] } },
    );
    expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
    // The model's "5" is converted by the first validation, before the hook: the hook sees 5.
    expect(hookSaw).toEqual([{ n: 5 }]);
    expect(ran).toEqual([{ n: 5 }]);
    const results = await toolResults(root);
    const byCall = new Map(results.map((e) => [(messageOf(e) as { toolCallId: string }).toolCallId, e]));
    expect(textOf(messageOf(byCall.get("call-1")!))).toBe("counted 5");
    expect(diagnosticsOf(byCall.get("call-2")!).map((d) => d.code)).toEqual(["invalid_arguments"]);
  });

  test("the second validation converts a beforeTool rewrite too: the tool runs with the converted arguments (draw 32d)", async () => {
    // Draw 32d: the second validation run only as a check, its converted result dropped, passed
    // every named test (their rewrites needed no conversion).
    const ran: unknown[] = [];
    const counter = defineTool({
      name: "count",
      description: "counts",
      parameters: Type.Object({ n: Type.Number() }),
      execute: async (args) => {
        ran.push(args);
        return textResult(`counted ${args.n}`);
      },
    });
    const { root } = await open(callsThenAnswer(fauxToolCall("count", { n: 1 }, { id: "call-1" })), {
      tools: [counter],
      hooks: { beforeTool: [() => ({ arguments: { n: "7" } })] },
    });
    expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
    expect(ran).toEqual([{ n: 7 }]);
    const [result] = await toolResults(root);
    expect(textOf(messageOf(result!))).toBe("counted 7");
  });

  test("with no beforeTool hook the call's validation converts the model's arguments: the tool runs with them converted (draw 35d)", async () => {
    // Draw 35d: the tests above convert with a beforeTool hook (the call phase); the intent the
    // answer's commit records when no hook is installed kept the unconverted arguments and passed them.
    const ran: unknown[] = [];
    const counter = defineTool({
      name: "count",
      description: "counts",
      parameters: Type.Object({ n: Type.Number() }),
      execute: async (args) => {
        ran.push(args);
        return textResult(`counted ${args.n}`);
      },
    });
    const { root } = await open(callsThenAnswer(fauxToolCall("count", { n: "7" }, { id: "call-1" })), {
      tools: [counter],
    });
    expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
    expect(ran).toEqual([{ n: 7 }]);
    const [result] = await toolResults(root);
    expect(textOf(messageOf(result!))).toBe("counted 7");
  });
});

describe("parallel and sequential rounds", () => {
  test("the calls of one round run in parallel: both have started before either finishes", async () => {
    const a = gatedTool("first");
    const b = gatedTool("second");
    const { root } = await open(
      callsThenAnswer(
        fauxToolCall("first", {}, { id: "call-1" }),
        fauxToolCall("second", {}, { id: "call-2" }),
      ),
      { tools: [a.tool, b.tool] },
    );
    const sub = await root.submit({ type: "input", content: "go" });
    await Promise.all([a.started.promise, b.started.promise]);
    a.release.resolve();
    b.release.resolve();
    expect((await sub.wait()).status).toBe("done");
    expect((await toolResults(root)).map((e) => textOf(messageOf(e)))).toEqual([
      "first finished",
      "second finished",
    ]);
  });

  test("toolExecution sequential: the next call of the round starts only when the previous one ended", async () => {
    const a = gatedTool("first");
    const b = gatedTool("second");
    const beforeTool: string[] = [];
    const { h, root } = await open(
      callsThenAnswer(
        fauxToolCall("first", {}, { id: "call-1" }),
        fauxToolCall("second", {}, { id: "call-2" }),
      ),
      {
        tools: [a.tool, b.tool],
        settings: { toolExecution: "sequential" },
        hooks: { beforeTool: [(call) => void beforeTool.push(call.name)] },
      },
    );
    const changes: ChangeSet[] = [];
    h.subscribe((change) => changes.push(change));
    const sub = await root.submit({ type: "input", content: "go" });
    await a.started.promise;
    await new Promise((r) => setTimeout(r, 30));
    let secondStarted = false;
    void b.started.promise.then(() => {
      secondStarted = true;
    });
    await Promise.resolve();
    expect(secondStarted).toBe(false);
    expect(liveOf(h).tools?.map((t) => [t.name, t.status, t.taskId !== undefined])).toEqual([
      ["first", "running", true],
      ["second", "pending", false],
    ]);
    a.release.resolve();
    await b.started.promise;
    // While the second call runs, pi.live lists it under its task, and the run stays with the
    // generation (spec §6; draw 28d: the later call's task was never read from its slot).
    const duringSecond = liveOf(h);
    b.release.resolve();
    expect((await sub.wait()).status).toBe("done");
    expect(beforeTool).toEqual(["first", "second"]);
    expect((await toolResults(root)).map((e) => textOf(messageOf(e)))).toEqual([
      "first finished",
      "second finished",
    ]);
    // One commit starts the next call: the first call's task is terminal in an earlier commit, and the
    // commit that creates the second's task is the one where the generation's checkpoint takes it and
    // leaves nothing pending.
    const tools = (c: ChangeSet) => c.tasks.filter((t) => t.kind === "pi.tool");
    const [firstTask, secondTask] = [
      ...new Set(changes.flatMap((c) => tools(c).map((t) => t.id))),
    ] as TaskId[];
    const creating = changes.findIndex((c) => tools(c).some((t) => t.id === secondTask));
    const firstEnded = changes.findIndex((c) =>
      tools(c).some((t) => t.id === firstTask && t.state.status === "terminal"),
    );
    expect(firstEnded).toBeGreaterThanOrEqual(0);
    expect(firstEnded).toBeLessThan(creating);
    const generation = changes[creating]!.tasks.find((t) => t.kind === "pi.generation");
    expect(generation?.state).toMatchObject({
      status: "waiting",
      checkpoint: { phase: "tools", tools: [firstTask, secondTask] },
    });
    expect((generation!.state as { checkpoint: { pending?: string[] } }).checkpoint.pending ?? []).toEqual(
      [],
    );
    expect(duringSecond.tools?.map((t) => [t.callId, t.taskId])).toEqual([
      ["call-1", firstTask],
      ["call-2", secondTask],
    ]);
    expect(duringSecond.run?.taskId).toBe(generation!.id);
    // Each call's task, the later one too, is owned by the generation and its input names only the
    // assistant entry and the call id (break 28K: the later call's owner and input were never read).
    const assistant = (generation!.state as unknown as { checkpoint: { assistant: number } }).checkpoint
      .assistant;
    for (const [id, callId] of [
      [firstTask, "call-1"],
      [secondTask, "call-2"],
    ] as const) {
      const task = await h.getTask(id!);
      expect(task?.owner, callId).toBe(generation!.id);
      expect(task?.input, callId).toEqual({ assistant, callId });
    }
  });

  test("toolExecution sequential holds for a round whose tools each say executionMode parallel: the second call waits for the first (draw 39c)", async () => {
    // Draw 39c: a tool's own executionMode "parallel" taken to override the setting passed every
    // named test (their sequential rounds call tools that leave executionMode unset).
    const a = gatedTool("first");
    const b = gatedTool("second");
    const { h, root } = await open(
      callsThenAnswer(
        fauxToolCall("first", {}, { id: "call-1" }),
        fauxToolCall("second", {}, { id: "call-2" }),
      ),
      {
        tools: [
          defineTool({ ...a.tool, executionMode: "parallel" }),
          defineTool({ ...b.tool, executionMode: "parallel" }),
        ],
        settings: { toolExecution: "sequential" },
      },
    );
    const sub = await root.submit({ type: "input", content: "go" });
    await a.started.promise;
    expect(liveOf(h).tools?.map((t) => [t.name, t.status, t.taskId !== undefined])).toEqual([
      ["first", "running", true],
      ["second", "pending", false],
    ]);
    a.release.resolve();
    await b.started.promise;
    b.release.resolve();
    expect((await sub.wait()).status).toBe("done");
    expect((await toolResults(root)).map((e) => textOf(messageOf(e)))).toEqual([
      "first finished",
      "second finished",
    ]);
  });

  test("a sequential round led by an un-offered call: while each later call runs, pi.live lists it under its own task and the run stays with the generation (draw 33C)", async () => {
    // Draw 33C: every sequential round tested began with an offered call, so a continuation that
    // named the next call's slot by its position among the round's tasks (not by its call id) passed:
    // an un-offered call ahead of them shifts the positions, the running call's slot left unnamed.
    const a = gatedTool("first");
    const b = gatedTool("second");
    const { h, root } = await open(
      callsThenAnswer(
        fauxToolCall("missing", {}, { id: "call-0" }),
        fauxToolCall("first", {}, { id: "call-1" }),
        fauxToolCall("second", {}, { id: "call-2" }),
      ),
      { tools: [a.tool, b.tool], settings: { toolExecution: "sequential" } },
    );
    const sub = await root.submit({ type: "input", content: "go" });
    await a.started.promise;
    const duringFirst = liveOf(h);
    a.release.resolve();
    await b.started.promise;
    const duringSecond = liveOf(h);
    b.release.resolve();
    expect((await sub.wait()).status).toBe("done");
    const generation = duringFirst.run!.taskId;
    expect(duringSecond.run?.taskId).toBe(generation);
    const slots = (live: typeof duringFirst) => live.tools?.map((t) => [t.callId, t.status, t.taskId]);
    const [firstSlot, secondSlot] = [duringFirst.tools![1]!, duringSecond.tools![2]!];
    expect(firstSlot.taskId).toBeDefined();
    expect(secondSlot.taskId).toBeDefined();
    expect(secondSlot.taskId).not.toBe(firstSlot.taskId);
    expect(slots(duringFirst)).toEqual([
      ["call-0", "done", undefined],
      ["call-1", "running", firstSlot.taskId],
      ["call-2", "pending", undefined],
    ]);
    expect(slots(duringSecond)).toEqual([
      ["call-0", "done", undefined],
      ["call-1", "done", firstSlot.taskId],
      ["call-2", "running", secondSlot.taskId],
    ]);
    for (const [id, callId] of [
      [firstSlot.taskId!, "call-1"],
      [secondSlot.taskId!, "call-2"],
    ] as const) {
      const task = await h.getTask(id);
      expect(task?.owner, callId).toBe(generation);
      expect(task?.input, callId).toMatchObject({ callId });
    }
  });

  test("a sequential round of three calls: each call's task is created by the commit that ends the previous one, and the generation resumes after the third", async () => {
    // Break 29H: every sequential test had two calls, so a continuation that dropped the calls after
    // the next one (the third never started, the round never finished) passed them all.
    const ran: string[] = [];
    const step = defineTool({
      name: "step",
      description: "Records its call",
      parameters: Type.Object({ n: Type.String() }),
      execute: async (args) => {
        ran.push(args.n);
        return textResult(`step ${args.n}`);
      },
    });
    const { h, root } = await open(
      callsThenAnswer(
        fauxToolCall("step", { n: "1" }, { id: "call-1" }),
        fauxToolCall("step", { n: "2" }, { id: "call-2" }),
        fauxToolCall("step", { n: "3" }, { id: "call-3" }),
      ),
      { tools: [step], settings: { toolExecution: "sequential" } },
    );
    const changes: ChangeSet[] = [];
    h.subscribe((change) => changes.push(change));
    const sub = await root.submit({ type: "input", content: "go" });
    const outcome = await Promise.race([
      sub.wait(),
      new Promise<"stuck">((r) => setTimeout(() => r("stuck"), 2000)),
    ]);
    expect(outcome).toMatchObject({ status: "done" });
    expect(ran).toEqual(["1", "2", "3"]);
    expect((await toolResults(root)).map((e) => textOf(messageOf(e)))).toEqual([
      "step 1",
      "step 2",
      "step 3",
    ]);
    const tools = (c: ChangeSet) => c.tasks.filter((t) => t.kind === "pi.tool");
    const ids = [...new Set(changes.flatMap((c) => tools(c).map((t) => t.id)))] as TaskId[];
    expect(ids).toHaveLength(3);
    for (const [prev, next] of [
      [ids[0], ids[1]],
      [ids[1], ids[2]],
    ] as const) {
      const creating = changes.findIndex((c) => tools(c).some((t) => t.id === next));
      const ended = changes.findIndex((c) =>
        tools(c).some((t) => t.id === prev && t.state.status === "terminal"),
      );
      expect(ended).toBeGreaterThanOrEqual(0);
      expect(ended).toBeLessThan(creating);
      expect(changes[creating]!.tasks.find((t) => t.kind === "pi.generation")?.state).toMatchObject({
        status: "waiting",
        on: [next],
      });
    }
  });

  test("toolExecution is read as the round starts: changed to sequential while the request streams, the round is sequential", async () => {
    // Spec §8.3: "The round is sequential when the settings' toolExecution, read as the round starts,
    // is sequential ...". (Reading 22b: the setting was only ever fixed before the run.)
    const a = gatedTool("first");
    const b = gatedTool("second");
    const hold = deferred();
    let toolExecution: "parallel" | "sequential" = "parallel";
    const calls = callsThenAnswer(
      fauxToolCall("first", {}, { id: "call-1" }),
      fauxToolCall("second", {}, { id: "call-2" }),
    );
    const { h, root, faux } = await open(
      async (req, n) => {
        if (n === 1) await hold.promise;
        return calls(req, n);
      },
      { tools: [a.tool, b.tool], settings: () => ({ toolExecution }) },
    );
    const sub = await root.submit({ type: "input", content: "go" });
    await until(() => faux.requests.length === 1, { what: "request sent" });
    toolExecution = "sequential";
    hold.resolve();
    await a.started.promise;
    expect(liveOf(h).tools?.map((t) => [t.name, t.status, t.taskId !== undefined])).toEqual([
      ["first", "running", true],
      ["second", "pending", false],
    ]);
    a.release.resolve();
    await b.started.promise;
    b.release.resolve();
    expect((await sub.wait()).status).toBe("done");
  });

  test("toolExecution is read anew at each round: changed back to parallel after a sequential round, the next round of the run is parallel", async () => {
    // Spec §2.2: settings are read at every resolution, never copied (break 28N: a reading kept from
    // the first round passed the test above, whose only round reads the setting once).
    let toolExecution: "parallel" | "sequential" = "sequential";
    const started: string[] = [];
    const gates = new Map<string, ReturnType<typeof deferred<void>>>();
    const step = defineTool({
      name: "step",
      description: "Wait for its own gate",
      parameters: Type.Object({ n: Type.String() }),
      async execute(args) {
        const { n } = args as { n: string };
        started.push(n);
        const gate = deferred<void>();
        gates.set(n, gate);
        await gate.promise;
        return textResult(`step ${n}`);
      },
    });
    const { root } = await open(
      (_req, n) =>
        n === 1
          ? fauxAssistantMessage(
              [
                fauxToolCall("step", { n: "1" }, { id: "c1" }),
                fauxToolCall("step", { n: "2" }, { id: "c2" }),
              ],
              { stopReason: "toolUse" },
            )
          : n === 2
            ? fauxAssistantMessage(
                [
                  fauxToolCall("step", { n: "3" }, { id: "c3" }),
                  fauxToolCall("step", { n: "4" }, { id: "c4" }),
                ],
                { stopReason: "toolUse" },
              )
            : fauxAssistantMessage("done"),
      { tools: [step], settings: () => ({ toolExecution }) },
    );
    const sub = await root.submit({ type: "input", content: "go" });
    await until(() => started.length === 1, { what: "first call started" });
    await new Promise((r) => setTimeout(r, 30));
    expect(started).toEqual(["1"]);
    toolExecution = "parallel";
    gates.get("1")!.resolve();
    await until(() => started.length === 2, { what: "second call started" });
    gates.get("2")!.resolve();
    // The second round reads the setting as it starts: both its calls run at once.
    await until(() => started.length === 4, { what: "both calls of the parallel round started" });
    expect(started).toEqual(["1", "2", "3", "4"]);
    gates.get("3")!.resolve();
    gates.get("4")!.resolve();
    expect((await sub.wait()).status).toBe("done");
  });

  test("a tool with executionMode sequential makes its whole round sequential", async () => {
    const a = gatedTool("first");
    const { h, root } = await open(
      callsThenAnswer(
        fauxToolCall("first", {}, { id: "call-1" }),
        fauxToolCall("serial", {}, { id: "call-2" }),
      ),
      { tools: [a.tool, serialTool] },
    );
    const sub = await root.submit({ type: "input", content: "go" });
    await a.started.promise;
    expect(liveOf(h).tools?.map((t) => t.status)).toEqual(["running", "pending"]);
    a.release.resolve();
    expect((await sub.wait()).status).toBe("done");
    expect((await toolResults(root)).map((e) => textOf(messageOf(e)))).toEqual([
      "first finished",
      "serial done",
    ]);
    expect(() => defineTool({ ...serialTool, executionMode: "sometimes" as never })).toThrow(TypeError);
  });

  test("a tool with executionMode sequential makes its round sequential wherever it stands: first of three calls, the others not sequential (draw 36b)", async () => {
    // Draw 36b: every named round had the sequential tool last; reading only the last call's tool
    // passed them all.
    const s = gatedTool("serial");
    const a = gatedTool("first");
    const b = gatedTool("second");
    const serial = defineTool({ ...s.tool, executionMode: "sequential" });
    const { h, root } = await open(
      callsThenAnswer(
        fauxToolCall("serial", {}, { id: "call-1" }),
        fauxToolCall("first", {}, { id: "call-2" }),
        fauxToolCall("second", {}, { id: "call-3" }),
      ),
      { tools: [serial, a.tool, b.tool] },
    );
    const sub = await root.submit({ type: "input", content: "go" });
    await s.started.promise;
    expect(liveOf(h).tools?.map((t) => [t.name, t.status, t.taskId !== undefined])).toEqual([
      ["serial", "running", true],
      ["first", "pending", false],
      ["second", "pending", false],
    ]);
    s.release.resolve();
    await a.started.promise;
    expect(liveOf(h).tools?.map((t) => t.status)).toEqual(["done", "running", "pending"]);
    a.release.resolve();
    await b.started.promise;
    b.release.resolve();
    expect((await sub.wait()).status).toBe("done");
    expect((await toolResults(root)).map((e) => textOf(messageOf(e)))).toEqual([
      "serial finished",
      "first finished",
      "second finished",
    ]);
  });

  test("only a called tool makes its round sequential: a sequential tool offered but not called leaves a round of two calls parallel (draw 40c)", async () => {
    // Draw 40c: the round made sequential by any offered tool with executionMode sequential, called
    // or not, passed every named test (each sequential tool was also called).
    const a = gatedTool("first");
    const b = gatedTool("second");
    const { h, root } = await open(
      callsThenAnswer(
        fauxToolCall("first", {}, { id: "call-1" }),
        fauxToolCall("second", {}, { id: "call-2" }),
      ),
      { tools: [a.tool, b.tool, serialTool] },
    );
    const sub = await root.submit({ type: "input", content: "go" });
    // The answer's commit gives both calls their tasks: the second does not wait for the first.
    await a.started.promise;
    expect(liveOf(h).tools?.map((t) => [t.name, t.status, t.taskId !== undefined])).toEqual([
      ["first", "running", true],
      ["second", "running", true],
    ]);
    await b.started.promise;
    b.release.resolve();
    a.release.resolve();
    expect((await sub.wait()).status).toBe("done");
    expect((await toolResults(root)).map((e) => textOf(messageOf(e))).sort()).toEqual([
      "first finished",
      "second finished",
    ]);
  });

  test("a sequential round whose first call throws goes on: the call fails with a tool_error result, the next call runs, and the run is answered (draw 34C)", async () => {
    // Draw 34C: every throwing call was in a parallel round or alone; a failed call ending its
    // sequential round (the later calls never started) was caught only by a restart's interrupted call.
    const thrower = defineTool({
      name: "thrower",
      description: "Throws",
      parameters: Type.Object({}),
      executionMode: "sequential",
      execute: async () => {
        throw new Error("it broke");
      },
    });
    const ran: string[] = [];
    const after = defineTool({
      name: "after",
      description: "Runs after",
      parameters: Type.Object({}),
      execute: async () => {
        ran.push("after");
        return textResult("after done");
      },
    });
    const { h, root } = await open(
      callsThenAnswer(
        fauxToolCall("thrower", {}, { id: "call-1" }),
        fauxToolCall("after", {}, { id: "call-2" }),
      ),
      { tools: [thrower, after] },
    );
    expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
    expect(ran).toEqual(["after"]);
    const results = await toolResults(root);
    const texts = results.map((e) => textOf(messageOf(e)));
    expect(texts).toHaveLength(2);
    expect(texts[0]).toMatch(/^Error: it broke/);
    expect(texts[1]).toBe("after done");
    expect(diagnosticsOf(results[0]!).map((d) => d.code)).toEqual(["tool_error"]);
    const tasks = await h.tasks({ kind: "pi.tool" });
    expect(tasks.map((t) => t.state)).toEqual([
      expect.objectContaining({ outcome: expect.objectContaining({ status: "failed" }) }),
      expect.objectContaining({ outcome: expect.objectContaining({ status: "completed" }) }),
    ]);
  });

  test("a sequential round survives a restart: the interrupted call gets its result, then the next one runs", async () => {
    const first = itemTool({ holdFirst: true });
    const later = defineTool({
      name: "later",
      description: "Runs after",
      parameters: Type.Object({}),
      execute: async () => textResult("later done"),
    });
    const respond = callsThenAnswer(
      fauxToolCall("apply", { item: "x" }, { id: "call-1" }),
      fauxToolCall("later", {}, { id: "call-2" }),
    );
    const settings = { toolExecution: "sequential" as const };
    const { root, store, faux } = await open(respond, { tools: [first.tool, later], settings });
    await root.submit({ type: "input", content: "go", requestId: "r" });
    await first.started.promise;

    const h2 = await reopen(store, {
      models: faux.models,
      defaultModel: faux.ref,
      tools: [itemTool({}).tool, later],
      settings,
    });
    const again = await (await h2.root()).submit({ type: "input", content: "go", requestId: "r" });
    expect((await again.wait()).status).toBe("done");
    const results = await toolResults(await h2.root());
    expect(results.map((e) => diagnosticsOf(e).map((d) => d.code))).toEqual([["interrupted"], []]);
    expect(textOf(messageOf(results[1]!))).toBe("later done");
  });

  test("aborting a sequential round answers the calls that never started with an aborted result", async () => {
    const a = gatedTool("first");
    const b = gatedTool("second");
    const { h, root } = await open(
      callsThenAnswer(
        fauxToolCall("first", {}, { id: "call-1" }),
        fauxToolCall("second", {}, { id: "call-2" }),
        fauxToolCall("second", {}, { id: "call-3" }),
      ),
      { tools: [a.tool, b.tool], settings: { toolExecution: "sequential" } },
    );
    // Every pi.tool task ever created: only the started call gets one.
    const toolTasks = new Set<number>();
    h.subscribe((change) => {
      for (const t of change.tasks) if (t.kind === "pi.tool") toolTasks.add(t.id);
    });
    const sub = await root.submit({ type: "input", content: "go" });
    await a.started.promise;
    // Two calls are unstarted, so their answers' order is told apart from the reverse.
    expect(liveOf(h).tools?.map((s) => s.taskId !== undefined)).toEqual([true, false, false]);
    await root.abort();
    expect(await sub.wait()).toMatchObject({ status: "unanswered", reason: "aborted" });
    const results = await toolResults(root);
    expect(
      results.map((e) => [(messageOf(e) as { toolCallId: string }).toolCallId, diagnosticsOf(e)[0]?.code]),
    ).toEqual([
      ["call-1", "aborted"],
      ["call-2", "aborted"],
      ["call-3", "aborted"],
    ]);
    expect(results.map((e) => (messageOf(e) as { isError: boolean }).isError)).toEqual([true, true, true]);
    expect(toolTasks.size).toBe(1);
    expect(liveOf(h).run).toBeUndefined();
    expect((liveOf(h).tools ?? []).filter((t) => t.status !== "done")).toEqual([]);
    // The generation's abort handler wrote the unstarted calls' results, removed run, generation and
    // tools, and ended aborted (spec §8.5; reading 23d: tools and the outcome were not read).
    const [generation] = await h.tasks({ kind: "pi.generation" });
    expect(generation?.state).toMatchObject({ status: "terminal", outcome: { status: "aborted" } });
    expect(results.slice(1).map((e) => e.byTaskId)).toEqual([generation!.id, generation!.id]);
    expect(results[0]!.byTaskId).not.toBe(generation!.id);
    expect(liveOf(h)).toEqual({});
  });
});

/**
 * A harness whose first run calls `finish-later`, a tool that ends the run (terminate) once `gate` is
 * released; every later request is answered `answer`.
 */
async function openTerminatingRound(answer: string) {
  const gate = deferred();
  const finishLater = defineTool({
    name: "finish-later",
    description: "End the run once released",
    parameters: Type.Object({}),
    execute: async () => {
      await gate.promise;
      return { content: [{ type: "text", text: "finished" }], control: { terminate: true } };
    },
  });
  const opened = await open(
    (req) =>
      req.messages.filter((m) => m.role === "user").length === 1
        ? fauxAssistantMessage([fauxToolCall("finish-later", {}, { id: "call-1" })], {
            stopReason: "toolUse",
          })
        : fauxAssistantMessage(answer),
    { tools: [finishLater] },
  );
  return { root: opened.root, faux: opened.faux, gate, h: opened.h };
}
