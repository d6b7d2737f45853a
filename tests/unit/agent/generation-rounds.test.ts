/**
 * The generation and its tool round as tasks (spec §8.3, §8.4, §8.5, §8.6): who owns the tool tasks,
 * who holds the run, what a generation completes with, aborting a whole round through its
 * generation, a run without a usable model, `durationMs` on results, and `Harness.usage()`.
 */
import { fauxAssistantMessage, fauxToolCall } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { expect, test, vi } from "vitest";
import {
  DOC,
  defineTool,
  type LiveState,
  type TaskRecord,
  type ToolDefinition,
  textResult,
} from "../../../worker/index.ts";
import { deferred, fauxError, until } from "../../../worker/testing.ts";
import {
  callsThenAnswer,
  echo,
  gatedTool,
  kinds,
  liveOf,
  messageOf,
  open,
  textOf,
  toolResults,
  transcript,
} from "./fixtures.ts";

function trackTasks(h: { subscribe: (l: (c: { tasks: readonly TaskRecord[] }) => void) => () => void }) {
  const latest = new Map<number, TaskRecord>();
  h.subscribe((change) => {
    for (const t of change.tasks) latest.set(t.id, t);
  });
  return latest;
}

test("a generation owns its tool tasks, waits for them, and hands the run to a conversation-owned generation", async () => {
  const a = gatedTool("a");
  const b = gatedTool("b");
  const calls = callsThenAnswer(fauxToolCall("a", {}, { id: "c1" }), fauxToolCall("b", {}, { id: "c2" }));
  // pi.live's tool round as the next request is sent: the tools phase removed it (spec §8.2).
  const toolsAtRequest: unknown[] = [];
  // And pi.live.run as each request is sent: the run's task and its inputs (spec §6, sample 22).
  const runAtRequest: unknown[] = [];
  const { h, root } = await open(
    (req, n) => {
      toolsAtRequest.push(liveOf(h).tools);
      runAtRequest.push(liveOf(h).run);
      return calls(req, n);
    },
    { tools: [a.tool, b.tool] },
  );
  const tasks = trackTasks(h);
  const input = await root.submit({ type: "input", content: "go" });
  await a.started.promise;
  await b.started.promise;
  const generations = () => [...tasks.values()].filter((t) => t.kind === "pi.generation");
  const tools = () => [...tasks.values()].filter((t) => t.kind === "pi.tool");
  const [first] = generations();
  // While the round runs, the run stays with the waiting generation; the slots name their tasks.
  expect(first?.state).toMatchObject({ status: "waiting", policy: "allSettled" });
  expect(liveOf(h).run?.taskId).toBe(first?.id);
  expect(liveOf(h).generation).toBeUndefined();
  // `run` defines busy (spec §6), not a generation's streaming state: none is there while the round runs.
  expect(root.busy).toBe(true);
  expect(liveOf(h).tools?.map((s) => [s.callId, s.taskId])).toEqual(
    tools().map((t, i) => [`c${i + 1}`, t.id]),
  );
  expect(tools().map((t) => t.owner)).toEqual([first?.id, first?.id]);
  a.release.resolve();
  b.release.resolve();
  expect((await input.wait()).status).toBe("done");
  const [, second] = generations();
  // Both conversation-owned: no owner task, in the conversation, not background.
  expect([first, second].map((g) => [g?.owner, g?.conversationId, g?.background])).toEqual([
    [undefined, root.id, false],
    [undefined, root.id, false],
  ]);
  // The run's inputs live in pi.live.run, not in either task's input (spec §8.3; break 31F: a
  // generation handed the run with the inputs copied into its input passed, as only the first
  // generation's input was read).
  expect([first, second].map((g) => g?.input)).toEqual([{}, {}]);
  const answer = (await transcript(root)).find((e) => e.kind === "pi.assistant");
  const firstDone = tasks.get(first!.id);
  expect(firstDone?.state).toEqual({
    status: "terminal",
    outcome: { status: "completed", result: { entryId: answer?.id } },
  });
  // The generation that answered completes with its own answer's entry, the one the input settled with.
  const final = (await transcript(root)).filter((e) => e.kind === "pi.assistant").at(-1);
  expect(final!.id).not.toBe(answer!.id);
  expect(tasks.get(second!.id)?.state).toEqual({
    status: "terminal",
    outcome: { status: "completed", result: { entryId: final!.id } },
  });
  expect(await input.record()).toMatchObject({ status: "done", answer: final!.id });
  expect(liveOf(h)).toEqual({});
  expect(root.busy).toBe(false);
  expect(toolsAtRequest).toEqual([undefined, undefined]);
  expect(runAtRequest).toEqual([
    { taskId: first!.id, inputs: [input.id] },
    { taskId: second!.id, inputs: [input.id] },
  ]);
});

test("the generation waits for every tool of the round (allSettled): a call that fails does not wake it while another runs", async () => {
  // Spec §8.3: "The generation commits waiting on its tool tasks with allSettled". (Reading 22b: with
  // every call succeeding, failFast and allSettled could not be told apart.)
  const broken = defineTool({
    name: "broken",
    description: "Throws",
    parameters: Type.Object({}),
    execute: async () => {
      throw new Error("tool bug");
    },
  });
  const slow = gatedTool("slow");
  const { h, root } = await open(
    callsThenAnswer(fauxToolCall("broken", {}, { id: "c1" }), fauxToolCall("slow", {}, { id: "c2" })),
    { tools: [broken, slow.tool] },
  );
  const tasks = trackTasks(h);
  const input = await root.submit({ type: "input", content: "go" });
  await slow.started.promise;
  const toolTasks = () => [...tasks.values()].filter((t) => t.kind === "pi.tool");
  await until(() => toolTasks()[0]?.state.status === "terminal", { what: "the broken call ended" });
  expect(toolTasks()[0]!.state).toMatchObject({ outcome: { status: "failed" } });
  const [generation] = [...tasks.values()].filter((t) => t.kind === "pi.generation");
  // Still waiting on both, and the run still with it, while the slow call runs.
  expect(tasks.get(generation!.id)!.state).toMatchObject({
    status: "waiting",
    on: toolTasks().map((t) => t.id),
    policy: "allSettled",
  });
  expect(liveOf(h).tools?.map((t) => t.status)).toEqual(["done", "running"]);
  slow.release.resolve();
  expect((await input.wait()).status).toBe("done");
  expect((await transcript(root)).filter((e) => e.kind === "pi.tool-result")).toHaveLength(2);
});

