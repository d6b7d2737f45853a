/**
 * Recovery from seeded records (upstream's "recovery (SQLite, seeded records)" scenarios): a store is
 * left as a crash between two commits leaves it, by writing the first commit's row change by hand on
 * a closed engine's image, and the next engine must finish what the second commit would have done.
 * - a failFast wait whose failed child was stored but whose siblings were never marked;
 * - a held (`completing`) outcome whose owned work drained before the crash, next to one whose owned
 *   work still lives.
 */
import { expect, test } from "vitest";
import {
  defineTask,
  Harness,
  type Json,
  type TaskDefinition,
  type TaskId,
  type TaskOutcome,
} from "../../../worker/index.ts";
import type { MemoryStore } from "../../../worker/store/open.ts";
import { deferred, memoryStore, until } from "../../../worker/testing.ts";
import { complete, done, type Go, outcome, running, single, untilAborted } from "./fixtures.ts";

const stateOf = (h: Harness, id: TaskId) => h.inspect().tasks.find((t) => t.record.id === id)?.state.kind;

/** Store a task as terminal with `outcome`, as its own terminal commit would have. */
async function storeTerminal(store: MemoryStore, id: TaskId, result: TaskOutcome): Promise<void> {
  const state = JSON.stringify({ status: "terminal", outcome: result });
  await store.commit((sql) =>
    sql.run("UPDATE tasks SET status = 'terminal', state = ?, ended_at = 1 WHERE id = ?", [state, id]),
  );
}

/** A child that logs every phase run and abort, and parks until its invocation is signalled. */
function loggedChild(name: string, log: string[]): TaskDefinition<Json, Go, Json> {
  return single(
    name,
    async (_t, _r, signal) => {
      log.push(`run:${name}`);
      await untilAborted(signal);
    },
    {
      abort: async (_t, runtime) => {
        log.push(`abort:${name}`);
        await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }));
      },
    },
  );
}

/** A failFast wait whose first child failed in a commit stored just before a crash that left its sibling unmarked. */
async function crashedFailFast() {
  const log: string[] = [];
  const first = loggedChild("ff.first", log);
  const second = loggedChild("ff.second", log);
  type Step = { phase: "spawn" } | { phase: "joined"; children: TaskId[] };
  const parent = defineTask<null, Step, Json>({
    name: "ff.parent",
    version: 1,
    initial: () => ({ phase: "spawn" }),
    phases: {
      spawn: async (_t, runtime) => {
        await runtime.commit((tx) => {
          const ownership = { kind: "task" as const, taskId: runtime.taskId };
          const children = [
            tx.createTask(first, null, { ownership }),
            tx.createTask(second, null, { ownership }),
          ];
          return {
            status: "waiting",
            checkpoint: { phase: "joined", children },
            on: children,
            policy: "failFast",
          };
        });
      },
      joined: async (task, runtime) => {
        const children = (task.state.checkpoint as { children: TaskId[] }).children;
        const outcomes = await runtime.outcomes(children);
        await runtime.commit(() => complete(outcomes.map((o) => o?.status ?? "none")));
      },
    },
    abort: async (_t, runtime) =>
      void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
  });
  const definitions = [parent, first, second];

  const store = await memoryStore();
  const h1 = await Harness.open(store, { tasks: definitions });
  const id = await h1.createTask(parent, null, { ownership: { kind: "conversation" } });
  await until(() => running(h1) === 2, { what: "both children running" });
  await until(() => stateOf(h1, id) === "waiting", { what: "parent waiting" });
  const [c1, c2] = (await h1.tasks({ kind: "ff.first" })).concat(await h1.tasks({ kind: "ff.second" }));
  expect(c2?.abortRequested).toBe(false);
  const crashed = await memoryStore(store.image());
  await h1.close();
  // The crash came right after the first child's failing commit: the failFast marks were never derived.
  await storeTerminal(crashed, c1!.id, { status: "failed", error: { message: "first failed" } });
  log.length = 0;

  return { crashed, definitions, id, c2: c2!, log };
}

test("marks failFast siblings a crash left unmarked", async () => {
  const { crashed, definitions, id, c2, log } = await crashedFailFast();
  const h2 = await Harness.open(crashed, { tasks: definitions });
  expect(outcome(await done(h2, id))).toEqual({ status: "completed", result: ["failed", "aborted"] });
  expect((await h2.getTask(c2.id))?.abortRequested).toBe(true);
  // The unmarked sibling is aborted without its phase running again.
  expect(log).toEqual(["abort:ff.second"]);
  await h2.close();
});

// Spec §2.2 "Open ... re-evaluates finalization and failFast for completing and waiting tasks", also
// opened paused (reading 23a found a paused open deriving the marks only when scheduling resumed; a
// paused open now reconciles before it returns, committing the marks and starting nothing).
test("a paused open has already re-evaluated failFast: the sibling a crash left unmarked is marked before resume", async () => {
  const { crashed, definitions, id, c2, log } = await crashedFailFast();
  const h2 = await Harness.open(crashed, { tasks: definitions, paused: true });
  try {
    await h2.transaction(() => undefined);
    expect(h2.inspect().tasks.find((t) => t.record.id === c2.id)?.record.abortRequested).toBe(true);
    expect(stateOf(h2, id)).toBe("waiting");
    expect(log).toEqual([]);
  } finally {
    await h2.close();
  }
});

