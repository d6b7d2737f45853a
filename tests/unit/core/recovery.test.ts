/**
 * What a restart resumes from stored rows: the starting checkpoint and phases cut off mid-run,
 * migrations of old versions, rows that are not valid (bad JSON, a state that disagrees with its
 * status), commit grouping, and waits on tasks that ended before the restart.
 */
import { describe, expect, test } from "vitest";
import {
  defineTask,
  Harness,
  type HarnessOptions,
  InvalidTransition,
  type Json,
  type TaskDefinition,
  type TaskId,
} from "../../../worker/index.ts";
import type { MemoryImage } from "../../../worker/store/open.ts";
import { deferred, memoryStore, until } from "../../../worker/testing.ts";
import {
  blocked,
  complete,
  done,
  engineStillRuns,
  type Go,
  joiner,
  outcome,
  parked,
  ping,
  row,
  running,
  single,
  storeWith,
  untilAborted,
} from "./fixtures.ts";

describe("starting checkpoint and resumed phases", () => {
  type TwoPhases = { phase: "one" } | { phase: "two" };
  const seen: string[] = [];
  const twoPhases = defineTask<null, TwoPhases, Json>({
    name: "two-phases",
    version: 1,
    initial: () => ({ phase: "one" }),
    phases: {
      one: async (_t, runtime) => {
        seen.push(`one resumed=${runtime.resumed}`);
        await runtime.commit(() => ({ status: "running", checkpoint: { phase: "two" } }));
      },
      two: async (_t, runtime) => {
        seen.push(`two resumed=${runtime.resumed}`);
        await runtime.commit(() => complete("two"));
      },
    },
    abort: async (_t, runtime) =>
      void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
  });

  test("createTask({ start }) begins at that phase; a phase the definition lacks is an InvalidTransition", async () => {
    seen.length = 0;
    const store = await memoryStore();
    const h = await Harness.open(store, { tasks: [twoPhases] });
    const id = await h.createTask(twoPhases, null, {
      ownership: { kind: "conversation" },
      start: { phase: "two" },
    });
    expect(outcome(await done(h, id))).toEqual({ status: "completed", result: "two" });
    expect(seen).toEqual(["two resumed=false"]);
    const before = store.stats.commits;
    await expect(
      h.createTask(twoPhases, null, {
        ownership: { kind: "conversation" },
        start: { phase: "three" } as unknown as TwoPhases,
      }),
    ).rejects.toBeInstanceOf(InvalidTransition);
    expect(store.stats.commits).toBe(before);
    await engineStillRuns(h);
    await h.close();
  });

  test("createTask({ reserve }) is stored running by its creating commit, starts only after that commit, and a crash right after it resumes it", async () => {
    seen.length = 0;
    const store = await memoryStore();
    const h = await Harness.open(store, { tasks: [twoPhases] });
    let image: MemoryImage | undefined;
    const startedBeforeCommit: boolean[] = [];
    store.setFaultHook((point) => {
      if (point === "before-commit") startedBeforeCommit.push(seen.length > 0);
      if (point === "after-commit") image ??= store.image();
    });
    const id = await h.createTask(twoPhases, null, { ownership: { kind: "conversation" }, reserve: true });
    expect(outcome(await done(h, id))).toEqual({ status: "completed", result: "two" });
    // The creating transaction reached COMMIT before the first phase ran.
    expect(startedBeforeCommit[0]).toBe(false);
    expect(seen).toEqual(["one resumed=false", "two resumed=false"]);
    store.setFaultHook(undefined);
    await h.close();

    // The world as the creating commit left it: the task is running at its first phase.
    const crashed = await memoryStore(image);
    expect(
      await crashed.read((sql) => sql.get("SELECT status, state FROM tasks WHERE id = ?", [id])),
    ).toEqual({
      status: "running",
      state: JSON.stringify({ status: "running", checkpoint: { phase: "one" } }),
    });
    seen.length = 0;
    const second = await Harness.open(crashed, { tasks: [twoPhases] });
    expect(outcome(await done(second, id))).toEqual({ status: "completed", result: "two" });
    expect(seen).toEqual(["one resumed=true", "two resumed=false"]);
    await engineStillRuns(second);
    await second.close();
  });

  test("a phase cut off mid-run is resumed under the next engine; its next phase is not", async () => {
    seen.length = 0;
    const gate = deferred();
    const stuck = defineTask<null, TwoPhases, Json>({
      ...twoPhases,
      phases: {
        ...twoPhases.phases,
        one: async (_t, runtime, signal) => {
          seen.push(`one resumed=${runtime.resumed}`);
          gate.resolve();
          await untilAborted(signal);
        },
      },
    });
    const store = await memoryStore();
    const first = await Harness.open(store, { tasks: [stuck] });
    const id = await first.createTask(stuck, null, { ownership: { kind: "conversation" } });
    await gate.promise;
    // The image is taken while phase one runs: the crash leaves it running in storage.
    const image = await memoryStore(store.image());
    await first.close();
    const second = await Harness.open(image, { tasks: [twoPhases] });
    expect(outcome(await done(second, id))).toEqual({ status: "completed", result: "two" });
    expect(seen).toEqual(["one resumed=false", "one resumed=true", "two resumed=false"]);
    await engineStillRuns(second);
    await second.close();
  });

  test("a resumed phase that commits its own phase again runs on in the same invocation, and its next pass is not resumed (draw 37c)", async () => {
    // Draw 37c, 1: the named test's resumed phase moved to another phase; an invocation that cleared
    // `resumed` only when the phase changed name (a loop's next pass still told it may have been cut
    // off) passed every test.
    const loopSeen: string[] = [];
    const gate = deferred();
    type Loop = { phase: "loop"; n: number };
    const loopOf = (cutOff: boolean) =>
      defineTask<null, Loop, Json>({
        name: "resumed-loop",
        version: 1,
        initial: () => ({ phase: "loop", n: 0 }),
        phases: {
          loop: async (t, runtime, signal) => {
            const n = t.state.checkpoint.n;
            loopSeen.push(`loop ${n} resumed=${runtime.resumed}`);
            if (cutOff) {
              gate.resolve();
              await untilAborted(signal);
              return;
            }
            await runtime.commit(() =>
              n < 2
                ? { status: "running", checkpoint: { phase: "loop", n: n + 1 } }
                : complete(`looped ${n}`),
            );
          },
        },
        abort: async (_t, runtime) =>
          void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
      });
    const store = await memoryStore();
    const first = await Harness.open(store, { tasks: [loopOf(true)] });
    const id = await first.createTask(loopOf(true), null, { ownership: { kind: "conversation" } });
    await gate.promise;
    // The image is taken while the loop's first pass runs: the crash leaves it running in storage.
    const image = await memoryStore(store.image());
    await first.close();
    const second = await Harness.open(image, { tasks: [loopOf(false)] });
    expect(outcome(await done(second, id))).toEqual({ status: "completed", result: "looped 2" });
    expect(loopSeen).toEqual([
      "loop 0 resumed=false",
      "loop 0 resumed=true",
      "loop 1 resumed=false",
      "loop 2 resumed=false",
    ]);
    await engineStillRuns(second);
    await second.close();
  });

  test("a phase cut off mid-run stays resumed when the engine that turned it back to pending never ran it (found by sim seed 820)", async () => {
    seen.length = 0;
    const gate = deferred();
    const stuck = defineTask<null, TwoPhases, Json>({
      ...twoPhases,
      phases: {
        ...twoPhases.phases,
        one: async (_t, runtime, signal) => {
          seen.push(`one resumed=${runtime.resumed}`);
          gate.resolve();
          await untilAborted(signal);
        },
      },
    });
    const store = await memoryStore();
    const first = await Harness.open(store, { tasks: [stuck] });
    const id = await first.createTask(stuck, null, { ownership: { kind: "conversation" } });
    await gate.promise;
    const cut = await memoryStore(store.image());
    await first.close();
    // The next engine turns the running task back to pending in its opening commit and never runs
    // it (here it lacks the definition; in the simulator the store died right after that COMMIT).
    const second = await Harness.open(cut, { tasks: [] });
    expect(JSON.parse(String((await row(cut, id))?.state)).status).toBe("pending");
    const left = await memoryStore(cut.image());
    await second.close();
    // The engine after that still knows phase one was begun and may have had its effects.
    const third = await Harness.open(left, { tasks: [twoPhases] });
    expect(outcome(await done(third, id))).toEqual({ status: "completed", result: "two" });
    expect(seen).toEqual(["one resumed=false", "one resumed=true", "two resumed=false"]);
    await engineStillRuns(third);
    await third.close();
  });

  test("a running task written back to pending at an open keeps its whole checkpoint: the progress its phase committed is what the engine that runs it again reads", async () => {
    type Counted = { phase: "count"; done: number } | { phase: "end"; done: number };
    const reads: string[] = [];
    const gate = deferred();
    const counting = (stopAt: number): TaskDefinition<null, Counted, Json> =>
      defineTask<null, Counted, Json>({
        name: "counted-phases",
        version: 1,
        initial: () => ({ phase: "count", done: 0 }),
        phases: {
          count: async (t, runtime, signal) => {
            const done = t.state.checkpoint.done;
            reads.push(`count done=${done} resumed=${runtime.resumed}`);
            if (done < stopAt) {
              // Progress within the phase, then cut off before its next boundary.
              await runtime.commit(() => ({ status: "running", checkpoint: { phase: "count", done: 3 } }));
              gate.resolve();
              await untilAborted(signal);
              return;
            }
            await runtime.commit(() => ({ status: "running", checkpoint: { phase: "end", done } }));
          },
          end: async (t, runtime) => {
            await runtime.commit(() => complete(`ended at ${t.state.checkpoint.done} (${t.kind})`));
          },
        },
        abort: async (_t, runtime) =>
          void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
      });
    const store = await memoryStore();
    const first = await Harness.open(store, { tasks: [counting(3)] });
    const id = await first.createTask(counting(3), null, { ownership: { kind: "conversation" } });
    await gate.promise;
    const cut = await memoryStore(store.image());
    await first.close();
    // Opened without the definition: the running row is written back pending, interrupted, with
    // the checkpoint its phase had committed, progress and all (stored when the open returns).
    const second = await Harness.open(cut, { tasks: [] });
    expect(JSON.parse(String((await row(cut, id))?.state))).toEqual({
      status: "pending",
      checkpoint: { phase: "count", done: 3 },
      interrupted: true,
    });
    // Registered later in the same engine: the phase runs again, resumed, from that progress.
    second.registry.register(counting(0));
    expect(outcome(await done(second, id))).toEqual({
      status: "completed",
      result: "ended at 3 (counted-phases)",
    });
    expect(reads).toEqual(["count done=0 resumed=false", "count done=3 resumed=true"]);
    await engineStillRuns(second);
    await second.close();
  });
});

