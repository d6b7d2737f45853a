/**
 * abortTask (spec §2.2, §5.4): it commits the abort mark, then signals and joins the active run; it
 * returns `marked` only once that happened (or once a blocked task with no live owned work was
 * settled `orphaned` in the marking commit), `terminal` for a finished task, and nothing else.
 */
import { expect, test } from "vitest";
import { internals } from "../../../worker/core/internals.ts";
import { defineTask, Harness, type Json, type TaskDefinition, UnknownTask } from "../../../worker/index.ts";
import { deferred, memoryStore, until } from "../../../worker/testing.ts";
import {
  blocked,
  complete,
  done,
  type Go,
  outcome,
  parked,
  row,
  running,
  settle,
  single,
  storeWith,
} from "./fixtures.ts";

const conversationOwned = { ownership: { kind: "conversation" as const } };

test("abortTask returns `marked` only after the mark is committed and the running invocation has returned", async () => {
  const release = deferred();
  const abortGate = deferred();
  let returned = false;
  let markedWhenSignalled: boolean | undefined;
  let returnedWhenAbortStarted: boolean | undefined;
  const slow = single(
    "slow-to-stop",
    async (task, _runtime, signal) => {
      await new Promise<void>((resolve) =>
        signal.addEventListener(
          "abort",
          () => {
            // Signalled after the mark's commit (spec §5.4): the committed record already carries it.
            markedWhenSignalled = internals(h).session.records.tasks.get(task.id)?.abortRequested;
            resolve();
          },
          { once: true },
        ),
      );
      await release.promise; // cleans up for a while after the signal
      returned = true;
    },
    {
      // The abort invocation waits here, so what abortTask returned before is seen.
      abort: async (_t, runtime) => {
        // A fresh abort invocation, started once the run invocation joined (spec §5.4).
        returnedWhenAbortStarted = returned;
        await abortGate.promise;
        await runtime.commit(() => ({
          status: "terminal",
          outcome: { status: "aborted", reason: "handler" },
        }));
      },
    },
  );
  const h = await Harness.open(await memoryStore(), { tasks: [slow] });
  const id = await h.createTask(slow, null, conversationOwned);
  await until(() => running(h) === 1, { what: "running" });
  const result = h.abortTask(id);
  setTimeout(() => release.resolve(), 50);
  expect(await result).toBe("marked");
  expect(returned).toBe(true);
  expect(markedWhenSignalled).toBe(true);
  expect((await h.getTask(id))?.abortRequested).toBe(true);
  // It did not await the terminal settlement: waitForTask observes that.
  expect((await h.getTask(id))?.state.status).not.toBe("terminal");
  // Break 28M: aborting it again while its abort handler runs does not await that handler either.
  await until(() => returnedWhenAbortStarted !== undefined, { what: "abort handler started" });
  const again = await Promise.race([
    h.abortTask(id),
    new Promise((resolve) => setTimeout(() => resolve("still waiting"), 1000)),
  ]);
  expect(again).toBe("marked");
  expect((await h.getTask(id))?.state.status).not.toBe("terminal");
  abortGate.resolve();
  expect(outcome(await done(h, id))).toEqual({ status: "aborted", reason: "handler" });
  expect(returnedWhenAbortStarted).toBe(true);
  await h.close();
});

