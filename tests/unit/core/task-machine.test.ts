/**
 * The task machine's rules, one test each: a missing definition, faults, what a transaction and a
 * handler may commit (JSON only, frozen once committed, no unknown outcome, no use after its
 * callback), memos, and a registry replaced mid-run. Every test checks the typed error or outcome the
 * rule names AND that the rest of the engine keeps running.
 */
import { describe, expect, test } from "vitest";
import { internals } from "../../../worker/core/internals.ts";
import type { NextTaskState } from "../../../worker/core/types.ts";
import {
  CommitRefused,
  type ConversationId,
  defineTask,
  Harness,
  InvalidTransition,
  type Json,
  NotJson,
  OwnerNotLive,
  type TaskId,
  type TaskRuntime,
  type Tx,
  timerWait,
} from "../../../worker/index.ts";
import { deferred, memoryStore, until } from "../../../worker/testing.ts";
import {
  blocked,
  complete,
  done,
  engineStillRuns,
  type Go,
  outcome,
  parked,
  ping,
  row,
  running,
  settle,
  single,
  storeWith,
  untilAborted,
} from "./fixtures.ts";

describe("missing definition", () => {
  test("stays pending and blocked; other tasks run; abort orphans it; it keeps idle waits pending; registering it later runs it", async () => {
    const { image, ids } = await storeWith([parked("ghost"), parked("ghost")]);
    const [kept, dropped] = ids as [TaskId, TaskId];
    const h = await Harness.open(image, { tasks: [ping] });
    // Visible as blocked without any other work arriving to wake the scheduler.
    await until(() => blocked(h).length === 2, { what: "both ghosts blocked" });
    expect(blocked(h).map((b) => [b.id, b.kind, b.reason])).toEqual([
      [kept, "ghost", "missing_task"],
      [dropped, "ghost", "missing_task"],
    ]);
    expect((await h.getTask(kept))?.state.status).toBe("pending");
    await engineStillRuns(h);
    expect((await h.getTask(kept))?.state.status).toBe("pending");

    expect(await h.abortTask(dropped)).toBe("marked");
    expect(outcome(await done(h, dropped))).toEqual({ status: "orphaned", reason: "missing_task" });
    expect(blocked(h).map((b) => b.id)).toEqual([kept]);

    // A blocked task is live: the idle wait resolves only once registering its code lets it finish.
    let idle = false;
    const idleWait = h.waitForIdle().then(() => void (idle = true));
    // Its conversation's idle wait (ordinary traversal) too.
    let conversationIdle = false;
    const conversationWait = h
      .waitForConversationIdle((await h.getTask(kept))!.conversationId)
      .then(() => void (conversationIdle = true));
    await engineStillRuns(h);
    expect(idle).toBe(false);
    expect(conversationIdle).toBe(false);
    h.registry.register(
      single("ghost", async (_t, runtime) => void (await runtime.commit(() => complete("found")))),
    );
    // The registry change alone reconsiders it: no other commit wakes the scheduler (draw 39c).
    await settle();
    expect(outcome(await h.getTask(kept))).toEqual({ status: "completed", result: "found" });
    expect(outcome(await done(h, kept))).toEqual({ status: "completed", result: "found" });
    await Promise.all([idleWait, conversationWait]);
    expect(blocked(h)).toEqual([]);
    await engineStillRuns(h);
    await h.close();
  });
});

