/**
 * What `inspect()` says a live task is waiting for (spec §2.2): a waiting task lists only the live
 * part of its `on`; an abort-marked task waits for its live ordinary owned work (spec §5.5), whatever
 * its own state and even when its definition is missing. Each record carries its lifecycle times
 * (startedAt at the first move to running, kept across a reopen; endedAt only once terminal).
 */
import { expect, test } from "vitest";
import { defineTask, Harness, type Json, type TaskId, type Tx, timerWait } from "../../../worker/index.ts";
import { type Deferred, deferred, FakeClock, memoryStore, until } from "../../../worker/testing.ts";
import {
  complete,
  done,
  type Go,
  outcome,
  parked,
  ping,
  running,
  settle,
  untilAborted,
  waitsOnOwnedChild,
} from "./fixtures.ts";

/** Waits (allSettled) on the tasks named by its input. */
const waitsOnInput = defineTask<TaskId[], Go | { phase: "joined" }, Json>({
  name: "waits-on-input",
  version: 1,
  initial: () => ({ phase: "go" }),
  phases: {
    go: async (task, runtime) => {
      await runtime.commit(() => ({
        status: "waiting",
        checkpoint: { phase: "joined" },
        on: task.input,
        policy: "allSettled",
      }));
    },
    joined: async (_t, runtime) => void (await runtime.commit(() => complete("joined"))),
  },
  abort: async (_t, runtime) =>
    void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
});

const stateOf = (h: Harness, id: TaskId) => h.inspect().tasks.find((t) => t.record.id === id)?.state;

/** The one task `inspect()` shows `id` waiting on. */
function awaited(h: Harness, id: TaskId): TaskId {
  const state = stateOf(h, id);
  if (state?.kind !== "waiting" || state.on.length !== 1)
    throw new Error(`task ${id} is not waiting on one task`);
  return state.on[0]!;
}

/** Parked until aborted; its abort handler waits for `release` before it ends aborted. */
function heldAbortChild(name: string, release: Deferred<void>) {
  return defineTask<Json, Go, Json>({
    ...parked(name),
    abort: async (_t, runtime) => {
      await release.promise;
      await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }));
    },
  });
}

/** Creates its owned work in its first commit (`create` returns the task to watch), then holds until aborted. */
function holdingOwner(
  name: string,
  create: (tx: Tx, self: TaskId) => TaskId,
  onCreated: (id: TaskId) => void,
) {
  return defineTask<Json, Go | { phase: "hold" }, Json>({
    name,
    version: 1,
    initial: () => ({ phase: "go" }),
    phases: {
      go: async (_t, runtime) => {
        await runtime.commit((tx) => {
          onCreated(create(tx, runtime.taskId));
          return { status: "running", checkpoint: { phase: "hold" } };
        });
      },
      hold: async (_t, _r, signal) => untilAborted(signal),
    },
    abort: async (_t, runtime) =>
      void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
  });
}

test("reports an abort-marked task as waiting for its live owned work", async () => {
  const abortChild = deferred();
  const child = heldAbortChild("inspect-child", abortChild);
  const parent = waitsOnOwnedChild("inspect-parent", child);
  const h = await Harness.open(await memoryStore(), { tasks: [parent, child] });
  const id = await h.createTask(parent, null, { ownership: { kind: "conversation" } });
  await until(() => stateOf(h, id)?.kind === "waiting" && running(h) === 1, {
    what: "parent waiting on its running child",
  });
  const childId = awaited(h, id);
  expect(await h.abortTask(id)).toBe("marked");
  // The child's abort handler runs (held); the parent's may start only after the child ended.
  await until(() => h.inspect().tasks.find((t) => t.record.id === childId)?.record.abortRequested === true, {
    what: "the mark cascaded to the child",
  });
  expect(stateOf(h, id)).toEqual({ kind: "waiting", on: [childId] });
  abortChild.resolve();
  expect(outcome(await done(h, id))?.status).toBe("aborted");
  await h.close();
});

