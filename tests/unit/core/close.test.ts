/**
 * close (spec §2.2, §4): the first call seals admission and reservation for good. Its optional
 * signal cancels only that caller's wait: admission stays sealed, and a later close() awaits the
 * same shutdown.
 */
import { fauxToolCall } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { expect, test } from "vitest";
import { textResult } from "../../../worker/agent/tools/contract.ts";
import {
  AgentHarness,
  defineTask,
  defineTool,
  Harness,
  HarnessClosed,
  type Json,
  type TaskDefinition,
  WaitCancelled,
} from "../../../worker/index.ts";
import { deferred, memoryStore, until } from "../../../worker/testing.ts";
import { callsThenAnswer, echo, open } from "../agent/fixtures.ts";
import { complete, done, type Go, outcome, row, running, settle, single, untilAborted } from "./fixtures.ts";

/**
 * A harness running a task that ignores its signal until `release`, and a close() whose wait was
 * cancelled at once: the shutdown it began waits for the task.
 */

/**
 * A running task, then marked for abort: its abort handler, in this engine, waits for close's
 * signal and then runs `atClose` (and returns with no outcome); in the next engine (`marked(false)`)
 * it ends the task aborted "after reopen". `log` hears every start of the handler. Resolves once the
 * handler has started in this engine.
 */
async function abortMarkedAtClose(atClose: (runtime: AbortRuntime) => Promise<void>) {
  const started = deferred();
  const log: string[] = [];
  const marked = (first: boolean) =>
    single("marked", async (_t, _r, signal) => untilAborted(signal), {
      abort: async (_t, runtime, signal) => {
        log.push("abort");
        if (first) {
          started.resolve();
          await untilAborted(signal).catch(() => undefined);
          await atClose(runtime);
          return;
        }
        await runtime.commit(() => ({
          status: "terminal",
          outcome: { status: "aborted", reason: "after reopen" },
        }));
      },
    });
  const store = await memoryStore();
  const h = await Harness.open(store, { tasks: [marked(true)] });
  const id = await h.createTask(marked(true), null, { ownership: { kind: "conversation" } });
  await until(() => running(h) === 1, { what: "running" });
  expect(await h.abortTask(id)).toBe("marked");
  await started.promise;
  return { store, h, id, marked, log };
}
type AbortRuntime = Parameters<TaskDefinition<Json, Go, Json>["abort"]>[1];

async function cancelledCloseOverStubbornTask() {
  const release = deferred();
  const state = { returned: false };
  const stubborn = single("stubborn", async () => {
    await release.promise;
    state.returned = true;
  });
  const store = await memoryStore();
  const h = await Harness.open(store, { tasks: [stubborn] });
  await h.createTask(stubborn, null, { ownership: { kind: "conversation" } });
  await until(() => running(h) === 1, { what: "running" });
  const controller = new AbortController();
  const first = h.close({}, controller.signal);
  controller.abort();
  await expect(first).rejects.toBeInstanceOf(WaitCancelled);
  return { h, store, release, stubborn, state };
}

test("cancelling a close wait does not reopen admission; a later close() awaits the same shutdown", async () => {
  const { h, store, release, stubborn, state } = await cancelledCloseOverStubbornTask();
  expect(h.closed).toBe(true);
  await expect(h.createTask(stubborn, null, { ownership: { kind: "conversation" } })).rejects.toBeInstanceOf(
    HarnessClosed,
  );
  await expect(h.transaction(() => undefined)).rejects.toBeInstanceOf(HarnessClosed);
  // resume() throws too (spec §2.2; break 31C: the cancel forgot the shutdown, and resume() passed).
  expect(() => h.resume()).toThrow(HarnessClosed);
  const second = h.close();
  expect(store.closed).toBe(false);
  release.resolve();
  await second;
  expect(state.returned).toBe(true);
  expect(store.closed).toBe(true);
});

test("cancelling one of several close waits pending at once cancels only that one: the others, with or without a signal, resolve with the shutdown (draw 35d)", async () => {
  // spec §2.2: "Cancelling a close() call cancels only that wait". The named tests cancel the only
  // pending wait; a cancel that rejected every pending close() wait passed them.
  const release = deferred();
  const stubborn = single("stubborn-two-waits", async () => {
    await release.promise;
  });
  const store = await memoryStore();
  const h = await Harness.open(store, { tasks: [stubborn] });
  await h.createTask(stubborn, null, { ownership: { kind: "conversation" } });
  await until(() => running(h) === 1, { what: "running" });
  const plain = h.close();
  const kept = new AbortController();
  const withSignal = h.close({}, kept.signal);
  const cancelled = new AbortController();
  const third = h.close({}, cancelled.signal);
  let settled = 0;
  const others = Promise.all([plain, withSignal].map((p) => p.then(() => settled++)));
  cancelled.abort();
  await expect(third).rejects.toBeInstanceOf(WaitCancelled);
  expect(settled).toBe(0);
  expect(store.closed).toBe(false);
  release.resolve();
  await others;
  expect(settled).toBe(2);
  expect(store.closed).toBe(true);
});

test("a cancelled close wait leaves the shutdown going: with no later close() the store still closes once the stubborn task returned, and two later calls resolve with it", async () => {
  // spec §2.2: "Cancelling a close() call cancels only that wait; shutdown continues, and every later
  // close() awaits the same shutdown."
  const { h, store, release, state } = await cancelledCloseOverStubbornTask();
  // While the shutdown runs, inspect() reports it (spec §2.2 HarnessInspection.scheduling).
  expect(store.closed).toBe(false);
  expect(h.inspect().scheduling).toBe("closing");
  release.resolve();
  // No close() is pending: the shutdown the cancelled call began finishes on its own.
  await until(() => store.closed, { what: "the store closed without another close()" });
  expect(state.returned).toBe(true);
  let settled = 0;
  await Promise.all([h.close(), h.close()].map((p) => p.then(() => settled++)));
  expect(settled).toBe(2);
  expect(store.closed).toBe(true);
});

