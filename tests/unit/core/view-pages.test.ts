/**
 * The paged view (core/pages.ts, the tab's watch): a page is read newest first through a fork's
 * segments and its head marker; walking pages back with `applyPage` rebuilds exactly the whole
 * view's entries; the paged mount's first value carries only the newest page and counts the rest;
 * a head marker's effect on the count (view-ops.ts).
 */
import { describe, expect, test } from "vitest";
import { FIRST_PAGE } from "../../../worker/core/pages.ts";
import {
  applyPage,
  applyViewChanges,
  type ConversationView,
  pageCursor,
} from "../../../worker/core/view-ops.ts";
import type { AgentHarness, ConversationId, EntryRecord } from "../../../worker/index.ts";
import { echo, open, reopen } from "../agent/fixtures.ts";

const ownerless = { ownership: { kind: "ownerless" as const } };

/** Append notes `from`..`to` to a conversation in one commit (a head marker where `heads` says). */
async function notes(
  h: AgentHarness,
  c: ConversationId,
  from: number,
  to: number,
  heads: ReadonlyMap<number, number> = new Map(),
): Promise<EntryRecord[]> {
  await h.transaction((tx) => {
    for (let n = from; n <= to; n++) {
      const head = heads.get(n);
      tx.appendEntry(c, { kind: "app.note", data: { n }, ...(head !== undefined ? { head } : {}) });
    }
  });
  return h.entries(c);
}

const numbers = (entries: readonly EntryRecord[]) => entries.map((e) => (e.data as { n: number }).n);

/** Every page back from the newest, `limit` at a time, put together as a tab does. */
async function walk(h: AgentHarness, c: ConversationId, limit: number) {
  const first = await h.entryPage(c, { limit });
  let view: ConversationView = {
    conversation: h.conversationRecord(c)!,
    entries: first.entries,
    docs: {},
    ...(first.older > 0 ? { older: first.older } : {}),
  };
  const olders = [first.older];
  while ((view.older ?? 0) > 0) {
    const page = await h.entryPage(c, { before: pageCursor(view)!, limit });
    expect(page.entries.length).toBeGreaterThan(0);
    olders.push(page.older);
    view = applyPage(view, page);
  }
  return { entries: view.entries, olders };
}