test("the answer's commit writes one slot per call, in call order: an un-offered call's slot is done with its result entry and no taskId, every other slot names its task (running: no beforeTool hook, so its intent is in that commit)", async () => {
  const a = gatedTool("a");
  const b = gatedTool("b");
  const { h, root } = await open(
    callsThenAnswer(
      fauxToolCall("a", {}, { id: "c1" }),
      fauxToolCall("nope", {}, { id: "c2" }),
      fauxToolCall("b", {}, { id: "c3" }),
    ),
    { tools: [a.tool, b.tool] },
  );
  // The commit that appends the tool-calling answer: its entries and the pi.live it wrote. With no
  // beforeTool hook the intent of each offered call is recorded in this commit too (tools/round.ts), so
  // its slot is already running; the spec's letter has it pending until the tool task's own intent
  // commit (a departure listed in tests/NOT-APPLICABLE.md [8.2]).
  const answerCommits: Array<{
    entries: { id: number; kind: string }[];
    live: LiveState | undefined;
    tasks: TaskRecord[];
  }> = [];
  h.subscribe((change) => {
    const answer = change.entries.find((e) => e.kind === "pi.assistant");
    if (answer === undefined || answerCommits.length > 0) return;
    const live = change.docs.find((d) => d.conversationId === 1 && d.name === DOC.live)?.value as
      | LiveState
      | undefined;
    answerCommits.push({ entries: [...change.entries], live, tasks: [...change.tasks] });
  });
  const input = await root.submit({ type: "input", content: "go" });
  await a.started.promise;
  await b.started.promise;
  const [commit] = answerCommits;
  const result = commit!.entries.find((e) => e.kind === "pi.tool-result");
  expect(result).toBeDefined();
  const toolTasks = commit!.tasks.filter((t) => t.kind === "pi.tool");
  expect(toolTasks).toHaveLength(2);
  // The same commit moves the generation to waiting, in its tools phase, on the round's tasks
  // (reading 22b: asserted nowhere in the answer's commit).
  expect(commit!.tasks.find((t) => t.kind === "pi.generation")?.state).toMatchObject({
    status: "waiting",
    on: toolTasks.map((t) => t.id),
    policy: "allSettled",
    checkpoint: { phase: "tools" },
  });
  // The same commit removes generation, and the run stays (spec §8.3 step 4; reading 23d: read later only).
  expect(commit!.live?.generation).toBeUndefined();
  expect(commit!.live?.run?.taskId).toBe(commit!.tasks.find((t) => t.kind === "pi.generation")?.id);
  expect(commit!.live?.tools).toEqual([
    { callId: "c1", name: "a", taskId: toolTasks[0]!.id, status: "running" },
    { callId: "c2", name: "nope", status: "done", entry: result!.id },
    { callId: "c3", name: "b", taskId: toolTasks[1]!.id, status: "running" },
  ]);
  a.release.resolve();
  b.release.resolve();
  expect((await input.wait()).status).toBe("done");
});

test("a round whose every call is un-offered: the answer's commit still writes one done slot per call, in call order, each with its result entry and no taskId (draw 39, 1)", async () => {
  // Draw 39, 1: every named round had an offered call; an answer's commit that wrote no slots when
  // it started no tool task passed every test.
  const { h, root } = await open(
    callsThenAnswer(fauxToolCall("nope", {}, { id: "u1" }), fauxToolCall("gone", {}, { id: "u2" })),
  );
  const answerCommits: Array<{ entries: { id: number; kind: string }[]; live: LiveState | undefined }> = [];
  h.subscribe((change) => {
    if (answerCommits.length > 0 || !change.entries.some((e) => e.kind === "pi.assistant")) return;
    const live = change.docs.find((d) => d.conversationId === 1 && d.name === DOC.live)?.value as
      | LiveState
      | undefined;
    answerCommits.push({ entries: [...change.entries], live });
  });
  expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
  const [commit] = answerCommits;
  const results = commit!.entries.filter((e) => e.kind === "pi.tool-result");
  expect(results).toHaveLength(2);
  expect(commit!.live?.tools).toEqual([
    { callId: "u1", name: "nope", status: "done", entry: results[0]!.id },
    { callId: "u2", name: "gone", status: "done", entry: results[1]!.id },
  ]);
});

