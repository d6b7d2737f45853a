/**
 * The watch contract (spec §9.2, §9.3; docs/ARCHITECTURE.md, watches): delivery never runs inline, the value advances
 * just before each callback, callbacks are awaited one at a time, stop() is idempotent and discards
 * what is pending, a throwing listener ends only its own watch, and a conversation's watch sees only
 * publications that touch that conversation.
 */
import { expect, test } from "vitest";
import { internals } from "../../../worker/core/internals.ts";
import { Watch } from "../../../worker/core/observe.ts";
import {
  type AgentHarness,
  type ConversationId,
  type Frame,
  UnknownConversation,
  watchEvents,
} from "../../../worker/index.ts";
import { deferred, until } from "../../../worker/testing.ts";
import { echo, open, reopen } from "../agent/fixtures.ts";
import { parked, settle } from "./fixtures.ts";

const frame = (seq: number): Frame<number> => ({ seq, value: seq, ops: [] });

/**
 * Close `h` while a commit admitted before the seal holds the line (it appends a note to
 * `conversationId`, so it settles during close); `atSeal` runs once close has begun, before that
 * commit settles. Resolves once both have settled.
 */
async function closeDuringHeldCommit(
  h: AgentHarness,
  conversationId: ConversationId,
  atSeal: () => void = () => undefined,
): Promise<void> {
  const gate = deferred();
  const inCallback = deferred();
  const late = h.transaction(async (tx) => {
    inCallback.resolve();
    await gate.promise;
    tx.appendEntry(conversationId, { kind: "note", data: { n: 2 } });
  });
  await inCallback.promise;
  const closing = h.close();
  await Promise.resolve();
  atSeal();
  gate.resolve();
  await late;
  await closing;
}

/** Counts the session's commit subscriptions (one per conversation mount while it lives). */
function countSubscriptions(h: object): { readonly count: number } {
  const session = internals(h).session;
  const subscribe = session.subscribe.bind(session);
  const counter = { count: 0 };
  session.subscribe = (listener) => {
    counter.count++;
    const off = subscribe(listener);
    return () => {
      counter.count--;
      off();
    };
  };
  return counter;
}

test("start() never calls the listener inline, and watch.value stays the acquisition value until delivery; a second start() is refused", async () => {
  const watch = new Watch(0);
  watch.push(frame(1));
  expect(watch.value).toBe(0);
  const seen: Array<[number, number]> = [];
  watch.start((f) => void seen.push([f.value, watch.value]));
  expect(seen).toEqual([]);
  // The listener is the sole one: a second start() is refused.
  expect(() => watch.start(() => undefined)).toThrow(/one listener/);
  await until(() => seen.length === 1, { what: "first delivery" });
  // The value advanced immediately before the callback ran.
  expect(seen).toEqual([[1, 1]]);
});

test("each callback is awaited before the next is delivered; pushes never wait for callbacks", async () => {
  const watch = new Watch(0);
  const gate = deferred();
  const seen: number[] = [];
  const values: number[] = [];
  watch.start(async (f) => {
    seen.push(f.value);
    values.push(watch.value);
    if (f.value === 1) await gate.promise;
  });
  await settle();
  watch.push(frame(1));
  // A push (a commit's publication) never runs the listener inline, on the line (reading 23d: only a
  // frame pushed before start() was shown delivered later).
  expect(seen).toEqual([]);
  watch.push(frame(2));
  watch.push(frame(3));
  await settle();
  expect(seen).toEqual([1]);
  expect(watch.pending).toBe(2);
  gate.resolve();
  await until(() => seen.length === 3, { what: "the rest delivered" });
  expect(seen).toEqual([1, 2, 3]);
  // watch.value is each frame's own value as its callback runs, also for frames that waited behind
  // a blocked one, never the newest pending (break 28H: only a lone frame was read).
  expect(values).toEqual([1, 2, 3]);
});

test("repeated overflow replaces the undelivered suffix again; later frames follow normally", async () => {
  const watch = new Watch(0, 2);
  for (let seq = 1; seq <= 3; seq++) watch.push(frame(seq));
  expect(watch.pending).toBe(1);
  watch.push(frame(4));
  watch.push(frame(5));
  expect(watch.pending).toBe(1);
  const seen: Frame<number>[] = [];
  watch.start((f) => void seen.push(f));
  await until(() => seen.length === 1, { what: "replacement delivered" });
  expect(seen[0]).toEqual({ seq: 5, value: 5, ops: [{ op: "replace" }] });
  watch.push(frame(6));
  await until(() => seen.length === 2, { what: "a normal frame after it" });
  expect(seen[1]).toEqual(frame(6));
});

test("stop() is idempotent: it discards pending frames, no callback follows, and every call returns the same end", async () => {
  const watch = new Watch(0);
  const gate = deferred();
  const seen: number[] = [];
  watch.start(async (f) => {
    seen.push(f.value);
    await gate.promise;
  });
  watch.push(frame(1));
  watch.push(frame(2));
  await until(() => seen.length === 1, { what: "first callback running" });
  const first = watch.stop();
  const second = watch.stop();
  expect(watch.pending).toBe(0);
  // The value stays the latest delivered revision: the discarded frame 2 never becomes it (break
  // 31G: a stop() that moved the value to the newest pending frame passed every test).
  expect(watch.value).toBe(1);
  // The common terminal promise (spec §9.2): every stop() returns `closed` itself (reading 24e).
  expect(first).toBe(watch.closed);
  expect(second).toBe(first);
  // The terminal result, from stop() and `closed` alike, does not wait for the callback already
  // running: that one stays the caller's.
  const early = await Promise.race([
    Promise.all([first, second, watch.closed]),
    settle().then(() => "waiting"),
  ]);
  expect(early).toEqual(["stopped", "stopped", "stopped"]);
  gate.resolve();
  expect(await first).toBe("stopped");
  expect(await second).toBe("stopped");
  watch.push(frame(3));
  await settle();
  expect(seen).toEqual([1]);
  expect(watch.value).toBe(1);
  // Stopped before start(), a watch keeps its acquisition value, whatever was buffered.
  const unstarted = new Watch(0);
  unstarted.push(frame(1));
  expect(await unstarted.stop()).toBe("stopped");
  expect(unstarted.value).toBe(0);
});

