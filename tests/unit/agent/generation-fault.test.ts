/**
 * Outcomes the scheduler writes for a built-in task (spec §5.4 harness hook, §8.2, §8.3): a
 * generation that faults settles its run's inputs unanswered `faulted` with the error as detail,
 * keeps at most its committed partial (as an aborted pi.assistant entry), and leaves pi.live empty;
 * the conversation then takes new input normally.
 */

import { fauxAssistantMessage, fauxToolCall } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { expect, test } from "vitest";
import { defineTool, type LiveState, textResult } from "../../../worker/index.ts";
import { deferred, memoryStore, until } from "../../../worker/testing.ts";
import {
  callsThenAnswer,
  diagnosticsOf,
  echo,
  faultingHook,
  gatedTool,
  inboxOf,
  kinds,
  liveOf,
  messageOf,
  open,
  toolResults,
  transcript,
} from "./fixtures.ts";

test("a faulted generation settles its input unanswered faulted with the error, clears pi.live, and the next input runs", async () => {
  let broken = true;
  // A hook's throw is reported (spec §7.2); a reporter that throws as well faults the phase.
  const { h, root } = await open(
    echo,
    faultingHook("afterResponse", "hook bug", () => broken),
  );
  // What each commit writes of the fault: the generation's outcome, the input's settlement, the run.
  const commits: string[][] = [];
  h.subscribe((change) => {
    const wrote: string[] = [];
    for (const t of change.tasks)
      if (t.kind === "pi.generation" && t.state.status === "terminal") wrote.push("generation terminal");
    for (const s of change.submissions) if (s.status === "unanswered") wrote.push("input unanswered");
    for (const d of change.docs)
      if (d.name === "pi.live" && (d.value as { run?: unknown } | undefined)?.run === undefined)
        // run, generation and tools all removed (reading 23d: run alone was read).
        wrote.push(JSON.stringify(d.value) === "{}" ? "pi.live cleared" : "run removed");
    if (wrote.length > 0) commits.push(wrote.sort());
  });
  const input = await root.submit({ type: "input", content: "hi" });
  expect(await input.wait()).toEqual({ status: "unanswered", reason: "faulted", detail: "hook bug" });
  const [generation] = await h.tasks({ kind: "pi.generation" });
  expect(generation?.state).toMatchObject({
    status: "terminal",
    outcome: { status: "faulted", error: { message: "hook bug" } },
  });
  expect(liveOf(h)).toEqual({});
  // The harness's cleanup runs in the commit that writes the fault (spec §5.4).
  expect(commits).toEqual([["generation terminal", "input unanswered", "pi.live cleared"]]);
  for (const e of await transcript(root))
    if (e.kind === "pi.assistant") expect(messageOf(e)).toMatchObject({ stopReason: "aborted" });
  broken = false;
  expect((await (await root.submit({ type: "input", content: "again" })).wait()).status).toBe("done");
  expect(kinds(await transcript(root)).filter((k) => k === "pi.user")).toHaveLength(2);
});

test("a generation that faults with an empty error message settles its input with that empty text as detail: the error is kept whatever its text (draw 39d-C)", async () => {
  // Draw 39d-C: every named fault had text; a cleanup that kept the detail only when truthy passed.
  let broken = true;
  const { h, root } = await open(
    echo,
    faultingHook("afterResponse", "", () => broken),
  );
  const input = await root.submit({ type: "input", content: "hi" });
  expect(await input.wait()).toEqual({ status: "unanswered", reason: "faulted", detail: "" });
  const [generation] = await h.tasks({ kind: "pi.generation" });
  expect(generation?.state).toMatchObject({
    status: "terminal",
    outcome: { status: "faulted", error: { message: "" } },
  });
  expect(liveOf(h)).toEqual({});
  broken = false;
  expect((await (await root.submit({ type: "input", content: "again" })).wait()).status).toBe("done");
});

