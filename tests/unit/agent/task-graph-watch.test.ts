/**
 * The live task graph (spec §9.5): `watchTaskGraph()` starts from the live tasks and gets a frame per
 * commit that changed a node, so it shows work while it runs and empties as it finishes; a commit that
 * changes no task makes no frame. Exercise 7 (see core/exercises.test.ts): two parallel subagents, one of them
 * calling a tool, shown as one tree while they run.
 */
import { fauxAssistantMessage, fauxToolCall, type Message } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { expect, test } from "vitest";
import { textResult } from "../../../worker/agent/tools/contract.ts";
import { createSubagentTool, defineTool, type TaskGraph, type TaskGraphNode } from "../../../worker/index.ts";
import { deferred, until } from "../../../worker/testing.ts";
import { parked } from "../core/fixtures.ts";
import { callsThenAnswer, echo, gatedTool, open } from "./fixtures.ts";

const nodes = (g: TaskGraph): TaskGraphNode[] => Object.values(g.tasks);

test("watchTaskGraph shows a running tool call under its generation and empties as the run finishes", async () => {
  const hold = gatedTool();
  const { h, root } = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "call-1" })), {
    tools: [hold.tool],
  });
  const watch = await h.watchTaskGraph();
  expect(watch.value).toEqual({ tasks: {} });
  const seen: TaskGraph[] = [];
  watch.start((frame) => void seen.push(frame.value));
  const input = await root.submit({ type: "input", content: "hold it" });
  await hold.started.promise;
  await until(
    () =>
      nodes(seen.at(-1) ?? { tasks: {} }).some((n) => n.kind === "pi.tool" && n.state.status === "running"),
    {
      what: "the running call in the graph",
    },
  );
  const running = nodes(seen.at(-1)!);
  const generation = running.find((n) => n.kind === "pi.generation")!;
  const call = running.find((n) => n.kind === "pi.tool")!;
  expect(generation).toMatchObject({ conversationId: root.id, state: { status: "waiting", on: [call.id] } });
  expect(generation.owner).toBeUndefined();
  expect(call).toMatchObject({ owner: generation.id, conversationId: root.id, state: { status: "running" } });
  // What the watch shows is what taskGraph() reads from the same records.
  expect(seen.at(-1)).toEqual(h.taskGraph());
  hold.release.resolve();
  expect((await input.wait()).status).toBe("done");
  await h.waitForIdle();
  await until(() => Object.keys(seen.at(-1)!.tasks).length === 0, { what: "the graph empties" });
  expect(watch.value).toEqual({ tasks: {} });
  // A commit that changes no task changes no node: no frame.
  const frames = seen.length;
  await (await root.submit({ type: "write", entry: { kind: "note", data: {} } })).wait();
  await new Promise((r) => setTimeout(r, 20));
  expect(seen).toHaveLength(frames);
  await watch.stop();
});

test("a commit that only creates a conversation a live task owns is a frame: the watch converges on the task's conversations", async () => {
  // Break 29H: every graph frame came from a task change, so a mount that ignored a commit touching
  // only conversations (the task's owned conversations changed, no task did) passed every test.
  const hold = gatedTool();
  const { h, root } = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "call-1" })), {
    tools: [hold.tool],
  });
  const watch = await h.watchTaskGraph();
  const seen: TaskGraph[] = [];
  watch.start((frame) => void seen.push(frame.value));
  const input = await root.submit({ type: "input", content: "hold it" });
  await hold.started.promise;
  const call = nodes(h.taskGraph()).find((n) => n.kind === "pi.tool")!;
  await until(() => seen.at(-1)?.tasks[String(call.id)] !== undefined, { what: "the call in the graph" });
  const owned = await h.transaction((tx) => tx.createConversation({ kind: "task", taskId: call.id }).id);
  expect(h.taskGraph().tasks[String(call.id)]?.conversations).toEqual([owned]);
  await until(() => seen.at(-1)?.tasks[String(call.id)]?.conversations.includes(owned) === true, {
    what: "the owned conversation in the watched graph",
  });
  expect(seen.at(-1)).toEqual(h.taskGraph());
  hold.release.resolve();
  expect((await input.wait()).status).toBe("done");
  await watch.stop();
});