test("a throwing listener ends only its own watch with listener_error, discarding what was pending; the first reason stays, whatever stops or closes it later", async () => {
  const { h, root } = await open(echo);
  const failing = await root.watch();
  const healthy = await root.watch();
  const healthySeen: number[] = [];
  const failingSeen: number[] = [];
  const entered = deferred();
  const fail = deferred();
  failing.start(async (f) => {
    failingSeen.push(f.value.entries.length);
    entered.resolve();
    await fail.promise;
    throw new Error("listener bug");
  });
  healthy.start((f) => void healthySeen.push(f.value.entries.length));
  await root.submit({ type: "write", entry: { kind: "note", data: { n: 1 } } });
  await entered.promise;
  // Two more frames wait behind the listener that is about to throw.
  await (await root.submit({ type: "write", entry: { kind: "note", data: { n: 2 } } })).wait();
  await (await root.submit({ type: "write", entry: { kind: "note", data: { n: 3 } } })).wait();
  await until(() => failing.pending === 2, { what: "two frames pending" });
  fail.resolve();
  expect(await failing.closed).toBe("listener_error");
  expect(failing.pending).toBe(0);
  await settle();
  expect(failingSeen).toEqual([1]);
  await root.submit({ type: "write", entry: { kind: "note", data: { n: 4 } } });
  await until(() => healthySeen.at(-1) === 4, { what: "the other watch goes on" });
  // The first reason wins: a later stop, and the harness closing, leave it as it was.
  expect(await failing.stop()).toBe("listener_error");
  await h.close();
  expect(await failing.closed).toBe("listener_error");
  expect(await healthy.closed).toBe("closed");
});

test("a listener that throws synchronously (a plain function, not a rejected promise) ends its watch with listener_error too, discarding what was pending (break 31G)", async () => {
  // Break 31G: every throwing listener in these tests was async (a rejection); a delivery that
  // called the listener outside its try passed them, and a synchronous throw left the watch open
  // with its frames stuck.
  const watch = new Watch(0);
  watch.push(frame(1));
  watch.push(frame(2));
  const seen: number[] = [];
  watch.start((f) => {
    seen.push(f.value);
    throw new Error("sync listener bug");
  });
  const end = await Promise.race([watch.closed, settle().then(() => "still open")]);
  expect(end).toBe("listener_error");
  expect(seen).toEqual([1]);
  expect(watch.pending).toBe(0);
  expect(await watch.stop()).toBe("listener_error");
});

test("a callback still running when its watch stops may reject later: the rejection is observed, never unhandled, and the end stays stopped (draw 39, 6)", async () => {
  // Spec §9.2: "The first termination reason wins, and every late rejection is observed." Draw 39,
  // 6: a delivery that rethrew a failure arriving after the watch had ended (an unhandled rejection)
  // passed every test: no listener failed after its watch was stopped.
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => void unhandled.push(reason);
  process.on("unhandledRejection", onUnhandled);
  try {
    const watch = new Watch(0);
    const entered = deferred();
    const fail = deferred();
    watch.push(frame(1));
    watch.push(frame(2));
    const seen: number[] = [];
    watch.start(async (f) => {
      seen.push(f.value);
      entered.resolve();
      await fail.promise;
      throw new Error("late listener failure");
    });
    await entered.promise;
    expect(await watch.stop()).toBe("stopped");
    fail.resolve();
    await settle();
    await new Promise((r) => setTimeout(r, 20));
    expect(unhandled).toEqual([]);
    expect(await watch.closed).toBe("stopped");
    expect(seen).toEqual([1]);
  } finally {
    process.off("unhandledRejection", onUnhandled);
  }
});

test("an agent event stream whose listener throws ends with listener_error too, and only that stream: another stream and a watch of the same conversation go on (draw 39, 6)", async () => {
  // Draw 39, 6: an event stream that swallowed its listener's failure (the stream left open, its
  // later batches still delivered) passed every test: each throwing listener was a conversation
  // watch's or a bare Watch's.
  const { root, h } = await open(echo);
  const failing = await watchEvents(h, root.id);
  const other = await watchEvents(h, root.id);
  const watch = await root.watch();
  let failingCalls = 0;
  const otherSeen: unknown[] = [];
  const watchSeen: number[] = [];
  failing.start(async () => {
    failingCalls++;
    throw new Error("events listener bug");
  });
  other.start((batch) => void otherSeen.push(...batch));
  watch.start((f) => void watchSeen.push(f.value.entries.length));
  await (await root.submit({ type: "write", entry: { kind: "note", data: { n: 1 } } })).wait();
  expect(await Promise.race([failing.closed, settle().then(() => "still open")])).toBe("listener_error");
  await (await root.submit({ type: "write", entry: { kind: "note", data: { n: 2 } } })).wait();
  await until(() => watchSeen.at(-1) === 2, { what: "the watch goes on" });
  await until(() => otherSeen.filter((e) => (e as { type: string }).type === "entry_appended").length === 2, {
    what: "the other stream goes on",
  });
  expect(failingCalls).toBe(1);
  expect(failing.pending).toBe(0);
  expect(await failing.stop()).toBe("listener_error");
  await other.stop();
  await watch.stop();
});

test("an agent event stream's start() installs the sole listener too: a second start() is refused, the first listener alone gets every batch, and a batch buffered before start() is never delivered inline (sweep 42, 122)", async () => {
  // Sweep 42, 122: the sole listener was read on a bare Watch only; a stream whose second start()
  // silently swapped in the new listener passed every test.
  const { root, h } = await open(echo);
  const stream = await watchEvents(h, root.id);
  await (await root.submit({ type: "write", entry: { kind: "note", data: { n: 1 } } })).wait();
  expect(stream.pending).toBe(1);
  const first: string[] = [];
  const second: string[] = [];
  stream.start((batch) => void first.push(...batch.map((e) => e.type)));
  expect(first).toEqual([]);
  expect(() => stream.start((batch) => void second.push(...batch.map((e) => e.type)))).toThrow(
    /one listener/,
  );
  await until(() => first.includes("entry_appended"), { what: "the buffered batch" });
  await (await root.submit({ type: "write", entry: { kind: "note", data: { n: 2 } } })).wait();
  await until(() => first.filter((t) => t === "entry_appended").length === 2, { what: "the next batch" });
  expect(second).toEqual([]);
  await stream.stop();
});