test("a close whose signal was aborted before the call still seals admission and begins the shutdown: it rejects WaitCancelled, later admissions are refused, and the store closes on its own (draw 35bB)", async () => {
  // Draw 35bB: every named cancel came after close() was called; a close() that answered an
  // already-aborted signal first (as an admission check does) left admission open and began no shutdown.
  const job = single("after-cancel", async () => undefined);
  const store = await memoryStore();
  const h = await Harness.open(store, { tasks: [job] });
  await expect(h.close({}, AbortSignal.abort())).rejects.toBeInstanceOf(WaitCancelled);
  expect(h.closed).toBe(true);
  await expect(h.createTask(job, null, { ownership: { kind: "conversation" } })).rejects.toBeInstanceOf(
    HarnessClosed,
  );
  await expect(h.transaction(() => undefined)).rejects.toBeInstanceOf(HarnessClosed);
  expect(() => h.resume()).toThrow(HarnessClosed);
  await until(() => store.closed, { what: "the store closed without another close()" });
  await h.close();
});

test("a cancelled close wait does not cut the grace short: a phase that reaches its commit within graceMs after the cancel still commits it", async () => {
  // Break 29H: every cancelled wait was of a close without a grace, so a cancel that also ended the
  // grace (the shutdown stopping the phase at the cancel) passed them.
  const gate = deferred();
  const graceful = single("graceful", async (_t, runtime) => {
    await gate.promise;
    await runtime.commit(() => complete("in the grace"));
  });
  const store = await memoryStore();
  const h = await Harness.open(store, { tasks: [graceful] });
  const id = await h.createTask(graceful, null, { ownership: { kind: "conversation" } });
  await until(() => running(h) === 1, { what: "running" });
  const controller = new AbortController();
  const first = h.close({ graceMs: 5000 }, controller.signal);
  controller.abort();
  await expect(first).rejects.toBeInstanceOf(WaitCancelled);
  await new Promise((r) => setTimeout(r, 20));
  gate.resolve();
  await h.close();
  const h2 = await Harness.open(await memoryStore(store.image()), { tasks: [graceful], paused: true });
  expect(outcome(await h2.getTask(id))).toEqual({ status: "completed", result: "in the grace" });
  await h2.close();
});

test("a close with a grace seals reservation at once: a phase that commits in the grace starts neither its next phase nor the task it created (break 30C)", async () => {
  const gate = deferred();
  const started: string[] = [];
  const later = single("later", async () => void started.push("later"));
  const graceful = defineTask<Json, { phase: "first" } | { phase: "second" }, Json>({
    name: "graceful",
    version: 1,
    initial: () => ({ phase: "first" }),
    phases: {
      first: async (_t, runtime) => {
        await gate.promise;
        await runtime.commit((tx) => {
          tx.createTask(later, null, { ownership: { kind: "conversation" }, conversationId: 1 });
          return { status: "running", checkpoint: { phase: "second" } };
        });
      },
      second: async () => void started.push("second"),
    },
    abort: async (_t, runtime) =>
      void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
  });
  const store = await memoryStore();
  const h = await Harness.open(store, { tasks: [graceful, later] });
  const id = await h.createTask(graceful, null, { ownership: { kind: "conversation" } });
  await until(() => running(h) === 1, { what: "running" });
  const closing = h.close({ graceMs: 5000 });
  gate.resolve();
  await closing;
  expect(started).toEqual([]);
  // Both are stored as the grace left them, for the next engine.
  const h2 = await Harness.open(await memoryStore(store.image()), { tasks: [graceful, later], paused: true });
  expect((await h2.getTask(id))?.state).toMatchObject({ status: "pending", checkpoint: { phase: "second" } });
  expect(await h2.tasks({ kind: "later" })).toHaveLength(1);
  await h2.close();
});

test("close() stops a running task without writing an outcome or an abort mark: the next engine resumes it", async () => {
  // Every invocation, foreground and background (spec §5.4): one of each.
  const started = [deferred(), deferred()];
  const commitsAfterClose = new Map<Json, unknown>();
  const stopping = single("stopping", async (task, runtime, signal) => {
    // A task-scoped document: closing must neither retire it nor publish its retirement.
    await runtime.commit((tx) => {
      tx.writeDoc({ kind: "task", taskId: task.id }, "app.scratch", { n: task.input });
      return undefined;
    });
    started[task.input as number]!.resolve();
    await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
    // A commit after the close began is refused; the task stays as it was stored.
    commitsAfterClose.set(
      task.input,
      await runtime.commit(() => complete("too late")).catch((e: unknown) => e),
    );
  });
  const store = await memoryStore();
  const h = await Harness.open(store, { tasks: [stopping] });
  const id = await h.createTask(stopping, 0, { ownership: { kind: "conversation" } });
  const bg = await h.createTask(stopping, 1, { ownership: { kind: "conversation" }, background: true });
  await Promise.all(started.map((d) => d.promise));
  const publishedAtClose: unknown[] = [];
  h.subscribe((change) => publishedAtClose.push(...change.docs, ...change.tasks));
  await h.close();
  // Close published nothing: no outcome, no mark, no document retirement.
  expect(publishedAtClose).toEqual([]);
  // Refused by the runtime's gate for the close, typed, not by some later failure.
  for (const input of [0, 1])
    expect([input, commitsAfterClose.get(input)]).toMatchObject([
      input,
      { name: "CommitRefused", reason: "closing" },
    ]);
  const image = await memoryStore(store.image());
  for (const task of [id, bg]) expect((await row(image, task))?.["status"]).toBe("running");
  const finishing = single(
    "stopping",
    async (task, runtime) => void (await runtime.commit(() => complete(`resumed ${task.input}`))),
  );
  const next = await Harness.open(image, { tasks: [finishing], paused: true });
  for (const task of [id, bg]) expect((await next.getTask(task))?.abortRequested).toBe(false);
  for (const [i, task] of [id, bg].entries())
    expect(await next.doc({ kind: "task", taskId: task }, "app.scratch")).toEqual({ n: i });
  next.resume();
  expect(outcome(await done(next, id))).toEqual({ status: "completed", result: "resumed 0" });
  expect(outcome(await done(next, bg))).toEqual({ status: "completed", result: "resumed 1" });
  await next.close();
});

