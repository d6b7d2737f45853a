/**
 * The core's guards on bad input, and the durability of an abort mark, one test each: what a
 * mutation pass showed no test would notice if it broke. Each bad call gets its typed error and the
 * engine keeps running.
 */
import { describe, expect, test } from "vitest";
import { Watch } from "../../worker/core/observe.ts";
import {
  CommitRefused,
  defineTask,
  type Frame,
  Harness,
  InvalidTransition,
  type Json,
  NotJson,
  OwnerNotLive,
  StoreClosed,
  type TaskId,
  type TaskRuntime,
  type Tx,
  WaitCancelled,
  WaitCycle,
} from "../../worker/index.ts";
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
  single,
  storeWith,
  untilAborted,
} from "./core-fixtures.ts";

describe("transactions", () => {
  test("a transaction used after its callback ended is refused", async () => {
    const h = await Harness.open(await memoryStore());
    let kept: Tx | undefined;
    await h.transaction((tx) => {
      kept = tx;
    });
    expect(() => kept!.createTask(ping, null)).toThrow(InvalidTransition);
    expect(() => kept!.writeDoc(1, "late", { x: 1 })).toThrow(InvalidTransition);
    expect(await h.transaction((tx) => tx.readDoc(1, "late"))).toBeUndefined();
    await engineStillRuns(h);
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
    const live = await h.createTask(parked("live-owner"), null);
    await until(() => h.inspect().running === 1, { what: "owner running" });
    await expect(
      h.transaction((tx) =>
        tx.createTask(ping, null, { ownership: { kind: "task", taskId: live }, background: true }),
      ),
    ).rejects.toBeInstanceOf(InvalidTransition);

    const id = await h.createTask(owner, null);
    await until(() => h.inspect().running === 2, { what: "both running" });
    expect(await h.abortTask(id)).toBe("marked");
    await expect(
      h.transaction((tx) => tx.createTask(ping, null, { ownership: { kind: "task", taskId: id } })),
    ).rejects.toBeInstanceOf(OwnerNotLive);
    abortGate.resolve();
    expect(outcome(await done(h, id))).toMatchObject({ status: "aborted" });
    await engineStillRuns(h);
    await h.close();
  });
});

describe("commits a handler may not make", () => {
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
    const id = await h.createTask(stubborn, null);
    await until(() => caught.length === 1, { what: "the unknown outcome refused" });
    await h.abortTask(id);
    expect(outcome(await done(h, id))).toEqual({ status: "aborted", reason: "done" });
    expect(caught.map((e) => [(e as Error).constructor.name, (e as Error).message])).toEqual([
      ["InvalidTransition", 'unknown outcome "exploded"'],
      ["InvalidTransition", "an abort handler may not wait"],
    ]);
    await engineStillRuns(h);
    await h.close();
  });

  test("a runtime kept after its invocation ended refuses commits and reads", async () => {
    let kept: TaskRuntime<Json, Go, Json> | undefined;
    const leaky = single("leaky", async (_t, runtime) => {
      kept = runtime;
      await runtime.commit(() => complete("ok"));
    });
    const h = await Harness.open(await memoryStore());
    const id = await h.createTask(leaky, null);
    expect(outcome(await done(h, id))).toEqual({ status: "completed", result: "ok" });
    await expect(kept!.commit(() => complete("again"))).rejects.toBeInstanceOf(CommitRefused);
    await expect(kept!.getTask(id)).rejects.toBeInstanceOf(CommitRefused);
    await expect(kept!.outcomes([id])).rejects.toBeInstanceOf(CommitRefused);
    await expect(kept!.memo("late", 1)).rejects.toBeInstanceOf(CommitRefused);
    expect(outcome(await h.getTask(id))).toEqual({ status: "completed", result: "ok" });
    await engineStillRuns(h);
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
    const id = await h.createTask(memoist, null);
    expect(outcome(await done(h, id))).toEqual({ status: "completed", result: "nothing stored" });
    expect(caught[0]).toBeInstanceOf(NotJson);
    await engineStillRuns(h);
    await h.close();
  });
});

