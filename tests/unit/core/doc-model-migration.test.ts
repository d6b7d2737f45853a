/**
 * Schema migration 7 (the document model, spec §3.2) on a store the release before it wrote
 * (fixtures/v6-store.json, made by fixtures/make-v6-store.ts with that release's code): every
 * document reads as that release read it, each one is an incarnation with an id of its own, the
 * history of rewindable documents is reachable through snapshotAsOf, and new incarnations get new
 * ids.
 */
import { expect, test } from "vitest";
import { SCHEMA_VERSION } from "../../../worker/core/schema.ts";
import { Harness, type Json } from "../../../worker/index.ts";
import { memoryStore } from "../../../worker/testing.ts";
import { v6Fixture as fixture, v6Store } from "./fixtures/v6-store.ts";

test("a store written by the release before the document model opens with every document reading the same, each an incarnation, its history reachable", async () => {
  expect(fixture.schemaVersion).toBe(6);
  expect(SCHEMA_VERSION).toBeGreaterThanOrEqual(7);
  const store = await v6Store();
  const h = await Harness.open(store, { forks: { asOf: ["hist"] } });
  const ids = new Set<number>();
  for (const doc of fixture.documents) {
    const read = await h.docVersioned(doc.conversationId, doc.name);
    expect(read, `${doc.conversationId}:${doc.name}`).toEqual({
      value: doc.value ?? undefined,
      version: doc.version ?? undefined,
    });
    const record = await h.docRecord(doc.conversationId, doc.name);
    if (doc.value === null) expect(record).toBeUndefined();
    else {
      expect(record).toMatchObject({
        kind: doc.name,
        scope: { kind: "conversation", conversationId: doc.conversationId },
        createdAt: 0,
      });
      ids.add(record!.id);
    }
  }
  const present = fixture.documents.filter((d) => d.value !== null).length;
  expect(ids.size).toBe(present);

  // The rewindable document's history, as the old fork points read it: n1, n2, deleted, n4; the
  // fork (conversation `fork`, at e2) reads its parent's at inherited entries.
  const { e1, e2, e3, e4, fork } = fixture.at;
  const asOf = async (c: number, at: number) => (await h.snapshotAsOf(c, "hist", at))?.value;
  expect([await asOf(1, e1), await asOf(1, e2), await asOf(1, e3), await asOf(1, e4)]).toEqual([
    { n: 1 },
    { n: 2 },
    undefined,
    { n: 4 },
  ]);
  expect([await asOf(fork, e1), await asOf(fork, e2)]).toEqual([{ n: 1 }, { n: 2 }]);

  // Patches still replay on the old row, a patch and a whole write still work, and new
  // incarnations get ids above every migrated one.
  const after = await h.transaction((tx) => {
    tx.patchDoc(1, "patched", [{ path: ["text"], append: "e" }]);
    tx.writeDoc(1, "gone", { back: true });
    return { patched: tx.readDoc(1, "patched") as Json, gone: tx.docRecord(1, "gone")!.id };
  });
  expect(after.patched).toEqual({ text: "abcde", n: 2 });
  const stored = await store.read((sql) =>
    sql.get("SELECT max(id) AS m FROM doc_records WHERE id <> ?", [after.gone]),
  );
  expect(after.gone).toBeGreaterThan(Number(stored?.["m"]));
  await h.close();

  const again = await Harness.open(await memoryStore(store.image()), { forks: { asOf: ["hist"] } });
  expect(await again.doc(1, "patched")).toEqual({ text: "abcde", n: 2 });
  expect(await again.doc(1, "gone")).toEqual({ back: true });
  await again.close();
});

test("a record migrated without a fork rule (schema 7 stored the history only) takes the fork rule the option gives its name, current for one that kept no history; its stored history holds without the option", async () => {
  const { e2 } = fixture.at;
  const store = await v6Store();
  // The option names both "asOf": only "hist" kept a history in the old store.
  const h = await Harness.open(store, { forks: { asOf: ["hist", "plain"] } });
  expect(await h.docRecord(1, "hist")).toMatchObject({ history: "rewindable", fork: "asOf" });
  expect(await h.docRecord(1, "plain")).toMatchObject({ history: "latest", fork: "current" });
  const fork = await h.transaction(
    (tx) => tx.forkConversation(1, e2, { ownership: { kind: "ownerless" } }).id,
  );
  expect(await h.doc(fork, "hist")).toEqual({ n: 2 }); // as of e2, not its current { n: 4 }
  expect(await h.doc(fork, "plain")).toEqual({ a: 1 });
  expect(await h.docRecord(fork, "hist")).toMatchObject({ history: "rewindable", fork: "asOf" });
  await h.close();

  // Opened by code that names neither: the stored history is still the record's, so it stays
  // readable; the fork rule nobody stored is the option's default ("current").
  const bare = await Harness.open(await v6Store());
  expect(await bare.docRecord(1, "hist")).toMatchObject({ history: "rewindable", fork: "current" });
  expect((await bare.snapshotAsOf(1, "hist", e2))?.value).toEqual({ n: 2 });
  await bare.close();
});