test("an abort-marked task whose run was joined while running waits for its live owned work, not ready", async () => {
  const abortChild = deferred();
  const child = heldAbortChild("running-child", abortChild);
  let childId: TaskId | undefined;
  const owner = holdingOwner(
    "running-owner",
    (tx, self) => tx.createTask(child, null, { ownership: { kind: "task", taskId: self } }),
    (id) => {
      childId = id;
    },
  );
  const h = await Harness.open(await memoryStore(), { tasks: [owner, child] });
  const id = await h.createTask(owner, null, { ownership: { kind: "conversation" } });
  await until(() => running(h) === 2, { what: "owner and child running" });
  expect(await h.abortTask(id)).toBe("marked");
  // Its run joined; the record still says running, but no invocation runs it until the child ended.
  expect(h.inspect().tasks.find((t) => t.record.id === id)?.record.state.status).toBe("running");
  expect(stateOf(h, id)).toEqual({ kind: "waiting", on: [childId] });
  abortChild.resolve();
  expect(outcome(await done(h, id))?.status).toBe("aborted");
  await h.close();
});

test("an abort-marked owner waits for the live task of a conversation it owns, not only for its children", async () => {
  // Ordinary owned work (spec §5.5) takes in the tasks of the conversations a task owns.
  const abortChild = deferred();
  const child = heldAbortChild("conversation-child", abortChild);
  let childId: TaskId | undefined;
  const owner = holdingOwner(
    "conversation-owner",
    (tx, self) => {
      const c = tx.createConversation({ kind: "task", taskId: self });
      return tx.createTask(child, null, { ownership: { kind: "conversation" }, conversationId: c.id });
    },
    (id) => {
      childId = id;
    },
  );
  const h = await Harness.open(await memoryStore(), { tasks: [owner, child] });
  const id = await h.createTask(owner, null, { ownership: { kind: "conversation" } });
  await until(() => running(h) === 2, { what: "owner and the task of its conversation running" });
  expect(await h.abortTask(id)).toBe("marked");
  await until(() => h.inspect().tasks.find((t) => t.record.id === childId)?.record.abortRequested === true, {
    what: "the mark cascaded to the conversation's task",
  });
  expect(stateOf(h, id)).toEqual({ kind: "waiting", on: [childId] });
  abortChild.resolve();
  expect(outcome(await done(h, id))?.status).toBe("aborted");
  await h.close();
});

test("an abort-marked owner waits for all its live ordinary owned work: every child and every ordinary task of its conversations, not a background one", async () => {
  // Several owned tasks at once (the tests above have one): the wait lists each, in id order; a
  // background task of an owned conversation is no ordinary owned work (spec §5.5) and stays live.
  const abortChild = deferred();
  const child = heldAbortChild("several-child", abortChild);
  const background = parked("several-background");
  let ids: TaskId[] = [];
  const owner = holdingOwner(
    "several-owner",
    (tx, self) => {
      const c = tx.createConversation({ kind: "task", taskId: self });
      ids = [
        tx.createTask(child, null, { ownership: { kind: "task", taskId: self } }),
        tx.createTask(child, null, { ownership: { kind: "conversation" }, conversationId: c.id }),
        tx.createTask(background, null, {
          ownership: { kind: "conversation" },
          conversationId: c.id,
          background: true,
        }),
        tx.createTask(child, null, { ownership: { kind: "task", taskId: self } }),
      ];
      return ids[0]!;
    },
    () => undefined,
  );
  const h = await Harness.open(await memoryStore(), { tasks: [owner, child, background] });
  const id = await h.createTask(owner, null, { ownership: { kind: "conversation" } });
  await until(() => running(h) === 5, { what: "owner and its four tasks running" });
  expect(await h.abortTask(id)).toBe("marked");
  const ordinary = [ids[0]!, ids[1]!, ids[3]!];
  await until(
    () => ordinary.every((c) => h.inspect().tasks.find((t) => t.record.id === c)?.record.abortRequested),
    { what: "the mark cascaded to the ordinary owned work" },
  );
  expect(stateOf(h, id)).toEqual({ kind: "waiting", on: ordinary });
  abortChild.resolve();
  expect(outcome(await done(h, id))?.status).toBe("aborted");
  expect(stateOf(h, ids[2]!)).toEqual({ kind: "running" });
  await h.close();
});

