/**
 * The Harness lifecycle of spec §2.2 that the app uses: a paused open that runs no task until
 * `resume()` or a progress call, `Harness.waitForIdle`, and `abortSubmission`.
 */
import { describe, expect, test } from "vitest";
import {
  AgentHarness,
  type Conversation,
  Harness,
  HarnessClosed,
  Submission,
  WaitCancelled,
} from "../../../worker/index.ts";
import { deferred, fauxError, memoryStore, until } from "../../../worker/testing.ts";
import { cleanups, echo, kinds, liveOf, open, transcript } from "../agent/fixtures.ts";

/** A crash image taken while conversation 1's first request was in flight: its generation is live. */
async function storeWithPendingRun() {
  const hold = deferred();
  let first = true;
  const { h, store, faux } = await open(async (req, n) => {
    if (first) {
      first = false;
      await hold.promise;
    }
    return echo(req, n);
  });
  const sub = await (await h.root()).submit({ type: "input", content: "hello" });
  await expect.poll(() => faux.requests.length).toBe(1);
  return { image: store.image(), faux, submission: sub.id };
}

describe("a paused open and resume()", () => {
  test("a harness opened paused runs no task until resume(); inspect reports the scheduling state", async () => {
    const { image, faux } = await storeWithPendingRun();
    const h = await AgentHarness.open(await memoryStore(image), {
      models: faux.models,
      defaultModel: faux.ref,
      paused: true,
    });
    cleanups.push(() => h.close().catch(() => undefined));
    const before = faux.requests.length;
    // inspect() and the read-only calls below commit nothing.
    let commits = 0;
    const stopCounting = h.subscribe(() => void commits++);
    expect(h.inspect().scheduling).toBe("paused");
    // Read-only calls never enable scheduling.
    await h.getTask(1);
    h.taskGraph();
    (await h.watchTaskGraph()).start(() => undefined);
    await h.usage();
    await (await h.root()).viewState();
    // The rest of the spec's list: a submission and its status, document reads, every conversation
    // read, and a conversation's watch.
    const root = await h.root();
    await (await h.submission(1))?.record();
    await h.doc(root.id, "pi.agent");
    await root.entries();
    await root.context();
    await root.agent();
    (await root.watch()).start(() => undefined);
    // And the usage roll-up of one conversation (it loads the conversations below: break 29K), the
    // stored agent, and a handle read from the store.
    await h.conversationUsage(root.id);
    await root.agentState();
    await h.loadedConversation(root.id);
    await new Promise((r) => setTimeout(r, 50));
    expect(faux.requests.length).toBe(before);
    expect(h.inspect().scheduling).toBe("paused");
    expect(commits).toBe(0);
    stopCounting();
    // The recovered request is held in flight, so a second resume() meets a running task: it repeats
    // no reconciliation (no commit, the task not set back to pending, no second request) (sample 22e).
    const held = deferred();
    const respond = faux.respond;
    faux.respond = async (req, n) => {
      await held.promise;
      return respond(req, n);
    };
    h.resume();
    await expect.poll(() => faux.requests.length).toBe(before + 1);
    const running = h.inspect().tasks.find((t) => t.record.kind === "pi.generation")!;
    expect(running.state.kind).toBe("running");
    const stopAgain = h.subscribe(() => void commits++);
    h.resume(); // idempotent
    await new Promise((r) => setTimeout(r, 50));
    expect(commits).toBe(0);
    expect(h.inspect().tasks.find((t) => t.record.id === running.record.id)?.state.kind).toBe("running");
    stopAgain();
    expect(h.inspect().scheduling).toBe("running");
    held.resolve();
    await h.waitForIdle();
    expect(faux.requests.length).toBe(before + 1);
    await h.close();
    expect(h.inspect().scheduling).toBe("closing");
    expect(() => h.resume()).toThrow(HarnessClosed);
  });

  test("inspect() writes nothing on a store without a root conversation either: no commit, the root is still absent (draw 37)", async () => {
    // Draw 37, 8: the test above inspects a store that has its root; an inspect() that created an
    // absent root (a write, through ensureRoot) passed it and every core test (each opens its root).
    const store = await memoryStore();
    const h = await Harness.open(store, { paused: true, root: "lazy" });
    cleanups.push(() => h.close().catch(() => undefined));
    let commits = 0;
    const stop = h.subscribe(() => void commits++);
    for (let i = 0; i < 3; i++)
      expect(h.inspect()).toMatchObject({ scheduling: "paused", tasks: [], submissions: [] });
    await new Promise((r) => setTimeout(r, 50));
    expect(commits).toBe(0);
    expect(await h.loadConversation(1)).toBeUndefined();
    expect(h.inspect().scheduling).toBe("paused");
    stop();
    await h.close();
  });

  test("a progress call resumes a paused harness: Submission.wait", async () => {
    const { image, faux, submission } = await storeWithPendingRun();
    const h = await AgentHarness.open(await memoryStore(image), {
      models: faux.models,
      defaultModel: faux.ref,
      paused: true,
    });
    cleanups.push(() => h.close().catch(() => undefined));
    const sub = (await h.submission(submission))!;
    expect(h.inspect().scheduling).toBe("paused");
    // Sweep 42c, 13: a wait() that did not resume was caught only by this test timing out; the
    // scheduling state is read as soon as wait() is called.
    const waited = sub.wait();
    expect(h.inspect().scheduling).toBe("running");
    expect((await waited).status).toBe("done");
  });

  test("a progress call resumes a paused harness: Conversation.submit", async () => {
    const { faux } = await open(echo);
    const h = await AgentHarness.open(await memoryStore(), {
      models: faux.models,
      defaultModel: faux.ref,
      paused: true,
    });
    cleanups.push(() => h.close().catch(() => undefined));
    const sub = await (await h.root()).submit({ type: "input", content: "go" });
    expect(h.inspect().scheduling).toBe("running");
    expect((await sub.wait()).status).toBe("done");
  });

  test("a progress call resumes a paused harness: Conversation.submit of a request id already admitted (a client's retry)", async () => {
    // Break 30N: every submit tried admitted a new submission; a submit resuming only after the
    // request-id check, so that a retry returning the admitted one did not resume, passed.
    const hold = deferred();
    let first = true;
    const { h, store, faux } = await open(async (req, n) => {
      if (first) {
        first = false;
        await hold.promise;
      }
      return echo(req, n);
    });
    const sub = await (await h.root()).submit({ type: "input", content: "hello", requestId: "r1" });
    await expect.poll(() => faux.requests.length).toBe(1);
    const again = await AgentHarness.open(await memoryStore(store.image()), {
      models: faux.models,
      defaultModel: faux.ref,
      paused: true,
    });
    cleanups.push(() => again.close().catch(() => undefined));
    const retried = await (await again.root()).submit({ type: "input", content: "hello", requestId: "r1" });
    expect(retried.id).toBe(sub.id);
    expect(again.inspect().scheduling).toBe("running");
  });

  const progressCalls: Array<[string, (h: AgentHarness, root: Conversation) => Promise<unknown>]> = [
    ["Conversation.compact", (_h, root) => root.compact()],
    ["Conversation.abort", (_h, root) => root.abort()],
    ["Conversation.waitForIdle", (_h, root) => root.waitForIdle()],
    ["Harness.waitForIdle", (h) => h.waitForIdle()],
    ["Harness.waitForTask", (h) => h.waitForTask(1)],
  ];
  test.each(progressCalls)("a progress call resumes a paused harness: %s", async (_name, call) => {
    const { image, faux } = await storeWithPendingRun();
    const h = await AgentHarness.open(await memoryStore(image), {
      models: faux.models,
      defaultModel: faux.ref,
      paused: true,
    });
    cleanups.push(() => h.close().catch(() => undefined));
    const root = await h.root();
    expect(h.inspect().scheduling).toBe("paused");
    const pending = call(h, root);
    expect(h.inspect().scheduling).toBe("running");
    await pending;
  });

  test("without the paused option a harness schedules at once (unchanged default)", async () => {
    const { h } = await open(echo);
    expect(h.inspect().scheduling).toBe("running");
  });
});

