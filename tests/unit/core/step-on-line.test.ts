/**
 * The step before every phase (spec §5.1, "Reservation and step rules") runs on the commit line and
 * reads the committed task: a runtime commit or an abort mark queued on the line before the step
 * lands first and counts; the step never decides from state that is still on its way to storage.
 */
import { describe, expect, test } from "vitest";
import { internals } from "../../../worker/core/internals.ts";
import { defineTask, Harness, type Json, type TaskId } from "../../../worker/index.ts";
import { deferred, memoryStore, until } from "../../../worker/testing.ts";
import { complete, done, engineStillRuns, outcome, single } from "./fixtures.ts";

type Two = { phase: "a" } | { phase: "b" };

describe("the step before a phase runs on the commit line", () => {
  test("a runtime commit queued before the phase returned lands before the step and counts as progress", async () => {
    const h = await Harness.open(await memoryStore());
    let landed: Promise<unknown> | undefined;
    const task = defineTask<Json, Two, Json>({
      name: "unawaited",
      version: 1,
      initial: () => ({ phase: "a" }),
      phases: {
        // Queues its checkpoint commit and returns before it is stored.
        a: async (_t, runtime) => {
          landed = runtime.commit(() => ({ status: "running", checkpoint: { phase: "b" } }));
        },
        b: async (_t, runtime) => void (await runtime.commit(() => complete("b ran"))),
      },
      abort: async () => undefined,
    });
    const id = await h.createTask(task, null, { ownership: { kind: "conversation" } });
    expect(outcome(await done(h, id))).toEqual({ status: "completed", result: "b ran" });
    await expect(landed).resolves.toMatchObject({ state: { status: "running", checkpoint: { phase: "b" } } });
    await engineStillRuns(h);
    await h.close();
  });

  test("an abort mark queued before the phase returned stops the invocation: the next phase never starts", async () => {
    const h = await Harness.open(await memoryStore());
    let self: TaskId | undefined;
    let marking: Promise<unknown> | undefined;
    const started: string[] = [];
    const task = defineTask<Json, Two, Json>({
      name: "marked-at-boundary",
      version: 1,
      initial: () => ({ phase: "a" }),
      phases: {
        a: async (_t, runtime) => {
          started.push("a");
          await runtime.commit(() => ({ status: "running", checkpoint: { phase: "b" } }));
          // The mark is queued on the line now, ahead of the step that follows this return.
          marking = h.abortTask(self!);
        },
        b: async (_t, runtime) => {
          started.push("b");
          await runtime.commit(() => complete("b ran"));
        },
      },
      abort: async (_t, runtime) => {
        started.push("abort");
        await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted", reason: "mark" } }));
      },
    });
    self = await h.createTask(task, null, { ownership: { kind: "conversation" } });
    expect(outcome(await done(h, self))).toEqual({ status: "aborted", reason: "mark" });
    expect(await marking).toBe("marked");
    expect(started).toEqual(["a", "abort"]);
    await engineStillRuns(h);
    await h.close();
  });
  test("an abort mark already being stored when the phase returns stops the invocation too: the step waits for it on the line", async () => {
    // Break 29F: the step decided at once from the published record whenever no commit was still
    // queued, though one (the mark) was being written: phase b ran on an aborted task.
    const store = await memoryStore();
    const write = store.commit.bind(store);
    let hold: Promise<void> | undefined;
    let reachedStore = deferred();
    // Held after the group's callbacks ran, before COMMIT: the commit is no longer queued, not yet stored.
    store.commit = ((work: Parameters<typeof write>[0]) =>
      write(async (sql) => {
        const value = await work(sql);
        if (hold) {
          reachedStore.resolve();
          await hold;
        }
        return value;
      })) as typeof store.commit;
    const h = await Harness.open(store);
    let self: TaskId | undefined;
    let marking: Promise<unknown> | undefined;
    const started: string[] = [];
    const storing = deferred();
    const task = defineTask<Json, Two, Json>({
      name: "marked-while-storing",
      version: 1,
      initial: () => ({ phase: "a" }),
      phases: {
        a: async (_t, runtime) => {
          started.push("a");
          await runtime.commit(() => ({ status: "running", checkpoint: { phase: "b" } }));
          // The mark's group is held in the store: no longer queued, not yet stored.
          reachedStore = deferred();
          hold = storing.promise;
          marking = h.abortTask(self!);
          await reachedStore.promise;
          hold = undefined;
          setTimeout(() => storing.resolve(), 20);
        },
        b: async (_t, runtime) => {
          started.push("b");
          await runtime.commit(() => complete("b ran"));
        },
      },
      abort: async (_t, runtime) => {
        started.push("abort");
        await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted", reason: "mark" } }));
      },
    });
    self = await h.createTask(task, null, { ownership: { kind: "conversation" } });
    expect(outcome(await done(h, self))).toEqual({ status: "aborted", reason: "mark" });
    expect(await marking).toBe("marked");
    expect(started).toEqual(["a", "abort"]);
    await engineStillRuns(h);
    await h.close();
  });
  test("step rule 3 before the first phase: an abort mark that lands after the reservation, before the first step, stops the run invocation: no phase runs, the abort handler decides", async () => {
    const h = await Harness.open(await memoryStore());
    let marking: Promise<unknown> | undefined;
    const started: string[] = [];
    const task = defineTask<Json, Two, Json>({
      name: "marked-before-first-phase",
      version: 1,
      initial: () => ({ phase: "a" }),
      phases: {
        a: async (_t, runtime) => {
          started.push("a");
          await runtime.commit(() => complete("a ran"));
        },
        b: async () => void started.push("b"),
      },
      abort: async (_t, runtime) => {
        started.push("abort");
        await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted", reason: "mark" } }));
      },
    });
    // The commit that reserves the task (or creates it running) is published before its run
    // invocation takes its first step: the mark asked right there is queued on the line ahead of
    // that step, so the scheduler chose run mode and the step (rule 3) must end the invocation.
    let sawRunning = false;
    const stop = h.subscribe((change) => {
      if (marking) return;
      for (const t of change.tasks)
        if (t.kind === "marked-before-first-phase" && t.state.status === "running") {
          sawRunning = true;
          marking = h.abortTask(t.id);
        }
    });
    const self = await h.createTask(task, null, { ownership: { kind: "conversation" } });
    expect(outcome(await done(h, self))).toEqual({ status: "aborted", reason: "mark" });
    stop();
    expect(sawRunning).toBe(true);
    expect(await marking).toBe("marked");
    expect(started).toEqual(["abort"]);
    await engineStillRuns(h);
    await h.close();
  });
  test("step rule 1: a phase that leaves the task waiting (its checkpoint unchanged) or terminal ends the invocation there: no fault, no further phase", async () => {
    const h = await Harness.open(await memoryStore());
    const gate = deferred();
    const child = single("held-child", async (_t, runtime) => {
      await gate.promise;
      await runtime.commit(() => complete("child"));
    });
    const runs: string[] = [];
    const parent = defineTask<Json, Two, Json>({
      name: "waits-unchanged",
      version: 1,
      initial: () => ({ phase: "a" }),
      phases: {
        a: async (task, runtime) => {
          runs.push("a");
          if (runs.length === 1) {
            // Waiting with the very checkpoint it runs at: rule 6 (no progress) must not apply.
            await runtime.commit((tx) => {
              const id = tx.createTask(child, null, { ownership: { kind: "task", taskId: task.id } });
              return { status: "waiting", checkpoint: { phase: "a" }, on: [id], policy: "allSettled" };
            });
            return;
          }
          await runtime.commit(() => complete("resumed"));
        },
        b: async () => void runs.push("b"),
      },
      abort: async () => undefined,
    });
    const id = await h.createTask(parent, null, { ownership: { kind: "conversation" } });
    await h.waitUntil(() => h.inspect().tasks.some((t) => t.record.id === id && t.state.kind === "waiting"));
    expect(runs).toEqual(["a"]);
    gate.resolve();
    expect(outcome(await done(h, id))).toEqual({ status: "completed", result: "resumed" });
    // Resumed in a new invocation at its checkpoint; after the terminal commit no phase ran.
    expect(runs).toEqual(["a", "a"]);
    await engineStillRuns(h);
    await h.close();
  });
});