describe("faults", () => {
  test("a throwing phase handler faults its task with the error message", async () => {
    const h = await Harness.open(await memoryStore());
    const id = await h.createTask(
      single("thrower", async () => {
        throw new Error("boom in phase");
      }),
      null,
      { ownership: { kind: "conversation" } },
    );
    expect(outcome(await done(h, id))).toEqual({ status: "faulted", error: { message: "boom in phase" } });
    await engineStillRuns(h);
    await h.close();
  });

  test("a phase that throws a value other than an Error faults with that value as text, and so does a handler that throws before returning its promise", async () => {
    const h = await Harness.open(await memoryStore());
    const stringThrower = await h.createTask(
      single("string-thrower", async () => {
        throw "boom as a string";
      }),
      null,
      { ownership: { kind: "conversation" } },
    );
    expect(outcome(await done(h, stringThrower, 2000))).toEqual({
      status: "faulted",
      error: { message: "boom as a string" },
    });
    // Not an async function: the throw happens in the call itself, before any promise exists. A
    // second call (the task left running and reserved again) completes instead, so a lost fault
    // shows as an outcome rather than as a loop.
    let calls = 0;
    const syncPhase = ((_t: unknown, runtime: TaskRuntime) => {
      calls++;
      if (calls > 1) return runtime.commit(() => complete("ran again"));
      throw new Error("boom before a promise");
    }) as unknown as Parameters<typeof single>[1];
    const syncThrower = await h.createTask(single("sync-thrower", syncPhase), null, {
      ownership: { kind: "conversation" },
    });
    expect(outcome(await done(h, syncThrower, 2000))).toEqual({
      status: "faulted",
      error: { message: "boom before a promise" },
    });
    expect(calls).toBe(1);
    await engineStillRuns(h);
    await h.close();
  });

  test("a phase that throws an Error with an empty message, or a falsy value (undefined, null, 0, an empty string), faults with that message as text (draw 36B)", async () => {
    // Draw 36B: a thrown falsy value not taken as a failure (the task faulted for committing no
    // checkpoint instead), and an empty message replaced by the error's text, passed every test.
    const h = await Harness.open(await memoryStore());
    const thrown: Array<[string, unknown, string]> = [
      ["empty-message", new Error(""), ""],
      ["undefined", undefined, "undefined"],
      ["null", null, "null"],
      ["zero", 0, "0"],
      ["empty-string", "", ""],
    ];
    const ids = await Promise.all(
      thrown.map(([name, value]) =>
        h.createTask(
          single(`falsy-thrower-${name}`, async () => {
            throw value;
          }),
          null,
          { ownership: { kind: "conversation" } },
        ),
      ),
    );
    for (const [i, id] of ids.entries())
      expect(outcome(await done(h, id, 2000))).toEqual({
        status: "faulted",
        error: { message: thrown[i]![2] },
      });
    await engineStillRuns(h);
    await h.close();
  });

  test("a phase that throws a value with no text of its own (an object without a prototype, one whose toString throws) faults too, and never runs again (draw 37)", async () => {
    // Draw 37, 16: contrary: turning such a value into the fault's text threw inside the step, so its
    // write was refused, the task stayed running and the next reservation ran the phase again. A
    // second call completes instead, so a lost fault shows as an outcome rather than as a loop.
    const h = await Harness.open(await memoryStore(), { onReport: () => undefined });
    const thrown: Array<[string, unknown]> = [
      ["no-prototype", Object.create(null)],
      [
        "throwing-to-string",
        {
          toString() {
            throw new Error("no text");
          },
        },
      ],
    ];
    const calls = new Map<string, number>();
    const ids = await Promise.all(
      thrown.map(([name, value]) =>
        h.createTask(
          single(`textless-thrower-${name}`, async (_t, runtime) => {
            calls.set(name, (calls.get(name) ?? 0) + 1);
            if (calls.get(name)! > 1) return void (await runtime.commit(() => complete("ran again")));
            throw value;
          }),
          null,
          { ownership: { kind: "conversation" } },
        ),
      ),
    );
    for (const id of ids)
      expect(outcome(await done(h, id, 2000))).toEqual({
        status: "faulted",
        error: { message: expect.any(String) },
      });
    expect([...calls.values()]).toEqual([1, 1]);
    await engineStillRuns(h);
    await h.close();
  });

  test("step rule 4 comes before rule 5: a phase that committed a new checkpoint and then threw faults with its error, and the next phase never runs; an abort handler's throw faults with its error too", async () => {
    const h = await Harness.open(await memoryStore());
    const ran: string[] = [];
    const progressed = defineTask<Json, Go | { phase: "next" }, Json>({
      name: "progress-then-throw",
      version: 1,
      initial: () => ({ phase: "go" }),
      phases: {
        go: async (_t, runtime) => {
          await runtime.commit(() => ({ status: "running", checkpoint: { phase: "next" } }));
          throw new Error("boom after progress");
        },
        next: async (_t, runtime) => {
          ran.push("next");
          await runtime.commit(() => complete("next ran"));
        },
      },
      abort: async () => undefined,
    });
    const id = await h.createTask(progressed, null, { ownership: { kind: "conversation" } });
    expect(outcome(await done(h, id))).toEqual({
      status: "faulted",
      error: { message: "boom after progress" },
    });
    expect(ran).toEqual([]);
    const throwingAbort = single("abort-thrower", async (_t, _r, signal) => untilAborted(signal), {
      abort: async () => {
        throw new Error("boom in abort");
      },
    });
    const other = await h.createTask(throwingAbort, null, { ownership: { kind: "conversation" } });
    await until(() => running(h) === 1, { what: "running" });
    await h.abortTask(other);
    expect(outcome(await done(h, other))).toEqual({ status: "faulted", error: { message: "boom in abort" } });
    await engineStillRuns(h);
    await h.close();
  });

  test("an abort handler that throws a value other than an Error faults with that value as text, a falsy one (undefined, null, 0) too (draw 37c)", async () => {
    // Draw 37c, 14: every abort handler that threw in the tests threw an Error, so an abort step that
    // took only an Error as the handler's failure (any other value read as a handler that returned
    // without an outcome) passed them; and, with no break, a thrown undefined or null was reported
    // as "returned without a terminal outcome" (rule 4 is an uncaught error, whatever the value).
    const h = await Harness.open(await memoryStore());
    const thrown: Array<[string, unknown, string]> = [
      ["string", "boom in abort as a string", "boom in abort as a string"],
      ["undefined", undefined, "undefined"],
      ["null", null, "null"],
      ["zero", 0, "0"],
    ];
    const ids = await Promise.all(
      thrown.map(([name, value]) =>
        h.createTask(
          single(`abort-value-thrower-${name}`, async (_t, _r, signal) => untilAborted(signal), {
            abort: async () => {
              throw value;
            },
          }),
          null,
          { ownership: { kind: "conversation" } },
        ),
      ),
    );
    await until(() => running(h) === thrown.length, { what: "all running" });
    for (const id of ids) await h.abortTask(id);
    for (const [i, id] of ids.entries())
      expect(outcome(await done(h, id, 2000))).toEqual({
        status: "faulted",
        error: { message: thrown[i]![2] },
      });
    await engineStillRuns(h);
    await h.close();
  });

  test("step rule 1 comes before rule 4: a phase that committed waiting, or a terminal outcome, and then threw is not faulted: the wait stands and resumes, the outcome stands", async () => {
    const h = await Harness.open(await memoryStore());
    const gate = deferred();
    const child = single("gated-child", async (_t, runtime) => {
      await gate.promise;
      await runtime.commit(() => complete("child"));
    });
    const runs: string[] = [];
    const waiter = defineTask<Json, Go | { phase: "after" }, Json>({
      name: "wait-then-throw",
      version: 1,
      initial: () => ({ phase: "go" }),
      phases: {
        go: async (task, runtime) => {
          runs.push("go");
          await runtime.commit((tx) => {
            const id = tx.createTask(child, null, { ownership: { kind: "task", taskId: task.id } });
            return { status: "waiting", checkpoint: { phase: "after" }, on: [id], policy: "allSettled" };
          });
          throw new Error("thrown after waiting");
        },
        after: async (_t, runtime) => {
          runs.push("after");
          await runtime.commit(() => complete("woke"));
        },
      },
      abort: async () => undefined,
    });
    const waiting = await h.createTask(waiter, null, { ownership: { kind: "conversation" } });
    // Waiting (or already decided, which the outcome below tells apart) before the child may end.
    await until(() => !h.inspect().tasks.some((t) => t.record.id === waiting && t.state.kind === "running"), {
      what: "not running",
    });
    gate.resolve();
    expect(outcome(await done(h, waiting))).toEqual({ status: "completed", result: "woke" });
    expect(runs).toEqual(["go", "after"]);
    const finished = await h.createTask(
      single("complete-then-throw", async (_t, runtime) => {
        await runtime.commit(() => complete("stands"));
        throw new Error("thrown after the outcome");
      }),
      null,
      { ownership: { kind: "conversation" } },
    );
    expect(outcome(await done(h, finished))).toEqual({ status: "completed", result: "stands" });
    await engineStillRuns(h);
    // Read again once the throw's step is long past: nothing overwrote either outcome.
    expect(outcome(await h.getTask(finished))).toEqual({ status: "completed", result: "stands" });
    expect(outcome(await h.getTask(waiting))).toEqual({ status: "completed", result: "woke" });
    await h.close();
  });

  test("a phase that returns without committing a new checkpoint faults, also one whose commits wrote entries but no state", async () => {
    const h = await Harness.open(await memoryStore());
    const id = await h.createTask(
      single("idle", async () => undefined),
      null,
      { ownership: { kind: "conversation" } },
    );
    const o = outcome(await done(h, id));
    expect(o?.status).toBe("faulted");
    expect((o as { error: { message: string } }).error.message).toMatch(
      /phase go returned without committing/,
    );
    // Writes without a returned state are not progress (rule 6): the entry lands, the task faults.
    const writer = single("writes-only", async (_t, runtime) => {
      await runtime.commit((tx) => {
        tx.appendEntry(runtime.conversationId, { kind: "note", data: "only a note" });
        return undefined;
      });
    });
    const wid = await h.createTask(writer, null, { ownership: { kind: "conversation" } });
    const w = outcome(await done(h, wid));
    expect(w?.status).toBe("faulted");
    expect((w as { error: { message: string } }).error.message).toMatch(
      /phase go returned without committing/,
    );
    expect((await h.entries(1)).filter((e) => e.kind === "note").map((e) => e.data)).toEqual(["only a note"]);
    // A memo rewrites the task's record but not its checkpoint: no progress either (sample 22).
    let memoRuns = 0;
    const memoOnly = single("memo-only", async (_t, runtime) => {
      memoRuns++;
      await runtime.memo("key", `run ${memoRuns}`);
    });
    const mid = await h.createTask(memoOnly, null, { ownership: { kind: "conversation" } });
    const m = outcome(await done(h, mid));
    expect(m?.status).toBe("faulted");
    expect((m as { error: { message: string } }).error.message).toMatch(
      /phase go returned without committing/,
    );
    expect(memoRuns).toBe(1);
    // A returned state equal to the one it replaces is still a new state (draw 35, 20): committing
    // the same checkpoint again is progress, the phase runs again, and does not fault.
    let sameRuns = 0;
    const same = single("same-checkpoint", async (_t, runtime) => {
      sameRuns++;
      await runtime.commit(() =>
        sameRuns === 1 ? { status: "running", checkpoint: { phase: "go" } } : complete("again"),
      );
    });
    const sid = await h.createTask(same, null, { ownership: { kind: "conversation" } });
    expect(outcome(await done(h, sid))).toEqual({ status: "completed", result: "again" });
    expect(sameRuns).toBe(2);
    await engineStillRuns(h);
    await h.close();
  });

  test("step rule 6 judges each phase on the checkpoint it started with: a later phase that returns without committing faults, though the invocation progressed before it", async () => {
    const h = await Harness.open(await memoryStore());
    let laterRuns = 0;
    const twoPhases = defineTask<Json, Go | { phase: "later" }, Json>({
      name: "progress-then-idle",
      version: 1,
      initial: () => ({ phase: "go" }),
      phases: {
        go: async (_t, runtime) => {
          await runtime.commit(() => ({ status: "running", checkpoint: { phase: "later" } }));
        },
        later: async (_t, runtime) => {
          laterRuns++;
          // Run again (its lack of progress missed), it completes: a lost fault shows as an outcome.
          if (laterRuns > 1) await runtime.commit(() => complete("ran again"));
        },
      },
      abort: async () => undefined,
    });
    const id = await h.createTask(twoPhases, null, { ownership: { kind: "conversation" } });
    const o = outcome(await done(h, id, 2000));
    expect(o?.status).toBe("faulted");
    expect((o as { error: { message: string } }).error.message).toMatch(
      /phase later returned without committing/,
    );
    expect(laterRuns).toBe(1);
    await engineStillRuns(h);
    await h.close();
  });

  test("step rule 6 judges every phase of an invocation: a later phase that returns without a new checkpoint faults, after phases that made progress", async () => {
    // Break 30D: a step comparing with the state the invocation started on, not the one the phase
    // started on, passed the test above (one phase each): a later idle phase then ran without end.
    const ran: string[] = [];
    const stalls = defineTask<null, { phase: "a" } | { phase: "b"; n: number }, Json>({
      name: "stalls-later",
      version: 1,
      initial: () => ({ phase: "a" }),
      phases: {
        a: async (_task, runtime) => {
          ran.push("a");
          await runtime.commit(() => ({ status: "running", checkpoint: { phase: "b", n: 0 } }));
        },
        b: async (task, runtime) => {
          const n = task.state.checkpoint.n;
          ran.push(`b${n}`);
          // A phase run again without progress would run without end: stop it, so the test fails.
          if (ran.length > 5) throw new Error("phase b ran again without progress");
          // Progress within the phase once, then a return without a commit.
          if (n === 0) await runtime.commit(() => ({ status: "running", checkpoint: { phase: "b", n: 1 } }));
        },
      },
      abort: async () => undefined,
    });
    const h = await Harness.open(await memoryStore(), { tasks: [stalls] });
    const id = await h.createTask(stalls, null, { ownership: { kind: "conversation" } });
    const o = outcome(await done(h, id));
    expect(o?.status).toBe("faulted");
    expect((o as { error: { message: string } }).error.message).toMatch(
      /phase b returned without committing/,
    );
    expect(ran).toEqual(["a", "b0", "b1"]);
    await engineStillRuns(h);
    await h.close();
  });

  test("step rule 5: progress within the same phase (a new checkpoint, same phase name) runs that phase's handler again in the same invocation", async () => {
    const seen: number[] = [];
    const runtimes = new Set<unknown>();
    const counter = defineTask<null, { phase: "count"; n: number }, Json>({
      name: "counter",
      version: 1,
      initial: () => ({ phase: "count", n: 0 }),
      phases: {
        count: async (task, runtime) => {
          seen.push(task.state.checkpoint.n);
          runtimes.add(runtime);
          const n = task.state.checkpoint.n;
          await runtime.commit(() =>
            n < 2 ? { status: "running", checkpoint: { phase: "count", n: n + 1 } } : complete(n),
          );
        },
      },
      abort: async () => undefined,
    });
    const h = await Harness.open(await memoryStore(), { tasks: [counter] });
    const id = await h.createTask(counter, null, { ownership: { kind: "conversation" } });
    expect(outcome(await done(h, id))).toEqual({ status: "completed", result: 2 });
    expect(seen).toEqual([0, 1, 2]);
    expect(runtimes.size).toBe(1);
    await engineStillRuns(h);
    await h.close();
  });

  test("an abort handler runs once: one that returns without a terminal outcome faults, also after committing progress", async () => {
    const h = await Harness.open(await memoryStore());
    for (const [name, progress] of [
      ["lazy-abort", false],
      ["busy-abort", true],
    ] as const) {
      let calls = 0;
      const def = single(name, async (_t, _r, signal) => untilAborted(signal), {
        abort: async (_t, runtime) => {
          calls++;
          // A changed checkpoint is progress for a run invocation (rule 5), never for an abort one.
          if (progress && calls === 1)
            await runtime.commit(() => ({ status: "running", checkpoint: { phase: "go", n: calls } }));
        },
      });
      const id = await h.createTask(def, null, { ownership: { kind: "conversation" } });
      await until(() => running(h) === 1, { what: "running" });
      await h.abortTask(id);
      const o = outcome(await done(h, id));
      expect(o?.status, name).toBe("faulted");
      expect((o as { error: { message: string } }).error.message).toMatch(
        new RegExp(`abort handler of ${name} returned without a terminal outcome`),
      );
      expect(calls, name).toBe(1);
    }
    await engineStillRuns(h);
    await h.close();
  });

  test("an abort handler that returns without an outcome faults once, also when a new definition of its task was registered while it ran: no handover, no second abort handler", async () => {
    // Break 29G: the named test never replaced a definition during an abort; an abort invocation
    // handing over to the replacement (as a run invocation does at a step) passed it.
    const gate = deferred();
    const started = deferred();
    const calls = { old: 0, replacement: 0 };
    const original = single("swapped-abort", async (_t, _r, signal) => untilAborted(signal), {
      abort: async () => {
        calls.old++;
        started.resolve();
        await gate.promise;
      },
    });
    const replacement = single("swapped-abort", async (_t, _r, signal) => untilAborted(signal), {
      abort: async (_t, runtime) => {
        calls.replacement++;
        await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }));
      },
    });
    const h = await Harness.open(await memoryStore(), { tasks: [original] });
    const id = await h.createTask(original, null, { ownership: { kind: "conversation" } });
    await until(() => running(h) === 1, { what: "running" });
    await h.abortTask(id);
    await started.promise;
    h.registry.register(replacement);
    gate.resolve();
    const o = outcome(await done(h, id));
    expect(o?.status).toBe("faulted");
    expect((o as { error: { message: string } }).error.message).toMatch(
      /abort handler of swapped-abort returned without a terminal outcome/,
    );
    expect(calls).toEqual({ old: 1, replacement: 0 });
    await engineStillRuns(h);
    await h.close();
  });

  test("the abort handler decides the outcome: whatever terminal outcome it commits is the task's, not always aborted (spec §5.1)", async () => {
    const h = await Harness.open(await memoryStore());
    const decided = [
      { status: "completed", result: "charge kept" },
      { status: "failed", error: { message: "refund failed" }, result: "half" },
      { status: "aborted", reason: "user", result: "refunded" },
      // All five are the handler's to commit, not only the three a phase usually ends with (draw 32d).
      { status: "orphaned", reason: "its caller is gone" },
      { status: "faulted", error: { message: "refund service broken" } },
    ] as const;
    for (const [i, decision] of decided.entries()) {
      const def = single(`decider-${i}`, async (_t, _r, signal) => untilAborted(signal), {
        abort: async (_t, runtime) =>
          void (await runtime.commit(() => ({ status: "terminal", outcome: decision }))),
      });
      const id = await h.createTask(def, null, { ownership: { kind: "conversation" } });
      await until(() => running(h) === 1, { what: "running" });
      await h.abortTask(id);
      const record = await done(h, id);
      expect(record.state).toEqual({ status: "terminal", outcome: decision });
      expect(record.abortRequested).toBe(true);
    }
    // A task marked while it waits (no invocation running) reaches its handler too, which decides
    // (draw 33, 17: every task aborted here was running; a waiting one settled aborted by the
    // marking commit, its handler never run, passed this test).
    const held = await h.createTask(parked("decider-held"), null, { ownership: { kind: "conversation" } });
    const waiter = defineTask<TaskId, Go | { phase: "joined" }, Json>({
      name: "decider-waiting",
      version: 1,
      initial: () => ({ phase: "go" }),
      phases: {
        go: async (task, runtime) =>
          void (await runtime.commit(() => ({
            status: "waiting",
            checkpoint: { phase: "joined" },
            on: [task.input],
            policy: "allSettled",
          }))),
        joined: async (_t, runtime) => void (await runtime.commit(() => complete("joined"))),
      },
      abort: async (_t, runtime) =>
        void (await runtime.commit(() => ({
          status: "terminal",
          outcome: { status: "completed", result: "kept while waiting" },
        }))),
    });
    const w = await h.createTask(waiter, held, { ownership: { kind: "conversation" } });
    await until(() => h.inspect().tasks.some((t) => t.record.id === w && t.state.kind === "waiting"), {
      what: "the waiter waiting",
    });
    expect(await h.abortTask(w)).toBe("marked");
    expect((await done(h, w)).state).toEqual({
      status: "terminal",
      outcome: { status: "completed", result: "kept while waiting" },
    });
    expect((await h.getTask(held))?.state.status).toBe("running");
    await engineStillRuns(h);
    await h.close();
  });

  test("a checkpoint naming an unknown phase faults", async () => {
    const h = await Harness.open(await memoryStore());
    const def = single("wanderer", async (_t, runtime) => {
      await runtime.commit(() => ({ status: "running", checkpoint: { phase: "nowhere" } as unknown as Go }));
    });
    const id = await h.createTask(def, null, { ownership: { kind: "conversation" } });
    const o = outcome(await done(h, id));
    expect(o?.status).toBe("faulted");
    expect((o as { error: { message: string } }).error.message).toMatch(/no handler for phase nowhere/);
    await engineStillRuns(h);
    await h.close();
  });

  test("a phase is a definition's own: a checkpoint naming an Object.prototype member (toString, constructor) is refused at creation and faults when committed, never calls that member (draw 33)", async () => {
    // Draw 33A: phases were looked up with `in` and by plain indexing, so "toString" passed the
    // creation check and the runtime called Object.prototype.toString as the phase's handler.
    const h = await Harness.open(await memoryStore());
    const inherited = defineTask<Json, Go, Json>({
      name: "inherited-phase",
      version: 1,
      initial: () => ({ phase: "toString" }) as unknown as Go,
      phases: { go: async (_t, runtime) => void (await runtime.commit(() => complete("go"))) },
      abort: async () => undefined,
    });
    await expect(h.createTask(inherited, null, { ownership: { kind: "conversation" } })).rejects.toThrow(
      InvalidTransition,
    );
    await expect(h.createTask(inherited, null, { ownership: { kind: "conversation" } })).rejects.toThrow(
      /has no phase toString/,
    );
    const def = single("wanderer-inherited", async (_t, runtime) => {
      await runtime.commit(() => ({
        status: "running",
        checkpoint: { phase: "constructor" } as unknown as Go,
      }));
    });
    const id = await h.createTask(def, null, { ownership: { kind: "conversation" } });
    const o = outcome(await done(h, id));
    expect(o?.status).toBe("faulted");
    expect((o as { error: { message: string } }).error.message).toMatch(/no handler for phase constructor/);
    // A wait whose checkpoint names "toString" under a definition with wake continuations: no
    // continuation of that name (Object.prototype.toString is not one), so the handler is looked up,
    // and there is none either.
    const quick = single(
      "quick-child",
      async (_t, runtime) => void (await runtime.commit(() => complete(1))),
    );
    const waiter = defineTask<Json, Go, Json>({
      name: "waiter-inherited",
      version: 1,
      initial: () => ({ phase: "go" }),
      phases: {
        go: async (_t, runtime) => {
          await runtime.commit((tx) => {
            const child = tx.createTask(quick, null, { ownership: { kind: "task", taskId: runtime.taskId } });
            return {
              status: "waiting",
              checkpoint: { phase: "toString" } as unknown as Go,
              on: [child],
              policy: "allSettled",
            };
          });
        },
      },
      abort: async () => undefined,
      wake: { go: () => complete("woken") },
    });
    const waiting = await h.createTask(waiter, null, { ownership: { kind: "conversation" } });
    const w = outcome(await done(h, waiting));
    expect(w?.status).toBe("faulted");
    expect((w as { error: { message: string } }).error.message).toMatch(/no handler for phase toString/);
    await engineStillRuns(h);
    await h.close();
  });

  test("initial(input) gives a new task its first checkpoint, from the input it was created with", async () => {
    const h = await Harness.open(await memoryStore());
    const seen: Json[] = [];
    const def = defineTask<{ n: number }, { phase: "go"; n: number }, Json>({
      name: "from-input",
      version: 1,
      initial: (input) => ({ phase: "go", n: input.n * 2 }),
      phases: {
        go: async (task, runtime) => {
          seen.push(task.state.checkpoint);
          await runtime.commit(() => complete(task.state.checkpoint.n));
        },
      },
      abort: async () => undefined,
    });
    const id = await h.createTask(def, { n: 21 }, { ownership: { kind: "conversation" } });
    expect(outcome(await done(h, id))).toEqual({ status: "completed", result: 42 });
    expect(seen).toEqual([{ phase: "go", n: 42 }]);
    expect((await h.getTask(id))?.input).toEqual({ n: 21 });
    await h.close();
  });
});