test("a faulted generation settles every input of its run: a steer placed at the run's tool boundary is unanswered faulted too", async () => {
  // Break 30J: the named test's run had one input; a fault that settled only the first passed it.
  const gate = gatedTool("hold");
  let responses = 0;
  const { h, root } = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "c1" })), {
    tools: [gate.tool],
    ...faultingHook("afterResponse", "hook bug", () => ++responses >= 2),
  });
  const first = await root.submit({ type: "input", content: "one" });
  await gate.started.promise;
  const steer = await root.submit({ type: "input", content: "steer", whenBusy: "steer" });
  gate.release.resolve();
  const faulted = { status: "unanswered", reason: "faulted", detail: "hook bug" };
  expect(await first.wait()).toEqual(faulted);
  // Settled in the same commit as the first (read at once, not waited for).
  expect(await steer.record()).toMatchObject(faulted);
  // The steer was placed (it is in the transcript) before the fault settled it.
  expect(kinds(await transcript(root)).filter((k) => k === "pi.user")).toHaveLength(2);
  expect(liveOf(h)).toEqual({});
});

test("a generation that faults in its tools phase, its round's slots still listed, has run, generation and tools removed from pi.live by the fault's commit (break 31E)", async () => {
  // Break 31E: every named fault came outside a tool round, so a cleanup that left pi.live.tools
  // passed them. A throwing afterTools hook whose reporter throws faults the tools phase.
  let broken = true;
  const gate = gatedTool("hold");
  gate.release.resolve();
  const { h, root } = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "c1" })), {
    tools: [gate.tool],
    onReport: (error) => {
      throw error;
    },
    hooks: {
      afterTools: [
        () => {
          if (broken) throw new Error("round bug");
        },
      ],
    },
  });
  const input = await root.submit({ type: "input", content: "one" });
  expect(await input.wait()).toEqual({ status: "unanswered", reason: "faulted", detail: "round bug" });
  expect(liveOf(h)).toEqual({});
  broken = false;
  expect((await (await root.submit({ type: "input", content: "again" })).wait()).status).toBe("done");
});

test("a faulted run leaves the inbox alone (spec §6): its queued follow-up stays queued until the next submission's boundary", async () => {
  let broken = true;
  const hold = deferred();
  const { h, root } = await open(
    async (req, n) => {
      if (n === 1) await hold.promise;
      return echo(req, n);
    },
    faultingHook("afterResponse", "hook bug", () => broken),
  );
  const first = await root.submit({ type: "input", content: "one" });
  const queued = await root.submit({ type: "input", content: "two" });
  // A queued steer and write are left alone too (break 28S: placing them at the fault passed).
  const steer = await root.submit({ type: "input", content: "steer", whenBusy: "steer" });
  const note = await root.submit({ type: "write", entry: { kind: "app.note", data: { n: 1 } } });
  hold.resolve();
  expect(await first.wait()).toMatchObject({ status: "unanswered", reason: "faulted" });
  await root.waitForIdle();
  expect(root.busy).toBe(false);
  expect(inboxOf(h).items.map((i) => i.id)).toEqual([queued.id, steer.id, note.id]);
  expect((await queued.record()).status).toBe("queued");
  expect((await steer.record()).status).toBe("queued");
  expect((await note.record()).status).toBe("queued");
  expect(kinds(await transcript(root))).not.toContain("app.note");
  broken = false;
  const third = await root.submit({ type: "input", content: "three" });
  expect((await queued.wait()).status).toBe("done");
  expect((await steer.wait()).status).toBe("done");
  expect((await third.wait()).status).toBe("done");
  expect((await note.record()).status).toBe("done");
  expect(kinds(await transcript(root)).filter((k) => k === "pi.user")).toHaveLength(4);
});

