/**
 * The list and the search page (issue 30, item 4: what serves live work is O(live work), not
 * O(store)): `ConversationList.watchPage` hands out the newest `limit` conversations and the total,
 * and is not told of commits outside its page; `searchConversationPage` reads a bounded window of
 * entries per page and says where the next one starts; the engine service's `searchPage` puts the
 * title matches first and pages the rest. Sizes here are small: the limits are what is asserted.
 */
import { describe, expect, test } from "vitest";
import { ConversationList, TITLE_DOC } from "../../../worker/app/conversation-list.ts";
import { HarnessEngine } from "../../../worker/app/engine-service.ts";
import { searchConversationPage } from "../../../worker/app/search.ts";
import type { ConversationPage } from "../../../worker/protocol/index.ts";
import type { MemoryStore } from "../../../worker/store/open.ts";
import { recordJobs, type StoreJob, until } from "../../../worker/testing.ts";
import { echo, open, reopen } from "../agent/fixtures.ts";

/** `n` ownerless conversations titled "Topic <i>", in one commit; their ids, oldest first. */
async function conversations(h: Awaited<ReturnType<typeof open>>["h"], n: number): Promise<number[]> {
  return h.transaction((tx) =>
    Array.from({ length: n }, (_, i) => {
      const c = tx.createConversation({ kind: "ownerless" });
      tx.writeDoc(c.id, TITLE_DOC, { title: `Topic ${i + 1}` });
      return c.id;
    }),
  );
}

/** A question in each of `ids` (committed entries; nothing runs). */
async function say(h: Awaited<ReturnType<typeof open>>["h"], ids: number[], text: (id: number) => string) {
  await h.transaction((tx) => {
    for (const id of ids)
      tx.appendEntry(id, {
        kind: "pi.user",
        model: [{ role: "user", content: text(id), timestamp: 0 }],
      });
  });
}

describe("the conversation list's page", () => {
  test("the newest `limit` conversations, newest first, with the total", async () => {
    const { h } = await open(echo);
    const ids = await conversations(h, 30);
    const list = await ConversationList.open(h);
    const page = await list.page(10);
    expect(page.total).toBe(31); // with Main
    expect(page.items.map((c) => c.id)).toEqual(ids.slice(-10).reverse());
    expect((await list.page(100)).items).toHaveLength(31);
    list.close();
  });

  test("a page watcher hears commits inside its page and the total, never one outside it", async () => {
    const { h } = await open(echo);
    const ids = await conversations(h, 30);
    const list = await ConversationList.open(h);
    const pages: ConversationPage[] = [];
    list.watchPage(5, (p) => void pages.push(p));
    await until(() => pages.length === 1);
    // Renaming an old conversation (outside the newest five) delivers nothing.
    await h.transaction((tx) => tx.writeDoc(ids[0]!, TITLE_DOC, { title: "Renamed old" }));
    // Renaming one inside the page does.
    await h.transaction((tx) => tx.writeDoc(ids.at(-1)!, TITLE_DOC, { title: "Renamed new" }));
    await until(() => pages.length === 2);
    expect(pages[1]!.items[0]).toMatchObject({ id: ids.at(-1), title: "Renamed new" });
    expect(pages[1]!.items.map((c) => c.title)).not.toContain("Renamed old");
    // A new conversation enters at the top and counts.
    const [added] = await conversations(h, 1);
    await until(() => pages.length === 3);
    expect(pages[2]!.items[0]!.id).toBe(added);
    expect(pages[2]!.items).toHaveLength(5);
    expect(pages[2]!.total).toBe(32);
    // A deletion inside the page lets the next older one in.
    await h.deleteConversation(added!);
    await until(() => pages.length === 4);
    expect(pages[3]!.items.map((c) => c.id)).toEqual(ids.slice(-5).reverse());
    expect(pages[3]!.total).toBe(31);
    list.close();
  });
});