describe("NotJson", () => {
  test("a task input holding NaN or a function is refused and nothing is committed", async () => {
    const store = await memoryStore();
    const h = await Harness.open(store);
    const def = single("strict", async (_t, runtime) => void (await runtime.commit(() => complete("ok"))));
    const commitsBefore = store.stats.commits;
    await expect(
      h.createTask(def, { x: Number.NaN } as unknown as Json, { ownership: { kind: "conversation" } }),
    ).rejects.toBeInstanceOf(NotJson);
    await expect(
      h.createTask(def, { f: () => 1 } as unknown as Json, { ownership: { kind: "conversation" } }),
    ).rejects.toBeInstanceOf(NotJson);
    expect(store.stats.commits).toBe(commitsBefore);
    // A document value is checked too (once, as the commit ends): the whole commit is refused.
    await expect(
      h.transaction((tx) => {
        tx.writeDoc(1, "strict-doc", { ok: true });
        tx.writeDoc(1, "strict-doc", { bad: Number.POSITIVE_INFINITY } as unknown as Json);
        tx.createTask(def, null, { ownership: { kind: "conversation" } });
      }),
    ).rejects.toBeInstanceOf(NotJson);
    expect(store.stats.commits).toBe(commitsBefore);
    expect(await h.tasks()).toEqual([]);
    expect(await store.read((sql) => sql.get("SELECT count(*) AS n FROM tasks"))).toEqual({ n: 0 });
    await engineStillRuns(h);
    await h.close();
  });
});

describe("committed values are frozen", () => {
  test("a document or entry handed to a commit cannot be mutated afterwards: memory never drifts from the store", async () => {
    const store = await memoryStore();
    const h = await Harness.open(store);
    const value = { items: ["a"], nested: { n: 1 } };
    await h.transaction((tx) => tx.writeDoc(1, "frozen-doc", value));
    expect(() => value.items.push("b")).toThrow(TypeError);
    expect(() => {
      value.nested.n = 2;
    }).toThrow(TypeError);
    const draft = { kind: "note", data: { text: "x" } };
    await h.transaction((tx) => tx.appendEntry(1, draft));
    expect(() => {
      draft.data.text = "y";
    }).toThrow(TypeError);
    const expected = { items: ["a"], nested: { n: 1 } };
    expect(await h.transaction((tx) => tx.readDoc(1, "frozen-doc"))).toEqual(expected);
    // A snapshot is the shared immutable revision (spec §3.3): the same value to every reader, frozen.
    const seen = await h.doc(1, "frozen-doc");
    expect(await h.doc(1, "frozen-doc")).toBe(seen);
    expect(() => {
      (seen as { nested: { n: number } }).nested.n = 3;
    }).toThrow(TypeError);
    const row = await store.read((sql) => sql.get("SELECT value FROM documents WHERE name = 'frozen-doc'"));
    expect(JSON.parse(String(row?.["value"]))).toEqual(expected);
    expect((await internals(h).session.entries(1)).map((e) => e.data)).toEqual([{ text: "x" }]);
    // Draw 33b: the entry record appendEntry returns is the one every commit listener is handed; it
    // was left writable (only the draft's contents were frozen), so a caller's write to it changed
    // what listeners hold and never the store.
    const heard: Array<{ kind: string }> = [];
    const stop = h.subscribe((change) => heard.push(...change.entries));
    const entry = await h.transaction((tx) => tx.appendEntry(1, { kind: "note", data: { text: "z" } }));
    stop();
    expect(heard).toEqual([entry]);
    expect(() => Object.assign(entry, { kind: "changed" })).toThrow(TypeError);
    expect(heard[0]!.kind).toBe("note");
    await h.close();
  });

  test("a value its caller froze only at the top is frozen through: a document's and an entry's nested parts cannot be mutated after the commit (draw 36d)", async () => {
    // Draw 36dA: a check that took any frozen object as checked already (a shallow freeze by the
    // caller) left the nested parts writable, so a caller's later write changed memory, never the store.
    const store = await memoryStore();
    const h = await Harness.open(store);
    const value = Object.freeze({ items: ["a"], nested: { n: 1 } });
    await h.transaction((tx) => tx.writeDoc(1, "shallow-doc", value));
    expect(() => value.items.push("b")).toThrow(TypeError);
    expect(() => {
      value.nested.n = 2;
    }).toThrow(TypeError);
    const data = { text: "x", parts: ["p"] };
    await h.transaction((tx) => tx.appendEntry(1, Object.freeze({ kind: "note", data })));
    expect(() => {
      data.text = "y";
    }).toThrow(TypeError);
    expect(() => data.parts.push("q")).toThrow(TypeError);
    expect(await h.doc(1, "shallow-doc")).toEqual({ items: ["a"], nested: { n: 1 } });
    expect((await internals(h).session.entries(1)).map((e) => e.data)).toEqual([{ text: "x", parts: ["p"] }]);
    await h.close();
  });

  test("a task record loaded from the store after a reopen is frozen too: mutating what getTask returns changes neither memory nor the next read", async () => {
    // Found by break 30B beside its document case: a live task read back at open was handed out as
    // parsed, so a reader's push into its input changed the engine's record.
    const store = await memoryStore();
    const first = await Harness.open(store);
    const id = await first.createTask(
      parked("kept-task"),
      { items: ["a"], nested: { n: 1 } },
      {
        ownership: { kind: "conversation" },
      },
    );
    await until(() => internals(first).session.records.tasks.get(id)?.state.status === "running", {
      what: "running",
    });
    const image = store.image();
    await first.close();
    const h = await Harness.open(await memoryStore(image), { tasks: [parked("kept-task")], paused: true });
    try {
      const task = await h.getTask(id);
      const input = task!.input as { items: string[]; nested: { n: number } };
      expect(() => input.items.push("b")).toThrow(TypeError);
      expect(() => {
        input.nested.n = 2;
      }).toThrow(TypeError);
      expect(() => {
        (task!.state as { status: string }).status = "terminal";
      }).toThrow(TypeError);
      expect((await h.getTask(id))?.input).toEqual({ items: ["a"], nested: { n: 1 } });
    } finally {
      await h.close();
    }
  });

  test("a snapshot of a document loaded from the store after a reopen is the same frozen value too: mutating it changes neither memory nor what a transaction reads", async () => {
    // Break 30B: the named test reads snapshots only of values committed in its own process, which
    // the commit froze; a value read back from the store (its row, and a row plus patches) was handed
    // out as parsed, so mutating the snapshot changed the engine's committed memory.
    const store = await memoryStore();
    const first = await Harness.open(store);
    await first.transaction((tx) => tx.writeDoc(1, "kept-doc", { nested: { n: 1 }, items: ["a"] }));
    await first.transaction((tx) => tx.writeDoc(1, "patched-doc", { slot: { output: "start " } }));
    await first.transaction((tx) =>
      tx.patchDoc(1, "patched-doc", [{ path: ["slot", "output"], append: "more" }]),
    );
    const image = store.image();
    await first.close();
    const h = await Harness.open(await memoryStore(image));
    const kept = await h.doc<{ nested: { n: number }; items: string[] }>(1, "kept-doc");
    const patched = await h.doc<{ slot: { output: string } }>(1, "patched-doc");
    expect(await h.doc(1, "kept-doc")).toBe(kept);
    expect(await h.doc(1, "patched-doc")).toBe(patched);
    expect(() => {
      kept!.nested.n = 3;
    }).toThrow(TypeError);
    expect(() => kept!.items.push("b")).toThrow(TypeError);
    expect(() => {
      patched!.slot.output = "changed";
    }).toThrow(TypeError);
    expect(await h.transaction((tx) => tx.readDoc(1, "kept-doc"))).toEqual({
      nested: { n: 1 },
      items: ["a"],
    });
    expect(await h.transaction((tx) => tx.readDoc(1, "patched-doc"))).toEqual({
      slot: { output: "start more" },
    });
    // The engine still writes over it: a new revision, frozen in its turn.
    await h.transaction((tx) => tx.patchDoc(1, "patched-doc", [{ path: ["slot", "output"], append: "!" }]));
    const next = await h.doc<{ slot: { output: string } }>(1, "patched-doc");
    expect(next).toEqual({ slot: { output: "start more!" } });
    expect(Object.isFrozen(next!.slot)).toBe(true);
    await h.close();
  });

  test("an entry read back from the store after a reopen is frozen too, its own and a fork's inherited one: a reader's write throws and changes no later read (draw 37b)", async () => {
    // Draw 37bA: entries read back from the store were handed out as parsed, writable, and the
    // agent's entry cache keeps and shares what it loads, so a reader's write to a conversation's
    // context entry after a reopen changed what the next request was built from, never the store.
    const store = await memoryStore();
    const first = await Harness.open(store);
    const own = await first.transaction((tx) =>
      tx.appendEntry(1, { kind: "note", data: { text: "x", parts: ["p"] } }),
    );
    const fork = await first.transaction((tx) =>
      tx.forkConversation(1, own.id, { ownership: { kind: "ownerless" } }),
    );
    const image = store.image();
    await first.close();
    const h = await Harness.open(await memoryStore(image));
    const reads = [
      (await h.entries(1)).find((e) => e.id === own.id),
      (await h.entries(fork.id)).find((e) => e.id === own.id),
      await h.entry(own.id),
    ];
    for (const entry of reads) {
      const data = entry!.data as { text: string; parts: string[] };
      expect(() => Object.assign(entry!, { kind: "changed" })).toThrow(TypeError);
      expect(() => {
        data.text = "y";
      }).toThrow(TypeError);
      expect(() => data.parts.push("q")).toThrow(TypeError);
    }
    expect((await h.entries(1)).find((e) => e.id === own.id)).toMatchObject({
      kind: "note",
      data: { text: "x", parts: ["p"] },
    });
    await h.close();
  });
});

