/**
 * The durable core's rules, one test each. Every test checks the typed error or outcome the rule
 * names AND that the rest of the engine keeps running (another task completes afterwards).
 */
import { describe, expect, test } from "vitest";
import {
  AbortRequested,
  CommitRefused,
  defineTask,
  Harness,
  type HarnessOptions,
  InvalidTransition,
  type JoinPolicy,
  type Json,
  NotJson,
  type TaskDefinition,
  type TaskId,
  type TaskRecord,
  WaitCancelled,
  WaitCycle,
} from "../../worker/index.ts";
import type { MemoryImage } from "../../worker/store/open.ts";
import { deferred, memoryStore, until } from "../../worker/testing.ts";
import {
  complete,
  done,
  engineStillRuns,
  type Go,
  joiner,
  outcome,
  parked,
  ping,
  row,
  settle,
  single,
  storeWith,
  untilAborted,
} from "./core-fixtures.ts";

// ---------------------------------------------------------------------------------------------

describe("missing definition", () => {
  test("stays pending and blocked; other tasks run; abort orphans it; registering it later runs it", async () => {
    const { image, ids } = await storeWith([parked("ghost"), parked("ghost")]);
    const [kept, dropped] = ids as [TaskId, TaskId];
    const h = await Harness.open(image, { tasks: [ping] });
    // Visible as blocked without any other work arriving to wake the scheduler.
    await until(() => h.inspect().blocked.length === 2, { what: "both ghosts blocked" });
    expect(h.inspect().blocked.map((b) => [b.id, b.kind, b.reason])).toEqual([
      [kept, "ghost", "missing_task"],
      [dropped, "ghost", "missing_task"],
    ]);
    expect((await h.getTask(kept))?.state.status).toBe("pending");
    await engineStillRuns(h);
    expect((await h.getTask(kept))?.state.status).toBe("pending");

    expect(await h.abortTask(dropped)).toBe("marked");
    expect(outcome(await done(h, dropped))).toEqual({ status: "orphaned", reason: "missing_task" });
    expect(h.inspect().blocked.map((b) => b.id)).toEqual([kept]);

    h.register(single("ghost", async (_t, runtime) => void (await runtime.commit(() => complete("found")))));
    expect(outcome(await done(h, kept))).toEqual({ status: "completed", result: "found" });
    expect(h.inspect().blocked).toEqual([]);
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
    );
    expect(outcome(await done(h, id))).toEqual({ status: "faulted", error: { message: "boom in phase" } });
    await engineStillRuns(h);
    await h.close();
  });

  test("a phase that returns without committing a new checkpoint faults", async () => {
    const h = await Harness.open(await memoryStore());
    const id = await h.createTask(
      single("idle", async () => undefined),
      null,
    );
    const o = outcome(await done(h, id));
    expect(o?.status).toBe("faulted");
    expect((o as { error: { message: string } }).error.message).toMatch(
      /phase go returned without committing/,
    );
    await engineStillRuns(h);
    await h.close();
  });

  test("an abort handler that returns without a terminal outcome faults", async () => {
    const h = await Harness.open(await memoryStore());
    const def = single("lazy-abort", async (_t, _r, signal) => untilAborted(signal), {
      abort: async () => undefined,
    });
    const id = await h.createTask(def, null);
    await until(() => h.inspect().running === 1, { what: "running" });
    await h.abortTask(id);
    const o = outcome(await done(h, id));
    expect(o?.status).toBe("faulted");
    expect((o as { error: { message: string } }).error.message).toMatch(
      /abort handler of lazy-abort returned without a terminal outcome/,
    );
    await engineStillRuns(h);
    await h.close();
  });

  test("a checkpoint naming an unknown phase faults", async () => {
    const h = await Harness.open(await memoryStore());
    const def = single("wanderer", async (_t, runtime) => {
      await runtime.commit(() => ({ status: "running", checkpoint: { phase: "nowhere" } as unknown as Go }));
    });
    const id = await h.createTask(def, null);
    const o = outcome(await done(h, id));
    expect(o?.status).toBe("faulted");
    expect((o as { error: { message: string } }).error.message).toMatch(/no handler for phase nowhere/);
    await engineStillRuns(h);
    await h.close();
  });
});

