/**
 * Document patches (worker/core/doc-patch.ts): a change stored as its own row instead of a new copy
 * of the document, replayed at open; whole writes and the row limit fold them back into the document.
 */
import { describe, expect, test } from "vitest";
import { applyDocPatches, type DocPatch, PATCH_ROW_LIMIT } from "../../../worker/core/doc-patch.ts";
import { internals } from "../../../worker/core/internals.ts";
import { Harness, InvalidTransition, type Json, NotJson } from "../../../worker/index.ts";
import type { MemoryStore } from "../../../worker/store/open.ts";
import { memoryStore, recordJobs, type StoreJob } from "../../../worker/testing.ts";

const DOC = "test.stream";

/** The stored rows behind the document: its row's value and its patch rows. */
async function stored(store: MemoryStore): Promise<{ row: Json | undefined; patches: DocPatch[] }> {
  return store.read(async (sql) => {
    const row = await sql.get("SELECT value FROM documents WHERE conversation_id = 1 AND name = ?", [DOC]);
    const patches = await sql.all(
      "SELECT op FROM doc_patches WHERE conversation_id = 1 AND name = ? ORDER BY id",
      [DOC],
    );
    return {
      row: row ? (JSON.parse(String(row["value"])) as Json) : undefined,
      patches: patches.map((p) => JSON.parse(String(p["op"])) as DocPatch),
    };
  });
}

async function reopened(store: MemoryStore): Promise<Json | undefined> {
  const h = await Harness.open(await memoryStore(store.image()));
  const value = await h.transaction((tx) => tx.readDoc(1, DOC));
  await h.close();
  return value;
}

describe("applying patches", () => {
  test("appends to strings and absent keys, sets keys and array items, and copies only the path", () => {
    const original = Object.freeze({
      tools: Object.freeze([Object.freeze({ id: 1, output: "ab" }), Object.freeze({ id: 2 })]),
      other: Object.freeze({ kept: true }),
    });
    const next = applyDocPatches(original as unknown as Json, [
      { path: ["tools", 0, "output"], append: "cd" },
      { path: ["tools", 1, "output"], append: "x" },
      { path: ["tools", 1, "dropped"], set: 3 },
      { path: ["tools", 0], set: { id: 1, output: "abcd", done: true } },
      { path: ["tools", 2], set: { id: 3 } },
    ]) as typeof original & { tools: Array<Record<string, Json>> };
    expect(next).toEqual({
      tools: [{ id: 1, output: "abcd", done: true }, { id: 2, output: "x", dropped: 3 }, { id: 3 }],
      other: { kept: true },
    });
    expect(original.tools[0]).toEqual({ id: 1, output: "ab" });
    expect(next.other).toBe(original.other);
  });

  test("removes an item of an array (the items after it move down), copying only the path", () => {
    const original = Object.freeze({
      items: Object.freeze([1, 2, 3, 4].map((id) => Object.freeze({ id }))),
      other: Object.freeze({ kept: true }),
    });
    const next = applyDocPatches(original as unknown as Json, [
      { path: ["items", 3], remove: true },
      { path: ["items", 0], remove: true },
    ]) as unknown as typeof original;
    expect(next).toEqual({ items: [{ id: 2 }, { id: 3 }], other: { kept: true } });
    expect(next.items[0]).toBe(original.items[1]);
    expect(next.other).toBe(original.other);
    expect(original.items).toHaveLength(4);
  });

  test("a path that does not fit the document is refused with InvalidTransition", () => {
    const doc = { list: [{ text: "a", n: 1 }], name: "x" };
    const bad: Array<[Json | undefined, DocPatch]> = [
      [undefined, { path: ["a"], append: "x" }],
      [doc, { path: [], append: "x" }],
      [doc, { path: ["missing", "text"], append: "x" }],
      [doc, { path: ["list", 1, "text"], append: "x" }],
      [doc, { path: ["list", 1], append: "x" }],
      [doc, { path: ["list", 2], set: {} }],
      [doc, { path: ["list", "0", "text"], append: "x" }],
      [doc, { path: ["list", 0, "n"], append: "x" }],
      [doc, { path: ["name", "inner"], set: 1 }],
      [doc, { path: ["name"], append: 5 } as unknown as DocPatch],
      [doc, { path: ["list", 1], remove: true }],
      [doc, { path: ["list", -1], remove: true }],
      [doc, { path: ["name"], remove: true }],
      [doc, { path: ["list", 0], remove: false } as unknown as DocPatch],
    ];
    for (const [value, patch] of bad)
      expect(() => applyDocPatches(value, [patch])).toThrow(InvalidTransition);
  });
});