test("a close that begins while the step after a phase is being stored starts no next phase: the task stays at its new checkpoint and the next engine runs it (draw 35bB)", async () => {
  // Draw 35bB: the named tests' closes begin while a phase runs; a step decided "run" just before the
  // seal (its commit on the line, the close begun as that commit was stored) started the next phase
  // after close began, unchecked, and passed them.
  type Two = { phase: "first" } | { phase: "second" };
  const ran: string[] = [];
  const twoStep = (second: () => Promise<void>) =>
    defineTask<Json, Two, Json>({
      name: "step-at-seal",
      version: 1,
      initial: () => ({ phase: "first" }),
      abort: async () => undefined,
      phases: {
        first: async (_t, runtime) =>
          void (await runtime.commit(() => ({ status: "running", checkpoint: { phase: "second" } }))),
        second: async (_t, runtime) => {
          await second();
          await runtime.commit(() => complete("second ran"));
        },
      },
    });
  const store = await memoryStore();
  const h = await Harness.open(store, { tasks: [twoStep(async () => void ran.push("second"))] });
  let closing: Promise<void> | undefined;
  let armed = false;
  // When the first phase's checkpoint is published, another commit is asked at once, so the step
  // after the phase is decided on the line in the next group; that group's COMMIT begins the close.
  h.subscribe((change) => {
    if (armed) return;
    const moved = change.tasks.find(
      (t) => (t.state as { checkpoint?: { phase: string } }).checkpoint?.phase === "second",
    );
    if (!moved) return;
    armed = true;
    store.setFaultHook((point) => {
      if (point !== "before-commit" || closing) return;
      closing = h.close();
    });
    void h.transaction((tx) => tx.writeDoc(1, "app.beside", { n: 1 }));
  });
  const id = await h.createTask(
    twoStep(async () => void ran.push("second")),
    null,
    {
      ownership: { kind: "conversation" },
    },
  );
  await until(() => closing !== undefined, { what: "the close begun at the step's commit" });
  await closing;
  store.setFaultHook(undefined);
  expect(ran).toEqual([]);
  const image = await memoryStore(store.image());
  expect(JSON.parse((await row(image, id))?.["state"] as string)).toMatchObject({
    checkpoint: { phase: "second" },
  });
  const next = await Harness.open(image, { tasks: [twoStep(async () => void ran.push("resumed"))] });
  expect(outcome(await done(next, id))).toEqual({ status: "completed", result: "second ran" });
  expect(ran).toEqual(["resumed"]);
  await next.close();
});

test("step rule 2: a phase or an abort handler that returns once close began is stopped, not faulted: its checkpoint and its abort mark are kept for the next engine", async () => {
  type Two = { phase: "first" } | { phase: "second" };
  const log: string[] = [];
  const secondStarted = deferred();
  const abortStarted = deferred();
  // Moves to a new checkpoint, then returns from its second phase when closing signals it, without
  // committing: out of a close, rule 6 would fault it.
  const stepper = (onSecond: (signal: AbortSignal) => Promise<void>) =>
    defineTask<Json, Two, Json>({
      name: "two-step",
      version: 1,
      initial: () => ({ phase: "first" }),
      phases: {
        first: async (_t, runtime) =>
          void (await runtime.commit(() => ({ status: "running", checkpoint: { phase: "second" } }))),
        second: async (_t, runtime, signal) => {
          log.push("second");
          await onSecond(signal);
          if (!signal.aborted) await runtime.commit(() => complete("resumed at second"));
        },
      },
      abort: async () => undefined,
    });
  // Its abort handler returns, without an outcome, when closing signals it.
  const marked = (hold: boolean) =>
    single("marked", async (_t, _r, signal) => untilAborted(signal), {
      abort: async (_t, runtime, signal) => {
        log.push("abort");
        if (hold) {
          abortStarted.resolve();
          await untilAborted(signal);
          return;
        }
        await runtime.commit(() => ({
          status: "terminal",
          outcome: { status: "aborted", reason: "after reopen" },
        }));
      },
    });
  const store = await memoryStore();
  const h = await Harness.open(store, {
    tasks: [
      stepper(async (signal) => {
        secondStarted.resolve();
        await untilAborted(signal);
      }),
      marked(true),
    ],
  });
  const a = await h.createTask(
    stepper(async () => undefined),
    null,
    { ownership: { kind: "conversation" } },
  );
  const b = await h.createTask(marked(true), null, { ownership: { kind: "conversation" } });
  await secondStarted.promise;
  await until(() => running(h) === 2, { what: "both running" });
  expect(await h.abortTask(b)).toBe("marked");
  await abortStarted.promise;
  await h.close();
  const image = await memoryStore(store.image());
  expect((await row(image, a))?.["status"]).toBe("running");
  expect(JSON.parse((await row(image, a))?.["state"] as string)).toMatchObject({
    checkpoint: { phase: "second" },
  });
  log.length = 0;
  const next = await Harness.open(image, { tasks: [stepper(async () => undefined), marked(false)] });
  expect((await next.getTask(b))?.abortRequested).toBe(true);
  expect(outcome(await done(next, a))).toEqual({ status: "completed", result: "resumed at second" });
  expect(outcome(await done(next, b))).toEqual({ status: "aborted", reason: "after reopen" });
  expect(log.sort()).toEqual(["abort", "second"]);
  await next.close();
});

test("step rule 2: an abort handler that returns quietly, without a throw, once close began is stopped, not faulted: the next engine runs it again", async () => {
  // Break 30N: the rule-2 test's abort handler ends by a throw (its signal's reason); an engine that
  // faulted an abort handler returning without an outcome, close or not, passed it.
  const { store, h, id, marked, log } = await abortMarkedAtClose(async () => undefined);
  await h.close();
  const next = await Harness.open(await memoryStore(store.image()), { tasks: [marked(false)] });
  expect(outcome(await done(next, id))).toEqual({ status: "aborted", reason: "after reopen" });
  expect(log).toEqual(["abort", "abort"]);
  await next.close();
});

