/**
 * The entry cache's retention timer (agent/conversation/entries.ts): a busy conversation read at
 * every commit keeps one armed timer instead of clearing and setting one per commit (issue 16: the
 * agent bench's engine work per round), and the timer still drops an idle conversation's entries.
 */
import { afterEach, expect, test, vi } from "vitest";
import { EntryCache } from "../../../worker/agent/conversation/entries.ts";
import type { ChangeSet, EntryRecord } from "../../../worker/core/types.ts";
import { until } from "../../../worker/testing.ts";

afterEach(() => vi.restoreAllMocks());

function source() {
  const listeners = new Set<(change: ChangeSet) => void>();
  let seq = 0;
  return {
    subscribe: (listener: (change: ChangeSet) => void) => {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    storedEntries: async (): Promise<EntryRecord[]> => [],
    publish(entry: EntryRecord) {
      const change: ChangeSet = {
        seq: ++seq,
        tasks: [],
        entries: [entry],
        conversations: [],
        docs: [],
        submissions: [],
      };
      for (const listener of listeners) listener(change);
    },
  };
}

const entry = (id: number): EntryRecord => ({ id, conversationId: 1, kind: "test.note" });

test("a busy conversation read at every commit keeps one timer armed", async () => {
  const src = source();
  const cache = new EntryCache(src, { retentionMs: () => 60_000, busy: () => true, now: Date.now });
  await cache.get(1);
  const set = vi.spyOn(globalThis, "setTimeout");
  const clear = vi.spyOn(globalThis, "clearTimeout");
  for (let id = 1; id <= 50; id++) {
    src.publish(entry(id));
    cache.peek(1);
    await cache.get(1);
  }
  expect((await cache.get(1)).map((e) => e.id)).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
  expect(set).not.toHaveBeenCalled();
  expect(clear).not.toHaveBeenCalled();
  cache.dispose();
});

test("the timer drops an idle conversation's entries once its retention has passed", async () => {
  const src = source();
  let busy = true;
  const cache = new EntryCache(src, { retentionMs: () => 20, busy: () => busy, now: Date.now });
  await cache.get(1);
  src.publish(entry(1));
  busy = false;
  src.publish(entry(2));
  await until(() => !cache.holds(1), { what: "the idle conversation's entries dropped by the timer" });
  cache.dispose();
});

test("the commits of a busy conversation never read the retention setting (it resolves the settings); an idle one's do", async () => {
  const src = source();
  let busy = true;
  let reads = 0;
  const retentionMs = () => {
    reads++;
    return 60_000;
  };
  const cache = new EntryCache(src, { retentionMs, busy: () => busy, now: Date.now });
  await cache.get(1);
  const atLoad = reads; // the first read arms the timer once
  for (let id = 1; id <= 20; id++) src.publish(entry(id));
  expect(reads).toBe(atLoad);
  busy = false;
  src.publish(entry(21));
  expect(reads).toBe(atLoad + 1);
  cache.dispose();
});