describe("late commit after abort", () => {
  test("the blocked handler's later commit is refused with abort_requested; the abort handler decides", async () => {
    const entered = deferred();
    const gate = deferred();
    const log: string[] = [];
    let refused: unknown;
    let signalReason: unknown;
    const def = single(
      "late",
      async (_t, runtime, signal) => {
        entered.resolve();
        await gate.promise; // deaf to the signal on purpose
        signalReason = signal.reason;
        try {
          await runtime.commit(() => complete("late write"));
        } catch (error) {
          refused = error;
          log.push("refused");
          throw error;
        }
      },
      {
        abort: async (_t, runtime) => {
          log.push("abort handler");
          await runtime.commit(() => ({
            status: "terminal",
            outcome: { status: "aborted", reason: "by abort handler" },
          }));
        },
      },
    );
    const h = await Harness.open(await memoryStore());
    const id = await h.createTask(def, null);
    await entered.promise;
    expect(await h.abortTask(id)).toBe("marked");
    expect((await h.getTask(id))?.abortRequested).toBe(true);
    gate.resolve();
    const final = await done(h, id);
    expect(refused).toBeInstanceOf(CommitRefused);
    expect((refused as CommitRefused).reason).toBe("abort_requested");
    expect(signalReason).toBeInstanceOf(AbortRequested);
    expect(log).toEqual(["refused", "abort handler"]);
    expect(outcome(final)).toEqual({ status: "aborted", reason: "by abort handler" });
    await engineStillRuns(h);
    await h.close();
  });
});