test("a second abortTask of a task already marked but still running returns `marked` only after the running invocation has returned too", async () => {
  // break 30O: every abortTask of a running task was the first; a repeated call (its mark already
  // committed) that returned at once, before the join, passed.
  const release = deferred();
  let returned = false;
  const slow = single(
    "slow-to-stop-twice",
    async (_task, _runtime, signal) => {
      await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
      await release.promise;
      returned = true;
    },
    {
      abort: async (_t, runtime) =>
        void (await runtime.commit(() => ({
          status: "terminal",
          outcome: { status: "aborted", reason: "handler" },
        }))),
    },
  );
  const h = await Harness.open(await memoryStore(), { tasks: [slow] });
  const id = await h.createTask(slow, null, conversationOwned);
  await until(() => running(h) === 1, { what: "running" });
  const seen: Array<[string, boolean]> = [];
  const first = h.abortTask(id).then((r) => seen.push(["first", returned]) && r);
  await until(() => internals(h).session.records.tasks.get(id)?.abortRequested === true, { what: "marked" });
  const second = h.abortTask(id).then((r) => seen.push(["second", returned]) && r);
  await new Promise((resolve) => setTimeout(resolve, 20));
  expect(seen).toEqual([]);
  release.resolve();
  expect(await Promise.all([first, second])).toEqual(["marked", "marked"]);
  expect(seen.map(([, r]) => r)).toEqual([true, true]);
  expect(outcome(await done(h, id))?.status).toBe("aborted");
  await h.close();
});
test("a conversation abort signals its running invocations only after the marking commit: each signalled task's committed record already carries the mark", async () => {
  // Break 29N: the named test aborts one task by abortTask; a conversation abort (abortConversation,
  // Conversation.abort() below it) that signalled each task as it marked it, inside the commit,
  // passed every test.
  const seen: Array<boolean | undefined> = [];
  const watcher = single("watches-its-signal", async (task, _runtime, signal) => {
    await new Promise<void>((resolve) =>
      signal.addEventListener(
        "abort",
        () => {
          seen.push(internals(h).session.records.tasks.get(task.id)?.abortRequested);
          resolve();
        },
        { once: true },
      ),
    );
  });
  const h = await Harness.open(await memoryStore(), { tasks: [watcher] });
  const a = await h.createTask(watcher, null, conversationOwned);
  const b = await h.createTask(watcher, null, conversationOwned);
  await until(() => running(h) === 2, { what: "both running" });
  const aborting = h.abortConversation(1);
  // Draw 40c: each marked running invocation is signalled at all, right after the marking commit
  // (spec §5.4: signal and join). With no signal the conversation abort only waited on, and this
  // test timed out; now an assertion fails.
  const records = internals(h).session.records.tasks;
  await until(() => [a, b].every((id) => records.get(id)?.abortRequested === true), {
    what: "both marks committed",
  });
  await settle();
  expect(seen).toEqual([true, true]);
  await aborting;
  expect(seen).toEqual([true, true]);
  for (const id of [a, b]) expect((await h.getTask(id))?.abortRequested).toBe(true);
  await h.close();
});

test("abortTask on a blocked task without live owned work settles it `orphaned` before returning `marked`", async () => {
  const { image, ids } = await storeWith([parked("ghost")]);
  const h = await Harness.open(image);
  await until(() => blocked(h).length === 1, { what: "ghost blocked" });
  const writes: string[] = [];
  h.subscribe((change) => {
    for (const t of change.tasks)
      if (t.id === ids[0]) writes.push(`${t.abortRequested ? "marked" : "unmarked"} ${t.state.status}`);
  });
  expect(await h.abortTask(ids[0]!)).toBe("marked");
  const record = internals(h).session.records.tasks.get(ids[0]!);
  expect(record?.state).toEqual({
    status: "terminal",
    outcome: { status: "orphaned", reason: "missing_task" },
  });
  // One write: the marking commit itself settles it (spec §5.4), never held, no later commit.
  expect(writes).toEqual(["marked terminal"]);
  await h.close();
});

const evolving = (version: number, migrate?: () => never) =>
  defineTask<Json, Go, Json>({
    name: "evolving",
    version,
    initial: () => ({ phase: "go" }),
    phases: { go: async (_t, runtime) => void (await runtime.commit(() => complete("ran"))) },
    abort: async (_t, runtime) =>
      void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
    ...(migrate ? { migrate } : {}),
  });

const blockedCases = [
  ["missing_task", 1, [] as TaskDefinition<Json, Go, Json>[]],
  ["task_too_old", 2, [evolving(1)]],
  [
    "migration_failed",
    1,
    [
      evolving(2, () => {
        throw new Error("cannot upgrade");
      }),
    ],
  ],
] as const;

