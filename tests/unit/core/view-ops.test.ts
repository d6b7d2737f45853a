/**
 * View operations (worker/core/view-ops.ts): the one set of rules by which the engine's mount and a
 * tab's copy of a conversation's view apply changes, and the wire form of a watch's frames.
 */
import { describe, expect, test } from "vitest";
import { activeRange, applyViewChanges, type ViewChange, watchFrame } from "../../../worker/core/view-ops.ts";
import type { Conversation, Frame } from "../../../worker/index.ts";
import {
  applyFrame,
  type ConversationView,
  type EntryRecord,
  type WatchFrame,
} from "../../../worker/protocol/index.ts";
import { memoryStore } from "../../../worker/testing.ts";
import { echo, open } from "../agent/fixtures.ts";

const entry = (id: number, more: Partial<EntryRecord> = {}): EntryRecord => ({
  id,
  conversationId: 1,
  kind: "note",
  ...more,
});
const ids = (view: ConversationView | undefined) => view?.entries.map((e) => e.id);
const view = (entries: EntryRecord[], docs: ConversationView["docs"] = {}): ConversationView => ({
  conversation: { id: 1, createdAt: 0 },
  entries,
  docs,
});

describe("applyViewChanges", () => {
  test("applies changes in order: entries append, a later doc change wins over an earlier one", () => {
    const before = view([entry(1)], { kept: 1, gone: 2 });
    const after = applyViewChanges(before, [
      { op: "append", entries: [entry(2)] },
      { op: "doc", name: "d", value: "first" },
      { op: "doc", name: "gone", value: undefined },
      { op: "append", entries: [entry(3), entry(4)] },
      { op: "doc", name: "d", value: "second" },
    ]);
    expect(ids(after)).toEqual([1, 2, 3, 4]);
    expect(after.docs).toEqual({ kept: 1, d: "second" });
    expect(after.conversation).toBe(before.conversation);
  });

  test("a head marker restarts the range at its head: kept, with the non-marker entries from its head on", () => {
    const before = view([entry(3, { head: 1 }), entry(4), entry(5), entry(6)]);
    const after = applyViewChanges(before, [
      { op: "head", entries: [entry(7), entry(8, { head: 5 }), entry(9)] },
    ]);
    // The older marker (3) and the entries before 5 leave; 7 (appended first) stays, being after 5.
    expect(ids(after)).toEqual([8, 5, 6, 7, 9]);
  });

  test("a raw head written further back than the mounted range shows only the mounted entries from its head on", () => {
    // Mounted: the range from marker 5 (entries 1-4 are older history, not mounted). A raw head at 2
    // reaches back past the range: the view keeps what it holds, it does not bring 2-4 back (spec §12).
    const after = applyViewChanges(view([entry(5, { head: 5 }), entry(6)]), [
      { op: "head", entries: [entry(7, { head: 2 })] },
    ]);
    expect(ids(after)).toEqual([7, 6]);
  });

  test("a newer marker whose head reaches before an older marker leaves the older marker out (spec §2.1 rule 5)", () => {
    // Mounted: marker 3 (head 2), then 2 and 4. Marker 5 heads at 2 too: the older marker 3 lies
    // inside its range and is dropped; only the newest marker leads.
    const after = applyViewChanges(view([entry(3, { head: 2 }), entry(2), entry(4)]), [
      { op: "head", entries: [entry(5, { head: 2 })] },
    ]);
    expect(ids(after)).toEqual([5, 2, 4]);
  });

  test("a view rebuilt from stored entries is the newest marker's range: entries an older marker cut come back (spec §12)", () => {
    // Stored from the range's start: 1, a reset at 2 (self), 3, then a summary at 4 heading 1.
    const stored = [entry(1), entry(2, { head: 2 }), entry(3), entry(4, { head: 1 })];
    expect(activeRange(stored).map((e) => e.id)).toEqual([4, 1, 3]);
    // Applied one by one, as a mounted view does, the reset's cut stays (the view keeps what it held).
    expect(ids(applyViewChanges(view([]), [{ op: "head", entries: stored }]))).toEqual([4, 3]);
    expect(activeRange([entry(1), entry(2)]).map((e) => e.id)).toEqual([1, 2]);
  });

  test("a marker that names itself leaves only itself and what follows it", () => {
    const after = applyViewChanges(view([entry(1), entry(2)]), [
      { op: "head", entries: [entry(3, { head: 3 }), entry(4)] },
    ]);
    expect(ids(after)).toEqual([3, 4]);
  });

  test("never changes its input; no changes give back the same view", () => {
    const entries = [entry(1)];
    const docs = { a: 1 };
    const before = view(entries, docs);
    const after = applyViewChanges(before, [
      { op: "append", entries: [entry(2)] },
      { op: "doc", name: "a", value: undefined },
    ]);
    expect(entries.map((e) => e.id)).toEqual([1]);
    expect(docs).toEqual({ a: 1 });
    expect(after).not.toBe(before);
    expect(applyViewChanges(before, [])).toBe(before);
  });

  test("a change that touches only documents keeps the same entry list, and the reverse", () => {
    const before = view([entry(1)], { a: 1 });
    expect(applyViewChanges(before, [{ op: "doc", name: "a", value: 2 }]).entries).toBe(before.entries);
    expect(applyViewChanges(before, [{ op: "append", entries: [entry(2)] }]).docs).toBe(before.docs);
  });
});