test("abortTask on the generation aborts its whole parallel round: every call gets its result, then the input is unanswered", async () => {
  const a = gatedTool("a");
  const b = gatedTool("b");
  const calls = callsThenAnswer(fauxToolCall("a", {}, { id: "c1" }), fauxToolCall("b", {}, { id: "c2" }));
  // pi.live's tool round as the next request is sent: the tools phase removed it (spec §8.2).
  const toolsAtRequest: unknown[] = [];
  const { h, root } = await open(
    (req, n) => {
      toolsAtRequest.push(liveOf(h).tools);
      return calls(req, n);
    },
    { tools: [a.tool, b.tool] },
  );
  const tasks = trackTasks(h);
  // The tasks in the order their outcome was decided (held as completing, or terminal).
  const ended: number[] = [];
  h.subscribe((change) => {
    for (const t of change.tasks)
      if ((t.state.status === "terminal" || t.state.status === "completing") && !ended.includes(t.id))
        ended.push(t.id);
  });
  const input = await root.submit({ type: "input", content: "go" });
  await a.started.promise;
  await b.started.promise;
  const generation = liveOf(h).run?.taskId as number;
  expect(await h.abortTask(generation)).toBe("marked");
  expect(await input.wait()).toEqual({ status: "unanswered", reason: "aborted" });
  const results = await toolResults(root);
  expect(results.map((e) => (messageOf(e) as { toolCallId: string }).toolCallId)).toEqual(["c1", "c2"]);
  expect(results.every((e) => (messageOf(e) as { isError: boolean }).isError)).toBe(true);
  await until(() => tasks.get(generation)?.state.status === "terminal", { what: "generation terminal" });
  expect(tasks.get(generation)?.state).toMatchObject({ outcome: { status: "aborted" } });
  // Its tools ended, aborted, before its own abort handler decided its outcome.
  const tools = [...tasks.values()].filter((t) => t.kind === "pi.tool");
  expect(tools).toHaveLength(2);
  for (const t of tools)
    expect(t.state).toMatchObject({ status: "terminal", outcome: { status: "aborted" } });
  expect(ended.filter((id) => id === generation || tools.some((t) => t.id === id)).at(-1)).toBe(generation);
  expect(ended.filter((id) => tools.some((t) => t.id === id))).toHaveLength(2);
  expect(liveOf(h)).toEqual({});
});

test("abortTask on the generation while one call of its parallel round runs and another waits in beforeTool: both calls get their aborted result, in call order", async () => {
  // break 29O: the call whose task was still in its call phase (beforeTool deciding) was never built.
  const a = gatedTool("a");
  const b = gatedTool("b");
  const deciding = deferred<void>();
  const calls = callsThenAnswer(fauxToolCall("a", {}, { id: "c1" }), fauxToolCall("b", {}, { id: "c2" }));
  const { h, root } = await open(calls, {
    tools: [a.tool, b.tool],
    hooks: {
      beforeTool: [
        (call, _api, ctx) =>
          call.name !== "b"
            ? undefined
            : new Promise<undefined>((resolve) => {
                deciding.resolve();
                ctx.signal.addEventListener("abort", () => resolve(undefined));
              }),
      ],
    },
  });
  const tasks = trackTasks(h);
  const input = await root.submit({ type: "input", content: "go" });
  await a.started.promise;
  await deciding.promise;
  const generation = liveOf(h).run?.taskId as number;
  expect(await h.abortTask(generation)).toBe("marked");
  expect(await input.wait()).toEqual({ status: "unanswered", reason: "aborted" });
  const results = await toolResults(root);
  expect(results.map((e) => (messageOf(e) as { toolCallId: string }).toolCallId)).toEqual(["c1", "c2"]);
  expect(results.every((e) => (messageOf(e) as { isError: boolean }).isError)).toBe(true);
  const tools = [...tasks.values()].filter((t) => t.kind === "pi.tool");
  expect(tools).toHaveLength(2);
  for (const t of tools)
    expect(t.state).toMatchObject({ status: "terminal", outcome: { status: "aborted" } });
  expect(liveOf(h)).toEqual({});
});

test("abortTask on the generation aborts a parallel round with a call to an unavailable tool: that call keeps its one result, each running call gets its aborted result, one result per call", async () => {
  // Sweep 42c, 135: every round the abort tests built had only calls that started; an abort that
  // wrote an aborted result for every slot without a task (the unavailable call's, already answered)
  // passed them.
  const a = gatedTool("a");
  const b = gatedTool("b");
  const calls = callsThenAnswer(
    fauxToolCall("a", {}, { id: "c1" }),
    fauxToolCall("missing", {}, { id: "c2" }),
    fauxToolCall("b", {}, { id: "c3" }),
  );
  const { h, root } = await open(calls, { tools: [a.tool, b.tool] });
  const input = await root.submit({ type: "input", content: "go" });
  await a.started.promise;
  await b.started.promise;
  const generation = liveOf(h).run?.taskId as number;
  expect(await h.abortTask(generation)).toBe("marked");
  expect(await input.wait()).toEqual({ status: "unanswered", reason: "aborted" });
  const results = (await toolResults(root)).map(
    (e) => messageOf(e) as { toolCallId: string; isError: boolean; content: { text?: string }[] },
  );
  expect(results.map((m) => m.toolCallId).sort()).toEqual(["c1", "c2", "c3"]);
  expect(results.every((m) => m.isError)).toBe(true);
  const missing = results.find((m) => m.toolCallId === "c2")!;
  expect(missing.content.map((part) => part.text ?? "").join("")).toContain("not available");
  expect(liveOf(h)).toEqual({});
});

test("a toolUse answer without tool calls is classified like stop: the run answers with it", async () => {
  // Like stop: the onYield chain is asked about it, and the input settles with it (reading 22b).
  const yielded: string[] = [];
  const { root, faux } = await open(
    () => fauxAssistantMessage("no calls after all", { stopReason: "toolUse" }),
    {
      hooks: { onYield: [(m) => void yielded.push(m.stopReason)] },
    },
  );
  const input = await root.submit({ type: "input", content: "go" });
  const settled = await input.wait();
  expect(kinds(await transcript(root))).toEqual(["pi.user", "pi.assistant"]);
  expect(settled).toMatchObject({ status: "done", answer: (await transcript(root))[1]!.id });
  // Draw 40c: classified like stop, stored as it came (spec §8.1: any stop reason). An answer
  // stored with its toolUse rewritten to stop passed every test.
  expect(messageOf((await transcript(root))[1]!)).toMatchObject({
    role: "assistant",
    stopReason: "toolUse",
    content: [{ type: "text", text: "no calls after all" }],
  });
  expect(yielded).toEqual(["toolUse"]);
  expect(faux.requests).toHaveLength(1);
});