test.each(blockedCases)(
  "an aborted blocked task is orphaned with its blocked reason: %s",
  async (reason, stored, tasks) => {
    const { image, ids } = await storeWith([parked("evolving", stored)]);
    const h = await Harness.open(image, { tasks: [...tasks], onReport: () => undefined });
    await until(() => blocked(h).length === 1, { what: "blocked" });
    expect(blocked(h)[0]?.reason).toBe(reason);
    expect(await h.abortTask(ids[0]!)).toBe("marked");
    expect((await h.getTask(ids[0]!))?.state).toEqual({
      status: "terminal",
      outcome: { status: "orphaned", reason },
    });
    await h.close();
  },
);

test.each(blockedCases)(
  "a blocked task the scheduler orphans (marked by a conversation abort, settled at its reservation) carries its blocked reason too: %s",
  async (reason, stored, tasks) => {
    // Spec §5.4: the marking commit settles a blocked task only for abortTask; a conversation abort
    // only marks it, and the scheduler orphans it when it would reserve the abort invocation.
    const { image, ids } = await storeWith([parked("evolving", stored)]);
    const h = await Harness.open(image, { tasks: [...tasks], onReport: () => undefined });
    await until(() => blocked(h).length === 1, { what: "blocked" });
    await h.abortConversation(1);
    expect((await h.getTask(ids[0]!))?.state).toEqual({
      status: "terminal",
      outcome: { status: "orphaned", reason },
    });
    await h.close();
  },
);

test("an abort invocation resolves its definition like a run: a task stored at an older version is migrated, and the new definition's abort handler runs on the migrated record", async () => {
  const { image, ids } = await storeWith([parked("evolving", 1)], [{ old: 1 }]);
  const seen: Json[] = [];
  const v2 = defineTask<Json, Go, Json>({
    name: "evolving",
    version: 2,
    initial: () => ({ phase: "go" }),
    phases: {
      go: async () => {
        throw new Error("the run phase never runs: the task is abort-marked before it is reserved");
      },
    },
    abort: async (task, runtime) => {
      seen.push({ input: task.input, checkpoint: (task.state as { checkpoint: Go }).checkpoint });
      await runtime.commit(() => ({
        status: "terminal",
        outcome: { status: "aborted", reason: "v2 handler" },
      }));
    },
    migrate: (input, checkpoint, from) => ({
      input: { migrated: input, from },
      checkpoint: checkpoint as Go,
    }),
  });
  // Paused, so the mark lands before any reservation: the first invocation is the abort invocation.
  const h = await Harness.open(image, { tasks: [v2], paused: true });
  expect(await h.abortTask(ids[0]!)).toBe("marked");
  expect((await h.getTask(ids[0]!))?.state.status).toBe("pending");
  h.resume();
  expect(outcome(await done(h, ids[0]!))).toEqual({ status: "aborted", reason: "v2 handler" });
  expect(seen).toEqual([{ input: { migrated: { old: 1 }, from: 1 }, checkpoint: { phase: "go" } }]);
  expect((await row(image, ids[0]!))?.["version"]).toBe(2);
  await h.close();
});

test("an abort invocation resolves the registry as it is then, not the definition its run invocation had: a running task whose definition was unregistered is orphaned (missing_task) when aborted, its old abort handler never runs (break 30A)", async () => {
  // Break 30A: every orphaning test had a task whose definition was missing before it ever ran; an
  // abort invocation falling back on the definition its run invocation started with passed them.
  let handlerRan = false;
  const started = deferred();
  const going = defineTask<Json, Go, Json>({
    ...parked("unregistered-mid-run"),
    phases: {
      go: async (_t, _runtime, signal) => {
        started.resolve();
        await new Promise((_resolve, reject) =>
          signal.addEventListener("abort", () => reject(signal.reason)),
        );
      },
    },
    abort: async (_t, runtime) => {
      handlerRan = true;
      await runtime.commit(() => ({
        status: "terminal",
        outcome: { status: "aborted", reason: "old handler" },
      }));
    },
  });
  const h = await Harness.open(await memoryStore(), { tasks: [going] });
  const id = await h.createTask(going, null, { ownership: { kind: "conversation" } });
  await started.promise;
  h.registry.unregister("unregistered-mid-run");
  // Still running under the definition it started with: an active invocation, so not settled in the
  // marking commit; the scheduler settles it when it would reserve the abort invocation.
  expect(await h.abortTask(id)).toBe("marked");
  expect(outcome(await done(h, id))).toEqual({ status: "orphaned", reason: "missing_task" });
  expect(handlerRan).toBe(false);
  await h.close();
});