describe("Harness.waitForIdle", () => {
  test("Harness.waitForIdle resolves once no ordinary work is live in any conversation", async () => {
    const hold = deferred();
    const { h, root } = await open(async (req, n) => {
      await hold.promise;
      return echo(req, n);
    });
    const other = await h.createConversation({ ownership: { kind: "ownerless" } });
    await root.submit({ type: "input", content: "one" });
    await other.submit({ type: "input", content: "two" });
    let idle = false;
    const waiting = h.waitForIdle().then(() => {
      idle = true;
    });
    await new Promise((r) => setTimeout(r, 50));
    expect(idle).toBe(false);
    hold.resolve();
    await waiting;
    expect(root.busy).toBe(false);
    expect(other.busy).toBe(false);
    expect(h.inspect().tasks.length).toBe(0);
  });

  test("work blocked on a retry deadline is live: idle waits resolve only after the retried answer", async () => {
    const { h, root } = await open(
      (req, n) => (n === 1 ? fauxError("503 Service Unavailable") : echo(req, n)),
      {
        settings: { retry: { baseDelayMs: 300, maxDelayMs: 300 } },
      },
    );
    const sub = await root.submit({ type: "input", content: "one" });
    await until(() => liveOf(h).generation?.retry !== undefined, { what: "retry scheduled" });
    await Promise.all([root.waitForIdle(), h.waitForIdle()]);
    expect((await sub.record()).status).toBe("done");
    expect(kinds(await transcript(root))).toEqual(["pi.user", "pi.assistant", "pi.assistant"]);
  });

  test("cancelling Harness.waitForIdle stops only that wait; the work goes on", async () => {
    const hold = deferred();
    const { h, root } = await open(async (req, n) => {
      await hold.promise;
      return echo(req, n);
    });
    const sub = await root.submit({ type: "input", content: "one" });
    // Other waiters on the same work: the harness's and the conversation's, not cancelled.
    const settledEarly: string[] = [];
    const others = [h.waitForIdle(), root.waitForIdle()].map((wait, i) =>
      wait.finally(() => void settledEarly.push(i === 0 ? "harness" : "conversation")),
    );
    const cancel = new AbortController();
    const waiting = h.waitForIdle(cancel.signal);
    const cancelRoot = new AbortController();
    const waitingRoot = root.waitForIdle(cancelRoot.signal);
    cancel.abort();
    cancelRoot.abort();
    await expect(waiting).rejects.toThrow(WaitCancelled);
    await expect(waitingRoot).rejects.toThrow(WaitCancelled);
    // The other waiters are still waiting: a commit after the cancellations leaves them pending
    // (reading 23b: neither rejected nor resolved by another waiter's cancellation).
    await h.transaction(() => undefined);
    expect(settledEarly).toEqual([]);
    hold.resolve();
    expect((await sub.wait()).status).toBe("done");
    await Promise.all(others);
    expect((await h.tasks()).map((t) => t.abortRequested)).toEqual([false]);
  });

  test("an idle wait refuses by a rejected promise, never a throw at the call: a cancelled signal (WaitCancelled) and a closed harness (HarnessClosed), the harness's and a conversation's alike, and a move's steps", async () => {
    const { h, root } = await open(echo);
    const cancelled = new AbortController();
    cancelled.abort();
    const refusals: unknown[] = [];
    const asked = (ask: () => Promise<unknown>) => {
      let promise: Promise<unknown>;
      try {
        promise = ask();
      } catch (error) {
        refusals.push(`thrown at the call: ${(error as Error).name}`);
        return;
      }
      return promise.then(
        () => refusals.push("resolved"),
        (error: unknown) => refusals.push((error as Error).name),
      );
    };
    await asked(() => h.waitForIdle(cancelled.signal));
    await asked(() => root.waitForIdle(cancelled.signal));
    await asked(() => h.waitUntil(() => true, cancelled.signal));
    await h.close();
    await asked(() => h.waitForIdle());
    await asked(() => root.waitForIdle());
    await asked(() => h.waitUntil(() => false));
    // The move's steps refuse the same way once closed.
    await asked(() => h.cancelMove("a-transfer"));
    await asked(() => h.stageMovePart("a-transfer", 0, 2, "part"));
    expect(refusals).toEqual([
      "WaitCancelled",
      "WaitCancelled",
      "WaitCancelled",
      "HarnessClosed",
      "HarnessClosed",
      "HarnessClosed",
      "HarnessClosed",
      "HarnessClosed",
    ]);
  });

  test("an idle wait whose signal was cancelled before it was asked rejects at once, the harness's and a conversation's alike; the work and the other waiters go on (draw 37, 15)", async () => {
    // Draw 37-A: a wait that added its listener to an already cancelled signal (never told) passed the
    // named test, whose cancellations all come while the wait is pending: the conversation's wait went
    // on and resolved with the work.
    const hold = deferred();
    const { h, root } = await open(async (req, n) => {
      await hold.promise;
      return echo(req, n);
    });
    const sub = await root.submit({ type: "input", content: "one" });
    const other = root.waitForIdle();
    const cancelled = new AbortController();
    cancelled.abort();
    const ended: string[] = [];
    // Each asked from an async caller (the refusal is a rejected promise either way: the test above).
    const asks = [
      async () => h.waitForIdle(cancelled.signal),
      async () => root.waitForIdle(cancelled.signal),
    ];
    const waits = asks.map((ask, i) =>
      ask().then(
        () => void ended.push(`${i === 0 ? "harness" : "conversation"} resolved`),
        (error: unknown) => {
          expect(error).toBeInstanceOf(WaitCancelled);
          ended.push(`${i === 0 ? "harness" : "conversation"} cancelled`);
        },
      ),
    );
    // Both end before the work does: a commit and a turn of the event loop later, the run still held.
    await h.transaction(() => undefined);
    await new Promise((r) => setTimeout(r, 0));
    expect(ended).toEqual(["harness cancelled", "conversation cancelled"]);
    hold.resolve();
    expect((await sub.wait()).status).toBe("done");
    await Promise.all([other, ...waits]);
    expect((await h.tasks()).map((t) => t.abortRequested)).toEqual([false]);
  });
});

