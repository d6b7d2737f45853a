/**
 * The core's public surface: a harness keeps its session (with the records) and its scheduler in
 * ES-private fields, reachable only through core/internals.ts (which nothing above the core imports,
 * see import-direction.test.ts). The operations the agent uses instead behave as the internals did.
 */
import { expect, test } from "vitest";
import { internals } from "../../../worker/core/internals.ts";
import { AgentHarness, Harness } from "../../../worker/index.ts";
import { memoryStore, until } from "../../../worker/testing.ts";
import { done, outcome, parked, running } from "./fixtures.ts";

const conversationOwned = { ownership: { kind: "conversation" as const } };

test("a harness has no session, records or scheduler property; internals() reaches them, for a harness only", async () => {
  for (const h of [await Harness.open(await memoryStore()), await AgentHarness.open(await memoryStore())]) {
    for (const name of ["session", "records", "scheduler"]) {
      expect(name in h).toBe(false);
      expect((h as unknown as Record<string, unknown>)[name]).toBeUndefined();
    }
    // A core harness creates the root at open; an agent harness lazily, through root() (spec §2.2).
    expect(internals(h).session.records.conversations.has(1)).toBe(!(h instanceof AgentHarness));
    expect(internals(h).scheduler.active.size).toBe(0);
    await h.close();
  }
  expect(() => internals({})).toThrow(TypeError);
});

test("abortConversation marks the reached work in one commit with `inCommit`, signals it and waits for idle", async () => {
  const hold = parked("hold");
  const h = await Harness.open(await memoryStore(), { tasks: [hold] });
  const id = await h.createTask(hold, null, conversationOwned);
  await until(() => running(h) === 1, { what: "running" });
  const seen: number[][] = [];
  await h.abortConversation(1, {
    inCommit: (tx, reached) => {
      seen.push([...reached]);
      tx.writeDoc(1, "test.aborted", { at: tx.now() });
    },
  });
  expect(seen).toEqual([[1]]);
  expect(outcome(await done(h, id))).toEqual({ status: "aborted", reason: "handler" });
  expect(h.docNow(1, "test.aborted")).toEqual({ at: expect.any(Number) });
  expect(h.conversationRecords().map((c) => c.id)).toEqual([1]);
  await h.close();
});