describe("waits", () => {
  type ProbeInput = { on: "self" | number; policy: JoinPolicy };
  function prober(caught: Map<TaskId, unknown>) {
    return defineTask<ProbeInput, Go, string>({
      name: "prober",
      version: 1,
      initial: () => ({ phase: "go" }),
      phases: {
        go: async (task, runtime) => {
          const on = task.input.on === "self" ? runtime.taskId : task.input.on;
          try {
            await runtime.commit(() => ({
              status: "waiting",
              checkpoint: { phase: "go" },
              on: [on],
              policy: task.input.policy,
            }));
          } catch (error) {
            caught.set(runtime.taskId, error);
            // The refused task carries on.
            await runtime.commit(() => ({
              status: "terminal",
              outcome: { status: "completed", result: "carried on" },
            }));
          }
        },
      },
      abort: async (_t, runtime) => {
        await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }));
      },
    });
  }

  test("waiting on itself is a WaitCycle", async () => {
    const caught = new Map<TaskId, unknown>();
    const h = await Harness.open(await memoryStore());
    const id = await h.createTask(prober(caught), { on: "self", policy: "allSettled" });
    expect(outcome(await done(h, id))).toEqual({ status: "completed", result: "carried on" });
    expect(caught.get(id)).toBeInstanceOf(WaitCycle);
    await engineStillRuns(h);
    await h.close();
  });

  test("waiting on a missing task is an InvalidTransition", async () => {
    const caught = new Map<TaskId, unknown>();
    const h = await Harness.open(await memoryStore());
    const id = await h.createTask(prober(caught), { on: 99_999, policy: "allSettled" });
    expect(outcome(await done(h, id))).toEqual({ status: "completed", result: "carried on" });
    expect(caught.get(id)).toBeInstanceOf(InvalidTransition);
    await engineStillRuns(h);
    await h.close();
  });

  test("failFast on a task it does not own is an InvalidTransition", async () => {
    const caught = new Map<TaskId, unknown>();
    const gate = deferred();
    const h = await Harness.open(await memoryStore());
    const other = await h.createTask(
      single("bystander", async (_t, runtime) => {
        await gate.promise;
        await runtime.commit(() => complete("bystander"));
      }),
      null,
    );
    const id = await h.createTask(prober(caught), { on: other, policy: "failFast" });
    expect(outcome(await done(h, id))).toEqual({ status: "completed", result: "carried on" });
    expect(caught.get(id)).toBeInstanceOf(InvalidTransition);
    expect(caught.get(id)).not.toBeInstanceOf(WaitCycle);
    expect((await h.getTask(other))?.abortRequested).toBe(false);
    gate.resolve();
    expect(outcome(await done(h, other))?.status).toBe("completed");
    await engineStillRuns(h);
    await h.close();
  });

  test("a child waiting on its owner is a WaitCycle; both carry on", async () => {
    const caught: unknown[] = [];
    type ElderState = { phase: "spawn" } | { phase: "after" };
    const junior = defineTask<{ parent: TaskId }, Go, string>({
      name: "junior",
      version: 1,
      initial: () => ({ phase: "go" }),
      phases: {
        go: async (task, runtime) => {
          try {
            await runtime.commit(() => ({
              status: "waiting",
              checkpoint: { phase: "go" },
              on: [task.input.parent],
              policy: "allSettled",
            }));
          } catch (error) {
            caught.push(error);
            await runtime.commit(() => ({
              status: "terminal",
              outcome: { status: "completed", result: "junior" },
            }));
          }
        },
      },
      abort: async (_t, runtime) =>
        void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
    });
    const elder = defineTask<null, ElderState, string>({
      name: "elder",
      version: 1,
      initial: () => ({ phase: "spawn" }),
      phases: {
        spawn: async (_t, runtime) => {
          await runtime.commit((tx) => {
            const child = tx.createTask(junior, { parent: runtime.taskId });
            return { status: "waiting", checkpoint: { phase: "after" }, on: [child], policy: "allSettled" };
          });
        },
        after: async (_t, runtime) => {
          await runtime.commit(() => ({
            status: "terminal",
            outcome: { status: "completed", result: "elder" },
          }));
        },
      },
      abort: async (_t, runtime) =>
        void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
    });
    const h = await Harness.open(await memoryStore());
    const id = await h.createTask(elder, null);
    expect(outcome(await done(h, id))).toEqual({ status: "completed", result: "elder" });
    expect(caught).toHaveLength(1);
    expect(caught[0]).toBeInstanceOf(WaitCycle);
    await engineStillRuns(h);
    await h.close();
  });

  test("two conversation-owned tasks waiting on each other: the second wait is a WaitCycle", async () => {
    const firstWaiting = deferred();
    const caught: unknown[] = [];
    type PairState = { phase: "go" } | { phase: "after" };
    const pair = defineTask<{ role: "first" | "second" }, PairState, string>({
      name: "pair",
      version: 1,
      initial: () => ({ phase: "go" }),
      phases: {
        go: async (task, runtime) => {
          const first = task.input.role === "first";
          const peer = first ? runtime.taskId + 1 : runtime.taskId - 1;
          if (!first) await firstWaiting.promise;
          try {
            await runtime.commit(() => ({
              status: "waiting",
              checkpoint: { phase: "after" },
              on: [peer],
              policy: "allSettled",
            }));
            if (first) firstWaiting.resolve();
          } catch (error) {
            caught.push(error);
            await runtime.commit(() => ({
              status: "terminal",
              outcome: { status: "completed", result: task.input.role },
            }));
          }
        },
        after: async (task, runtime) => {
          await runtime.commit(() => ({
            status: "terminal",
            outcome: { status: "completed", result: `${task.input.role} resumed` },
          }));
        },
      },
      abort: async (_t, runtime) =>
        void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
    });
    const h = await Harness.open(await memoryStore());
    const [a, b] = await h.transaction((tx) => [
      tx.createTask(pair, { role: "first" }),
      tx.createTask(pair, { role: "second" }),
    ]);
    expect(b).toBe(a! + 1);
    expect(outcome(await done(h, b!))).toEqual({ status: "completed", result: "second" });
    expect(outcome(await done(h, a!))).toEqual({ status: "completed", result: "first resumed" });
    expect(caught).toHaveLength(1);
    expect(caught[0]).toBeInstanceOf(WaitCycle);
    await engineStillRuns(h);
    await h.close();
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
    const options: HarnessOptions = {
      tasks: [
        v2(() => {
          throw new Error("cannot upgrade");
        }),
        ping,
      ],
      onReport: (e) => reports.push(e),
    };
    const h = await Harness.open(image, options);
    await until(() => h.inspect().blocked.length === 1, { what: "blocked" });
    expect(h.inspect().blocked[0]).toMatchObject({ id: ids[0], reason: "migration_failed" });
    await engineStillRuns(h);
    await engineStillRuns(h);
    expect(reports).toHaveLength(1);
    expect(String((reports[0] as Error).message)).toMatch(/cannot upgrade/);
    const stored = await row(image, ids[0]!);
    expect(stored?.["version"]).toBe(1);
    expect((await h.getTask(ids[0]!))?.state.status).toBe("pending");
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
    const h = await Harness.open(image, { tasks: [proper] });
    expect(outcome(await done(h, ids[0]!))).toEqual({ status: "completed", result: "v2 ran" });
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

  test("a stored version newer than the definition blocks the task (task_too_old)", async () => {
    const { image, ids } = await storeWith([parked("evolving", 3)]);
    const h = await Harness.open(image, { tasks: [v2(undefined)] });
    await until(() => h.inspect().blocked.length === 1, { what: "blocked" });
    expect(h.inspect().blocked[0]).toMatchObject({ id: ids[0], kind: "evolving", reason: "task_too_old" });
    await engineStillRuns(h);
    expect((await h.getTask(ids[0]!))?.state.status).toBe("pending");
    expect((await row(image, ids[0]!))?.["version"]).toBe(3);
    await h.close();
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

describe("structured concurrency", () => {
  test("completing hold: a parent finished while its child is live is terminal only after the child", async () => {
    const gate = deferred();
    const child = single("held-child", async (_t, runtime) => {
      await gate.promise;
      await runtime.commit(() => complete("child"));
    });
    let childId: TaskId | undefined;
    const parent = single("holder", async (_t, runtime) => {
      await runtime.commit((tx) => {
        childId = tx.createTask(child, null);
        return complete("parent");
      });
    });
    const h = await Harness.open(await memoryStore());
    const id = await h.createTask(parent, null);
    await until(() => childId !== undefined && h.scheduler.active.has(childId), { what: "child running" });
    expect((await h.getTask(id))?.state).toEqual({
      status: "completing",
      outcome: { status: "completed", result: "parent" },
    });
    let childStatusWhenParentDone: string | undefined;
    const parentDone = h.waitForTask(id).then((r) => {
      childStatusWhenParentDone = h.session.records.tasks.get(childId!)?.state.status;
      return r;
    });
    await settle();
    expect(childStatusWhenParentDone).toBeUndefined();
    expect((await h.getTask(id))?.state.status).toBe("completing");
    gate.resolve();
    const final = await parentDone;
    expect(outcome(final)).toEqual({ status: "completed", result: "parent" });
    expect(childStatusWhenParentDone).toBe("terminal");
    await engineStillRuns(h);
    await h.close();
  });

  test("abort flows down: children abort first, then the parent's abort handler reads their outcomes", async () => {
    const log: string[] = [];
    let started = 0;
    const kid = defineTask<{ i: number }, Go, Json>({
      name: "kid",
      version: 1,
      initial: () => ({ phase: "go" }),
      phases: {
        go: async (_t, _r, signal) => {
          started++;
          await untilAborted(signal);
        },
      },
      abort: async (task, runtime) => {
        log.push(`abort kid ${task.input.i}`);
        await runtime.commit(() => ({
          status: "terminal",
          outcome: { status: "aborted", reason: "cascade" },
        }));
      },
    });
    type FamilyState = { phase: "spawn" } | { phase: "gather"; kids: TaskId[] };
    const family = defineTask<null, FamilyState, Json>({
      name: "family",
      version: 1,
      initial: () => ({ phase: "spawn" }),
      phases: {
        spawn: async (_t, runtime) => {
          await runtime.commit((tx) => {
            const kids = [0, 1].map((i) => tx.createTask(kid, { i }));
            return {
              status: "waiting",
              checkpoint: { phase: "gather", kids },
              on: kids,
              policy: "allSettled",
            };
          });
        },
        gather: async (_t, runtime) => void (await runtime.commit(() => complete("not aborted"))),
      },
      abort: async (task, runtime) => {
        const s = task.state;
        const kids = "checkpoint" in s && s.checkpoint.phase === "gather" ? s.checkpoint.kids : [];
        const outcomes = (await runtime.outcomes(kids)).map((o) => o.status);
        log.push(`abort parent sees ${outcomes.join(",")}`);
        await runtime.commit(() => ({
          status: "terminal",
          outcome: { status: "aborted", reason: "parent", result: outcomes },
        }));
      },
    });
    const h = await Harness.open(await memoryStore());
    const terminalOrder: TaskId[] = [];
    h.subscribe((change) => {
      for (const t of change.tasks) if (t.state.status === "terminal") terminalOrder.push(t.id);
    });
    const id = await h.createTask(family, null);
    await until(() => started === 2, { what: "kids running" });
    expect(await h.abortTask(id)).toBe("marked");
    const final = await done(h, id);
    expect(outcome(final)).toEqual({ status: "aborted", reason: "parent", result: ["aborted", "aborted"] });
    expect(log.slice(0, 2).sort()).toEqual(["abort kid 0", "abort kid 1"]);
    expect(log[2]).toBe("abort parent sees aborted,aborted");
    expect(terminalOrder).toHaveLength(3);
    expect(terminalOrder.at(-1)).toBe(id);
    for (const k of terminalOrder.slice(0, 2)) expect((await h.getTask(k))?.abortRequested).toBe(true);
    await engineStillRuns(h);
    await h.close();
  });

  test("background: a background task in a task-owned conversation survives the owner's abort", async () => {
    let bgId: TaskId | undefined;
    let fgId: TaskId | undefined;
    let conversationId: number | undefined;
    const bgGate = deferred();
    const background = single("bg", async (_t, runtime) => {
      await bgGate.promise;
      await runtime.commit(() => complete("bg finished"));
    });
    const foreground = parked("fg");
    type HostState = { phase: "setup" } | { phase: "hold" };
    const host = defineTask<null, HostState, Json>({
      name: "host",
      version: 1,
      initial: () => ({ phase: "setup" }),
      phases: {
        setup: async (_t, runtime) => {
          await runtime.commit((tx) => {
            const c = tx.createConversation({ kind: "task", taskId: runtime.taskId });
            conversationId = c.id;
            bgId = tx.createTask(background, null, {
              ownership: { kind: "conversation" },
              conversationId: c.id,
              background: true,
            });
            fgId = tx.createTask(foreground, null, {
              ownership: { kind: "conversation" },
              conversationId: c.id,
            });
            return { status: "running", checkpoint: { phase: "hold" } };
          });
        },
        hold: async (_t, _r, signal) => untilAborted(signal),
      },
      abort: async (_t, runtime) => {
        await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted", reason: "host" } }));
      },
    });
    const h = await Harness.open(await memoryStore());
    const id = await h.createTask(host, null);
    await until(() => h.inspect().running === 3, { what: "host, bg and fg running" });
    // The graph shows the owned conversation and both of its tasks under the host.
    const hostNode = h.taskGraph()[0]!.tasks.find((t) => t.id === id)!;
    expect(hostNode.conversations.map((c) => [c.id, c.tasks.map((t) => [t.id, t.background])])).toEqual([
      [
        conversationId,
        [
          [bgId, true],
          [fgId, false],
        ],
      ],
    ]);
    await h.abortTask(id);
    expect(outcome(await done(h, id))).toEqual({ status: "aborted", reason: "host" });
    expect(outcome(await done(h, fgId!))).toEqual({ status: "aborted", reason: "handler" });
    const bg = await h.getTask(bgId!);
    expect(bg?.state.status).toBe("running");
    expect(bg?.abortRequested).toBe(false);
    bgGate.resolve();
    expect(outcome(await done(h, bgId!))).toEqual({ status: "completed", result: "bg finished" });
    await engineStillRuns(h);
    await h.close();
  });

  test("memos: first writer wins, and memos are dropped when the task ends", async () => {
    const stored = deferred();
    const gate = deferred();
    let seen: Json[] = [];
    const def = single("memo", async (_t, runtime) => {
      const [a, b] = await Promise.all([runtime.memo("k", "first"), runtime.memo("k", "second")]);
      seen = [
        a ?? null,
        b ?? null,
        (await runtime.memo<string>("k")) ?? null,
        (await runtime.memo("k", "third")) ?? null,
      ];
      stored.resolve();
      await gate.promise;
      await runtime.commit(() => complete("memo done"));
    });
    const store = await memoryStore();
    const h = await Harness.open(store);
    const id = await h.createTask(def, null);
    await stored.promise;
    expect(seen).toEqual(["first", "first", "first", "first"]);
    expect(JSON.parse(String((await row(store, id))?.["memos"]))).toEqual({ k: "first" });
    expect((await h.getTask(id))?.memos).toEqual({ k: "first" });
    gate.resolve();
    const final = await done(h, id);
    expect(outcome(final)?.status).toBe("completed");
    expect(final.memos).toBeUndefined();
    expect((await row(store, id))?.["memos"]).toBeNull();
    await engineStillRuns(h);
    await h.close();
  });

  test("waitForTask(id, signal): aborting the signal cancels the wait, never the task", async () => {
    const gate = deferred();
    const def = single("patient", async (_t, runtime) => {
      await gate.promise;
      await runtime.commit(() => complete("finished anyway"));
    });
    const h = await Harness.open(await memoryStore());
    const id = await h.createTask(def, null);
    const controller = new AbortController();
    const wait = h.waitForTask(id, controller.signal);
    controller.abort();
    await expect(wait).rejects.toBeInstanceOf(WaitCancelled);
    expect((await h.getTask(id))?.abortRequested).toBe(false);
    gate.resolve();
    expect(outcome(await done(h, id))).toEqual({ status: "completed", result: "finished anyway" });
    await engineStillRuns(h);
    await h.close();
  });

  test("taskGraph shows the tree: a waiting parent with its children", async () => {
    const kid = parked("graph-kid");
    type ParentState = { phase: "spawn" } | { phase: "gather" };
    const parent = defineTask<null, ParentState, Json>({
      name: "graph-parent",
      version: 1,
      initial: () => ({ phase: "spawn" }),
      phases: {
        spawn: async (_t, runtime) => {
          await runtime.commit((tx) => {
            const kids = [tx.createTask(kid, null), tx.createTask(kid, null)];
            return { status: "waiting", checkpoint: { phase: "gather" }, on: kids, policy: "allSettled" };
          });
        },
        gather: async (_t, runtime) => void (await runtime.commit(() => complete("gathered"))),
      },
      abort: async (_t, runtime) =>
        void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
    });
    const h = await Harness.open(await memoryStore());
    const id = await h.createTask(parent, null);
    await until(() => h.inspect().running === 2, { what: "kids running" });
    const graph = h.taskGraph();
    expect(graph.map((c) => c.id)).toEqual([1]);
    expect(graph[0]!.tasks).toHaveLength(1);
    const node = graph[0]!.tasks[0]!;
    expect(node).toMatchObject({
      id,
      kind: "graph-parent",
      status: "waiting",
      waitingOn: [id + 1, id + 2],
      policy: "allSettled",
      phase: "gather",
    });
    expect(node.children.map((c) => [c.id, c.kind, c.status, c.phase])).toEqual([
      [id + 1, "graph-kid", "running", "go"],
      [id + 2, "graph-kid", "running", "go"],
    ]);
    await h.abortTask(id);
    expect(outcome(await done(h, id))?.status).toBe("aborted");
    expect(h.taskGraph()).toEqual([]);
    await engineStillRuns(h);
    await h.close();
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
            onOne?.();
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
    const replacement = make("B");
    const original = make("A", () => h.register(replacement));
    h = await Harness.open(await memoryStore(), { tasks: [original] });
    const id = await h.createTask(original, null);
    expect(outcome(await done(h, id))).toEqual({ status: "completed", result: "B" });
    expect(log).toEqual(["A:one", "B:two"]);
    await engineStillRuns(h);
    await h.close();
  });
});

describe("NotJson", () => {
  test("a task input holding NaN or a function is refused and nothing is committed", async () => {
    const store = await memoryStore();
    const h = await Harness.open(store);
    const def = single("strict", async (_t, runtime) => void (await runtime.commit(() => complete("ok"))));
    const commitsBefore = store.stats.commits;
    await expect(h.createTask(def, { x: Number.NaN } as unknown as Json)).rejects.toBeInstanceOf(NotJson);
    await expect(h.createTask(def, { f: () => 1 } as unknown as Json)).rejects.toBeInstanceOf(NotJson);
    expect(store.stats.commits).toBe(commitsBefore);
    // A document value is checked too (once, as the commit ends): the whole commit is refused.
    await expect(
      h.transaction((tx) => {
        tx.writeDoc(1, "strict-doc", { ok: true });
        tx.writeDoc(1, "strict-doc", { bad: Number.POSITIVE_INFINITY } as unknown as Json);
        tx.createTask(def, null);
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
    const row = await store.read((sql) => sql.get("SELECT value FROM documents WHERE name = 'frozen-doc'"));
    expect(JSON.parse(String(row?.["value"]))).toEqual(expected);
    expect((await h.session.entries(1)).map((e) => e.data)).toEqual([{ text: "x" }]);
    await h.close();
  });
});

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
    const id = await h.createTask(twoPhases, null, { start: { phase: "two" } });
    expect(outcome(await done(h, id))).toEqual({ status: "completed", result: "two" });
    expect(seen).toEqual(["two resumed=false"]);
    const before = store.stats.commits;
    await expect(
      h.createTask(twoPhases, null, { start: { phase: "three" } as unknown as TwoPhases }),
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
    const id = await h.createTask(twoPhases, null, { reserve: true });
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
    const id = await first.createTask(stuck, null);
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
});

describe("the invocation signal", () => {
  test("a handler that reads runtime.signal only after an abort mark sees it aborted with AbortRequested", async () => {
    const reached = deferred();
    const release = deferred();
    let seen: { aborted: boolean; reason: unknown } | undefined;
    const late = single(
      "late-signal",
      // Two parameters: the signal argument is never made; runtime.signal is made on first use.
      async (_t, runtime) => {
        reached.resolve();
        await release.promise;
        seen = { aborted: runtime.signal.aborted, reason: runtime.signal.reason };
        throw runtime.signal.reason;
      },
    );
    const h = await Harness.open(await memoryStore(), { tasks: [late] });
    const id = await h.createTask(late, null);
    await reached.promise;
    await h.abortTask(id);
    await settle(); // the drain that derives the mark signals the invocation
    release.resolve();
    expect(outcome(await done(h, id))).toEqual({ status: "aborted", reason: "handler" });
    expect(seen?.aborted).toBe(true);
    expect(seen?.reason).toBeInstanceOf(AbortRequested);
    await engineStillRuns(h);
    await h.close();
  });
});

describe("wake continuations", () => {
  type ParentPhases = { phase: "spawn" } | { phase: "join"; child: TaskId };
  const child = single("wake-child", async (_t, runtime) => {
    await runtime.commit(() => complete("child done"));
  });
  function parentWith(
    wake: ((tx: unknown, task: { state: { checkpoint: { child: TaskId } } }) => unknown) | undefined,
    log: string[],
  ) {
    return defineTask<null, ParentPhases, Json>({
      name: "wake-parent",
      version: 1,
      initial: () => ({ phase: "spawn" }),
      phases: {
        spawn: async (_t, runtime) => {
          await runtime.commit((tx) => {
            const id = tx.createTask(child, null);
            return {
              status: "waiting",
              checkpoint: { phase: "join", child: id },
              on: [id],
              policy: "allSettled",
            };
          });
        },
        join: async (_t, runtime) => {
          log.push("join handler");
          await runtime.commit(() => complete("by handler"));
        },
      },
      abort: async (_t, runtime) =>
        void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
      ...(wake ? { wake: { join: wake as never } } : {}),
    });
  }

  test("a wake lands in the commit that satisfied the wait; its handler never runs", async () => {
    const transactionsOf = async (parent: TaskDefinition<null, ParentPhases, Json>) => {
      const store = await memoryStore();
      const h = await Harness.open(store, { tasks: [parent, child] });
      const before = store.stats.transactions;
      const id = await h.createTask(parent, null);
      const finished = outcome(await done(h, id));
      await settle();
      const used = store.stats.transactions - before;
      await engineStillRuns(h);
      await h.close();
      return { finished, used };
    };
    const log: string[] = [];
    const woken = await transactionsOf(
      parentWith((tx, task) => {
        log.push("wake");
        const childRecord = (tx as { getTask(id: TaskId): TaskRecord | undefined }).getTask(
          task.state.checkpoint.child,
        );
        return complete(`woken after ${outcome(childRecord)?.status}`);
      }, log),
    );
    expect(woken.finished).toEqual({ status: "completed", result: "woken after completed" });
    expect(log).toEqual(["wake"]);
    const handled = await transactionsOf(parentWith(undefined, log));
    expect(handled.finished).toEqual({ status: "completed", result: "by handler" });
    expect(log).toEqual(["wake", "join handler"]);
    // The handler path commits the parent's outcome in a transaction of its own; the wake does not.
    expect(woken.used).toBe(handled.used - 1);
  });

  test("a wake returning undefined runs the handler; a throwing wake is reported and the handler runs", async () => {
    for (const kind of ["undefined", "throws"] as const) {
      const log: string[] = [];
      const reports: unknown[] = [];
      const parent = parentWith(() => {
        log.push("wake");
        if (kind === "throws") throw new Error("wake failed");
        return undefined;
      }, log);
      const h = await Harness.open(await memoryStore(), {
        tasks: [parent, child],
        onReport: (e) => reports.push(e),
      });
      const id = await h.createTask(parent, null);
      expect(outcome(await done(h, id))).toEqual({ status: "completed", result: "by handler" });
      expect(log).toEqual(["wake", "join handler"]);
      expect(reports.map((e) => (e as Error).message)).toEqual(kind === "throws" ? ["wake failed"] : []);
      await engineStillRuns(h);
      await h.close();
    }
  });

  test("a task reserved in the same pass as a throwing wake still runs once that pass is undone", async () => {
    // Two joiners wait on one gate task; when it ends, one pass reserves the first (no wake) and then
    // runs the second's wake, which throws: the pass's commit fails, so the first's registration
    // must go with it or that task would never start.
    const gateOpen = deferred();
    const gateTask = single("gate", async (_t, runtime) => {
      await gateOpen.promise;
      await runtime.commit(() => complete("open"));
    });
    const plain = joiner("plain");
    const throwing = joiner("throwing", {
      wake: () => {
        throw new Error("wake failed");
      },
    });
    const reports: unknown[] = [];
    const h = await Harness.open(await memoryStore(), { onReport: (e) => reports.push(e) });
    const gateId = await h.createTask(gateTask, null);
    const first = await h.createTask(plain, gateId);
    const second = await h.createTask(throwing, gateId);
    const waiting = (id: TaskId) => h.session.records.tasks.get(id)?.state.status === "waiting";
    await until(() => waiting(first) && waiting(second), { what: "both joiners waiting" });
    gateOpen.resolve();
    expect(outcome(await done(h, first))).toEqual({ status: "completed", result: "plain" });
    expect(outcome(await done(h, second))).toEqual({ status: "completed", result: "throwing" });
    expect(reports.map((e) => (e as Error).message)).toEqual(["wake failed"]);
    await h.close();
  });
});