test("once close began, new task, conversation and submission operations reject with HarnessClosed", async () => {
  const { h, root } = await open(echo);
  // A submission of this harness, settled before close: its handle's new operations are refused too
  // (reading 24b: only task and conversation operations were tried).
  const sub = await root.submit({ type: "write", entry: { kind: "note", data: "before" } });
  expect((await sub.wait()).status).toBe("done");
  const spare = await h.createConversation({ ownership: { kind: "ownerless" } });
  const refusesAll = async () => {
    await expect(sub.record()).rejects.toBeInstanceOf(HarnessClosed);
    await expect(sub.wait()).rejects.toBeInstanceOf(HarnessClosed);
    await expect(sub.abort()).rejects.toBeInstanceOf(HarnessClosed);
    await expect(h.submission(sub.id)).rejects.toBeInstanceOf(HarnessClosed);
    await expect(h.abortSubmission(sub.id)).rejects.toBeInstanceOf(HarnessClosed);
    await expect(root.submit({ type: "input", content: "late" })).rejects.toBeInstanceOf(HarnessClosed);
    await expect(h.createConversation({ ownership: { kind: "ownerless" } })).rejects.toBeInstanceOf(
      HarnessClosed,
    );
    await expect(root.configure({ instructions: "x" })).rejects.toBeInstanceOf(HarnessClosed);
    await expect(h.getTask(1)).rejects.toBeInstanceOf(HarnessClosed);
    await expect(h.waitForTask(1)).rejects.toBeInstanceOf(HarnessClosed);
    await expect(h.abortTask(1)).rejects.toBeInstanceOf(HarnessClosed);
    // A task listing and a deletion too (break 30M: neither refused while closing, both passed).
    await expect(h.tasks()).rejects.toBeInstanceOf(HarnessClosed);
    await expect(h.deleteConversation(spare.id)).rejects.toBeInstanceOf(HarnessClosed);
    expect(() => h.resume()).toThrow(HarnessClosed);
  };
  // While the shutdown is still under way (an admitted commit holds the line, so the store is open):
  // "once close begins", not once it is over.
  const gate = deferred();
  const inCallback = deferred();
  const holding = h.transaction(async (tx) => {
    inCallback.resolve();
    await gate.promise;
    tx.appendEntry(root.id, { kind: "note", data: "held" });
  });
  await inCallback.promise;
  const closing = h.close();
  await refusesAll();
  gate.resolve();
  await holding;
  await closing;
  // And after it: the old handles stay refused (a reopen hands out new ones).
  await refusesAll();
});

test("once close began, new reads reject with HarnessClosed too: a conversation's entries, context, agent, view and watch, document reads, usage", async () => {
  // Spec §2.2: "Once close begins, every new Harness, conversation, and submission operation
  // rejects"; only operations already queued at the seal complete. Reading 24b found these reads
  // answering (or failing with the store's StoreClosed) after the seal: contrary, fixed.
  const { h, root } = await open(echo);
  await (await root.submit({ type: "input", content: "one" })).wait();
  const reads: Array<[string, () => Promise<unknown>]> = [
    ["entries", () => root.entries()],
    ["context", () => root.context()],
    ["agent", () => root.agent()],
    ["agentState", () => root.agentState()],
    ["viewState", () => root.viewState()],
    ["watch", () => root.watch()],
    ["doc", () => h.doc(root.id, "pi.agent")],
    ["usage", () => h.usage()],
  ];
  const refusals = async () => {
    const seen: Record<string, string> = {};
    for (const [name, read] of reads)
      seen[name] = await read().then(
        () => "resolved",
        (e: unknown) => (e instanceof HarnessClosed ? "HarnessClosed" : String(e)),
      );
    return seen;
  };
  const all = Object.fromEntries(reads.map(([name]) => [name, "HarnessClosed"]));
  // While the shutdown is under way (an admitted commit holds the line) and after it.
  const gate = deferred();
  const inCallback = deferred();
  const holding = h.transaction(async () => {
    inCallback.resolve();
    await gate.promise;
  });
  await inCallback.promise;
  const closing = h.close();
  expect(await refusals()).toEqual(all);
  gate.resolve();
  await holding;
  await closing;
  expect(await refusals()).toEqual(all);
});

test("commits admitted before close settle and are stored before the store closes, also when their caller cancels; one asked after the seal is refused; a new harness opens the store with them", async () => {
  const store = await memoryStore();
  let ran = false;
  const late = single("late", async (_t, runtime) => {
    ran = true;
    await runtime.commit(() => complete("ran"));
  });
  const h = await Harness.open(store, { tasks: [late] });
  const gate = deferred();
  const inCallback = deferred();
  const controller = new AbortController();
  // Admitted and holding the line when close begins: its callback is still running.
  const first = h.transaction(async (tx) => {
    inCallback.resolve();
    await gate.promise;
    tx.appendEntry(1, { kind: "note", data: "first" });
    return "first stored";
  }, controller.signal);
  // Admitted behind it, queued on the line at the seal.
  // It also creates a task: stored, but never reserved once the seal is in (reservation is sealed too).
  let lateId = 0;
  const second = h.transaction((tx) => {
    tx.appendEntry(1, { kind: "note", data: "second" });
    lateId = tx.createTask(late, null, { ownership: { kind: "conversation" } });
    return "second stored";
  });
  await inCallback.promise;
  const closing = h.close();
  await expect(h.transaction(() => undefined)).rejects.toBeInstanceOf(HarnessClosed);
  // Cancelling the caller after admission neither interrupts nor undoes the commit.
  controller.abort();
  expect(store.closed).toBe(false);
  gate.resolve();
  expect(await first).toBe("first stored");
  expect(await second).toBe("second stored");
  await closing;
  expect(store.closed).toBe(true);
  expect(ran).toBe(false);
  const image = await memoryStore(store.image());
  expect((await row(image, lateId))?.["status"]).toBe("pending");
  const next = await Harness.open(image, { tasks: [late] });
  expect((await next.entries(1)).map((e) => e.data)).toEqual(["first", "second"]);
  expect(outcome(await done(next, lateId))).toEqual({ status: "completed", result: "ran" });
  expect(ran).toBe(true);
  await next.close();
});