describe("waits", () => {
  test("waitForTask with a signal that is already aborted rejects at once with WaitCancelled", async () => {
    const h = await Harness.open(await memoryStore());
    const id = await h.createTask(parked("forever"), null);
    const controller = new AbortController();
    controller.abort();
    await expect(h.waitForTask(id, controller.signal)).rejects.toBeInstanceOf(WaitCancelled);
    await engineStillRuns(h);
    await h.close();
  });

  test("failFast: an aborted child (not only a failed one) aborts its siblings and wakes the parent", async () => {
    type ParentState = { phase: "spawn" } | { phase: "joined"; kids: TaskId[] };
    const kid = parked("kid");
    const parent = defineTask<null, ParentState, string[]>({
      name: "parent",
      version: 1,
      initial: () => ({ phase: "spawn" }),
      phases: {
        spawn: async (_t, runtime) => {
          await runtime.commit((tx) => {
            const kids = [tx.createTask(kid, null), tx.createTask(kid, null)];
            return { status: "waiting", checkpoint: { phase: "joined", kids }, on: kids, policy: "failFast" };
          });
        },
        joined: async (task, runtime) => {
          const outcomes = await runtime.outcomes(task.state.checkpoint.kids);
          await runtime.commit(() => ({
            status: "terminal",
            outcome: { status: "completed", result: outcomes.map((o) => o.status) },
          }));
        },
      },
      abort: async (_t, runtime) =>
        void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
    });
    const h = await Harness.open(await memoryStore());
    const id = await h.createTask(parent, null);
    await until(() => h.inspect().running === 2, { what: "both kids running" });
    const kids = (await h.tasks({ kind: "kid" })).map((t) => t.id);
    expect(await h.abortTask(kids[0]!)).toBe("marked");
    expect(outcome(await done(h, id))).toEqual({ status: "completed", result: ["aborted", "aborted"] });
    await engineStillRuns(h);
    await h.close();
  });
});

describe("wait cycles through ownership", () => {
  test("a task in a conversation owned by task X may not wait on X: it would wait on its own owner", async () => {
    const caught: unknown[] = [];
    const waiter = single("waits-on-owner", async (task, runtime) => {
      try {
        await runtime.commit(() => ({
          status: "waiting",
          checkpoint: { phase: "go" },
          on: [task.input as number],
          policy: "allSettled",
        }));
      } catch (error) {
        caught.push(error);
        await runtime.commit(() => complete("refused"));
      }
    });
    const h = await Harness.open(await memoryStore());
    const x = await h.createTask(parked("conversation-owner"), null);
    await until(() => h.inspect().running === 1, { what: "owner running" });
    const y = await h.transaction((tx) => {
      const conversation = tx.createConversation({ kind: "task", taskId: x });
      return tx.createTask(waiter, x, {
        ownership: { kind: "conversation" },
        conversationId: conversation.id,
      });
    });
    expect(outcome(await done(h, y))).toEqual({ status: "completed", result: "refused" });
    expect(caught[0]).toBeInstanceOf(WaitCycle);
    await h.abortTask(x);
    await done(h, x);
    await engineStillRuns(h);
    await h.close();
  });

  test("a wait that closes a cycle through an owner's live child is a WaitCycle", async () => {
    // B owns C; C waits on A; then A waits on B: A -> B -> (B's live child) C -> A.
    const cWaiting = deferred();
    const caught: unknown[] = [];
    const a = single("cycle-a", async (_task, runtime) => {
      await cWaiting.promise;
      try {
        // A and B are created one after the other in one transaction: B's id follows A's.
        await runtime.commit(() => ({
          status: "waiting",
          checkpoint: { phase: "go" },
          on: [runtime.taskId + 1],
          policy: "allSettled",
        }));
      } catch (error) {
        caught.push(error);
        await runtime.commit(() => complete("refused"));
      }
    });
    const c = single("cycle-c", async (task, runtime) => {
      const target = task.input as number;
      if ((await runtime.getTask(target))?.state.status === "terminal") {
        await runtime.commit(() => complete("c done"));
        return;
      }
      await runtime.commit(() => ({
        status: "waiting",
        checkpoint: { phase: "go" },
        on: [target],
        policy: "allSettled",
      }));
      cWaiting.resolve();
    });
    const b = single("cycle-b", async (task, runtime, signal) => {
      await runtime.commit((tx) => {
        tx.createTask(c, task.input);
        return { status: "running", checkpoint: { phase: "go" } };
      });
      await untilAborted(signal);
    });
    const h = await Harness.open(await memoryStore());
    const [aId, bId] = await h.transaction((tx) => {
      const first = tx.createTask(a, null);
      return [first, tx.createTask(b, first)] as const;
    });
    expect(bId).toBe(aId + 1);
    expect(outcome(await done(h, aId))).toEqual({ status: "completed", result: "refused" });
    expect(caught[0]).toBeInstanceOf(WaitCycle);
    await h.abortTask(bId);
    await done(h, bId);
    expect((await h.tasks({ kind: "cycle-c" })).map(outcome)).toEqual([
      { status: "completed", result: "c done" },
    ]);
    await engineStillRuns(h);
    await h.close();
  });
});

