/**
 * `taskGraph()` (spec §9.5) and `inspect()` (spec §2.2) in the specification's shapes: the graph
 * keys live tasks by decimal id, each node with its owner, owned conversations and a state that
 * carries the phase, the wait and its policy, or the held outcome; the inspection lists every live
 * task with what the scheduler makes of it (running, ready, waiting, completing, blocked with the
 * reason) and the queued and placed submissions. Settled tasks and submissions are in neither.
 */

import { fauxToolCall } from "@mariozechner/pi-ai";
import { describe, expect, test } from "vitest";
import { defineTask, Harness, type Json, type TaskGraph, type TaskId } from "../../../worker/index.ts";
import { deferred, memoryStore, until } from "../../../worker/testing.ts";
import { callsThenAnswer, echo, gatedTool, open } from "../agent/fixtures.ts";
import { done, type Go, parked, ping, running, storeWith } from "./fixtures.ts";

const nodesOf = (graph: TaskGraph) => Object.values(graph.tasks);

describe("taskGraph() and inspect() take the specification's shapes", () => {
  test("a running tool round: the generation waits on its tool with its policy, the tool runs under it", async () => {
    const { tool, started, release } = gatedTool();
    const { h, root } = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "call-1" })), {
      tools: [tool],
    });
    const sub = await root.submit({ type: "input", content: "go" });
    await started.promise;

    const graph = h.taskGraph();
    for (const [key, node] of Object.entries(graph.tasks)) expect(key).toBe(String(node.id));
    const generation = nodesOf(graph).find((n) => n.kind === "pi.generation")!;
    const toolNode = nodesOf(graph).find((n) => n.kind === "pi.tool")!;
    expect(generation).toEqual({
      id: generation.id,
      kind: "pi.generation",
      conversationId: root.id,
      background: false,
      abortRequested: false,
      state: { status: "waiting", phase: "tools", on: [toolNode.id], policy: "allSettled" },
      conversations: [],
    });
    expect(toolNode).toEqual({
      id: toolNode.id,
      kind: "pi.tool",
      conversationId: root.id,
      owner: generation.id,
      background: false,
      abortRequested: false,
      state: { status: "running", phase: "execute" },
      conversations: [],
    });

    const inspection = h.inspect();
    expect(inspection.scheduling).toBe("running");
    expect(inspection.tasks.map((t) => [t.record.id, t.state])).toEqual([
      [generation.id, { kind: "waiting", on: [toolNode.id] }],
      [toolNode.id, { kind: "running" }],
    ]);
    expect(inspection.tasks[0]!.record).toEqual(await h.getTask(generation.id));
    expect(inspection.submissions).toMatchObject([{ id: sub.id, type: "input", status: "placed" }]);

    release.resolve();
    expect(await sub.wait()).toMatchObject({ status: "done" });
    await root.waitForIdle();
    // Settled: gone from both.
    expect(h.taskGraph()).toEqual({ tasks: {} });
    expect(h.inspect()).toMatchObject({ tasks: [], submissions: [] });
  });

  test("a queued and a placed submission are listed in id order; settled ones are not", async () => {
    const gate = deferred();
    const { h, root } = await open(async (req, call) => {
      await gate.promise;
      return echo(req, call);
    });
    const first = await root.submit({ type: "input", content: "one" });
    const second = await root.submit({ type: "input", content: "two" });
    expect(h.inspect().submissions.map((s) => [s.id, s.type, s.status])).toEqual([
      [first.id, "input", "placed"],
      [second.id, "input", "queued"],
    ]);
    // Settled unanswered (withdrawn while queued) is settled too: left out (breaks 27D and 27G: a list
    // that dropped only `done` passed).
    const third = await root.submit({ type: "input", content: "three" });
    expect(await third.abort()).toBe("aborted");
    expect((await third.record()).status).toBe("unanswered");
    expect(h.inspect().submissions.map((s) => [s.id, s.status])).toEqual([
      [first.id, "placed"],
      [second.id, "queued"],
    ]);
    gate.resolve();
    expect(await first.wait()).toMatchObject({ status: "done" });
    expect(await second.wait()).toMatchObject({ status: "done" });
    expect(h.inspect().submissions).toEqual([]);
  });

  test("submissions are listed by id, not by status, and one settled while others live is left out", async () => {
    const { tool, started, release } = gatedTool();
    const second = deferred();
    const calls = callsThenAnswer(fauxToolCall("hold", {}, { id: "call-1" }));
    const { h, root, faux } = await open(
      async (req, n) => {
        if (n === 2) await second.promise;
        return calls(req, n);
      },
      { tools: [tool] },
    );
    const work = await root.submit({ type: "input", content: "work" });
    await started.promise;
    const later = await root.submit({ type: "input", content: "later" }); // followUp: stays queued
    const now = await root.submit({ type: "input", content: "now", whenBusy: "steer" });
    const note = await root.submit({ type: "write", entry: { kind: "app.note", data: "n" } });
    release.resolve();
    // The post-tools boundary placed the steer and the write (done); the follow-up waits on.
    await until(() => faux.requests.length === 2, { what: "the request after the tool round" });
    expect((await note.record()).status).toBe("done");
    expect(h.inspect().submissions.map((s) => [s.id, s.status])).toEqual([
      [work.id, "placed"],
      [later.id, "queued"],
      [now.id, "placed"],
    ]);
    second.resolve();
    expect((await later.wait()).status).toBe("done");
  });

  test("every open submission is listed, of any type and any conversation: a queued write and another conversation's input are there (break 28A)", async () => {
    const gate = deferred();
    const { h, root } = await open(async (req, call) => {
      await gate.promise;
      return echo(req, call);
    });
    const other = h.conversation(
      (await h.transaction((tx) => tx.createConversation({ kind: "ownerless" }))).id,
    )!;
    const work = await root.submit({ type: "input", content: "work" });
    const hint = { role: "user", content: "a hint", timestamp: 0 };
    const write = await root.submit({ type: "write", entry: { kind: "app.hint", model: [hint] } });
    const elsewhere = await other.submit({ type: "input", content: "elsewhere" });
    const queuedThere = await other.submit({ type: "input", content: "queued there" });
    expect(h.inspect().submissions.map((s) => [s.id, s.type, s.status, s.conversationId])).toEqual([
      [work.id, "input", "placed", root.id],
      [write.id, "write", "queued", root.id],
      [elsewhere.id, "input", "placed", other.id],
      [queuedThere.id, "input", "queued", other.id],
    ]);
    gate.resolve();
    for (const s of [work, write, elsewhere, queuedThere]) expect((await s.wait()).status).toBe("done");
    expect(h.inspect().submissions).toEqual([]);
  });

  test("after a reopen the stored queued and placed submissions are listed, of both types, and a settled one is not (draw 36b)", async () => {
    // Draw 36b: every named test stayed in one open; a reopen that loaded only the queued ones
    // (leaving out the placed input whose run the crash cut) passed them all.
    const gate = deferred();
    const { h, root, store } = await open(async (req, call) => {
      await gate.promise;
      return echo(req, call);
    });
    const done = await root.submit({ type: "write", entry: { kind: "app.note", data: 0 } });
    expect((await done.record()).status).toBe("done");
    const placed = await root.submit({ type: "input", content: "one" });
    const queued = await root.submit({ type: "input", content: "two" });
    const write = await root.submit({ type: "write", entry: { kind: "app.note", data: 1 } });
    const image = store.image();
    gate.resolve();
    await placed.wait();
    await h.close();
    const again = await open(echo, { store: await memoryStore(image), paused: true });
    expect(again.h.inspect().submissions.map((s) => [s.id, s.type, s.status])).toEqual([
      [placed.id, "input", "placed"],
      [queued.id, "input", "queued"],
      [write.id, "write", "queued"],
    ]);
    again.h.resume();
    for (const id of [placed.id, queued.id, write.id])
      expect((await (await again.h.submission(id))!.wait()).status).toBe("done");
    expect(again.h.inspect().submissions).toEqual([]);
  });

  test("a task without a definition is blocked with the reason; the graph shows it pending at its phase", async () => {
    const { image, ids } = await storeWith([parked("ghost")]);
    const h = await Harness.open(image, { tasks: [ping] });
    const ghost = ids[0]!;
    await until(() => h.inspect().tasks.some((t) => t.state.kind === "blocked"), { what: "ghost blocked" });
    const [inspected] = h.inspect().tasks;
    expect(inspected!.record).toMatchObject({ id: ghost, kind: "ghost", state: { status: "pending" } });
    expect(inspected!.state).toMatchObject({ kind: "blocked", reason: "missing_task" });
    expect(inspected!.state.kind === "blocked" && inspected!.state.error).toMatch(
      /no definition named ghost/,
    );
    expect(h.taskGraph().tasks[String(ghost)]).toMatchObject({ state: { status: "pending", phase: "go" } });
    await h.close();
  });

  test("a paused harness shows pending tasks ready, and whether reserving them migrates", async () => {
    const { image, ids } = await storeWith([parked("same"), parked("older")]);
    const [same, older] = ids as [TaskId, TaskId];
    const newer = defineTask<Json, Go, Json>({
      ...parked("older", 2),
      migrate: (input, checkpoint) => ({ input, checkpoint: checkpoint as Go }),
    });
    const h = await Harness.open(image, { tasks: [parked("same"), newer], paused: true });
    expect(h.inspect().scheduling).toBe("paused");
    expect(h.inspect().tasks.map((t) => [t.record.id, t.record.state.status, t.state])).toEqual([
      [same, "pending", { kind: "ready", migrates: false }],
      [older, "pending", { kind: "ready", migrates: true }],
    ]);
    await h.close();
  });

  test("settled tasks are excluded: a finished task leaves both views", async () => {
    const h = await Harness.open(await memoryStore(), { tasks: [ping] });
    const id: TaskId = await h.createTask(ping, null, { ownership: { kind: "conversation" } });
    await done(h, id);
    expect(h.taskGraph().tasks[String(id)]).toBeUndefined();
    expect(h.inspect().tasks.map((t) => t.record.id)).not.toContain(id);
    expect(running(h)).toBe(0);
    await h.close();
  });
});