describe("migrate", () => {
  type V2State = { phase: "fresh"; carried: Json };
  function v2(migrate: TaskDefinition<{ upgraded: Json }, V2State, Json>["migrate"], seen: Json[] = []) {
    return defineTask<{ upgraded: Json }, V2State, Json>({
      name: "evolving",
      version: 2,
      initial: (input) => ({ phase: "fresh", carried: input.upgraded }),
      phases: {
        fresh: async (task, runtime) => {
          seen.push({ input: task.input, checkpoint: task.state.checkpoint });
          await runtime.commit(() => ({
            status: "terminal",
            outcome: { status: "completed", result: "v2 ran" },
          }));
        },
      },
      abort: async (_t, runtime) =>
        void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
      ...(migrate ? { migrate } : {}),
    });
  }

  test("a throwing migrate blocks the task (migration_failed), reports once, and the engine runs on", async () => {
    const { image, ids } = await storeWith([parked("evolving", 1)], [{ old: 1 }]);
    const reports: unknown[] = [];
    let migrateCalls = 0;
    const failing = v2(() => {
      migrateCalls++;
      throw new Error("cannot upgrade");
    });
    const options: HarnessOptions = { tasks: [failing, ping], onReport: (e) => reports.push(e) };
    const h = await Harness.open(image, options);
    await until(() => blocked(h).length === 1, { what: "blocked" });
    expect(blocked(h)[0]).toMatchObject({ id: ids[0], reason: "migration_failed" });
    await engineStillRuns(h);
    // A registry change reconsiders the blocked task, but the same definition object is not tried
    // again: its migrate ran once (spec §5.4).
    h.registry.register(
      single("unrelated", async (_t, runtime) => void (await runtime.commit(() => complete(1)))),
    );
    await engineStillRuns(h);
    expect(blocked(h)[0]).toMatchObject({ id: ids[0], reason: "migration_failed" });
    expect(migrateCalls).toBe(1);
    expect(reports).toHaveLength(1);
    expect(String((reports[0] as Error).message)).toMatch(/cannot upgrade/);
    const stored = await row(image, ids[0]!);
    expect(stored?.["version"]).toBe(1);
    expect((await h.getTask(ids[0]!))?.state.status).toBe("pending");
    await h.close();
  });

  test("a migrate that returns no checkpoint object is a failed migration: the task stays pending and blocked (migration_failed), never run or faulted, its record unchanged (draw 37c)", async () => {
    const { image, ids } = await storeWith([parked("evolving", 1)], [{ old: 1 }]);
    const reports: unknown[] = [];
    const seen: Json[] = [];
    // Incompatible code of another shape: the migration returns, but its checkpoint is no state.
    const malformed = v2(() => ({ input: { upgraded: 1 }, checkpoint: 42 as unknown as V2State }), seen);
    const h = await Harness.open(image, { tasks: [malformed, ping], onReport: (e) => reports.push(e) });
    // Judged: shown blocked, or gone from the live tasks (run and ended).
    await until(() => blocked(h).length === 1 || !h.inspect().tasks.some((t) => t.record.id === ids[0]), {
      what: "judged",
    });
    expect(blocked(h)[0]).toMatchObject({ id: ids[0], reason: "migration_failed" });
    await engineStillRuns(h);
    expect(seen).toEqual([]);
    expect(reports).toHaveLength(1);
    const task = await h.getTask(ids[0]!);
    expect(task?.state.status).toBe("pending");
    expect(task?.version).toBe(1);
    const stored = await row(image, ids[0]!);
    expect(stored?.["version"]).toBe(1);
    await h.close();
  });

  test("a failed migration is reported once per task and per definition object: two tasks failing under one definition report twice; a second failing object is tried and reported once more", async () => {
    const { image, ids } = await storeWith(
      [parked("evolving", 1), parked("evolving", 1)],
      [{ old: 1 }, { old: 2 }],
    );
    const reports: string[] = [];
    let calls = 0;
    const failing = v2(() => {
      calls++;
      throw new Error("first cannot upgrade");
    });
    const h = await Harness.open(image, {
      tasks: [failing, ping],
      onReport: (e) => reports.push(String((e as Error).message)),
    });
    await until(() => blocked(h).length === 2, { what: "both blocked" });
    await engineStillRuns(h);
    // Each task's failure is its own: reported once each, neither swallowed by the other's.
    expect(calls).toBe(2);
    expect(reports.filter((m) => m.includes("first cannot upgrade"))).toHaveLength(2);
    expect(reports.filter((m) => m.includes(`task ${ids[0]} `))).toHaveLength(1);
    expect(reports.filter((m) => m.includes(`task ${ids[1]} `))).toHaveLength(1);
    // A different definition object that fails too is tried (once per task) and reported anew.
    h.registry.register(
      v2(() => {
        calls++;
        throw new Error("second cannot upgrade");
      }),
    );
    await until(() => reports.filter((m) => m.includes("second cannot upgrade")).length === 2, {
      what: "the second object's failures reported",
    });
    await engineStillRuns(h);
    expect(calls).toBe(4);
    expect(reports.filter((m) => m.includes("second cannot upgrade"))).toHaveLength(2);
    expect(reports).toHaveLength(4);
    expect(blocked(h).map((b) => [b.id, b.reason])).toEqual([
      [ids[0], "migration_failed"],
      [ids[1], "migration_failed"],
    ]);
    await h.close();
  });

  test("a failed migration is retried for a different definition object even when it shares the same migrate function; never for the same object", async () => {
    const { image, ids } = await storeWith([parked("evolving", 1)], [{ old: 1 }]);
    let broken = true;
    let calls = 0;
    // One migrate function, whose outcome depends on state outside it (a fixed lookup, a loaded table).
    const migrate: TaskDefinition<{ upgraded: Json }, V2State, Json>["migrate"] = (input, checkpoint) => {
      calls++;
      if (broken) throw new Error("table not loaded");
      return { input: { upgraded: input }, checkpoint: { phase: "fresh", carried: checkpoint } };
    };
    const first = v2(migrate);
    const reports: string[] = [];
    const h = await Harness.open(image, {
      tasks: [first, ping],
      onReport: (e) => reports.push(String((e as Error).message)),
    });
    await until(() => blocked(h).length === 1, { what: "blocked" });
    broken = false;
    // The same object again: not retried.
    h.registry.register(first);
    await engineStillRuns(h);
    expect(calls).toBe(1);
    expect(blocked(h).map((b) => [b.id, b.reason])).toEqual([[ids[0], "migration_failed"]]);
    // A different object with the same migrate function: tried again, and now it takes the task.
    h.registry.register({ ...first });
    expect(outcome(await done(h, ids[0]!))).toEqual({ status: "completed", result: "v2 ran" });
    expect(calls).toBe(2);
    expect(reports.filter((m) => m.includes("table not loaded"))).toHaveLength(1);
    await h.close();
  });

  test("a working migrate upgrades the stored version, input and checkpoint before the phase runs", async () => {
    const { image, ids } = await storeWith([parked("evolving", 1)], [{ old: 1 }]);
    const seen: Json[] = [];
    const proper = v2(
      (input, checkpoint, from) => ({
        input: { upgraded: { input, from } },
        checkpoint: { phase: "fresh", carried: checkpoint },
      }),
      seen,
    );
    // Opened paused so that every write after the open's recovery is seen.
    const h = await Harness.open(image, { tasks: [proper], paused: true });
    const writes: string[] = [];
    h.subscribe((change) => {
      for (const t of change.tasks) {
        if (t.id !== ids[0]) continue;
        const phase = (t.state as { checkpoint?: { phase: string } }).checkpoint?.phase ?? "-";
        writes.push(`${t.state.status} v${t.version} ${phase}`);
      }
    });
    h.resume();
    expect(outcome(await done(h, ids[0]!))).toEqual({ status: "completed", result: "v2 ran" });
    // The migrated record lands in the reservation's commit, with the move to running: no write of
    // a migrated record still pending, nor of a running one at the old version.
    expect(writes).toEqual(["running v2 fresh", "terminal v2 -"]);
    expect(seen).toEqual([
      {
        input: { upgraded: { input: { old: 1 }, from: 1 } },
        checkpoint: { phase: "fresh", carried: { phase: "go" } },
      },
    ]);
    const stored = await row(image, ids[0]!);
    expect(stored?.["version"]).toBe(2);
    expect(JSON.parse(String(stored?.["input"]))).toEqual({ upgraded: { input: { old: 1 }, from: 1 } });
    await engineStillRuns(h);
    await h.close();
  });

  test("an abort invocation's reservation migrates too: the abort handler of an older task sees the migrated input and checkpoint, stored at the new version", async () => {
    // Break 28H: every named test migrated for a run invocation, so an abort reservation that kept
    // the old input under the new version passed them.
    const { image, ids } = await storeWith([parked("evolving", 1)], [{ old: 1 }]);
    const seen: Json[] = [];
    const aborting = defineTask<Json, { phase: "fresh"; carried: Json }, Json>({
      name: "evolving",
      version: 2,
      initial: () => ({ phase: "fresh", carried: null }),
      phases: { fresh: async () => undefined },
      abort: async (task, runtime) => {
        seen.push({
          input: task.input,
          checkpoint: (task.state as { checkpoint?: Json }).checkpoint ?? null,
          version: task.version,
        });
        await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }));
      },
      migrate: (input, checkpoint, from) => ({
        input: { upgraded: input, from },
        checkpoint: { phase: "fresh", carried: checkpoint },
      }),
    });
    const h = await Harness.open(image, { tasks: [aborting], paused: true });
    expect(await h.abortTask(ids[0]!)).toBe("marked");
    h.resume();
    expect(outcome(await done(h, ids[0]!))).toMatchObject({ status: "aborted" });
    expect(seen).toEqual([
      {
        input: { upgraded: { old: 1 }, from: 1 },
        checkpoint: { phase: "fresh", carried: { phase: "go" } },
        version: 2,
      },
    ]);
    const stored = await row(image, ids[0]!);
    expect(stored?.["version"]).toBe(2);
    expect(JSON.parse(String(stored?.["input"]))).toEqual({ upgraded: { old: 1 }, from: 1 });
    await h.close();
  });

  test("one migrate callback takes every older stored version: tasks stored at version 1 and at 2 each reach version 3 from their own version", async () => {
    let store = await memoryStore();
    const ids: TaskId[] = [];
    // Each older engine stores one task at its version and closes before running it.
    for (const version of [1, 2]) {
      const h = await Harness.open(store, { tasks: [parked("multi", version)], paused: true });
      ids.push(
        await h.createTask(
          parked("multi", version),
          { at: version },
          { ownership: { kind: "conversation" } },
        ),
      );
      const image = store.image();
      await h.close();
      store = await memoryStore(image);
    }
    const calls: Json[] = [];
    const v3 = defineTask<Json, Go, Json>({
      name: "multi",
      version: 3,
      initial: () => ({ phase: "go" }),
      phases: { go: async (task, runtime) => void (await runtime.commit(() => complete(task.input))) },
      abort: async () => undefined,
      migrate: (input, checkpoint, from) => {
        calls.push({ input, from });
        return { input: { migratedFrom: from }, checkpoint: checkpoint as Go };
      },
    });
    const h = await Harness.open(store, { tasks: [v3] });
    for (const [i, id] of ids.entries())
      expect(outcome(await done(h, id))).toEqual({ status: "completed", result: { migratedFrom: i + 1 } });
    expect(calls).toEqual([
      { input: { at: 1 }, from: 1 },
      { input: { at: 2 }, from: 2 },
    ]);
    for (const id of ids) expect((await row(store, id))?.["version"]).toBe(3);
    await h.close();
  });

  test("a stored version newer than the definition blocks the task (task_too_old)", async () => {
    // With a migrate too (break 28D: a definition with one took a newer stored version by migrating
    // it down, and every named test's older definition had none): migrate is for older versions only.
    let migrations = 0;
    const down = (input: Json, checkpoint: Json) => {
      migrations++;
      return { input: { upgraded: input }, checkpoint: { phase: "fresh" as const, carried: checkpoint } };
    };
    for (const migrate of [undefined, down]) {
      const { image, ids } = await storeWith([parked("evolving", 3)]);
      const h = await Harness.open(image, { tasks: [v2(migrate)] });
      await until(() => blocked(h).length === 1, { what: "blocked" });
      expect(blocked(h)[0]).toMatchObject({ id: ids[0], kind: "evolving", reason: "task_too_old" });
      await engineStillRuns(h);
      expect((await h.getTask(ids[0]!))?.state.status).toBe("pending");
      expect((await row(image, ids[0]!))?.["version"]).toBe(3);
      await h.close();
    }
    expect(migrations).toBe(0);
  });
});