test("a faulted tool task writes no result entry; the run continues and the model sees a synthesized error result", async () => {
  const gate = gatedTool("hold");
  const { h, root, faux } = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "c1" })), {
    tools: [gate.tool],
    ...faultingHook("afterTool", "afterTool bug"),
  });
  // The tool's slot as the commit that ends the tool task leaves it.
  const slotAtEnd: unknown[] = [];
  h.subscribe((change) => {
    const ended = change.tasks.find((t) => t.kind === "pi.tool" && t.state.status === "terminal");
    const doc = change.docs.find((d) => d.name === "pi.live");
    if (ended)
      slotAtEnd.push((doc?.value as LiveState | undefined)?.tools?.find((t) => t.taskId === ended.id));
  });
  const input = await root.submit({ type: "input", content: "go" });
  await gate.started.promise;
  gate.release.resolve();
  expect((await input.wait()).status).toBe("done");
  const [tool] = await h.tasks({ kind: "pi.tool" });
  expect(tool?.state).toMatchObject({ status: "terminal", outcome: { status: "faulted" } });
  // The fault's commit marks the slot done, without an entry (spec §5.4, §8.2).
  expect(slotAtEnd).toHaveLength(1);
  expect(slotAtEnd[0]).toMatchObject({ callId: "c1", status: "done" });
  expect(slotAtEnd[0]).not.toHaveProperty("entry");
  expect(await toolResults(root)).toEqual([]);
  const second = faux.requests[1]!;
  const result = second.messages.find((m) => m.role === "toolResult");
  expect(result).toMatchObject({ toolCallId: "c1", isError: true });
  expect(liveOf(h)).toEqual({});
});

test("an abort-marked tool task the scheduler orphans at open (its definition cannot take it) has its slot done in the orphaning commit; the run continues", async () => {
  const gate = gatedTool("hold");
  const first = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "c1" })), { tools: [gate.tool] });
  const input = await first.root.submit({ type: "input", content: "go" });
  await gate.started.promise;
  // The committed image while the tool runs, marked for abort and too new for the next engine's
  // definition: the scheduler, not abortTask, writes the orphaned outcome (spec §5.4).
  const store = await memoryStore(first.store.image());
  const [stored] = await first.h.tasks({ kind: "pi.tool" });
  await store.commit((sql) =>
    sql.run("UPDATE tasks SET version = 99, abort_requested = 1 WHERE id = ?", [stored!.id]),
  );
  const { h, faux } = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "c1" })), {
    store,
    tools: [gatedTool("hold").tool],
    paused: true,
  });
  const slotAtEnd: unknown[] = [];
  h.subscribe((change) => {
    const ended = change.tasks.find((t) => t.id === stored!.id && t.state.status === "terminal");
    const doc = change.docs.find((d) => d.name === "pi.live");
    if (ended)
      slotAtEnd.push((doc?.value as LiveState | undefined)?.tools?.find((t) => t.taskId === ended.id));
  });
  h.resume();
  expect((await h.waitForTask(stored!.id)).state).toMatchObject({
    status: "terminal",
    outcome: { status: "orphaned", reason: "task_too_old" },
  });
  expect(slotAtEnd).toHaveLength(1);
  expect(slotAtEnd[0]).toMatchObject({ callId: "c1", status: "done" });
  expect((await (await h.submission(input.id))!.wait()).status).toBe("done");
  const result = faux.requests.at(-1)!.messages.find((m) => m.role === "toolResult");
  expect(result).toMatchObject({ toolCallId: "c1", isError: true });
  expect(liveOf(h)).toEqual({});
});