describe("an abort mark is durable", () => {
  test("a task marked for abort whose handler had not finished runs its abort handler after a restart, not its phase", async () => {
    const handlerStarted = deferred();
    const log: string[] = [];
    const makeDef = (holdAbort: boolean) =>
      single(
        "slow-abort",
        async (_t, _r, signal) => {
          log.push("phase");
          await untilAborted(signal);
        },
        {
          abort: async (_t, runtime) => {
            log.push("abort");
            if (holdAbort) {
              handlerStarted.resolve();
              await new Promise(() => undefined);
            }
            await runtime.commit(() => ({
              status: "terminal",
              outcome: { status: "aborted", reason: "cleaned" },
            }));
          },
        },
      );
    const store = await memoryStore();
    const h = await Harness.open(store, { tasks: [makeDef(true)] });
    const id = await h.createTask(makeDef(true), null);
    await until(() => log.includes("phase"), { what: "phase running" });
    expect(await h.abortTask(id)).toBe("marked");
    await handlerStarted.promise;
    const image = store.image();
    log.length = 0;

    const h2 = await Harness.open(await memoryStore(image), { tasks: [makeDef(false)] });
    expect((await h2.getTask(id))?.abortRequested).toBe(true);
    expect(outcome(await done(h2, id))).toEqual({ status: "aborted", reason: "cleaned" });
    expect(log).toEqual(["abort"]);
    await engineStillRuns(h2);
    await h2.close();
  });
});

describe("ownership and stored rows", () => {
  test("a parent that fails while its child runs aborts the child before it ends failed itself", async () => {
    type Step = { phase: "spawn" } | { phase: "fail"; child: TaskId };
    const child = parked("child");
    const parent = defineTask<null, Step, Json>({
      name: "failing-parent",
      version: 1,
      initial: () => ({ phase: "spawn" }),
      phases: {
        spawn: async (_t, runtime) => {
          await runtime.commit((tx) => ({
            status: "running",
            checkpoint: { phase: "fail", child: tx.createTask(child, null) },
          }));
        },
        fail: async (_t, runtime) => {
          await runtime.commit(() => ({
            status: "terminal",
            outcome: { status: "failed", error: { message: "gave up" } },
          }));
        },
      },
      abort: async (_t, runtime) =>
        void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
    });
    const h = await Harness.open(await memoryStore());
    const id = await h.createTask(parent, null);
    expect(outcome(await done(h, id))).toEqual({ status: "failed", error: { message: "gave up" } });
    const [kid] = await h.tasks({ kind: "child" });
    expect(outcome(kid)).toMatchObject({ status: "aborted" });
    await engineStillRuns(h);
    await h.close();
  });

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
  test("a store that takes one commit per transaction gets exactly that, however many commits arrive at once", async () => {
    const store = await memoryStore(undefined, { groupCommit: false });
    const h = await Harness.open(store);
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
    const old = await h.createTask(ping, null);
    expect(outcome(await done(h, old))).toEqual({ status: "completed", result: "pong" });
    const image = store.image();
    await h.close();

    const h2 = await Harness.open(await memoryStore(image), { tasks: [ping] });
    const id = await h2.createTask(joiner("joiner", { result: (o) => o?.status ?? "none" }), old);
    expect(outcome(await done(h2, id))).toEqual({ status: "completed", result: "completed" });
    await engineStillRuns(h2);
    await h2.close();
  });
});