describe("a checkpoint row that is not valid JSON", () => {
  test("faults its own task with a diagnostic naming the column; the other task completes", async () => {
    const { image, ids } = await storeWith([parked("victim"), parked("survivor")]);
    const [victim, survivor] = ids as [TaskId, TaskId];
    await image.commit((sql) => sql.run("UPDATE tasks SET state = '{bad' WHERE id = ?", [victim]));
    const h = await Harness.open(image, {
      tasks: [
        single("victim", async (_t, runtime) => void (await runtime.commit(() => complete("victim ran")))),
        single(
          "survivor",
          async (_t, runtime) => void (await runtime.commit(() => complete("survivor ran"))),
        ),
      ],
    });
    const v = outcome(await done(h, victim));
    expect(v?.status).toBe("faulted");
    expect((v as { error: { message: string } }).error.message).toMatch(/column state is not valid JSON/);
    expect(h.inspect().diagnostics).toHaveLength(1);
    expect(h.inspect().diagnostics[0]).toMatchObject({ id: victim });
    expect(h.inspect().diagnostics[0]!.message).toMatch(/column state/);
    expect(outcome(await done(h, survivor))).toEqual({ status: "completed", result: "survivor ran" });
    expect((await row(image, victim))?.["status"]).toBe("terminal");
    await engineStillRuns(h);
    await h.close();
  });
});