test("a tool task orphaned at open after its output was stored writes no result entry from that output; the model sees a synthesized error result", async () => {
  // Draw 34d: the scheduler's cleanup turning a slot's stored output into a result entry (as an
  // interrupted call's result carries it) passed every named test: none of their tools printed.
  const release = deferred();
  const printer = (printed: { resolve: () => void }) =>
    defineTool({
      name: "hold",
      description: "Print, then wait until released",
      parameters: Type.Object({}),
      async execute(_args, api) {
        api.output("partial line\n");
        printed.resolve();
        await release.promise;
        return textResult("hold finished");
      },
    });
  const printed = deferred();
  const first = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "c1" })), {
    tools: [printer(printed)],
  });
  const input = await first.root.submit({ type: "input", content: "go" });
  await printed.promise;
  await until(() => liveOf(first.h).tools?.[0]?.output === "partial line\n", { what: "the output stored" });
  const store = await memoryStore(first.store.image());
  release.resolve();
  const [stored] = await first.h.tasks({ kind: "pi.tool" });
  await store.commit((sql) =>
    sql.run("UPDATE tasks SET version = 99, abort_requested = 1 WHERE id = ?", [stored!.id]),
  );
  const { h, root, faux } = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "c1" })), {
    store,
    tools: [printer(deferred())],
  });
  expect((await h.waitForTask(stored!.id)).state).toMatchObject({
    status: "terminal",
    outcome: { status: "orphaned", reason: "task_too_old" },
  });
  expect((await (await h.submission(input.id))!.wait()).status).toBe("done");
  expect(await toolResults(root)).toEqual([]);
  const result = faux.requests.at(-1)!.messages.find((m) => m.role === "toolResult");
  expect(result).toMatchObject({ toolCallId: "c1", isError: true });
  expect(liveOf(h)).toEqual({});
});

test("a tool task whose stored checkpoint is unreadable at open faults, its slot done without an entry while another call of its round still runs; the run continues with a synthesized error result", async () => {
  // Break 30L: a fault written for an unreadable row skipped the definition's cleanup (the slot
  // stayed running) and every test passed; the named ones fault a live task.
  const slow = (gate: { promise: Promise<void> }, started: { resolve: () => void }) =>
    defineTool({
      name: "slow",
      description: "Wait until released, run again after a crash",
      parameters: Type.Object({}),
      replay: "safe",
      async execute() {
        started.resolve();
        await gate.promise;
        return textResult("slow finished");
      },
    });
  const calls = callsThenAnswer(
    fauxToolCall("hold", {}, { id: "c1" }),
    fauxToolCall("slow", {}, { id: "c2" }),
  );
  const hold = gatedTool("hold");
  const firstSlow = deferred();
  const firstStarted = deferred();
  const first = await open(calls, { tools: [hold.tool, slow(firstSlow, firstStarted)] });
  const input = await first.root.submit({ type: "input", content: "go" });
  await hold.started.promise;
  await firstStarted.promise;
  const store = await memoryStore(first.store.image());
  const stored = (await first.h.tasks({ kind: "pi.tool" })).find((t) =>
    JSON.stringify(t.input).includes('"c1"'),
  );
  await store.commit((sql) => sql.run("UPDATE tasks SET state = '{bad' WHERE id = ?", [stored!.id]));
  const gate = deferred();
  const started = deferred();
  const { h, faux } = await open(calls, { store, tools: [gatedTool("hold").tool, slow(gate, started)] });
  expect((await h.waitForTask(stored!.id)).state).toMatchObject({
    status: "terminal",
    outcome: {
      status: "faulted",
      error: { message: expect.stringMatching(/column state is not valid JSON/) },
    },
  });
  await started.promise;
  // The other call runs on; the faulted one's slot is done, without an entry.
  const slots = liveOf(h).tools ?? [];
  expect(slots.find((t) => t.callId === "c1")).toMatchObject({ status: "done" });
  expect(slots.find((t) => t.callId === "c1")).not.toHaveProperty("entry");
  expect(slots.find((t) => t.callId === "c2")).toMatchObject({ status: "running" });
  gate.resolve();
  expect((await (await h.submission(input.id))!.wait()).status).toBe("done");
  const results = faux.requests.at(-1)!.messages.filter((m) => m.role === "toolResult");
  expect(results).toMatchObject([
    { toolCallId: "c1", isError: true },
    { toolCallId: "c2", isError: false },
  ]);
  expect(liveOf(h)).toEqual({});
});