describe("applyFrame", () => {
  test("a snapshot frame replaces the view, with or without one", () => {
    const snapshot = view([entry(9)], { x: true });
    const frame: WatchFrame = { seq: 4, ops: [{ op: "replace" }], value: snapshot };
    expect(applyFrame(view([entry(1), entry(2)]), frame)).toBe(snapshot);
    expect(applyFrame(undefined, frame)).toBe(snapshot);
  });

  test("a change frame applies to the view; without a view it has nothing to apply to", () => {
    const frame: WatchFrame = { seq: 5, ops: [{ op: "append", entries: [entry(2)] }] };
    expect(ids(applyFrame(view([entry(1)]), frame))).toEqual([1, 2]);
    expect(applyFrame(undefined, frame)).toBeUndefined();
  });
});

describe("watchFrame", () => {
  const value = view([entry(1)]);
  test("a frame that replaces the view goes on the wire with the whole view", () => {
    expect(watchFrame({ seq: 3, value, ops: [{ op: "replace" }] })).toEqual({
      seq: 3,
      ops: [{ op: "replace" }],
      value,
    });
  });

  test("a frame of changes goes without the view", () => {
    const ops: ViewChange[] = [{ op: "doc", name: "a", value: 1 }];
    const wire = watchFrame({ seq: 3, value, ops });
    expect(wire).toEqual({ seq: 3, ops });
    expect("value" in wire).toBe(false);
  });
});

test("a tab's copy built from the wire frames equals the mount's view after every commit", async () => {
  const { h, root } = await open(echo);
  const watch = await root.watch();
  const frames: Frame<ConversationView>[] = [];
  watch.start((frame) => void frames.push(frame));
  let copy = applyFrame(undefined, watchFrame({ seq: 0, value: watch.value, ops: [{ op: "replace" }] }));
  const catchUp = async () => {
    await expect.poll(() => frames.length > 0 && watch.pending === 0).toBe(true);
    for (const frame of frames.splice(0)) copy = applyFrame(copy, watchFrame(frame));
    expect(copy).toEqual(watch.value);
  };
  for (const i of [1, 2, 3]) {
    await root.submit({ type: "write", entry: { kind: "note", data: { i } } });
    await catchUp();
  }
  await h.transaction((tx) => tx.writeDoc(1, "app.title", { title: "t" }));
  await catchUp();
  // A marker that keeps an earlier part (as a compaction does), then one that restarts at itself.
  const second = copy!.entries.filter((e) => e.kind === "note")[1]!.id;
  await h.transaction((tx) => tx.appendEntry(1, { kind: "marker", head: second }));
  await catchUp();
  expect(copy?.entries.map((e) => e.kind)).toEqual(["marker", "note", "note"]);
  await (await root.reset()).wait();
  await catchUp();
  await h.transaction((tx) => {
    tx.appendEntry(1, { kind: "note", data: { after: true } });
    tx.retireDoc(1, "app.title");
  });
  await catchUp();
  expect(copy?.entries.map((e) => e.kind)).toEqual(["pi.reset", "note"]);
  expect(copy?.docs["app.title"]).toBeUndefined();
  await watch.stop();
});