describe("stored rows", () => {
  test("a row whose state disagrees with its status column faults its own task with a diagnostic", async () => {
    const { image, ids } = await storeWith([parked("mismatch"), parked("fine")]);
    const [victim, other] = ids as [TaskId, TaskId];
    await image.commit((sql) =>
      sql.run(
        `UPDATE tasks SET state = '{"status":"waiting","checkpoint":{"phase":"go"},"on":[],"policy":"allSettled"}' WHERE id = ?`,
        [victim],
      ),
    );
    const ran = single("mismatch", async (_t, runtime) => void (await runtime.commit(() => complete("ran"))));
    const fine = single(
      "fine",
      async (_t, runtime) => void (await runtime.commit(() => complete("fine ran"))),
    );
    const h = await Harness.open(image, { tasks: [ran, fine] });
    const v = outcome(await done(h, victim));
    expect(v?.status).toBe("faulted");
    expect((v as { error: { message: string } }).error.message).toMatch(/does not match status/);
    expect(outcome(await done(h, other))).toEqual({ status: "completed", result: "fine ran" });
    await engineStillRuns(h);
    await h.close();
  });
});

describe("grouping and old records", () => {
  test("a harness opened without grouping commits one commit per transaction, however many arrive at once", async () => {
    const store = await memoryStore();
    const h = await Harness.open(store, { groupCommit: false });
    const before = { transactions: store.stats.transactions, commits: store.stats.commits };
    await Promise.all(
      Array.from({ length: 20 }, (_, i) => h.transaction((tx) => tx.writeDoc(1, `doc-${i}`, { i }))),
    );
    expect(store.stats.commits - before.commits).toBe(20);
    expect(store.stats.transactions - before.transactions).toBe(20);
    await h.close();
  });

  test("after a restart, a new wait on a task that ended before it is satisfied at once", async () => {
    const store = await memoryStore();
    const h = await Harness.open(store);
    const old = await h.createTask(ping, null, { ownership: { kind: "conversation" } });
    expect(outcome(await done(h, old))).toEqual({ status: "completed", result: "pong" });
    const image = store.image();
    await h.close();

    const h2 = await Harness.open(await memoryStore(image), { tasks: [ping] });
    // The terminal record is the durable receipt (spec §5.3): its outcome, value included.
    const id = await h2.createTask(joiner("joiner", { result: (o) => (o ?? null) as Json }), old, {
      ownership: { kind: "conversation" },
    });
    // Bounded (draw 39e): an ended task not in memory read as live left the waiter waiting, which
    // only timed the test out; now it fails here.
    expect(outcome(await done(h2, id, 1000))).toEqual({
      status: "completed",
      result: { status: "completed", result: "pong" },
    });
    await engineStillRuns(h2);
    await h2.close();
  });
});