test("abortTask on a running task whose definition was unregistered only marks it: it is orphaned after its run invocation returned, never by the marking commit (draw 37)", async () => {
  // Draw 37, 17: the marking commit settling a blocked task that still had an active invocation
  // passed every test (the one running orphan above reads only the final outcome).
  const started = deferred();
  const release = deferred();
  let returned = false;
  const going = defineTask<Json, Go, Json>({
    ...parked("unregistered-while-running"),
    phases: {
      go: async (_t, _runtime, signal) => {
        started.resolve();
        await new Promise<void>((resolve) =>
          signal.addEventListener("abort", () => resolve(), { once: true }),
        );
        await release.promise; // cleans up for a while after the signal
        returned = true;
      },
    },
  });
  const h = await Harness.open(await memoryStore(), { tasks: [going] });
  const id = await h.createTask(going, null, conversationOwned);
  await started.promise;
  h.registry.unregister("unregistered-while-running");
  const writes: string[] = [];
  h.subscribe((change) => {
    for (const t of change.tasks)
      if (t.id === id)
        writes.push(
          `${t.abortRequested ? "marked" : "unmarked"} ${t.state.status}${returned ? " after return" : ""}`,
        );
  });
  const result = h.abortTask(id);
  setTimeout(() => release.resolve(), 50);
  expect(await result).toBe("marked");
  expect(returned).toBe(true);
  expect(outcome(await done(h, id))).toEqual({ status: "orphaned", reason: "missing_task" });
  expect(writes[0]).toBe("marked running");
  expect(writes.at(-1)).toBe("marked terminal after return");
  expect(writes.filter((w) => w.includes("terminal"))).toEqual(["marked terminal after return"]);
  await h.close();
});

test("an abort invocation of a task its run invocation left running migrates it too: a definition replaced while it ran, then the abort, runs the new abort handler on the migrated record (break 31bA)", async () => {
  // Break 31bA: the named migration test's task is pending when its abort invocation is reserved; a
  // reservation that started a running task's abort invocation without migrating it passed.
  const started = deferred();
  const seen: Json[] = [];
  const v1 = defineTask<Json, Go, Json>({
    ...parked("replaced-mid-run"),
    phases: {
      go: async (_t, _runtime, signal) => {
        started.resolve();
        await new Promise((_resolve, reject) =>
          signal.addEventListener("abort", () => reject(signal.reason)),
        );
      },
    },
  });
  const v2 = defineTask<Json, Go, Json>({
    ...parked("replaced-mid-run", 2),
    abort: async (task, runtime) => {
      seen.push({ input: task.input, version: task.version });
      await runtime.commit(() => ({
        status: "terminal",
        outcome: { status: "aborted", reason: "v2 handler" },
      }));
    },
    migrate: (input, checkpoint, from) => ({
      input: { migrated: input, from },
      checkpoint: checkpoint as Go,
    }),
  });
  const store = await memoryStore();
  const h = await Harness.open(store, { tasks: [v1] });
  const id = await h.createTask(v1, { old: 1 }, conversationOwned);
  await started.promise;
  h.registry.register(v2);
  expect(await h.abortTask(id)).toBe("marked");
  expect(outcome(await done(h, id))).toEqual({ status: "aborted", reason: "v2 handler" });
  expect(seen).toEqual([{ input: { migrated: { old: 1 }, from: 1 }, version: 2 }]);
  expect((await row(store, id))?.["version"]).toBe(2);
  await h.close();
});

