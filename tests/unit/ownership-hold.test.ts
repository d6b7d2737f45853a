/**
 * The completing hold (spec §5.5.1-§5.5.3), upstream's scenarios: work created during the hold
 * extends it, and a held scheduler fault is cancellation intent, so the work below is aborted and
 * the task then ends with the held fault.
 */
import { expect, test } from "vitest";
import { defineTask, Harness, type Json, type TaskId } from "../../worker/index.ts";
import { type Deferred, deferred, memoryStore, until } from "../../worker/testing.ts";
import { complete, done, outcome, parked, single, untilAborted } from "./core-fixtures.ts";

const stateOf = (h: Harness, id: TaskId) => h.inspect().tasks.find((t) => t.record.id === id)?.state.kind;

test("keeps holding for ordinary work created during the hold", async () => {
  const gates = new Map<string, Deferred<void>>([
    ["first", deferred()],
    ["second", deferred()],
  ]);
  const worker = single("hold.worker", async (task, runtime, signal) => {
    await Promise.race([gates.get(task.input as string)!.promise, untilAborted(signal)]);
    await runtime.commit(() => complete(task.input));
  });
  type Step = { phase: "spawn" } | { phase: "finish"; conversation: number };
  const owner = defineTask<null, Step, Json>({
    name: "hold.owner",
    version: 1,
    initial: () => ({ phase: "spawn" }),
    phases: {
      spawn: async (_t, runtime) => {
        await runtime.commit((tx) => {
          const c = tx.createConversation({ kind: "task", taskId: runtime.taskId });
          tx.createTask(worker, "first", { ownership: { kind: "conversation" }, conversationId: c.id });
          return { status: "running", checkpoint: { phase: "finish", conversation: c.id } };
        });
      },
      finish: async (_t, runtime) => void (await runtime.commit(() => complete("owner done"))),
    },
    abort: async (_t, runtime) =>
      void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
  });
  const h = await Harness.open(await memoryStore(), { tasks: [worker, owner] });
  const id = await h.createTask(owner, null, { ownership: { kind: "conversation" } });
  await until(() => stateOf(h, id) === "completing", { what: "owner held" });
  const conversation = h.conversationRecords().find((c) => c.owner?.taskId === id)!.id;
  // New ordinary work in the owned conversation, created while the owner is held.
  const later = await h.createTask(worker, "second", {
    ownership: { kind: "conversation" },
    conversationId: conversation,
  });
  gates.get("first")!.resolve();
  const [first] = await h.tasks({ kind: "hold.worker" });
  expect(outcome(await done(h, first!.id))).toEqual({ status: "completed", result: "first" });
  await until(() => h.inspect().tasks.every((t) => t.record.id !== first!.id), { what: "first gone" });
  expect(stateOf(h, id)).toBe("completing");
  gates.get("second")!.resolve();
  expect(outcome(await done(h, later))).toEqual({ status: "completed", result: "second" });
  expect(outcome(await done(h, id))).toEqual({ status: "completed", result: "owner done" });
  await h.close();
});

test("aborts the work below a held scheduler fault, then finishes with the held outcome", async () => {
  const child = parked("fault.child");
  type Step = { phase: "spawn" } | { phase: "crash"; child: TaskId };
  const parent = defineTask<null, Step, Json>({
    name: "fault.parent",
    version: 1,
    initial: () => ({ phase: "spawn" }),
    phases: {
      spawn: async (_t, runtime) => {
        await runtime.commit((tx) => ({
          status: "running",
          checkpoint: {
            phase: "crash",
            child: tx.createTask(child, null, { ownership: { kind: "task", taskId: runtime.taskId } }),
          },
        }));
      },
      crash: async () => {
        throw new Error("parent bug");
      },
    },
    abort: async (_t, runtime) =>
      void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
  });
  const h = await Harness.open(await memoryStore(), { tasks: [child, parent] });
  const id = await h.createTask(parent, null, { ownership: { kind: "conversation" } });
  const final = await done(h, id);
  expect(outcome(final)).toEqual({ status: "faulted", error: { message: "parent bug" } });
  const [kid] = await h.tasks({ kind: "fault.child" });
  expect(kid?.abortRequested).toBe(true);
  expect(outcome(kid)).toMatchObject({ status: "aborted" });
  expect(kid!.endedAt!).toBeLessThanOrEqual(final.endedAt!);
  await h.close();
});