describe("stored patches", () => {
  test("a patch commit stores only the patch; the document replays whole at open", async () => {
    const store = await memoryStore();
    const h = await Harness.open(store);
    await h.transaction((tx) => tx.writeDoc(1, DOC, { slot: { output: "start " } }));
    for (let i = 0; i < 5; i++)
      await h.transaction((tx) => tx.patchDoc(1, DOC, [{ path: ["slot", "output"], append: `chunk${i} ` }]));
    const value = { slot: { output: "start chunk0 chunk1 chunk2 chunk3 chunk4 " } };
    expect(await h.transaction((tx) => tx.readDoc(1, DOC))).toEqual(value);
    const rows = await stored(store);
    expect(rows.row).toEqual({ slot: { output: "start " } });
    expect(rows.patches.map((p) => "append" in p && p.append)).toEqual([
      "chunk0 ",
      "chunk1 ",
      "chunk2 ",
      "chunk3 ",
      "chunk4 ",
    ]);
    expect(await reopened(store)).toEqual(value);
    // A whole write folds the patches away.
    await h.transaction((tx) => tx.writeDoc(1, DOC, { slot: { output: "reset" } }));
    expect(await stored(store)).toEqual({ row: { slot: { output: "reset" } }, patches: [] });
    await h.transaction((tx) => tx.patchDoc(1, DOC, [{ path: ["slot", "output"], append: "!" }]));
    expect(await reopened(store)).toEqual({ slot: { output: "reset!" } });
    // Deleting the document deletes its patches too.
    await h.transaction((tx) => tx.retireDoc(1, DOC));
    expect(await stored(store)).toEqual({ row: undefined, patches: [] });
    expect(await reopened(store)).toBeUndefined();
    await h.close();
  });

  test("a document read is an indexed base-plus-tail range: its row and its patch rows are searched by index, never scanned (spec §11.2)", async () => {
    const store = await memoryStore();
    const h = await Harness.open(store);
    // Another conversation's document and patches beside it, so a scan would have rows to walk.
    const other = await h.transaction((tx) => tx.createConversation({ kind: "ownerless" }).id);
    for (const c of [1, other]) {
      await h.transaction((tx) => tx.writeDoc(c, DOC, { text: `${c}:` }));
      for (let i = 0; i < 3; i++)
        await h.transaction((tx) => tx.patchDoc(c, DOC, [{ path: ["text"], append: `${i}` }]));
    }
    await h.close();
    const again = await memoryStore(store.image());
    const recorder: { into: StoreJob[] } = { into: [] };
    recordJobs(again, recorder);
    const h2 = await Harness.open(again);
    expect(await h2.transaction((tx) => tx.readDoc(1, DOC))).toEqual({ text: "1:012" });
    const reads = new Map<string, readonly unknown[] | undefined>();
    for (const job of recorder.into)
      for (const s of job.statements)
        if (/^\s*SELECT/i.test(s.sql) && /\b(documents|doc_patches)\b/.test(s.sql))
          reads.set(s.sql, s.params);
    // The base (the document's row) and its tail (the patch rows) were both read.
    expect([...reads.keys()].some((q) => /FROM documents\b/.test(q))).toBe(true);
    expect([...reads.keys()].some((q) => /FROM doc_patches\b/.test(q))).toBe(true);
    const scans: string[] = [];
    for (const [sql, params] of reads) {
      const plan = await again.read((q) => q.all(`EXPLAIN QUERY PLAN ${sql}`, params as never));
      for (const step of plan) {
        const detail = String(step["detail"]);
        if (/^SCAN (documents|doc_patches)\b/.test(detail))
          scans.push(`${sql.replace(/\s+/g, " ")} -> ${detail}`);
      }
    }
    expect(scans).toEqual([]);
    await h2.close();
  });

  test("a snapshotAsOf read of a document stored before its history existed finds its row and patch rows by index, never by a scan", async () => {
    const store = await memoryStore();
    const h = await Harness.open(store, { forks: { asOf: [DOC] } });
    const other = await h.transaction((tx) => tx.createConversation({ kind: "ownerless" }).id);
    let at = 0;
    for (const c of [other, 1]) {
      at = await h.transaction((tx) => {
        tx.writeDoc(c, DOC, { text: `${c}:` });
        return tx.appendEntry(c, { kind: "app.note", data: "written" }).id;
      });
      await h.transaction((tx) => tx.patchDoc(c, DOC, [{ path: ["text"], append: "0" }]));
    }
    await h.close();
    const again = await memoryStore(store.image());
    // A store from before document history: the incarnation is rewindable, its history rows absent.
    await again.commit((sql) => sql.run("DELETE FROM doc_history"));
    const recorder: { into: StoreJob[] } = { into: [] };
    recordJobs(again, recorder);
    const h2 = await Harness.open(again);
    // Read as it is now (the value it has now, patches replayed): the only value the store holds.
    expect((await h2.snapshotAsOf(1, DOC, at))?.value).toEqual({ text: "1:0" });
    const scans: string[] = [];
    for (const job of recorder.into)
      for (const s of job.statements) {
        if (!/^\s*SELECT/i.test(s.sql) || !/\b(documents|doc_patches)\b/.test(s.sql)) continue;
        const plan = await again.read((q) => q.all(`EXPLAIN QUERY PLAN ${s.sql}`, s.params as never));
        for (const step of plan)
          if (/^SCAN (documents|doc_patches)\b/.test(String(step["detail"])))
            scans.push(`${s.sql.replace(/\s+/g, " ")} -> ${String(step["detail"])}`);
      }
    expect(scans).toEqual([]);
    await h2.close();
  });

  test("a historical read of a rewindable document, by snapshotAsOf and by a fork at an older entry, finds its history rows by index, never by a scan", async () => {
    // Draw 40, 20: the tests above read a document as it is now (its row and patch rows) and a
    // rewindable one whose history rows were deleted; a historical read through the history rows
    // made unindexable passed them all.
    const store = await memoryStore();
    const h = await Harness.open(store, { forks: { asOf: [DOC] } });
    const other = await h.transaction((tx) => tx.createConversation({ kind: "ownerless" }).id);
    const at: Record<number, number[]> = {};
    for (const c of [other, 1]) {
      at[c] = [];
      for (let i = 0; i < 3; i++)
        at[c]!.push(
          await h.transaction((tx) => {
            if (i === 0) tx.writeDoc(c, DOC, { text: `${c}:` });
            else tx.patchDoc(c, DOC, [{ path: ["text"], append: `${i}` }]);
            return tx.appendEntry(c, { kind: "app.note", data: i }).id;
          }),
        );
    }
    await h.close();
    const again = await memoryStore(store.image());
    const recorder: { into: StoreJob[] } = { into: [] };
    recordJobs(again, recorder);
    const h2 = await Harness.open(again, { forks: { asOf: [DOC] } });
    expect((await h2.snapshotAsOf(1, DOC, at[1]![1]!))?.value).toEqual({ text: "1:1" });
    const fork = await h2.forkRecord(1, at[1]![0]!, { ownership: { kind: "ownerless" } });
    expect(await h2.doc(fork.id, DOC)).toEqual({ text: "1:" });
    const reads = recorder.into.flatMap((job) =>
      job.statements.filter(
        (s) => /^\s*SELECT/i.test(s.sql) && /\b(documents|doc_patches|doc_history)\b/.test(s.sql),
      ),
    );
    expect(reads.some((s) => /FROM doc_history\b/.test(s.sql))).toBe(true);
    const scans: string[] = [];
    for (const s of reads) {
      const plan = await again.read((q) => q.all(`EXPLAIN QUERY PLAN ${s.sql}`, s.params as never));
      for (const step of plan)
        if (/^SCAN (documents|doc_patches|doc_history)\b/.test(String(step["detail"])))
          scans.push(`${s.sql.replace(/\s+/g, " ")} -> ${String(step["detail"])}`);
    }
    expect(scans).toEqual([]);
    await h2.close();
  });

  test(`a document never holds more than ${PATCH_ROW_LIMIT} patch rows: the next change is written whole`, async () => {
    const store = await memoryStore();
    const h = await Harness.open(store);
    await h.transaction((tx) => tx.writeDoc(1, DOC, { text: "" }));
    let expected = "";
    for (let i = 0; i < PATCH_ROW_LIMIT; i++) {
      expected += `${i},`;
      await h.transaction((tx) => tx.patchDoc(1, DOC, [{ path: ["text"], append: `${i},` }]));
    }
    expect((await stored(store)).patches).toHaveLength(PATCH_ROW_LIMIT);
    expected += "last,";
    await h.transaction((tx) => tx.patchDoc(1, DOC, [{ path: ["text"], append: "last," }]));
    expect(await stored(store)).toEqual({ row: { text: expected }, patches: [] });
    // The count restarted: the next change is a patch row again, and it survives a restart.
    await h.transaction((tx) => tx.patchDoc(1, DOC, [{ path: ["text"], append: "again" }]));
    expect((await stored(store)).patches).toHaveLength(1);
    await h.close();
    const store2 = await memoryStore(store.image());
    const h2 = await Harness.open(store2);
    expect(await h2.transaction((tx) => tx.readDoc(1, DOC))).toEqual({ text: `${expected}again` });
    // Rows counted at open: the limit still holds across the restart.
    for (let i = 0; i < PATCH_ROW_LIMIT; i++)
      await h2.transaction((tx) => tx.patchDoc(1, DOC, [{ path: ["text"], append: "." }]));
    const after = await h2.transaction((tx) => tx.readDoc<{ text: string }>(1, DOC));
    expect(after?.text).toBe(`${expected}again${".".repeat(PATCH_ROW_LIMIT)}`);
    expect((await stored(store2)).patches.length).toBeLessThanOrEqual(PATCH_ROW_LIMIT);
    await h2.close();
  });

  test("grouped commits store each one's patches in order; a whole write in the group wins", async () => {
    const store = await memoryStore();
    const h = await Harness.open(store);
    await h.transaction((tx) => tx.writeDoc(1, DOC, { text: "" }));
    const before = store.stats.transactions;
    await Promise.all([
      h.transaction((tx) => tx.patchDoc(1, DOC, [{ path: ["text"], append: "a" }])),
      h.transaction((tx) => tx.patchDoc(1, DOC, [{ path: ["text"], append: "b" }])),
      h.transaction((tx) => tx.patchDoc(1, DOC, [{ path: ["text"], append: "c" }])),
    ]);
    expect(store.stats.transactions - before).toBe(1);
    expect(await stored(store)).toEqual({
      row: { text: "" },
      patches: [
        { path: ["text"], append: "a" },
        { path: ["text"], append: "b" },
        { path: ["text"], append: "c" },
      ],
    });
    await Promise.all([
      h.transaction((tx) => tx.patchDoc(1, DOC, [{ path: ["text"], append: "d" }])),
      h.transaction((tx) => {
        const current = tx.readDoc<{ text: string }>(1, DOC)!;
        tx.writeDoc(1, DOC, { text: `${current.text}E` });
      }),
      h.transaction((tx) => tx.patchDoc(1, DOC, [{ path: ["text"], append: "f" }])),
    ]);
    expect(await stored(store)).toEqual({ row: { text: "abcdEf" }, patches: [] });
    expect(await reopened(store)).toEqual({ text: "abcdEf" });
    await h.close();
  });

  test("one commit that patches a document, then writes it whole, stores one value: the whole one, with no patch rows", async () => {
    // Break 29I: a whole write that kept the commit's earlier patches stored the patches on the old
    // row, not the value written (each document write is evaluated once into one stored value, spec §3.4).
    const store = await memoryStore();
    const h = await Harness.open(store);
    await h.transaction((tx) => tx.writeDoc(1, DOC, { text: "old" }));
    await h.transaction((tx) => {
      tx.patchDoc(1, DOC, [{ path: ["text"], append: "+p" }]);
      tx.writeDoc(1, DOC, { text: "whole" });
    });
    expect(await h.doc(1, DOC)).toEqual({ text: "whole" });
    expect(await stored(store)).toEqual({ row: { text: "whole" }, patches: [] });
    expect(await reopened(store)).toEqual({ text: "whole" });
    await h.close();
  });

  test("a refused patch fails its own commit and leaves the document as it was", async () => {
    const store = await memoryStore();
    const h = await Harness.open(store);
    await h.transaction((tx) => tx.writeDoc(1, DOC, { text: "kept" }));
    await expect(
      h.transaction((tx) => tx.patchDoc(1, DOC, [{ path: ["nope", "x"], append: "!" }])),
    ).rejects.toThrow(InvalidTransition);
    await expect(h.transaction((tx) => tx.patchDoc(1, "absent", [{ path: ["x"], set: 1 }]))).rejects.toThrow(
      InvalidTransition,
    );
    expect(await stored(store)).toEqual({ row: { text: "kept" }, patches: [] });
    expect(await h.transaction((tx) => tx.readDoc(1, DOC))).toEqual({ text: "kept" });
    // A failure found after the callback returned (the final values' JSON check) rolls back the whole
    // commit, its entry and good writes too, before the store writes a row; the engine commits on.
    const jobs: StoreJob[] = [];
    recordJobs(store, { into: jobs });
    await expect(
      h.transaction((tx) => {
        tx.appendEntry(1, { kind: "note", data: "rolled back" });
        tx.patchDoc(1, DOC, [{ path: ["text"], append: "!" }]);
        tx.writeDoc(1, "test.other", { when: new Date(0) } as unknown as Json);
      }),
    ).rejects.toThrow(NotJson);
    expect(jobs.flatMap((j) => j.statements).filter((st) => !/^\s*SELECT/i.test(st.sql))).toEqual([]);
    expect(await h.entries(1)).toEqual([]);
    expect(await h.transaction((tx) => [tx.readDoc(1, DOC), tx.readDoc(1, "test.other")])).toEqual([
      { text: "kept" },
      undefined,
    ]);
    // Requested together with others (one group, one store transaction): the commit the check refuses
    // rolls back alone, its neighbours commit and the engine goes on (break 31C: a refusal in a group
    // failed the group and stopped the engine).
    const together = await Promise.allSettled([
      h.transaction((tx) => tx.writeDoc(1, "test.a", { n: 1 })),
      h.transaction((tx) => tx.writeDoc(1, "test.bad", { when: new Date(0) } as unknown as Json)),
      h.transaction((tx) => tx.writeDoc(1, "test.b", { n: 2 })),
    ]);
    expect(together.map((r) => r.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
    expect((together[1] as PromiseRejectedResult).reason).toBeInstanceOf(NotJson);
    expect(
      await h.transaction((tx) => [
        tx.readDoc(1, "test.a"),
        tx.readDoc(1, "test.bad"),
        tx.readDoc(1, "test.b"),
      ]),
    ).toEqual([{ n: 1 }, undefined, { n: 2 }]);
    // An async callback's final values are checked as a synchronous one's (draw 32cB: checks run only
    // for synchronous callbacks let an awaited callback's Date land as a string): refused whole.
    const asyncJobs: StoreJob[] = [];
    recordJobs(store, { into: asyncJobs });
    await expect(
      h.transaction(async (tx) => {
        await Promise.resolve();
        tx.appendEntry(1, { kind: "note", data: "rolled back too" });
        tx.writeDoc(1, "test.late", { when: new Date(0) } as unknown as Json);
      }),
    ).rejects.toThrow(NotJson);
    expect(asyncJobs.flatMap((j) => j.statements).filter((st) => !/^\s*SELECT/i.test(st.sql))).toEqual([]);
    expect(await h.entries(1)).toEqual([]);
    expect(await h.transaction((tx) => tx.readDoc(1, "test.late"))).toBeUndefined();
    await h.transaction((tx) => tx.patchDoc(1, DOC, [{ path: ["text"], append: "!" }]));
    expect(await reopened(store)).toEqual({ text: "kept!" });
    await h.close();
  });

  test("watchers see the whole new value of a patched document", async () => {
    const h = await Harness.open(await memoryStore());
    await h.transaction((tx) => tx.writeDoc(1, DOC, { text: "a" }));
    const seen: Json[] = [];
    const unsubscribe = internals(h).session.subscribe((change) => {
      for (const d of change.docs) if (d.name === DOC && d.value !== undefined) seen.push(d.value);
    });
    await h.transaction((tx) => tx.patchDoc(1, DOC, [{ path: ["text"], append: "b" }]));
    await h.transaction((tx) => tx.patchDoc(1, DOC, [{ path: ["more"], set: [1] }]));
    unsubscribe();
    expect(seen).toEqual([{ text: "ab" }, { text: "ab", more: [1] }]);
    await h.close();
  });
});