test("a generation whose stored row is unreadable at open faults with the diagnostic and gets the generation's cleanup: its input unanswered faulted, pi.live {}, the next input runs (draw 33C)", async () => {
  // Draw 33C: every named generation fault came from a live invocation (a throwing hook, malformed
  // data) or an abort; the open's fault of an unreadable row skipping the generation's cleanup (run
  // control kept, the conversation busy for good) passed every test. The tool case is break 30L's.
  const held = deferred();
  const first = await open(async () => {
    await held.promise;
    return fauxAssistantMessage("late");
  });
  const input = await first.root.submit({ type: "input", content: "go" });
  await until(() => first.faux.requests.length === 1, { what: "the request under way" });
  const generation = liveOf(first.h).run!.taskId;
  const store = await memoryStore(first.store.image());
  await store.commit((sql) => sql.run("UPDATE tasks SET state = '{bad' WHERE id = ?", [generation]));
  const { h, root } = await open(echo, { store });
  expect((await h.waitForTask(generation)).state).toMatchObject({
    status: "terminal",
    outcome: {
      status: "faulted",
      error: { message: expect.stringMatching(/column state is not valid JSON/) },
    },
  });
  // Read, not waited on: the fault and its cleanup are one commit, so the input is settled already.
  expect(await (await h.submission(input.id))!.record()).toMatchObject({
    status: "unanswered",
    reason: "faulted",
    detail: expect.stringMatching(/column state is not valid JSON/),
  });
  expect(liveOf(h)).toEqual({});
  expect(inboxOf(h)).toEqual({ items: [] });
  const next = await root.submit({ type: "input", content: "again" });
  expect((await next.wait()).status).toBe("done");
  expect(liveOf(h)).toEqual({});
  held.resolve();
});

test("an orphaned tool task (aborted while its definition cannot take it) leaves its slot done without an entry; the run continues with a synthesized error result", async () => {
  // Draw 37bC: the orphaned call had printed nothing, so an orphaning cleanup that kept the slot's
  // output and details (a slot holds output only while running, spec §8.2) passed; it prints first.
  const started = deferred();
  const printing = defineTool({
    name: "hold",
    description: "print, then wait until aborted",
    parameters: Type.Object({}),
    async execute(_args, api) {
      api.output("partial line\n");
      await api.details({ step: 1 });
      started.resolve();
      await new Promise<void>((_resolve, reject) => {
        api.signal.addEventListener("abort", () => reject(api.signal.reason), { once: true });
      });
      return textResult("hold finished");
    },
  });
  const first = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "c1" })), { tools: [printing] });
  const input = await first.root.submit({ type: "input", content: "go" });
  await started.promise;
  await until(() => liveOf(first.h).tools?.[0]?.output === "partial line\n", { what: "the output stored" });
  // The committed image while the tool runs, opened by an engine whose tool definition is older.
  const store = await memoryStore(first.store.image());
  const [stored] = await first.h.tasks({ kind: "pi.tool" });
  await store.commit((sql) => sql.run("UPDATE tasks SET version = 99 WHERE id = ?", [stored!.id]));
  const { h, faux } = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "c1" })), {
    store,
    tools: [gatedTool("hold").tool],
  });
  await until(() => h.inspect().tasks.some((t) => t.record.id === stored!.id && t.state.kind === "blocked"), {
    what: "tool blocked",
  });
  const slotAtEnd: unknown[] = [];
  h.subscribe((change) => {
    const ended = change.tasks.find((t) => t.id === stored!.id && t.state.status === "terminal");
    const doc = change.docs.find((d) => d.name === "pi.live");
    if (ended)
      slotAtEnd.push((doc?.value as LiveState | undefined)?.tools?.find((t) => t.taskId === ended.id));
  });
  expect(await h.abortTask(stored!.id)).toBe("marked");
  expect((await h.getTask(stored!.id))?.state).toMatchObject({
    status: "terminal",
    outcome: { status: "orphaned", reason: "task_too_old" },
  });
  expect(slotAtEnd).toHaveLength(1);
  expect(slotAtEnd[0]).toMatchObject({ callId: "c1", status: "done" });
  expect(slotAtEnd[0]).not.toHaveProperty("entry");
  for (const key of ["output", "droppedBytes", "droppedLines", "details", "diagnostics"])
    expect(slotAtEnd[0]).not.toHaveProperty(key);
  // The run goes on: the model is asked again with an error result for the call, and answers.
  expect((await (await h.submission(input.id))!.wait()).status).toBe("done");
  const root = await h.root();
  expect(await toolResults(root)).toEqual([]);
  const result = faux.requests.at(-1)!.messages.find((m) => m.role === "toolResult");
  expect(result).toMatchObject({ toolCallId: "c1", isError: true });
  expect(liveOf(h)).toEqual({});
});