test("on open a waiting task stays waiting, not turned back to pending: its phase does not run again, and it wakes once its target ends", async () => {
  const log: string[] = [];
  const waiter = defineTask<TaskId, Go | { phase: "joined" }, Json>({
    name: "reopen-waiter",
    version: 1,
    initial: () => ({ phase: "go" }),
    phases: {
      go: async (t, runtime) => {
        log.push("go");
        await runtime.commit(() => ({
          status: "waiting",
          checkpoint: { phase: "joined" },
          on: [t.input],
          policy: "allSettled",
        }));
      },
      joined: async (t, runtime) => {
        // Draw 41c: woken after the reopen, this phase was never begun before it, so it is not a rerun:
        // not resumed (a waiting task marked interrupted at open passed every recovery test).
        log.push(`joined resumed=${runtime.resumed}`);
        const [o] = await runtime.outcomes([t.input]);
        await runtime.commit(() => complete(o?.status === "completed" ? o.result : "none"));
      },
    },
    abort: async () => undefined,
  });
  const gate = deferred();
  const target = (hold: (signal: AbortSignal) => Promise<unknown>) =>
    single("reopen-target", async (_t, runtime, signal) => {
      await hold(signal);
      if (!signal.aborted) await runtime.commit(() => complete("late"));
    });
  const store = await memoryStore();
  const h = await Harness.open(store, { tasks: [waiter, target(untilAborted)] });
  const on = await h.createTask(target(untilAborted), null, {
    ownership: { kind: "conversation" },
  });
  const id = await h.createTask(waiter, on, { ownership: { kind: "conversation" } });
  await until(() => h.inspect().tasks.some((t) => t.record.id === id && t.state.kind === "waiting"), {
    what: "the waiter waiting",
  });
  const image = store.image(); // a crash: nothing of the close reaches this image
  await h.close();
  const h2 = await Harness.open(await memoryStore(image), { tasks: [waiter, target(() => gate.promise)] });
  await until(() => running(h2) === 1, { what: "the target running again" });
  expect((await h2.getTask(id))?.state).toEqual({
    status: "waiting",
    checkpoint: { phase: "joined" },
    on: [on],
    policy: "allSettled",
  });
  gate.resolve();
  expect(outcome(await done(h2, id))).toEqual({ status: "completed", result: "late" });
  expect(log).toEqual(["go", "joined resumed=false"]);
  await engineStillRuns(h2);
  await h2.close();
});