test("an abort-marked owner waits for a child that is completing while its own child drains: a completing task is live owned work (draw 32)", async () => {
  // Draw 32, 10: every named test's owned work was running or waiting; owned work that left out a
  // completing child (one held for its own owned work) passed them all.
  const abortGrandchild = deferred();
  const grandchild = heldAbortChild("completing-grandchild", abortGrandchild);
  let grandchildId: TaskId | undefined;
  // Creates its child, then completes in its next commit while that child runs: it holds in completing.
  const middle = defineTask<Json, Go | { phase: "finish" }, Json>({
    name: "completing-middle",
    version: 1,
    initial: () => ({ phase: "go" }),
    phases: {
      go: async (_t, runtime) => {
        await runtime.commit((tx) => {
          grandchildId = tx.createTask(grandchild, null, {
            ownership: { kind: "task", taskId: runtime.taskId },
          });
          return { status: "running", checkpoint: { phase: "finish" } };
        });
      },
      finish: async (_t, runtime) => void (await runtime.commit(() => complete("done"))),
    },
    abort: async (_t, runtime) =>
      void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
  });
  let middleId: TaskId | undefined;
  const owner = holdingOwner(
    "completing-middle-owner",
    (tx, self) => tx.createTask(middle, null, { ownership: { kind: "task", taskId: self } }),
    (created) => void (middleId = created),
  );
  const h = await Harness.open(await memoryStore(), { tasks: [owner, middle, grandchild] });
  const id = await h.createTask(owner, null, { ownership: { kind: "conversation" } });
  await until(
    () => middleId !== undefined && stateOf(h, middleId)?.kind === "completing" && running(h) === 2,
    {
      what: "owner running, its child completing, the grandchild running",
    },
  );
  expect(await h.abortTask(id)).toBe("marked");
  await until(
    () => h.inspect().tasks.find((t) => t.record.id === grandchildId)?.record.abortRequested === true,
    {
      what: "the mark cascaded to the grandchild",
    },
  );
  // The owner's invocation ends on its signal; it then waits for its live child, completing as it is.
  await settle();
  expect(stateOf(h, id)).toEqual({ kind: "waiting", on: [middleId] });
  expect(stateOf(h, middleId!)).toEqual({ kind: "completing" });
  abortGrandchild.resolve();
  expect(outcome(await done(h, id))?.status).toBe("aborted");
  expect(outcome(await done(h, middleId!))).toEqual({ status: "completed", result: "done" });
  await h.close();
});

test("a waiting task lists only the live part of its wait", async () => {
  const other = parked("inspect-other");
  const h = await Harness.open(await memoryStore(), { tasks: [ping, other, waitsOnInput] });
  const finished = await h.createTask(ping, null, { ownership: { kind: "conversation" } });
  await done(h, finished);
  const live = await h.createTask(other, null, { ownership: { kind: "conversation" } });
  const waiter = await h.createTask(waitsOnInput, [finished, live], { ownership: { kind: "conversation" } });
  await until(() => stateOf(h, waiter)?.kind === "waiting", { what: "waiter waiting" });
  const record = h.inspect().tasks.find((t) => t.record.id === waiter)!.record;
  expect(record.state).toMatchObject({ status: "waiting", on: [finished, live] });
  expect(stateOf(h, waiter)).toEqual({ kind: "waiting", on: [live] });
  await h.abortTask(live);
  expect(outcome(await done(h, waiter))).toEqual({ status: "completed", result: "joined" });
  await h.close();
});

test("a wait on a live task and a time shows both, then only the time once the task ended; it wakes at the time (draw 36A)", async () => {
  // Draw 36A: every named waiting state had a task list or a time, never both; the time of a wait
  // whose list still had a live task dropped from its inspection passed them all.
  const T0 = Date.UTC(2026, 0, 5, 8, 0);
  const clock = new FakeClock(T0);
  const both = defineTask<TaskId, Go | { phase: "woke" }, Json>({
    name: "inspect-task-and-time",
    version: 1,
    initial: () => ({ phase: "go" }),
    phases: {
      go: async (task, runtime) =>
        void (await runtime.commit(() => ({
          status: "waiting",
          checkpoint: { phase: "woke" },
          on: [task.input],
          policy: "allSettled",
          until: T0 + 1000,
        }))),
      woke: async (_t, runtime) => void (await runtime.commit(() => complete("woke"))),
    },
    abort: async (_t, runtime) =>
      void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
  });
  const other = parked("inspect-awaited-with-time");
  const h = await Harness.open(await memoryStore(), { tasks: [both, other], now: clock.now, timers: clock });
  const live = await h.createTask(other, null, { ownership: { kind: "conversation" } });
  const waiter = await h.createTask(both, live, { ownership: { kind: "conversation" } });
  await until(() => stateOf(h, waiter)?.kind === "waiting", { what: "waiter waiting" });
  expect(stateOf(h, waiter)).toEqual({ kind: "waiting", on: [live], until: T0 + 1000 });
  await h.abortTask(live);
  await done(h, live);
  expect(stateOf(h, waiter)).toEqual({ kind: "waiting", on: [], until: T0 + 1000 });
  clock.advance(1000);
  expect(outcome(await done(h, waiter))).toEqual({ status: "completed", result: "woke" });
  await h.close();
});