describe("boundaries a mutation pass found untested", () => {
  test("a watch holds exactly its limit of undelivered frames; one more collapses them into one replace", () => {
    const watch = new Watch(0, 3);
    for (let seq = 1; seq <= 3; seq++) watch.push({ seq, value: seq, ops: [] });
    expect([watch.pending, watch.collapsed]).toEqual([3, 0]);
    watch.push({ seq: 4, value: 4, ops: [] });
    expect([watch.pending, watch.collapsed]).toEqual([1, 3]);
    const frames: Frame<number>[] = [];
    watch.start((frame) => void frames.push(frame));
    return until(() => frames.length === 1, { what: "the replace frame delivered" }).then(() => {
      expect(frames[0]).toEqual({ seq: 4, value: 4, ops: [{ op: "replace" }] });
      expect(watch.value).toBe(4);
    });
  });

  test("a phase whose invocation is already signalled cannot start a wait: it is cancelled at once", async () => {
    const waited: unknown[] = [];
    const h = await Harness.open(await memoryStore());
    const other = await h.createTask(parked("other"), null);
    const waiter = single("late-waiter", async (_t, runtime, signal) => {
      await untilAborted(signal).catch(() => undefined);
      // The abort mark signalled this invocation; a wait begun now must not park on `other`.
      waited.push(await runtime.waitForTask(other).catch((error: unknown) => error));
    });
    const id = await h.createTask(waiter, null);
    await until(() => h.inspect().running === 2, { what: "both running" });
    await h.abortTask(id);
    // The phase returned, so its abort handler could run.
    expect(outcome(await done(h, id))).toEqual({ status: "aborted", reason: "handler" });
    expect(waited).toHaveLength(1);
    expect(waited[0]).toBeInstanceOf(WaitCancelled);
    await h.abortTask(other);
    await done(h, other);
    await h.close();
  });

  test("after another engine bumps the owner epoch, the fenced line refuses its next write and stops", async () => {
    const store = await memoryStore();
    expect(await store.fence()).toBe(1);
    await store.commit((sql) => sql.run("INSERT INTO meta (key, value) VALUES ('mine', 'before')"));
    // What a newcomer's fence writes into the same database.
    await store.commit((sql) => sql.run("UPDATE meta SET value = '2' WHERE key = 'epoch'"));
    const late = store.commit((sql) => sql.run("UPDATE meta SET value = 'after' WHERE key = 'mine'"));
    await expect(late).rejects.toThrow(StoreClosed);
    await expect(late).rejects.toThrow(/another engine has taken over/);
    await expect(store.read((sql) => sql.get("SELECT 1 AS one"))).rejects.toThrow(StoreClosed);
    const newcomer = await memoryStore(store.image());
    const meta = await newcomer.read((sql) => sql.all("SELECT key, value FROM meta ORDER BY key"));
    expect(meta).toEqual([
      { key: "epoch", value: "2" },
      { key: "mine", value: "before" },
    ]);
    expect(await newcomer.fence()).toBe(3);
    await newcomer.close();
  });
});