test("a commit published after the mount's read point and before its view is set reaches the view once, after it", async () => {
  const store = await memoryStore();
  const { h } = await open(echo, { store });
  await h.transaction((tx) => tx.writeDoc(1, "app.counter", { i: 0 }));
  // Hold the mount's read open past its read point: a commit lands before the view is set.
  const read = store.read.bind(store);
  let landed: Promise<unknown> | undefined;
  store.read = async <T>(work: (sql: never) => Promise<T> | T): Promise<T> => {
    const result = await read(work as never);
    if (!landed) {
      landed = h.transaction((tx) => {
        tx.appendEntry(1, { kind: "note", data: { i: 1 } });
        tx.writeDoc(1, "app.counter", { i: 1 });
      });
      await landed;
    }
    return result as T;
  };
  const watch = await h.conversation(1)!.watch();
  store.read = read;
  expect(landed).toBeDefined();
  expect(watch.value.docs["app.counter"]).toEqual({ i: 1 });
  expect(watch.value.entries.filter((e) => e.kind === "note").map((e) => e.data)).toEqual([{ i: 1 }]);
  await watch.stop();
});

test("a view mounted while commits land takes its entries and documents from one commit, and each later commit once", async () => {
  const { h } = await open(echo);
  // Each commit appends note i and sets the counter to i: a view from one commit shows them equal.
  const consistent = (v: ConversationView) => {
    const notes = v.entries.filter((e) => e.kind === "note");
    const last = notes.at(-1)?.data as { i: number } | undefined;
    const counter = v.docs["app.counter"] as { i: number } | undefined;
    expect(counter?.i, "the counter matches the newest note").toBe(last?.i);
    expect(notes.map((e) => (e.data as { i: number }).i)).toEqual(notes.map((_, k) => k + 1));
  };
  // Commits one after another, the mount asked for after the fifth, while they go on.
  let mounting: ReturnType<Conversation["watch"]> | undefined;
  const commits = (async () => {
    for (let i = 1; i <= 60; i++) {
      await h.transaction((tx) => {
        tx.appendEntry(1, { kind: "note", data: { i } });
        tx.writeDoc(1, "app.counter", { i });
      });
      if (i === 5) mounting = h.conversation(1)!.watch();
    }
  })();
  await expect.poll(() => mounting).toBeDefined();
  const watch = await mounting!;
  const frames: Frame<ConversationView>[] = [];
  watch.start((frame) => void frames.push(frame));
  consistent(watch.value);
  const from = (watch.value.docs["app.counter"] as { i: number } | undefined)?.i ?? 0;
  await commits;
  await expect.poll(() => (watch.value.docs["app.counter"] as { i: number } | undefined)?.i).toBe(60);
  for (const frame of frames) consistent(frame.value);
  // Each later commit once, as one frame: its note and its counter together, every seq new.
  const counters = frames.map((f) => (f.value.docs["app.counter"] as { i: number }).i);
  expect(counters).toEqual(Array.from({ length: 60 - from }, (_, k) => from + k + 1));
  for (const frame of frames) expect(frame.ops.map((o) => o.op)).toEqual(["append", "doc"]);
  expect(new Set(frames.map((f) => f.seq)).size).toBe(frames.length);
  consistent(watch.value);
  await watch.stop();
});

test("a view mounted on a reopened engine takes the stored documents and entries of its conversation, then each commit once", async () => {
  // Break 28G: the other mount tests mount a conversation the live engine had loaded already.
  const store = await memoryStore();
  const first = await open(echo, { store });
  await first.h.transaction((tx) => {
    tx.appendEntry(1, { kind: "note", data: { i: 1 } });
    tx.writeDoc(1, "app.counter", { i: 1 });
  });
  await first.h.close();
  const { h } = await open(echo, { store: await memoryStore(store.image()) });
  const watch = await h.conversation(1)!.watch();
  const frames: Frame<ConversationView>[] = [];
  watch.start((frame) => void frames.push(frame));
  expect(watch.value.docs["app.counter"]).toEqual({ i: 1 });
  expect(watch.value.docs["pi.agent"]).toBeDefined();
  expect(watch.value.entries.filter((e) => e.kind === "note").map((e) => e.data)).toEqual([{ i: 1 }]);
  await h.transaction((tx) => {
    tx.appendEntry(1, { kind: "note", data: { i: 2 } });
    tx.writeDoc(1, "app.counter", { i: 2 });
  });
  await expect.poll(() => frames.length).toBe(1);
  expect(watch.value.docs["app.counter"]).toEqual({ i: 2 });
  expect(watch.value.entries.filter((e) => e.kind === "note").map((e) => e.data)).toEqual([
    { i: 1 },
    { i: 2 },
  ]);
  await watch.stop();
});