test("a conversation's watch gets no frame for a publication that touches only another conversation", async () => {
  const parkedWorker = parked("watch.worker");
  const { h, root } = await open(echo, { tasks: [parkedWorker] });
  const other = await h.createConversation({ ownership: { kind: "ownerless" } });
  const watch = await root.watch();
  const seen: Frame<unknown>[] = [];
  watch.start((f) => void seen.push(f));
  await (await other.submit({ type: "write", entry: { kind: "note", data: { n: 1 } } })).wait();
  // Nor for one that writes only the other conversation's document.
  await h.transaction((tx) => tx.writeDoc(other.id, "app.x", { a: 1 }));
  // Nor for one that deletes the other conversation, which leaves this watch open (break 29J: a
  // mount ended by any conversation's deletion passed).
  await h.deleteConversation(other.id);
  // Nor for one that touches only the conversation's task records, no entry nor document of its
  // mount (break 29J: a mount that took a task record of its conversation for a touch passed).
  const worker = await h.createTask(parkedWorker, null, {
    ownership: { kind: "conversation" },
    conversationId: root.id,
  });
  // Nor for one that writes only that task's own document (draw 32, 18: a mount that took the
  // documents of its conversation's tasks passed).
  await h.transaction((tx) => tx.writeDoc({ kind: "task", taskId: worker }, "app.t", { t: 1 }));
  await h.abortTask(worker);
  await settle();
  expect(seen).toEqual([]);
  await (await root.submit({ type: "write", entry: { kind: "note", data: { n: 2 } } })).wait();
  await until(() => seen.length === 1, { what: "a frame for its own conversation" });
  expect(await watch.stop()).toBe("stopped");
  // A fork's mount shows its parent's entries through the fork point and follows only the fork.
  const child = await root.fork((await root.entries()).at(-1)!.id, { ownership: { kind: "ownerless" } });
  const childWatch = await child.watch();
  const notes = (v: { entries: ReadonlyArray<{ data?: unknown }> }) =>
    v.entries.map((e) => (e.data as { n: number } | undefined)?.n);
  expect(notes(childWatch.value)).toEqual([2]);
  const childSeen: Frame<unknown>[] = [];
  childWatch.start((f) => void childSeen.push(f));
  await (await root.submit({ type: "write", entry: { kind: "note", data: { n: 3 } } })).wait();
  // Nor its parent's documents (draw 36d: a fork's mount that also took its parent's document
  // writes passed, only a parent's entry having been written after the fork).
  await h.transaction((tx) => tx.writeDoc(root.id, "app.parent", { p: 1 }));
  await settle();
  expect(childSeen).toEqual([]);
  expect("app.parent" in childWatch.value.docs).toBe(false);
  await (await child.submit({ type: "write", entry: { kind: "note", data: { n: 4 } } })).wait();
  await until(() => childSeen.length === 1, { what: "a frame for the fork's own entry" });
  expect(notes(childWatch.value)).toEqual([2, 4]);
  // The other way round: a publication touching only the fork (its entry, its document) gives the
  // parent's watch no frame (draw 32, 18: a mount that also took its forks' entries and documents
  // passed, the parent's watch having stopped before the fork was made).
  const rootWatch = await root.watch();
  const rootSeen: Frame<unknown>[] = [];
  rootWatch.start((f) => void rootSeen.push(f));
  await (await child.submit({ type: "write", entry: { kind: "note", data: { n: 5 } } })).wait();
  await h.transaction((tx) => tx.writeDoc(child.id, "app.forked", { f: 1 }));
  await until(() => childSeen.length === 3, { what: "the fork's frames" });
  await settle();
  expect(rootSeen).toEqual([]);
  expect(notes(rootWatch.value)).toEqual([2, 3]);
  expect("app.forked" in rootWatch.value.docs).toBe(false);
  await childWatch.stop();
  await rootWatch.stop();
});

test("a publication touching only another conversation makes no revision of the mount: its view stays the same object and an unstarted event stream holds no batch for it (draw 32b)", async () => {
  // Draw 32b: the test above watches for frames only; a mount that replaced its view (a copy) on
  // every publication touching nothing it mounts, handing its observers a changed view, passed it.
  const { h, root } = await open(echo);
  const other = await h.createConversation({ ownership: { kind: "ownerless" } });
  const watch = await root.watch();
  const stream = await watchEvents(h, root.id);
  await (await other.submit({ type: "write", entry: { kind: "note", data: { n: 1 } } })).wait();
  await h.transaction((tx) => tx.writeDoc(other.id, "app.x", { a: 1 }));
  await settle();
  expect(stream.pending).toBe(0);
  const again = await root.watch();
  expect(again.value).toBe(watch.value);
  await again.stop();
  await watch.stop();
  await stream.stop();
});

test("deleting a document removes its key from the view's docs", async () => {
  const { h, root } = await open(echo);
  await h.transaction((tx) => tx.writeDoc(root.id, "app.extra", { a: 1 }));
  expect((await root.viewState()).docs["app.extra"]).toEqual({ a: 1 });
  await h.transaction((tx) => tx.retireDoc(root.id, "app.extra"));
  expect("app.extra" in (await root.viewState()).docs).toBe(false);
});

test("closing the harness ends every watch at its seal, keeping its last value: a commit that settles during close sends it nothing", async () => {
  const { h, root, store, faux } = await open(echo);
  await (await root.submit({ type: "write", entry: { kind: "note", data: { n: 1 } } })).wait();
  const watch = await root.watch();
  const seen: unknown[] = [];
  watch.start((f) => void seen.push(f));
  const before = watch.value;
  // A commit admitted before the seal, holding the line while close begins: it settles during close.
  await closeDuringHeldCommit(h, root.id);
  expect(await watch.closed).toBe("closed");
  expect(seen).toEqual([]);
  expect(watch.value).toBe(before);
  // The commit itself was stored.
  const next = await reopen(store, { models: faux.models, defaultModel: faux.ref });
  expect((await (await next.root()).entries()).map((e) => e.data)).toContainEqual({ n: 2 });
});