describe("pages of the active range", () => {
  test("read newest first through a fork's segments: each page is the entries just before the last, the count exact", async () => {
    const { h, root } = await open(echo);
    const parent = await notes(h, root.id, 1, 10);
    const child = await root.fork(parent[6]!.id, ownerless); // sees notes 1..7
    await notes(h, root.id, 11, 12); // the parent's later notes: not the child's
    await notes(h, child.id, 101, 105);

    const newest = await h.entryPage(child.id, { limit: 3 });
    expect(numbers(newest.entries)).toEqual([103, 104, 105]);
    expect(newest.older).toBe(9);
    // Across the fork point: the child's own first entries, then its parent's through the fork entry.
    const across = await h.entryPage(child.id, { before: newest.entries[0]!.id, limit: 4 });
    expect(numbers(across.entries)).toEqual([6, 7, 101, 102]);
    expect(across.older).toBe(5);

    const walked = await walk(h, child.id, 4);
    expect(numbers(walked.entries)).toEqual([1, 2, 3, 4, 5, 6, 7, 101, 102, 103, 104, 105]);
    expect(walked.entries).toEqual((await child.viewState()).entries);
    expect(walked.olders).toEqual([8, 4, 0]);
  });

  test("with head markers: pages hold the newest marker first and the entries from its head, as the whole view does", async () => {
    const { h, root } = await open(echo);
    const ids = (await notes(h, root.id, 1, 6)).map((e) => e.id);
    // A marker (note 7) restarting at note 3, then notes, a newer marker (note 10) at note 5, notes.
    await notes(h, root.id, 7, 9, new Map([[7, ids[2]!]]));
    await notes(h, root.id, 10, 14, new Map([[10, ids[4]!]]));
    const whole = (await root.viewState()).entries;
    expect(numbers(whole)).toEqual([10, 5, 6, 8, 9, 11, 12, 13, 14]);
    for (const limit of [1, 2, 3, 8, 9, 50]) {
      const walked = await walk(h, root.id, limit);
      expect(walked.entries, `limit ${limit}`).toEqual(whole);
      expect(walked.olders[0], `limit ${limit}`).toBe(Math.max(0, whole.length - limit));
    }
    // The marker itself has nothing before it.
    expect(await h.entryPage(root.id, { before: whole[0]!.id, limit: 5 })).toEqual({ entries: [], older: 0 });
  });

  test("a fork whose range starts at a marker in its parent pages back to that marker", async () => {
    const { h, root } = await open(echo);
    const ids = (await notes(h, root.id, 1, 4)).map((e) => e.id);
    const parent = await notes(h, root.id, 5, 6, new Map([[5, ids[2]!]]));
    const child = await root.fork(parent.at(-1)!.id, ownerless);
    await notes(h, child.id, 101, 103);
    const whole = (await child.viewState()).entries;
    expect(numbers(whole)).toEqual([5, 3, 4, 6, 101, 102, 103]);
    expect((await walk(h, child.id, 2)).entries).toEqual(whole);
  });

  test("a fork cut at its parent's head marker itself starts at that marker's head: its view, its pages and its context, also after a reopen (draw 38c)", async () => {
    const { h, root, faux, store } = await open(echo);
    const ids = (await notes(h, root.id, 1, 4)).map((e) => e.id);
    const parent = await notes(h, root.id, 5, 6, new Map([[5, ids[2]!]]));
    const marker = parent.find((e) => (e.data as { n: number }).n === 5)!;
    const child = await root.fork(marker.id, ownerless); // the cutoff is the marker: H is at the cutoff
    await notes(h, child.id, 101, 102);
    const whole = (await child.viewState()).entries;
    expect(numbers(whole)).toEqual([5, 3, 4, 101, 102]);
    expect((await walk(h, child.id, 2)).entries).toEqual(whole);
    expect(numbers((await child.context()).entries)).toEqual([5, 3, 4, 101, 102]);
    const again = await reopen(store, { models: faux.models, defaultModel: faux.ref });
    await again.loadConversation(child.id);
    expect(numbers((await again.conversation(child.id)!.viewState()).entries)).toEqual([5, 3, 4, 101, 102]);
    expect((await walk(again, child.id, 2)).entries).toEqual(whole);
  });
});

describe("the paged mount", () => {
  test("its view carries the newest page and counts the rest; later commits append to it", async () => {
    const { h, root } = await open(echo);
    const total = FIRST_PAGE + 40;
    await notes(h, root.id, 1, total);
    const watch = await h.pageMount(root.id).watch();
    expect(watch.value.entries).toHaveLength(FIRST_PAGE);
    expect(numbers(watch.value.entries).at(0)).toBe(41);
    expect(numbers(watch.value.entries).at(-1)).toBe(total);
    expect(watch.value.older).toBe(40);
    expect(watch.value.docs["pi.live"]).toEqual({});
    // The whole mount is another one: it carries everything.
    const whole = await root.viewState();
    expect(whole.entries).toHaveLength(total);
    expect(whole.older).toBeUndefined();

    const frames: ConversationView[] = [];
    watch.start((frame) => void frames.push(frame.value));
    await notes(h, root.id, total + 1, total + 1);
    await expect.poll(() => frames.length).toBe(1);
    expect(frames[0]!.entries).toHaveLength(FIRST_PAGE + 1);
    expect(frames[0]!.older).toBe(40);
    await watch.stop();
  });

  test("a short conversation's paged view is its whole view", async () => {
    const { h, root } = await open(echo);
    await notes(h, root.id, 1, 5);
    const watch = await h.pageMount(root.id).watch();
    expect(watch.value).toEqual(await root.viewState());
    await watch.stop();
  });
});