test("a reservation queued on the line at the seal reserves nothing: the task stays pending with no startedAt, and the next harness runs it (draw 41, 16)", async () => {
  // Draw 41 (16): the named test's task is created by a commit queued at the seal, so no drain could
  // start before it. Here the drain began before the seal (a paused harness resumed while a commit
  // holds the line) and its reserving commit reached the line only after it: it stored the task
  // running, with a startedAt, though closing seals task reservation (spec §4) and no code ran.
  const store = await memoryStore();
  let ran = false;
  const job = single("sealed-out", async (_t, runtime) => {
    ran = true;
    await runtime.commit(() => complete("ran"));
  });
  const h = await Harness.open(store, { tasks: [job], paused: true });
  const id = await h.createTask(job, null, { ownership: { kind: "conversation" } });
  const gate = deferred();
  const inCallback = deferred();
  h.resume(); // the drain is asked for now; its reserving commit queues behind the one below
  const holding = h.transaction(async () => {
    inCallback.resolve();
    await gate.promise;
  });
  await inCallback.promise;
  await settle(); // the drain has planned and queued its reserving commit behind the holding one
  const closing = h.close();
  gate.resolve();
  await holding;
  await closing;
  expect(ran).toBe(false);
  const image = await memoryStore(store.image());
  const stored = await image.read((sql) =>
    sql.get("SELECT status, started_at FROM tasks WHERE id = ?", [id]),
  );
  expect(stored).toEqual({ status: "pending", started_at: null });
  const next = await Harness.open(image, { tasks: [job] });
  expect(outcome(await done(next, id))).toEqual({ status: "completed", result: "ran" });
  expect(ran).toBe(true);
  await next.close();
});

test("a conversation abort asked after the seal is refused and commits nothing: no abort mark is stored, and the next engine runs the task to its own end (draw 35A)", async () => {
  // Draw 35A: every refusal after the seal was judged by its rejection alone; a conversation abort
  // that skipped its progress gate while closing was admitted after the seal, stored its marks, and
  // then rejected.
  const release = deferred();
  const worker = single("worker", async (_t, runtime) => {
    await release.promise;
    await runtime.commit(() => complete("own end"));
  });
  const store = await memoryStore();
  const h = await Harness.open(store, { tasks: [worker] });
  const id = await h.createTask(worker, null, { ownership: { kind: "conversation" } });
  await until(() => running(h) === 1, { what: "running" });
  const gate = deferred();
  const inCallback = deferred();
  const holding = h.transaction(async () => {
    inCallback.resolve();
    await gate.promise;
  });
  await inCallback.promise;
  const closing = h.close();
  // Asked while a commit holds the line: an abort let through would queue behind it.
  const refused = h.abortConversation(1 as never).catch((e: unknown) => e);
  gate.resolve();
  await holding;
  expect(await refused).toBeInstanceOf(HarnessClosed);
  release.resolve();
  await closing;
  const next = await Harness.open(await memoryStore(store.image()), { tasks: [worker] });
  expect(await next.getTask(id)).toMatchObject({ abortRequested: false });
  expect(outcome(await done(next, id))).toEqual({ status: "completed", result: "own end" });
  await next.close();
});

test("operations queued at the seal: an admitted commit settles, a queued read completes, a task wait, a watch and a view reject with HarnessClosed, a settled submission's wait resolves; inspect says closing", async () => {
  const release = deferred();
  const stubborn = single("stubborn", async () => {
    await release.promise;
  });
  const store = await memoryStore();
  const h = await Harness.open(store, { tasks: [stubborn] });
  const id = await h.createTask(stubborn, null, { ownership: { kind: "conversation" } });
  await until(() => running(h) === 1, { what: "running" });
  // Asked before the seal, queued on the line behind one another.
  const commit = h.transaction((tx) => void tx.appendEntry(1, { kind: "note", data: "queued" }));
  const read = h.entries(1);
  const wait = h.waitForTask(id);
  const closing = h.close();
  expect(h.inspect().scheduling).toBe("closing");
  await commit;
  expect((await read).map((e) => e.data)).toEqual(["queued"]);
  // The wait rejects once the shutdown joined the invocation (which ignores its signal), before close resolves.
  let waitSettled = false;
  const waitEnd = expect(wait)
    .rejects.toBeInstanceOf(HarnessClosed)
    .finally(() => {
      waitSettled = true;
    });
  release.resolve();
  await closing;
  expect(waitSettled).toBe(true);
  await waitEnd;

  // A settled submission's wait, asked before the seal and still reading when it comes, resolves
  // with the settlement (it needs no later commit); one asked after the seal is a new operation.
  const agent = await open(echo);
  const submission = await agent.root.submit({ type: "input", content: "hi" });
  const settled = await submission.wait();
  expect(settled.status).toBe("done");
  const queuedWait = submission.wait();
  // A watch and a view asked before the seal, still queued when it comes, reject: they would need later commits.
  const queuedWatch = agent.root.watch();
  const queuedView = agent.root.viewState();
  // A read asked before the seal completes (draw 34b: a context read that checked again after its
  // read refused it).
  const queuedContext = agent.root.context();
  const agentClosing = agent.h.close();
  await expect(submission.wait()).rejects.toBeInstanceOf(HarnessClosed);
  expect(await queuedWait).toEqual(settled);
  await expect(queuedWatch).rejects.toBeInstanceOf(HarnessClosed);
  await expect(queuedView).rejects.toBeInstanceOf(HarnessClosed);
  expect((await queuedContext).messages.map((m) => m.role)).toEqual(["user", "assistant"]);
  await agentClosing;
});