test("closing the harness ends a paged watch (the tab's) and a task-graph watch at its seal too, keeping their last values: a commit that settles during close sends them nothing", async () => {
  // Break 30P: close ending the plain mounts' watches only left a paged mount's watch open, taking
  // the late commit; no test held a paged watch at close.
  const { h, root } = await open(echo);
  await (await root.submit({ type: "write", entry: { kind: "note", data: { n: 1 } } })).wait();
  const paged = await h.pageMount(root.id).watch();
  const graph = await h.watchTaskGraph();
  const seen: unknown[] = [];
  paged.start((f) => void seen.push(f));
  graph.start((f) => void seen.push(f));
  const [pagedBefore, graphBefore] = [paged.value, graph.value];
  let pagedEnd: unknown;
  let graphEnd: unknown;
  void paged.closed.then((r) => void (pagedEnd = r));
  void graph.closed.then((r) => void (graphEnd = r));
  // Ended at the seal, before the held commit settles.
  await closeDuringHeldCommit(h, root.id, () => {
    expect([pagedEnd, graphEnd]).toEqual(["closed", "closed"]);
  });
  expect(seen).toEqual([]);
  expect(paged.value).toBe(pagedBefore);
  expect(graph.value).toBe(graphBefore);
});

test("closing the harness ends an agent event stream at its seal too (a mount's observer, besides its watches): closed at once, a commit that settles during close sends it nothing (draw 40c)", async () => {
  // Draw 40c: close ending a mount's watches but not its observers left an event stream open for
  // good (its `closed` never settled); every named close test held watches only.
  const { h, root } = await open(echo);
  await (await root.submit({ type: "write", entry: { kind: "note", data: { n: 1 } } })).wait();
  const stream = await watchEvents(h, root.id);
  const seen: unknown[] = [];
  stream.start((events) => void seen.push(events));
  let end: unknown = "open";
  void stream.closed.then((r) => void (end = r));
  // Ended at the seal, before the held commit settles.
  await closeDuringHeldCommit(h, root.id, () => {
    expect(end).toBe("closed");
  });
  await settle();
  expect(seen).toEqual([]);
  expect(stream.snapshot.entries.map((e) => e.data)).toContainEqual({ n: 1 });
});

test("a watch's default limit is 100 undelivered frames: the 101st collapses them into one replace", () => {
  const watch = new Watch(0);
  for (let seq = 1; seq <= 100; seq++) watch.push(frame(seq));
  expect([watch.pending, watch.collapsed]).toEqual([100, 0]);
  watch.push(frame(101));
  expect([watch.pending, watch.collapsed]).toEqual([1, 100]);
});

test("a watch, an agent event stream and viewState() are observers of the same one mount: the first builds it, it stays while any observes, the last drops it (spec §9.3)", async () => {
  const { h, root } = await open(echo);
  const subscriptions = countSubscriptions(h);
  // viewState() alone builds the mount for its read and drops it after: nothing stays subscribed.
  expect((await root.viewState()).conversation.id).toBe(root.id);
  expect(subscriptions.count).toBe(0);
  // An event stream first: it builds the mount; a watch and a viewState() read join it.
  const events = await watchEvents(h, root.id);
  const mounted = h.mount(root.id);
  expect(subscriptions.count).toBe(1);
  const watch = await root.watch();
  const view = await root.viewState();
  expect(h.mount(root.id)).toBe(mounted);
  expect(subscriptions.count).toBe(1);
  expect(view).toBe(watch.value);
  expect(events.snapshot.entries).toBe(view.entries);
  // The stream gone, the watch keeps the mount; the watch gone too, the mount is dropped.
  await events.stop();
  expect(h.mount(root.id)).toBe(mounted);
  expect(subscriptions.count).toBe(1);
  await watch.stop();
  expect(subscriptions.count).toBe(0);
  expect(h.mount(root.id)).not.toBe(mounted);
  // The other way round: the watch gone first, the event stream keeps the mount and its events.
  const watch2 = await root.watch();
  const events2 = await watchEvents(h, root.id);
  const remounted = h.mount(root.id);
  const seen: unknown[] = [];
  events2.start((batch) => void seen.push(...batch));
  await watch2.stop();
  expect(h.mount(root.id)).toBe(remounted);
  expect(subscriptions.count).toBe(1);
  await (await root.submit({ type: "write", entry: { kind: "note", data: { n: 1 } } })).wait();
  await until(() => seen.length > 0, { what: "the stream delivered the commit after the watch left" });
  await events2.stop();
  expect(subscriptions.count).toBe(0);
});

test("an observer that ends by its own listener's failure leaves the mount like one that stops: the last one's failure drops it (draw 38b)", async () => {
  // Draw 38b: every named observer left by stop(); a mount released only by a stop kept its commit
  // subscription after its last watch ended with listener_error.
  const { h, root } = await open(echo);
  const subscriptions = countSubscriptions(h);
  const kept = await root.watch();
  const failing = await root.watch();
  const mounted = h.mount(root.id);
  failing.start(() => {
    throw new Error("listener failed");
  });
  await (await root.submit({ type: "write", entry: { kind: "note", data: { n: 1 } } })).wait();
  expect(await failing.closed).toBe("listener_error");
  expect(subscriptions.count).toBe(1);
  expect(h.mount(root.id)).toBe(mounted);
  kept.start(() => {
    throw new Error("the last one fails too");
  });
  expect(await kept.closed).toBe("listener_error");
  expect(subscriptions.count).toBe(0);
  expect(h.mount(root.id)).not.toBe(mounted);
});

test("a first observer whose mount cannot be built (its conversation deleted) leaves nothing mounted: no commit subscription stays (draw 38b)", async () => {
  // Draw 38b: every named first observer built its mount; a mount whose load failed dropped from
  // the map but kept its commit subscription passed them.
  const { h } = await open(echo);
  const subscriptions = countSubscriptions(h);
  const other = await h.createConversation({ ownership: { kind: "ownerless" } });
  await h.deleteConversation(other.id);
  await expect(other.watch()).rejects.toBeInstanceOf(UnknownConversation);
  await expect(other.viewState()).rejects.toBeInstanceOf(UnknownConversation);
  expect(subscriptions.count).toBe(0);
});