test("a toolUse answer without tool calls is like stop past its status too: an onYield continuation carries the run on, and the next request sends the answer", async () => {
  // Draw 36C: a continuation dropped for a toolUse answer, and a toolUse answer without calls left out
  // of later requests, each passed every test (the one such answer built had no continuation and no
  // request after it).
  let continued = false;
  const { root, faux } = await open(
    (_req, n) =>
      n === 1
        ? fauxAssistantMessage("no calls after all", { stopReason: "toolUse" })
        : fauxAssistantMessage("the end"),
    {
      hooks: {
        onYield: [
          () => {
            if (continued) return undefined;
            continued = true;
            return "go on";
          },
        ],
      },
    },
  );
  const input = await root.submit({ type: "input", content: "go" });
  const settled = await input.wait();
  const entries = await transcript(root);
  expect(entries.map((e) => textOf(messageOf(e)))).toEqual(["go", "no calls after all", "go on", "the end"]);
  expect(settled).toMatchObject({ status: "done", answer: entries[3]!.id });
  expect(faux.requests).toHaveLength(2);
  expect(faux.requests[1]!.messages.map(textOf)).toEqual(["go", "no calls after all", "go on"]);
});

test("a stop or length answer that carries tool calls starts no round: it is classified as what it says, and the run answers with it", async () => {
  // Break 30E: a round started for any answer holding tool calls, whatever its stop reason, passed
  // every named test (their calls always came with toolUse). Spec §8.3: only `toolUse` with at
  // least one call starts a round; `stop` and `length` append the answer and apply the final boundary.
  const ran: string[] = [];
  const tool = defineTool({
    name: "probe",
    description: "records that it ran",
    parameters: Type.Object({}),
    execute: async () => {
      ran.push("probe");
      return textResult("ran");
    },
  });
  const yielded: string[] = [];
  const { h, root, faux } = await open(
    (req) => {
      // After a tool result (only if a round wrongly started): a plain answer, so the run ends.
      if (req.messages.at(-1)!.role === "toolResult") return fauxAssistantMessage("after the round");
      const stopReason = textOf(req.messages.at(-1)!) === "length" ? "length" : "stop";
      return fauxAssistantMessage(
        [
          { type: "text", text: `a ${stopReason} answer` },
          fauxToolCall("probe", {}, { id: `c-${stopReason}` }),
        ],
        { stopReason },
      );
    },
    { tools: [tool], hooks: { onYield: [(m) => void yielded.push(m.stopReason)] } },
  );
  for (const content of ["stop", "length"]) {
    const input = await root.submit({ type: "input", content });
    const settled = await input.wait();
    const entries = await transcript(root);
    expect(settled, content).toMatchObject({ status: "done", answer: entries.at(-1)!.id });
  }
  expect(kinds(await transcript(root))).toEqual(["pi.user", "pi.assistant", "pi.user", "pi.assistant"]);
  expect(yielded).toEqual(["stop", "length"]);
  expect(faux.requests).toHaveLength(2);
  expect(await h.tasks({ kind: "pi.tool" })).toEqual([]);
  expect(ran).toEqual([]);
  expect(liveOf(h)).toEqual({});
});

test("a run whose model the resolver does not know fails no_model and leaves the conversation idle", async () => {
  const { h, root, faux } = await open(echo);
  await root.configure({ model: { provider: "nowhere", modelId: "nothing" } });
  const input = await root.submit({ type: "input", content: "hi" });
  expect(await input.wait()).toMatchObject({ status: "unanswered", reason: "no_model" });
  expect(faux.requests).toHaveLength(0);
  expect(liveOf(h)).toEqual({});
  expect((await root.entries()).map((e) => e.kind)).toEqual(["pi.user"]);
  expect((await h.tasks({ kind: "pi.generation" })).map((t) => t.state)).toEqual([
    {
      status: "terminal",
      outcome: {
        status: "failed",
        error: { message: "unknown model nowhere/nothing", detail: { reason: "no_model" } },
      },
    },
  ]);
});