test("a timer wait reopened paused at exactly its due time is ready, as the scheduler reserves it, not waiting (draw 36A)", async () => {
  // Draw 36A: the named due-time cases read the clock well past the due time; an inspection that
  // still called a wait due exactly now waiting (>= for >) passed them all.
  const T0 = Date.UTC(2026, 0, 5, 8, 0);
  const clock = new FakeClock(T0);
  const sleeper = defineTask<Json, Go | { phase: "woke" }, Json>({
    name: "inspect-due-now",
    version: 1,
    initial: () => ({ phase: "go" }),
    phases: {
      go: async (_t, runtime) => void (await runtime.commit(() => timerWait({ phase: "woke" }, T0 + 1000))),
      woke: async (_t, runtime) => void (await runtime.commit(() => complete("woke"))),
    },
    abort: async (_t, runtime) =>
      void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
  });
  const store = await memoryStore();
  const first = await Harness.open(store, { tasks: [sleeper], now: clock.now, timers: clock });
  const id = await first.createTask(sleeper, null, { ownership: { kind: "conversation" } });
  await until(() => stateOf(first, id)?.kind === "waiting", { what: "sleeper waiting" });
  expect(stateOf(first, id)).toEqual({ kind: "waiting", on: [], until: T0 + 1000 });
  const image = await memoryStore(store.image());
  await first.close();
  clock.jump(1000);
  const h = await Harness.open(image, { tasks: [sleeper], now: clock.now, timers: clock, paused: true });
  expect(stateOf(h, id)).toEqual({ kind: "ready", migrates: false });
  h.resume();
  expect(outcome(await done(h, id))).toEqual({ status: "completed", result: "woke" });
  await h.close();
});

test("an abort-marked owner without its definition waits for its live owned work, then is orphaned", async () => {
  const child = parked("inspect-kid");
  const owner = waitsOnOwnedChild("inspect-ghost-owner", child);
  const store = await memoryStore();
  const first = await Harness.open(store, { tasks: [owner, child] });
  const id = await first.createTask(owner, null, { ownership: { kind: "conversation" } });
  await until(() => stateOf(first, id)?.kind === "waiting" && running(first) === 1, {
    what: "owner waiting on its running child",
  });
  const childId = awaited(first, id);
  const image = await memoryStore(store.image());
  await first.close();

  // Reopened paused without the owner's definition: blocked until it is marked.
  const h = await Harness.open(image, { tasks: [child], paused: true });
  expect(await h.abortTask(id)).toBe("marked");
  expect(stateOf(h, id)).toEqual({ kind: "waiting", on: [childId] });
  h.resume();
  const final = await done(h, id);
  expect(outcome(final)?.status).toBe("orphaned");
  expect(outcome(await done(h, childId))?.status).toBe("aborted");
  await h.close();
});

test("inspect() shows each live task's lifecycle times: startedAt once it ran, kept across a reopen; no endedAt while live", async () => {
  let clock = 1000;
  const child = parked("timed-child");
  const parent = waitsOnOwnedChild("timed-parent", child);
  const store = await memoryStore();
  const first = await Harness.open(store, { tasks: [parent, child], now: () => clock });
  const id = await first.createTask(parent, null, { ownership: { kind: "conversation" } });
  await until(() => stateOf(first, id)?.kind === "waiting" && running(first) === 1, {
    what: "parent waiting on its running child",
  });
  const childId = awaited(first, id);
  const image = await memoryStore(store.image());
  await first.close();

  clock = 5000;
  const h = await Harness.open(image, { tasks: [parent, child, ping], now: () => clock, paused: true });
  const notYet = await h.createTask(ping, null, { ownership: { kind: "conversation" } });
  const times = () =>
    h.inspect().tasks.map((t) => [t.record.id, t.record.startedAt, t.record.endedAt] as const);
  expect(times()).toEqual([
    [id, 1000, undefined],
    [childId, 1000, undefined],
    [notYet, undefined, undefined],
  ]);
  clock = 6000;
  h.resume();
  const pinged = await done(h, notYet);
  expect([pinged.startedAt, pinged.endedAt]).toEqual([6000, 6000]);
  expect(times()).toEqual([
    [id, 1000, undefined],
    [childId, 1000, undefined],
  ]);
  clock = 7000;
  await h.abortTask(childId);
  const joined = await done(h, id);
  expect([joined.startedAt, joined.endedAt]).toEqual([1000, 7000]);
  await h.close();
});