describe("a held outcome across a restart", () => {
  test("a held outcome whose owned work still lives stays completing after a restart and finishes when that work does", async () => {
    let childId: TaskId | undefined;
    const holder = (child: TaskDefinition<Json, Go, Json>) =>
      single("restart-holder", async (_t, runtime) => {
        await runtime.commit((tx) => {
          childId = tx.createTask(child, null, { ownership: { kind: "task", taskId: runtime.taskId } });
          return { status: "running", checkpoint: { phase: "go" } };
        });
        await runtime.commit(() => complete("held"));
      });
    const parkedChild = parked("restart-child");
    const store = await memoryStore();
    const first = await Harness.open(store, { tasks: [holder(parkedChild), parkedChild] });
    const id = await first.createTask(holder(parkedChild), null, { ownership: { kind: "conversation" } });
    await until(() => childId !== undefined && running(first) === 1, {
      what: "held with a live child",
    });
    expect((await first.getTask(id))?.state.status).toBe("completing");
    const image = await memoryStore(store.image());
    await first.close();

    const gate = deferred();
    const finishing = single("restart-child", async (_t, runtime) => {
      await gate.promise;
      await runtime.commit(() => complete("child"));
    });
    const second = await Harness.open(image, { tasks: [finishing] });
    await until(() => running(second) === 1, { what: "child running again" });
    expect((await second.getTask(id))?.state).toEqual({
      status: "completing",
      outcome: { status: "completed", result: "held" },
    });
    gate.resolve();
    expect(outcome(await done(second, id))).toEqual({ status: "completed", result: "held" });
    await second.close();
  });

  test("a held outcome whose owned work lives in a conversation it owns, not a child, stays completing after a restart and finishes when that work does (break 31H)", async () => {
    let workerId: TaskId | undefined;
    const holder = (worker: TaskDefinition<Json, Go, Json>) =>
      single("restart-conv-holder", async (_t, runtime) => {
        await runtime.commit((tx) => {
          const c = tx.createConversation({ kind: "task", taskId: runtime.taskId });
          workerId = tx.createTask(worker, null, {
            ownership: { kind: "conversation" },
            conversationId: c.id,
          });
          return { status: "running", checkpoint: { phase: "go" } };
        });
        await runtime.commit(() => complete("held"));
      });
    const parkedWorker = parked("restart-conv-worker");
    const store = await memoryStore();
    const first = await Harness.open(store, { tasks: [holder(parkedWorker), parkedWorker] });
    const id = await first.createTask(holder(parkedWorker), null, { ownership: { kind: "conversation" } });
    await until(() => workerId !== undefined && running(first) === 1, {
      what: "held with live work in its conversation",
    });
    expect((await first.getTask(id))?.state.status).toBe("completing");
    const image = await memoryStore(store.image());
    await first.close();

    const gate = deferred();
    const finishing = single("restart-conv-worker", async (_t, runtime) => {
      await gate.promise;
      await runtime.commit(() => complete("worker"));
    });
    const second = await Harness.open(image, { tasks: [finishing] });
    await until(() => running(second) === 1, { what: "the worker running again" });
    expect((await second.getTask(id))?.state).toEqual({
      status: "completing",
      outcome: { status: "completed", result: "held" },
    });
    gate.resolve();
    expect(outcome(await done(second, workerId!))).toEqual({ status: "completed", result: "worker" });
    expect(outcome(await done(second, id))).toEqual({ status: "completed", result: "held" });
    await second.close();
  });
});

describe("a held outcome is final (spec §5.5 rule 2)", () => {
  /** A store holding `restart-holder` completing (held "held") over its live child; its version 1. */
  async function heldImage() {
    let childId: TaskId | undefined;
    const child = parked("final-child");
    const holder = single("final-holder", async (_t, runtime) => {
      await runtime.commit((tx) => {
        childId = tx.createTask(child, null, { ownership: { kind: "task", taskId: runtime.taskId } });
        return { status: "running", checkpoint: { phase: "go" } };
      });
      await runtime.commit(() => complete("held"));
    });
    const store = await memoryStore();
    const first = await Harness.open(store, { tasks: [holder, child] });
    const id = await first.createTask(holder, null, { ownership: { kind: "conversation" } });
    await until(() => childId !== undefined && running(first) === 1, { what: "held with a live child" });
    expect((await first.getTask(id))?.state.status).toBe("completing");
    const image = await memoryStore(store.image());
    await first.close();
    return { image, id, childId: childId!, child };
  }

  test("without its definition, abortTask on it only marks it and returns marked: the child is aborted, and the final record keeps the held outcome and the mark, never orphaned", async () => {
    const { image, id, childId, child } = await heldImage();
    const h = await Harness.open(image, { tasks: [child] });
    await until(() => running(h) === 1, { what: "child running again" });
    expect(await h.abortTask(id)).toBe("marked");
    const final = await done(h, id);
    expect(final.state).toEqual({ status: "terminal", outcome: { status: "completed", result: "held" } });
    expect(final.abortRequested).toBe(true);
    expect(outcome(await h.getTask(childId))).toEqual({ status: "aborted", reason: "handler" });
    await h.close();
  });

  test("with a newer definition it is never migrated, reserved or run: it ends with its stored version and outcome", async () => {
    const { image, id, child } = await heldImage();
    const ran: string[] = [];
    const newer = defineTask<Json, Go, Json>({
      name: "final-holder",
      version: 2,
      initial: () => ({ phase: "go" }),
      phases: { go: async () => void ran.push("phase") },
      abort: async () => void ran.push("abort"),
      migrate: (input, checkpoint) => {
        ran.push("migrate");
        return { input, checkpoint: checkpoint as Go };
      },
    });
    const h = await Harness.open(image, { tasks: [newer, child] });
    await until(() => running(h) === 1, { what: "child running again" });
    expect(await h.abortTask(id)).toBe("marked");
    const final = await done(h, id);
    expect(final).toMatchObject({
      version: 1,
      abortRequested: true,
      state: { status: "terminal", outcome: { status: "completed", result: "held" } },
    });
    expect(ran).toEqual([]);
    await h.close();
  });
});