test("every observer of a conversation shares one mount, built by the first and dropped after the last: two watches receive the very same view values; a later observer builds it again from committed state", async () => {
  const { h, root } = await open(echo);
  // Count the mount's commit subscriptions: one per mount, released when it is dropped.
  const subscriptions = countSubscriptions(h);
  const a = await root.watch();
  const mounted = h.mount(root.id);
  const b = await root.watch();
  expect(h.mount(root.id)).toBe(mounted);
  expect(subscriptions.count).toBe(1);
  expect(a.value).toBe(b.value);
  const seenA: unknown[] = [];
  const seenB: unknown[] = [];
  a.start((f) => void seenA.push(f.value));
  b.start((f) => void seenB.push(f.value));
  await (await root.submit({ type: "write", entry: { kind: "note", data: { n: 1 } } })).wait();
  await until(() => seenA.length === 1 && seenB.length === 1, { what: "both delivered" });
  expect(seenA[0]).toBe(seenB[0]);
  // One observer left: the mount stays and follows commits.
  await a.stop();
  expect(subscriptions.count).toBe(1);
  await (await root.submit({ type: "write", entry: { kind: "note", data: { n: 2 } } })).wait();
  await until(() => seenB.length === 2, { what: "b delivered" });
  expect(seenA).toHaveLength(1);
  // The last one gone: the mount is dropped and follows nothing.
  await b.stop();
  expect(subscriptions.count).toBe(0);
  await (await root.submit({ type: "write", entry: { kind: "note", data: { n: 3 } } })).wait();
  // A later observer builds a new mount from the committed state, the unobserved commit included.
  const c = await root.watch();
  expect(h.mount(root.id)).not.toBe(mounted);
  expect(subscriptions.count).toBe(1);
  expect(c.value.entries.map((e) => (e.data as { n: number }).n)).toEqual([1, 2, 3]);
  await c.stop();
  expect(subscriptions.count).toBe(0);
});

test("the paged mount (the tab's watch) is shared the same way and dropped after its last watch: a later paged watch builds it again from committed state and follows the commits after it (draw 34d)", async () => {
  // Draw 34d: every named test observed the plain mount; a paged mount kept in its map after its
  // last watch stopped (unsubscribed) handed the next tab a stale view that followed nothing.
  const { h, root } = await open(echo);
  const subscriptions = countSubscriptions(h);
  const a = await h.pageMount(root.id).watch();
  const mounted = h.pageMount(root.id);
  const b = await h.pageMount(root.id).watch();
  expect(h.pageMount(root.id)).toBe(mounted);
  expect(subscriptions.count).toBe(1);
  expect(a.value).toBe(b.value);
  await a.stop();
  await b.stop();
  expect(subscriptions.count).toBe(0);
  await (await root.submit({ type: "write", entry: { kind: "note", data: { n: 1 } } })).wait();
  const c = await h.pageMount(root.id).watch();
  expect(h.pageMount(root.id)).not.toBe(mounted);
  expect(subscriptions.count).toBe(1);
  expect(c.value.entries.map((e) => (e.data as { n: number }).n)).toEqual([1]);
  const seen: number[][] = [];
  c.start((f) => void seen.push(f.value.entries.map((e) => (e.data as { n: number }).n)));
  await (await root.submit({ type: "write", entry: { kind: "note", data: { n: 2 } } })).wait();
  await until(() => seen.length === 1, { what: "the rebuilt paged mount's frame" });
  expect(seen).toEqual([[1, 2]]);
  await c.stop();
  expect(subscriptions.count).toBe(0);
});

test("a watch or an attached observer asked for while the mount's last observer stops joins a live mount and follows the commits after it (draw 31b)", async () => {
  // Draw 31b: every named test let each watch() settle before the next stop(); a watch() whose
  // mount was taken from the map just before its last observer stopped attached to the dropped mount.
  const { h, root } = await open(echo);
  const subscriptions = countSubscriptions(h);
  const a = await root.watch();
  const asked = root.watch();
  await a.stop();
  const b = await asked;
  expect(subscriptions.count).toBe(1);
  const seen: unknown[] = [];
  b.start((f) => void seen.push(f.value));
  await (await root.submit({ type: "write", entry: { kind: "note", data: { n: 1 } } })).wait();
  await until(() => seen.length === 1, { what: "the commit delivered to the second watch" });
  // The same for an observer attached (an event stream's way in) while the last watch stops.
  const changes: number[] = [];
  const attaching = h
    .mount(root.id)
    .attach({ change: (change) => void changes.push(change.seq), end: () => {} });
  await b.stop();
  const attached = await attaching;
  expect(subscriptions.count).toBe(1);
  await (await root.submit({ type: "write", entry: { kind: "note", data: { n: 2 } } })).wait();
  await until(() => changes.length > 0, { what: "the commit delivered to the attached observer" });
  attached.detach();
  expect(subscriptions.count).toBe(0);
});
test("stop() unregisters synchronously and only once: the mount is dropped before stop() returns, and a second stop() of its last watch leaves the next mount alone (break 30F)", async () => {
  const { h, root } = await open(echo);
  const subscriptions = countSubscriptions(h);
  const a = await root.watch();
  const first = h.mount(root.id);
  const end = a.stop();
  // Spec §9.2: stop() unregisters synchronously, before anything awaits its promise.
  expect(subscriptions.count).toBe(0);
  expect(await end).toBe("stopped");
  const b = await root.watch();
  const second = h.mount(root.id);
  expect(second).not.toBe(first);
  expect(subscriptions.count).toBe(1);
  // stop() is idempotent: a second call unregisters nothing again, so the watch's old mount does not
  // drop the new one from the harness, nor its subscription.
  expect(await a.stop()).toBe("stopped");
  expect(subscriptions.count).toBe(1);
  expect(h.mount(root.id)).toBe(second);
  const seen: number[] = [];
  b.start((f) => void seen.push(f.value.entries.length));
  await (await root.submit({ type: "write", entry: { kind: "note", data: { n: 1 } } })).wait();
  await until(() => seen.length === 1, { what: "the new mount's watch delivered" });
  expect(seen).toEqual([1]);
  await b.stop();
  expect(subscriptions.count).toBe(0);
});