describe("abortSubmission", () => {
  test("abortSubmission withdraws a queued submission and reports already_placed, settled and not_found", async () => {
    const hold = deferred();
    const { h, root } = await open(async (req, n) => {
      await hold.promise;
      return echo(req, n);
    });
    const placed = await root.submit({ type: "input", content: "one" });
    const queued = await root.submit({ type: "input", content: "two" });
    const other = await h.createConversation({ ownership: { kind: "ownerless" } });
    // The id exists, but not in the conversation named.
    expect(await h.abortSubmission(queued.id, undefined, other.id)).toBe("not_found");
    expect(await h.abortSubmission(queued.id)).toBe("aborted");
    expect(await queued.wait()).toEqual({ status: "unanswered", reason: "aborted" });
    expect(await h.abortSubmission(placed.id, undefined, root.id)).toBe("already_placed");
    hold.resolve();
    await placed.wait();
    expect(await h.abortSubmission(placed.id)).toBe("settled");
    // A write is never placed: one done (its entry appended) is settled too (draw 33b: a done write
    // answering already_placed passed).
    const write = await root.submit({ type: "write", entry: { kind: "app.note", data: "kept" } });
    expect((await write.record()).status).toBe("done");
    expect(await h.abortSubmission(write.id)).toBe("settled");
    expect(await write.abort()).toBe("settled");
    expect(await h.abortSubmission(9999)).toBe("not_found");
  });

  test("Submission.abort of a submission deleted with its conversation answers settled, as its wait says, and throws nothing", async () => {
    const { h } = await open(echo);
    const other = await h.createConversation({ ownership: { kind: "ownerless" } });
    const sub = await other.submit({ type: "input", content: "one" });
    await sub.wait();
    await h.deleteConversation(other.id);
    expect(await sub.wait()).toEqual({ status: "unanswered", reason: "deleted" });
    expect(await sub.abort()).toBe("settled");
  });

  test("after a reopen, abortSubmission and Submission.abort of a submission settled before it answer settled, not not_found", async () => {
    const store = await memoryStore();
    const hold = deferred();
    const first = await open(
      async (req, n) => {
        await hold.promise;
        return echo(req, n);
      },
      { store },
    );
    const settled = await first.root.submit({ type: "input", content: "one" });
    hold.resolve();
    await settled.wait();
    await first.h.close();
    // Only unsettled submissions are read at open: a settled one is read from the store when asked for.
    const { h, root } = await open(echo, { store: await memoryStore(store.image()) });
    expect(await h.abortSubmission(settled.id)).toBe("settled");
    expect(await h.abortSubmission(settled.id, undefined, root.id)).toBe("settled");
    expect(await h.abortSubmission(settled.id + 1000)).toBe("not_found");
    // A handle on a harness that has not read the record yet (made as the engine makes one).
    const second = await open(echo, { store: await memoryStore(store.image()) });
    expect(await new Submission(second.h, settled.id, second.root.id).abort()).toBe("settled");
  });
});
