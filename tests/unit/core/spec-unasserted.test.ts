/**
 * Rules of the specification that held by construction but that no test asserted (issue 29 item 9),
 * each asserted here in full: `inspect()` never runs a migration (spec §2.2); there are no
 * free-standing task dependencies (§5.5); a phase handler that never settles never hands over to a
 * replacing definition (§5.4).
 */
import { describe, expect, test } from "vitest";
import {
  type CreateTaskOptions,
  defineTask,
  Harness,
  type Json,
  type TaskId,
  timerWait,
} from "../../../worker/index.ts";
import { deferred, FakeClock, memoryStore, until } from "../../../worker/testing.ts";
import { complete, done, type Go, outcome, parked, row, running, settle, storeWith } from "./fixtures.ts";

describe("inspect() never runs a migration (spec §2.2)", () => {
  test("a newer definition with migrate shows ready { migrates: true } and migrate is not called; one without migrate shows migration_failed; a failing migrate shows failed only after the scheduler tried it, once", async () => {
    const { image, ids } = await storeWith([parked("older"), parked("plain"), parked("same")]);
    const [older, plain, same] = ids as [TaskId, TaskId, TaskId];
    let calls = 0;
    // Draw 36c: a definition of the stored version that has a migrate migrates nothing (a flag read
    // from the definition having a migrate, not from the versions, passed every test).
    const sameVersion = defineTask<Json, Go, Json>({
      ...parked("same"),
      migrate: () => {
        calls++;
        throw new Error("never called: same version");
      },
    });
    const failing = defineTask<Json, Go, Json>({
      ...parked("older", 2),
      migrate: () => {
        calls++;
        throw new Error("cannot migrate");
      },
    });
    const h = await Harness.open(image, { tasks: [failing, parked("plain", 2), sameVersion], paused: true });
    for (let i = 0; i < 3; i++) {
      const states = h.inspect().tasks.map((t) => [t.record.id, t.state.kind, t.state]);
      expect(states).toEqual([
        [older, "ready", { kind: "ready", migrates: true }],
        [plain, "blocked", expect.objectContaining({ kind: "blocked", reason: "migration_failed" })],
        [same, "ready", { kind: "ready", migrates: false }],
      ]);
    }
    expect(calls).toBe(0);
    // Nothing was written: both records are still stored at version 1, pending.
    expect(await row(image, older)).toMatchObject({ version: 1, status: "pending" });
    expect(await row(image, plain)).toMatchObject({ version: 1, status: "pending" });
    // The scheduler tries the migration once it runs; only then does inspection show it failed.
    h.resume();
    await until(() => h.inspect().tasks.find((t) => t.record.id === older)?.state.kind === "blocked", {
      what: "the failed migration shown",
    });
    expect(calls).toBe(1);
    for (let i = 0; i < 3; i++)
      expect(h.inspect().tasks.find((t) => t.record.id === older)?.state).toMatchObject({
        kind: "blocked",
        reason: "migration_failed",
      });
    expect(calls).toBe(1);
    expect(await row(image, older)).toMatchObject({ version: 1, status: "pending" });
    await h.close();
  });

  test("a waiting task whose wait is over is shown ready { migrates: true } without its migrate being called; its failure shows only after the scheduler tried it, once", async () => {
    // draw 33b, 8: the test above builds pending tasks only; an inspection that resolved a waiting
    // task whose wait is over (running its migrate, reporting its failure) passed every named test.
    const T0 = Date.UTC(2026, 0, 5, 8, 0);
    const clock = new FakeClock(T0);
    const sleeper = defineTask<Json, Go | { phase: "woke" }, Json>({
      name: "unasserted-sleeper",
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
    await until(() => first.inspect().tasks[0]?.state.kind === "waiting", { what: "waiting on its timer" });
    const image = await memoryStore(store.image());
    await first.close();
    clock.jump(5000);
    let calls = 0;
    const reports: unknown[] = [];
    const newer = defineTask<Json, Go | { phase: "woke" }, Json>({
      ...sleeper,
      version: 2,
      migrate: () => {
        calls++;
        throw new Error("cannot migrate");
      },
    });
    const h = await Harness.open(image, {
      tasks: [newer],
      now: clock.now,
      timers: clock,
      paused: true,
      onReport: (e) => reports.push(e),
    });
    for (let i = 0; i < 3; i++) {
      const [task] = h.inspect().tasks;
      expect(task?.record.state.status).toBe("waiting");
      expect(task?.state).toEqual({ kind: "ready", migrates: true });
    }
    expect([calls, reports.length]).toEqual([0, 0]);
    expect(await row(image, id)).toMatchObject({ version: 1, status: "waiting" });
    h.resume();
    await until(() => h.inspect().tasks[0]?.state.kind === "blocked", { what: "the failed migration shown" });
    for (let i = 0; i < 3; i++)
      expect(h.inspect().tasks[0]?.state).toMatchObject({ kind: "blocked", reason: "migration_failed" });
    expect([calls, reports.length]).toEqual([1, 1]);
    await h.close();
  });

  test("a waiting task whose wait is over is shown ready without its wake continuation being run; the scheduler runs it once, after resume()", async () => {
    // Draw 34A: the tests above catch task code through a migrate only; an inspection that previewed
    // a drain in a dropped draft (running a wake continuation, writing nothing) passed with no migrate.
    const T0 = Date.UTC(2026, 0, 5, 8, 0);
    const clock = new FakeClock(T0);
    let wakes = 0;
    const sleeper = defineTask<Json, Go | { phase: "woke" }, Json>({
      name: "unasserted-waker",
      version: 1,
      initial: () => ({ phase: "go" }),
      phases: {
        go: async (_t, runtime) => void (await runtime.commit(() => timerWait({ phase: "woke" }, T0 + 1000))),
        woke: async (_t, runtime) => void (await runtime.commit(() => complete("woke"))),
      },
      wake: {
        woke: () => {
          wakes++;
          return undefined;
        },
      },
      abort: async (_t, runtime) =>
        void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
    });
    const store = await memoryStore();
    const first = await Harness.open(store, { tasks: [sleeper], now: clock.now, timers: clock });
    const id = await first.createTask(sleeper, null, { ownership: { kind: "conversation" } });
    await until(() => first.inspect().tasks[0]?.state.kind === "waiting", { what: "waiting on its timer" });
    const image = await memoryStore(store.image());
    await first.close();
    clock.jump(5000);
    const h = await Harness.open(image, { tasks: [sleeper], now: clock.now, timers: clock, paused: true });
    for (let i = 0; i < 3; i++) {
      const [task] = h.inspect().tasks;
      expect(task?.record.state.status).toBe("waiting");
      expect(task?.state).toEqual({ kind: "ready", migrates: false });
    }
    expect(wakes).toBe(0);
    expect(await row(image, id)).toMatchObject({ version: 1, status: "waiting" });
    h.resume();
    expect(await h.waitForTask(id)).toMatchObject({
      state: { status: "terminal", outcome: { status: "completed" } },
    });
    expect(wakes).toBe(1);
    await h.close();
  });
  test("an abort-marked task is shown ready { migrates: true } without its migrate being called: its abort invocation's migration is the scheduler's to run, after resume() (draw 37)", async () => {
    // Draw 37, 8: every test above inspects a task without an abort mark; an inspection that judged
    // a marked task as its abort invocation would (resolving the definition, so running migrate)
    // passed them all.
    const release = deferred();
    const first = defineTask<Json, Go, Json>({
      ...parked("unasserted-marked"),
      abort: async (_t, _runtime, signal) => {
        release.resolve();
        // Waits for the close: the task is stored running with its mark, no outcome.
        await new Promise<void>((resolve) =>
          signal.addEventListener("abort", () => resolve(), { once: true }),
        );
      },
    });
    const store = await memoryStore();
    const h1 = await Harness.open(store, { tasks: [first] });
    const id = await h1.createTask(first, null, { ownership: { kind: "conversation" } });
    await until(() => running(h1) === 1, { what: "running" });
    expect(await h1.abortTask(id)).toBe("marked");
    await release.promise; // its abort invocation has begun
    await h1.close();
    const image = await memoryStore(store.image());
    let calls = 0;
    const newer = defineTask<Json, Go, Json>({
      ...first,
      version: 2,
      migrate: (input) => {
        calls++;
        return { input, checkpoint: { phase: "go" } };
      },
      abort: async (_t, runtime) =>
        void (await runtime.commit(() => ({
          status: "terminal",
          outcome: { status: "aborted", reason: "v2" },
        }))),
    });
    const h = await Harness.open(image, { tasks: [newer], paused: true });
    for (let i = 0; i < 3; i++) {
      const [task] = h.inspect().tasks;
      expect(task?.record.abortRequested).toBe(true);
      expect(task?.state).toEqual({ kind: "ready", migrates: true });
    }
    expect(calls).toBe(0);
    expect(await row(image, id)).toMatchObject({ version: 1, status: "pending" });
    h.resume();
    expect(outcome(await done(h, id))).toEqual({ status: "aborted", reason: "v2" });
    expect(calls).toBeGreaterThan(0);
    await h.close();
  });
});

describe("no free-standing task dependencies (spec §5.5)", () => {
  test("createTask takes no dependency: a task created after another starts without waiting for it; ordering exists only through a waiting state", async () => {
    const h = await Harness.open(await memoryStore());
    const gate = deferred();
    const first = defineTask<Json, Go, Json>({
      ...parked("first"),
      phases: {
        go: async (_t, runtime) => {
          await gate.promise;
          await runtime.commit(() => complete("first"));
        },
      },
    });
    const second = defineTask<Json, Go, Json>({
      ...parked("second"),
      phases: { go: async (_t, runtime) => void (await runtime.commit(() => complete("second"))) },
    });
    const a = await h.createTask(first, null, { ownership: { kind: "conversation" } });
    // A dependency option is not part of the options: one given anyway is ignored, not honoured.
    const b = await h.createTask(second, null, {
      ownership: { kind: "conversation" },
      dependsOn: [a],
      after: [a],
    } as CreateTaskOptions<Go>);
    expect(outcome(await done(h, b))).toEqual({ status: "completed", result: "second" });
    expect((await h.getTask(a))?.state.status).toBe("running");
    // The stored record carries no dependency: only a waiting state names other tasks.
    const stored = (await h.getTask(b))!;
    expect(Object.keys(stored).sort()).toEqual(
      [
        "abortRequested",
        "background",
        "conversationId",
        "endedAt",
        "id",
        "input",
        "kind",
        "startedAt",
        "state",
        "version",
      ].sort(),
    );
    gate.resolve();
    expect(outcome(await done(h, a))).toEqual({ status: "completed", result: "first" });
    await h.close();
  });

  test("a child task starts while its owner's invocation still runs: ownership orders nothing, only a waiting state does", async () => {
    // Break 30P: a pending child held back until its owner's invocation ended passed the test above
    // (two conversation-owned tasks, no owner).
    const h = await Harness.open(await memoryStore());
    const gate = deferred();
    const owner = defineTask<Json, Go, Json>({
      ...parked("owner"),
      phases: {
        go: async (_t, runtime) => {
          await gate.promise;
          await runtime.commit(() => complete("owner"));
        },
      },
    });
    const child = defineTask<Json, Go, Json>({
      ...parked("child"),
      phases: { go: async (_t, runtime) => void (await runtime.commit(() => complete("child"))) },
    });
    const a = await h.createTask(owner, null, { ownership: { kind: "conversation" } });
    await until(() => running(h) === 1, { what: "owner running" });
    const b = await h.createTask(child, null, { ownership: { kind: "task", taskId: a } });
    expect(outcome(await done(h, b))).toEqual({ status: "completed", result: "child" });
    expect((await h.getTask(a))?.state.status).toBe("running");
    gate.resolve();
    expect(outcome(await done(h, a))).toEqual({ status: "completed", result: "owner" });
    await h.close();
  });
  test("children an owner creates in its own phase commit, two at once, start while its next phase still runs, each without waiting for the other (draw 35bB)", async () => {
    // Draw 35bB: the named tests create their tasks from outside, one commit each; a drain skipped
    // for a commit that also moves the creating task's checkpoint (so its children waited for the
    // owner's invocation to end) passed them. Both definitions are installed at open, so no
    // registration on creation kicks the scheduler for them.
    const gate = deferred();
    const started: string[] = [];
    const child = defineTask<Json, Go, Json>({
      ...parked("spawned"),
      phases: {
        go: async (task, runtime) => {
          started.push(String(task.input));
          if (task.input === "first") await gate.promise;
          await runtime.commit(() => complete(task.input));
        },
      },
    });
    const owner = defineTask<Json, { phase: "spawn" } | { phase: "hold" }, Json>({
      name: "spawner",
      version: 1,
      initial: () => ({ phase: "spawn" }),
      abort: async () => undefined,
      phases: {
        spawn: async (_t, runtime) => {
          await runtime.commit((tx) => {
            tx.createTask(child, "first", { ownership: { kind: "task", taskId: runtime.taskId } });
            tx.createTask(child, "second", { ownership: { kind: "task", taskId: runtime.taskId } });
            return { status: "running", checkpoint: { phase: "hold" } };
          });
        },
        hold: async (_t, runtime) => {
          await gate.promise;
          await runtime.commit(() => complete("owner"));
        },
      },
    });
    const h = await Harness.open(await memoryStore(), { tasks: [owner, child] });
    const a = await h.createTask(owner, null, { ownership: { kind: "conversation" } });
    await until(() => started.length === 2, { timeoutMs: 2000, what: "both children started" });
    expect([...started].sort()).toEqual(["first", "second"]);
    expect((await h.getTask(a))?.state.status).toBe("running");
    const second = (await h.tasks({ kind: "spawned" })).find((t) => t.input === "second")!;
    expect(outcome(await done(h, second.id))).toEqual({ status: "completed", result: "second" });
    gate.resolve();
    expect(outcome(await done(h, a))).toEqual({ status: "completed", result: "owner" });
    await h.close();
  });
});

describe("a never-settling handler never hands over (spec §5.4)", () => {
  test("a replaced definition's handler that never returns keeps running its old code: the new version runs only after a phase boundary, which never comes", async () => {
    const h = await Harness.open(await memoryStore());
    const ran: string[] = [];
    const stuck = defineTask<Json, Go, Json>({
      ...parked("handover"),
      phases: {
        go: async (_t, _runtime, signal) => {
          ran.push("v1");
          await new Promise((_resolve, reject) =>
            signal.addEventListener("abort", () => reject(signal.reason), { once: true }),
          );
        },
      },
    });
    const id = await h.createTask(stuck, null, { ownership: { kind: "conversation" } });
    await until(() => ran.length === 1, { what: "v1 running" });
    const replacement = defineTask<Json, Go, Json>({
      ...parked("handover", 2),
      migrate: (input, checkpoint) => ({ input, checkpoint: checkpoint as Go }),
      phases: {
        go: async (_t, runtime) => {
          ran.push("v2");
          await runtime.commit(() => complete("v2"));
        },
      },
    });
    h.registry.register(replacement);
    await settle(50);
    expect(ran).toEqual(["v1"]);
    expect((await h.getTask(id))?.version).toBe(1);
    expect(h.inspect().tasks.map((t) => [t.record.id, t.state.kind])).toEqual([[id, "running"]]);
    // Close signals the handler; still no handover: v2 never ran in this harness.
    await h.close();
    expect(ran).toEqual(["v1"]);
  });
});