test("an executed call's result carries durationMs; an aborted call's result and one never executed carry none", async () => {
  const gate = gatedTool("hold");
  const { root } = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "c1" })), {
    tools: [gate.tool],
  });
  const input = await root.submit({ type: "input", content: "go" });
  await gate.started.promise;
  gate.release.resolve();
  expect((await input.wait()).status).toBe("done");
  const [executed] = await toolResults(root);
  expect(typeof (messageOf(executed!) as { durationMs?: unknown }).durationMs).toBe("number");

  const blocked = gatedTool("hold");
  const second = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "c9" })), {
    tools: [blocked.tool],
  });
  const run = await second.root.submit({ type: "input", content: "go" });
  await blocked.started.promise;
  await second.root.abort();
  expect((await run.wait()).status).toBe("unanswered");
  const [aborted] = await toolResults(second.root);
  expect(messageOf(aborted!)).not.toHaveProperty("durationMs");

  // A call to a tool the request did not offer is never executed: its result has no durationMs.
  const third = await open(callsThenAnswer(fauxToolCall("nope", {}, { id: "c5" })));
  expect((await (await third.root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
  const [unavailable] = await toolResults(third.root);
  expect(messageOf(unavailable!)).toMatchObject({ toolCallId: "c5", isError: true });
  expect(messageOf(unavailable!)).not.toHaveProperty("durationMs");
});

test("a call beforeTool blocks and one with invalid arguments are never executed: their results carry no durationMs (draw 36e C)", async () => {
  // Draw 36e C: a harness-written blocked or invalid_arguments result given durationMs 0 passed the
  // test above, whose never-executed call is an un-offered one (written by the round, not the task).
  let executed = 0;
  const typed = defineTool({
    name: "typed",
    description: "Takes a number",
    parameters: Type.Object({ n: Type.Number() }),
    async execute() {
      executed++;
      return textResult("ran");
    },
  });
  const { root } = await open(
    callsThenAnswer(
      fauxToolCall("typed", { n: 1 }, { id: "b1" }),
      fauxToolCall("typed", { n: "not a number" }, { id: "i1" }),
    ),
    {
      tools: [typed],
      hooks: { beforeTool: [(call) => (call.id === "b1" ? { block: "not here" } : undefined)] },
    },
  );
  expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
  expect(executed).toBe(0);
  const results = await toolResults(root);
  expect(results.map((r) => (messageOf(r) as { toolCallId: string }).toolCallId).sort()).toEqual([
    "b1",
    "i1",
  ]);
  for (const r of results) {
    expect(messageOf(r)).toMatchObject({ isError: true });
    expect(messageOf(r)).not.toHaveProperty("durationMs");
  }
});

test("a call whose environment could not be built never executed: its tool_error result carries no durationMs (draw 38 D)", async () => {
  // Draw 38 D: contrary: the builder's throw was raised inside the timed span, so the tool_error
  // result carried a durationMs near 0 though execute() never ran (spec §8.4: results of calls that
  // did not execute have none).
  let executed = 0;
  const tool = defineTool({
    name: "work",
    description: "Runs in the conversation's environment",
    parameters: Type.Object({}),
    async execute() {
      executed++;
      return textResult("ran");
    },
  });
  const { root } = await open(callsThenAnswer(fauxToolCall("work", {}, { id: "e1" })), {
    tools: [tool],
    env: () => {
      throw new Error("no environment today");
    },
  });
  expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
  expect(executed).toBe(0);
  const [result] = await toolResults(root);
  expect(messageOf(result!)).toMatchObject({ toolCallId: "e1", isError: true });
  expect(textOf(messageOf(result!))).toContain("no environment today");
  expect(messageOf(result!)).not.toHaveProperty("durationMs");
});

test("durationMs is how long execute() took, throwing or not, and nothing before or after it: the environment's building and the afterTool chain are not counted", async () => {
  // The monotonic clock, pushed forward by the tools and the hook (never read for an assertion of time).
  const real = performance.now.bind(performance);
  let skew = 0;
  vi.spyOn(performance, "now").mockImplementation(() => real() + skew);
  const slow = defineTool({
    name: "slow",
    description: "takes 5 s of clock",
    parameters: Type.Object({}),
    // One sequential tool makes the round sequential: no clock jump of the other call falls inside.
    executionMode: "sequential",
    execute: async () => {
      skew += 5_000;
      return textResult("done");
    },
  });
  const failing = defineTool({
    name: "failing",
    description: "takes 7 s, then throws",
    parameters: Type.Object({}),
    execute: async () => {
      skew += 7_000;
      throw new Error("gave up");
    },
  });
  const { root } = await open(
    callsThenAnswer(fauxToolCall("slow", {}, { id: "c1" }), fauxToolCall("failing", {}, { id: "c2" })),
    {
      tools: [slow, failing],
      // Building the call's environment comes before execute(): not counted either.
      env: () => {
        skew += 30_000;
        return undefined;
      },
      hooks: {
        afterTool: [
          () => {
            skew += 100_000;
            return undefined;
          },
        ],
      },
    },
  );
  try {
    expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
  } finally {
    vi.restoreAllMocks();
  }
  const byCall = new Map(
    (await toolResults(root)).map((e) => {
      const m = messageOf(e) as { toolCallId: string; durationMs?: number; isError: boolean };
      return [m.toolCallId, m] as const;
    }),
  );
  // Each call's own execute time: at least its own jump, never the afterTool hook's.
  for (const [id, own] of [
    ["c1", 5_000],
    ["c2", 7_000],
  ] as const) {
    const d = byCall.get(id)!.durationMs!;
    expect(d, id).toBeGreaterThanOrEqual(own);
    expect(d, id).toBeLessThan(30_000);
  }
  expect(byCall.get("c2")!.isError).toBe(true);
});

test("durationMs ends when execute() returns: the flush of the output it left pending comes after and is not counted (draw 41)", async () => {
  // Draw 41: a duration taken after the call's last output flush (its commit counted as the call's
  // time) passed every named test: none of their tools wrote output.
  const real = performance.now.bind(performance);
  let skew = 0;
  vi.spyOn(performance, "now").mockImplementation(() => real() + skew);
  let returned = false;
  const printing = defineTool({
    name: "printing",
    description: "prints, then returns at once",
    parameters: Type.Object({}),
    execute: async (_args, api) => {
      skew += 2_000;
      api.output("printed\n");
      returned = true;
      return textResult("done");
    },
  });
  const { h, root } = await open(callsThenAnswer(fauxToolCall("printing", {}, { id: "p1" })), {
    tools: [printing],
  });
  // Every commit after execute() returned pushes the monotonic clock 50 s on: the output's flush is one.
  const stop = h.subscribe(() => {
    if (returned) skew += 50_000;
  });
  try {
    expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
  } finally {
    stop();
    vi.restoreAllMocks();
  }
  const result = (await toolResults(root)).map((e) => messageOf(e) as { durationMs?: number })[0]!;
  expect(result.durationMs).toBeGreaterThanOrEqual(2_000);
  expect(result.durationMs).toBeLessThan(50_000);
});

test("durationMs is the execute call's own time, not the tool task's lifecycle span (spec §5.3, §7.3)", async () => {
  // Two clocks told apart: the harness clock stamps lifecycle times, the monotonic one times execute.
  let clock = 1000;
  let mono = 100;
  const spy = vi.spyOn(performance, "now").mockImplementation(() => mono);
  try {
    const gate = gatedTool("hold");
    const { h, root } = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "c1" })), {
      tools: [gate.tool],
      now: () => clock,
      // Break 31D: an afterTool hook's time is not the call's (a duration taken after the hooks
      // passed): the hook takes 4000 ms of the monotonic clock.
      hooks: {
        afterTool: [
          () => {
            mono += 4000;
          },
        ],
      },
    });
    const input = await root.submit({ type: "input", content: "go" });
    await gate.started.promise;
    mono = 350;
    clock = 9000;
    gate.release.resolve();
    expect((await input.wait()).status).toBe("done");
    const [result] = await toolResults(root);
    expect((messageOf(result!) as { durationMs?: unknown }).durationMs).toBe(250);
    // The message's timestamp is the harness clock at the result commit (spec §2.2 `now`; break
    // 30E: a result stamped with Date.now() passed every test that names the result commit).
    expect((messageOf(result!) as { timestamp?: unknown }).timestamp).toBe(9000);
    const task = await h.getTask(result!.byTaskId!);
    expect([task?.startedAt, task?.endedAt]).toEqual([1000, 9000]);
  } finally {
    spy.mockRestore();
  }
});

