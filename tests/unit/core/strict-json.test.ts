/**
 * Spec §3.4 (and invariant 6 of §1): a committed value is strict JSON, plain objects with string keys,
 * arrays without holes, strings, finite numbers, booleans and null. Anything else (an undefined
 * member, a Date, a Map, a class instance, a getter, a symbol key, a sparse array) is refused with
 * `NotJson` before the commit, wherever the value enters: an entry, a document, a task's input or
 * checkpoint, a memo, an outcome, a submission. Nothing of the refused commit is written.
 */
import { describe, expect, test } from "vitest";
import { defineTask, Harness, type Json, NotJson, type TaskId } from "../../../worker/index.ts";
import { memoryStore, until } from "../../../worker/testing.ts";
import {
  blocked,
  complete,
  done,
  engineStillRuns,
  type Go,
  outcome,
  parked,
  ping,
  row,
  single,
  storeWith,
} from "./fixtures.ts";

class Point {
  constructor(
    readonly x: number,
    readonly y: number,
  ) {}
}

/** Values JSON.stringify would quietly change, each with its name. */
function notJson(): Array<[string, unknown]> {
  const withGetter = {};
  Object.defineProperty(withGetter, "g", { get: () => 1, enumerable: true });
  const sparse: unknown[] = [1];
  sparse[2] = 3;
  return [
    ["an undefined member", { a: undefined }],
    ["a nested undefined member", { a: { b: 1, c: undefined } }],
    ["an undefined array element", [1, undefined]],
    ["a sparse array", sparse],
    ["a Date", new Date(0)],
    ["a Map", new Map([["k", 1]])],
    ["a class instance", new Point(1, 2)],
    ["a getter", withGetter],
    ["a symbol key", { [Symbol("s")]: 1, ok: true }],
    // Non-finite numbers, functions and bigints (break 31C: NaN let through passed every case above).
    ["NaN", { n: Number.NaN }],
    ["an infinite number", [Number.NEGATIVE_INFINITY]],
    ["a function", { f: () => 1 }],
    ["a bigint", { b: 1n }],
  ];
}

const asJson = (value: unknown) => ({ value }) as unknown as Json;