test("abortTask answers only `marked` or `terminal`: aborting a marked task again is `marked`; an unknown id rejects", async () => {
  const stuck = parked("stuck");
  const quick = single("quick", async (_t, runtime) => void (await runtime.commit(() => complete("q"))));
  const h = await Harness.open(await memoryStore(), { tasks: [stuck, quick] });
  const id = await h.createTask(stuck, null, conversationOwned);
  await until(() => running(h) === 1, { what: "running" });
  const [first, second] = await Promise.all([h.abortTask(id), h.abortTask(id)]);
  expect([first, second]).toEqual(["marked", "marked"]);
  expect(await h.abortTask(id)).toMatch(/^(marked|terminal)$/);
  await done(h, id);
  expect(await h.abortTask(id)).toBe("terminal");
  const finished = await h.createTask(quick, null, conversationOwned);
  await done(h, finished);
  expect(await h.abortTask(finished)).toBe("terminal");
  await expect(h.abortTask(99_999)).rejects.toBeInstanceOf(UnknownTask);
  await h.close();
});

test("abortTask on a terminal task returns `terminal` and writes nothing: its record keeps no mark and its outcome; an unknown id rejects and writes nothing", async () => {
  // spec §2.2: "Aborting an already terminal task returns `terminal`; an unknown ID rejects."
  const quick = single("quick", async (_t, runtime) => void (await runtime.commit(() => complete("q"))));
  const h = await Harness.open(await memoryStore(), { tasks: [quick] });
  const finished = await h.createTask(quick, null, conversationOwned);
  const before = await done(h, finished);
  const published: unknown[] = [];
  h.subscribe((change) => published.push(...change.tasks));
  expect(await h.abortTask(finished)).toBe("terminal");
  await expect(h.abortTask(99_999)).rejects.toBeInstanceOf(UnknownTask);
  // Unknown right past the last id handed out, and below the first (draw 33b, 12: an id one past the
  // last task's, taken for an ended one, passed when only a far id was asked).
  for (const unknown of [finished + 1, 0, -1, 1.5])
    await expect(h.abortTask(unknown as typeof finished)).rejects.toBeInstanceOf(UnknownTask);
  expect(published).toEqual([]);
  expect(await h.getTask(finished)).toEqual(before);
  expect(before.abortRequested).toBe(false);
  await h.close();
});

test("abortTask committed in one group after the commit that ends the task answers `terminal` and marks nothing: it judges the task by that group's state, not the published record (draw 35cA)", async () => {
  // Draw 35cA (sections-0-4:249): every named terminal task had ended in a published commit; an
  // abortTask reading the published record (still running) while the group it joins has just ended
  // the task answered `marked` and passed them.
  const gate = deferred();
  const quick = single("quick-in-group", async (_t, runtime) => {
    await gate.promise;
    await runtime.commit(() => complete("q"));
  });
  const store = await memoryStore();
  const h = await Harness.open(store, { tasks: [quick] });
  const id = await h.createTask(quick, null, conversationOwned);
  await until(() => running(h) === 1, { what: "running" });
  // Hold the store's next transaction: a group in flight, so the next requests gather behind it.
  const hold = deferred();
  const original = store.commit.bind(store);
  store.commit = (async (work: Parameters<typeof store.commit>[0]) => {
    await hold.promise;
    return original(work);
  }) as typeof store.commit;
  const blocker = h.transaction((tx) => tx.writeDoc(1, "test.blocker", { n: 1 }));
  gate.resolve();
  // The task's ending commit is requested (it waits behind the held group), then the abort.
  await new Promise((r) => setTimeout(r, 20));
  const answer = h.abortTask(id);
  hold.resolve();
  await blocker;
  expect(await answer).toBe("terminal");
  const ended = await done(h, id);
  expect(outcome(ended)).toEqual({ status: "completed", result: "q" });
  expect(ended.abortRequested).toBe(false);
  await h.close();
});