test("finalizes a held outcome whose work drained before the crash, and keeps one whose work lives", async () => {
  const gate = deferred();
  const kid = single("held.kid", async (task, runtime, signal) => {
    await Promise.race([gate.promise, untilAborted(signal)]);
    await runtime.commit(() => complete(`kid of ${String(task.input)}`));
  });
  const holder = single("held.holder", async (task, runtime) => {
    await runtime.commit((tx) => {
      tx.createTask(kid, task.input, { ownership: { kind: "task", taskId: runtime.taskId } });
      return { status: "running", checkpoint: { phase: "go" } };
    });
    await runtime.commit(() => complete(`held ${String(task.input)}`));
  });
  const store = await memoryStore();
  const h1 = await Harness.open(store, { tasks: [holder, kid] });
  const drained = await h1.createTask(holder, "drained", { ownership: { kind: "conversation" } });
  const lives = await h1.createTask(holder, "lives", { ownership: { kind: "conversation" } });
  await until(() => stateOf(h1, drained) === "completing" && stateOf(h1, lives) === "completing", {
    what: "both held",
  });
  const kids = await h1.tasks({ kind: "held.kid" });
  const drainedKid = kids.find((k) => k.owner === drained)!.id;
  const livingKid = kids.find((k) => k.owner === lives)!.id;
  const crashed = await memoryStore(store.image());
  await h1.close();
  // The crash came right after the drained holder's kid committed its outcome, before the release.
  await storeTerminal(crashed, drainedKid, { status: "completed", result: "kid of drained" });

  // Opened paused, the open has already released the drained hold (spec §2.2: open re-evaluates
  // finalization), and started nothing.
  const paused = await Harness.open(await memoryStore(crashed.image()), {
    tasks: [holder, kid],
    paused: true,
  });
  expect((await paused.getTask(drained))?.state).toEqual({
    status: "terminal",
    outcome: { status: "completed", result: "held drained" },
  });
  expect((await paused.getTask(lives))?.state.status).toBe("completing");
  expect(running(paused)).toBe(0);
  await paused.close();

  const h2 = await Harness.open(crashed, { tasks: [holder, kid] });
  expect(outcome(await done(h2, drained))).toEqual({ status: "completed", result: "held drained" });
  await until(() => running(h2) === 1, { what: "the living kid running again" });
  expect((await h2.getTask(lives))?.state).toEqual({
    status: "completing",
    outcome: { status: "completed", result: "held lives" },
  });
  gate.resolve();
  expect(outcome(await done(h2, livingKid))).toEqual({ status: "completed", result: "kid of lives" });
  expect(outcome(await done(h2, lives))).toEqual({ status: "completed", result: "held lives" });
  await h2.close();
});

test("a held fault whose work drained before the crash is finalized at open with its cleanup, in the commit that makes it terminal (draw 38c)", async () => {
  // The fault marks its kid for abort; the kid's abort handler keeps it live until the close.
  const kid = single("held-fault.kid", async (_t, _r, signal) => untilAborted(signal), {
    abort: async (_t, _r, signal) => untilAborted(signal),
  });
  const cleaned = new Set<TaskId>();
  const holder = defineTask<Json, Go, Json>({
    name: "held-fault.holder",
    version: 1,
    initial: () => ({ phase: "go" }),
    phases: {
      go: async (task, runtime) => {
        await runtime.commit((tx) => {
          tx.createTask(kid, null, { ownership: { kind: "task", taskId: task.id } });
          return { status: "running", checkpoint: { phase: "go" } };
        });
        throw new Error("holder broke");
      },
    },
    abort: async (_t, runtime) =>
      void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
    cleanUp: (_tx, task) => {
      // Only in the commit that makes the fault terminal: never while it is held.
      if (task.state.status === "terminal") cleaned.add(task.id);
    },
  });
  const store = await memoryStore();
  const h1 = await Harness.open(store, { tasks: [holder, kid] });
  const id = await h1.createTask(holder, null, { ownership: { kind: "conversation" } });
  await until(() => stateOf(h1, id) === "completing", { what: "the fault held" });
  expect(cleaned.size).toBe(0);
  const kidId = (await h1.tasks({ kind: "held-fault.kid" })).find((k) => k.owner === id)!.id;
  const crashed = await memoryStore(store.image());
  await h1.close();
  // The crash came right after the kid committed its outcome, before the release.
  await storeTerminal(crashed, kidId, { status: "completed", result: null });
  const paused = await Harness.open(crashed, { tasks: [holder, kid], paused: true });
  expect((await paused.getTask(id))?.state).toMatchObject({
    status: "terminal",
    outcome: { status: "faulted", error: { message: "holder broke" } },
  });
  expect([...cleaned]).toEqual([id]);
  await paused.close();
});