describe("strict JSON: every committed value is plain JSON (spec §3.4)", () => {
  test("an entry, a document, a task input, a checkpoint or a submission that is not plain JSON is refused with NotJson and nothing is committed", async () => {
    const store = await memoryStore();
    const h = await Harness.open(store);
    const def = single(
      "strict-input",
      async (_t, runtime) => void (await runtime.commit(() => complete("ok"))),
    );
    const before = store.stats.commits;
    for (const [what, bad] of notJson()) {
      const writes: Array<[string, () => Promise<unknown>]> = [
        ["entry", () => h.transaction((tx) => void tx.appendEntry(1, { kind: "note", data: asJson(bad) }))],
        ["document", () => h.transaction((tx) => tx.writeDoc(1, "strict-doc", asJson(bad)))],
        ["task input", () => h.createTask(def, asJson(bad), { ownership: { kind: "conversation" } })],
        [
          "checkpoint",
          () =>
            h.transaction((tx) =>
              tx.createTask(def, null, {
                ownership: { kind: "conversation" },
                start: { phase: "go", extra: asJson(bad) } as never,
              }),
            ),
        ],
        [
          "submission",
          () =>
            h.transaction((tx) =>
              tx.createSubmission({
                conversationId: 1,
                type: "write",
                status: "unanswered",
                reason: "x",
                detail: asJson(bad),
              } as never),
            ),
        ],
      ];
      for (const [where, write] of writes) {
        const error = await write().then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(error, `${what} in a ${where}`).toBeInstanceOf(NotJson);
      }
    }
    expect(store.stats.commits).toBe(before);
    expect(await store.read((sql) => sql.get("SELECT count(*) AS n FROM tasks"))).toEqual({ n: 0 });
    expect(await store.read((sql) => sql.get("SELECT count(*) AS n FROM entries"))).toEqual({ n: 0 });
    expect(await h.tasks()).toEqual([]);
    await engineStillRuns(h);
    await h.close();
  });

  test("a memo or an outcome that is not plain JSON fails its commit with NotJson; the task's record is unchanged", async () => {
    for (const [what, bad] of notJson()) {
      const store = await memoryStore();
      const h = await Harness.open(store);
      const seen: unknown[] = [];
      const def = single("strict-step", async (_t, runtime) => {
        await runtime.memo("m", asJson(bad)).catch((e: unknown) => seen.push(e));
        await runtime
          .commit(() => ({ status: "terminal", outcome: { status: "completed", result: asJson(bad) } }))
          .catch((e: unknown) => seen.push(e));
        await runtime.commit(() => complete("after"));
      });
      const id = await h.createTask(def, null, { ownership: { kind: "conversation" } });
      expect(outcome(await done(h, id)), what).toEqual({ status: "completed", result: "after" });
      expect(
        seen.map((e) => e instanceof NotJson),
        what,
      ).toEqual([true, true]);
      const memos = await store.read((sql) => sql.get("SELECT memos FROM tasks WHERE id = ?", [id]));
      expect(memos?.["memos"] ?? null, what).toBeNull();
      await h.close();
    }
  });

  test("a checkpoint a phase commits, moving on or waiting, that is not plain JSON fails its commit with NotJson; the state the engine builds around it is sealed without a walk, never around it", async () => {
    for (const [what, bad] of notJson()) {
      const store = await memoryStore();
      const h = await Harness.open(store);
      const seen: unknown[] = [];
      const other = await h.createTask(
        single("strict-other", async (_t, runtime) => void (await runtime.commit(() => complete("o")))),
        null,
        { ownership: { kind: "conversation" } },
      );
      await done(h, other);
      const def = single("strict-checkpoint", async (_t, runtime) => {
        const moving = { phase: "go" as const, extra: asJson(bad) };
        await runtime
          .commit(() => ({ status: "running", checkpoint: moving }))
          .catch((e: unknown) => seen.push(e));
        await runtime
          .commit(() => ({ status: "waiting", checkpoint: moving, on: [other], policy: "allSettled" }))
          .catch((e: unknown) => seen.push(e));
        await runtime.commit(() => complete("after"));
      });
      const id = await h.createTask(def, null, { ownership: { kind: "conversation" } });
      const record = await done(h, id);
      expect(outcome(record), what).toEqual({ status: "completed", result: "after" });
      expect(
        seen.map((e) => e instanceof NotJson),
        what,
      ).toEqual([true, true]);
      expect(Object.isFrozen(record.state) && Object.isFrozen(outcome(record)), what).toBe(true);
      await h.close();
    }
  });

  test("plain JSON passes: nested objects, arrays, null, finite numbers, a null-prototype object", async () => {
    const store = await memoryStore();
    const h = await Harness.open(store);
    const bare = Object.create(null) as Record<string, Json>;
    bare["k"] = [1, "two", true, null, { deep: [] }];
    await h.transaction((tx) => {
      tx.appendEntry(1, { kind: "note", data: { a: [1, 2.5, -0], b: { c: null } } });
      tx.writeDoc(1, "plain-doc", { bare });
    });
    const value = await h.doc(1, "plain-doc");
    expect(value).toEqual({ bare: { k: [1, "two", true, null, { deep: [] }] } });
    await h.close();
  });

  test("the check's mark leaves a value as it was: a committed value is frozen with the same keys, JSON and clone; one its caller froze first commits too, and a frozen value that is not JSON is still refused", async () => {
    const h = await Harness.open(await memoryStore());
    const value = { list: [{ n: 1 }], nested: { s: "x" } };
    const frozenFirst = Object.freeze({ inner: Object.freeze([1, 2]) });
    const frozenBad = Object.freeze({ at: new Date(0) });
    await h.transaction((tx) => {
      tx.writeDoc(1, "checked", value);
      tx.writeDoc(1, "frozen-first", frozenFirst as unknown as Json);
    });
    expect(Object.isFrozen(value) && Object.isFrozen(value.list[0]) && Object.isFrozen(value.nested)).toBe(
      true,
    );
    expect(Reflect.ownKeys(value)).toEqual(["list", "nested"]);
    expect(Reflect.ownKeys(value.list)).toEqual(["0", "length"]);
    expect(JSON.stringify(value)).toBe('{"list":[{"n":1}],"nested":{"s":"x"}}');
    expect(structuredClone(value)).toStrictEqual({ list: [{ n: 1 }], nested: { s: "x" } });
    expect(await h.doc(1, "frozen-first")).toEqual({ inner: [1, 2] });
    // Checked once is checked for good, frozen or not: committing the same values again walks nothing new.
    await h.transaction((tx) => {
      tx.writeDoc(1, "again", { value, frozenFirst } as unknown as Json);
    });
    await expect(
      h.transaction((tx) => {
        tx.writeDoc(1, "frozen-bad", frozenBad as unknown as Json);
      }),
    ).rejects.toBeInstanceOf(NotJson);
    await h.close();
  });

  test("a migration that returns a value that is not plain JSON blocks its task alone (migration_failed); the engine runs on", async () => {
    for (const [what, bad] of notJson()) {
      const { image, ids } = await storeWith([parked("old-input"), parked("old-checkpoint")]);
      const [oldInput, oldCheckpoint] = ids as [TaskId, TaskId];
      const reported: string[] = [];
      const h = await Harness.open(image, {
        tasks: [
          defineTask<Json, Go, Json>({
            ...parked("old-input", 2),
            migrate: (_input, checkpoint) => ({ input: asJson(bad), checkpoint: checkpoint as Go }),
          }),
          defineTask<Json, Go, Json>({
            ...parked("old-checkpoint", 2),
            migrate: (input) => ({ input, checkpoint: { phase: "go", extra: asJson(bad) } as Go }),
          }),
          ping,
        ],
        onReport: (e) => void reported.push(String(e)),
      });
      await until(() => blocked(h).length === 2, { what: `${what}: both blocked` });
      expect(blocked(h), what).toEqual([
        { id: oldInput, kind: "old-input", reason: "migration_failed" },
        { id: oldCheckpoint, kind: "old-checkpoint", reason: "migration_failed" },
      ]);
      expect(reported.join("\n"), what).toMatch(/not JSON/);
      expect(await row(image, oldInput), what).toMatchObject({ version: 1, status: "pending" });
      await engineStillRuns(h);
      await h.close();
    }
  });
});