test("abortTask on a task that ended under an earlier engine returns `terminal` and writes nothing (its record is not in memory after a reopen)", async () => {
  // spec §2.2: "Aborting an already terminal task returns `terminal`; an unknown ID rejects." A reopened
  // engine loads only live tasks, so the terminal one is known by its stored row alone.
  const quick = single(
    "quick-then-reopen",
    async (_t, runtime) => void (await runtime.commit(() => complete("q"))),
  );
  const store = await memoryStore();
  const first = await Harness.open(store, { tasks: [quick] });
  const finished = await first.createTask(quick, null, conversationOwned);
  const before = await done(first, finished);
  await first.close();
  const h = await Harness.open(await memoryStore(store.image()), { tasks: [quick] });
  const published: unknown[] = [];
  h.subscribe((change) => published.push(...change.tasks));
  expect(await h.abortTask(finished)).toBe("terminal");
  await expect(h.abortTask(99_999)).rejects.toBeInstanceOf(UnknownTask);
  // The id right past the stored ones is still unknown after the reopen (draw 33b, 12).
  await expect(h.abortTask((finished + 1) as typeof finished)).rejects.toBeInstanceOf(UnknownTask);
  expect(published).toEqual([]);
  expect(await h.getTask(finished)).toEqual(before);
  await h.close();
});

test("abortTask on a terminal task of a conversation moved away returns `terminal`, while the move is pending and once it is finished: the move's refusal is for live tasks (draw 35b)", async () => {
  // Draw 35b, 9: every named terminal task lived in a conversation at home; a moved-away check ahead
  // of the terminal one (ConversationMoved for an ended task) passed them.
  const moveIds = { input: (i: Json) => i, checkpoint: (cp: Go) => cp };
  const quick = defineTask<Json, Go, Json>({
    ...single("quick-moved", async (_t, runtime) => void (await runtime.commit(() => complete("q")))),
    moveIds,
  });
  const mover = defineTask<Json, Go, Json>({ ...parked("parked-moved"), moveIds });
  const sender = await Harness.open(await memoryStore(), { tasks: [quick, mover] });
  const c = await sender.transaction((tx) => tx.createConversation({ kind: "ownerless" }).id);
  const finished = await sender.createTask(quick, null, {
    ownership: { kind: "conversation" },
    conversationId: c,
  });
  const before = await done(sender, finished);
  const live = await sender.createTask(mover, null, {
    ownership: { kind: "conversation" },
    conversationId: c,
  });
  await until(() => running(sender) === 1, { what: "running" });
  const pkg = await sender.prepareMove("T-abort-terminal", c);
  expect(await sender.abortTask(finished)).toBe("terminal");
  const receiver = await Harness.open(await memoryStore(), { tasks: [quick, mover], paused: true });
  const adopted = await receiver.adoptMove(JSON.parse(JSON.stringify(pkg)));
  await sender.finishMove("T-abort-terminal", adopted);
  expect(await sender.abortTask(finished)).toBe("terminal");
  expect(outcome(await sender.getTask(live))).toEqual({ status: "orphaned", reason: "moved" });
  expect(await sender.abortTask(live)).toBe("terminal");
  expect(await sender.getTask(finished)).toEqual(before);
  await receiver.close();
  await sender.close();
});