describe("the list's reads after a reopen (its summaries read on demand)", () => {
  test("a page reads only its own; a rename committed while it is read, or of one not read yet, shows", async () => {
    const { h, store, faux } = await open(echo);
    const ids = await conversations(h, 30);
    await h.close();
    const h2 = await reopen(store, { models: faux.models, defaultModel: faux.ref });
    const recorder: { into: StoreJob[] } = { into: [] };
    recordJobs(h2.store as MemoryStore, recorder);
    const list = await ConversationList.open(h2);
    expect(recorder.into).toEqual([]);
    const reading = list.page(5);
    await h2.transaction((tx) => tx.writeDoc(ids.at(-1)!, TITLE_DOC, { title: "Renamed while read" }));
    await reading;
    const page = await list.page(5);
    expect(page.items.map((c) => c.id)).toEqual(ids.slice(-5).reverse());
    expect(page.items[0]!.title).toBe("Renamed while read");
    // The page's first read (the first job) asked the top-level index for its five ids and the
    // total (a count: one row); its second asked for those five ids' two documents: no more rows.
    const [idsRead] = recorder.into;
    expect(idsRead!.kind).toBe("read");
    expect(idsRead!.statements.map((s) => s.sql)).toEqual([
      expect.stringContaining("owner_task IS NULL AND id < ?"),
      expect.stringContaining("count(*)"),
    ]);
    expect(idsRead!.rowsRead).toBe(5 + 1);
    const docsRead = recorder.into.find(
      (j) =>
        j.kind === "read" &&
        j.statements[0]!.sql.startsWith("SELECT conversation_id, name, value FROM documents"),
    );
    expect(docsRead!.rowsRead).toBeLessThanOrEqual(10);
    // One never read, renamed: a page that reaches it reads it as committed.
    await h2.transaction((tx) => tx.writeDoc(ids[0]!, TITLE_DOC, { title: "Old one renamed" }));
    expect((await list.page(100)).items.at(-2)).toMatchObject({ id: ids[0], title: "Old one renamed" });
    expect((await list.titleMatches("old one", 10)).items).toMatchObject([{ id: ids[0] }]);
    list.close();
  });
});

/** `n` titled conversations, the harness reopened over their store with its reads recorded, and its list. */
async function reopenedList(n: number) {
  const { h, store, faux } = await open(echo);
  const ids = await conversations(h, n);
  const h2 = await reopen(store, { models: faux.models, defaultModel: faux.ref });
  const recorder: { into: StoreJob[] } = { into: [] };
  recordJobs(h2.store as MemoryStore, recorder);
  return { ids, h2, recorder, list: await ConversationList.open(h2) };
}

describe("the title search", () => {
  test("once a title walk read every listed conversation, later title searches read nothing, and still see creations, renames and deletions", async () => {
    const { ids, h2, recorder, list } = await reopenedList(12);
    // A title no conversation has: the walk reads every listed id and title, to the end.
    expect(await list.titleMatches("zebrafinch", 10)).toEqual({ items: [] });
    expect(recorder.into.length).toBeGreaterThan(0);
    recorder.into.length = 0;
    expect((await list.titleMatches("topic 1", 10)).items.map((c) => c.id)).toEqual([
      ids[11],
      ids[10],
      ids[9],
      ids[0],
    ]);
    expect(recorder.into).toEqual([]);
    // What commits change is seen without a read: a creation, a rename, a deletion.
    const [made] = await conversations(h2, 1);
    await h2.transaction((tx) => tx.writeDoc(ids[4]!, TITLE_DOC, { title: "Renamed topic" }));
    await h2.deleteConversation(ids[11]!);
    recorder.into.length = 0;
    expect((await list.titleMatches("topic 1", 10)).items.map((c) => c.id)).toEqual([
      made,
      ids[10],
      ids[9],
      ids[0],
    ]);
    expect((await list.titleMatches("renamed", 10)).items.map((c) => c.id)).toEqual([ids[4]]);
    expect(recorder.into.filter((j) => j.kind === "read")).toEqual([]);
    list.close();
  });
});

describe("the title search's pages", () => {
  test("a walk reads at most `scan` conversations' titles and says where the next one starts; walks from there reach every match once", async () => {
    const { ids, recorder, list } = await reopenedList(12);
    const idReads = () =>
      recorder.into.filter(
        (j) => j.kind === "read" && j.statements[0]!.sql.includes("owner_task IS NULL AND id < ?"),
      );
    // A title no conversation has, 13 listed (with Main), 5 a walk: three walks, each reading at
    // most 5 ids, the last one to the end.
    const walks: Array<{ n: number; before?: number }> = [];
    let before: number | undefined;
    do {
      recorder.into.length = 0;
      const page = await list.titleMatches("zebrafinch", 10, {
        scan: 5,
        ...(before !== undefined ? { before } : {}),
      });
      expect(page.items).toEqual([]);
      walks.push({
        n: idReads().reduce((n, j) => n + j.rowsRead, 0),
        ...(page.before !== undefined ? { before: page.before } : {}),
      });
      before = page.before;
    } while (before !== undefined);
    expect(walks).toEqual([{ n: 5, before: ids[7] }, { n: 5, before: ids[2] }, { n: 3 }]);
    // Walks that started below the newest never make the list whole: a new walk from the newest
    // reads again.
    recorder.into.length = 0;
    const first = await list.titleMatches("topic 1", 2, { scan: 5 });
    expect(first.items.map((c) => c.id)).toEqual([ids[11], ids[10]]);
    // Full at its limit: the next walk starts below the last match, not below the last id read.
    expect(first.before).toBe(ids[10]);
    const rest: number[] = [];
    let at: number | undefined = first.before;
    while (at !== undefined) {
      const page = await list.titleMatches("topic 1", 2, { scan: 5, before: at });
      rest.push(...page.items.map((c) => c.id));
      at = page.before;
    }
    expect(rest).toEqual([ids[9], ids[0]]);
    list.close();
  });

  test("the engine's searchPage goes on with the titles where a full page left them (titlesBefore), then with the text", async () => {
    const { h } = await open(echo);
    const ids = await conversations(h, 6);
    for (const i of [1, 2, 5])
      await h.transaction((tx) => tx.writeDoc(ids[i]!, TITLE_DOC, { title: `Pelicans ${i}` }));
    await say(h, [ids[3]!], () => "pelicans everywhere");
    const service = new HarnessEngine({ harness: async () => h, build: "test" });
    const tab = service.tab("t");
    const first = await tab.conversations.searchPage("pelicans", { limit: 2 });
    expect(first.items.map((c) => c.id)).toEqual([ids[5], ids[2]]);
    expect(first.titlesBefore).toBe(ids[2]);
    const second = await tab.conversations.searchPage("pelicans", {
      limit: 2,
      before: first.before!,
      titlesBefore: first.titlesBefore!,
    });
    // The last title match, then the newest text match; the titles are walked to the end.
    expect(second.items.map((c) => c.id)).toEqual([ids[1], ids[3]]);
    expect(second.titlesBefore).toBeUndefined();
    await expect(tab.conversations.searchPage("pelicans", { limit: 2, titlesBefore: 0 })).rejects.toThrow(
      /titlesBefore must be a conversation id/,
    );
  });
});