test("a task-graph watch's stop() unregisters too: the graph mount stays subscribed while another of its watches lives, the last one's stop() drops it before returning, a second stop() changes nothing, and a later watch subscribes again (draw 33b)", async () => {
  // Draw 33b: the named stop() tests used a bare watch or a conversation's; a task-graph watch that
  // never left its mount's set (the subscription kept after the last stop) passed every test.
  const { h, root } = await open(echo);
  const subscriptions = countSubscriptions(h);
  const a = await h.watchTaskGraph();
  const b = await h.watchTaskGraph();
  expect(subscriptions.count).toBe(1);
  const endA = a.stop();
  expect(subscriptions.count).toBe(1);
  const endB = b.stop();
  expect(subscriptions.count).toBe(0);
  expect(await endA).toBe("stopped");
  expect(await endB).toBe("stopped");
  expect(await a.stop()).toBe("stopped");
  expect(subscriptions.count).toBe(0);
  const c = await h.watchTaskGraph();
  expect(subscriptions.count).toBe(1);
  const seen: number[] = [];
  c.start((f) => void seen.push(f.seq));
  await (await root.submit({ type: "input", content: "hi" })).wait();
  await until(() => seen.length > 0, { what: "the new graph mount's watch delivered" });
  await c.stop();
  expect(subscriptions.count).toBe(0);
});

test("a conversation first mounted by a view after a reopen (nothing else loaded its documents) takes commits", async () => {
  const { h, store, faux } = await open(echo);
  await (await (await h.root()).submit({ type: "write", entry: { kind: "note", data: { n: 1 } } })).wait();
  const again = await reopen(store, { models: faux.models, defaultModel: faux.ref });
  const root = await again.root();
  expect((await root.viewState()).entries).toHaveLength(1);
  // The mount loaded the documents for the line too: this commit does not wait for a load forever.
  await (await root.submit({ type: "write", entry: { kind: "note", data: { n: 2 } } })).wait();
  expect((await root.viewState()).entries).toHaveLength(2);
});

test("a watch's value holds every commit before its acquisition; a commit after it is buffered until start() and then delivered", async () => {
  const { root } = await open(echo);
  const notes = (value: { entries: ReadonlyArray<{ data?: unknown }> }) =>
    value.entries.map((e) => (e.data as { n: number }).n);
  await (await root.submit({ type: "write", entry: { kind: "note", data: { n: 1 } } })).wait();
  const watch = await root.watch();
  expect(notes(watch.value)).toEqual([1]);
  await (await root.submit({ type: "write", entry: { kind: "note", data: { n: 2 } } })).wait();
  expect(notes(watch.value)).toEqual([1]);
  expect(watch.pending).toBe(1);
  const seen: number[][] = [];
  watch.start((f) => void seen.push(notes(f.value)));
  await until(() => seen.length === 1, { what: "the buffered frame" });
  expect(seen).toEqual([[1, 2]]);
  await watch.stop();
});

test("a second watch on a conversation already mounted holds every commit before its own acquisition; a later commit is buffered until its start()", async () => {
  const { root } = await open(echo);
  const notes = (value: { entries: ReadonlyArray<{ data?: unknown }> }) =>
    value.entries.map((e) => (e.data as { n: number }).n);
  const write = async (n: number) =>
    (await root.submit({ type: "write", entry: { kind: "note", data: { n } } })).wait();
  await write(1);
  const first = await root.watch();
  first.start(() => undefined);
  await write(2);
  // Break 29G: every named test acquired the mount's first watch; a later watch handed the view the
  // mount had loaded, not the one it holds now, passed them.
  const second = await root.watch();
  expect(notes(second.value)).toEqual([1, 2]);
  await write(3);
  expect(notes(second.value)).toEqual([1, 2]);
  expect(second.pending).toBe(1);
  const seen: number[][] = [];
  second.start((f) => void seen.push(notes(f.value)));
  await until(() => seen.length === 1, { what: "the buffered frame" });
  expect(seen).toEqual([[1, 2, 3]]);
  await first.stop();
  await second.stop();
});

test("a commit that lands while a watch's mount is still reading its snapshot is in the value or in a frame, exactly once (spec §9.1 atomic snapshot and registration)", async () => {
  const { h, root } = await open(echo);
  const notes = (value: { entries: ReadonlyArray<{ data?: unknown }> }) =>
    value.entries.map((e) => (e.data as { n: number }).n);
  await (await root.submit({ type: "write", entry: { kind: "note", data: { n: 1 } } })).wait();
  // Hold the mount's snapshot read until a later commit has settled.
  const store = internals(h).session.store;
  const read = store.read.bind(store);
  const gate = deferred();
  const reading = deferred();
  let holdNext = true;
  store.read = (async (work: Parameters<typeof read>[0]) => {
    if (holdNext) {
      holdNext = false;
      reading.resolve();
      await gate.promise;
    }
    return read(work);
  }) as typeof store.read;
  const acquiring = root.watch();
  await reading.promise;
  await (await root.submit({ type: "write", entry: { kind: "note", data: { n: 2 } } })).wait();
  gate.resolve();
  const watch = await acquiring;
  await (await root.submit({ type: "write", entry: { kind: "note", data: { n: 3 } } })).wait();
  const seen: number[][] = [];
  watch.start((f) => void seen.push(notes(f.value)));
  await until(() => seen.at(-1)?.at(-1) === 3, { what: "the frame of note 3" });
  // The snapshot took note 2 (committed before its read) and no frame applies it again.
  expect(notes(watch.value)).toEqual([1, 2, 3]);
  expect(seen).toEqual([[1, 2, 3]]);
  await watch.stop();
});

/** The note numbers of a conversation view's entries, in order. */
const noteNumbers = (value: { entries: ReadonlyArray<{ data?: unknown }> }) =>
  value.entries.map((e) => (e.data as { n: number }).n);

type Opened = Awaited<ReturnType<typeof open>>;

/** Commit a `note` entry numbered `n` and wait until it is placed. */
async function writeNote(root: Opened["root"], n: number): Promise<void> {
  await (await root.submit({ type: "write", entry: { kind: "note", data: { n } } })).wait();
}