test("a round's generation completes with its tool-calling answer also when its closing commit writes after it: a steer placed after the tools, a reset that ends the run, a follow-up a terminating round places (draw 40b)", async () => {
  // Draw 40b: the named test's closing commit wrote nothing after the answer, so a generation
  // completing with the newest entry of that commit passed it.
  for (const form of ["steer", "reset", "terminate"] as const) {
    const started = deferred();
    const release = deferred();
    const hold = defineTool({
      name: "hold",
      description: "Wait until released",
      parameters: Type.Object({}),
      async execute() {
        started.resolve();
        await release.promise;
        return form === "terminate"
          ? { ...textResult("held"), control: { terminate: true } }
          : textResult("held");
      },
    });
    const { h, root } = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "c1" })), {
      tools: [hold],
    });
    const tasks = trackTasks(h);
    const run = await root.submit({ type: "input", content: "go" });
    await started.promise;
    if (form === "steer") await root.submit({ type: "input", content: "also", whenBusy: "steer" });
    if (form === "reset") await root.reset("over");
    if (form === "terminate") await root.submit({ type: "input", content: "next", whenBusy: "followUp" });
    release.resolve();
    await run.wait();
    await root.waitForIdle();
    const entries = await root.entries();
    const calling = entries.find((e) => e.kind === "pi.assistant")!;
    const result = entries.find((e) => e.kind === "pi.tool-result")!;
    // The closing commit wrote an entry after the round's result: the steer's, the reset, the follow-up's.
    expect(entries.filter((e) => e.id > result.id).map((e) => e.kind)[0], form).toBe(
      form === "reset" ? "pi.reset" : "pi.user",
    );
    const [first] = [...tasks.values()].filter((t) => t.kind === "pi.generation");
    expect(first?.state, form).toEqual({
      status: "terminal",
      outcome: { status: "completed", result: { entryId: calling.id } },
    });
  }
});

test("Harness.usage() sums the pi.usage of every conversation", async () => {
  const { h, root } = await open(echo);
  const other = await h.createConversation({ ownership: { kind: "ownerless" } });
  await (await root.submit({ type: "input", content: "one" })).wait();
  await (await other.submit({ type: "input", content: "two" })).wait();
  const each = await Promise.all(
    [root, other].map(
      async (c) =>
        (await c.viewState()).docs["pi.usage"] as {
          models: Record<string, { input: number; output: number; totalTokens: number }>;
        },
    ),
  );
  const total = (await h.usage()).models["faux/faux-1"];
  const a = each[0]!.models["faux/faux-1"]!;
  const b = each[1]!.models["faux/faux-1"]!;
  expect(total?.totalTokens).toBe(a.totalTokens + b.totalTokens);
  expect(total?.input).toBe(a.input + b.input);
  expect(a.totalTokens).toBeGreaterThan(0);
});

test("an answer that ends aborted without an abort mark is a model error: the input is unanswered model_error", async () => {
  const { h, root, faux } = await open(() =>
    fauxAssistantMessage("cut off", { stopReason: "aborted", errorMessage: "the provider hung up" }),
  );
  const input = await root.submit({ type: "input", content: "hi" });
  // The detail is the provider's error text (spec §8.3; reading 22b).
  expect(await input.wait()).toMatchObject({
    status: "unanswered",
    reason: "model_error",
    detail: "the provider hung up",
  });
  expect(faux.requests).toHaveLength(1);
  expect(kinds(await transcript(root))).toEqual(["pi.user", "pi.assistant"]);
  expect(liveOf(h)).toEqual({});
  const [generation] = await h.tasks({ kind: "pi.generation" });
  expect(generation?.abortRequested).toBe(false);
  expect(generation?.state).toMatchObject({ status: "terminal", outcome: { status: "failed" } });
});

