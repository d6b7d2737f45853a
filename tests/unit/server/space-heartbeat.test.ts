/**
 * When a server space keeps its heartbeat alarm (worker/server/space.ts `heartbeatNeeded`): while a
 * task runs or is ready, or waits for one that does; not while every live task sleeps on its durable
 * timer (a schedule), waits for a person's approval (a `pi.tool` call in its `approval` phase, whose
 * decision arrives by a request that opens the object), or waits only for such tasks (the generation
 * waiting for its calls).
 */
import { expect, test } from "vitest";
import type { TaskGraph, TaskGraphNode, TaskGraphState } from "../../../worker/core/inspect.ts";
import { heartbeatNeeded } from "../../../worker/server/space.ts";

function node(id: number, kind: string, state: TaskGraphState): TaskGraphNode {
  return { id, kind, conversationId: 1, background: false, abortRequested: false, state, conversations: [] };
}
const graph = (...nodes: TaskGraphNode[]): TaskGraph => ({
  tasks: Object.fromEntries(nodes.map((n) => [String(n.id), n])),
});
const waitingOn = (on: number[]): TaskGraphState => ({
  status: "waiting",
  phase: "tools",
  on,
  policy: "allSettled",
});

test("nothing live, a schedule asleep on its timer, or a call waiting for approval: no heartbeat", () => {
  expect(heartbeatNeeded(graph())).toBe(false);
  expect(
    heartbeatNeeded(
      graph(
        node(1, "app.schedule", { status: "waiting", phase: "fire", on: [], policy: "allSettled", until: 5 }),
      ),
    ),
  ).toBe(false);
  const approval = node(3, "pi.tool", { status: "running", phase: "approval" });
  expect(heartbeatNeeded(graph(approval))).toBe(false);
  // Recovered (pending) in that phase: running it again only enters the same wait.
  expect(heartbeatNeeded(graph(node(3, "pi.tool", { status: "pending", phase: "approval" })))).toBe(false);
  // The generation waiting for that call, and its own parent waiting for it: quiet too.
  expect(
    heartbeatNeeded(
      graph(node(1, "test.parent", waitingOn([2])), node(2, "pi.generation", waitingOn([3])), approval),
    ),
  ).toBe(false);
});

test("a running tool, a ready task, or a wait on anything that runs: the heartbeat", () => {
  const approval = node(3, "pi.tool", { status: "running", phase: "approval" });
  const running = node(4, "pi.tool", { status: "running", phase: "execute" });
  expect(heartbeatNeeded(graph(running))).toBe(true);
  expect(heartbeatNeeded(graph(node(5, "pi.generation", { status: "pending", phase: "request" })))).toBe(
    true,
  );
  // A generation waiting for two calls, one of which runs.
  expect(heartbeatNeeded(graph(node(2, "pi.generation", waitingOn([3, 4])), approval, running))).toBe(true);
  // A wait on a task no longer live (it ended: the waiter is about to run).
  expect(heartbeatNeeded(graph(node(2, "pi.generation", waitingOn([9]))))).toBe(true);
  // Another kind in a phase named "approval" is not a person's wait.
  expect(heartbeatNeeded(graph(node(6, "app.other", { status: "running", phase: "approval" })))).toBe(true);
});