describe("a waiting task without its definition", () => {
  async function waiterOnOther(other: TaskDefinition<Json, Go, Json>) {
    const waiter = joiner("def-waiter");
    const store = await memoryStore();
    const first = await Harness.open(store, { tasks: [waiter, other] });
    const otherId = await first.createTask(other, null, { ownership: { kind: "conversation" } });
    const waiterId = await first.createTask(waiter, otherId, { ownership: { kind: "conversation" } });
    await until(() => running(first) === 1, { what: "other running" });
    let waiting = false;
    while (!waiting) {
      waiting = (await first.getTask(waiterId))?.state.status === "waiting";
      if (!waiting) await new Promise((r) => setTimeout(r, 5));
    }
    const image = await memoryStore(store.image());
    await first.close();
    return { image, otherId, waiterId };
  }

  test("an aborted waiting task without its definition is orphaned at once; the task it waits on runs on", async () => {
    const other = parked("def-other");
    const { image, otherId, waiterId } = await waiterOnOther(other);
    const h = await Harness.open(image, { tasks: [other] });
    await until(() => running(h) === 1, { what: "other running again" });
    // At once: the marking commit itself writes the orphaned outcome (no later commit of the scheduler).
    const writes: string[] = [];
    h.subscribe((change) => {
      for (const t of change.tasks)
        if (t.id === waiterId) writes.push(`${t.abortRequested} ${t.state.status}`);
    });
    expect(await h.abortTask(waiterId)).toBe("marked");
    expect(writes).toEqual(["true terminal"]);
    expect(outcome(await h.getTask(waiterId))).toEqual({ status: "orphaned", reason: "missing_task" });
    const still = await h.getTask(otherId);
    expect(still?.state.status).toBe("running");
    expect(still?.abortRequested).toBe(false);
    await h.close();
  });

  test("a waiting task stays blocked without its definition once its wait is satisfied, and resumes migrated under a newer one", async () => {
    const gate = deferred();
    const other = single("def-other", async (_t, runtime, signal) => {
      await Promise.race([gate.promise, untilAborted(signal)]);
      await runtime.commit(() => complete("other"));
    });
    const { image, otherId, waiterId } = await waiterOnOther(other);
    const h = await Harness.open(image, { tasks: [other] });
    gate.resolve();
    await done(h, otherId);
    await until(() => blocked(h).some((b) => b.id === waiterId), { what: "waiter blocked" });
    expect(blocked(h).find((b) => b.id === waiterId)?.reason).toBe("missing_task");
    expect((await h.getTask(waiterId))?.state.status).toBe("waiting");
    // Break 30K: the migrated input is the one stored and run (an input left as stored passed when
    // migrate returned it unchanged).
    const given = new Set<string>();
    const v2 = defineTask<number, { phase: "go" } | { phase: "joined" } | { phase: "migrated" }, Json>({
      name: "def-waiter",
      version: 2,
      initial: () => ({ phase: "go" }),
      phases: {
        go: async () => undefined,
        joined: async () => undefined,
        migrated: async (t, runtime) => void (await runtime.commit(() => complete(`v2 ${t.input}`))),
      },
      abort: async () => undefined,
      migrate: (input, checkpoint, from) => {
        given.add(JSON.stringify([input, checkpoint, from]));
        return { input: (input as number) + 1000, checkpoint: { phase: "migrated" } };
      },
    });
    h.registry.register(v2);
    expect(outcome(await done(h, waiterId))).toEqual({ status: "completed", result: `v2 ${otherId + 1000}` });
    // Draw 34c: migrate is given the waiting task's stored input, checkpoint and version (a migrate
    // handed no checkpoint for a waiting task passed when it ignored the one it was given).
    expect([...given]).toEqual([JSON.stringify([otherId, { phase: "joined" }, 1])]);
    expect((await h.getTask(waiterId))?.input).toBe(otherId + 1000);
    expect((await h.getTask(waiterId))?.version).toBe(2);
    await h.close();
  });

  test("a waiting task whose wait is satisfied stays waiting, blocked, under a newer definition whose migrate throws; a working one then resumes it", async () => {
    // Draw 32cB: a failed migration that wrote the satisfied waiting task back to pending (as a
    // reservation handing back would) passed every named test (each blocked waiting task lacked its
    // definition; each failing migrate blocked a pending one).
    const gate = deferred();
    const other = single("def-other", async (_t, runtime, signal) => {
      await Promise.race([gate.promise, untilAborted(signal)]);
      await runtime.commit(() => complete("other"));
    });
    const { image, otherId, waiterId } = await waiterOnOther(other);
    type Waiter = { phase: "go" } | { phase: "joined" } | { phase: "migrated" };
    const version2 = (migrate: (input: Json) => { input: number; checkpoint: Waiter }) =>
      defineTask<number, Waiter, Json>({
        name: "def-waiter",
        version: 2,
        initial: () => ({ phase: "go" }),
        phases: {
          go: async () => undefined,
          joined: async () => undefined,
          migrated: async (t, runtime) => void (await runtime.commit(() => complete(`v2 ${t.input}`))),
        },
        abort: async () => undefined,
        migrate,
      });
    const reports: unknown[] = [];
    const failing = version2(() => {
      throw new Error("cannot upgrade the waiter");
    });
    const h = await Harness.open(image, { tasks: [other, failing], onReport: (e) => reports.push(e) });
    gate.resolve();
    await done(h, otherId);
    await until(() => blocked(h).some((b) => b.id === waiterId), { what: "waiter blocked" });
    expect(blocked(h).find((b) => b.id === waiterId)?.reason).toBe("migration_failed");
    await engineStillRuns(h);
    const stillWaiting = await h.getTask(waiterId);
    expect(stillWaiting?.state.status).toBe("waiting");
    expect(stillWaiting?.version).toBe(1);
    expect(reports).toHaveLength(1);
    h.registry.register(
      version2((input) => ({ input: (input as number) + 1000, checkpoint: { phase: "migrated" } })),
    );
    expect(outcome(await done(h, waiterId))).toEqual({ status: "completed", result: `v2 ${otherId + 1000}` });
    await h.close();
  });
});

test("a held outcome is never migrated: a newer definition leaves it and its stored version alone", async () => {
  const gate = deferred();
  const kid = single("held-kid", async (_t, runtime, signal) => {
    await Promise.race([gate.promise, untilAborted(signal)]);
    await runtime.commit(() => complete("kid"));
  });
  const holder = single("migrating-holder", async (_t, runtime) => {
    await runtime.commit((tx) => {
      tx.createTask(kid, null, { ownership: { kind: "task", taskId: runtime.taskId } });
      return { status: "running", checkpoint: { phase: "go" } };
    });
    await runtime.commit(() => complete("held"));
  });
  const reports: unknown[] = [];
  const h = await Harness.open(await memoryStore(), {
    tasks: [holder, kid],
    onReport: (e) => reports.push(e),
  });
  const status = new Map<TaskId, string>();
  h.subscribe((change) => {
    for (const t of change.tasks) status.set(t.id, t.state.status);
  });
  const id = await h.createTask(holder, null, { ownership: { kind: "conversation" } });
  await until(() => status.get(id) === "completing", { what: "holder held" });
  h.registry.register(
    defineTask<Json, Go, Json>({
      name: "migrating-holder",
      version: 2,
      initial: () => ({ phase: "go" }),
      phases: { go: async () => undefined },
      abort: async () => undefined,
      migrate: () => {
        throw new Error("must not migrate a held outcome");
      },
    }),
  );
  gate.resolve();
  const final = await done(h, id);
  expect(outcome(final)).toEqual({ status: "completed", result: "held" });
  expect(final.version).toBe(1);
  expect(reports).toEqual([]);
  await h.close();
});

