/**
 * Observation: the task graph, a watch's frame limit and its collapse into one replace frame, and
 * a stalled conversation watch that ends on the committed view.
 */

import { fauxToolCall } from "@mariozechner/pi-ai";
import { describe, expect, test } from "vitest";
import { Watch } from "../../../worker/core/observe.ts";
import {
  AgentHarness,
  type ConversationView,
  defineTask,
  type Frame,
  Harness,
  type Json,
} from "../../../worker/index.ts";
import { deferred, memoryStore, until } from "../../../worker/testing.ts";
import { callsThenAnswer, echo, itemTool, last, open } from "../agent/fixtures.ts";
import { complete, done, engineStillRuns, outcome, parked, running } from "./fixtures.ts";

describe("the task graph", () => {
  test("taskGraph keys live tasks by id: a waiting parent with its wait and policy, its children under it as owner", async () => {
    const kid = parked("graph-kid");
    type ParentState = { phase: "spawn" } | { phase: "gather" };
    const parent = defineTask<null, ParentState, Json>({
      name: "graph-parent",
      version: 1,
      initial: () => ({ phase: "spawn" }),
      phases: {
        spawn: async (_t, runtime) => {
          await runtime.commit((tx) => {
            const kids = [
              tx.createTask(kid, null, { ownership: { kind: "task", taskId: runtime.taskId } }),
              tx.createTask(kid, null, { ownership: { kind: "task", taskId: runtime.taskId } }),
            ];
            return { status: "waiting", checkpoint: { phase: "gather" }, on: kids, policy: "allSettled" };
          });
        },
        gather: async (_t, runtime) => void (await runtime.commit(() => complete("gathered"))),
      },
      abort: async (_t, runtime) =>
        void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
    });
    const h = await Harness.open(await memoryStore());
    const id = await h.createTask(parent, null, { ownership: { kind: "conversation" } });
    await until(() => running(h) === 2, { what: "kids running" });
    const graph = h.taskGraph();
    expect(Object.keys(graph.tasks)).toEqual([String(id), String(id + 1), String(id + 2)]);
    expect(graph.tasks[String(id)]).toEqual({
      id,
      kind: "graph-parent",
      conversationId: 1,
      background: false,
      abortRequested: false,
      state: { status: "waiting", phase: "gather", on: [id + 1, id + 2], policy: "allSettled" },
      conversations: [],
    });
    const kids = [graph.tasks[String(id + 1)]!, graph.tasks[String(id + 2)]!];
    expect(kids.map((k) => [k.id, k.kind, k.owner, k.state])).toEqual([
      [id + 1, "graph-kid", id, { status: "running", phase: "go" }],
      [id + 2, "graph-kid", id, { status: "running", phase: "go" }],
    ]);
    await h.abortTask(id);
    expect(outcome(await done(h, id))?.status).toBe("aborted");
    expect(h.taskGraph()).toEqual({ tasks: {} });
    await engineStillRuns(h);
    await h.close();
  });
});

describe("no volatile publication", () => {
  test("every published view survives a reopen: a tool's streamed output seen by a watch is in the store as seen", async () => {
    const { tool, started, release } = itemTool({ holdFirst: true, output: "half way" });
    const { h, root, store, faux } = await open(
      callsThenAnswer(fauxToolCall("apply", { item: "a" }, { id: "c1" })),
      {
        tools: [tool],
      },
    );
    const watch = await root.watch();
    const views: ConversationView[] = [watch.value];
    watch.start((frame) => views.push(frame.value));
    await root.submit({ type: "input", content: "go" });
    await started.promise;
    await until(() => JSON.stringify(views.at(-1)?.docs["pi.live"] ?? null).includes("half way"), {
      what: "output published",
    });
    const seen = views.at(-1)!;
    const image = await memoryStore(store.image());
    const again = await AgentHarness.open(image, {
      models: faux.models,
      defaultModel: faux.ref,
      paused: true,
    });
    const reopened = await again.conversation(root.id)!.viewState();
    expect(reopened.docs["pi.live"]).toEqual(seen.docs["pi.live"]);
    expect(reopened.entries).toEqual(seen.entries);
    await again.close();
    await watch.stop();
    release.resolve();
    await h.waitForIdle();
  });
});

describe("watch", () => {
  test("a commit observer runs on the line as its commit is adopted, before the commit resolves; a watch's callback runs later, off the line", async () => {
    const { h, root } = await open(echo);
    const watch = await root.watch();
    let frames = 0;
    watch.start(() => void frames++);
    const framesBefore = frames;
    let resolved = false;
    const seen: Array<{ frames: number; resolved: boolean }> = [];
    const stop = h.subscribe((change) => {
      if (change.entries.some((e) => e.kind === "app.note")) seen.push({ frames, resolved });
    });
    await h.transaction((tx) => void tx.appendEntry(root.id, { kind: "app.note", data: 1 }));
    resolved = true;
    // Captured synchronously: before the commit's promise resolved and before any watch callback ran.
    expect(seen).toEqual([{ frames: framesBefore, resolved: false }]);
    // The watch's callback runs later, and gets the note.
    await until(() => frames > framesBefore, { what: "the watch's frame for the note" });
    expect(watch.value.entries.some((e) => e.kind === "app.note")).toBe(true);
    stop();
    await watch.stop();
  });

  test("a watch holds exactly its limit of undelivered frames; one more collapses them into one replace", () => {
    const watch = new Watch(0, 3);
    for (let seq = 1; seq <= 3; seq++) watch.push({ seq, value: seq, ops: [] });
    expect([watch.pending, watch.collapsed]).toEqual([3, 0]);
    watch.push({ seq: 4, value: 4, ops: [] });
    expect([watch.pending, watch.collapsed]).toEqual([1, 3]);
    const frames: Frame<number>[] = [];
    watch.start((frame) => void frames.push(frame));
    return until(() => frames.length === 1, { what: "the replace frame delivered" }).then(() => {
      expect(frames[0]).toEqual({ seq: 4, value: 4, ops: [{ op: "replace" }] });
      expect(watch.value).toBe(4);
    });
  });
});

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