/**
 * A task of one phase, `go`, that logs `label:n`, calls `at(n)`, and moves to n + 1 until it
 * completes with `label` at n = `last` (the replacement tests: which definition ran each step).
 */
function countingTask(o: {
  name: string;
  label: string;
  version: number;
  last: number;
  log: string[];
  at: (n: number) => void;
  migrate?: true;
}) {
  type Step = { phase: "go"; n: number };
  return defineTask<null, Step, Json>({
    name: o.name,
    version: o.version,
    initial: () => ({ phase: "go", n: 1 }),
    ...(o.migrate
      ? { migrate: (_input: Json, checkpoint: Json) => ({ input: null, checkpoint: checkpoint as Step }) }
      : {}),
    phases: {
      go: async (task, runtime) => {
        const n = (task.state as { checkpoint: Step }).checkpoint.n;
        o.log.push(`${o.label}:${n}`);
        o.at(n);
        await runtime.commit(() =>
          n === o.last ? complete(o.label) : { status: "running", checkpoint: { phase: "go", n: n + 1 } },
        );
      },
    },
    abort: async (_t, runtime) =>
      void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
  });
}

/**
 * Run a counting task `name` (label A, version 1, steps 1 to 4) to its end while the registry
 * changes under it: as step n runs, `swaps[n]` acts on the registry (`make(label, version)` builds a
 * definition of the same name). Resolves with the outcome, the steps as they ran, and every report.
 */
async function runUnderSwaps(
  name: string,
  swaps: Record<
    number,
    (h: Harness, make: (label: string, version: number) => ReturnType<typeof countingTask>) => void
  >,
) {
  const log: string[] = [];
  const reports: string[] = [];
  let h!: Harness;
  const make = (label: string, version: number) =>
    countingTask({ name, label, version, last: 4, log, at: (n) => swaps[n]?.(h, make) });
  const original = make("A", 1);
  h = await Harness.open(await memoryStore(), {
    tasks: [original],
    onReport: (e) => reports.push(e instanceof Error ? e.message : String(e)),
  });
  const id = await h.createTask(original, null, { ownership: { kind: "conversation" } });
  const result = outcome(await done(h, id));
  await h.close();
  return { result, log, reports: reports.filter((r) => r.includes(name)) };
}