test("a held fault is never migrated either: released with a newer definition registered, it keeps its stored version and its cleanup runs (draw 39, 5)", async () => {
  // Draw 39, 5: the release of a held fault resolving the definition for its cleanup the way a
  // reservation does (running the newer definition's migrate) passed every test: each held outcome
  // met by a newer definition was completed, which has no cleanup.
  const kid = parked("faulted-held-kid");
  const fail = deferred();
  const holder = single("faulting-holder", async (_t, runtime) => {
    await runtime.commit((tx) => {
      tx.createTask(kid, null, { ownership: { kind: "task", taskId: runtime.taskId } });
      return { status: "running", checkpoint: { phase: "go" } };
    });
    await fail.promise;
    throw new Error("holder broke");
  });
  const reports: unknown[] = [];
  const h = await Harness.open(await memoryStore(), {
    tasks: [holder, kid],
    onReport: (e) => reports.push(e),
  });
  let held = false;
  h.subscribe((change) => {
    if (change.tasks.some((t) => t.kind === "faulting-holder" && t.state.status === "completing"))
      held = true;
  });
  const id = await h.createTask(holder, null, { ownership: { kind: "conversation" } });
  await until(() => running(h) === 2, { what: "holder and kid running" });
  const cleaned: TaskId[] = [];
  h.registry.register(
    defineTask<Json, Go, Json>({
      name: "faulting-holder",
      version: 2,
      initial: () => ({ phase: "go" }),
      phases: { go: async () => undefined },
      abort: async () => undefined,
      migrate: () => {
        throw new Error("must not migrate a held outcome");
      },
      cleanUp: (_tx, task) => void cleaned.push(task.id),
    }),
  );
  fail.resolve();
  const final = await done(h, id);
  expect(outcome(final)?.status).toBe("faulted");
  expect(final.version).toBe(1);
  expect(cleaned).toEqual([id]);
  expect(held).toBe(true);
  expect(reports.some((e) => String(e).includes("migrat"))).toBe(false);
  await h.close();
});

describe("a waiting task whose definition is unregistered while it waits", () => {
  // Reading 23e: the upstream scenarios dispose the waiter's registration while the engine runs; the
  // tests above open a second engine without it.
  async function waiting(other: TaskDefinition<Json, Go, Json>) {
    const waiter = joiner("rt-waiter");
    const h = await Harness.open(await memoryStore(), { tasks: [waiter, other] });
    const otherId = await h.createTask(other, null, { ownership: { kind: "conversation" } });
    const waiterId = await h.createTask(waiter, otherId, { ownership: { kind: "conversation" } });
    await until(() => h.inspect().tasks.some((t) => t.record.id === waiterId && t.state.kind === "waiting"), {
      what: "the waiter waiting",
    });
    h.registry.unregister("rt-waiter");
    return { h, otherId, waiterId };
  }

  test("it stays blocked once its wait is satisfied, and resumes migrated under a newer one", async () => {
    const gate = deferred();
    const other = single("rt-other", async (_t, runtime) => {
      await gate.promise;
      await runtime.commit(() => complete("other"));
    });
    const { h, otherId, waiterId } = await waiting(other);
    gate.resolve();
    await done(h, otherId);
    await until(() => blocked(h).some((b) => b.id === waiterId), { what: "waiter blocked" });
    expect(blocked(h).find((b) => b.id === waiterId)?.reason).toBe("missing_task");
    expect((await h.getTask(waiterId))?.state.status).toBe("waiting");
    // Break 30K: the migrated input is the one stored and run (an input left as stored passed when
    // migrate returned it unchanged).
    const given = new Set<string>();
    const v2 = defineTask<number, { phase: "go" } | { phase: "joined" } | { phase: "migrated" }, Json>({
      name: "rt-waiter",
      version: 2,
      initial: () => ({ phase: "go" }),
      phases: {
        go: async () => undefined,
        joined: async () => undefined,
        migrated: async (t, runtime) => void (await runtime.commit(() => complete(`v2 ${t.input}`))),
      },
      abort: async () => undefined,
      migrate: (input, checkpoint, from) => {
        given.add(JSON.stringify([input, checkpoint, from]));
        return { input: (input as number) + 1000, checkpoint: { phase: "migrated" } };
      },
    });
    h.registry.register(v2);
    expect(outcome(await done(h, waiterId))).toEqual({ status: "completed", result: `v2 ${otherId + 1000}` });
    // Draw 34c: migrate is given the waiting task's stored input, checkpoint and version (a migrate
    // handed no checkpoint for a waiting task passed when it ignored the one it was given).
    expect([...given]).toEqual([JSON.stringify([otherId, { phase: "joined" }, 1])]);
    expect((await h.getTask(waiterId))?.input).toBe(otherId + 1000);
    expect((await h.getTask(waiterId))?.version).toBe(2);
    await h.close();
  });

  test("aborted, it is orphaned at once; the task it waits on runs on", async () => {
    const { h, otherId, waiterId } = await waiting(parked("rt-other"));
    const writes: string[] = [];
    h.subscribe((change) => {
      for (const t of change.tasks)
        if (t.id === waiterId) writes.push(`${t.abortRequested} ${t.state.status}`);
    });
    expect(await h.abortTask(waiterId)).toBe("marked");
    expect(writes).toEqual(["true terminal"]);
    expect(outcome(await h.getTask(waiterId))).toEqual({ status: "orphaned", reason: "missing_task" });
    const still = await h.getTask(otherId);
    expect(still?.state.status).toBe("running");
    expect(still?.abortRequested).toBe(false);
    await h.close();
  });
});
