/**
 * Ownership: a parent is terminal only after its children, background tasks outlive their
 * owner's abort, a failing parent aborts its live child, and no wait may close a cycle through an
 * owner.
 */
import { describe, expect, test } from "vitest";
import { internals } from "../../../worker/core/internals.ts";
import {
  type ConversationId,
  defineTask,
  Harness,
  type Json,
  type TaskId,
  type TaskRecord,
  type Tx,
  WaitCycle,
} from "../../../worker/index.ts";
import { deferred, memoryStore, until, within } from "../../../worker/testing.ts";
import {
  complete,
  done,
  engineStillRuns,
  outcome,
  parked,
  running,
  settle,
  single,
  untilAborted,
  waitsOnOwnedChild,
} from "./fixtures.ts";

/**
 * A task that waits (allSettled) on the task `target` names, once `ready` settles; a refused wait is
 * pushed to `caught` and the task completes with "refused".
 */
function waitsOrIsRefused(
  name: string,
  caught: unknown[],
  target: (task: { readonly input: unknown }, runtime: { readonly taskId: TaskId }) => number,
  ready?: Promise<unknown>,
) {
  return single(name, async (task, runtime) => {
    await ready;
    try {
      await runtime.commit(() => ({
        status: "waiting",
        checkpoint: { phase: "go" },
        on: [target(task, runtime) as TaskId],
        policy: "allSettled",
      }));
    } catch (error) {
      caught.push(error);
      await runtime.commit(() => complete("refused"));
    }
  });
}