test("an answer that ends aborted without an abort mark is never retried, though its text reads retryable and retries are on: one request, unanswered model_error (draw 36e C)", async () => {
  // Draw 36e C: an unmarked aborted answer classified like an error (a 503 text retried) passed
  // every named test, whose aborted answer's text reads as no retryable error.
  const { root, faux } = await open(
    () => fauxAssistantMessage("cut off", { stopReason: "aborted", errorMessage: "503 Service Unavailable" }),
    { settings: { retry: { enabled: true, maxRetries: 3, baseDelayMs: 1 } } },
  );
  const input = await root.submit({ type: "input", content: "hi" });
  expect(await input.wait()).toMatchObject({
    status: "unanswered",
    reason: "model_error",
    detail: "503 Service Unavailable",
  });
  expect(faux.requests).toHaveLength(1);
  expect(kinds(await transcript(root))).toEqual(["pi.user", "pi.assistant"]);
});

/**
 * A round of two calls, `tool` (called "c1") and a gated slow one: once the first call is done its
 * slot is done with its entry and keeps nothing else, while the second still runs; then the run ends.
 */
async function firstCallDoneWhileSecondRuns(tool: ToolDefinition) {
  const slow = gatedTool("slow");
  const { h, root } = await open(
    callsThenAnswer(fauxToolCall(tool.name, {}, { id: "c1" }), fauxToolCall("slow", {}, { id: "c2" })),
    { tools: [tool, slow.tool] },
  );
  const input = await root.submit({ type: "input", content: "go" });
  await slow.started.promise;
  await until(() => liveOf(h).tools?.[0]?.status === "done", { what: "first call done" });
  const [first, second] = liveOf(h).tools ?? [];
  const [entry] = await toolResults(root);
  expect(first).toEqual({
    callId: "c1",
    name: tool.name,
    taskId: first?.taskId,
    status: "done",
    entry: entry?.id,
  });
  expect(second?.status).toBe("running");
  slow.release.resolve();
  expect((await input.wait()).status).toBe("done");
}

test("a finished call's slot is done with its entry and keeps no output while the rest of the round runs", async () => {
  const quick = defineTool({
    name: "quick",
    description: "Prints and returns",
    parameters: Type.Object({}),
    async execute(_args, api) {
      api.output("some output\n");
      return textResult("quick done");
    },
  });
  await firstCallDoneWhileSecondRuns(quick);
});

test("a call that throws after printing: its slot is done with its error entry and keeps no output while the rest of the round runs (draw 41d-B)", async () => {
  // Draw 41d-B: every named test ended its printing call with a result, an abort, a fault or a
  // restart; a failed call's terminal commit keeping its output passed them.
  const thrower = defineTool({
    name: "thrower",
    description: "Prints, then throws",
    parameters: Type.Object({}),
    async execute(_args, api) {
      api.output("some output\n");
      throw new Error("broke");
    },
  });
  await firstCallDoneWhileSecondRuns(thrower);
});

test.each([
  ["a beforeTool hook: the answer's commit writes the slot pending, the call phase's intent commit", true],
  ["no hook: the answer's commit records the intent (NOT-APPLICABLE [8.2])", false],
])(
  "a tool task sets its slot running in its intent commit; its terminal commit sets done with the entry and drops the output, dropped counts, details and diagnostics (%s)",
  async (_, hooked) => {
    const gate = deferred();
    const reporter = defineTool({
      name: "reporter",
      description: "Reports everything a slot can hold, then waits",
      parameters: Type.Object({}),
      outputLimits: { maxLines: 1, maxBytes: 1000, retain: "tail" },
      async execute(_args, api) {
        api.output("one\ntwo\nthree\n");
        api.diagnostic({ severity: "info", message: "noted" });
        await api.details({ step: 1 });
        await gate.promise;
        return textResult("reported");
      },
    });
    const { h, root } = await open(callsThenAnswer(fauxToolCall("reporter", {}, { id: "c1" })), {
      tools: [reporter],
      ...(hooked ? { hooks: { beforeTool: [() => undefined] } } : {}),
    });
    type Slot = NonNullable<LiveState["tools"]>[number];
    const commits: Array<{ phase?: string; status?: string; slot?: Slot; entries: string[] }> = [];
    h.subscribe((change) => {
      const task = change.tasks.find((t) => t.kind === "pi.tool");
      const live = change.docs.find((d) => d.conversationId === root.id && d.name === DOC.live);
      const slot = (live?.value as LiveState | undefined)?.tools?.find((s) => s.callId === "c1");
      if (!task && !slot) return;
      const state = task?.state as { status: string; checkpoint?: { phase: string } } | undefined;
      commits.push({
        ...(state?.checkpoint ? { phase: state.checkpoint.phase } : {}),
        ...(state ? { status: state.status } : {}),
        ...(slot ? { slot } : {}),
        entries: change.entries.map((e) => e.kind),
      });
    });
    const input = await root.submit({ type: "input", content: "go" });
    await until(
      () => liveOf(h).tools?.[0]?.details !== undefined && liveOf(h).tools?.[0]?.droppedLines !== undefined,
      {
        what: "everything reported",
      },
    );
    // The intent commit (the task moves to execute) is the one that sets the slot running.
    const intent = commits.find((c) => c.phase === "execute");
    expect(intent?.slot?.status).toBe("running");
    expect(commits.filter((c) => c.slot?.status === "running")[0]).toBe(intent);
    const answered = commits.find((c) => c.entries.includes("pi.assistant"));
    if (hooked) {
      expect(answered?.slot?.status).toBe("pending");
      expect(intent).not.toBe(answered);
    } else expect(intent).toBe(answered);
    const running = liveOf(h).tools![0]!;
    expect(running).toMatchObject({
      status: "running",
      output: "three\n",
      droppedLines: 2,
      details: { step: 1 },
      diagnostics: [{ severity: "info", message: "noted" }],
    });
    expect(running.droppedBytes).toBeGreaterThan(0);
    gate.resolve();
    expect((await input.wait()).status).toBe("done");
    // The terminal commit appends the result and leaves the slot done with its entry and nothing else.
    const final = commits.find((c) => c.status === "terminal");
    const [entry] = await toolResults(root);
    expect(final?.entries).toContain("pi.tool-result");
    expect(final?.slot).toEqual({
      callId: "c1",
      name: "reporter",
      taskId: running.taskId,
      status: "done",
      entry: entry!.id,
    });
  },
);