/**
 * Make the store's next read land the notes `ns` (each committed and placed) before the read starts
 * (`during`: the read then sees them) or once it has read and before it returns (`after`: it missed
 * them); returns a function that puts the store's own read back.
 */
function landOnNextRead(
  h: Opened["h"],
  root: Opened["root"],
  ns: number[],
  when: "during" | "after",
): () => void {
  const store = internals(h).session.store;
  const read = store.read.bind(store);
  let holdNext = true;
  const land = async () => {
    holdNext = false;
    for (const n of ns) await writeNote(root, n);
  };
  store.read = (async (work: Parameters<typeof read>[0]) => {
    if (holdNext && when === "during") {
      await land();
      return read(work);
    }
    const result = await read(work);
    if (holdNext) await land();
    return result;
  }) as typeof store.read;
  return () => {
    store.read = read;
  };
}

test("a commit that lands after a watch's mount has read its snapshot, before the mount is ready, is in a frame exactly once: no gap between snapshot and subscription", async () => {
  const { h, root } = await open(echo);
  await writeNote(root, 1);
  // The mount's snapshot read returns only after a later commit has settled: that commit was not
  // in the snapshot, so only the subscription made before the read can carry it.
  landOnNextRead(h, root, [2], "after");
  const watch = await root.watch();
  await writeNote(root, 3);
  const seen: number[][] = [];
  watch.start((f) => void seen.push(noteNumbers(f.value)));
  await until(() => seen.at(-1)?.at(-1) === 3, { what: "the frame of note 3" });
  expect(noteNumbers(watch.value)).toEqual([1, 2, 3]);
  expect(seen.at(-1)).toEqual([1, 2, 3]);
  await watch.stop();
});

test("the paged mount (the tab's watch) hydrates atomically too: a commit that lands while its snapshot is read, or after the read before it is ready, is in the value or in a frame exactly once (draw 41c)", async () => {
  // Draw 41c: the named races mount the plain view; a paged mount that took its read point after
  // its snapshot read (so a commit settled meanwhile was neither read nor replayed) passed them all.
  for (const when of ["during", "after"] as const) {
    const { h, root } = await open(echo);
    await writeNote(root, 1);
    const restore = landOnNextRead(h, root, [2], when);
    const watch = await h.pageMount(root.id).watch();
    restore();
    await writeNote(root, 3);
    const seen: number[][] = [];
    watch.start((f) => void seen.push(noteNumbers(f.value)));
    await until(() => seen.at(-1)?.at(-1) === 3, { what: `the frame of note 3 (${when})` });
    expect(noteNumbers(watch.value)).toEqual([1, 2, 3]);
    expect(seen.at(-1)).toEqual([1, 2, 3]);
    await watch.stop();
  }
});

test("two commits that land after a watch's mount has read its snapshot, before it is ready, are each in a frame once, in order, the plain mount's and the paged one's (draw 41c)", async () => {
  // Draw 41c: the named races land one commit in the mount's window; a mount that replayed only the
  // last commit it buffered there passed them all.
  for (const paged of [false, true]) {
    const { h, root } = await open(echo);
    await writeNote(root, 1);
    const restore = landOnNextRead(h, root, [2, 3], "after");
    const watch = paged ? await h.pageMount(root.id).watch() : await root.watch();
    restore();
    await writeNote(root, 4);
    const seen: number[][] = [];
    watch.start((f) => void seen.push(noteNumbers(f.value)));
    await until(() => seen.at(-1)?.at(-1) === 4, { what: `the frame of note 4 (paged: ${paged})` });
    expect(noteNumbers(watch.value)).toEqual([1, 2, 3, 4]);
    expect(seen.at(-1)).toEqual([1, 2, 3, 4]);
    await watch.stop();
  }
});

test("one commit that touches the conversation is one frame: its entries appended together, then its documents", async () => {
  const { h, root } = await open(echo);
  const watch = await root.watch();
  const frames: Array<{ ops: unknown[]; notes: number[] }> = [];
  watch.start((f) => {
    frames.push({
      ops: f.ops.map((o) => ({ op: o.op, ...("name" in o ? { name: o.name } : {}) })),
      notes: f.value.entries.map((e) => (e.data as { n: number }).n),
    });
  });
  await h.transaction((tx) => {
    tx.appendEntry(root.id, { kind: "note", data: { n: 1 } });
    tx.appendEntry(root.id, { kind: "note", data: { n: 2 } });
    tx.writeDoc(root.id, "app.x", { a: 1 });
  });
  await until(() => frames.length === 1, { what: "the commit's frame" });
  await settle();
  expect(frames).toEqual([{ ops: [{ op: "append" }, { op: "doc", name: "app.x" }], notes: [1, 2] }]);
  expect(watch.value.docs["app.x"]).toEqual({ a: 1 });
  // A redundant write (the same value again) is still a publication that touches the view: a frame.
  await h.transaction((tx) => tx.writeDoc(root.id, "app.x", { a: 1 }));
  await until(() => frames.length === 2, { what: "the redundant write's frame" });
  expect(frames[1]).toEqual({ ops: [{ op: "doc", name: "app.x" }], notes: [1, 2] });
  await watch.stop();
});

test("a redundant patch (a key set to the value it holds, an empty append) is a publication too: a frame each, the value unchanged (draw 32b)", async () => {
  // Draw 32b: the redundant write above is a whole-document write; a patch leaving the document as
  // it was, dropped from the commit's changes, passed every test.
  const { h, root } = await open(echo);
  await h.transaction((tx) => tx.writeDoc(root.id, "app.p", { a: 1, s: "x" }));
  const watch = await root.watch();
  const frames: Array<{ ops: unknown[] }> = [];
  watch.start(
    (f) =>
      void frames.push({ ops: f.ops.map((o) => ({ op: o.op, ...("name" in o ? { name: o.name } : {}) })) }),
  );
  await h.transaction((tx) => tx.patchDoc(root.id, "app.p", [{ path: ["a"], set: 1 }]));
  await until(() => frames.length === 1, { what: "the redundant set's frame" });
  await h.transaction((tx) => tx.patchDoc(root.id, "app.p", [{ path: ["s"], append: "" }]));
  await until(() => frames.length === 2, { what: "the empty append's frame" });
  expect(frames).toEqual([{ ops: [{ op: "doc", name: "app.p" }] }, { ops: [{ op: "doc", name: "app.p" }] }]);
  expect(watch.value.docs["app.p"]).toEqual({ a: 1, s: "x" });
  await watch.stop();
});