test("a second task-graph watch, acquired while the mount lives, holds the graph of its own acquisition; later commits buffer until its start() (break 31G)", async () => {
  // Break 31G: every test acquired the mount's first watch; a later watch handed the graph the mount
  // was built with, not the one it holds now, passed them.
  const hold = gatedTool();
  const { h, root } = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "call-1" })), {
    tools: [hold.tool],
  });
  const first = await h.watchTaskGraph();
  first.start(() => undefined);
  const input = await root.submit({ type: "input", content: "hold it" });
  await hold.started.promise;
  const now = h.taskGraph();
  expect(nodes(now).some((n) => n.kind === "pi.tool")).toBe(true);
  const second = await h.watchTaskGraph();
  expect(second.value).toEqual(now);
  hold.release.resolve();
  expect((await input.wait()).status).toBe("done");
  await h.waitForIdle();
  // The run's commits are buffered, the value still the acquisition graph.
  expect(second.pending).toBeGreaterThan(0);
  expect(second.value).toEqual(now);
  const seen: TaskGraph[] = [];
  second.start((frame) => void seen.push(frame.value));
  await until(() => seen.length > 0 && Object.keys(seen.at(-1)!.tasks).length === 0, {
    what: "the buffered frames, ending empty",
  });
  await first.stop();
  await second.stop();
});

test("every graph a task-graph watch delivered stays as it was delivered: a node that changes later (a call that starts, a generation that waits, both ending) changes none of them (sweep 42, 124)", async () => {
  // Sweep 42, 124: the revisions read stable were a conversation watch's only; a graph mount that
  // updated a changed node in place (the new graph sharing the old node object) passed every test.
  const hold = gatedTool();
  const { h, root } = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "call-1" })), {
    tools: [hold.tool],
  });
  const watch = await h.watchTaskGraph();
  const revisions: Array<{ value: TaskGraph; json: string }> = [
    { value: watch.value, json: JSON.stringify(watch.value) },
  ];
  watch.start((frame) => void revisions.push({ value: frame.value, json: JSON.stringify(frame.value) }));
  const input = await root.submit({ type: "input", content: "hold it" });
  await hold.started.promise;
  await until(
    () =>
      revisions.some((r) => nodes(r.value).some((n) => n.kind === "pi.tool" && n.state.status === "running")),
    {
      what: "the running call delivered",
    },
  );
  hold.release.resolve();
  expect((await input.wait()).status).toBe("done");
  await h.waitForIdle();
  await until(() => Object.keys(revisions.at(-1)!.value.tasks).length === 0, { what: "the graph empties" });
  for (const r of revisions) expect(JSON.stringify(r.value)).toBe(r.json);
  // Some node was delivered in more than one state, so a later commit had a node to change.
  const states = new Map<string, Set<string>>();
  for (const r of revisions)
    for (const n of nodes(r.value))
      states.set(String(n.id), (states.get(String(n.id)) ?? new Set()).add(JSON.stringify(n.state)));
  expect([...states.values()].some((s) => s.size > 1)).toBe(true);
  await watch.stop();
});

test("a task-graph watch's frames carry their commits' sequences: each greater than the one before (draw 40b D)", async () => {
  // Draw 40b D: sequences were asserted on the session's commit listeners and on a conversation
  // view's frames only; graph frames that all carried one sequence passed every test.
  const hold = gatedTool();
  const { h, root } = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "call-1" })), {
    tools: [hold.tool],
  });
  const watch = await h.watchTaskGraph();
  const seqs: number[] = [];
  watch.start((frame) => void seqs.push(frame.seq));
  const input = await root.submit({ type: "input", content: "hold it" });
  await hold.started.promise;
  hold.release.resolve();
  expect((await input.wait()).status).toBe("done");
  await h.waitForIdle();
  await until(() => Object.keys(watch.value.tasks).length === 0 && seqs.length >= 3, {
    what: "the run's graph frames, ending empty",
  });
  for (let i = 1; i < seqs.length; i++) expect(seqs[i]!).toBeGreaterThan(seqs[i - 1]!);
  await watch.stop();
});

test("a stalled task-graph watch keeps at most 100 frames: the backlog is replaced by one frame of the newest graph", async () => {
  const { h, root } = await open(echo);
  const watch = await h.watchTaskGraph();
  const stall = deferred();
  const frames: Array<{ ops: string[]; tasks: number }> = [];
  let first = true;
  watch.start(async (frame) => {
    if (first) {
      first = false;
      await stall.promise;
      return;
    }
    frames.push({ ops: frame.ops.map((o) => o.op), tasks: Object.keys(frame.value.tasks).length });
  });
  // Each run creates its generation and ends it: at least two node changes, 120 in all.
  for (let i = 0; i < 60; i++)
    expect((await (await root.submit({ type: "input", content: `n${i}` })).wait()).status).toBe("done");
  await h.waitForIdle();
  expect(watch.pending).toBeLessThanOrEqual(100);
  expect(watch.collapsed).toBeGreaterThan(0);
  stall.resolve();
  await until(() => watch.pending === 0 && frames.length > 0, { what: "the backlog delivered" });
  expect(frames.length).toBeLessThanOrEqual(100);
  expect(frames[0]!.ops).toEqual(["replace"]);
  expect(frames.at(-1)!.tasks).toBe(0);
  expect(watch.value).toEqual({ tasks: {} });
  await watch.stop();
});