describe("a head marker on a paged view", () => {
  const conversation = { id: 1, title: "t" } as unknown as ConversationView["conversation"];
  const entry = (id: number, head?: number): EntryRecord => ({
    id,
    conversationId: 1,
    kind: "app.note",
    ...(head !== undefined ? { head } : {}),
  });
  const paged: ConversationView = { conversation, entries: [entry(50), entry(51)], docs: {}, older: 49 };

  test("at or after a carried entry: nothing uncarried is left in the range", () => {
    for (const head of [50, 51, 52]) {
      const after = applyViewChanges(paged, [{ op: "head", entries: [entry(52, head)] }]);
      expect(after.older, `head ${head}`).toBeUndefined();
    }
  });

  test("before every carried entry: the count stays (an upper bound) and appends keep it", () => {
    const after = applyViewChanges(paged, [{ op: "head", entries: [entry(52, 20)] }]);
    expect(after.entries.map((e) => e.id)).toEqual([52, 50, 51]);
    expect(after.older).toBe(49);
    expect(applyViewChanges(after, [{ op: "append", entries: [entry(53)] }]).older).toBe(49);
    // The next page goes between the marker and the carried entries, the marker once.
    expect(pageCursor(after)).toBe(50);
    const page = { entries: [entry(52, 20), entry(20), entry(21)], older: 0 };
    expect(applyPage(after, page).entries.map((e) => e.id)).toEqual([52, 20, 21, 50, 51]);
    expect(applyPage(after, page).older).toBeUndefined();
  });
});

test("a paged watch, a commit of a plain entry then a raw head: further back than mounted the count stays and only carried entries from its head on show; at a carried entry none is left", async () => {
  // Draw 36D: the mount classifying a commit's entries as a head change only when its first entry
  // carries a head passed every test (each raw head was alone in its commit, or the first).
  const { h, root } = await open(echo);
  const total = FIRST_PAGE + 40;
  await notes(h, root.id, 1, total);
  const watch = await h.pageMount(root.id).watch();
  const frames: ConversationView[] = [];
  watch.start((frame) => void frames.push(frame.value));
  const carried = watch.value.entries.map((e) => e.id);
  const first = (await h.entries(root.id))[0]!.id;
  // A raw head further back than the mounted range (at the first note, uncarried).
  await notes(h, root.id, total + 1, total + 2, new Map([[total + 2, first]]));
  await expect.poll(() => frames.length).toBe(1);
  const [plain, back] = (await h.entries(root.id)).slice(-2).map((e) => e.id);
  expect(frames[0]!.entries.map((e) => e.id)).toEqual([back, ...carried, plain]);
  expect(frames[0]!.older).toBe(40);
  // A raw head at a carried entry after a plain one: nothing uncarried is left in the range.
  await notes(h, root.id, total + 3, total + 4, new Map([[total + 4, carried[1]!]]));
  await expect.poll(() => frames.length).toBe(2);
  const [plain2, at] = (await h.entries(root.id)).slice(-2).map((e) => e.id);
  expect(frames[1]!.entries.map((e) => e.id)).toEqual([at, ...carried.slice(1), plain, plain2]);
  expect(frames[1]!.older).toBeUndefined();
  await watch.stop();
});

test("a tab's round trip: the paged watch's view, commits after it, then pages before its first entry rebuild the whole view", async () => {
  const { h, root } = await open(echo);
  await notes(h, root.id, 1, FIRST_PAGE + 300);
  const watch = await h.pageMount(root.id).watch();
  let view = watch.value;
  watch.start((frame) => {
    view = applyViewChanges(
      view,
      frame.ops.filter((op) => op.op !== "replace"),
    );
  });
  await notes(h, root.id, FIRST_PAGE + 301, FIRST_PAGE + 305);
  await expect.poll(() => view.entries.length).toBe(FIRST_PAGE + 5);
  expect(view.older).toBe(300);
  while ((view.older ?? 0) > 0)
    view = applyPage(view, await h.entryPage(root.id, { before: pageCursor(view)!, limit: 120 }));
  expect(view).toEqual(await root.viewState());
  await watch.stop();
});