describe("the task runtime", () => {
  test("memos: first writer wins; the terminal record drops the memos and the checkpoint, and stays queryable", async () => {
    const stored = deferred();
    const gate = deferred();
    let seen: Json[] = [];
    let others: Array<Json | undefined> = [];
    const def = single("memo", async (_t, runtime) => {
      const [a, b] = await Promise.all([runtime.memo("k", "first"), runtime.memo("k", "second")]);
      seen = [
        a ?? null,
        b ?? null,
        (await runtime.memo<string>("k")) ?? null,
        (await runtime.memo("k", "third")) ?? null,
      ];
      // Break 28H: a falsy winner (0, false) is a winner too, and a memo of another name keeps the
      // earlier ones: `k` still answers "first" after `zero` and `off` were stored, in sequence.
      others = [
        await runtime.memo("zero", 0),
        await runtime.memo("zero", 5),
        await runtime.memo("off", false),
        await runtime.memo("off", true),
        await runtime.memo("k", "fourth"),
      ];
      stored.resolve();
      await gate.promise;
      await runtime.commit(() => complete("memo done"));
    });
    const store = await memoryStore();
    const h = await Harness.open(store);
    const id = await h.createTask(def, null, { ownership: { kind: "conversation" } });
    await stored.promise;
    expect(seen).toEqual(["first", "first", "first", "first"]);
    expect(others).toEqual([0, 0, false, false, "first"]);
    expect(JSON.parse(String((await row(store, id))?.["memos"]))).toEqual({
      k: "first",
      zero: 0,
      off: false,
    });
    expect((await h.getTask(id))?.memos).toEqual({ k: "first", zero: 0, off: false });
    gate.resolve();
    const final = await done(h, id);
    expect(outcome(final)?.status).toBe("completed");
    expect(final.memos).toBeUndefined();
    expect((await row(store, id))?.["memos"]).toBeNull();
    // Its one row was replaced: the stored status and end time are the terminal record's.
    const ended = await store.read((sql) =>
      sql.get("SELECT count(*) AS n, status, ended_at FROM tasks WHERE id = ?", [id]),
    );
    expect(ended).toMatchObject({ n: 1, status: "terminal" });
    expect(ended?.["ended_at"]).toBe(final.endedAt);
    // The execution checkpoint is gone too (spec §5.3): the terminal state is the outcome alone,
    // in memory, in the stored row, and for a wait asked after the end.
    const terminal = { status: "terminal", outcome: { status: "completed", result: "memo done" } };
    expect(final.state).toEqual(terminal);
    expect(JSON.parse(String((await row(store, id))?.["state"]))).toEqual(terminal);
    expect((await h.waitForTask(id)).state).toEqual(terminal);
    expect((await h.getTask(id))?.state).toEqual(terminal);
    // Break 31D: queryable by the task queries too, with and without a filter (a listing that
    // leaves terminal rows out unless asked for them passed).
    expect((await h.tasks()).find((t) => t.id === id)?.state).toEqual(terminal);
    expect((await h.tasks({ kind: "memo" })).map((t) => t.state)).toEqual([terminal]);
    expect((await h.tasks({ status: "terminal" })).map((t) => t.id)).toContain(id);
    await engineStillRuns(h);
    await h.close();
  });

  test("memo(name, candidate) is gated like a commit: once the task carries an abort mark its run invocation's memo is refused (abort_requested) and stores nothing; memo(name) reads the committed winner", async () => {
    const stored = deferred();
    const seen: unknown[] = [];
    const def = single(
      "memo-gate",
      async (_t, runtime, signal) => {
        await runtime.memo("k", "first");
        stored.resolve();
        await untilAborted(signal).catch(() => undefined);
        seen.push(await runtime.memo("late", "x").catch((e: unknown) => e));
        // A name that already has a winner is refused too: the memo is still a gated commit (draw 33cC).
        seen.push(await runtime.memo("k", "again").catch((e: unknown) => e));
      },
      {
        abort: async (_t, runtime) => {
          seen.push((await runtime.memo<string>("late")) ?? null, (await runtime.memo<string>("k")) ?? null);
          await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }));
        },
      },
    );
    const store = await memoryStore();
    const h = await Harness.open(store, { tasks: [def] });
    const id = await h.createTask(def, null, { ownership: { kind: "conversation" } });
    await stored.promise;
    expect(await h.abortTask(id)).toBe("marked");
    expect(outcome(await done(h, id))).toEqual({ status: "aborted" });
    expect(seen[0]).toMatchObject({ name: "CommitRefused", reason: "abort_requested" });
    expect(seen[1]).toMatchObject({ name: "CommitRefused", reason: "abort_requested" });
    expect(seen.slice(2)).toEqual([null, "first"]);
    expect((await row(store, id))?.["memos"]).toBeNull();
    await engineStillRuns(h);
    await h.close();
  });

  test("memo(name, candidate) is gated by the close too: once close began, a memo is refused (closing) and stores nothing, and the next engine reads no winner (sweep 42b)", async () => {
    const started = deferred();
    let late: unknown;
    let reread: unknown = "unset";
    const def = single("memo-close", async (_t, runtime, signal) => {
      if ((await runtime.memo<string>("k")) !== undefined || reread !== "unset") {
        reread = (await runtime.memo<string>("late")) ?? null;
        await runtime.commit(() => complete("done"));
        return;
      }
      await runtime.memo("k", "first");
      started.resolve();
      await untilAborted(signal).catch(() => undefined);
      late = await runtime.memo("late", "x").catch((e: unknown) => e);
    });
    const store = await memoryStore();
    const h = await Harness.open(store, { tasks: [def] });
    const id = await h.createTask(def, null, { ownership: { kind: "conversation" } });
    await started.promise;
    await h.close();
    expect(late).toMatchObject({ name: "CommitRefused", reason: "closing" });
    const image = await memoryStore(store.image());
    expect(JSON.parse(String((await row(image, id))?.["memos"]))).toEqual({ k: "first" });
    const again = await Harness.open(image, { tasks: [def] });
    expect(outcome(await done(again, id))?.status).toBe("completed");
    expect(reread).toBeNull();
    await again.close();
  });

  test("a memo is looked up by its own name only: a name an object inherits (toString, constructor) has no winner until written, then its candidate wins, after a reopen too (sweep 42b)", async () => {
    const stored = deferred();
    let seen: unknown[] = [];
    let after: unknown[] = [];
    const def = single("memo-own", async (_t, runtime, signal) => {
      const first = await runtime.memo<string>("toString");
      if (first === undefined) {
        await runtime.memo("a", 1);
        seen = [
          first ?? null,
          (await runtime.memo<string>("toString")) ?? null,
          (await runtime.memo<string>("constructor")) ?? null,
          await runtime.memo("toString", "mine"),
          await runtime.memo("toString", "other"),
          (await runtime.memo<string>("toString")) ?? null,
        ];
        stored.resolve();
        await untilAborted(signal).catch(() => undefined);
        return;
      }
      // Run again by the next engine: the memos were read back from the store.
      after = [
        first,
        (await runtime.memo<string>("hasOwnProperty")) ?? null,
        await runtime.memo("valueOf", 2),
      ];
      await runtime.commit(() => complete("memo done"));
    });
    const store = await memoryStore();
    const h = await Harness.open(store, { tasks: [def] });
    const id = await h.createTask(def, null, { ownership: { kind: "conversation" } });
    await stored.promise;
    expect(seen).toEqual([null, null, null, "mine", "mine", "mine"]);
    expect(JSON.parse(String((await row(store, id))?.["memos"]))).toEqual({ a: 1, toString: "mine" });
    await h.close();
    const again = await Harness.open(await memoryStore(store.image()), { tasks: [def] });
    expect(outcome(await done(again, id))?.status).toBe("completed");
    expect(after).toEqual(["mine", null, 2]);
    await again.close();
  });

  test("registry replacement hands over at the next phase boundary", async () => {
    const log: string[] = [];
    type TwoPhases = { phase: "one" } | { phase: "two" };
    let h!: Harness;
    const make = (label: string, onOne?: () => void) =>
      defineTask<null, TwoPhases, Json>({
        name: "swap",
        version: 1,
        initial: () => ({ phase: "one" }),
        phases: {
          one: async (_t, runtime) => {
            log.push(`${label}:one`);
            await runtime.memo("m", `memo of ${label}`);
            onOne?.();
            await runtime.commit(() => ({ status: "running", checkpoint: { phase: "two" } }));
          },
          two: async (_t, runtime) => {
            log.push(`${label}:two ${await runtime.memo("m")}`);
            await runtime.commit(() => complete(label));
          },
        },
        abort: async (_t, runtime) =>
          void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
      });
    const replacement = make("B");
    const original = make("A", () => h.registry.register(replacement));
    h = await Harness.open(await memoryStore(), { tasks: [original] });
    const writes: string[] = [];
    h.subscribe((change) => {
      for (const t of change.tasks) {
        if (t.kind !== "swap") continue;
        const phase = (t.state as { checkpoint?: { phase: string } }).checkpoint?.phase ?? "-";
        writes.push(`${t.state.status} ${phase} ${JSON.stringify(t.memos ?? null)}`);
      }
    });
    const id = await h.createTask(original, null, { ownership: { kind: "conversation" } });
    expect(outcome(await done(h, id))).toEqual({ status: "completed", result: "B" });
    // B's phase two reads the memo A stored: the handover kept it.
    expect(log).toEqual(["A:one", "B:two memo of A"]);
    // The handover is a commit of its own writing the task back to pending with its new checkpoint
    // and memos; the next reservation runs it under B.
    expect(writes).toEqual([
      "pending one null",
      "running one null",
      'running one {"m":"memo of A"}',
      'running two {"m":"memo of A"}',
      'pending two {"m":"memo of A"}',
      'running two {"m":"memo of A"}',
      "terminal - null",
    ]);
    await engineStillRuns(h);
    await h.close();
  });
  test("before the first phase only rules 1-3 apply: a replacement registered as the task is reserved takes it over at the first boundary after a phase, never before its first phase (sweep 42c)", async () => {
    const log: string[] = [];
    type TwoPhases = { phase: "one" } | { phase: "two" };
    const make = (label: string) =>
      defineTask<null, TwoPhases, Json>({
        name: "swap-first",
        version: 1,
        initial: () => ({ phase: "one" }),
        phases: {
          one: async (_t, runtime) => {
            log.push(`${label}:one`);
            await runtime.commit(() => ({ status: "running", checkpoint: { phase: "two" } }));
          },
          two: async (_t, runtime) => {
            log.push(`${label}:two`);
            await runtime.commit(() => complete(label));
          },
        },
        abort: async (_t, runtime) =>
          void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
      });
    const original = make("A");
    const replacement = make("B");
    const h = await Harness.open(await memoryStore(), { tasks: [original] });
    // The replacement is registered from the commit that reserves the task, before its first step.
    h.subscribe((change) => {
      for (const t of change.tasks)
        if (t.kind === "swap-first" && t.state.status === "running" && log.length === 0)
          h.registry.register(replacement);
    });
    const id = await h.createTask(original, null, { ownership: { kind: "conversation" } });
    expect(outcome(await done(h, id))).toEqual({ status: "completed", result: "B" });
    expect(log).toEqual(["A:one", "B:two"]);
    await engineStillRuns(h);
    await h.close();
  });
  test("a replacement registered while several tasks of its kind run hands every one of them over at its next phase boundary, not only the first (break 29B)", async () => {
    const log: string[] = [];
    type TwoPhases = { phase: "one" } | { phase: "two" };
    const gate = deferred();
    let inOne = 0;
    const make = (label: string) =>
      defineTask<string, TwoPhases, Json>({
        name: "swap-many",
        version: 1,
        initial: () => ({ phase: "one" }),
        phases: {
          one: async (task, runtime) => {
            log.push(`${label}:one ${task.input}`);
            inOne++;
            await gate.promise;
            await runtime.commit(() => ({ status: "running", checkpoint: { phase: "two" } }));
          },
          two: async (task, runtime) => {
            log.push(`${label}:two ${task.input}`);
            await runtime.commit(() => complete(`${label} ${task.input}`));
          },
        },
        abort: async (_t, runtime) =>
          void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
      });
    const original = make("A");
    const h = await Harness.open(await memoryStore(), { tasks: [original] });
    const ids: TaskId[] = [];
    for (const input of ["x", "y", "z"])
      ids.push(await h.createTask(original, input, { ownership: { kind: "conversation" } }));
    await until(() => inOne === 3, { what: "three tasks in phase one" });
    h.registry.register(make("B"));
    gate.resolve();
    const outcomes = await Promise.all(ids.map(async (id) => outcome(await done(h, id))));
    expect(outcomes).toEqual([
      { status: "completed", result: "B x" },
      { status: "completed", result: "B y" },
      { status: "completed", result: "B z" },
    ]);
    expect(log.filter((l) => l.startsWith("A:two"))).toEqual([]);
    expect(log.filter((l) => l.startsWith("B:")).sort()).toEqual(["B:two x", "B:two y", "B:two z"]);
    await engineStillRuns(h);
    await h.close();
  });
  test("a replacement of a higher version with migrate hands over too: the next reservation migrates the task and runs it under the new version", async () => {
    const log: string[] = [];
    type TwoPhases = { phase: "one" } | { phase: "two"; note?: string };
    let h!: Harness;
    const make = (label: string, version: number, onOne?: () => void) =>
      defineTask<null, TwoPhases, Json>({
        name: "swap-up",
        version,
        initial: () => ({ phase: "one" }),
        phases: {
          one: async (_t, runtime) => {
            log.push(`${label}:one`);
            await runtime.memo("m", `memo of ${label}`);
            onOne?.();
            await runtime.commit(() => ({ status: "running", checkpoint: { phase: "two" } }));
          },
          two: async (task, runtime) => {
            log.push(
              `${label}:two ${(task.state as { checkpoint: { note?: string } }).checkpoint.note ?? "-"} ${await runtime.memo("m")}`,
            );
            await runtime.commit(() => complete(label));
          },
        },
        abort: async (_t, runtime) =>
          void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
        ...(version > 1
          ? {
              migrate: (_input: Json, checkpoint: Json, from: number) => ({
                input: null,
                checkpoint: { ...(checkpoint as TwoPhases), note: `migrated from ${from}` } as TwoPhases,
              }),
            }
          : {}),
      });
    const upgrade = make("B", 2);
    const original = make("A", 1, () => h.registry.register(upgrade));
    h = await Harness.open(await memoryStore(), { tasks: [original] });
    const id = await h.createTask(original, null, { ownership: { kind: "conversation" } });
    expect(outcome(await done(h, id))).toEqual({ status: "completed", result: "B" });
    // Break 30G: the migrating reservation keeps the memos the handover carried (spec §5.2: memos
    // survive checkpoints and disappear only in the terminal replacement).
    expect(log).toEqual(["A:one", "B:two migrated from 1 memo of A"]);
    expect((await h.getTask(id))?.version).toBe(2);
    await engineStillRuns(h);
    await h.close();
  });
  test("a replacement whose migrate throws: the task hands over, and its migration failing blocks it pending (migration_failed), never terminal; a fixed definition takes it", async () => {
    // Reading 24a (spec §7.5: "a failed migration blocks the task rather than terminalizing it"): the
    // failing migration was tried only at open, never on a definition replaced while the task ran.
    const log: string[] = [];
    type TwoPhases = { phase: "one" } | { phase: "two"; note?: string };
    let h!: Harness;
    const make = (label: string, version: number, migrate?: (checkpoint: TwoPhases) => TwoPhases) =>
      defineTask<null, TwoPhases, Json>({
        name: "swap-broken",
        version,
        initial: () => ({ phase: "one" }),
        phases: {
          one: async (_t, runtime) => {
            log.push(`${label}:one`);
            if (label === "A")
              h.registry.register(
                make("B", 2, () => {
                  throw new Error("B cannot read v1");
                }),
              );
            await runtime.commit(() => ({ status: "running", checkpoint: { phase: "two" } }));
          },
          two: async (task, runtime) => {
            log.push(
              `${label}:two ${(task.state as { checkpoint: { note?: string } }).checkpoint.note ?? "-"}`,
            );
            await runtime.commit(() => complete(label));
          },
        },
        abort: async (_t, runtime) =>
          void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
        ...(migrate
          ? {
              migrate: (_input: Json, checkpoint: Json) => ({
                input: null,
                checkpoint: migrate(checkpoint as TwoPhases),
              }),
            }
          : {}),
      });
    const reports: string[] = [];
    h = await Harness.open(await memoryStore(), {
      tasks: [make("A", 1)],
      onReport: (e) => reports.push(e instanceof Error ? e.message : String(e)),
    });
    const id = await h.createTask(make("A", 1), null, { ownership: { kind: "conversation" } });
    await until(() => blocked(h).some((b) => b.id === id), { what: "the task blocked" });
    expect(blocked(h)).toEqual([{ id, kind: "swap-broken", reason: "migration_failed" }]);
    const record = await h.getTask(id);
    expect(record?.state).toMatchObject({ status: "pending", checkpoint: { phase: "two" } });
    expect(record?.version).toBe(1);
    expect(log).toEqual(["A:one"]);
    expect(reports.filter((r) => r.includes("B cannot read v1"))).toHaveLength(1);
    await engineStillRuns(h);
    // A fixed definition is tried again and takes it.
    h.registry.register(make("C", 2, (checkpoint) => ({ ...checkpoint, note: "fixed" })));
    expect(outcome(await done(h, id))).toEqual({ status: "completed", result: "C" });
    expect(log).toEqual(["A:one", "C:two fixed"]);
    await h.close();
  });
  test("a replacement that cannot reserve (a higher version without migrate) does not take over: the task runs on under its definition and the engine reports it once", async () => {
    const log: string[] = [];
    const reports: string[] = [];
    type ThreePhases = { phase: "one" } | { phase: "two" } | { phase: "three" };
    let h!: Harness;
    const make = (label: string, version: number, onOne?: () => void) =>
      defineTask<null, ThreePhases, Json>({
        name: "swap-unfit",
        version,
        initial: () => ({ phase: "one" }),
        phases: {
          one: async (_t, runtime) => {
            log.push(`${label}:one`);
            onOne?.();
            await runtime.commit(() => ({ status: "running", checkpoint: { phase: "two" } }));
          },
          two: async (_t, runtime) => {
            log.push(`${label}:two`);
            await runtime.commit(() => ({ status: "running", checkpoint: { phase: "three" } }));
          },
          three: async (_t, runtime) => {
            log.push(`${label}:three`);
            await runtime.commit(() => complete(label));
          },
        },
        abort: async (_t, runtime) =>
          void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
      });
    const unfit = make("B", 2);
    const original = make("A", 1, () => h.registry.register(unfit));
    h = await Harness.open(await memoryStore(), {
      tasks: [original],
      onReport: (e) => reports.push(e instanceof Error ? e.message : String(e)),
    });
    const id = await h.createTask(original, null, { ownership: { kind: "conversation" } });
    expect(outcome(await done(h, id))).toEqual({ status: "completed", result: "A" });
    expect(log).toEqual(["A:one", "A:two", "A:three"]);
    expect(reports.filter((r) => r.includes("swap-unfit"))).toHaveLength(1);
    expect(reports.find((r) => r.includes("swap-unfit"))).toMatch(/version 2 .*no migrate/);
    await h.close();
  });
  test("two tasks meeting the same unfit definition: each invocation reports it once, naming its own task, and both run on under their definition (draw 41c)", async () => {
    // Draw 41c (C, 9): the engine kept one set of reported definitions for the whole scheduler, so the
    // second task's invocation that met the same unfit definition reported nothing; spec §5.4 has the
    // invocation report once per resolved definition, and the report names the task.
    const reports: string[] = [];
    const gate = deferred();
    type TwoPhases = { phase: "one" } | { phase: "two" } | { phase: "three" };
    let h!: Harness;
    const make = (version: number) =>
      defineTask<null, TwoPhases, Json>({
        name: "swap-unfit-shared",
        version,
        initial: () => ({ phase: "one" }),
        phases: {
          one: async (_t, runtime) => {
            await gate.promise;
            await runtime.commit(() => ({ status: "running", checkpoint: { phase: "two" } }));
          },
          two: async (_t, runtime) => {
            await runtime.commit(() => ({ status: "running", checkpoint: { phase: "three" } }));
          },
          three: async (_t, runtime) => {
            await runtime.commit(() => complete(`v${version}`));
          },
        },
        abort: async (_t, runtime) =>
          void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
      });
    const original = make(1);
    h = await Harness.open(await memoryStore(), {
      tasks: [original],
      onReport: (e) => reports.push(e instanceof Error ? e.message : String(e)),
    });
    const first = await h.createTask(original, null, { ownership: { kind: "conversation" } });
    const second = await h.createTask(original, null, { ownership: { kind: "conversation" } });
    await until(() => h.inspect().tasks.filter((t) => t.state.kind === "running").length === 2, {
      what: "both tasks run",
    });
    h.registry.register(make(2));
    gate.resolve();
    expect(outcome(await done(h, first))).toEqual({ status: "completed", result: "v1" });
    expect(outcome(await done(h, second))).toEqual({ status: "completed", result: "v1" });
    const unfit = reports.filter((r) => r.includes("swap-unfit-shared"));
    expect(unfit).toHaveLength(2);
    expect(unfit.some((r) => r.includes(`task ${first} `))).toBe(true);
    expect(unfit.some((r) => r.includes(`task ${second} `))).toBe(true);
    await h.close();
  });
  test("a replacement gone from the registry, then two unfit ones: the task runs on under its definition, each unfit definition reported once", async () => {
    const { result, log, reports } = await runUnderSwaps("swap-gone", {
      1: (h) => h.registry.unregister("swap-gone"),
      2: (h, make) => h.registry.register(make("B", 2)),
      3: (h, make) => h.registry.register(make("C", 3)),
    });
    expect(result).toEqual({ status: "completed", result: "A" });
    expect(log).toEqual(["A:1", "A:2", "A:3", "A:4"]);
    const unfit = reports.filter((r) => r.includes("cannot take over"));
    expect(unfit.map((r) => r.match(/version (\d) cannot take over/)?.[1])).toEqual(["2", "3"]);
  });
  test("a replacement gone from the registry is reported too, once: the task runs on under its definition across every later boundary (draw 37c)", async () => {
    // Draw 37c, contrary: spec §5.4 has the invocation report a missing definition as it reports one
    // that cannot reserve; the engine reported unfit ones only.
    const {
      result,
      log,
      reports: missing,
    } = await runUnderSwaps("swap-missing", {
      1: (h) => h.registry.unregister("swap-missing"),
    });
    expect(result).toEqual({ status: "completed", result: "A" });
    expect(log).toEqual(["A:1", "A:2", "A:3", "A:4"]);
    expect(missing).toHaveLength(1);
    expect(missing[0]).toMatch(/swap-missing is no longer registered: task \d+ runs on/);
  });
  test("two unfit definitions of one version are two resolved definitions: each is reported once (draw 37c)", async () => {
    // Draw 37c: the named tests' unfit definitions each had a version of its own, so a report kept
    // once per version (not per definition object) passed them.
    const {
      result,
      log,
      reports: unfit,
    } = await runUnderSwaps("swap-same-version", {
      1: (h, make) => h.registry.register(make("B", 2)),
      2: (h, make) => h.registry.register(make("C", 2)),
    });
    expect(result).toEqual({ status: "completed", result: "A" });
    expect(log).toEqual(["A:1", "A:2", "A:3", "A:4"]);
    expect(unfit.map((r) => r.match(/version (\d) cannot take over/)?.[1])).toEqual(["2", "2"]);
  });
  test("an older version cannot reserve either: the task runs on under its definition and the engine reports it once", async () => {
    // Break 26C: only higher replacements were set up, so an older one taken for a handover (the
    // reservation would then block the task task_too_old) went unseen.
    const log: string[] = [];
    const reports: string[] = [];
    let h!: Harness;
    const make = (label: string, version: number, onFirst?: () => void) =>
      countingTask({
        name: "swap-older",
        label,
        version,
        last: 3,
        log,
        at: (n) => (n === 1 ? onFirst?.() : undefined),
      });
    const original = make("B", 2, () => h.registry.register(make("A", 1)));
    h = await Harness.open(await memoryStore(), {
      tasks: [original],
      onReport: (e) => reports.push(e instanceof Error ? e.message : String(e)),
    });
    const id = await h.createTask(original, null, { ownership: { kind: "conversation" } });
    expect(outcome(await done(h, id))).toEqual({ status: "completed", result: "B" });
    expect(log).toEqual(["B:1", "B:2", "B:3"]);
    const unfit = reports.filter((r) => r.includes("swap-older"));
    expect(unfit).toHaveLength(1);
    expect(unfit[0]).toMatch(/version 1 cannot take over .* of version 2/);
    await h.close();
  });
  test("an older version with migrate cannot reserve either: the task runs on under its definition, never handed over to be blocked, and the engine reports it once (draw 41c)", async () => {
    // Draw 41c: the older replacement of the test above has no migrate; a handover to any other
    // version with migrate (an older one too, which the reservation then blocks task_too_old) passed it.
    const log: string[] = [];
    const reports: string[] = [];
    let h!: Harness;
    const original = countingTask({
      name: "swap-older-migrate",
      label: "B",
      version: 2,
      last: 3,
      log,
      at: (n) =>
        n === 1
          ? h.registry.register(
              countingTask({
                name: "swap-older-migrate",
                label: "A",
                version: 1,
                last: 3,
                log,
                at: () => undefined,
                migrate: true,
              }),
            )
          : undefined,
    });
    h = await Harness.open(await memoryStore(), {
      tasks: [original],
      onReport: (e) => reports.push(e instanceof Error ? e.message : String(e)),
    });
    const id = await h.createTask(original, null, { ownership: { kind: "conversation" } });
    await until(() => log.length === 3 || blocked(h).length > 0, { what: "the task ended or blocked" });
    expect(blocked(h)).toEqual([]);
    expect(outcome(await done(h, id))).toEqual({ status: "completed", result: "B" });
    expect(log).toEqual(["B:1", "B:2", "B:3"]);
    const unfit = reports.filter((r) => r.includes("swap-older-migrate"));
    expect(unfit).toHaveLength(1);
    expect(unfit[0]).toMatch(/version 1 cannot take over .* of version 2/);
    await h.close();
  });
});