test("closing the harness ends a task-graph watch", async () => {
  const { h } = await open(echo);
  const watch = await h.watchTaskGraph();
  watch.start(() => undefined);
  await h.close();
  expect(await watch.closed).toBe("closed");
});

test("closing the harness ends a task-graph watch at its seal: a task created by a commit that settles during close sends it nothing (break 30C)", async () => {
  const job = parked("job");
  const { h } = await open(echo, { tasks: [job] });
  const watch = await h.watchTaskGraph();
  const seen: TaskGraph[] = [];
  watch.start((frame) => void seen.push(frame.value));
  const before = watch.value;
  // A commit admitted before the seal, holding the line while close begins: it settles during close.
  const gate = deferred();
  const inCallback = deferred();
  const late = h.transaction(async (tx) => {
    inCallback.resolve();
    await gate.promise;
    tx.createTask(job, null, { ownership: { kind: "conversation" }, conversationId: 1 });
  });
  await inCallback.promise;
  const closing = h.close();
  gate.resolve();
  await late;
  await closing;
  expect(await watch.closed).toBe("closed");
  expect(seen).toEqual([]);
  expect(watch.value).toBe(before);
});

test("exercise 7: two parallel subagents, one calling a tool, shown as one tree while they run; it empties as they finish", async () => {
  const probeStarted = deferred();
  const releaseProbe = deferred();
  const releaseB = deferred();
  const probe = defineTool({
    name: "probe",
    description: "probe",
    parameters: Type.Object({}),
    execute: async () => {
      probeStarted.resolve();
      await releaseProbe.promise;
      return textResult("probed");
    },
  });
  const firstUser = (messages: Message[]) => {
    const m = messages.find((x) => x.role === "user");
    return typeof m?.content === "string"
      ? m.content
      : (m?.content ?? []).map((c) => ("text" in c ? c.text : "")).join("");
  };
  const { h, root } = await open(
    async (req) => {
      const first = firstUser(req.messages);
      const answered = req.messages.some((m) => m.role === "toolResult");
      if (first.startsWith("CHILD-A")) {
        return answered
          ? fauxAssistantMessage("A done")
          : fauxAssistantMessage([fauxToolCall("probe", {}, { id: "call-probe" })], {
              stopReason: "toolUse",
            });
      }
      if (first.startsWith("CHILD-B")) {
        await releaseB.promise;
        return fauxAssistantMessage("B done");
      }
      return answered
        ? fauxAssistantMessage("both done")
        : fauxAssistantMessage(
            [
              fauxToolCall("subagent", { task: "CHILD-A: probe once" }, { id: "call-a" }),
              fauxToolCall("subagent", { task: "CHILD-B: answer" }, { id: "call-b" }),
            ],
            { stopReason: "toolUse" },
          );
    },
    { tools: [createSubagentTool(), probe] },
  );
  const watch = await h.watchTaskGraph();
  let graph = watch.value;
  watch.start((frame) => {
    graph = frame.value;
  });
  const input = await root.submit({ type: "input", content: "delegate both" });
  await probeStarted.promise;
  const tree = () => {
    const all = nodes(graph);
    const parent = all.find((n) => n.kind === "pi.generation" && n.conversationId === root.id);
    const calls = all.filter((n) => n.kind === "pi.tool" && n.owner === parent?.id);
    const children = calls.flatMap((c) => c.conversations);
    const probing = all.find(
      (n) => n.kind === "pi.tool" && n.conversationId !== root.id && n.state.status === "running",
    );
    return { parent, calls, children, probing };
  };
  await until(() => tree().children.length === 2 && tree().probing !== undefined, {
    what: "both children and the probe in the graph",
  });
  const { parent, calls, children, probing } = tree();
  expect(parent!.owner).toBeUndefined();
  expect(calls).toHaveLength(2);
  // Each subagent call owns one child conversation, where that child's own generation runs.
  for (const call of calls) expect(call.conversations).toHaveLength(1);
  for (const child of children)
    expect(nodes(graph).some((n) => n.kind === "pi.generation" && n.conversationId === child)).toBe(true);
  // The probe runs in child A, under child A's generation (a top-level task of that conversation).
  const childGeneration = nodes(graph).find((n) => n.id === probing!.owner)!;
  expect(childGeneration).toMatchObject({ kind: "pi.generation", conversationId: probing!.conversationId });
  expect(children).toContain(probing!.conversationId);
  releaseProbe.resolve();
  releaseB.resolve();
  expect((await input.wait()).status).toBe("done");
  await h.waitForIdle();
  await until(() => nodes(graph).length === 0, { what: "the tree empties" });
  await watch.stop();
});
