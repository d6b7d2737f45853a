/**
 * The task panel's words (src/lib/task-rows.ts): status and phase whole, the background and stopping
 * flags, a wait and a blocked task's reason and error, each only when it holds.
 */
import { describe, expect, test } from "vitest";
import { taskWords } from "../../../src/lib/task-rows.ts";
import type { TaskGraphNode } from "../../../worker/protocol/index.ts";

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