test("a waiting task whose wait is over but not yet resumed is ready; an abort-marked waiting task without owned work is ready for its abort handler, not waiting", async () => {
  // Reopened paused: a timer wait already due, and a wait on a live task whose waiter is then
  // abort-marked. Neither waits on anything any more: both are ready (spec §2.2 states).
  const T0 = Date.UTC(2026, 0, 5, 8, 0);
  const clock = new FakeClock(T0);
  const sleeper = defineTask<Json, Go | { phase: "woke" }, Json>({
    name: "inspect-sleeper",
    version: 1,
    initial: () => ({ phase: "go" }),
    phases: {
      go: async (_t, runtime) => void (await runtime.commit(() => timerWait({ phase: "woke" }, T0 + 1000))),
      woke: async (_t, runtime) => void (await runtime.commit(() => complete("woke"))),
    },
    abort: async (_t, runtime) =>
      void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
  });
  const other = parked("inspect-awaited");
  const store = await memoryStore();
  const tasks = [sleeper, other, waitsOnInput];
  const first = await Harness.open(store, { tasks, now: clock.now, timers: clock });
  const timed = await first.createTask(sleeper, null, { ownership: { kind: "conversation" } });
  const live = await first.createTask(other, null, { ownership: { kind: "conversation" } });
  const waiter = await first.createTask(waitsOnInput, [live], { ownership: { kind: "conversation" } });
  await until(() => stateOf(first, timed)?.kind === "waiting" && stateOf(first, waiter)?.kind === "waiting", {
    what: "both waiting",
  });
  const image = await memoryStore(store.image());
  await first.close();

  clock.jump(5000);
  const h = await Harness.open(image, { tasks, now: clock.now, timers: clock, paused: true });
  expect(h.inspect().tasks.find((t) => t.record.id === timed)?.record.state.status).toBe("waiting");
  expect(stateOf(h, timed)).toEqual({ kind: "ready", migrates: false });
  expect(stateOf(h, waiter)).toEqual({ kind: "waiting", on: [live] });
  expect(await h.abortTask(waiter)).toBe("marked");
  expect(stateOf(h, waiter)).toEqual({ kind: "ready", migrates: false });
  h.resume();
  expect(outcome(await done(h, timed))).toEqual({ status: "completed", result: "woke" });
  expect(outcome(await done(h, waiter))?.status).toBe("aborted");
  await h.close();
});

test("a task abort-marked by the cascade is running while its invocation still runs; waiting for its owned work once it ended", async () => {
  const abortGrandchild = deferred();
  const grandchild = heldAbortChild("state-grandchild", abortGrandchild);
  const gate = deferred();
  let childId: TaskId | undefined;
  let grandchildId: TaskId | undefined;
  // Creates its own child, then holds its phase (deaf to the signal) until `gate`.
  const child = defineTask<Json, Go | { phase: "hold" }, Json>({
    name: "state-child",
    version: 1,
    initial: () => ({ phase: "go" }),
    phases: {
      go: async (_t, runtime) => {
        await runtime.commit((tx) => {
          grandchildId = tx.createTask(grandchild, null, {
            ownership: { kind: "task", taskId: runtime.taskId },
          });
          return { status: "running", checkpoint: { phase: "hold" } };
        });
      },
      hold: async () => gate.promise,
    },
    abort: async (_t, runtime) =>
      void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
  });
  const owner = holdingOwner(
    "state-owner",
    (tx, self) => tx.createTask(child, null, { ownership: { kind: "task", taskId: self } }),
    (id) => {
      childId = id;
    },
  );
  const h = await Harness.open(await memoryStore(), { tasks: [owner, child, grandchild] });
  const id = await h.createTask(owner, null, { ownership: { kind: "conversation" } });
  await until(() => running(h) === 3, { what: "owner, child and grandchild running" });
  expect(await h.abortTask(id)).toBe("marked");
  await until(
    () => h.inspect().tasks.find((t) => t.record.id === grandchildId)?.record.abortRequested === true,
    { what: "the mark cascaded to the grandchild" },
  );
  expect(h.inspect().tasks.find((t) => t.record.id === childId)?.record.abortRequested).toBe(true);
  // The child's phase has not returned: its invocation runs, whatever its owned work.
  expect(stateOf(h, childId!)).toEqual({ kind: "running" });
  gate.resolve();
  await until(() => stateOf(h, childId!)?.kind === "waiting", { what: "child waiting for its grandchild" });
  expect(stateOf(h, childId!)).toEqual({ kind: "waiting", on: [grandchildId] });
  abortGrandchild.resolve();
  expect(outcome(await done(h, id))?.status).toBe("aborted");
  expect(outcome(await done(h, childId!))?.status).toBe("aborted");
  await h.close();
});

