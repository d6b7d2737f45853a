/**
 * The task panel's words (src/lib/task-rows.ts): status and phase whole, the background and stopping
 * flags, a wait and a blocked task's reason and error, each only when it holds; what a task does and
 * which conversation it serves in a person's words.
 */
import { describe, expect, test } from "vitest";
import { conversationLabel, taskLabel, taskWords } from "../../../src/lib/task-rows.ts";
import type { TaskGraph, TaskGraphNode } from "../../../worker/protocol/index.ts";

const node = (over: Partial<TaskGraphNode> = {}): TaskGraphNode => ({
  id: 7,
  kind: "pi.tool",
  conversationId: 1,
  background: false,
  abortRequested: false,
  state: { status: "running", phase: "execute" },
  conversations: [],
  ...over,
});

describe("taskWords", () => {
  test("a running task: its name, status and phase, no flags, no wait, not blocked", () => {
    expect(taskWords(node(), { state: { kind: "running" } })).toEqual({
      name: "pi.tool #7",
      status: "running · execute",
      flags: [],
    });
  });

  test("background and stopping are flags of their own", () => {
    expect(taskWords(node({ background: true, abortRequested: true })).flags).toEqual([
      "background",
      "stopping",
    ]);
  });

  test("a wait names the tasks and the policy in words", () => {
    const waiting = node({ state: { status: "waiting", phase: "tools", on: [8, 9], policy: "allSettled" } });
    expect(taskWords(waiting).waits).toBe("waits on #8, #9 until all settle");
    const failFast = node({ state: { status: "waiting", phase: "tools", on: [8], policy: "failFast" } });
    expect(taskWords(failFast).waits).toBe("waits on #8 until all succeed or one fails");
    const none = node({ state: { status: "waiting", phase: "tools", on: [], policy: "allSettled" } });
    expect(taskWords(none).waits).toBeUndefined();
  });

  test("a blocked task says why, with the scheduler's error", () => {
    const words = taskWords(node({ state: { status: "pending", phase: "start" } }), {
      state: { kind: "blocked", reason: "missing_task", error: "no definition named pi.old" },
    });
    expect(words.blocked).toBe(
      "blocked: no task of this kind is registered in this build (no definition named pi.old)",
    );
    expect(words.status).toBe("pending · start");
  });

  test("a held outcome reads as completing with it", () => {
    expect(taskWords(node({ state: { status: "completing", outcome: "completed" } })).status).toBe(
      "completing · completed",
    );
  });
});

describe("taskLabel: what a task does, in a person's words", () => {
  const graphOf = (...nodes: TaskGraphNode[]): TaskGraph => ({
    tasks: Object.fromEntries(nodes.map((n) => [String(n.id), n])),
  });
  const tool = (id: number) => node({ id, kind: "pi.tool", owner: 11 });
  const names = new Map([
    [12, "write"],
    [13, "read"],
  ]);
  const toolName = (id: number) => names.get(id);

  test("a model turn answers, waits for its tools by count or by name, never by task id", () => {
    const turn = node({ id: 11, kind: "pi.generation", state: { status: "running", phase: "request" } });
    expect(taskLabel(turn)).toBe("answering");
    const waiting = node({
      id: 11,
      kind: "pi.generation",
      state: { status: "waiting", phase: "tools", on: [12, 13], policy: "allSettled" },
    });
    const graph = graphOf(waiting, tool(12), tool(13));
    expect(taskLabel(waiting, graph, { toolName })).toBe("waiting for 2 tools");
    const one = node({
      ...waiting,
      state: { status: "waiting", phase: "tools", on: [12], policy: "allSettled" },
    });
    expect(taskLabel(one, graph, { toolName })).toBe("waiting for the write tool");
    expect(taskLabel(one, graph)).toBe("waiting for a tool");
    for (const label of [taskLabel(waiting, graph, { toolName }), taskLabel(one, graph, { toolName })])
      expect(label).not.toMatch(/#|pi\.|settle/);
  });

  test("a model turn's retry, network wait and deferred poll say what it waits for", () => {
    const at = (phase: string) =>
      taskLabel(node({ kind: "pi.generation", state: { status: "running", phase } }));
    expect(at("retry")).toBe("waiting to try the model again");
    expect(at("offline")).toBe("waiting for the network");
    expect(at("poll")).toBe("waiting for the model's answer");
    expect(taskLabel(node({ kind: "pi.generation", state: { status: "pending", phase: "start" } }))).toBe(
      "about to answer",
    );
  });

  test("a tool task names its tool when the tab knows it", () => {
    expect(taskLabel(tool(12), undefined, { toolName })).toBe("running the write tool");
    expect(taskLabel(tool(99), undefined, { toolName })).toBe("running a tool");
    expect(
      taskLabel(node({ id: 12, kind: "pi.tool", state: { status: "pending", phase: "call" } }), undefined, {
        toolName,
      }),
    ).toBe("about to run the write tool");
  });

  test("a tool call awaiting the person's approval says it waits for them, not that it runs", () => {
    const awaiting = node({ id: 12, kind: "pi.tool", state: { status: "running", phase: "approval" } });
    expect(taskLabel(awaiting, undefined, { toolName })).toBe(
      "waiting for your approval to run the write tool",
    );
    expect(taskLabel(awaiting)).toBe("waiting for your approval to run a tool");
  });

  test("compaction, a subagent, a held outcome and an unknown kind", () => {
    expect(taskLabel(node({ kind: "pi.compaction", state: { status: "running", phase: "summarize" } }))).toBe(
      "compacting the older part of the conversation",
    );
    expect(taskLabel(node({ kind: "pi.subagent", state: { status: "running", phase: "run" } }))).toBe(
      "running a subagent",
    );
    expect(taskLabel(node({ state: { status: "completing", outcome: "completed" } }))).toBe("finishing");
    expect(taskLabel(node({ kind: "app.ticker", state: { status: "running", phase: "tick" } }))).toBe(
      "running app.ticker",
    );
  });
});

describe("conversationLabel", () => {
  test("a conversation by its title; without one, a subagent's or its number", () => {
    expect(conversationLabel(3, "Plan a trip to Rome", { owned: false })).toBe("Plan a trip to Rome");
    expect(conversationLabel(3, undefined, { owned: true })).toBe("a subagent's conversation (3)");
    expect(conversationLabel(3, undefined, { owned: false })).toBe("conversation 3");
  });
});