describe("transactions", () => {
  test("after an unfit replacement the task looks again at every boundary: a fit one registered later takes it over at the next boundary (break 31E)", async () => {
    // Break 31E: every named test ran on to the end under its first definition once a replacement
    // was unfit, so an invocation that stopped looking after the first unfit one passed them.
    const { result, log, reports } = await runUnderSwaps("swap-later", {
      1: (h, make) => h.registry.register(make("B", 2)),
      2: (h, make) => h.registry.register(make("C", 1)),
    });
    expect(result).toEqual({ status: "completed", result: "C" });
    expect(log).toEqual(["A:1", "A:2", "C:3", "C:4"]);
    expect(reports).toHaveLength(1);
  });
  test("after a replacement went missing the task looks again at every boundary too: a fit one registered later takes it over at the next boundary (draw 41)", async () => {
    // Draw 41: the look again after an unfit replacement was tried (break 31E), never after a missing
    // one; an invocation that stopped handing over once its definition went missing passed them.
    const { result, log, reports } = await runUnderSwaps("swap-back", {
      1: (h) => h.registry.unregister("swap-back"),
      2: (h, make) => h.registry.register(make("C", 1)),
    });
    expect(result).toEqual({ status: "completed", result: "C" });
    expect(log).toEqual(["A:1", "A:2", "C:3", "C:4"]);
    expect(reports.filter((r) => r.includes("no longer registered"))).toHaveLength(1);
  });
  test("a transaction used after its callback ended is refused", async () => {
    const h = await Harness.open(await memoryStore());
    await h.transaction((tx) => tx.writeDoc(1, "kept", { x: 0 }));
    let kept: Tx | undefined;
    await h.transaction((tx) => {
      kept = tx;
    });
    expect(() => kept!.createTask(ping, null, { ownership: { kind: "conversation" } })).toThrow(
      InvalidTransition,
    );
    expect(() => kept!.writeDoc(1, "late", { x: 1 })).toThrow(InvalidTransition);
    expect(await h.transaction((tx) => tx.readDoc(1, "late"))).toBeUndefined();
    // Every operation, reads too, and also once an async callback settled, or a callback that threw.
    const ended: Tx[] = [kept!];
    await h.transaction(async (tx) => {
      await Promise.resolve();
      ended.push(tx);
    });
    await h
      .transaction((tx) => {
        ended.push(tx);
        throw new Error("failed callback");
      })
      .catch(() => undefined);
    const operations: Array<[string, (tx: Tx) => unknown]> = [
      ["readDoc", (tx) => tx.readDoc(1, "kept")],
      ["docVersion", (tx) => tx.docVersion(1, "kept")],
      ["getTask", (tx) => tx.getTask(1 as TaskId)],
      ["conversation", (tx) => tx.conversation(1 as ConversationId)],
      ["lastEntryId", (tx) => tx.lastEntryId()],
      ["appendEntry", (tx) => tx.appendEntry(1, { kind: "late" })],
      ["patchDoc", (tx) => tx.patchDoc(1, "kept", [{ path: ["x"], set: 2 }])],
      ["retireDoc", (tx) => tx.retireDoc(1, "kept")],
      ["createConversation", (tx) => tx.createConversation({ kind: "ownerless" })],
      // The rest of Tx too (break 27B: a late createSubmission went unrefused and unnoticed).
      ["forkConversation", (tx) => tx.forkConversation(1, 1, { ownership: { kind: "ownerless" } })],
      ["ownedConversations", (tx) => tx.ownedConversations(1 as TaskId)],
      ["appendedEntries", (tx) => tx.appendedEntries(1)],
      ["submission", (tx) => tx.submission(1)],
      ["submissionByRequest", (tx) => tx.submissionByRequest(1, "r")],
      [
        "createSubmission",
        (tx) => tx.createSubmission({ conversationId: 1, type: "write", status: "queued" } as never),
      ],
      [
        "updateSubmission",
        (tx) => tx.updateSubmission({ id: 1, conversationId: 1, type: "write", status: "queued" } as never),
      ],
      ["writeDoc", (tx) => tx.writeDoc(1, "kept", { x: 3 })],
      ["docRecord", (tx) => tx.docRecord(1, "kept")],
      ["activeHead", (tx) => tx.activeHead(1)],
    ];
    for (const tx of ended)
      for (const [name, operation] of operations)
        expect(() => operation(tx), `${name} after the callback ended`).toThrow(InvalidTransition);
    expect(await h.transaction((tx) => tx.readDoc(1, "kept"))).toEqual({ x: 0 });
    expect(await h.entries(1)).toEqual([]);
    await engineStillRuns(h);
    await h.close();
  });

  test("a callback run again once the documents it read were loaded: the transaction of its first run is ended too", async () => {
    // Break 30E: a first run's transaction left open when the callback needed documents not in
    // memory (the session runs it again once they load) passed the named test, whose transactions
    // never needed a load; a write through the kept first one went nowhere, without an error.
    const store = await memoryStore();
    const first = await Harness.open(store);
    const c = await first.transaction((tx) => tx.createConversation({ kind: "ownerless" }).id);
    await first.transaction((tx) => tx.writeDoc(c, "kept", { x: 0 }));
    await first.close();
    const h = await Harness.open(await memoryStore(store.image()));
    expect(internals(h).session.records.docsLoaded.has(c)).toBe(false);
    const kept: Tx[] = [];
    expect(
      await h.transaction((tx) => {
        kept.push(tx);
        return tx.readDoc(c, "kept");
      }),
    ).toEqual({ x: 0 });
    expect(kept).toHaveLength(2);
    for (const tx of kept) {
      expect(() => tx.writeDoc(c, "late", { x: 1 })).toThrow(InvalidTransition);
      expect(() => tx.readDoc(c, "kept")).toThrow(InvalidTransition);
    }
    await h.close();
  });

  test("an owner that is abort-marked cannot own new work; a task-owned task cannot be background", async () => {
    const abortGate = deferred();
    const owner = single("owner", async (_t, _r, signal) => untilAborted(signal), {
      abort: async (_t, runtime) => {
        await abortGate.promise;
        await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }));
      },
    });
    const h = await Harness.open(await memoryStore(), { tasks: [owner, ping] });
    const live = await h.createTask(parked("live-owner"), null, { ownership: { kind: "conversation" } });
    await until(() => running(h) === 1, { what: "owner running" });
    await expect(
      h.transaction((tx) =>
        tx.createTask(ping, null, { ownership: { kind: "task", taskId: live }, background: true }),
      ),
    ).rejects.toBeInstanceOf(InvalidTransition);
    // A conversation-owned task may be background, and its record says so (spec §5.1).
    const background = await h.createTask(ping, null, {
      ownership: { kind: "conversation" },
      background: true,
    });
    expect((await h.getTask(background))?.background).toBe(true);

    const id = await h.createTask(owner, null, { ownership: { kind: "conversation" } });
    await until(() => running(h) === 2, { what: "both running" });
    expect(await h.abortTask(id)).toBe("marked");
    await expect(
      h.transaction((tx) => tx.createTask(ping, null, { ownership: { kind: "task", taskId: id } })),
    ).rejects.toBeInstanceOf(OwnerNotLive);
    abortGate.resolve();
    expect(outcome(await done(h, id))).toMatchObject({ status: "aborted" });
    await engineStillRuns(h);
    await h.close();
  });

  test("a task's own commit may not make its child background: the commit is refused, no child is made, the owner goes on", async () => {
    const h = await Harness.open(await memoryStore(), { tasks: [ping] });
    let refused: unknown;
    const maker = single("background-child-maker", async (task, runtime) => {
      try {
        await runtime.commit((tx) => {
          tx.createTask(ping, null, { ownership: { kind: "task", taskId: task.id }, background: true });
          return complete("made");
        });
      } catch (error) {
        refused = error;
        await runtime.commit(() => complete("refused"));
      }
    });
    const id = await h.createTask(maker, null, { ownership: { kind: "conversation" } });
    expect(outcome(await done(h, id))).toEqual({ status: "completed", result: "refused" });
    expect(refused).toBeInstanceOf(InvalidTransition);
    // Nothing of the refused commit landed: the owner is the only task made.
    expect(h.inspect().tasks.map((t) => t.record.id)).not.toContain(id + 1);
    expect(await h.getTask(id + 1)).toBeUndefined();
    await engineStillRuns(h);
    await h.close();
  });
});