describe("a search page", () => {
  test("reads at most `scanRows` entry ids and says where the next page starts", async () => {
    const { h } = await open(echo);
    const ids = await conversations(h, 12);
    // The oldest conversation says the rare word; then 11 others each say common words.
    await say(h, [ids[0]!], () => "a zebrafinch sang");
    for (let i = 0; i < 5; i++) await say(h, ids.slice(1), (id) => `filler ${id} round ${i}`);
    const first = await searchConversationPage(h.store, "zebrafinch", {
      limit: 10,
      scanRows: 20,
      window: 10,
    });
    // Twenty entries back from the newest do not reach the oldest: nothing yet, and a place to go on.
    expect(first.ids).toEqual([]);
    expect(first.before).toBeDefined();
    // Page by page, the search reaches it and then ends.
    let page = first;
    const found: number[] = [];
    let pages = 1;
    while (page.before !== undefined) {
      page = await searchConversationPage(h.store, "zebrafinch", {
        limit: 10,
        scanRows: 20,
        window: 10,
        before: page.before,
      });
      found.push(...page.ids);
      pages++;
    }
    expect(found).toEqual([ids[0]]);
    expect(pages).toBeGreaterThan(2);
  });

  test("stops at `limit` conversations, the next page going on below the last match", async () => {
    const { h } = await open(echo);
    const ids = await conversations(h, 8);
    await say(h, ids, (id) => `common word in ${id}`);
    const first = await searchConversationPage(h.store, "common word", { limit: 3 });
    expect(first.ids).toEqual(ids.slice(-3).reverse());
    const second = await searchConversationPage(h.store, "common word", { limit: 3, before: first.before! });
    expect(second.ids).toEqual(ids.slice(-6, -3).reverse());
    const third = await searchConversationPage(h.store, "common word", { limit: 3, before: second.before! });
    expect(third.ids).toEqual(ids.slice(0, 2).reverse());
    expect(third.before).toBeUndefined();
  });

  test("the engine's searchPage: title matches first, each conversation once, bounded by its limit", async () => {
    const { h } = await open(echo);
    const ids = await conversations(h, 6);
    await h.transaction((tx) => tx.writeDoc(ids[1]!, TITLE_DOC, { title: "About pelicans" }));
    await say(h, [ids[1]!, ids[3]!, ids[4]!], () => "pelicans everywhere");
    const service = new HarnessEngine({ harness: async () => h, build: "test" });
    const tab = service.tab("t");
    const page = await tab.conversations.searchPage("Pelicans", { limit: 2 });
    expect(page.items.map((c) => c.id)).toEqual([ids[1], ids[4]]);
    expect(page.items[0]!.title).toBe("About pelicans");
    expect(page.before).toBeDefined();
    const next = await tab.conversations.searchPage("pelicans", { limit: 2, before: page.before! });
    expect(next.items.map((c) => c.id)).toEqual([ids[3], ids[1]]);
    await expect(tab.conversations.searchPage("pelicans", { limit: 0 })).resolves.toMatchObject({
      items: [expect.anything()],
    });
  });

  test("the engine's watchPage delivers a page and its total", async () => {
    const { h } = await open(echo);
    await conversations(h, 4);
    const service = new HarnessEngine({ harness: async () => h, build: "test" });
    const pages: ConversationPage[] = [];
    await service.tab("t").conversations.watchPage({ limit: 2 }, (p) => void pages.push(p));
    await until(() => pages.length === 1);
    expect(pages[0]!.items).toHaveLength(2);
    expect(pages[0]!.total).toBe(5);
  });
});