test("a pending task that never ran reaches its abort handler once marked: its phase never runs (spec §5.4)", async () => {
  const log: string[] = [];
  const task = defineTask<Json, Go, Json>({
    name: "never-ran",
    version: 1,
    initial: () => ({ phase: "go" }),
    phases: {
      go: async (_t, runtime) => {
        log.push("phase");
        await runtime.commit(() => complete("ran"));
      },
    },
    abort: async (t, runtime) => {
      log.push(`abort from ${t.state.status}`);
      await runtime.commit(() => ({
        status: "terminal",
        outcome: { status: "aborted", reason: "never ran" },
      }));
    },
  });
  // Paused: the task stays pending, no invocation has started when the mark is committed.
  const h = await Harness.open(await memoryStore(), { tasks: [task], paused: true });
  const id = await h.createTask(task, null, conversationOwned);
  expect((await h.getTask(id))?.state.status).toBe("pending");
  expect(await h.abortTask(id)).toBe("marked");
  expect(await h.getTask(id)).toMatchObject({ abortRequested: true, state: { status: "pending" } });
  h.resume();
  expect(outcome(await done(h, id))).toEqual({ status: "aborted", reason: "never ran" });
  expect(log).toEqual(["abort from running"]);
  await h.close();
});

test("an explicit abortTask reaches a background task: it is marked and aborted like any other", async () => {
  const slow = parked("background-slow");
  const h = await Harness.open(await memoryStore(), { tasks: [slow] });
  const id = await h.createTask(slow, null, { ownership: { kind: "conversation" }, background: true });
  await until(() => running(h) === 1, { what: "running" });
  expect(await h.abortTask(id)).toBe("marked");
  expect(outcome(await done(h, id))).toEqual({ status: "aborted", reason: "handler" });
  await h.close();
});

test("the harness clock (the now option) stamps conversation creation and task start and end times", async () => {
  let clock = 10_000;
  const h = await Harness.open(await memoryStore(), { tasks: [parked("clocked")], now: () => clock });
  const slow = h.registry.get("clocked")!;
  const made = await h.transaction((tx) => tx.createConversation({ kind: "ownerless" }));
  expect(made.createdAt).toBe(10_000);
  clock = 20_000;
  const id = await h.createTask(slow, null, { ownership: { kind: "conversation" } });
  await until(() => running(h) === 1, { what: "running" });
  clock = 30_000;
  await h.abortTask(id);
  const ended = await done(h, id);
  expect([ended.startedAt, ended.endedAt]).toEqual([20_000, 30_000]);
  // Break 28M: a task created reserved is started by its creating commit, stamped on the same clock.
  clock = 40_000;
  const reserved = await h.createTask(slow, null, { ownership: { kind: "conversation" }, reserve: true });
  expect((await h.getTask(reserved))?.startedAt).toBe(40_000);
  clock = 50_000;
  await h.abortTask(reserved);
  const stopped = await done(h, reserved);
  expect([stopped.startedAt, stopped.endedAt]).toEqual([40_000, 50_000]);
  await h.close();
});

test("abortTask on a task that failed or faulted returns `terminal` and writes nothing: every terminal outcome is terminal, not only a completed, aborted or orphaned one (draw 40d)", async () => {
  // Draw 40d, 5 (sections-0-4:249): every named terminal task had completed, been aborted or been
  // orphaned; a terminal check that let a failed task through (answered `marked`) passed them.
  const failing = single(
    "fails",
    async (_t, runtime) =>
      void (await runtime.commit(() => ({
        status: "terminal" as const,
        outcome: { status: "failed" as const, error: { message: "no" } },
      }))),
  );
  const faulting = single("faults", async () => {
    throw new Error("boom");
  });
  const h = await Harness.open(await memoryStore(), { tasks: [failing, faulting] });
  const failed = await h.createTask(failing, null, conversationOwned);
  const faulted = await h.createTask(faulting, null, conversationOwned);
  const before = [await done(h, failed), await done(h, faulted)];
  expect(before.map((t) => (outcome(t) as { status: string }).status)).toEqual(["failed", "faulted"]);
  const published: unknown[] = [];
  h.subscribe((change) => published.push(...change.tasks));
  expect(await h.abortTask(failed)).toBe("terminal");
  expect(await h.abortTask(faulted)).toBe("terminal");
  expect(published).toEqual([]);
  expect([await h.getTask(failed), await h.getTask(faulted)]).toEqual(before);
  await h.close();
});