describe("structured concurrency", () => {
  test("writes split at the hold: the finishing commit's own entry lands at the hold; the terminal record, the task's document retirement and its waiters come in the final commit", async () => {
    const gate = deferred();
    const child = single("split-child", async (_t, runtime) => {
      await gate.promise;
      await runtime.commit(() => complete("child"));
    });
    const scope = (taskId: TaskId) => ({ kind: "task" as const, taskId });
    const parent = single("splitter", async (_t, runtime) => {
      await runtime.commit((tx) => {
        tx.createTask(child, null, { ownership: { kind: "task", taskId: runtime.taskId } });
        tx.writeDoc(scope(runtime.taskId), "scratch", { kept: true });
        return { status: "running", checkpoint: { phase: "go" } };
      });
      await runtime.commit((tx) => {
        tx.appendEntry(runtime.conversationId, { kind: "app.result", data: "written at the hold" });
        return complete("parent");
      });
    });
    let clock = 1000;
    const h = await Harness.open(await memoryStore(), { tasks: [parent, child], now: () => clock });
    let waiterResolved = false;
    const id = await h.createTask(parent, null, { ownership: { kind: "conversation" } });
    const waiter = h.waitForTask(id).then((r) => {
      waiterResolved = true;
      return r;
    });
    await until(() => internals(h).session.records.tasks.get(id)?.state.status === "completing", {
      what: "parent held",
    });
    // At the hold: the entry is stored; the document lives; the waiter waits.
    expect((await h.entries(1)).filter((e) => e.kind === "app.result").map((e) => e.data)).toEqual([
      "written at the hold",
    ]);
    expect(await h.doc(scope(id), "scratch")).toEqual({ kept: true });
    await settle();
    expect(waiterResolved).toBe(false);
    // The terminal time is the final commit's too (break 30M: endedAt written at the hold passed).
    expect(internals(h).session.records.tasks.get(id)?.endedAt).toBeUndefined();
    clock = 2000;
    const finals: { tasks: string[]; retired: boolean; entries: number }[] = [];
    h.subscribe((change) => {
      if (!change.tasks.some((t) => t.id === id)) return;
      finals.push({
        tasks: change.tasks.filter((t) => t.id === id).map((t) => t.state.status),
        retired: change.docs.some((d) => d.name === "scratch" && d.value === undefined),
        entries: change.entries.length,
      });
    });
    gate.resolve();
    const final = await waiter;
    expect(outcome(final)).toEqual({ status: "completed", result: "parent" });
    expect(final.endedAt).toBe(2000);
    // One final commit: the terminal record with the document's retirement, no entry again.
    expect(finals).toEqual([{ tasks: ["terminal"], retired: true, entries: 0 }]);
    expect(await h.doc(scope(id), "scratch")).toBeUndefined();
    await engineStillRuns(h);
    await h.close();
  });

  test("writes split at the hold across a reopen: a task held at a crash keeps its document live, and the final commit after the reopen retires it with the terminal record", async () => {
    const childRan = deferred();
    const stuckChild = single("reopened-split-child", async (_t, _r, signal) => {
      childRan.resolve();
      await untilAborted(signal);
    });
    const scope = (taskId: TaskId) => ({ kind: "task" as const, taskId });
    const parent = single("reopened-splitter", async (_t, runtime) => {
      await runtime.commit((tx) => {
        tx.createTask(stuckChild, null, { ownership: { kind: "task", taskId: runtime.taskId } });
        tx.writeDoc(scope(runtime.taskId), "scratch", { kept: true });
        return { status: "running", checkpoint: { phase: "go" } };
      });
      await runtime.commit(() => complete("parent"));
    });
    const store = await memoryStore();
    const first = await Harness.open(store, { tasks: [parent, stuckChild] });
    const id = await first.createTask(parent, null, { ownership: { kind: "conversation" } });
    await childRan.promise;
    await until(() => internals(first).session.records.tasks.get(id)?.state.status === "completing", {
      what: "parent held",
    });
    // The crash: the parent held, its child running, its document live.
    const image = await memoryStore(store.image());
    await first.close();
    // Under the next engine the child finishes at once.
    const finishing = single("reopened-split-child", async (_t, runtime) => {
      await runtime.commit(() => complete("child"));
    });
    const second = await Harness.open(image, { tasks: [parent, finishing] });
    const finals: { status: string; retired: boolean }[] = [];
    second.subscribe((change) => {
      for (const t of change.tasks.filter((t) => t.id === id))
        finals.push({
          status: t.state.status,
          retired: change.docs.some((d) => d.name === "scratch" && d.value === undefined),
        });
    });
    expect(outcome(await done(second, id))).toEqual({ status: "completed", result: "parent" });
    expect(finals).toEqual([{ status: "terminal", retired: true }]);
    expect(await second.doc(scope(id), "scratch")).toBeUndefined();
    await engineStillRuns(second);
    await second.close();
  });

  test("completing hold: a parent finished while its child is live is terminal only after the child; until then waiters, idle waits, inspection and the task graph see it live", async () => {
    const gate = deferred();
    const child = single("held-child", async (_t, runtime) => {
      await gate.promise;
      await runtime.commit(() => complete("child"));
    });
    let childId: TaskId | undefined;
    // The child is created before the finishing commit (a task cannot own work created in it).
    const parent = single("holder", async (_t, runtime) => {
      await runtime.commit((tx) => {
        childId = tx.createTask(child, null, { ownership: { kind: "task", taskId: runtime.taskId } });
        return { status: "running", checkpoint: { phase: "go" } };
      });
      await runtime.commit(() => complete("parent"));
    });
    const h = await Harness.open(await memoryStore());
    const id = await h.createTask(parent, null, { ownership: { kind: "conversation" } });
    // A wait begun before the hold: the commit that holds it completing settles nothing (spec §2.2
    // SettledTask is a terminal record); it resolves with the terminal record.
    let earlySettled: TaskRecord | undefined;
    const earlyWait = h.waitForTask(id).then((r) => {
      earlySettled = r;
    });
    await until(() => childId !== undefined && internals(h).scheduler.active.has(childId), {
      what: "child running",
    });
    expect((await h.getTask(id))?.state).toEqual({
      status: "completing",
      outcome: { status: "completed", result: "parent" },
    });
    // A durable waiter too (draw 32d: a task's wait on the held task satisfied at the hold passed
    // this test, whose waiters were the harness's): begun during the hold, it wakes only after the final commit.
    let watcherRuns = 0;
    let heldStatusWhenWatcherWoke: string | undefined;
    const watcher = single("held-watcher", async (task, runtime) => {
      if (++watcherRuns === 1) {
        await runtime.commit(() => ({
          status: "waiting",
          checkpoint: { phase: "go" },
          on: [task.input as number],
          policy: "allSettled",
        }));
        return;
      }
      heldStatusWhenWatcherWoke = (await h.getTask(task.input as number))?.state.status;
      await runtime.commit(() => complete("woke"));
    });
    const watcherId = await h.createTask(watcher, id, { ownership: { kind: "conversation" } });
    let childStatusWhenParentDone: string | undefined;
    const parentDone = h.waitForTask(id).then((r) => {
      childStatusWhenParentDone = internals(h).session.records.tasks.get(childId!)?.state.status;
      return r;
    });
    // Idle waits, the harness's and its conversation's (ordinary traversal), count it as live.
    const idle: string[] = [];
    const harnessIdle = h.waitForIdle().then(() => idle.push("harness"));
    const conversationIdle = h.waitForConversationIdle(1).then(() => idle.push("conversation"));
    await settle();
    expect(childStatusWhenParentDone).toBeUndefined();
    expect(earlySettled).toBeUndefined();
    expect(idle).toEqual([]);
    expect((await h.getTask(id))?.state.status).toBe("completing");
    // Inspection and the task graph show it live, as completing.
    expect(h.inspect().tasks.find((t) => t.record.id === id)?.state).toEqual({ kind: "completing" });
    expect(h.taskGraph().tasks[String(id)]?.state).toEqual({ status: "completing", outcome: "completed" });
    expect(watcherRuns).toBe(1);
    expect((await h.getTask(watcherId))?.state.status).toBe("waiting");
    gate.resolve();
    const final = await parentDone;
    expect(outcome(await done(h, watcherId))).toEqual({ status: "completed", result: "woke" });
    expect(heldStatusWhenWatcherWoke).toBe("terminal");
    expect(outcome(final)).toEqual({ status: "completed", result: "parent" });
    expect(childStatusWhenParentDone).toBe("terminal");
    await earlyWait;
    expect(earlySettled).toEqual(final);
    expect(earlySettled?.state.status).toBe("terminal");
    // A held completed outcome is no cancellation intent (rule 3): the child finished normally, unmarked.
    const finishedChild = await h.getTask(childId!);
    expect(outcome(finishedChild)).toEqual({ status: "completed", result: "child" });
    expect(finishedChild?.abortRequested).toBe(false);
    await Promise.all([harnessIdle, conversationIdle]);
    expect(idle.sort()).toEqual(["conversation", "harness"]);
    expect(h.inspect().tasks.some((t) => t.record.id === id)).toBe(false);
    expect(h.taskGraph().tasks[String(id)]).toBeUndefined();
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
    const id = await h.createTask(host, null, { ownership: { kind: "conversation" } });
    await until(() => running(h) === 3, { what: "host, bg and fg running" });
    // The graph shows the owned conversation under the host, and both of its tasks in it.
    const graph = h.taskGraph();
    expect(graph.tasks[String(id)]?.conversations).toEqual([conversationId]);
    const inOwned = Object.values(graph.tasks).filter((t) => t.conversationId === conversationId);
    expect(inOwned.map((t) => [t.id, t.background, t.owner])).toEqual([
      [bgId, true, undefined],
      [fgId, false, undefined],
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
});

describe("ordinary owned work (spec §5.5)", () => {
  test("is transitive through owned tasks and owned conversations and stops at a background task: the owner holds until a grandchild and a task in its child's conversation end, not until a background task's child does", async () => {
    const gates = { f: deferred(), g: deferred(), k: deferred(), b2: deferred() };
    const ids: Record<string, TaskId> = {};
    const gated = (name: string, gate: { promise: Promise<void> }) =>
      single(name, async (_t, runtime) => {
        await gate.promise;
        await runtime.commit(() => complete(name));
      });
    const g = gated("g", gates.g);
    const k = gated("k", gates.k);
    const b2 = gated("b2", gates.b2);
    // F owns a child G and a conversation D holding K: both are F's ordinary owned work, so H's too.
    const f = single("f", async (_t, runtime) => {
      await runtime.commit((tx) => {
        ids.g = tx.createTask(g, null, { ownership: { kind: "task", taskId: runtime.taskId } });
        const d = tx.createConversation({ kind: "task", taskId: runtime.taskId });
        ids.k = tx.createTask(k, null, { ownership: { kind: "conversation" }, conversationId: d.id });
        return { status: "running", checkpoint: { phase: "go" } };
      });
      await gates.f.promise;
      await runtime.commit(() => complete("f"));
    });
    // B is background: it and its child B2 are no ordinary owned work of H.
    const b = single("b", async (_t, runtime) => {
      await runtime.commit((tx) => {
        ids.b2 = tx.createTask(b2, null, { ownership: { kind: "task", taskId: runtime.taskId } });
        return { status: "running", checkpoint: { phase: "go" } };
      });
      await runtime.commit(() => complete("b"));
    });
    // H owns a conversation C holding F and the background B, then completes.
    const hTask = single("h", async (_t, runtime) => {
      await runtime.commit((tx) => {
        const c = tx.createConversation({ kind: "task", taskId: runtime.taskId });
        ids.f = tx.createTask(f, null, { ownership: { kind: "conversation" }, conversationId: c.id });
        ids.b = tx.createTask(b, null, {
          ownership: { kind: "conversation" },
          conversationId: c.id,
          background: true,
        });
        return { status: "running", checkpoint: { phase: "go" } };
      });
      await runtime.commit(() => complete("h"));
    });
    const h = await Harness.open(await memoryStore());
    ids.h = await h.createTask(hTask, null, { ownership: { kind: "conversation" } });
    const status = (name: string) => internals(h).session.records.tasks.get(ids[name]!)?.state.status;
    await until(() => running(h) === 4, { what: "f, g, k and b2 running" });
    await settle();
    expect(status("h")).toBe("completing");
    expect(status("b")).toBe("completing");
    gates.f.resolve();
    await until(() => status("f") === "completing", { what: "f holding" });
    gates.g.resolve();
    expect(outcome(await done(h, ids.g!))).toEqual({ status: "completed", result: "g" });
    await settle();
    // K, in the conversation F owns, still holds F, and through it H.
    expect(status("f")).toBe("completing");
    expect(status("h")).toBe("completing");
    gates.k.resolve();
    expect(outcome(await done(h, ids.h!))).toEqual({ status: "completed", result: "h" });
    expect(outcome(await h.getTask(ids.f!))).toEqual({ status: "completed", result: "f" });
    // H finished while the background B still holds for its own child B2.
    expect(status("b")).toBe("completing");
    expect(status("b2")).toBe("running");
    gates.b2.resolve();
    expect(outcome(await done(h, ids.b!))).toEqual({ status: "completed", result: "b" });
    await h.close();
  });

  test("holds for a child that is itself completing for a grandchild, and for a task waiting in an owned conversation", async () => {
    // Break 28C: the owner released with a completing child, or with a waiting task in its owned
    // conversation, passed the test above (its held work was running or in a conversation).
    const gates = { grand: deferred(), z: deferred() };
    const ids: Record<string, TaskId> = {};
    const grand = single("grand", async (_t, runtime) => {
      await gates.grand.promise;
      await runtime.commit(() => complete("grand"));
    });
    const child = single("child", async (_t, runtime) => {
      await runtime.commit((tx) => {
        ids.grand = tx.createTask(grand, null, { ownership: { kind: "task", taskId: runtime.taskId } });
        return { status: "running", checkpoint: { phase: "go" } };
      });
      await runtime.commit(() => complete("child"));
    });
    const owner = single("owner", async (_t, runtime) => {
      await runtime.commit((tx) => {
        ids.child = tx.createTask(child, null, { ownership: { kind: "task", taskId: runtime.taskId } });
        return { status: "running", checkpoint: { phase: "go" } };
      });
      await runtime.commit(() => complete("owner"));
    });
    const z = single("z", async (_t, runtime) => {
      await gates.z.promise;
      await runtime.commit(() => complete("z"));
    });
    let woken = false;
    const waiter = single("waiter", async (task, runtime) => {
      if (woken) return void (await runtime.commit(() => complete("waiter")));
      woken = true;
      await runtime.commit(() => ({
        status: "waiting",
        checkpoint: { phase: "go" },
        on: [task.input as number],
        policy: "allSettled",
      }));
    });
    const host = single("host", async (_t, runtime) => {
      await runtime.commit((tx) => {
        const d = tx.createConversation({ kind: "task", taskId: runtime.taskId });
        ids.waiter = tx.createTask(waiter, ids.z!, {
          ownership: { kind: "conversation" },
          conversationId: d.id,
        });
        return { status: "running", checkpoint: { phase: "go" } };
      });
      await runtime.commit(() => complete("host"));
    });
    const h = await Harness.open(await memoryStore());
    const status = (name: string) => internals(h).session.records.tasks.get(ids[name]!)?.state.status;
    ids.owner = await h.createTask(owner, null, { ownership: { kind: "conversation" } });
    await until(() => status("child") === "completing", { what: "the child holding for its grandchild" });
    await settle();
    expect(status("owner")).toBe("completing");
    gates.grand.resolve();
    expect(outcome(await done(h, ids.owner!))).toEqual({ status: "completed", result: "owner" });
    expect(outcome(await h.getTask(ids.child!))).toEqual({ status: "completed", result: "child" });

    ids.z = await h.createTask(z, null, { ownership: { kind: "conversation" } });
    ids.host = await h.createTask(host, null, { ownership: { kind: "conversation" } });
    await until(() => status("waiter") === "waiting", { what: "the waiter waiting" });
    await settle();
    expect(status("host")).toBe("completing");
    gates.z.resolve();
    expect(outcome(await done(h, ids.host!))).toEqual({ status: "completed", result: "host" });
    expect(outcome(await h.getTask(ids.waiter!))).toEqual({ status: "completed", result: "waiter" });
    await h.close();
  });
});

describe("ownership and stored rows", () => {
  test("a parent that fails while its child runs holds its failed outcome, which aborts the child; it ends failed only after the child is terminal", async () => {
    type Step = { phase: "spawn" } | { phase: "fail"; child: TaskId };
    const abortGate = deferred();
    const child = single("child", async (_t, _r, signal) => untilAborted(signal), {
      abort: async (_t, runtime) => {
        await abortGate.promise;
        await runtime.commit(() => ({
          status: "terminal",
          outcome: { status: "aborted", reason: "handler" },
        }));
      },
    });
    const parent = defineTask<null, Step, Json>({
      name: "failing-parent",
      version: 1,
      initial: () => ({ phase: "spawn" }),
      phases: {
        spawn: async (_t, runtime) => {
          await runtime.commit((tx) => ({
            status: "running",
            checkpoint: {
              phase: "fail",
              child: tx.createTask(child, null, { ownership: { kind: "task", taskId: runtime.taskId } }),
            },
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
    const id = await h.createTask(parent, null, { ownership: { kind: "conversation" } });
    // The failed outcome holds (spec §5.5 rule 3): cancellation intent, so the child is marked; its
    // abort handler is still running, so the parent stays completing.
    await until(() => internals(h).session.records.tasks.get(id)?.state.status === "completing", {
      what: "parent held",
    });
    expect((await h.getTask(id))?.state).toEqual({
      status: "completing",
      outcome: { status: "failed", error: { message: "gave up" } },
    });
    const [marked] = await h.tasks({ kind: "child" });
    await until(() => internals(h).session.records.tasks.get(marked!.id)?.abortRequested === true, {
      what: "child marked",
    });
    expect((await h.getTask(marked!.id))?.state.status).not.toBe("terminal");
    let childWhenParentDone: string | undefined;
    const parentDone = h.waitForTask(id).then((r) => {
      childWhenParentDone = internals(h).session.records.tasks.get(marked!.id)?.state.status;
      return r;
    });
    await settle();
    expect(childWhenParentDone).toBeUndefined();
    abortGate.resolve();
    expect(outcome(await parentDone)).toEqual({ status: "failed", error: { message: "gave up" } });
    expect(childWhenParentDone).toBe("terminal");
    const [kid] = await h.tasks({ kind: "child" });
    expect(outcome(kid)).toEqual({ status: "aborted", reason: "handler" });
    await engineStillRuns(h);
    await h.close();
  });

  test.each([
    ["aborted", { status: "aborted", reason: "gave up" }],
    ["faulted", { status: "faulted", error: { message: "phase bug" } }],
  ] as const)(
    "a held %s outcome is cancellation intent like a failed one: the live child is marked, the parent ends only after it",
    async (how, expected) => {
      const abortGate = deferred();
      const child = single(`intent-child-${how}`, async (_t, _r, signal) => untilAborted(signal), {
        abort: async (_t, runtime) => {
          await abortGate.promise;
          await runtime.commit(() => ({
            status: "terminal",
            outcome: { status: "aborted", reason: "handler" },
          }));
        },
      });
      type Step = { phase: "spawn" } | { phase: "end" };
      const parent = defineTask<null, Step, Json>({
        name: `intent-parent-${how}`,
        version: 1,
        initial: () => ({ phase: "spawn" }),
        phases: {
          spawn: async (_t, runtime) => {
            await runtime.commit((tx) => {
              tx.createTask(child, null, { ownership: { kind: "task", taskId: runtime.taskId } });
              return { status: "running", checkpoint: { phase: "end" } };
            });
          },
          // A phase that ends the task aborted itself, or one whose bug the scheduler writes as faulted.
          end: async (_t, runtime) => {
            if (how === "faulted") throw new Error("phase bug");
            await runtime.commit(() => ({
              status: "terminal",
              outcome: { status: "aborted", reason: "gave up" },
            }));
          },
        },
        abort: async (_t, runtime) =>
          void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
      });
      const h = await Harness.open(await memoryStore());
      const id = await h.createTask(parent, null, { ownership: { kind: "conversation" } });
      await until(() => internals(h).session.records.tasks.get(id)?.state.status === "completing", {
        what: "parent held",
      });
      expect((await h.getTask(id))?.state).toEqual({ status: "completing", outcome: expected });
      const [kid] = await h.tasks({ kind: `intent-child-${how}` });
      // The held outcome alone marks the child: the parent itself carries no abort mark.
      await until(() => internals(h).session.records.tasks.get(kid!.id)?.abortRequested === true, {
        what: "child marked",
      });
      expect((await h.getTask(id))?.abortRequested).toBe(false);
      let childWhenParentDone: string | undefined;
      const parentDone = h.waitForTask(id).then((r) => {
        childWhenParentDone = internals(h).session.records.tasks.get(kid!.id)?.state.status;
        return r;
      });
      await settle();
      expect(childWhenParentDone).toBeUndefined();
      abortGate.resolve();
      expect(outcome(await parentDone)).toEqual(expected);
      expect(childWhenParentDone).toBe("terminal");
      expect(outcome(await h.getTask(kid!.id))).toEqual({ status: "aborted", reason: "handler" });
      await engineStillRuns(h);
      await h.close();
    },
  );

  test("a held failed outcome is cancellation intent for a task in a conversation it owns too: that task is marked, the owner ends only after it", async () => {
    // Break 29C: every held outcome above had a child task below it; an engine whose held outcome
    // marked only child tasks, not the tasks of a conversation the owner owns (which a plain abort
    // mark reaches), passed every test.
    const abortGate = deferred();
    const ids: Record<string, TaskId> = {};
    const owner = failsOverOwnedConversation("failing-conversation", abortGate.promise, (tx, c, worker) => {
      ids.worker = tx.createTask(worker, null, { ownership: { kind: "conversation" }, conversationId: c });
    });
    const h = await Harness.open(await memoryStore());
    const id = await h.createTask(owner, null, { ownership: { kind: "conversation" } });
    const record = (task: TaskId) => internals(h).session.records.tasks.get(task);
    await until(() => record(id)?.state.status === "completing", { what: "owner held" });
    await until(() => record(ids.worker!)?.abortRequested === true, {
      what: "the conversation's task marked",
    });
    expect(record(id)?.abortRequested).toBe(false);
    await settle();
    expect(record(id)?.state.status).toBe("completing");
    abortGate.resolve();
    expect(outcome(await done(h, id))).toEqual({ status: "failed", error: { message: "gave up" } });
    expect(outcome(await h.getTask(ids.worker!))).toEqual({ status: "aborted", reason: "handler" });
    await engineStillRuns(h);
    await h.close();
  });
});

/**
 * A worker parked until aborted whose abort handler waits for `gate`, and a task that makes a
 * conversation of its own, puts work there (`spawn`, given the transaction, the conversation's id
 * and the worker) and then fails: its failed outcome is held until that work drains.
 */
function failsOverOwnedConversation(
  prefix: string,
  gate: Promise<void>,
  spawn: (tx: Tx, conversationId: ConversationId, worker: ReturnType<typeof single>) => void,
) {
  const worker = single(`${prefix}-worker`, async (_t, _r, signal) => untilAborted(signal), {
    abort: async (_t, runtime) => {
      await gate;
      await runtime.commit(() => ({
        status: "terminal",
        outcome: { status: "aborted", reason: "handler" },
      }));
    },
  });
  type Step = { phase: "spawn" } | { phase: "fail" };
  return defineTask<null, Step, Json>({
    name: `${prefix}-owner`,
    version: 1,
    initial: () => ({ phase: "spawn" }),
    phases: {
      spawn: async (_t, runtime) => {
        await runtime.commit((tx) => {
          const c = tx.createConversation({ kind: "task", taskId: runtime.taskId });
          spawn(tx, c.id, worker);
          return { status: "running", checkpoint: { phase: "fail" } };
        });
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
}

describe("held outcomes and background boundaries", () => {
  test("a held failed outcome's cancellation stops at a background task in a conversation it owns: the foreground task there is marked, the background one runs on unmarked and completes (draw 41b, 7)", async () => {
    // Draw 41b C: every held non-completed outcome had only foreground work below it; a cascade from
    // a held outcome that crossed a background boundary (an abort mark's cascade still stopping
    // there) passed every ownership, traversal and abort-cascade test.
    const abortGate = deferred();
    const bgGate = deferred();
    const ids: Record<string, TaskId> = {};
    const background = single("held-bg-background", async (_t, runtime) => {
      await bgGate.promise;
      await runtime.commit(() => complete("bg finished"));
    });
    const owner = failsOverOwnedConversation("held-bg", abortGate.promise, (tx, c, worker) => {
      ids.background = tx.createTask(background, null, {
        ownership: { kind: "conversation" },
        conversationId: c,
        background: true,
      });
      ids.worker = tx.createTask(worker, null, { ownership: { kind: "conversation" }, conversationId: c });
    });
    const h = await Harness.open(await memoryStore());
    const id = await h.createTask(owner, null, { ownership: { kind: "conversation" } });
    const record = (task: TaskId) => internals(h).session.records.tasks.get(task);
    await until(() => record(id)?.state.status === "completing", { what: "owner held" });
    await until(() => record(ids.worker!)?.abortRequested === true, { what: "the foreground task marked" });
    await settle();
    expect(record(ids.background!)?.abortRequested).toBe(false);
    abortGate.resolve();
    expect(outcome(await done(h, id))).toEqual({ status: "failed", error: { message: "gave up" } });
    expect(outcome(await h.getTask(ids.worker!))).toEqual({ status: "aborted", reason: "handler" });
    await settle();
    expect(record(ids.background!)?.abortRequested).toBe(false);
    expect(record(ids.background!)?.state.status).not.toBe("terminal");
    bgGate.resolve();
    expect(outcome(await done(h, ids.background!))).toEqual({ status: "completed", result: "bg finished" });
    await engineStillRuns(h);
    await h.close();
  });
});

describe("held outcomes over waiting work", () => {
  test("a held failed outcome is cancellation intent for a child parked in waiting: the waiting child is marked and leaves its wait for its abort handler, its own child is marked, the owner ends only after both (draw 41b, 7)", async () => {
    // Draw 41b C: every held non-completed outcome had running work below it; a cascade from a held
    // outcome that passed over a task parked in `waiting` (an abort mark's cascade still reaching
    // it) was caught only by tests timing out.
    const ids: Record<string, TaskId> = {};
    const waiter = waitsOnOwnedChild("held-waiting-child", parked("held-waiting-leaf"));
    type Step = { phase: "spawn" } | { phase: "fail" };
    const owner = defineTask<null, Step, Json>({
      name: "held-waiting-owner",
      version: 1,
      initial: () => ({ phase: "spawn" }),
      phases: {
        spawn: async (_t, runtime) => {
          await runtime.commit((tx) => {
            ids.waiter = tx.createTask(waiter, null, { ownership: { kind: "task", taskId: runtime.taskId } });
            return { status: "running", checkpoint: { phase: "fail" } };
          });
        },
        fail: async (_t, runtime) => {
          const record = internals(h).session.records.tasks;
          await until(() => record.get(ids.waiter!)?.state.status === "waiting", { what: "child waiting" });
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
    const id = await h.createTask(owner, null, { ownership: { kind: "conversation" } });
    const record = (task: TaskId) => internals(h).session.records.tasks.get(task);
    await until(() => record(id)?.state.status !== "running" && record(id) !== undefined, {
      what: "owner finished",
    });
    await settle();
    const leaf = (await h.tasks({ kind: "held-waiting-leaf" }))[0]!;
    expect(record(id)?.state).toMatchObject({ outcome: { status: "failed" } });
    expect(record(ids.waiter!)?.abortRequested).toBe(true);
    expect(outcome(await done(h, id))).toEqual({ status: "failed", error: { message: "gave up" } });
    expect(outcome(await h.getTask(ids.waiter!))).toEqual({ status: "aborted" });
    expect((await h.getTask(leaf.id))?.abortRequested).toBe(true);
    expect(outcome(await h.getTask(leaf.id))).toEqual({ status: "aborted", reason: "handler" });
    await engineStillRuns(h);
    await h.close();
  });
});

describe("wait cycles through ownership", () => {
  test("a task in a conversation owned by task X may not wait on X: it would wait on its own owner", async () => {
    const caught: unknown[] = [];
    const waiter = waitsOrIsRefused("waits-on-owner", caught, (task) => task.input as number);
    const h = await Harness.open(await memoryStore());
    const x = await h.createTask(parked("conversation-owner"), null, { ownership: { kind: "conversation" } });
    await until(() => running(h) === 1, { what: "owner running" });
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

  test.each(["a child task", "a task in a conversation it owns"] as const)(
    "a wait that closes a cycle through a held owner is a WaitCycle: the held task completes, one of the two waits faults (held work: %s)",
    async (shape) => {
      // Upstream "rejects the wait that closes a cycle through a held owner" (sample 22d: the test
      // below has a running owner). H finishes while its owned work C lives (a hold); C waits on O and
      // O waits on H: whichever wait comes second closes the cycle C -> O -> H -> C. The hold covers
      // a task in a conversation H owns as well as H's child (spec §5.5, ordinary owned work); that
      // case deadlocked before session 22 (the walk followed child tasks only).
      const ids: { held?: TaskId; other?: TaskId } = {};
      const waiter = (name: string, target: () => TaskId) =>
        single(name, async (_task, runtime) => {
          if ((await runtime.getTask(target()))?.state.status === "terminal") {
            await runtime.commit(() => complete(`${name} done`));
            return;
          }
          await runtime.commit(() => ({
            status: "waiting",
            checkpoint: { phase: "go" },
            on: [target()],
            policy: "allSettled",
          }));
        });
      const child = waiter("held-child", () => ids.other!);
      const other = waiter("held-other", () => ids.held!);
      let childId: TaskId | undefined;
      const held = defineTask<Json, { phase: "go" } | { phase: "finish" }, Json>({
        name: "held-owner",
        version: 1,
        initial: () => ({ phase: "go" }),
        phases: {
          go: async (_task, runtime) => {
            await runtime.commit((tx) => {
              if (shape === "a task in a conversation it owns") {
                const c = tx.createConversation({ kind: "task", taskId: runtime.taskId });
                childId = tx.createTask(child, null, {
                  ownership: { kind: "conversation" },
                  conversationId: c.id,
                });
              } else
                childId = tx.createTask(child, null, { ownership: { kind: "task", taskId: runtime.taskId } });
              return { status: "running", checkpoint: { phase: "finish" } };
            });
          },
          finish: async (_task, runtime) => void (await runtime.commit(() => complete("held"))),
        },
        abort: async () => undefined,
      });
      const h = await Harness.open(await memoryStore(), { tasks: [held, child, other] });
      await h.transaction((tx) => {
        ids.held = tx.createTask(held, null, { ownership: { kind: "conversation" } });
        ids.other = tx.createTask(other, null, { ownership: { kind: "conversation" } });
      });
      // Draw 41d (13): a walk that missed the held work (its owned children only) let both waits
      // commit; that deadlock fails here on an assertion, not on a wait running out: once each of
      // the two waits is committed or refused, they are never both `waiting`.
      const status = (id: TaskId | undefined) =>
        id === undefined ? undefined : internals(h).session.records.tasks.get(id)?.state.status;
      await until(
        () => [childId, ids.other].every((id) => ["waiting", "terminal"].includes(status(id) ?? "")),
        {
          what: "both waits settled",
        },
      );
      expect([status(childId), status(ids.other)]).not.toEqual(["waiting", "waiting"]);
      expect(outcome(await done(h, ids.held!))).toEqual({ status: "completed", result: "held" });
      const ends = [outcome(await done(h, childId!)), outcome(await done(h, ids.other!))];
      expect(ends.map((o) => o?.status).sort()).toEqual(["completed", "faulted"]);
      const fault = ends.find((o) => o?.status === "faulted") as { error: { message: string } };
      expect(fault.error.message).toMatch(/cycle/i);
      await engineStillRuns(h);
      await h.close();
    },
  );

  test("a wait that closes a cycle through a held owner's held child down to its grandchild is a WaitCycle: the walk follows owned work at every level", async () => {
    // Break 30E: a walk that followed owned work one level only (not the owned work of a task it
    // reached as owned work) passed the test above, whose held work is one level deep; here
    // H holds for its child K, K holds for its child C, C waits on O and O waits on H: the cycle is
    // O -> H -> K -> C -> O, and without it found both waits, and the holds, never end.
    const ids: { top?: TaskId; other?: TaskId } = {};
    let midId: TaskId | undefined;
    let grandchildId: TaskId | undefined;
    const waiter = (name: string, target: () => TaskId) =>
      single(name, async (_task, runtime) => {
        if ((await runtime.getTask(target()))?.state.status === "terminal") {
          await runtime.commit(() => complete(`${name} done`));
          return;
        }
        await runtime.commit(() => ({
          status: "waiting",
          checkpoint: { phase: "go" },
          on: [target()],
          policy: "allSettled",
        }));
      });
    const grandchild = waiter("deep-grandchild", () => ids.other!);
    const other = waiter("deep-other", () => ids.top!);
    const owning = (
      name: string,
      make: (tx: Parameters<Parameters<Harness["transaction"]>[0]>[0], taskId: TaskId) => void,
    ) =>
      defineTask<Json, { phase: "go" } | { phase: "finish" }, Json>({
        name,
        version: 1,
        initial: () => ({ phase: "go" }),
        phases: {
          go: async (_task, runtime) => {
            await runtime.commit((tx) => {
              make(tx, runtime.taskId);
              return { status: "running", checkpoint: { phase: "finish" } };
            });
          },
          finish: async (_task, runtime) => void (await runtime.commit(() => complete(name))),
        },
        abort: async () => undefined,
      });
    const mid = owning("deep-mid", (tx, taskId) => {
      grandchildId = tx.createTask(grandchild, null, { ownership: { kind: "task", taskId } });
    });
    const top = owning("deep-top", (tx, taskId) => {
      midId = tx.createTask(mid, null, { ownership: { kind: "task", taskId } });
    });
    const h = await Harness.open(await memoryStore(), { tasks: [top, mid, grandchild, other] });
    await h.transaction((tx) => {
      ids.top = tx.createTask(top, null, { ownership: { kind: "conversation" } });
      ids.other = tx.createTask(other, null, { ownership: { kind: "conversation" } });
    });
    const ended = async (id: () => TaskId | undefined, what: string) => {
      await until(() => id() !== undefined, { what: `${what} created` });
      return outcome(await within(done(h, id()!), 5000, `${what} terminal`));
    };
    expect(await ended(() => ids.top, "the top owner")).toEqual({ status: "completed", result: "deep-top" });
    expect(await ended(() => midId, "the held child")).toEqual({ status: "completed", result: "deep-mid" });
    const ends = [
      await ended(() => grandchildId, "the grandchild"),
      await ended(() => ids.other, "the other"),
    ];
    expect(ends.map((o) => o?.status).sort()).toEqual(["completed", "faulted"]);
    const fault = ends.find((o) => o?.status === "faulted") as { error: { message: string } };
    expect(fault.error.message).toMatch(/cycle/i);
    await engineStillRuns(h);
    await h.close();
  });

  test("a wait that closes a cycle through a held owner whose held child waits on two tasks, the cycle's one second, is a WaitCycle", async () => {
    // Draw 40, 11: the tests above have every waiting task wait on one task; a walk that followed a
    // waiting task's first awaited task only passed them. H holds for its child C, C waits on [Y, O]
    // (Y a parked stranger), then O waits on H: the cycle O -> H -> C -> O runs through C's second.
    const ids: { other?: TaskId; stranger?: TaskId } = {};
    const childWaiting = deferred();
    const caught: unknown[] = [];
    let childId: TaskId | undefined;
    const child = single("two-on-child", async (_task, runtime) => {
      const on = [ids.stranger!, ids.other!];
      const ended = await Promise.all(on.map((id) => runtime.getTask(id)));
      if (ended.every((t) => t?.state.status === "terminal")) {
        await runtime.commit(() => complete("child done"));
        return;
      }
      await runtime.commit(() => ({
        status: "waiting",
        checkpoint: { phase: "go" },
        on,
        policy: "allSettled",
      }));
      childWaiting.resolve();
    });
    const held = defineTask<Json, { phase: "go" } | { phase: "finish" }, Json>({
      name: "two-on-held",
      version: 1,
      initial: () => ({ phase: "go" }),
      phases: {
        go: async (_task, runtime) => {
          await runtime.commit((tx) => {
            childId = tx.createTask(child, null, { ownership: { kind: "task", taskId: runtime.taskId } });
            return { status: "running", checkpoint: { phase: "finish" } };
          });
        },
        finish: async (_task, runtime) => void (await runtime.commit(() => complete("held"))),
      },
      abort: async () => undefined,
    });
    const other = waitsOrIsRefused(
      "two-on-other",
      caught,
      (task) => task.input as number,
      childWaiting.promise,
    );
    const h = await Harness.open(await memoryStore(), { tasks: [held, child, other] });
    const heldId = await h.transaction((tx) => {
      ids.stranger = tx.createTask(parked("two-on-stranger"), null, { ownership: { kind: "conversation" } });
      const top = tx.createTask(held, null, { ownership: { kind: "conversation" } });
      ids.other = tx.createTask(other, top, { ownership: { kind: "conversation" } });
      return top;
    });
    await until(() => internals(h).session.records.tasks.get(heldId)?.state.status === "completing", {
      what: "the owner held for its child",
    });
    const otherState = () => internals(h).session.records.tasks.get(ids.other!)?.state.status;
    await until(() => otherState() === "waiting" || otherState() === "terminal", { what: "the wait judged" });
    expect(otherState()).toBe("terminal");
    expect(outcome(await done(h, ids.other!))).toEqual({ status: "completed", result: "refused" });
    expect(caught[0]).toBeInstanceOf(WaitCycle);
    await h.abortTask(ids.stranger!);
    expect(outcome(await done(h, childId!))).toEqual({ status: "completed", result: "child done" });
    expect(outcome(await done(h, heldId))).toEqual({ status: "completed", result: "held" });
    await engineStillRuns(h);
    await h.close();
  });

  test("a wait that closes a cycle through an owner's live child is a WaitCycle", async () => {
    // B owns C; C waits on A; then A waits on B: A -> B -> (B's live child) C -> A.
    const cWaiting = deferred();
    const caught: unknown[] = [];
    // A and B are created one after the other in one transaction: B's id follows A's.
    const a = waitsOrIsRefused("cycle-a", caught, (_task, runtime) => runtime.taskId + 1, cWaiting.promise);
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
        tx.createTask(c, task.input, { ownership: { kind: "task", taskId: runtime.taskId } });
        return { status: "running", checkpoint: { phase: "go" } };
      });
      await untilAborted(signal);
    });
    const h = await Harness.open(await memoryStore());
    const [aId, bId] = await h.transaction((tx) => {
      const first = tx.createTask(a, null, { ownership: { kind: "conversation" } });
      return [first, tx.createTask(b, first, { ownership: { kind: "conversation" } })] as const;
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