describe("step rule 1 on a completing task", () => {
  test("step rule 1: a phase whose terminal commit is held completing ends the invocation there: no phase runs again, through the hold and after its final commit", async () => {
    const h = await Harness.open(await memoryStore());
    const gate = deferred();
    const child = single("completing-child", async (_t, runtime) => {
      await gate.promise;
      await runtime.commit(() => complete("child"));
    });
    let runs = 0;
    let childId: TaskId | undefined;
    const parent = single("completing-parent", async (_t, runtime) => {
      runs++;
      if (runs === 1)
        await runtime.commit((tx) => {
          childId = tx.createTask(child, null, { ownership: { kind: "task", taskId: runtime.taskId } });
          return { status: "running", checkpoint: { phase: "go" } };
        });
      // Held completing: its live child is ordinary owned work.
      await runtime.commit(() => complete(`finished at run ${runs}`));
    });
    const id = await h.createTask(parent, null, { ownership: { kind: "conversation" } });
    await until(() => h.inspect().tasks.some((t) => t.record.id === id && t.state.kind === "completing"), {
      what: "the parent held completing",
    });
    // The invocation has ended: nothing of it is active while the hold lasts, and its phase ran once.
    await until(() => !internals(h).scheduler.active.has(id), { what: "the parent's invocation ended" });
    expect(runs).toBe(1);
    gate.resolve();
    expect(outcome(await done(h, id))).toEqual({ status: "completed", result: "finished at run 1" });
    expect(outcome(await done(h, childId!))).toEqual({ status: "completed", result: "child" });
    expect(runs).toBe(1);
    await engineStillRuns(h);
    await h.close();
  });
});

describe("a draft of a commit (the scheduler plans in one ahead of its commit)", () => {
  test("the commit runs its callback in the draft while nothing was applied to the line since, else in a fresh overlay", async () => {
    const h = await Harness.open(await memoryStore());
    const { session } = internals(h);
    const inDraft = (draft: ReturnType<typeof session.draft>) =>
      session.commit((_tx, overlay) => overlay === draft.overlay, {}, draft);
    const untouched = session.draft();
    expect(await inDraft(untouched)).toBe(true);
    const overtaken = session.draft();
    await h.transaction((tx) => void tx.appendEntry(1, { kind: "note", data: { n: 1 } }));
    expect(await inDraft(overtaken)).toBe(false);
    // A draft a callback already ran in is sealed: it is never taken again.
    expect(await inDraft(untouched)).toBe(false);
    await h.close();
  });
});