test("a completing owner that is then abort-marked stays completing while its owned work drains", async () => {
  const abortChild = deferred();
  const child = heldAbortChild("completing-child", abortChild);
  let childId: TaskId | undefined;
  // Creates its child, then completes in its next commit while the child runs: it holds in completing.
  const owner = defineTask<Json, Go | { phase: "finish" }, Json>({
    name: "completing-owner",
    version: 1,
    initial: () => ({ phase: "go" }),
    phases: {
      go: async (_t, runtime) => {
        await runtime.commit((tx) => {
          childId = tx.createTask(child, null, { ownership: { kind: "task", taskId: runtime.taskId } });
          return { status: "running", checkpoint: { phase: "finish" } };
        });
      },
      finish: async (_t, runtime) => void (await runtime.commit(() => complete("done"))),
    },
    abort: async (_t, runtime) =>
      void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
  });
  const h = await Harness.open(await memoryStore(), { tasks: [owner, child] });
  const id = await h.createTask(owner, null, { ownership: { kind: "conversation" } });
  await until(() => stateOf(h, id)?.kind === "completing" && running(h) === 1, {
    what: "owner completing, child running",
  });
  expect(await h.abortTask(id)).toBe("marked");
  await until(() => h.inspect().tasks.find((t) => t.record.id === childId)?.record.abortRequested === true, {
    what: "the mark cascaded to the child",
  });
  expect(h.inspect().tasks.find((t) => t.record.id === id)?.record.abortRequested).toBe(true);
  expect(stateOf(h, id)).toEqual({ kind: "completing" });
  abortChild.resolve();
  expect(outcome(await done(h, id))).toEqual({ status: "completed", result: "done" });
  await h.close();
});

test("a completing owner reopened without its definition is shown completing, not blocked, and is released once its owned work ends (break 30A)", async () => {
  // Break 30A: every completing read had the owner's definition installed; an inspection judging a
  // completing task by its definition (blocked when it is missing) passed them. A held outcome needs
  // no definition (spec §5.5 rule 2), so nothing blocks it.
  const release = deferred();
  const child = defineTask<Json, Go, Json>({
    ...parked("reopened-completing-child"),
    phases: {
      go: async (_t, runtime, signal) => {
        await Promise.race([release.promise, untilAborted(signal)]);
        await runtime.commit(() => complete("child done"));
      },
    },
  });
  const owner = defineTask<Json, Go | { phase: "finish" }, Json>({
    name: "reopened-completing-owner",
    version: 1,
    initial: () => ({ phase: "go" }),
    phases: {
      go: async (_t, runtime) => {
        await runtime.commit((tx) => {
          tx.createTask(child, null, { ownership: { kind: "task", taskId: runtime.taskId } });
          return { status: "running", checkpoint: { phase: "finish" } };
        });
      },
      finish: async (_t, runtime) => void (await runtime.commit(() => complete("owner done"))),
    },
    abort: async (_t, runtime) =>
      void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
  });
  const store = await memoryStore();
  const first = await Harness.open(store, { tasks: [owner, child] });
  const id = await first.createTask(owner, null, { ownership: { kind: "conversation" } });
  await until(() => stateOf(first, id)?.kind === "completing" && running(first) === 1, {
    what: "owner completing, child running",
  });
  const image = await memoryStore(store.image());
  await first.close();

  const h = await Harness.open(image, { tasks: [child] });
  await until(() => running(h) === 1, { what: "the child running again" });
  expect(stateOf(h, id)).toEqual({ kind: "completing" });
  release.resolve();
  expect(outcome(await done(h, id))).toEqual({ status: "completed", result: "owner done" });
  await h.close();
});