test("commits queued at the seal settle and are stored in every shape: one commit per transaction, and one that must first load its conversation's documents (draw 34b)", async () => {
  // Draw 34b: CONTRARY, fixed. The named test's queued commits all joined the group holding the line;
  // a commit that started a later group (one commit per transaction) or went back for a load (the
  // conversation's documents not in memory after a reopen) met a store close had already closed:
  // rejected, and the engine stopped. Close now lets the line drain before it closes the store.
  const store = await memoryStore();
  const first = await Harness.open(store, { groupCommit: false });
  const c = await first.transaction((tx) => {
    const made = tx.createConversation({ kind: "ownerless" });
    tx.writeDoc(made.id, "d", { n: 1 });
    return made.id;
  });
  const queued = [1, 2, 3].map((n) =>
    first.transaction((tx) => void tx.appendEntry(1, { kind: "note", data: n })),
  );
  await first.close();
  const outcomes = await Promise.allSettled(queued);
  expect(outcomes.map((o) => (o.status === "rejected" ? String(o.reason) : o.status))).toEqual([
    "fulfilled",
    "fulfilled",
    "fulfilled",
  ]);
  // Reopened: the conversation's documents are not in memory, so its commit goes back for them.
  const h = await Harness.open(await memoryStore(store.image()));
  const loading = h.transaction((tx) => {
    tx.writeDoc(c, "d", { n: 2 });
    return "stored";
  });
  const read = h.doc(c, "d");
  await h.close();
  expect(await loading).toBe("stored");
  expect(await read).toEqual({ n: 1 });
  expect(h.inspect().fatal).toBeUndefined();
  const next = await Harness.open(await memoryStore((h.store as typeof store).image()));
  expect((await next.entries(1)).map((e) => e.data)).toEqual([1, 2, 3]);
  expect(await next.doc(c, "d")).toEqual({ n: 2 });
  await next.close();
});

test("operations of several steps asked before the seal: a snapshotAsOf read completes; a fork and a deletion, whose commits would be admitted after it, are refused with HarnessClosed; close stops no engine (draw 34b)", async () => {
  // Draw 34b: CONTRARY, fixed. Each of these reads the store more than once: asked before the seal
  // on a reopened harness (nothing in memory), a later read met a store close had closed already
  // (StoreClosed), and a fork whose reads got through had its commit meet the closed store, which
  // stopped the engine (onFatal) at an ordinary close. Close now lets them end first; a commit
  // asked after the seal is refused, as `transaction()` refuses it.
  const store = await memoryStore();
  const options = { forks: { rewindable: ["hist"] } };
  const first = await Harness.open(store, options);
  const { c, other, at, rootAt } = await first.transaction((tx) => {
    const made = tx.createConversation({ kind: "ownerless" });
    const entry = tx.appendEntry(made.id, { kind: "note", data: 1 });
    tx.writeDoc(made.id, "hist", { n: 1 });
    const rootEntry = tx.appendEntry(1, { kind: "note", data: 0 });
    return {
      c: made.id,
      other: tx.createConversation({ kind: "ownerless" }).id,
      at: entry.id,
      rootAt: rootEntry.id,
    };
  });
  await first.close();
  const ops = {
    snapshotAsOf: (h: Harness) => h.snapshotAsOf(c, "hist", at).then((s) => s?.value),
    fork: (h: Harness) => h.forkRecord(c, at, { ownership: { kind: "ownerless" } }),
    forkOfTheRoot: (h: Harness) => h.forkRecord(1, rootAt, { ownership: { kind: "ownerless" } }),
    delete: (h: Harness) => h.deleteConversation(other),
  };
  const outcomes: Record<string, unknown> = {};
  for (const [name, op] of Object.entries(ops)) {
    const fatal: Error[] = [];
    const h = await Harness.open(await memoryStore(store.image()), {
      ...options,
      onFatal: (e) => fatal.push(e),
    });
    const asked = op(h);
    const closing = h.close();
    outcomes[name] = await asked.then(
      (value) => value,
      (e: unknown) => (e instanceof HarnessClosed && !/stopped/.test(e.message) ? "closed" : String(e)),
    );
    await closing;
    expect([fatal, h.inspect().fatal], name).toEqual([[], undefined]);
  }
  expect(outcomes).toEqual({
    snapshotAsOf: { n: 1 },
    fork: "closed",
    forkOfTheRoot: "closed",
    delete: "closed",
  });
  // The agent's reads of several steps too: a conversation's usage roll-up (its records, then its
  // documents) asked before the seal completes.
  const agent = await open(echo);
  const child = await agent.h.createConversation({ ownership: { kind: "ownerless" } });
  await (await child.submit({ type: "input", content: "hi" })).wait();
  await agent.h.close();
  const reopened = await AgentHarness.open(await memoryStore(agent.store.image()), {
    models: agent.faux.models,
    defaultModel: agent.faux.ref,
  });
  const usage = reopened.conversationUsage(child.id);
  await reopened.close();
  const rollup = await usage;
  expect(rollup.children).toEqual([]);
  expect(rollup.total).toEqual(rollup.own);
  expect(Object.keys(rollup.own.models)).toEqual(["faux/faux-1"]);
});

test("a harness opened paused and closed before any resume: inspect says closing, not paused, while commits queued at the seal settle (draw 34b)", async () => {
  // Draw 34b: a scheduling state that asked "paused" before "closing" passed every test (each closed
  // harness had been resumed).
  let ran = false;
  const job = single("paused-job", async () => {
    ran = true;
  });
  const store = await memoryStore();
  const first = await Harness.open(store, { tasks: [job], paused: true });
  await first.createTask(job, null, { ownership: { kind: "conversation" } });
  await first.close();
  const h = await Harness.open(await memoryStore(store.image()), { tasks: [job], paused: true });
  expect(h.inspect().scheduling).toBe("paused");
  const gate = deferred();
  const entered = deferred();
  const holding = h.transaction(async (tx) => {
    entered.resolve();
    await gate.promise;
    tx.appendEntry(1, { kind: "note", data: "holding" });
  });
  const queued = h.transaction((tx) => void tx.appendEntry(1, { kind: "note", data: "queued" }));
  await entered.promise;
  const closing = h.close();
  expect(h.inspect().scheduling).toBe("closing");
  gate.resolve();
  await holding;
  await queued;
  expect(h.inspect().scheduling).toBe("closing");
  await closing;
  expect(h.inspect().scheduling).toBe("closing");
  expect(ran).toBe(false);
});