test("one commit that writes several documents of the conversation, deletes one, and touches another conversation is one frame with each of its own document ops", async () => {
  // Break 29H: the named test wrote one document, so a frame that carried only the commit's first
  // document change (or took another conversation's documents) passed it.
  const { h, root } = await open(echo);
  const other = await h.transaction((tx) => tx.createConversation({ kind: "ownerless" }).id);
  await h.transaction((tx) => tx.writeDoc(root.id, "app.gone", { g: 1 }));
  const watch = await root.watch();
  const frames: unknown[][] = [];
  watch.start((f) => {
    frames.push(f.ops.map((o) => ({ op: o.op, ...("name" in o ? { name: o.name, value: o.value } : {}) })));
  });
  await h.transaction((tx) => {
    tx.writeDoc(root.id, "app.x", { a: 1 });
    tx.writeDoc(other, "app.elsewhere", { e: 1 });
    tx.appendEntry(other, { kind: "note", data: { n: 9 } });
    tx.writeDoc(root.id, "app.y", { b: 2 });
    tx.retireDoc(root.id, "app.gone");
  });
  await until(() => frames.length === 1, { what: "the commit's frame" });
  await settle();
  expect(frames).toHaveLength(1);
  expect(frames[0]).toEqual(
    expect.arrayContaining([
      { op: "doc", name: "app.x", value: { a: 1 } },
      { op: "doc", name: "app.y", value: { b: 2 } },
      { op: "doc", name: "app.gone", value: undefined },
    ]),
  );
  expect(frames[0]).toHaveLength(3);
  expect(Object.entries(watch.value.docs).filter(([name]) => name.startsWith("app."))).toEqual([
    ["app.x", { a: 1 }],
    ["app.y", { b: 2 }],
  ]);
  expect(watch.value.entries.some((e) => e.conversationId === other)).toBe(false);
  await watch.stop();
});

test("the 100-frame bound excludes the frame being delivered: 100 more wait behind it, the next collapses them (reading 24f)", async () => {
  const watch = new Watch(0);
  const gate = deferred();
  const seen: Frame<number>[] = [];
  watch.start(async (f) => {
    seen.push(f);
    if (f.value === 1) await gate.promise;
  });
  await settle();
  watch.push(frame(1));
  await until(() => seen.length === 1, { what: "frame 1 delivering" });
  for (let seq = 2; seq <= 101; seq++) watch.push(frame(seq));
  // Frame 1 is in the listener: the 100 behind it are all kept.
  expect([watch.pending, watch.collapsed]).toEqual([100, 0]);
  watch.push(frame(102));
  expect([watch.pending, watch.collapsed]).toEqual([1, 100]);
  gate.resolve();
  await until(() => seen.length === 2, { what: "the replacement delivered" });
  expect(seen[1]).toEqual({ seq: 102, value: 102, ops: [{ op: "replace" }] });
});

test("every revision a watch delivered stays as it was delivered: later appends, document changes and a head marker change none of them (reading 24f)", async () => {
  const { h, root } = await open(echo);
  const watch = await root.watch();
  const revisions: Array<{ value: unknown; json: string }> = [
    { value: watch.value, json: JSON.stringify(watch.value) },
  ];
  watch.start((f) => void revisions.push({ value: f.value, json: JSON.stringify(f.value) }));
  await (await root.submit({ type: "input", content: "one" })).wait();
  await h.transaction((tx) => tx.writeDoc(root.id, "app.notes", { n: 1 }));
  await h.transaction((tx) => tx.writeDoc(root.id, "app.notes", { n: 2 }));
  await (await root.reset()).wait();
  await (await root.submit({ type: "input", content: "two" })).wait();
  await until(() => (watch.value.entries.at(-1)?.kind ?? "") === "pi.assistant" && revisions.length > 6, {
    what: "the last answer delivered",
  });
  expect(new Set(revisions.map((r) => r.json)).size).toBeGreaterThan(5);
  for (const r of revisions) expect(JSON.stringify(r.value)).toBe(r.json);
  await watch.stop();
});

test("a live mount's frames set a created document's key and delete a retired one's (reading 24f)", async () => {
  const { h, root } = await open(echo);
  const watch = await root.watch();
  const seen: Frame<{ docs: Record<string, unknown> }>[] = [];
  watch.start((f) => void seen.push(f));
  await h.transaction((tx) => tx.writeDoc(root.id, "app.extra", { a: 1 }));
  await until(() => seen.length === 1, { what: "the creation's frame" });
  expect(seen[0]!.value.docs["app.extra"]).toEqual({ a: 1 });
  await h.transaction((tx) => tx.retireDoc(root.id, "app.extra"));
  await until(() => seen.length === 2, { what: "the retirement's frame" });
  expect("app.extra" in seen[1]!.value.docs).toBe(false);
  expect(Object.keys(seen[1]!.value.docs).sort()).toEqual(
    Object.keys(seen[0]!.value.docs)
      .filter((k) => k !== "app.extra")
      .sort(),
  );
  // Draw 35C: a document whose value is falsy (null, 0, false, "") is created, not retired: its key
  // is set (a frame deleting the key of any null value passed, every document here being an object).
  await h.transaction((tx) => {
    tx.writeDoc(root.id, "app.nil", null);
    tx.writeDoc(root.id, "app.zero", 0);
    tx.writeDoc(root.id, "app.no", false);
    tx.writeDoc(root.id, "app.empty", "");
  });
  await until(() => seen.length === 3, { what: "the falsy documents' frame" });
  for (const view of [seen[2]!.value, (await root.viewState()) as { docs: Record<string, unknown> }])
    expect(
      Object.entries(view.docs).filter(([k]) => ["app.nil", "app.zero", "app.no", "app.empty"].includes(k)),
    ).toEqual(
      expect.arrayContaining([
        ["app.nil", null],
        ["app.zero", 0],
        ["app.no", false],
        ["app.empty", ""],
      ]),
    );
  await watch.stop();
});