describe("commits a handler may not make", () => {
  test("a phase may commit any of the five outcomes (completed, failed, aborted, orphaned, faulted) as its task's", async () => {
    const h = await Harness.open(await memoryStore());
    const outcomes = [
      { status: "completed", result: 1 },
      { status: "failed", error: { message: "no" } },
      { status: "aborted", reason: "gave up" },
      { status: "orphaned", reason: "its input is gone" },
      { status: "faulted", error: { message: "broken" } },
    ] as const;
    for (const [i, committed] of outcomes.entries()) {
      const def = single(`outcome-${i}`, async (_t, runtime) => {
        await runtime.commit(() => ({ status: "terminal", outcome: committed }));
      });
      const id = await h.createTask(def, null, { ownership: { kind: "conversation" } });
      expect((await done(h, id)).state).toEqual({ status: "terminal", outcome: committed });
    }
    await engineStillRuns(h);
    await h.close();
  });

  test("an abort handler may not wait, and no handler may commit an unknown outcome", async () => {
    const caught: unknown[] = [];
    const stubborn = single(
      "stubborn",
      async (_t, runtime, signal) => {
        try {
          await runtime.commit(() => ({ status: "terminal", outcome: { status: "exploded" } }) as never);
        } catch (error) {
          caught.push(error);
        }
        await untilAborted(signal);
      },
      {
        abort: async (_t, runtime) => {
          try {
            await runtime.commit(() => ({
              status: "waiting",
              checkpoint: { phase: "go" },
              on: [],
              policy: "allSettled",
            }));
          } catch (error) {
            caught.push(error);
          }
          await runtime.commit(() => ({
            status: "terminal",
            outcome: { status: "aborted", reason: "done" },
          }));
        },
      },
    );
    const h = await Harness.open(await memoryStore());
    const id = await h.createTask(stubborn, null, { ownership: { kind: "conversation" } });
    await until(() => caught.length === 1, { what: "the unknown outcome refused" });
    await h.abortTask(id);
    expect(outcome(await done(h, id))).toEqual({ status: "aborted", reason: "done" });
    expect(caught.map((e) => [(e as Error).constructor.name, (e as Error).message])).toEqual([
      ["InvalidTransition", 'unknown outcome "exploded"'],
      ["InvalidTransition", "an abort handler may not wait"],
    ]);
    // Uncaught, the refused wait faults the task (upstream "faults an abort handler that tries to wait").
    const waiter = single("abort-waiter", async (_t, _r, signal) => untilAborted(signal), {
      abort: async (_t, runtime) => {
        await runtime.commit(() => ({
          status: "waiting",
          checkpoint: { phase: "go" },
          on: [],
          policy: "allSettled",
        }));
      },
    });
    const other = await h.createTask(waiter, null, { ownership: { kind: "conversation" } });
    await until(() => running(h) === 1, { what: "the waiter running" });
    expect(await h.abortTask(other)).toBe("marked");
    expect(outcome(await done(h, other))).toMatchObject({
      status: "faulted",
      error: { message: "an abort handler may not wait" },
    });
    // Any wait, not only one on nothing: a durable timer (`until`) and a wait on a live task are
    // refused alike, and uncaught each faults its task (break 31H).
    const sleeper = await h.createTask(parked("abort-waiter-target"), null, {
      ownership: { kind: "conversation" },
    });
    // A wait already satisfied (on a task that finished) is a wait too (draw 33c).
    const finished = await h.createTask(
      single("abort-waiter-finished", async (_t, runtime) => {
        await runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: 1 } }));
      }),
      null,
      { ownership: { kind: "conversation" } },
    );
    await done(h, finished);
    const waits: NextTaskState<Go, Json>[] = [
      timerWait<Go>({ phase: "go" }, Date.now() + 3_600_000),
      { status: "waiting", checkpoint: { phase: "go" }, on: [sleeper], policy: "allSettled" },
      { status: "waiting", checkpoint: { phase: "go" }, on: [finished], policy: "allSettled" },
      // Under either join policy: a failFast wait (on nothing, an abort handler owning no child) is
      // refused the same (draw 38b).
      { status: "waiting", checkpoint: { phase: "go" }, on: [], policy: "failFast" },
    ];
    for (const next of waits) {
      const later = single(
        "abort-waiter-" + waits.indexOf(next),
        async (_t, _r, signal) => untilAborted(signal),
        {
          // A second abort invocation (the wait let through) ends aborted rather than loop.
          abort: async (_t, runtime) => {
            const again = (await runtime.memo("tried")) !== undefined;
            await runtime.memo("tried", true);
            await runtime.commit(() =>
              again ? { status: "terminal", outcome: { status: "aborted" } } : next,
            );
          },
        },
      );
      const id = await h.createTask(later, null, { ownership: { kind: "conversation" } });
      await until(() => h.inspect().tasks.some((t) => t.record.id === id && t.state.kind === "running"), {
        what: "the later waiter running",
      });
      expect(await h.abortTask(id)).toBe("marked");
      expect(outcome(await done(h, id))).toMatchObject({
        status: "faulted",
        error: { message: "an abort handler may not wait" },
      });
    }
    // A wait on the task's own child, finished (an abort handler runs only once its owned work
    // drained), is refused too under either policy (draw 38c): its own children are no exception.
    const quick = single("abort-waiter-own-child", async (_t, runtime) => {
      await runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: 1 } }));
    });
    for (const policy of ["failFast", "allSettled"] as const) {
      let child: TaskId | undefined;
      const parent = single(
        `abort-waiter-own-${policy}`,
        async (task, runtime, signal) => {
          await runtime.commit((tx) => {
            child = tx.createTask(quick, null, { ownership: { kind: "task", taskId: task.id } });
            return { status: "running", checkpoint: { phase: "go" } };
          });
          await untilAborted(signal);
        },
        {
          // A second abort invocation (the wait let through) ends aborted rather than loop.
          abort: async (_t, runtime) => {
            const again = (await runtime.memo("tried")) !== undefined;
            await runtime.memo("tried", true);
            await runtime.commit(() =>
              again
                ? { status: "terminal", outcome: { status: "aborted" } }
                : { status: "waiting", checkpoint: { phase: "go" }, on: [child!], policy },
            );
          },
        },
      );
      const id = await h.createTask(parent, null, { ownership: { kind: "conversation" } });
      await until(() => child !== undefined, { what: "the own child created" });
      await done(h, child!);
      expect(await h.abortTask(id)).toBe("marked");
      expect(outcome(await done(h, id))).toMatchObject({
        status: "faulted",
        error: { message: "an abort handler may not wait" },
      });
    }
    expect((await h.getTask(sleeper))?.state.status).toBe("running");
    await h.abortTask(sleeper);
    await done(h, sleeper);
    await engineStillRuns(h);
    await h.close();
  });

  test("an abort handler may not wait through an async commit callback either: the wait it resolves to is refused and, uncaught, faults its task (draw 36d)", async () => {
    const waiter = single("abort-async-waiter", async (_t, _r, signal) => untilAborted(signal), {
      // A second abort invocation (the wait let through) ends aborted rather than loop.
      abort: async (_t, runtime) => {
        const again = (await runtime.memo("tried")) !== undefined;
        await runtime.memo("tried", true);
        await runtime.commit(async () => {
          await Promise.resolve();
          return again
            ? { status: "terminal", outcome: { status: "aborted" } }
            : { status: "waiting", checkpoint: { phase: "go" }, on: [], policy: "allSettled" };
        });
      },
    });
    const h = await Harness.open(await memoryStore());
    const id = await h.createTask(waiter, null, { ownership: { kind: "conversation" } });
    await until(() => running(h) === 1, { what: "the async waiter running" });
    expect(await h.abortTask(id)).toBe("marked");
    expect(outcome(await done(h, id))).toMatchObject({
      status: "faulted",
      error: { message: "an abort handler may not wait" },
    });
    await engineStillRuns(h);
    await h.close();
  });

  test("a runtime kept after its invocation ended refuses every operation: commits, reads, memos, waits, hook dispatch, the clock and report; its signal is aborted and a wait left pending rejects when it ends", async () => {
    let kept: TaskRuntime<Json, Go, Json> | undefined;
    let keptHookApi: TaskRuntime | undefined;
    let leftover: Promise<unknown> | undefined;
    let leftoverWithSignal: Promise<unknown> | undefined;
    // Settled flags read without awaiting (draw 40B: a wait left out of the invocation's signal stayed
    // pending, and this test caught it only by timing out on the await below).
    const settled: string[] = [];
    const hooked: string[] = [];
    const other = parked("other");
    const leaky = single("leaky", async (task, runtime) => {
      kept = runtime;
      // A hook dispatch during the invocation works and hands the hook its api.
      await runtime.hooks.each("probe", (handler) => (handler as () => void)());
      // A wait left behind, unawaited: it rejects when the invocation ends.
      leftover = runtime.waitForTask(task.input as TaskId).then(
        () => "resolved",
        (error: unknown) => {
          settled.push("leftover");
          return error;
        },
      );
      // One more, given a signal of its own that never aborts (draw 32cB: a leftover wait with a
      // caller's signal rejected with a bare WaitCancelled, not the invocation's end, and this passed).
      leftoverWithSignal = runtime.waitForTask(task.input as TaskId, new AbortController().signal).then(
        () => "resolved",
        (error: unknown) => {
          settled.push("withSignal");
          return error;
        },
      );
      await runtime.commit(() => complete("ok"));
    });
    const reports: string[] = [];
    const h = await Harness.open(await memoryStore(), {
      onReport: (e) => reports.push(e instanceof Error ? e.message : String(e)),
      taskHooks: {
        handlers: () => [{ probe: () => hooked.push("probe") }],
        api: (runtime) => {
          keptHookApi = runtime;
          return runtime;
        },
      },
    });
    const otherId = await h.createTask(other, null, { ownership: { kind: "conversation" } });
    const id = await h.createTask(leaky, otherId, { ownership: { kind: "conversation" } });
    expect(outcome(await done(h, id))).toEqual({ status: "completed", result: "ok" });
    expect(hooked).toEqual(["probe"]);
    // Every operation: commits, reads, memos (both forms), waits, outcomes and hook dispatch.
    // Refused because the invocation ended (break 26H: with the commit's two ended-invocation checks
    // gone, the commit was still refused, as not_running since the task is terminal, and this passed).
    await expect(kept!.commit(() => complete("again"))).rejects.toMatchObject({
      name: "CommitRefused",
      reason: "invocation_ended",
    });
    await expect(kept!.getTask(id)).rejects.toBeInstanceOf(CommitRefused);
    await expect(kept!.outcomes([id])).rejects.toBeInstanceOf(CommitRefused);
    await expect(kept!.memo("late", 1)).rejects.toBeInstanceOf(CommitRefused);
    await expect(kept!.memo("late")).rejects.toBeInstanceOf(CommitRefused);
    await expect(kept!.waitForTask(otherId)).rejects.toBeInstanceOf(CommitRefused);
    await expect(kept!.hooks.each("probe", () => undefined)).rejects.toBeInstanceOf(CommitRefused);
    expect(hooked).toEqual(["probe"]);
    // The two synchronous operations throw too, and the late report reaches no host (draw 41b-B: the
    // clock and report answered after the invocation ended, and this test passed).
    expect(() => kept!.now()).toThrow(
      expect.objectContaining({ name: "CommitRefused", reason: "invocation_ended" }),
    );
    expect(() => kept!.report(new Error("late report"))).toThrow(
      expect.objectContaining({ name: "CommitRefused", reason: "invocation_ended" }),
    );
    expect(reports).not.toContain("late report");
    // The api a hook got is the invocation's: refused too.
    await expect(keptHookApi!.memo("hook:late", 1)).rejects.toBeInstanceOf(CommitRefused);
    // Its signal aborted when it ended, and the leftover wait rejected then (its task still runs).
    expect(kept!.signal.aborted).toBe(true);
    expect([...settled].sort()).toEqual(["leftover", "withSignal"]);
    expect(await leftover).toBeInstanceOf(CommitRefused);
    expect(await leftoverWithSignal).toMatchObject({ name: "CommitRefused", reason: "invocation_ended" });
    expect((await h.getTask(otherId))!.state.status).not.toBe("terminal");
    expect(outcome(await h.getTask(id))).toEqual({ status: "completed", result: "ok" });
    await engineStillRuns(h);
    await h.close();
  });

  test("an abort handler's runtime kept after its invocation ended refuses every operation too; its signal is aborted and a wait it left pending rejects when it ends", async () => {
    // Break 29D: the tests above keep a phase's runtime; an end that aborted the signal of a run
    // invocation only (an abort handler's signal left live, its leftover wait pending) passed them.
    let kept: TaskRuntime<Json, Go, Json> | undefined;
    let leftover: Promise<unknown> | undefined;
    const hooked: string[] = [];
    const other = parked("other");
    const aborting = single("aborting", async (_t, _r, signal) => untilAborted(signal), {
      abort: async (task, runtime) => {
        kept = runtime;
        leftover = runtime.waitForTask(task.input as TaskId).then(
          () => "resolved",
          (error: unknown) => error,
        );
        await runtime.commit(() => ({
          status: "terminal",
          outcome: { status: "aborted", reason: "handler" },
        }));
      },
    });
    const h = await Harness.open(await memoryStore(), {
      taskHooks: { handlers: () => [{ probe: () => hooked.push("probe") }], api: (runtime) => runtime },
    });
    const otherId = await h.createTask(other, null, { ownership: { kind: "conversation" } });
    const id = await h.createTask(aborting, otherId, { ownership: { kind: "conversation" } });
    await until(() => h.inspect().tasks.some((t) => t.record.id === id && t.state.kind === "running"), {
      what: "the task runs",
    });
    await h.abortTask(id);
    expect(outcome(await done(h, id))).toEqual({ status: "aborted", reason: "handler" });
    const refused = { name: "CommitRefused", reason: "invocation_ended" };
    await expect(kept!.commit(() => complete("late"))).rejects.toMatchObject(refused);
    await expect(kept!.getTask(id)).rejects.toMatchObject(refused);
    await expect(kept!.outcomes([otherId])).rejects.toMatchObject(refused);
    await expect(kept!.memo("late", 1)).rejects.toMatchObject(refused);
    await expect(kept!.memo("late")).rejects.toMatchObject(refused);
    await expect(kept!.waitForTask(otherId)).rejects.toMatchObject(refused);
    await expect(kept!.hooks.each("probe", (handler) => (handler as () => void)())).rejects.toMatchObject(
      refused,
    );
    expect(hooked).toEqual([]);
    expect(() => kept!.now()).toThrow(expect.objectContaining(refused));
    expect(() => kept!.report(new Error("late report"))).toThrow(expect.objectContaining(refused));
    expect(kept!.signal.aborted).toBe(true);
    expect(await leftover).toBeInstanceOf(CommitRefused);
    expect((await h.getTask(otherId))!.state.status).not.toBe("terminal");
    expect(outcome(await h.getTask(id))).toEqual({ status: "aborted", reason: "handler" });
    await engineStillRuns(h);
    await h.close();
  });

  test("a runtime kept from an ended invocation stays refused while its task runs again in a later one: every operation fails invocation_ended and writes nothing", async () => {
    // Break 28C: the test above keeps the runtime of a task that is terminal; refusing by the task's
    // state (not running, or terminal) instead of by the invocation's end passed it.
    type Two = { phase: "go" } | { phase: "again" };
    let kept: TaskRuntime<Json, Two, Json> | undefined;
    const hooked: string[] = [];
    const second = { entered: deferred(), release: deferred() };
    const gate = deferred();
    const other = single("other-gated", async (_t, runtime) => {
      await gate.promise;
      await runtime.commit(() => complete("other"));
    });
    const twice = defineTask<Json, Two, Json>({
      name: "twice",
      version: 1,
      initial: () => ({ phase: "go" }),
      phases: {
        go: async (task, runtime) => {
          kept = runtime;
          await runtime.commit(() => ({
            status: "waiting",
            checkpoint: { phase: "again" },
            on: [task.input as TaskId],
            policy: "allSettled",
          }));
        },
        again: async (_t, runtime) => {
          second.entered.resolve();
          await second.release.promise;
          await runtime.commit(() => complete("twice"));
        },
      },
      abort: async () => undefined,
    });
    const h = await Harness.open(await memoryStore(), {
      taskHooks: { handlers: () => [{ probe: () => hooked.push("probe") }], api: (runtime) => runtime },
    });
    const otherId = await h.createTask(other, null, { ownership: { kind: "conversation" } });
    const id = await h.createTask(twice, otherId, { ownership: { kind: "conversation" } });
    await until(() => internals(h).session.records.tasks.get(id)?.state.status === "waiting", {
      what: "the first invocation ended waiting",
    });
    gate.resolve();
    await second.entered.promise;
    expect((await h.getTask(id))!.state.status).toBe("running");
    const refused = { name: "CommitRefused", reason: "invocation_ended" };
    await expect(kept!.commit(() => complete("stale"))).rejects.toMatchObject(refused);
    await expect(kept!.memo("stale", 1)).rejects.toMatchObject(refused);
    await expect(kept!.memo("stale")).rejects.toMatchObject(refused);
    await expect(kept!.getTask(id)).rejects.toMatchObject(refused);
    await expect(kept!.outcomes([otherId])).rejects.toMatchObject(refused);
    await expect(kept!.waitForTask(otherId)).rejects.toMatchObject(refused);
    await expect(kept!.hooks.each("probe", (handler) => (handler as () => void)())).rejects.toMatchObject(
      refused,
    );
    expect(hooked).toEqual([]);
    expect(kept!.signal.aborted).toBe(true);
    const live = (await h.getTask(id))!;
    expect(live.state).toMatchObject({ status: "running", checkpoint: { phase: "again" } });
    expect(live.memos ?? {}).toEqual({});
    second.release.resolve();
    expect(outcome(await done(h, id))).toEqual({ status: "completed", result: "twice" });
    await h.close();
  });

  test("a memo value that is not JSON is refused and nothing is stored", async () => {
    const caught: unknown[] = [];
    const memoist = single("memoist", async (_t, runtime) => {
      try {
        await runtime.memo("bad", Number.NaN as unknown as Json);
      } catch (error) {
        caught.push(error);
      }
      const stored = await runtime.memo("bad");
      await runtime.commit(() => complete(stored === undefined ? "nothing stored" : "stored"));
    });
    const h = await Harness.open(await memoryStore());
    const id = await h.createTask(memoist, null, { ownership: { kind: "conversation" } });
    expect(outcome(await done(h, id))).toEqual({ status: "completed", result: "nothing stored" });
    expect(caught[0]).toBeInstanceOf(NotJson);
    await engineStillRuns(h);
    await h.close();
  });
});