test.each([
  ["no onAbort hook", false],
  ["an onAbort hook", true],
])(
  "an aborted tool task's terminal commit sets its slot done with the entry too, dropping the output, dropped counts, details and diagnostics (%s)",
  async (_, hooked) => {
    // Break 29G: the named tests end their calls by returning (or interrupted at a restart); an abort
    // handler's terminal commit setting the slot done but keeping what it reported passed every one.
    const started = deferred();
    const reporter = defineTool({
      name: "reporter",
      description: "Reports everything a slot can hold, then works until aborted",
      parameters: Type.Object({}),
      outputLimits: { maxLines: 1, maxBytes: 1000, retain: "tail" },
      async execute(_args, api) {
        api.output("one\ntwo\nthree\n");
        api.diagnostic({ severity: "info", message: "noted" });
        await api.details({ step: 1 });
        started.resolve();
        await new Promise((_, reject) =>
          api.signal.addEventListener("abort", () => reject(api.signal.reason)),
        );
        return textResult("never");
      },
    });
    const { h, root } = await open(callsThenAnswer(fauxToolCall("reporter", {}, { id: "c1" })), {
      tools: [reporter],
      ...(hooked ? { hooks: { onAbort: [() => undefined] } } : {}),
    });
    type Slot = NonNullable<LiveState["tools"]>[number];
    const finals: Array<Slot | undefined> = [];
    h.subscribe((change) => {
      const task = change.tasks.find((t) => t.kind === "pi.tool");
      if (task?.state.status !== "terminal") return;
      const live = change.docs.find((d) => d.conversationId === root.id && d.name === DOC.live);
      finals.push((live?.value as LiveState | undefined)?.tools?.find((s) => s.callId === "c1"));
    });
    const input = await root.submit({ type: "input", content: "go" });
    await started.promise;
    await until(
      () => liveOf(h).tools?.[0]?.details !== undefined && liveOf(h).tools?.[0]?.droppedLines !== undefined,
      { what: "everything reported" },
    );
    const running = liveOf(h).tools![0]!;
    expect(running).toMatchObject({ status: "running", output: "three\n", details: { step: 1 } });
    expect(await h.abortTask(running.taskId!)).toBe("marked");
    expect((await input.wait()).status).toBe("done");
    const [entry] = await toolResults(root);
    expect(finals).toEqual([
      { callId: "c1", name: "reporter", taskId: running.taskId, status: "done", entry: entry!.id },
    ]);
  },
);

test("the retry policy is read when the attempt is classified, not when it was prepared", async () => {
  const gate = deferred();
  let retry = { enabled: true };
  const { root, faux } = await open(
    async () => {
      await gate.promise;
      return fauxError("503 Service Unavailable");
    },
    { settings: () => ({ retry: { ...retry, baseDelayMs: 1 } }) },
  );
  const input = await root.submit({ type: "input", content: "hi" });
  await until(() => faux.requests.length === 1, { what: "request sent" });
  retry = { enabled: false };
  gate.resolve();
  expect(await input.wait()).toMatchObject({ status: "unanswered", reason: "model_error" });
  expect(faux.requests).toHaveLength(1);
});

test("a sequential round led by an un-offered call: the answer's commit gives the first offered call its task (its slot names it, running), the un-offered slot done with its entry, the later call pending (draw 41b, 10)", async () => {
  // Draw 41b C: the named sequential rounds began with an offered call; a round that counted the
  // un-offered slot as the started call (so the first offered call waited, pending with no task,
  // for a later commit) passed every named test.
  const a = gatedTool("a");
  const b = gatedTool("b");
  const { h, root } = await open(
    callsThenAnswer(
      fauxToolCall("nope", {}, { id: "c1" }),
      fauxToolCall("a", {}, { id: "c2" }),
      fauxToolCall("b", {}, { id: "c3" }),
    ),
    { tools: [a.tool, b.tool], settings: { toolExecution: "sequential" } },
  );
  const answerCommits: Array<{
    entries: { id: number; kind: string }[];
    live: LiveState | undefined;
    tasks: TaskRecord[];
  }> = [];
  h.subscribe((change) => {
    const answer = change.entries.find((e) => e.kind === "pi.assistant");
    if (answer === undefined || answerCommits.length > 0) return;
    const live = change.docs.find((d) => d.conversationId === 1 && d.name === DOC.live)?.value as
      | LiveState
      | undefined;
    answerCommits.push({ entries: [...change.entries], live, tasks: [...change.tasks] });
  });
  const input = await root.submit({ type: "input", content: "go" });
  await a.started.promise;
  const [commit] = answerCommits;
  const result = commit!.entries.find((e) => e.kind === "pi.tool-result");
  expect(result).toBeDefined();
  const toolTasks = commit!.tasks.filter((t) => t.kind === "pi.tool");
  expect(toolTasks).toHaveLength(1);
  expect(commit!.live?.tools).toEqual([
    { callId: "c1", name: "nope", status: "done", entry: result!.id },
    { callId: "c2", name: "a", taskId: toolTasks[0]!.id, status: "running" },
    { callId: "c3", name: "b", status: "pending" },
  ]);
  a.release.resolve();
  await b.started.promise;
  b.release.resolve();
  expect((await input.wait()).status).toBe("done");
});
