/**
 * Values out of line (worker/core/spill.ts, decision 0016): on a harness whose rows are bounded
 * (`maxValueBytes`, a Durable Object's 2 MB; here 20,000 bytes so the test is small), an entry over
 * the bound keeps its long strings in parts of their own, content-addressed, and reads back whole
 * after a reopen; the same string twice is stored once; a fork reads its parent's without a copy;
 * deleting the conversations frees the parts no conversation names. A harness without the bound
 * stores every entry inline, as before.
 */
import { expect, test } from "vitest";
import { cutParts, SPILL_PART_CHARS, utf8Length } from "../../../worker/core/spill.ts";
import { type EntryDraft, Harness, type MemoryStore } from "../../../worker/index.ts";
import { memoryStore } from "../../../worker/testing.ts";

const ownerless = { ownership: { kind: "ownerless" as const } };
const BOUND = 20_000;

async function count(store: MemoryStore, sql: string): Promise<number> {
  return store.read(async (q) => Number((await q.get(sql))?.["n"]));
}

async function longestBody(store: MemoryStore): Promise<number> {
  return count(store, "SELECT max(length(body)) AS n FROM entries");
}

test("an entry over the row bound is stored in parts, read back whole, shared by a fork, freed with its conversations", async () => {
  const big = "é".repeat(30_000) + "🙂".repeat(20_000); // 2- and 4-byte UTF-8, pairs at part edges
  const other = "q".repeat(70_000);
  const store = await memoryStore();
  const h = await Harness.open(store, { maxValueBytes: BOUND });
  const c = await h.transaction((tx) => tx.createConversation({ kind: "ownerless" }));
  await h.transaction((tx) => {
    tx.appendEntry(c.id, { kind: "note", data: { text: big, small: "kept inline" } });
    tx.appendEntry(c.id, { kind: "note", data: { again: big, more: [other] } });
  });
  // Both rows are under the bound; the two strings are stored once each.
  expect(await longestBody(store)).toBeLessThan(BOUND);
  expect(await count(store, "SELECT count(DISTINCT hash) AS n FROM spills")).toBe(2);
  const image = store.image();
  await h.close();

  const reopened = await memoryStore(image);
  const h2 = await Harness.open(reopened, { maxValueBytes: BOUND });
  const data = (await h2.entries(c.id)).map((e) => e.data);
  expect(data).toEqual([
    { text: big, small: "kept inline" },
    { again: big, more: [other] },
  ]);
  const first = (await h2.entries(c.id))[0]!;
  const fork = await h2.forkRecord(c.id, first.id, ownerless);
  expect((await h2.entries(fork.id)).map((e) => e.data)).toEqual([{ text: big, small: "kept inline" }]);
  // The fork wrote no parts of its own.
  expect(await count(reopened, "SELECT count(DISTINCT hash) AS n FROM spills")).toBe(2);
  await h2.transaction((tx) => tx.appendEntry(fork.id, { kind: "note", data: { mine: other } }));
  expect(await count(reopened, "SELECT count(DISTINCT hash) AS n FROM spills")).toBe(2);

  // The parent cannot go while its fork lives; the fork goes first: its own reference goes, the
  // parent's keep every part.
  await h2.deleteConversation(fork.id);
  expect(await count(reopened, "SELECT count(DISTINCT hash) AS n FROM spills")).toBe(2);
  await h2.deleteConversation(c.id);
  expect(await count(reopened, "SELECT count(*) AS n FROM spills")).toBe(0);
  expect(await count(reopened, "SELECT count(*) AS n FROM spill_refs")).toBe(0);
  await h2.close();
});

test("without a bound nothing spills: the row holds the whole value", async () => {
  const store = await memoryStore();
  const h = await Harness.open(store);
  const c = await h.transaction((tx) => tx.createConversation({ kind: "ownerless" }));
  await h.transaction((tx) => tx.appendEntry(c.id, { kind: "note", data: "z".repeat(100_000) }));
  expect(await longestBody(store)).toBeGreaterThan(100_000);
  expect(await count(store, "SELECT count(*) AS n FROM spills")).toBe(0);
  await h.close();
});

test("parts stay within the row bound and never cut a surrogate pair", () => {
  const text = `a${"🙂".repeat(SPILL_PART_CHARS)}`;
  const parts = cutParts(text);
  expect(parts.join("")).toBe(text);
  for (const part of parts) {
    expect(part.length).toBeLessThanOrEqual(SPILL_PART_CHARS);
    expect(part.isWellFormed()).toBe(true);
    expect(utf8Length(part)).toBeLessThan(2_000_000);
  }
});

test("an entry draft carrying the reserved $spill key is refused, typed, and nothing is written; the same key inside data is plain data", async () => {
  const store = await memoryStore();
  const h = await Harness.open(store, { maxValueBytes: BOUND });
  const c = await h.transaction((tx) => tx.createConversation({ kind: "ownerless" }));
  const before = await count(store, "SELECT count(*) AS n FROM entries");
  const hostile = { kind: "note", $spill: [["kind"]] } as unknown as EntryDraft;
  await expect(h.transaction((tx) => tx.appendEntry(c.id, hostile))).rejects.toMatchObject({
    name: "InvalidTransition",
    message: expect.stringContaining("$spill"),
  });
  expect(await count(store, "SELECT count(*) AS n FROM entries")).toBe(before);
  // Inside data the key means nothing: it reads back as written.
  await h.transaction((tx) => tx.appendEntry(c.id, { kind: "note", data: { $spill: [["x"]], x: "y" } }));
  const entries = await h.entries(c.id);
  expect(entries.at(-1)?.data).toEqual({ $spill: [["x"]], x: "y" });
  await h.close();
});
