/**
 * Failed attempts folded for display (src/lib/attempts.ts): the failures a model turn went on from
 * become one group listed as its first entry; a turn's last failure stays listed on its own.
 */
import { describe, expect, test } from "vitest";
import { attemptOf, foldFailedAttempts } from "../../../src/lib/attempts.ts";
import type { EntryRecord } from "../../../worker/protocol/index.ts";

type E = Pick<EntryRecord, "id" | "kind" | "model" | "byTaskId">;

const user = (id: number): E => ({ id, kind: "pi.user", model: [{ role: "user", content: "hi" }] as never });
const answer = (id: number, task: number, stopReason = "stop", errorMessage?: string): E => ({
  id,
  kind: "pi.assistant",
  byTaskId: task,
  model: [
    {
      role: "assistant",
      content: [],
      stopReason,
      timestamp: 1000,
      ...(errorMessage ? { errorMessage } : {}),
    },
  ] as never,
});
const fail = (id: number, task: number, why = "Connection error.") => answer(id, task, "error", why);
const ids = (es: readonly E[]) => es.map((e) => e.id);

describe("foldFailedAttempts", () => {
  test("two failures the turn went on from are one group, listed as the first; the answer after them stays", () => {
    const f = foldFailedAttempts([user(1), fail(2, 7), fail(3, 7), answer(4, 7)]);
    expect(ids(f.shown)).toEqual([1, 2, 4]);
    expect([...f.attempts.keys()]).toEqual([2]);
    expect(ids(f.attempts.get(2) ?? [])).toEqual([2, 3]);
  });

  test("a turn's last failure (the run failed) stays an entry of its own, after the group of its earlier tries", () => {
    const f = foldFailedAttempts([user(1), fail(2, 7), fail(3, 7), fail(4, 7, "503 Service Unavailable")]);
    expect(ids(f.shown)).toEqual([1, 2, 4]);
    expect(ids(f.attempts.get(2) ?? [])).toEqual([2, 3]);
    expect(f.attempts.has(4)).toBe(false);
    expect(attemptOf(f.shown[2]!)).toEqual({ error: "503 Service Unavailable", at: 1000 });
  });

  test("while the turn still runs (a countdown, a network wait) its newest failure joins the group", () => {
    const entries = [user(1), fail(2, 7), fail(3, 7)];
    expect(ids(foldFailedAttempts(entries, { liveTurn: 7 }).attempts.get(2) ?? [])).toEqual([2, 3]);
    // Once the turn is over, the same newest failure is the run's failure.
    const over = foldFailedAttempts(entries);
    expect(ids(over.shown)).toEqual([1, 2, 3]);
    expect(ids(over.attempts.get(2) ?? [])).toEqual([2]);
  });

  test("another turn's failures, an input in between, or an entry without a task are not folded together", () => {
    const f = foldFailedAttempts([
      user(1),
      fail(2, 7),
      user(3), // a steer taken while turn 7 waited
      fail(4, 7),
      answer(5, 7),
      fail(6, 8),
      fail(7, 9),
      answer(8, 9),
      { id: 9, kind: "pi.assistant", model: fail(9, 0).model ?? null },
    ]);
    expect(ids(f.shown)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect([...f.attempts.entries()].map(([k, g]) => [k, ids(g)])).toEqual([
      [2, [2]],
      [4, [4]],
      [7, [7]],
    ]);
  });

  test("a partial a reload cut short (aborted, converted by its turn) folds once the turn answered after it, stays listed while the turn asks again; one the person stopped stays", () => {
    const cut = (id: number, task: number) => answer(id, task, "aborted", "interrupted");
    const f = foldFailedAttempts([user(1), cut(2, 7), answer(3, 7), user(4), cut(5, 8), user(6), cut(7, 9)], {
      liveTurn: 9,
    });
    expect(ids(f.shown)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect([...f.attempts.entries()].map(([k, g]) => [k, ids(g)])).toEqual([[2, [2]]]);
    expect(attemptOf(cut(2, 7)).error).toBe("interrupted");
    // A failed (error) attempt of the live turn still folds at once (a countdown runs after it).
    const waiting = foldFailedAttempts([user(1), fail(2, 9)], { liveTurn: 9 });
    expect([...waiting.attempts.keys()]).toEqual([2]);
  });

  test("a transcript without failures is listed as it is", () => {
    const entries = [
      user(1),
      answer(2, 7, "toolUse"),
      { id: 3, kind: "pi.tool-result" },
      answer(4, 8),
      answer(5, 9, "aborted"), // stopped by the person: its turn's last word
    ];
    const f = foldFailedAttempts(entries);
    expect(f.shown).toEqual(entries);
    expect(f.attempts.size).toBe(0);
  });
});