test("idle waits asked before the seal, the harness's and a conversation's, reject with HarnessClosed, also when a commit queued at the seal settles during close (draw 34b)", async () => {
  // Draw 34b: idle waits that took a closing harness for an idle one resolved once a queued commit
  // settled during close; the test above waits on a task only. Close writes no outcome, so the
  // running task stays live: the idle waits need a later commit and reject.
  const release = deferred();
  const stubborn = single("stubborn-idle", async () => {
    await release.promise;
  });
  const h = await Harness.open(await memoryStore(), { tasks: [stubborn] });
  await h.createTask(stubborn, null, { ownership: { kind: "conversation" } });
  await until(() => running(h) === 1, { what: "running" });
  const idle = h.waitForIdle();
  const conversationIdle = h.waitForConversationIdle(1);
  const gate = deferred();
  const entered = deferred();
  // Holding the line at the seal, and a second commit queued behind it: both settle during close.
  const holding = h.transaction(async (tx) => {
    entered.resolve();
    await gate.promise;
    tx.appendEntry(1, { kind: "note", data: "holding" });
  });
  const queued = h.transaction((tx) => void tx.appendEntry(1, { kind: "note", data: "queued" }));
  await entered.promise;
  const closing = h.close();
  const outcomes = [idle, conversationIdle].map((wait) =>
    wait.then(
      () => "resolved",
      (e: unknown) => (e instanceof HarnessClosed ? "closed" : String(e)),
    ),
  );
  gate.resolve();
  await holding;
  await queued;
  release.resolve();
  await closing;
  expect(await Promise.all(outcomes)).toEqual(["closed", "closed"]);
});

test("an unsettled submission's wait asked before the seal rejects with HarnessClosed: it is not settled as unanswered by the close", async () => {
  // The test above waits on a settled submission (it resolves) and on a task; a submission still
  // running at the seal needs a later commit, so its queued wait rejects (break 28K).
  const started = deferred();
  const hold = defineTool({
    name: "hold",
    description: "Runs until aborted",
    parameters: Type.Object({}),
    async execute(_args, api) {
      started.resolve();
      await untilAborted(api.signal);
      return textResult("stopped");
    },
  });
  const { h, root } = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "c1" })), { tools: [hold] });
  const submission = await root.submit({ type: "input", content: "go" });
  await started.promise;
  const queuedWait = submission.wait();
  const closing = h.close();
  await expect(queuedWait).rejects.toBeInstanceOf(HarnessClosed);
  await closing;
});

test("a document state asked before the seal and still loading rejects with HarnessClosed; the acquisition of an absent document resolves undefined", async () => {
  const store = await memoryStore();
  const first = await Harness.open(store);
  const c = await first.transaction((tx) => {
    const made = tx.createConversation({ kind: "ownerless" });
    tx.writeDoc(made.id, "d", { n: 1 });
    return made.id;
  });
  await first.close();
  // Reopened: the conversation's documents are not in memory, so each acquisition queues a read.
  const h = await Harness.open(await memoryStore(store.image()));
  const present = h.documentState(c, "d");
  const absent = h.documentState(c, "never-written");
  const closing = h.close();
  await expect(present).rejects.toBeInstanceOf(HarnessClosed);
  expect(await absent).toBeUndefined();
  await closing;
});

test("close joins an abort handler that ignores its signal: the store stays open until it returned, and it does not run after close resolved", async () => {
  // Break 28S: the join was tried with task phases, tools and hooks; a close that joined run
  // invocations only, leaving a running abort handler behind, passed every close test.
  const started = deferred<AbortSignal>();
  const release = deferred();
  let returned = false;
  const stubborn = single("stubborn-abort", async (_t, _r, signal) => untilAborted(signal), {
    abort: async (_t, _runtime, signal) => {
      started.resolve(signal);
      await release.promise; // the signal is never obeyed
      returned = true;
    },
  });
  const store = await memoryStore();
  const h = await Harness.open(store, { tasks: [stubborn] });
  const id = await h.createTask(stubborn, null, { ownership: { kind: "conversation" } });
  await until(() => running(h) === 1, { what: "task running" });
  expect(await h.abortTask(id)).toBe("marked");
  const signal = await started.promise;
  let closed = false;
  const closing = h.close().then(() => {
    closed = true;
  });
  await until(() => signal.aborted, { what: "abort handler signalled" });
  for (let turn = 0; turn < 50; turn++) await new Promise((r) => setTimeout(r, 0));
  expect([h.closed, closed, store.closed, returned]).toEqual([true, false, false, false]);
  release.resolve();
  await closing;
  expect([returned, store.closed]).toEqual([true, true]);
});

test("close joins tool and hook invocations that ignore their signal: the store stays open until each returned, and none runs after close resolved", async () => {
  // spec §2.2: close "joins task, tool, and hook invocations, including code that ignores its signal,
  // then closes Storage. Once close() resolves, no invocation code of this Harness runs".
  // Sweep 42c, 42: a beforeTool hook was the only hook joined; an afterTool hook (same tool task,
  // after execute) and a beforeRequest hook (the generation task) raced against their signal passed.
  for (const where of ["tool", "hook", "afterTool", "beforeRequest"] as const) {
    const started = deferred<AbortSignal>();
    const release = deferred();
    let returned = false;
    const stubborn = async (signal: AbortSignal) => {
      started.resolve(signal);
      await release.promise; // the signal is never obeyed
      returned = true;
    };
    const tool = defineTool({
      name: "stubborn",
      description: "Ignores its signal",
      parameters: Type.Object({}),
      async execute(_args, api) {
        if (where === "tool") await stubborn(api.signal);
        return textResult("finished");
      },
    });
    const hook = async (_call: unknown, _api: unknown, ctx: { signal: AbortSignal }) =>
      void (await stubborn(ctx.signal));
    const { h, root, store } = await open(callsThenAnswer(fauxToolCall("stubborn", {}, { id: "c1" })), {
      tools: [tool],
      ...(where === "hook" ? { hooks: { beforeTool: [hook] } } : {}),
      ...(where === "afterTool" ? { hooks: { afterTool: [hook] } } : {}),
      ...(where === "beforeRequest" ? { hooks: { beforeRequest: [hook] } } : {}),
    });
    await root.submit({ type: "input", content: "go" });
    const signal = await started.promise;
    let closed = false;
    const closing = h.close().then(() => {
      closed = true;
    });
    // The seal is in and the code's signal sent; it ignores it, so the shutdown waits for it (given
    // ample turns of the event loop: an engine that does not join it closes the store within them).
    await until(() => signal.aborted, { what: "signalled" });
    for (let turn = 0; turn < 50; turn++) await new Promise((r) => setTimeout(r, 0));
    expect([where, h.closed, closed, store.closed, returned]).toEqual([where, true, false, false, false]);
    release.resolve();
    await closing;
    expect([where, returned, store.closed]).toEqual([where, true, true]);
  }
});