test("a faulted call among siblings: only its own slot is done without an entry, in the fault's commit; the sibling's result stays and the run continues with both", async () => {
  // Break 28G: the named tests fault the only call of a round; here the faulted call is the second
  // of two, its sibling already answered.
  const ok = gatedTool("ok");
  const gate = gatedTool("hold");
  const { h, root, faux } = await open(
    callsThenAnswer(fauxToolCall("ok", {}, { id: "c1" }), fauxToolCall("hold", {}, { id: "c2" })),
    {
      tools: [ok.tool, gate.tool],
      onReport: (error) => {
        throw error;
      },
      hooks: {
        afterTool: [
          (call) => {
            if (call.name === "hold") throw new Error("afterTool bug");
          },
        ],
      },
    },
  );
  const slotsAtFault: unknown[] = [];
  h.subscribe((change) => {
    const ended = change.tasks.find(
      (t) => t.kind === "pi.tool" && t.state.status === "terminal" && t.state.outcome.status === "faulted",
    );
    const doc = change.docs.find((d) => d.name === "pi.live");
    if (ended) slotsAtFault.push((doc?.value as LiveState | undefined)?.tools);
  });
  const input = await root.submit({ type: "input", content: "go" });
  await ok.started.promise;
  await gate.started.promise;
  ok.release.resolve();
  await until(() => liveOf(h).tools?.find((s) => s.callId === "c1")?.status === "done", {
    what: "the sibling's result",
  });
  gate.release.resolve();
  expect((await input.wait()).status).toBe("done");
  const outcomes = (await h.tasks({ kind: "pi.tool" })).map((t) =>
    t.state.status === "terminal" ? t.state.outcome.status : t.state.status,
  );
  expect(outcomes.sort()).toEqual(["completed", "faulted"]);
  expect(slotsAtFault).toHaveLength(1);
  const [first, second] = slotsAtFault[0] as LiveState["tools"] & unknown[];
  expect(second).toMatchObject({ callId: "c2", status: "done" });
  expect(second).not.toHaveProperty("entry");
  const results = await toolResults(root);
  expect(results).toHaveLength(1);
  expect(first).toMatchObject({ callId: "c1", status: "done", entry: results[0]!.id });
  const request = faux.requests[1]!.messages.filter((m) => m.role === "toolResult");
  expect(request.map((m) => [m.toolCallId, m.isError])).toEqual([
    ["c1", false],
    ["c2", true],
  ]);
  expect(liveOf(h)).toEqual({});
});