test("step rule 2 in a close with a grace: an abort handler that returns without an outcome, or throws, in the grace is stopped, not faulted: its mark is kept and the next engine runs it again (draw 40b)", async () => {
  // Draw 40b: every rule-2 test closed without a grace; in the grace the run step stopped a phase
  // that returned or threw, while the abort step judged rule 4 and faulted its task.
  const gate = deferred();
  const started = [deferred(), deferred()];
  const log: string[] = [];
  const marked = (inGrace: boolean) =>
    single("marked", async (_t, _r, signal) => untilAborted(signal), {
      abort: async (task, runtime) => {
        log.push(`abort ${task.input}`);
        if (inGrace) {
          started[task.input as number]!.resolve();
          await gate.promise;
          if (task.input === 1) throw new Error("abort handler failed in the grace");
          return;
        }
        await runtime.commit(() => ({
          status: "terminal",
          outcome: { status: "aborted", reason: "after reopen" },
        }));
      },
    });
  const store = await memoryStore();
  const h = await Harness.open(store, { tasks: [marked(true)] });
  const ids = [
    await h.createTask(marked(true), 0, { ownership: { kind: "conversation" } }),
    await h.createTask(marked(true), 1, { ownership: { kind: "conversation" } }),
  ];
  await until(() => running(h) === 2, { what: "both running" });
  for (const id of ids) expect(await h.abortTask(id)).toBe("marked");
  await Promise.all(started.map((d) => d.promise));
  const published: unknown[] = [];
  h.subscribe((change) => published.push(...change.tasks));
  const closing = h.close({ graceMs: 5000 });
  gate.resolve();
  await closing;
  expect(published).toEqual([]);
  const image = await memoryStore(store.image());
  for (const id of ids) expect((await row(image, id))?.["status"]).toBe("running");
  log.length = 0;
  const next = await Harness.open(image, { tasks: [marked(false)] });
  for (const id of ids) expect((await next.getTask(id))?.abortRequested).toBe(true);
  for (const id of ids)
    expect(outcome(await done(next, id))).toEqual({ status: "aborted", reason: "after reopen" });
  expect(log.sort()).toEqual(["abort 0", "abort 1"]);
  await next.close();
});

test("an abort handler signalled by close that then commits its outcome is refused: close writes no outcome, the mark stays, and the next engine runs the handler again (draw 40b)", async () => {
  // Draw 40b: the named tests' abort handlers returned or threw when close signalled them; an engine
  // whose runtime gate refused only a run invocation's commits once closing, letting the abort
  // handler's outcome through, passed them.
  let refused: unknown;
  const { store, h, id, marked, log } = await abortMarkedAtClose(async (runtime) => {
    refused = await runtime
      .commit(() => ({ status: "terminal", outcome: { status: "aborted", reason: "at close" } }))
      .catch((e: unknown) => e);
  });
  const published: unknown[] = [];
  h.subscribe((change) => published.push(...change.tasks));
  await h.close();
  expect(refused).toMatchObject({ name: "CommitRefused", reason: "closing" });
  expect(published).toEqual([]);
  const image = await memoryStore(store.image());
  expect((await row(image, id))?.["status"]).toBe("running");
  const next = await Harness.open(image, { tasks: [marked(false)] });
  expect((await next.getTask(id))?.abortRequested).toBe(true);
  expect(outcome(await done(next, id))).toEqual({ status: "aborted", reason: "after reopen" });
  expect(log).toEqual(["abort", "abort"]);
  await next.close();
});

test("close signals every invocation at its call, an abort handler as well as a phase: both signals are aborted before close() returns its promise (sweep 42c)", async () => {
  // Sweep 42c, 41: a close that stopped run invocations only, leaving an abort handler's signal
  // untouched, passed every close test but by their joins timing out.
  const phaseSignal = deferred<AbortSignal>();
  const handlerSignal = deferred<AbortSignal>();
  const release = deferred();
  const phase = single("phase-at-close", async (_t, _r, signal) => {
    phaseSignal.resolve(signal);
    return untilAborted(signal);
  });
  const handler = single("handler-at-close", async (_t, _r, signal) => untilAborted(signal), {
    abort: async (_t, _runtime, signal) => {
      handlerSignal.resolve(signal);
      await release.promise; // returns only when the test lets it, signalled or not
    },
  });
  const store = await memoryStore();
  const h = await Harness.open(store, { tasks: [phase, handler] });
  await h.createTask(phase, null, { ownership: { kind: "conversation" } });
  const marked = await h.createTask(handler, null, { ownership: { kind: "conversation" } });
  await until(() => running(h) === 2, { what: "both tasks running" });
  expect(await h.abortTask(marked)).toBe("marked");
  const [ofPhase, ofHandler] = [await phaseSignal.promise, await handlerSignal.promise];
  expect([ofPhase.aborted, ofHandler.aborted]).toEqual([false, false]);
  const closing = h.close();
  expect([ofPhase.aborted, ofHandler.aborted]).toEqual([true, true]);
  release.resolve();
  await closing;
  expect(store.closed).toBe(true);
});