test("aborting the generation after a call of its round faulted: the faulted call keeps its done slot without an entry, the generation writes it no result, the running sibling ends aborted", async () => {
  // Spec §8.5: the abort handler answers only the calls still pending; "a started call whose task
  // faulted or was orphaned keeps its done slot without an entry". Break 31F: a handler that also
  // answered a done slot without an entry passed every test (none aborted a round after a fault).
  const ok = gatedTool("ok");
  const gate = gatedTool("hold");
  const { h, root } = await open(
    callsThenAnswer(fauxToolCall("hold", {}, { id: "c1" }), fauxToolCall("ok", {}, { id: "c2" })),
    {
      tools: [ok.tool, gate.tool],
      onReport: (error) => {
        if ((error as Error).message === "afterTool bug") throw error;
      },
      hooks: {
        afterTool: [
          (call) => {
            if (call.name === "hold") throw new Error("afterTool bug");
          },
        ],
      },
    },
  );
  const input = await root.submit({ type: "input", content: "go" });
  await ok.started.promise;
  await gate.started.promise;
  gate.release.resolve();
  await until(() => liveOf(h).tools?.find((s) => s.callId === "c1")?.status === "done", {
    what: "the faulted call's slot done",
  });
  expect(liveOf(h).tools?.find((s) => s.callId === "c1")).not.toHaveProperty("entry");
  const [generation] = await h.tasks({ kind: "pi.generation" });
  await h.abortTask(generation!.id);
  expect(await input.wait()).toMatchObject({ status: "unanswered", reason: "aborted" });
  const results = await toolResults(root);
  expect(results.map((e) => (messageOf(e) as { toolCallId: string }).toolCallId)).toEqual(["c2"]);
  expect(diagnosticsOf(results[0]!).map((d) => d.code)).toContain("aborted");
  expect(results[0]!.byTaskId).not.toBe(generation!.id);
  expect((await h.getTask(generation!.id))?.state).toMatchObject({
    status: "terminal",
    outcome: { status: "aborted" },
  });
  expect(liveOf(h)).toEqual({});
});

test("a tool task orphaned at open before its intent commit (its slot still pending behind a beforeTool hook) has its slot done without an entry in the orphaning commit; the run continues (draw 41b, 19)", async () => {
  // Draw 41b C: every named fault and orphan ended a call whose slot was running; a cleanup that
  // marked only a running slot done passed them. Here a beforeTool hook holds the call before its
  // intent commit, so the stored slot is still pending when the task is orphaned.
  const inHook = deferred();
  const first = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "c1" })), {
    tools: [gatedTool("hold").tool],
    hooks: {
      beforeTool: [
        async (_call, _api, context) => {
          inHook.resolve();
          await new Promise<void>((_resolve, reject) => {
            context.signal?.addEventListener("abort", () => reject(context.signal?.reason), { once: true });
          });
          return undefined;
        },
      ],
    },
  });
  const input = await first.root.submit({ type: "input", content: "go" });
  await inHook.promise;
  expect(liveOf(first.h).tools?.[0]).toMatchObject({ callId: "c1", status: "pending" });
  // The committed image while the hook runs, marked for abort and too new for the next engine.
  const store = await memoryStore(first.store.image());
  const [stored] = await first.h.tasks({ kind: "pi.tool" });
  await store.commit((sql) =>
    sql.run("UPDATE tasks SET version = 99, abort_requested = 1 WHERE id = ?", [stored!.id]),
  );
  const { h, faux } = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "c1" })), {
    store,
    tools: [gatedTool("hold").tool],
    paused: true,
  });
  const slotAtEnd: unknown[] = [];
  h.subscribe((change) => {
    const ended = change.tasks.find((t) => t.id === stored!.id && t.state.status === "terminal");
    const doc = change.docs.find((d) => d.name === "pi.live");
    if (ended)
      slotAtEnd.push((doc?.value as LiveState | undefined)?.tools?.find((t) => t.taskId === ended.id));
  });
  h.resume();
  expect((await h.waitForTask(stored!.id)).state).toMatchObject({
    status: "terminal",
    outcome: { status: "orphaned", reason: "task_too_old" },
  });
  expect(slotAtEnd).toHaveLength(1);
  expect(slotAtEnd[0]).toMatchObject({ callId: "c1", status: "done" });
  expect(slotAtEnd[0]).not.toHaveProperty("entry");
  expect((await (await h.submission(input.id))!.wait()).status).toBe("done");
  expect(await toolResults(await h.root())).toEqual([]);
  const result = faux.requests.at(-1)!.messages.find((m) => m.role === "toolResult");
  expect(result).toMatchObject({ toolCallId: "c1", isError: true });
  expect(liveOf(h)).toEqual({});
});
