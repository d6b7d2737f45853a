/**
 * The document model (spec §3.1-3.3): documents are incarnations with an id never reused, a scope
 * (session, conversation, task) and a lifetime `[createdAt, retiredAt)` in commit positions;
 * `tx.retireDoc()` ends one, and a later write starts a new one; session documents outlive close and
 * reopen, conversation documents go with their conversation, task documents retire in the commit
 * their task becomes terminal; `snapshotAsOf` finds the incarnation alive at an entry's commit, also
 * across a fork; `subscribeClose` and `documentState` on the harness.
 */
import { afterEach, describe, expect, test } from "vitest";
import { internals } from "../../../worker/core/internals.ts";
import {
  ConversationMoved,
  type DocScope,
  EntryNotVisible,
  Harness,
  type HarnessOptions,
  InvalidTransition,
  type Json,
  type MemoryStore,
  SESSION_DOCS,
  type TaskId,
  type Tx,
} from "../../../worker/index.ts";
import { deferred, memoryStore, until } from "../../../worker/testing.ts";
import { done, parked, single } from "./fixtures.ts";

const opened: Harness[] = [];
afterEach(async () => {
  for (const h of opened.splice(0)) await h.close().catch(() => undefined);
});

async function open(store: MemoryStore, options: HarnessOptions = {}): Promise<Harness> {
  const h = await Harness.open(store, options);
  opened.push(h);
  return h;
}

const note = (tx: Tx, c: number, text: string): number =>
  tx.appendEntry(c, { kind: "app.note", data: text }).id;

/** The stored incarnation records of `kind`, oldest first. */
async function stored(store: MemoryStore, kind: string) {
  const rows = await store.read((sql) =>
    sql.all(
      "SELECT id, scope, conversation_id, task_id, created_at, retired_at FROM doc_records WHERE kind = ? ORDER BY id",
      [kind],
    ),
  );
  return rows.map((r) => ({
    id: Number(r["id"]),
    scope: String(r["scope"]),
    createdAt: Number(r["created_at"]),
    retiredAt: r["retired_at"] === null ? undefined : Number(r["retired_at"]),
  }));
}

const taskScope = (taskId: TaskId): DocScope => ({ kind: "task", taskId });

describe("incarnations (spec §3.2)", () => {
  test("a document is an incarnation: its id stays across writes; retire + recreate is a new one; ids are never reused, also after a deletion and a reopen", async () => {
    const store = await memoryStore();
    const h = await open(store);
    const first = await h.transaction((tx) => {
      tx.writeDoc(1, "notes", { n: 1 });
      return { record: tx.docRecord(1, "notes"), entry: note(tx, 1, "one") };
    });
    expect(first.record).toEqual({
      id: expect.any(Number),
      kind: "notes",
      scope: { kind: "conversation", conversationId: 1 },
      history: "latest",
      fork: "current",
      createdAt: first.entry, // the creating commit's position: the first entry id it could append
    });
    await h.transaction((tx) => tx.writeDoc(1, "notes", { n: 2 }));
    expect((await h.docRecord(1, "notes"))?.id).toBe(first.record!.id);

    // Retired and created again in one commit: a new incarnation with a new id.
    const second = await h.transaction((tx) => {
      tx.retireDoc(1, "notes");
      expect(tx.readDoc(1, "notes")).toBeUndefined();
      expect(tx.docRecord(1, "notes")).toBeUndefined();
      tx.writeDoc(1, "notes", { n: 3 });
      return { record: tx.docRecord(1, "notes")!, entry: note(tx, 1, "two") };
    });
    expect(second.record.id).toBeGreaterThan(first.record!.id);
    expect(second.record.createdAt).toBe(second.entry);
    expect(await h.doc(1, "notes")).toEqual({ n: 3 });

    // Retiring an absent document creates nothing; writing undefined is not a way to retire.
    await h.transaction((tx) => tx.retireDoc(1, "never"));
    expect(await h.docRecord(1, "never")).toBeUndefined();
    expect(await stored(store, "never")).toEqual([]);
    await expect(
      h.transaction((tx) => tx.writeDoc(1, "notes", undefined as unknown as Json)),
    ).rejects.toThrow(InvalidTransition);
    expect(await h.doc(1, "notes")).toEqual({ n: 3 });

    const third = await h.transaction((tx) => {
      const at = note(tx, 1, "three");
      tx.retireDoc(1, "notes");
      return at;
    });
    expect(await h.doc(1, "notes")).toBeUndefined();
    expect(await stored(store, "notes")).toEqual([
      { id: first.record!.id, scope: "conversation", createdAt: first.entry, retiredAt: second.entry },
      { id: second.record.id, scope: "conversation", createdAt: second.entry, retiredAt: third },
    ]);

    // The newest id lives in a conversation that is then deleted: still never handed out again.
    const other = await h.transaction((tx) => {
      const c = tx.createConversation({ kind: "ownerless" });
      tx.writeDoc(c.id, "notes", { n: 4 });
      return { c: c.id, id: tx.docRecord(c.id, "notes")!.id };
    });
    await h.deleteConversation(other.c);
    await h.close();
    const again = await open(await memoryStore(store.image()));
    const fresh = await again.transaction((tx) => {
      tx.writeDoc(1, "notes", { n: 5 });
      return tx.docRecord(1, "notes")!.id;
    });
    expect(fresh).toBeGreaterThan(other.id);
  });

  test("a fork's copy of a document is a new incarnation of the fork's commit: a new id, its createdAt the fork commit's position, not its source's; so after a reopen too (draw 35b)", async () => {
    // Draw 35b, 16: every named incarnation was made by a write; a fork's copy stamped with its
    // source's createdAt passed them all.
    const store = await memoryStore();
    const h = await open(store);
    const made = await h.transaction((tx) => {
      tx.writeDoc(1, "notes", { n: 1 });
      return { id: tx.docRecord(1, "notes")!.id, entry: note(tx, 1, "one") };
    });
    await h.transaction((tx) => note(tx, 1, "two"));
    const forked = await h.transaction((tx) => {
      const c = tx.forkConversation(1, made.entry, { ownership: { kind: "ownerless" } }).id;
      return { c, record: tx.docRecord(c, "notes")! };
    });
    // The fork's commit appends no entry: its position is the id the next entry gets.
    const next = await h.transaction((tx) => note(tx, forked.c, "in the fork"));
    expect(next).toBeGreaterThan(made.entry + 1);
    const expected = {
      id: expect.any(Number),
      kind: "notes",
      scope: { kind: "conversation", conversationId: forked.c },
      history: "latest",
      fork: "current",
      createdAt: next,
    };
    expect(forked.record).toEqual(expected);
    expect(forked.record.id).toBeGreaterThan(made.id);
    expect(await h.docRecord(forked.c, "notes")).toEqual(forked.record);
    expect((await h.docRecord(1, "notes"))?.createdAt).toBe(made.entry);
    await h.close();
    const reopened = await memoryStore(store.image());
    const again = await open(reopened);
    expect(await again.docRecord(forked.c, "notes")).toEqual(forked.record);
    expect((await stored(reopened, "notes")).map((r) => [r.id, r.createdAt, r.retiredAt])).toEqual([
      [made.id, made.entry, undefined],
      [forked.record.id, next, undefined],
    ]);
  });

  test("after a reopen, retireDoc ends stored incarnations of a conversation nothing loaded yet, two in one commit; a recreation in that commit starts at version 1", async () => {
    // draw 33, 1: every named retirement was of a document already in memory, one a commit, stored
    // at version 1; a retirement that did not load the conversation's documents first (so found
    // none), or a recreation keeping the retired incarnation's version, passed them.
    const store = await memoryStore();
    const h = await open(store);
    const made = await h.transaction((tx) => {
      const c = tx.createConversation({ kind: "ownerless" });
      tx.writeDoc(c.id, "notes", { n: 1 }, 2);
      tx.writeDoc(c.id, "marks", { m: 1 });
      return { c: c.id, at: note(tx, c.id, "one"), notes: tx.docRecord(c.id, "notes")!.id };
    });
    await h.close();
    const reopened = await memoryStore(store.image());
    const again = await open(reopened);
    const retired = await again.transaction((tx) => {
      tx.retireDoc(made.c, "marks");
      tx.retireDoc(made.c, "notes");
      expect(tx.readDoc(made.c, "notes")).toBeUndefined();
      expect(tx.docRecord(made.c, "marks")).toBeUndefined();
      // Written again in the same commit: a new incarnation, at version 1 (the retired one was at 2).
      tx.writeDoc(made.c, "notes", { n: 2 });
      expect(tx.docVersion(made.c, "notes")).toBe(1);
      return { at: note(tx, made.c, "two"), notes: tx.docRecord(made.c, "notes")!.id };
    });
    expect(retired.notes).toBeGreaterThan(made.notes);
    expect(await again.doc(made.c, "marks")).toBeUndefined();
    expect(await again.doc(made.c, "notes")).toEqual({ n: 2 });
    expect(await again.transaction((tx) => tx.docVersion(made.c, "notes"))).toBe(1);
    expect(await stored(reopened, "marks")).toEqual([
      { id: expect.any(Number), scope: "conversation", createdAt: made.at, retiredAt: retired.at },
    ]);
    expect(await stored(reopened, "notes")).toEqual([
      { id: made.notes, scope: "conversation", createdAt: made.at, retiredAt: retired.at },
      { id: retired.notes, scope: "conversation", createdAt: retired.at, retiredAt: undefined },
    ]);
  });

  test("a document patched and then retired in one commit stays retired, in memory and after a reopen: its patches are not stored (draw 36cB)", async () => {
    // Draw 36cB: every named retirement was of a document written whole or not touched in its
    // commit; a retirement that kept the commit's patches of that document (stored as patch rows, so
    // the documents row was never deleted) passed them all.
    const store = await memoryStore();
    const h = await open(store);
    const c = await h.transaction((tx) => {
      const made = tx.createConversation({ kind: "ownerless" });
      tx.writeDoc(made.id, "notes", { text: "a" });
      return made.id;
    });
    await h.transaction((tx) => {
      tx.patchDoc(c, "notes", [{ path: ["text"], append: "b" }]);
      tx.retireDoc(c, "notes");
      expect(tx.readDoc(c, "notes")).toBeUndefined();
    });
    expect(await h.doc(c, "notes")).toBeUndefined();
    await h.close();
    const reopened = await memoryStore(store.image());
    const again = await open(reopened);
    expect(await again.doc(c, "notes")).toBeUndefined();
    expect(await again.transaction((tx) => tx.docRecord(c, "notes"))).toBeUndefined();
    expect((await stored(reopened, "notes")).map((r) => r.retiredAt)).toEqual([expect.any(Number)]);
    await again.close();
  });

  test("a raw transaction cannot retire, write or patch a document of a conversation moving away: each is ConversationMoved and the document stays (draw 36cB)", async () => {
    // Draw 36cB: no named retirement was of a conversation away; a retireDoc that skipped the
    // moved-away check (ending a document the package had already carried off) passed them all.
    const h = await open(await memoryStore());
    const c = await h.transaction((tx) => {
      const made = tx.createConversation({ kind: "ownerless" });
      tx.writeDoc(made.id, "notes", { text: "a" });
      return made.id;
    });
    await h.prepareMove("T-docs", c);
    const changes: Array<(tx: Tx) => void> = [
      (tx) => tx.retireDoc(c, "notes"),
      (tx) => tx.writeDoc(c, "notes", { text: "b" }),
      (tx) => void tx.patchDoc(c, "notes", [{ path: ["text"], append: "b" }]),
    ];
    for (const change of changes)
      await expect(h.transaction(change)).rejects.toBeInstanceOf(ConversationMoved);
    expect(await h.doc(c, "notes")).toEqual({ text: "a" });
    expect(await h.transaction((tx) => tx.docRecord(c, "notes")?.id)).toEqual(expect.any(Number));
  });

  test("a session or a task document retired and written again is a new incarnation too, in the same commit or a later one: a new, larger id, the old one's record retired", async () => {
    // Break 29D: the named test retires and recreates a conversation's document only; a session
    // retirement that cleared the value and kept the incarnation (the next write reusing its id,
    // no retirement stored) passed it, and every other test.
    const hold = parked("holder");
    const store = await memoryStore();
    const h = await open(store, { tasks: [hold] });
    const task = await h.transaction((tx) =>
      tx.createTask(hold, null, { ownership: { kind: "conversation" } }),
    );
    for (const [scope, kind, scopeName] of [
      [{ kind: "session" }, "shared", "session"],
      [taskScope(task), "scratch", "task"],
    ] as Array<[DocScope, string, string]>) {
      const idOf = (tx: Tx) => tx.docRecord(scope, kind)!.id;
      const first = await h.transaction((tx) => {
        tx.writeDoc(scope, kind, { n: 1 });
        return idOf(tx);
      });
      // Retired and written again in one commit.
      const second = await h.transaction((tx) => {
        tx.retireDoc(scope, kind);
        expect(tx.docRecord(scope, kind)).toBeUndefined();
        tx.writeDoc(scope, kind, { n: 2 });
        return idOf(tx);
      });
      expect(second).toBeGreaterThan(first);
      // Retired in one commit, written again in a later one.
      await h.transaction((tx) => tx.retireDoc(scope, kind));
      expect(await h.docRecord(scope, kind)).toBeUndefined();
      const third = await h.transaction((tx) => {
        tx.writeDoc(scope, kind, { n: 3 });
        return idOf(tx);
      });
      expect(third).toBeGreaterThan(second);
      expect(await h.doc(scope, kind)).toEqual({ n: 3 });
      expect((await stored(store, kind)).map((r) => [r.id, r.scope, r.retiredAt !== undefined])).toEqual([
        [first, scopeName, true],
        [second, scopeName, true],
        [third, scopeName, false],
      ]);
    }
  });

  test("a document retired and written again in one commit is the new incarnation after a reopen too: its record, and the one a later retirement ends (draw 34B)", async () => {
    // Draw 34B: every named retire + recreate was read back in the harness that made it; a stored
    // value row keeping the retired incarnation's id (the new record stored, the value pointing at
    // the old one) passed them: reopened, the old id answered and a later retirement missed the new one.
    const store = await memoryStore();
    const h = await open(store);
    const made: Array<{ scope: DocScope; kind: string; old: number; id: number; at: number }> = [];
    for (const [scope, kind] of [
      [1, "notes"],
      [SESSION_DOCS, "shared"],
    ] as Array<[DocScope, string]>) {
      const old = await h.transaction((tx) => {
        tx.writeDoc(scope, kind, { n: 1 });
        return tx.docRecord(scope, kind)!.id;
      });
      const again = await h.transaction((tx) => {
        tx.retireDoc(scope, kind);
        tx.writeDoc(scope, kind, { n: 2 });
        return { id: tx.docRecord(scope, kind)!.id, at: note(tx, 1, kind) };
      });
      expect(again.id).toBeGreaterThan(old);
      made.push({ scope, kind, old, ...again });
    }
    await h.close();
    const reopened = await memoryStore(store.image());
    const h2 = await open(reopened);
    for (const { scope, kind, old, id, at } of made) {
      expect(await h2.doc(scope, kind)).toEqual({ n: 2 });
      expect(await h2.docRecord(scope, kind)).toMatchObject({ id, createdAt: at });
      const end = await h2.transaction((tx) => {
        tx.retireDoc(scope, kind);
        return note(tx, 1, `${kind} gone`);
      });
      expect(await h2.docRecord(scope, kind)).toBeUndefined();
      expect((await stored(reopened, kind)).map((r) => [r.id, r.retiredAt])).toEqual([
        [old, at],
        [id, end],
      ]);
    }
  });

  test("a creation retired in the same commit has an empty lifetime", async () => {
    const store = await memoryStore();
    const h = await open(store);
    const at = await h.transaction((tx) => {
      tx.writeDoc(1, "blink", { on: true });
      tx.retireDoc(1, "blink");
      return note(tx, 1, "x");
    });
    expect(await stored(store, "blink")).toEqual([
      { id: expect.any(Number), scope: "conversation", createdAt: at, retiredAt: at },
    ]);
    expect(await h.doc(1, "blink")).toBeUndefined();
  });

  test("a creation retired and written again in the same commit is two incarnations: the second takes a new id, never the first's, for a conversation and a session document (draw 41c)", async () => {
    // Draw 41c: every named retire + recreate retired an incarnation made in an earlier commit; a
    // recreation that took back the id of one created and retired in its own commit passed them all.
    const store = await memoryStore();
    const h = await open(store);
    for (const [scope, kind, scopeName] of [
      [1, "blink", "conversation"],
      [SESSION_DOCS, "flash", "session"],
    ] as Array<[DocScope, string, string]>) {
      const made = await h.transaction((tx) => {
        tx.writeDoc(scope, kind, { n: 1 });
        const first = tx.docRecord(scope, kind)!.id;
        tx.retireDoc(scope, kind);
        tx.writeDoc(scope, kind, { n: 2 });
        const second = tx.docRecord(scope, kind)!.id;
        // Read in the commit: the store would also refuse a second record with the first's id.
        expect(second).not.toBe(first);
        return { first, second, at: note(tx, 1, kind) };
      });
      expect(made.second).not.toBe(made.first);
      expect(made.second).toBeGreaterThan(made.first);
      expect(await stored(store, kind)).toEqual([
        { id: made.first, scope: scopeName, createdAt: made.at, retiredAt: made.at },
        { id: made.second, scope: scopeName, createdAt: made.at, retiredAt: undefined },
      ]);
      expect(await h.docRecord(scope, kind)).toMatchObject({ id: made.second });
      expect(await h.doc(scope, kind)).toEqual({ n: 2 });
    }
  });
});

describe("scopes (spec §3.1-3.2)", () => {
  test("a session document belongs to no conversation: it outlives close and reopen, a fork and a deletion, and is not a conversation's", async () => {
    const store = await memoryStore();
    const h = await open(store);
    const made = await h.transaction((tx) => {
      tx.writeDoc(SESSION_DOCS, "prefs", { theme: "dark" });
      const c = tx.createConversation({ kind: "ownerless" });
      tx.writeDoc(c.id, "notes", { n: 1 });
      return { record: tx.docRecord(SESSION_DOCS, "prefs")!, c: c.id, entry: note(tx, 1, "x") };
    });
    expect(made.record).toEqual({
      id: expect.any(Number),
      kind: "prefs",
      scope: { kind: "session" },
      createdAt: made.entry,
    });
    expect(await h.doc(1, "prefs")).toBeUndefined();
    const fork = await h.transaction((tx) =>
      tx.forkConversation(1, made.entry, { ownership: { kind: "ownerless" } }),
    );
    expect(await h.doc(fork.id, "prefs")).toBeUndefined();
    await h.deleteConversation(made.c);
    await h.close();

    const reopened = await memoryStore(store.image());
    const again = await open(reopened);
    expect(await again.doc(SESSION_DOCS, "prefs")).toEqual({ theme: "dark" });
    expect(await again.docRecord(SESSION_DOCS, "prefs")).toEqual(made.record);
    await again.transaction((tx) => tx.writeDoc(SESSION_DOCS, "prefs", { theme: "light" }));
    expect((await again.docRecord(SESSION_DOCS, "prefs"))?.id).toBe(made.record.id);
    // Current-only (spec §3.1): its writes keep no history, however many (reading 24b).
    const history = await reopened.read((sql) =>
      sql.get("SELECT count(*) AS n FROM doc_history WHERE name = 'prefs'"),
    );
    expect(history?.["n"]).toBe(0);
  });

  test("a session document's later changes survive close and reopen too: its patched and rewritten values, read back after each reopen", async () => {
    // Break 29N: the named test reads back one whole write; a reopen that dropped a session
    // document's stored patches (the value of its last whole write read alone) passed every test.
    const store = await memoryStore();
    const h = await open(store);
    await h.transaction((tx) => tx.writeDoc(SESSION_DOCS, "prefs", { theme: "dark", log: "a" }));
    await h.transaction((tx) => tx.patchDoc(SESSION_DOCS, "prefs", [{ path: ["log"], append: "b" }]));
    await h.transaction((tx) => tx.patchDoc(SESSION_DOCS, "prefs", [{ path: ["size"], set: 3 }]));
    const id = (await h.docRecord(SESSION_DOCS, "prefs"))?.id;
    await h.close();

    const first = await memoryStore(store.image());
    const again = await open(first);
    expect(await again.doc(SESSION_DOCS, "prefs")).toEqual({ theme: "dark", log: "ab", size: 3 });
    await again.transaction((tx) => tx.writeDoc(SESSION_DOCS, "prefs", { theme: "light" }));
    await again.transaction((tx) => tx.patchDoc(SESSION_DOCS, "prefs", [{ path: ["log"], set: "c" }]));
    await again.close();

    const third = await open(await memoryStore(first.image()));
    expect(await third.doc(SESSION_DOCS, "prefs")).toEqual({ theme: "light", log: "c" });
    expect((await third.docRecord(SESSION_DOCS, "prefs"))?.id).toBe(id);
  });

  test("a session document's retirement survives close and reopen: the retired one stays gone, one retired and written again in one commit reads back its new incarnation (draw 36dB)", async () => {
    // Draw 36dB: the named tests never retire a session document before a reopen; a commit that
    // kept the session scope's stored row at a retirement (the value back after the reopen) passed them.
    const store = await memoryStore();
    const h = await open(store);
    await h.transaction((tx) => {
      tx.writeDoc(SESSION_DOCS, "prefs", { theme: "dark" });
      tx.writeDoc(SESSION_DOCS, "draft", { text: "a" });
      tx.writeDoc(SESSION_DOCS, "kept", { n: 1 });
    });
    const first = (await h.docRecord(SESSION_DOCS, "draft"))!.id;
    await h.transaction((tx) => {
      tx.retireDoc(SESSION_DOCS, "prefs");
      tx.retireDoc(SESSION_DOCS, "draft");
      tx.writeDoc(SESSION_DOCS, "draft", { text: "b" });
    });
    const second = (await h.docRecord(SESSION_DOCS, "draft"))!.id;
    expect(second).not.toBe(first);
    await h.close();

    const reopened = await memoryStore(store.image());
    const again = await open(reopened);
    expect(await again.doc(SESSION_DOCS, "prefs")).toBeUndefined();
    expect(await again.docRecord(SESSION_DOCS, "prefs")).toBeUndefined();
    expect(await again.doc(SESSION_DOCS, "draft")).toEqual({ text: "b" });
    expect((await again.docRecord(SESSION_DOCS, "draft"))?.id).toBe(second);
    expect(await again.doc(SESSION_DOCS, "kept")).toEqual({ n: 1 });
    expect((await stored(reopened, "prefs")).map((r) => r.retiredAt)).toEqual([expect.any(Number)]);
  });

  test("a conversation's documents, their records and history go with it when it is deleted", async () => {
    const store = await memoryStore();
    const h = await open(store, { forks: { asOf: ["hist"] } });
    const c = await h.transaction((tx) => {
      const c = tx.createConversation({ kind: "ownerless" });
      tx.writeDoc(c.id, "notes", { n: 1 });
      tx.writeDoc(c.id, "hist", { n: 1 });
      tx.writeDoc(1, "notes", { kept: true });
      return c.id;
    });
    await h.transaction((tx) => tx.retireDoc(c, "notes"));
    await h.deleteConversation(c);
    const count = (table: string) =>
      store.read((sql) => sql.get(`SELECT count(*) AS n FROM ${table} WHERE conversation_id = ?`, [c]));
    for (const table of ["documents", "doc_records", "doc_history"])
      expect((await count(table))?.["n"]).toBe(0);
    expect(await h.doc(1, "notes")).toEqual({ kept: true });
    expect((await stored(store, "notes")).length).toBe(1);
  });

  test("a task document of a task in a conversation other than the root records that conversation, and goes with it when it is deleted (draw 35dB)", async () => {
    // Draw 35dB: the named test's task lived in the root, so a task document's record naming the root
    // whatever the task's conversation passed it; here the task lives in another conversation, one
    // document made in the task's own creating commit and one in a later commit.
    const store = await memoryStore();
    const hold = parked("holder");
    const h = await open(store, { tasks: [hold] });
    const { c, id } = await h.transaction((tx) => {
      const c = tx.createConversation({ kind: "ownerless" }).id;
      const id = tx.createTask(hold, null, { ownership: { kind: "conversation" }, conversationId: c });
      tx.writeDoc(taskScope(id), "early", { n: 1 });
      return { c, id };
    });
    await h.transaction((tx) => tx.writeDoc(taskScope(id), "late", { n: 2 }));
    const owners = () =>
      store.read((sql) =>
        sql.all("SELECT kind, conversation_id FROM doc_records WHERE task_id = ? ORDER BY kind", [id]),
      );
    expect(await owners()).toEqual([
      { kind: "early", conversation_id: c },
      { kind: "late", conversation_id: c },
    ]);
    await h.abortTask(id);
    await done(h, id);
    await h.deleteConversation(c);
    expect(await owners()).toEqual([]);
  });

  test("a task's documents are retired in the commit it becomes terminal, those it made in that commit too; a terminal task's documents cannot be reached; a fork copies none", async () => {
    const store = await memoryStore();
    const hold = parked("holder");
    const scribble = single("scribble", async (task, runtime) => {
      await runtime.commit((tx) => {
        tx.writeDoc(taskScope(task.id), "scratch", { last: true });
        return { status: "terminal", outcome: { status: "completed", result: null } };
      });
    });
    const options = { tasks: [hold, scribble] };
    const h = await open(store, options);
    const { id, entry } = await h.transaction((tx) => {
      const id = tx.createTask(hold, null, { ownership: { kind: "conversation" } });
      tx.writeDoc(taskScope(id), "scratch", { step: 1 });
      return { id, entry: note(tx, 1, "x") };
    });
    const record = await h.docRecord(taskScope(id), "scratch");
    expect(record).toEqual({
      id: expect.any(Number),
      kind: "scratch",
      scope: { kind: "task", taskId: id },
      createdAt: entry,
    });
    expect(await h.doc(1, "scratch")).toBeUndefined();
    // Its conversation is derived from the task's record (created in the same commit): the root here.
    const owner = await store.read((sql) =>
      sql.get("SELECT conversation_id FROM doc_records WHERE kind = 'scratch' AND task_id = ?", [id]),
    );
    expect(owner?.["conversation_id"]).toBe(1);
    const fork = await h.transaction((tx) =>
      tx.forkConversation(1, entry, { ownership: { kind: "ownerless" } }),
    );
    expect(await h.doc(fork.id, "scratch")).toBeUndefined();
    // Survives a reopen while the task lives (it retires only when the task ends, not at close).
    await h.close();
    const reopened = await memoryStore(store.image());
    const again = await open(reopened, options);
    expect(await again.doc(taskScope(id), "scratch")).toEqual({ step: 1 });

    // Judged on the commit's candidate record: made terminal earlier in a commit, its documents are
    // refused later in that commit (and the refused commit changes nothing).
    const terminalThenRead = internals(again).session.commit((tx, overlay) => {
      overlay.setTask({
        ...overlay.task(id)!,
        state: { status: "terminal", outcome: { status: "aborted" } },
      } as never);
      tx.readDoc(taskScope(id), "scratch");
    });
    await expect(terminalThenRead).rejects.toThrow(/is terminal: its documents are retired/);
    expect(await again.doc(taskScope(id), "scratch")).toEqual({ step: 1 });

    // The retirement rides in the terminal commit itself (spec §5.3), not in one before or after.
    const seen: { terminal: boolean; retired: boolean }[] = [];
    const stop = again.subscribe((change) => {
      const terminal = change.tasks.some((t) => t.id === id && t.state.status === "terminal");
      const retired = change.docs.some((d) => d.name === "scratch" && d.value === undefined);
      if (terminal || retired) seen.push({ terminal, retired });
    });
    await again.abortTask(id);
    await done(again, id);
    stop();
    expect(seen).toEqual([{ terminal: true, retired: true }]);
    expect(await again.doc(taskScope(id), "scratch")).toBeUndefined();
    expect(await again.docRecord(taskScope(id), "scratch")).toBeUndefined();
    await expect(again.transaction((tx) => tx.readDoc(taskScope(id), "scratch"))).rejects.toThrow(
      InvalidTransition,
    );
    await expect(
      again.transaction((tx) => tx.writeDoc(taskScope(id), "scratch", { step: 2 })),
    ).rejects.toThrow(InvalidTransition);

    // Created in the finishing commit: retired in it (an empty lifetime).
    const s = await again.createTask(scribble, null, { ownership: { kind: "conversation" } });
    await done(again, s);
    expect(await again.doc(taskScope(s), "scratch")).toBeUndefined();
    // Current-only (spec §3.1): a task document's writes and retirements keep no history.
    const history = await reopened.read((sql) =>
      sql.get("SELECT count(*) AS n FROM doc_history WHERE name = 'scratch'"),
    );
    expect(history?.["n"]).toBe(0);
    const rows = await stored(reopened, "scratch");
    expect(rows).toEqual([
      { id: record!.id, scope: "task", createdAt: entry, retiredAt: expect.any(Number) },
      { id: expect.any(Number), scope: "task", createdAt: expect.any(Number), retiredAt: expect.any(Number) },
    ]);
    expect(rows[0]!.retiredAt).toBeGreaterThan(entry);
    expect(rows[1]!.retiredAt).toBe(rows[1]!.createdAt);
  });

  test("a task's several documents, made in earlier commits of the same engine (no reopen), are all retired in its terminal commit", async () => {
    // Break 28G: the test above retires one document, read back from the store at a reopen; here two
    // documents are made by this engine's own commits before the task ends.
    const store = await memoryStore();
    const hold = parked("holder");
    const h = await open(store, { tasks: [hold] });
    const id = await h.createTask(hold, null, { ownership: { kind: "conversation" } });
    await h.transaction((tx) => tx.writeDoc(taskScope(id), "first", { n: 1 }));
    await h.transaction((tx) => tx.writeDoc(taskScope(id), "second", { n: 2 }));
    expect(await h.doc(taskScope(id), "second")).toEqual({ n: 2 });
    const seen: { terminal: boolean; retired: string[] }[] = [];
    const stop = h.subscribe((change) => {
      const terminal = change.tasks.some((t) => t.id === id && t.state.status === "terminal");
      const retired = change.docs.filter((d) => d.value === undefined).map((d) => d.name);
      if (terminal || retired.length > 0) seen.push({ terminal, retired: retired.sort() });
    });
    await h.abortTask(id);
    await done(h, id);
    stop();
    expect(seen).toEqual([{ terminal: true, retired: ["first", "second"] }]);
    for (const name of ["first", "second"]) {
      expect(await h.docRecord(taskScope(id), name)).toBeUndefined();
      expect(await stored(store, name)).toEqual([
        {
          id: expect.any(Number),
          scope: "task",
          createdAt: expect.any(Number),
          retiredAt: expect.any(Number),
        },
      ]);
    }
    await h.close();
  });

  test("a task's several documents read back at a reopen are all retired in its terminal commit (draw 34c)", async () => {
    // Draw 34c: the tests above retire one document read back at a reopen, or several made by the
    // live engine; an open that recorded only the first live document of each task passed them.
    const store = await memoryStore();
    const hold = parked("holder");
    const h = await open(store, { tasks: [hold] });
    const id = await h.createTask(hold, null, { ownership: { kind: "conversation" } });
    await h.transaction((tx) => {
      tx.writeDoc(taskScope(id), "first", { n: 1 });
      tx.writeDoc(taskScope(id), "second", { n: 2 });
    });
    await h.transaction((tx) => tx.writeDoc(taskScope(id), "third", { n: 3 }));
    await h.close();
    const reopened = await memoryStore(store.image());
    const again = await open(reopened, { tasks: [hold] });
    const seen: { terminal: boolean; retired: string[] }[] = [];
    const stop = again.subscribe((change) => {
      const terminal = change.tasks.some((t) => t.id === id && t.state.status === "terminal");
      const retired = change.docs.filter((d) => d.value === undefined).map((d) => d.name);
      if (terminal || retired.length > 0) seen.push({ terminal, retired: retired.sort() });
    });
    await again.abortTask(id);
    await done(again, id);
    stop();
    expect(seen).toEqual([{ terminal: true, retired: ["first", "second", "third"] }]);
    for (const name of ["first", "second", "third"]) {
      expect(await again.docRecord(taskScope(id), name)).toBeUndefined();
      expect(await stored(reopened, name)).toEqual([
        {
          id: expect.any(Number),
          scope: "task",
          createdAt: expect.any(Number),
          retiredAt: expect.any(Number),
        },
      ]);
    }
    await again.close();
  });

  test("a task that ends failed, or faulted by a throwing phase, retires its documents too (draw 32d)", async () => {
    // Draw 32d: the tests above end their tasks completed, aborted or orphaned; a retirement kept to
    // those outcomes (a failed or a faulted task's documents left live) passed them.
    const store = await memoryStore();
    const gate = deferred();
    const failing = single("ends-failed", async (_t, runtime) => {
      await gate.promise;
      await runtime.commit(() => ({
        status: "terminal",
        outcome: { status: "failed", error: { message: "no" } },
      }));
    });
    const throwing = single("ends-faulted", async () => {
      await gate.promise;
      throw new Error("boom");
    });
    const h = await open(store, { tasks: [failing, throwing] });
    const ids = {
      failed: await h.createTask(failing, null, { ownership: { kind: "conversation" } }),
      faulted: await h.createTask(throwing, null, { ownership: { kind: "conversation" } }),
    };
    for (const [status, id] of Object.entries(ids))
      await h.transaction((tx) => tx.writeDoc(taskScope(id), `${status}-doc`, { status }));
    expect(await h.doc(taskScope(ids.failed), "failed-doc")).toEqual({ status: "failed" });
    gate.resolve();
    for (const [status, id] of Object.entries(ids)) {
      const final = await done(h, id);
      expect(final.state.status === "terminal" && final.state.outcome.status).toBe(status);
      expect(await h.docRecord(taskScope(id), `${status}-doc`)).toBeUndefined();
      const rows = await stored(store, `${status}-doc`);
      expect(rows).toEqual([
        {
          id: expect.any(Number),
          scope: "task",
          createdAt: expect.any(Number),
          retiredAt: expect.any(Number),
        },
      ]);
      // And refused, as a completed or aborted task's are (draw 35cA, sections-0-4:333: a refusal kept
      // to those two outcomes let a failed or faulted task's documents be read, written anew, patched,
      // looked up and versioned): each access InvalidTransition, nothing written.
      const scope = taskScope(id);
      const name = `${status}-doc`;
      for (const access of [
        (tx: Tx) => tx.readDoc(scope, name),
        (tx: Tx) => tx.writeDoc(scope, name, { again: true }),
        (tx: Tx) => tx.patchDoc(scope, name, [{ path: ["x"], set: 1 }]),
        (tx: Tx) => tx.retireDoc(scope, name),
        (tx: Tx) => tx.docRecord(scope, name),
        (tx: Tx) => tx.docVersion(scope, name),
      ])
        await expect(h.transaction((tx) => void access(tx))).rejects.toBeInstanceOf(InvalidTransition);
      expect(await stored(store, name)).toEqual(rows);
    }
    await h.close();
  });
});

test("a task terminal before a reopen, no longer in memory, still has its documents refused: a read, a write, a record lookup, each InvalidTransition; nothing is written", async () => {
  // Break 28J: every refusal above was of a terminal record still in memory; a check that let a
  // task unknown to memory through (past its id, so it existed and ended) passed them.
  const hold = parked("holder");
  const store = await memoryStore();
  const h = await open(store, { tasks: [hold] });
  const id = await h.transaction((tx) => {
    const id = tx.createTask(hold, null, { ownership: { kind: "conversation" } });
    tx.writeDoc(taskScope(id), "scratch", { step: 1 });
    return id;
  });
  await h.abortTask(id);
  await done(h, id);
  await h.close();
  const again = await open(await memoryStore(store.image()), { tasks: [hold] });
  const accesses: Array<(tx: Tx) => unknown> = [
    (tx) => tx.readDoc(taskScope(id), "scratch"),
    (tx) => tx.writeDoc(taskScope(id), "scratch", { step: 2 }),
    (tx) => tx.writeDoc(taskScope(id), "other", { made: true }),
    (tx) => tx.docRecord(taskScope(id), "scratch"),
    (tx) => tx.docVersion(taskScope(id), "scratch"), // draw 34B: the version read is an access too
  ];
  for (const [i, access] of accesses.entries()) {
    const refused = await again.transaction((tx) => access(tx)).catch((e: unknown) => e);
    expect([i, refused]).toEqual([i, expect.any(InvalidTransition)]);
    expect((refused as Error).message).toMatch(/is terminal: its documents are retired/);
  }
  expect(await again.doc(taskScope(id), "scratch")).toBeUndefined();
  expect(await again.doc(taskScope(id), "other")).toBeUndefined();
  await again.close();
});

test("a commit that makes a task terminal refuses every later access to its documents in that commit, each typed: a read, a write, a patch, a retirement, a record lookup; the refused commit changes nothing", async () => {
  // spec §3.3: "A terminal candidate rejects later task-document access."
  const hold = parked("holder");
  const h = await open(await memoryStore(), { tasks: [hold] });
  const id = await h.transaction((tx) => {
    const id = tx.createTask(hold, null, { ownership: { kind: "conversation" } });
    tx.writeDoc(taskScope(id), "scratch", { step: 1 });
    return id;
  });
  const accesses: Array<(tx: Tx) => unknown> = [
    (tx) => tx.readDoc(taskScope(id), "scratch"),
    (tx) => tx.writeDoc(taskScope(id), "scratch", { step: 2 }),
    (tx) => tx.writeDoc(taskScope(id), "other", { made: true }),
    (tx) => tx.patchDoc(taskScope(id), "scratch", [{ path: ["step"], set: 3 }]),
    (tx) => tx.retireDoc(taskScope(id), "scratch"),
    (tx) => tx.docRecord(taskScope(id), "scratch"),
    (tx) => tx.docVersion(taskScope(id), "scratch"), // draw 34B: the version read is an access too
  ];
  for (const [i, access] of accesses.entries()) {
    const refused = await internals(h)
      .session.commit((tx, overlay) => {
        overlay.setTask({
          ...overlay.task(id)!,
          state: { status: "terminal", outcome: { status: "aborted" } },
        } as never);
        access(tx);
      })
      .catch((e: unknown) => e);
    expect([i, refused]).toEqual([i, expect.any(InvalidTransition)]);
    expect((refused as Error).message).toMatch(/is terminal: its documents are retired/);
    expect((await h.getTask(id))?.state.status).toBe("running");
    expect(await h.doc(taskScope(id), "scratch")).toEqual({ step: 1 });
    expect(await h.doc(taskScope(id), "other")).toBeUndefined();
  }
});

test("a completing task is not terminal: its documents stay readable and writable while it waits for its owned work, and are refused from the commit that makes it terminal (draw 34B)", async () => {
  // Draw 34B: every named refusal was of a task made terminal; a check refusing a completing task's
  // documents too (its outcome held, its owned child still running) passed them.
  const gate = deferred();
  const child = single("held-child", async (_t, runtime) => {
    await gate.promise;
    await runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: null } }));
  });
  const parent = single("holder", async (task, runtime) => {
    await runtime.commit((tx) => {
      tx.createTask(child, null, { ownership: { kind: "task", taskId: task.id } });
      tx.writeDoc(taskScope(task.id), "scratch", { step: 1 });
      return { status: "running", checkpoint: { phase: "go" } };
    });
    await runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: null } }));
  });
  const h = await open(await memoryStore(), { tasks: [parent, child] });
  const id = await h.createTask(parent, null, { ownership: { kind: "conversation" } });
  try {
    await until(() => internals(h).session.records.tasks.get(id)?.state.status === "completing", {
      what: "completing",
    });
    const seen = await h.transaction((tx) => {
      const before = tx.readDoc(taskScope(id), "scratch");
      tx.writeDoc(taskScope(id), "scratch", { step: 2 });
      tx.patchDoc(taskScope(id), "scratch", [{ path: ["more"], set: true }]);
      return {
        before,
        version: tx.docVersion(taskScope(id), "scratch"),
        record: tx.docRecord(taskScope(id), "scratch"),
      };
    });
    expect(seen).toEqual({
      before: { step: 1 },
      version: 1,
      record: expect.objectContaining({ kind: "scratch", scope: { kind: "task", taskId: id } }),
    });
    expect(await h.doc(taskScope(id), "scratch")).toEqual({ step: 2, more: true });
    expect((await h.getTask(id))?.state.status).toBe("completing");
  } finally {
    gate.resolve(); // never left holding the child: the harness closes after
  }
  await done(h, id);
  expect(await h.doc(taskScope(id), "scratch")).toBeUndefined();
  await expect(h.transaction((tx) => tx.readDoc(taskScope(id), "scratch"))).rejects.toThrow(
    /is terminal: its documents are retired/,
  );
});

/** The values `kind` has in `conversation`'s doc_history, oldest first. */
async function historyOf(store: MemoryStore, conversation: number, kind: string) {
  const rows = await store.read((sql) =>
    sql.all("SELECT value FROM doc_history WHERE conversation_id = ? AND name = ? ORDER BY id", [
      conversation,
      kind,
    ]),
  );
  return rows.map((r) => (r["value"] === null ? null : JSON.parse(String(r["value"]))));
}

describe("records keep the rules (spec §3.2, §3.7)", () => {
  // Was CONTRARY (reading 21f): the engine took a document's history and fork rule from the
  // harness's `forks` option by name, not from its stored record (fixed in session 22, see
  // tests/spec-coverage/fix-session22-records.md). The option decides them only when a record is
  // created; every later decision (history rows, snapshotAsOf, a fork's copy) reads the record.
  test("a document's stored history and fork rule hold when the code that declared them is missing: its history stays readable and grows, and a fork copies it as of the entry", async () => {
    const store = await memoryStore();
    const h = await open(store, { forks: { asOf: ["hist"] } });
    const e1 = await h.transaction((tx) => {
      tx.writeDoc(1, "hist", { n: 1 });
      return note(tx, 1, "1");
    });
    const e2 = await h.transaction((tx) => {
      tx.writeDoc(1, "hist", { n: 2 });
      return note(tx, 1, "2");
    });
    await h.close();
    // Reopened by code that does not name the document (an extension not installed any more).
    const bare = await open(await memoryStore(store.image()));
    expect(await bare.docRecord(1, "hist")).toMatchObject({ history: "rewindable", fork: "asOf" });
    expect((await bare.snapshotAsOf(1, "hist", e1))?.value).toEqual({ n: 1 });
    const e3 = await bare.transaction((tx) => {
      tx.writeDoc(1, "hist", { n: 3 });
      return note(tx, 1, "3");
    });
    expect((await bare.snapshotAsOf(1, "hist", e3))?.value).toEqual({ n: 3 });
    expect((await bare.snapshotAsOf(1, "hist", e2))?.value).toEqual({ n: 2 });
    const fork = await bare.transaction(
      (tx) => tx.forkConversation(1, e1, { ownership: { kind: "ownerless" } }).id,
    );
    expect(await bare.doc(fork, "hist")).toEqual({ n: 1 });
    expect(await bare.docRecord(fork, "hist")).toMatchObject({ history: "rewindable", fork: "asOf" });
  });

  test("a document last changed by a patch keeps its record's history and fork rule when reopened without the code: its history stays readable and grows, and a fork copies it as of the entry", async () => {
    // Break 29A: a document loaded with patch rows stored after its value (doc_patches) lost its
    // record's rules in the replay, and the test above (plain writes) passed.
    const store = await memoryStore();
    const h = await open(store, { forks: { asOf: ["hist"] } });
    await h.transaction((tx) => void tx.writeDoc(1, "hist", { n: 1, log: "a" }));
    const e1 = await h.transaction((tx) => {
      tx.patchDoc(1, "hist", [{ path: ["log"], append: "b" }]);
      return note(tx, 1, "1");
    });
    const e2 = await h.transaction((tx) => {
      tx.patchDoc(1, "hist", [{ path: ["n"], set: 2 }]);
      return note(tx, 1, "2");
    });
    await h.close();
    const image = store.image();
    const rows = await (await memoryStore(image)).read((sql) =>
      sql.all("SELECT op FROM doc_patches WHERE conversation_id = 1 AND name = 'hist'"),
    );
    expect(rows.length).toBeGreaterThan(0);
    // Reopened by code that does not name the document.
    const bare = await open(await memoryStore(image));
    expect(await bare.doc(1, "hist")).toEqual({ n: 2, log: "ab" });
    expect(await bare.docRecord(1, "hist")).toMatchObject({ history: "rewindable", fork: "asOf" });
    expect((await bare.snapshotAsOf(1, "hist", e1))?.value).toEqual({ n: 1, log: "ab" });
    const e3 = await bare.transaction((tx) => {
      tx.patchDoc(1, "hist", [{ path: ["n"], set: 3 }]);
      return note(tx, 1, "3");
    });
    expect((await bare.snapshotAsOf(1, "hist", e3))?.value).toEqual({ n: 3, log: "ab" });
    expect((await bare.snapshotAsOf(1, "hist", e2))?.value).toEqual({ n: 2, log: "ab" });
    const fork = await bare.transaction(
      (tx) => tx.forkConversation(1, e1, { ownership: { kind: "ownerless" } }).id,
    );
    expect(await bare.doc(fork, "hist")).toEqual({ n: 1, log: "ab" });
    expect(await bare.docRecord(fork, "hist")).toMatchObject({ history: "rewindable", fork: "asOf" });
  });

  test("a document whose record says fork initial keeps that rule when reopened without the code: a fork copies none of it, latest or rewindable, and its record still says initial (draw 37b)", async () => {
    // Draw 37b: every named test reopened an "asOf" or "current" record; a load that dropped a
    // stored "initial" fork rule (the bare process then took "current" for it) passed them all.
    const store = await memoryStore();
    const h = await open(store, {
      forks: { rewindable: ["notes"], initial: (name) => name === "notes" || name === "pad" },
    });
    const e1 = await h.transaction((tx) => {
      tx.writeDoc(1, "notes", { n: 1 });
      tx.writeDoc(1, "pad", { p: 1 });
      return note(tx, 1, "1");
    });
    await h.close();
    // Reopened by code that does not name either document.
    const bare = await open(await memoryStore(store.image()));
    expect(await bare.docRecord(1, "notes")).toMatchObject({ history: "rewindable", fork: "initial" });
    expect(await bare.docRecord(1, "pad")).toMatchObject({ history: "latest", fork: "initial" });
    const fork = await bare.transaction(
      (tx) => tx.forkConversation(1, e1, { ownership: { kind: "ownerless" } }).id,
    );
    expect(await bare.doc(fork, "notes")).toBeUndefined();
    expect(await bare.doc(fork, "pad")).toBeUndefined();
    expect(await bare.docRecord(fork, "notes")).toBeUndefined();
    expect(await bare.docRecord(fork, "pad")).toBeUndefined();
    // The parent's data is all there: nothing hidden by the missing code.
    expect(await bare.doc(1, "notes")).toEqual({ n: 1 });
    expect(await bare.doc(1, "pad")).toEqual({ p: 1 });
    expect((await bare.snapshotAsOf(1, "notes", e1))?.value).toEqual({ n: 1 });
  });

  test("a fork copies an asOf document as of its entry even when the parent retired it since, and leaves out one first written after the entry", async () => {
    const h = await open(await memoryStore(), { forks: { asOf: ["hist", "later"] } });
    const e1 = await h.transaction((tx) => {
      tx.writeDoc(1, "hist", { n: 1 }, 3); // stored at version 3: the copy keeps the pair
      return note(tx, 1, "1");
    });
    await h.transaction((tx) => {
      tx.retireDoc(1, "hist");
      tx.writeDoc(1, "later", { n: 2 });
      return note(tx, 1, "2");
    });
    expect(await h.doc(1, "hist")).toBeUndefined();
    const fork = await h.transaction(
      (tx) => tx.forkConversation(1, e1, { ownership: { kind: "ownerless" } }).id,
    );
    expect(await h.docVersioned(fork, "hist")).toEqual({ value: { n: 1 }, version: 3 });
    expect(await h.docRecord(fork, "hist")).toMatchObject({ history: "rewindable", fork: "asOf" });
    expect(await h.doc(fork, "later")).toBeUndefined();
  });

  test("code that names a document with other rules than its record's changes nothing of it: the record wins for its history, snapshotAsOf and forks; the option decides only a new incarnation's rules", async () => {
    const store = await memoryStore();
    const h = await open(store, { forks: { asOf: ["hist"] } });
    const e1 = await h.transaction((tx) => {
      tx.writeDoc(1, "hist", { n: 1 });
      tx.writeDoc(1, "flat", { f: 1 });
      return note(tx, 1, "1");
    });
    await h.close();
    // The next process declares both otherwise: "hist" not copied into forks, "flat" rewindable "asOf".
    const otherStore = await memoryStore(store.image());
    const other = await open(otherStore, {
      forks: { asOf: ["flat"], initial: (name) => name === "hist" },
    });
    expect(await other.docRecord(1, "hist")).toMatchObject({ history: "rewindable", fork: "asOf" });
    expect(await other.docRecord(1, "flat")).toMatchObject({ history: "latest", fork: "current" });
    const e2 = await other.transaction((tx) => {
      tx.writeDoc(1, "hist", { n: 2 });
      tx.writeDoc(1, "flat", { f: 2 });
      return note(tx, 1, "2");
    });
    // "hist" keeps its history (the option would stop it), "flat" gets none (the option would start it).
    expect((await other.snapshotAsOf(1, "hist", e2))?.value).toEqual({ n: 2 });
    expect((await other.snapshotAsOf(1, "hist", e1))?.value).toEqual({ n: 1 });
    await expect(other.snapshotAsOf(1, "flat", e2)).rejects.toThrow(InvalidTransition);
    expect(await historyOf(otherStore, 1, "hist")).toEqual([{ n: 1 }, { n: 2 }]);
    expect(await historyOf(otherStore, 1, "flat")).toEqual([]);
    // A fork at e1: "hist" as of e1 (not left out), "flat" as it is now (not as of e1).
    const fork = await other.transaction(
      (tx) => tx.forkConversation(1, e1, { ownership: { kind: "ownerless" } }).id,
    );
    expect(await other.doc(fork, "hist")).toEqual({ n: 1 });
    expect(await other.doc(fork, "flat")).toEqual({ f: 2 });
    expect(await other.docRecord(fork, "hist")).toMatchObject({ history: "rewindable", fork: "asOf" });
    expect(await other.docRecord(fork, "flat")).toMatchObject({ history: "latest", fork: "current" });
    // A new incarnation (a new conversation's, or after a retirement) takes this process's rules.
    const fresh = await other.transaction((tx) => {
      const c = tx.createConversation({ kind: "ownerless" });
      tx.writeDoc(c.id, "hist", { n: 0 });
      tx.writeDoc(c.id, "flat", { f: 0 });
      return c.id;
    });
    expect(await other.docRecord(fresh, "hist")).toMatchObject({ history: "latest", fork: "initial" });
    expect(await other.docRecord(fresh, "flat")).toMatchObject({ history: "rewindable", fork: "asOf" });
    await other.transaction((tx) => {
      tx.retireDoc(1, "hist");
      tx.writeDoc(1, "hist", { n: 9 });
    });
    expect(await other.docRecord(1, "hist")).toMatchObject({ history: "latest", fork: "initial" });
  });

  test("session and task documents reopened without the code that wrote them: the record keeps their scope; they stay current-only (no history), a fork copies neither, and a task's retire when it ends", async () => {
    const store = await memoryStore();
    const hold = parked("holder");
    // Even rules naming them "asOf" give them no history: only conversation documents have one.
    const h = await open(store, { tasks: [hold], forks: { asOf: ["prefs", "scratch"] } });
    const { task, entry } = await h.transaction((tx) => {
      const task = tx.createTask(hold, null, { ownership: { kind: "conversation" } });
      tx.writeDoc(SESSION_DOCS, "prefs", { theme: "dark" });
      tx.writeDoc(taskScope(task), "scratch", { step: 1 });
      return { task, entry: note(tx, 1, "x") };
    });
    const prefs = (await h.docRecord(SESSION_DOCS, "prefs"))!;
    const scratch = (await h.docRecord(taskScope(task), "scratch"))!;
    await h.close();

    const bareStore = await memoryStore(store.image());
    const bare = await open(bareStore); // no task definition, no rules
    expect(await bare.docRecord(SESSION_DOCS, "prefs")).toEqual(prefs);
    expect(prefs).toEqual({ id: prefs.id, kind: "prefs", scope: { kind: "session" }, createdAt: entry });
    expect(await bare.docRecord(taskScope(task), "scratch")).toEqual(scratch);
    expect(scratch).toEqual({
      id: scratch.id,
      kind: "scratch",
      scope: { kind: "task", taskId: task },
      createdAt: entry,
    });
    expect(await bare.doc(SESSION_DOCS, "prefs")).toEqual({ theme: "dark" });
    expect(await bare.doc(taskScope(task), "scratch")).toEqual({ step: 1 });
    // Written again: the same incarnations, still without history.
    await bare.transaction((tx) => {
      tx.writeDoc(SESSION_DOCS, "prefs", { theme: "light" });
      tx.writeDoc(taskScope(task), "scratch", { step: 2 });
      note(tx, 1, "y");
    });
    expect((await bare.docRecord(SESSION_DOCS, "prefs"))?.id).toBe(prefs.id);
    expect((await bare.docRecord(taskScope(task), "scratch"))?.id).toBe(scratch.id);
    const history = await bareStore.read((sql) =>
      sql.get("SELECT count(*) AS n FROM doc_history WHERE name IN ('prefs', 'scratch')"),
    );
    expect(history?.["n"]).toBe(0);
    const fork = await bare.transaction(
      (tx) => tx.forkConversation(1, entry, { ownership: { kind: "ownerless" } }).id,
    );
    expect(await bare.doc(fork, "prefs")).toBeUndefined();
    expect(await bare.doc(fork, "scratch")).toBeUndefined();
    expect(await bare.doc(SESSION_DOCS, "prefs")).toEqual({ theme: "light" }); // shared, not copied
    // The task, its definition missing, ends orphaned when aborted: its document retires with it.
    await bare.abortTask(task);
    expect((await done(bare, task)).state).toMatchObject({
      status: "terminal",
      outcome: { status: "orphaned" },
    });
    expect(await bare.doc(taskScope(task), "scratch")).toBeUndefined();
    expect(await bare.docRecord(taskScope(task), "scratch")).toBeUndefined();
    // And refused, as a completed or aborted task's are (draw 35cA, sections-0-4:333).
    await expect(bare.transaction((tx) => tx.readDoc(taskScope(task), "scratch"))).rejects.toBeInstanceOf(
      InvalidTransition,
    );
    await expect(
      bare.transaction((tx) => tx.writeDoc(taskScope(task), "scratch", { step: 3 })),
    ).rejects.toBeInstanceOf(InvalidTransition);
    const rows = await stored(bareStore, "scratch");
    expect(rows).toEqual([
      { id: scratch.id, scope: "task", createdAt: entry, retiredAt: expect.any(Number) },
    ]);
    expect(await bare.doc(SESSION_DOCS, "prefs")).toEqual({ theme: "light" });
  });

  test("a fork of a fork, reopened without the code: each copy keeps the record's rules, its history starts as of its entry and grows under the fork", async () => {
    const store = await memoryStore();
    const h = await open(store, { forks: { asOf: ["hist"] } });
    const e1 = await h.transaction((tx) => {
      tx.writeDoc(1, "hist", { n: 1 });
      return note(tx, 1, "1");
    });
    await h.transaction((tx) => {
      tx.writeDoc(1, "hist", { n: 2 });
      return note(tx, 1, "2");
    });
    await h.close();
    const bareStore = await memoryStore(store.image());
    const bare = await open(bareStore);
    const ownerless = { ownership: { kind: "ownerless" as const } };
    const a = await bare.transaction((tx) => tx.forkConversation(1, e1, ownerless).id);
    expect(await bare.doc(a, "hist")).toEqual({ n: 1 });
    const a1 = await bare.transaction((tx) => {
      tx.writeDoc(a, "hist", { n: 10 });
      return note(tx, a, "a1");
    });
    const a2 = await bare.transaction((tx) => {
      tx.writeDoc(a, "hist", { n: 11 });
      return note(tx, a, "a2");
    });
    // The fork's history: its copy (as of e1), then its own writes.
    expect(await historyOf(bareStore, a, "hist")).toEqual([{ n: 1 }, { n: 10 }, { n: 11 }]);

    // B forks A at A's own entry a1: A's value then, not its current one.
    const b = await bare.transaction((tx) => tx.forkConversation(a, a1, ownerless).id);
    expect(await bare.doc(b, "hist")).toEqual({ n: 10 });
    expect(await bare.docRecord(b, "hist")).toMatchObject({ history: "rewindable", fork: "asOf" });
    const b1 = await bare.transaction((tx) => {
      tx.writeDoc(b, "hist", { n: 20 });
      return note(tx, b, "b1");
    });
    expect((await bare.snapshotAsOf(b, "hist", b1))?.value).toEqual({ n: 20 });
    expect((await bare.snapshotAsOf(b, "hist", a1))?.value).toEqual({ n: 10 }); // inherited from A
    expect((await bare.snapshotAsOf(b, "hist", e1))?.value).toEqual({ n: 1 }); // inherited from the root
    expect((await bare.snapshotAsOf(a, "hist", a2))?.value).toEqual({ n: 11 });
    await expect(bare.snapshotAsOf(b, "hist", a2)).rejects.toThrow(EntryNotVisible); // after B's point

    // C forks B at the root's entry e1 (inherited twice): the root's value at e1.
    const c = await bare.transaction((tx) => tx.forkConversation(b, e1, ownerless).id);
    expect(await bare.doc(c, "hist")).toEqual({ n: 1 });
    // D forks B at its own b1: B's value then.
    const d = await bare.transaction((tx) => tx.forkConversation(b, b1, ownerless).id);
    expect(await bare.doc(d, "hist")).toEqual({ n: 20 });
  });
});

describe("snapshotAsOf (spec §3.3)", () => {
  test("snapshotAsOf reads the incarnation alive at the end of the entry's commit, by [createdAt, retiredAt); it creates nothing and refuses a document that is not rewindable or an entry not visible", async () => {
    const store = await memoryStore();
    const h = await open(store, { forks: { asOf: ["hist", "late", "never"] } });
    const e1 = await h.transaction((tx) => {
      tx.writeDoc(1, "hist", { n: 1 });
      tx.writeDoc(1, "plain", { p: 1 });
      return note(tx, 1, "1");
    });
    const first = (await h.docRecord(1, "hist"))!;
    expect(first).toMatchObject({ history: "rewindable", fork: "asOf" });
    const e2 = await h.transaction((tx) => {
      tx.writeDoc(1, "hist", { n: 2 }, 2);
      return note(tx, 1, "2");
    });
    const e3 = await h.transaction((tx) => {
      tx.retireDoc(1, "hist");
      return note(tx, 1, "3");
    });
    const e4 = await h.transaction((tx) => {
      tx.writeDoc(1, "hist", { n: 4 });
      return note(tx, 1, "4");
    });
    const second = (await h.docRecord(1, "hist"))!;
    const e5 = await h.transaction((tx) => {
      tx.writeDoc(1, "late", { l: 5 });
      return note(tx, 1, "5");
    });
    const before = await stored(store, "hist");

    expect(await h.snapshotAsOf(1, "hist", e1)).toEqual({ id: first.id, value: { n: 1 }, version: 1 });
    expect(await h.snapshotAsOf(1, "hist", e2)).toEqual({ id: first.id, value: { n: 2 }, version: 2 });
    expect(await h.snapshotAsOf(1, "hist", e3)).toBeUndefined(); // retired in e3's commit
    expect(await h.snapshotAsOf(1, "hist", e4)).toEqual({ id: second.id, value: { n: 4 }, version: 1 });
    expect(await h.snapshotAsOf(1, "hist", e5)).toEqual({ id: second.id, value: { n: 4 }, version: 1 });
    expect(await h.snapshotAsOf(1, "late", e4)).toBeUndefined(); // before its creation
    expect(await h.snapshotAsOf(1, "late", e5)).toMatchObject({ value: { l: 5 } });
    expect(await h.snapshotAsOf(1, "never", e5)).toBeUndefined();
    expect(await stored(store, "hist")).toEqual(before);
    // The end of the entry's commit, not the entry's place in it: a write after the entry in the same
    // commit is what the entry sees, and so is a retirement.
    const e6 = await h.transaction((tx) => {
      const entry = note(tx, 1, "6");
      tx.writeDoc(1, "hist", { n: 6 });
      return entry;
    });
    const e7 = await h.transaction((tx) => {
      const entry = note(tx, 1, "7");
      tx.retireDoc(1, "late");
      return entry;
    });
    expect(await h.snapshotAsOf(1, "hist", e6)).toEqual({ id: second.id, value: { n: 6 }, version: 1 });
    expect(await h.snapshotAsOf(1, "hist", e5)).toEqual({ id: second.id, value: { n: 4 }, version: 1 });
    expect(await h.snapshotAsOf(1, "late", e6)).toMatchObject({ value: { l: 5 } });
    expect(await h.snapshotAsOf(1, "late", e7)).toBeUndefined();
    expect(await stored(store, "never")).toEqual([]);
    // A creation after the entry, and after another entry, in the same commit: the new
    // incarnation's createdAt is that commit's, not its place in it (break 31C).
    const e8 = await h.transaction((tx) => {
      const entry = note(tx, 1, "8");
      note(tx, 1, "8b");
      tx.writeDoc(1, "late", { l: 8 });
      return entry;
    });
    expect(await h.snapshotAsOf(1, "late", e8)).toMatchObject({ value: { l: 8 } });
    expect(await h.snapshotAsOf(1, "late", e7)).toBeUndefined();

    await expect(h.snapshotAsOf(1, "plain", e5)).rejects.toThrow(InvalidTransition);
    const other = await h.transaction((tx) => tx.createConversation({ kind: "ownerless" }).id);
    await expect(h.snapshotAsOf(other, "hist", e1)).rejects.toThrow(EntryNotVisible);
    await expect(h.snapshotAsOf(1, "hist", 999)).rejects.toThrow(EntryNotVisible);
  });

  test("snapshotAsOf refuses a document that is not rewindable also at an entry where no incarnation of it was alive: the live record, else the forks option, decides (break 30F)", async () => {
    // Break 30F: every refusal of the named test read a document alive at the entry; a read that
    // answered undefined whenever no incarnation was alive then, asking no rule, passed it.
    const h = await open(await memoryStore(), { forks: { asOf: ["hist"] } });
    const e1 = await h.transaction((tx) => note(tx, 1, "1"));
    await h.transaction((tx) => {
      tx.writeDoc(1, "plain", { p: 1 });
      tx.writeDoc(1, "hist", { n: 1 });
      return note(tx, 1, "2");
    });
    // Created after e1, alive now: its record's history (latest) decides.
    await expect(h.snapshotAsOf(1, "plain", e1)).rejects.toThrow(InvalidTransition);
    // Never written: the forks option's rules for the name decide.
    await expect(h.snapshotAsOf(1, "nowhere", e1)).rejects.toThrow(InvalidTransition);
    // A rewindable one is read, and was absent then.
    expect(await h.snapshotAsOf(1, "hist", e1)).toBeUndefined();
  });

  test("snapshotAsOf of a document stored before its history existed never reads today's incarnation for a retired one: an entry of the retired incarnation reads nothing, one of today's its value (draw 41b)", async () => {
    // Draw 41b, 9: every named test of a store without history rows read an incarnation still
    // alive; the fallback to the stored row taken without its incarnation check (today's value read
    // for an entry of an incarnation retired and recreated since) passed them all.
    const store = await memoryStore();
    const h = await open(store, { forks: { asOf: ["hist"] } });
    const e1 = await h.transaction((tx) => {
      tx.writeDoc(1, "hist", { n: 1 });
      return note(tx, 1, "1");
    });
    await h.transaction((tx) => {
      tx.retireDoc(1, "hist");
      return note(tx, 1, "2");
    });
    const e3 = await h.transaction((tx) => {
      tx.writeDoc(1, "hist", { n: 3 });
      return note(tx, 1, "3");
    });
    await h.close();
    const again = await memoryStore(store.image());
    // A store from before document history: both incarnations rewindable, their history rows absent.
    await again.commit((sql) => sql.run("DELETE FROM doc_history"));
    const h2 = await open(again);
    const today = (await h2.docRecord(1, "hist"))!;
    expect(await h2.snapshotAsOf(1, "hist", e3)).toEqual({ id: today.id, value: { n: 3 }, version: 1 });
    expect(await h2.snapshotAsOf(1, "hist", e1)).toBeUndefined();
  });

  test("at the entry of the commit that retires it, an incarnation is no longer alive: its rules do not decide there, the live record's do (draw 31b)", async () => {
    // Draw 31b, 12: `at < retiredAt` read as `at <= retiredAt` passed every test: the retired
    // incarnation's value reads as absent at its retiring commit either way, so only its rules tell.
    // Here the retired incarnation and the live one have opposite rules, given by raw writes.
    const h = await open(await memoryStore());
    const latest = { history: "latest", fork: "current" } as const;
    const rewindable = { history: "rewindable", fork: "asOf" } as const;
    await h.transaction((tx) => {
      tx.writeDoc(1, "a", { n: 1 }, undefined, latest);
      tx.writeDoc(1, "b", { n: 1 }, undefined, rewindable);
      return note(tx, 1, "1");
    });
    const retiring = await h.transaction((tx) => {
      const entry = note(tx, 1, "2");
      tx.retireDoc(1, "a");
      tx.retireDoc(1, "b");
      return entry;
    });
    const after = await h.transaction((tx) => {
      tx.writeDoc(1, "a", { n: 3 }, undefined, rewindable);
      tx.writeDoc(1, "b", { n: 3 }, undefined, latest);
      return note(tx, 1, "3");
    });
    // "a": a latest incarnation retired at the entry, a rewindable one alive now: read, absent then.
    expect(await h.snapshotAsOf(1, "a", retiring)).toBeUndefined();
    expect(await h.snapshotAsOf(1, "a", after)).toMatchObject({ value: { n: 3 } });
    // "b": a rewindable incarnation retired at the entry, a latest one alive now: refused.
    await expect(h.snapshotAsOf(1, "b", retiring)).rejects.toThrow(InvalidTransition);
    await expect(h.snapshotAsOf(1, "b", retiring - 1)).resolves.toMatchObject({ value: { n: 1 } });
  });

  test("snapshotAsOf across a fork: an inherited entry reads the parent's incarnation of then, the child's own entries its copy", async () => {
    const h = await open(await memoryStore(), { forks: { asOf: ["hist"] } });
    const e1 = await h.transaction((tx) => {
      tx.writeDoc(1, "hist", { n: 1 });
      return note(tx, 1, "1");
    });
    const parentFirst = (await h.docRecord(1, "hist"))!;
    const e2 = await h.transaction((tx) => {
      tx.writeDoc(1, "hist", { n: 2 });
      return note(tx, 1, "2");
    });
    const e3 = await h.transaction((tx) => {
      tx.retireDoc(1, "hist");
      tx.writeDoc(1, "hist", { n: 3 });
      return note(tx, 1, "3");
    });
    const child = await h.transaction(
      (tx) => tx.forkConversation(1, e2, { ownership: { kind: "ownerless" } }).id,
    );
    const copy = (await h.docRecord(child, "hist"))!;
    expect(copy.id).not.toBe(parentFirst.id);
    expect(await h.doc(child, "hist")).toEqual({ n: 2 });
    const own = await h.transaction((tx) => {
      tx.writeDoc(child, "hist", { n: "child" });
      return note(tx, child, "c");
    });

    expect(await h.snapshotAsOf(child, "hist", e1)).toEqual({
      id: parentFirst.id,
      value: { n: 1 },
      version: 1,
    });
    expect(await h.snapshotAsOf(child, "hist", e2)).toEqual({
      id: parentFirst.id,
      value: { n: 2 },
      version: 1,
    });
    expect(await h.snapshotAsOf(child, "hist", own)).toEqual({
      id: copy.id,
      value: { n: "child" },
      version: 1,
    });
    await expect(h.snapshotAsOf(child, "hist", e3)).rejects.toThrow(EntryNotVisible);
    expect(await h.snapshotAsOf(1, "hist", e3)).toMatchObject({ value: { n: 3 } });
  });
});

test("snapshotAsOf across a fork picks, for each inherited entry, the parent's incarnation alive at that entry's commit, when the parent retired and recreated it before the fork point", async () => {
  const h = await open(await memoryStore(), { forks: { asOf: ["hist"] } });
  const e1 = await h.transaction((tx) => {
    tx.writeDoc(1, "hist", { n: 1 });
    return note(tx, 1, "1");
  });
  const first = (await h.docRecord(1, "hist"))!;
  const e2 = await h.transaction((tx) => {
    tx.retireDoc(1, "hist");
    tx.writeDoc(1, "hist", { n: 2 });
    return note(tx, 1, "2");
  });
  const second = (await h.docRecord(1, "hist"))!;
  expect(second.id).not.toBe(first.id);
  const e3 = await h.transaction((tx) => {
    tx.writeDoc(1, "hist", { n: 3 });
    return note(tx, 1, "3");
  });
  const child = await h.transaction(
    (tx) => tx.forkConversation(1, e3, { ownership: { kind: "ownerless" } }).id,
  );
  expect(await h.snapshotAsOf(child, "hist", e1)).toEqual({ id: first.id, value: { n: 1 }, version: 1 });
  expect(await h.snapshotAsOf(child, "hist", e2)).toEqual({ id: second.id, value: { n: 2 }, version: 1 });
  expect(await h.snapshotAsOf(child, "hist", e3)).toEqual({ id: second.id, value: { n: 3 }, version: 1 });
});

describe("the session surface (spec §3.3, §4)", () => {
  test("subscribeClose: each listener is called once, synchronously when close begins, after admission is sealed; its disposer is idempotent", async () => {
    const h = await Harness.open(await memoryStore());
    const calls: string[] = [];
    h.subscribeClose(() => {
      calls.push(`close sealed=${h.closed}`);
    });
    const off = h.subscribeClose(() => calls.push("disposed"));
    off();
    off();
    const closing = h.close();
    expect(calls).toEqual(["close sealed=true"]);
    await closing;
    await h.close();
    expect(calls).toEqual(["close sealed=true"]);
  });

  test("a documentState's unsubscribe ends its own subscription only: called again after the listener subscribed anew, it leaves the new one alone", async () => {
    // As the session's commit listeners (draw 32b, sections-0-4:421): listeners kept by the function
    // let a stale unsubscribe, called twice around a remount, end the newer subscription.
    const h = await open(await memoryStore());
    await h.transaction((tx) => tx.writeDoc(1, "d", { n: 1 }));
    const state = (await h.documentState(1, "d"))!;
    const seen: Array<Json | undefined> = [];
    const listener = () => seen.push(state.value);
    const first = state.subscribe(listener);
    first();
    const second = state.subscribe(listener);
    first();
    await h.transaction((tx) => tx.writeDoc(1, "d", { n: 2 }));
    await new Promise((r) => setTimeout(r, 0));
    expect(seen).toEqual([{ n: 2 }]);
    second();
    second();
    await h.transaction((tx) => tx.writeDoc(1, "d", { n: 3 }));
    await new Promise((r) => setTimeout(r, 0));
    expect(seen).toEqual([{ n: 2 }]);
    await h.close();
  });

  test("documentState ends when its document is retired alone, with no new incarnation in that commit: the value is gone and its listeners are told once", async () => {
    // Break 26H: the test below retires and recreates in one commit, so a state that ended only when
    // another incarnation's value came, never on a retirement alone, passed it.
    const h = await open(await memoryStore());
    await h.transaction((tx) => tx.writeDoc(1, "d", { n: 1 }));
    const state = (await h.documentState(1, "d"))!;
    const seen: Array<{ value: Json | undefined; ended: boolean }> = [];
    state.subscribe(() => seen.push({ value: state.value, ended: state.ended }));
    await h.transaction((tx) => {
      tx.retireDoc(1, "d");
    });
    await new Promise((r) => setTimeout(r, 0));
    expect(seen).toEqual([{ value: undefined, ended: true }]);
    expect(state.value).toBeUndefined();
    await h.close();
  });

  test("documentState ends when its document is retired in a commit that also writes other documents, written before it: the value is gone and its listeners are told once (draw 39c)", async () => {
    // Draw 39c: every named retirement was the commit's only document change (or the first), so a
    // state that stopped reading the commit's changes at the first other document passed them.
    const h = await open(await memoryStore());
    await h.transaction((tx) => tx.writeDoc(1, "d", { n: 1 }));
    const state = (await h.documentState(1, "d"))!;
    const seen: Array<{ value: Json | undefined; ended: boolean }> = [];
    state.subscribe(() => seen.push({ value: state.value, ended: state.ended }));
    await h.transaction((tx) => {
      tx.writeDoc(1, "a", { other: true });
      tx.writeDoc(2, "d", { elsewhere: true });
      tx.retireDoc(1, "d");
    });
    await new Promise((r) => setTimeout(r, 0));
    expect(seen).toEqual([{ value: undefined, ended: true }]);
    expect(state.ended).toBe(true);
    expect(state.value).toBeUndefined();
    await h.close();
  });

  test("documentState follows its incarnation through falsy values (null, 0, false, an empty string): only a retirement ends it (draw 36c)", async () => {
    // Draw 36c: a state that took a falsy committed value for a retirement passed every test: the
    // named ones write objects only.
    const h = await open(await memoryStore());
    await h.transaction((tx) => tx.writeDoc(1, "d", { n: 1 }));
    const state = (await h.documentState(1, "d"))!;
    const seen: Array<{ value: Json | undefined; ended: boolean }> = [];
    state.subscribe(() => seen.push({ value: state.value, ended: state.ended }));
    for (const value of [null, 0, false, ""] as Json[]) {
      await h.transaction((tx) => tx.writeDoc(1, "d", value));
      await new Promise((r) => setTimeout(r, 0));
      expect(state.ended).toBe(false);
      expect(state.value).toBe(value);
    }
    expect(seen).toEqual([
      { value: null, ended: false },
      { value: 0, ended: false },
      { value: false, ended: false },
      { value: "", ended: false },
    ]);
    await h.transaction((tx) => tx.retireDoc(1, "d"));
    await new Promise((r) => setTimeout(r, 0));
    expect(seen.at(-1)).toEqual({ value: undefined, ended: true });
    await h.close();
  });

  test("documentState is bound to its own conversation's incarnation: the same name written and retired in a fork and in another conversation neither updates nor ends it", async () => {
    // Break 30B: every named test had one conversation holding the name; a state that matched a
    // change by the document's name alone, whatever its conversation, passed them.
    const h = await open(await memoryStore());
    const { other, at } = await h.transaction((tx) => {
      tx.writeDoc(1, "d", { n: 1 });
      const other = tx.createConversation({ kind: "ownerless" });
      tx.writeDoc(other.id, "d", { in: "other" });
      return { other: other.id, at: note(tx, 1, "x") };
    });
    const fork = await h.transaction((tx) =>
      tx.forkConversation(1, at, { ownership: { kind: "ownerless" } }),
    );
    expect(await h.doc(fork.id, "d")).toEqual({ n: 1 });
    const state = (await h.documentState(1, "d"))!;
    const seen: Array<{ value: Json | undefined; ended: boolean }> = [];
    state.subscribe(() => seen.push({ value: state.value, ended: state.ended }));
    await h.transaction((tx) => tx.writeDoc(other, "d", { in: "other", n: 2 }));
    await h.transaction((tx) => tx.writeDoc(fork.id, "d", { n: 3 }));
    await h.transaction((tx) => {
      tx.retireDoc(fork.id, "d");
    });
    await h.transaction((tx) => {
      tx.retireDoc(other, "d");
    });
    await new Promise((r) => setTimeout(r, 0));
    expect(seen).toEqual([]);
    expect(state.ended).toBe(false);
    expect(state.value).toEqual({ n: 1 });
    // Its own retirement still ends it.
    await h.transaction((tx) => {
      tx.retireDoc(1, "d");
    });
    await new Promise((r) => setTimeout(r, 0));
    expect(seen).toEqual([{ value: undefined, ended: true }]);
    await h.close();
  });

  test("documentState of a task's document ends when the task becomes terminal, and of a session document when it is retired: the value is gone and listeners are told once", async () => {
    // Break 28Q: every state the tests acquired was a conversation's; one of a task or the session
    // scope that kept following after its document's retirement passed them.
    const hold = parked("holder");
    const h = await open(await memoryStore(), { tasks: [hold] });
    const id = await h.transaction((tx) => {
      const id = tx.createTask(hold, null, { ownership: { kind: "conversation" } });
      tx.writeDoc(taskScope(id), "scratch", { step: 1 });
      tx.writeDoc({ kind: "session" }, "shared", { n: 1 });
      return id;
    });
    const ofTask = (await h.documentState(taskScope(id), "scratch"))!;
    const ofSession = (await h.documentState({ kind: "session" }, "shared"))!;
    expect([ofTask.value, ofSession.value]).toEqual([{ step: 1 }, { n: 1 }]);
    const seen: string[] = [];
    ofTask.subscribe(() => seen.push(`task ended=${ofTask.ended}`));
    ofSession.subscribe(() => seen.push(`session ended=${ofSession.ended}`));
    await h.abortTask(id);
    await done(h, id);
    await new Promise((r) => setTimeout(r, 0));
    expect(seen).toEqual(["task ended=true"]);
    expect(ofTask.value).toBeUndefined();
    await h.transaction((tx) => {
      tx.retireDoc({ kind: "session" }, "shared");
    });
    await new Promise((r) => setTimeout(r, 0));
    expect(seen).toEqual(["task ended=true", "session ended=true"]);
    expect(ofSession.value).toBeUndefined();
    await h.close();
  });

  test("documentState of a session or a task document after a reopen, before any read loaded its scope, starts at the stored value and follows its commits (draw 37, 2)", async () => {
    // Spec §2.2: the generic Session document operations are the Harness's; §3.3 documentState is
    // bound to the committed incarnation. Draw 37-A: a documentState that loaded the documents of
    // conversations only (a session or task scope read from memory alone, absent after a reopen)
    // passed every named test: each state they acquired was a live engine's or a conversation's.
    const hold = parked("holder");
    const store = await memoryStore();
    const h = await open(store, { tasks: [hold] });
    const id = await h.transaction((tx) => {
      const id = tx.createTask(hold, null, { ownership: { kind: "conversation" } });
      tx.writeDoc(taskScope(id), "scratch", { step: 1 });
      tx.writeDoc({ kind: "session" }, "shared", { n: 1 });
      return id;
    });
    await h.close();
    const again = await open(await memoryStore(store.image()), { tasks: [hold] });
    const ofSession = await again.documentState({ kind: "session" }, "shared");
    const ofTask = await again.documentState(taskScope(id), "scratch");
    expect([ofSession?.value, ofTask?.value]).toEqual([{ n: 1 }, { step: 1 }]);
    await again.transaction((tx) => {
      tx.writeDoc({ kind: "session" }, "shared", { n: 2 });
      tx.writeDoc(taskScope(id), "scratch", { step: 2 });
    });
    expect([ofSession?.value, ofTask?.value]).toEqual([{ n: 2 }, { step: 2 }]);
    ofSession?.dispose();
    ofTask?.dispose();
    await again.abortTask(id);
    await again.close();
  });

  test("documentState in a conversation other than the root ends when the conversation is deleted; a listener unsubscribed is not told, and disposing one state leaves another of the same document following", async () => {
    // Break 28H: the named tests use the root only and never unsubscribe: a state the deletion of
    // its conversation left following, and an unsubscribe that kept the listener, passed them.
    const h = await open(await memoryStore());
    const c = await h.transaction((tx) => tx.createConversation({ kind: "ownerless" }));
    await h.transaction((tx) => tx.writeDoc(c.id, "d", { n: 1 }));
    const state = (await h.documentState(c.id, "d"))!;
    const other = (await h.documentState(c.id, "d"))!;
    const seen: Array<{ value: Json | undefined; ended: boolean }> = [];
    let dropped = 0;
    let others = 0;
    state.subscribe(() => seen.push({ value: state.value, ended: state.ended }));
    const unsubscribe = state.subscribe(() => dropped++);
    other.subscribe(() => others++);
    unsubscribe();
    await h.transaction((tx) => tx.writeDoc(c.id, "d", { n: 2 }));
    await new Promise((r) => setTimeout(r, 0));
    expect(seen).toEqual([{ value: { n: 2 }, ended: false }]);
    expect(dropped).toBe(0);
    expect(others).toBe(1);
    other.dispose();
    await h.transaction((tx) => tx.writeDoc(c.id, "d", { n: 3 }));
    await new Promise((r) => setTimeout(r, 0));
    expect(seen).toEqual([
      { value: { n: 2 }, ended: false },
      { value: { n: 3 }, ended: false },
    ]);
    expect(others).toBe(1);
    expect(await h.deleteConversation(c.id)).toEqual([c.id]);
    await new Promise((r) => setTimeout(r, 0));
    expect(seen).toEqual([
      { value: { n: 2 }, ended: false },
      { value: { n: 3 }, ended: false },
      { value: undefined, ended: true },
    ]);
    expect(state.ended).toBe(true);
    expect(state.value).toBeUndefined();
    expect(dropped).toBe(0);
    await h.close();
  });

  test("documentState is bound to one committed incarnation: it follows that incarnation's commits off the line, ends when it is retired, and is undefined for an absent document", async () => {
    const h = await open(await memoryStore());
    expect(await h.documentState(1, "d")).toBeUndefined();
    // Acquisition never creates: the absent document stays absent.
    expect(await h.docRecord(1, "d")).toBeUndefined();
    await h.transaction((tx) => tx.writeDoc(1, "d", { n: 1 }));
    const state = (await h.documentState(1, "d"))!;
    const record = (await h.docRecord(1, "d"))!;
    expect(state.record).toEqual(record);
    expect(state.value).toEqual({ n: 1 });
    const seen: Array<{ value: Json | undefined; ended: boolean }> = [];
    state.subscribe(() => seen.push({ value: state.value, ended: state.ended }));
    // A commit observer runs on the line as the commit is adopted; the state's subscriber only later,
    // off the line (spec §1.7, §3.4; break 27B: told inline, on the line, it passed).
    const onTheLine: number[] = [];
    const stop = h.subscribe((change) => {
      if (change.docs.some((d) => d.name === "d")) onTheLine.push(seen.length);
    });
    await h.transaction((tx) => {
      tx.writeDoc(1, "d", { n: 2 });
      tx.writeDoc(1, "other", { x: 1 });
      expect(seen).toEqual([]);
    });
    stop();
    expect(onTheLine).toEqual([0]);
    await new Promise((r) => setTimeout(r, 0));
    expect(seen).toEqual([{ value: { n: 2 }, ended: false }]);
    await h.transaction((tx) => tx.writeDoc(1, "other", { x: 2 }));
    await new Promise((r) => setTimeout(r, 0));
    expect(seen.length).toBe(1);

    // Its end, too, reaches the subscriber off the line (draw 34b: an end told inline passed).
    const endOnTheLine: number[] = [];
    const stopEnd = h.subscribe((change) => {
      if (change.docs.some((d) => d.name === "d")) endOnTheLine.push(seen.length);
    });
    await h.transaction((tx) => {
      tx.retireDoc(1, "d");
      tx.writeDoc(1, "d", { n: 9 });
    });
    stopEnd();
    expect(endOnTheLine).toEqual([1]);
    await new Promise((r) => setTimeout(r, 0));
    expect(seen).toEqual([
      { value: { n: 2 }, ended: false },
      { value: undefined, ended: true },
    ]);
    await h.transaction((tx) => tx.writeDoc(1, "d", { n: 10 }));
    await new Promise((r) => setTimeout(r, 0));
    expect(seen.length).toBe(2);
    // Still exposed after its end, it shows the absence, never the stale value or the new incarnation's.
    expect(state.value).toBeUndefined();

    const next = (await h.documentState(1, "d"))!;
    expect(next.record.id).not.toBe(record.id);
    let calls = 0;
    next.subscribe(() => calls++);
    next.dispose();
    await h.transaction((tx) => tx.writeDoc(1, "d", { n: 11 }));
    await new Promise((r) => setTimeout(r, 0));
    expect(calls).toBe(0);
    const last = (await h.documentState(1, "d"))!;
    await h.close();
    expect(last.ended).toBe(true);
  });

  test("after a reopen, documentState reads its document from the store: in a conversation not loaded yet it is bound to the stored incarnation, follows its next write and ends at its retirement; an absent name stays undefined and is not created (draw 34b)", async () => {
    // Draw 34b: every named acquisition ran in the session that wrote the document, its conversation
    // in memory; an acquisition that read memory only (no load) answered undefined for a stored
    // document after a reopen and passed them.
    const store = await memoryStore();
    const first = await open(store);
    const c = await first.transaction((tx) => {
      const made = tx.createConversation({ kind: "ownerless" });
      tx.writeDoc(made.id, "d", { n: 1 });
      return made.id;
    });
    await first.transaction((tx) => tx.writeDoc(c, "d", { n: 2 }));
    const stored = (await first.docRecord(c, "d"))!;
    await first.close();
    const h = await open(await memoryStore(store.image()));
    // Acquired first: nothing else has loaded the conversation's documents.
    const state = await h.documentState(c, "d");
    expect(await h.documentState(c, "never-written")).toBeUndefined();
    expect(await h.docRecord(c, "never-written")).toBeUndefined();
    expect(state?.record).toEqual(stored);
    expect(state?.value).toEqual({ n: 2 });
    const seen: Array<{ value: Json | undefined; ended: boolean }> = [];
    state!.subscribe(() => seen.push({ value: state!.value, ended: state!.ended }));
    await h.transaction((tx) => tx.writeDoc(c, "d", { n: 3 }));
    await new Promise((r) => setTimeout(r, 0));
    expect(seen).toEqual([{ value: { n: 3 }, ended: false }]);
    await h.transaction((tx) => {
      tx.retireDoc(c, "d");
    });
    await new Promise((r) => setTimeout(r, 0));
    expect(seen).toEqual([
      { value: { n: 3 }, ended: false },
      { value: undefined, ended: true },
    ]);
    expect(await h.docRecord(c, "never-written")).toBeUndefined();
  });

  test("a document state asked for while a commit to its document is under way ends at that commit's value, by its baseline or by one update, never stuck before it (spec §3.7: baseline and subscription atomic)", async () => {
    const h = await open(await memoryStore());
    await h.transaction((tx) => tx.writeDoc(1, "d", { n: 1 }));
    for (let n = 2; n <= 6; n++) {
      // Acquisition and a commit to the document started together, in both orders: whichever lands
      // first, the state ends at the commit's value, with no later update repeating it.
      const acquire = () => h.documentState(1, "d");
      const commit = () => h.transaction((tx) => tx.writeDoc(1, "d", { n }));
      const state =
        n % 2 === 0
          ? (await Promise.all([acquire(), commit()]))[0]
          : (await Promise.all([commit(), acquire()]))[1];
      let told = 0;
      state!.subscribe(() => told++);
      await h.transaction((tx) => tx.appendEntry(1, { kind: "app.note", data: n }));
      await new Promise((r) => setTimeout(r, 0));
      expect([n, state!.value, told]).toEqual([n, { n }, 0]);
      state!.dispose();
    }
  });

  test("closing ends every document state at its seal, keeping its last value: a commit that settles during close sends it nothing", async () => {
    const h = await open(await memoryStore());
    await h.transaction((tx) => {
      tx.writeDoc(1, "d", { n: 1 });
      tx.writeDoc(1, "e", { m: 1 });
    });
    const state = (await h.documentState(1, "d"))!;
    const other = (await h.documentState(1, "e"))!;
    let calls = 0;
    state.subscribe(() => calls++);
    other.subscribe(() => calls++);
    // A commit admitted before the seal, holding the line while close begins: it settles during close.
    const gate = deferred();
    const inCallback = deferred();
    const late = h.transaction(async (tx) => {
      inCallback.resolve();
      await gate.promise;
      tx.writeDoc(1, "d", { n: 2 });
      tx.writeDoc(1, "e", { m: 2 });
    });
    await inCallback.promise;
    const closing = h.close();
    // Every state, not only the first: both end at the seal.
    expect(state.ended).toBe(true);
    expect(other.ended).toBe(true);
    gate.resolve();
    await late;
    await closing;
    await new Promise((r) => setTimeout(r, 0));
    expect(state.value).toEqual({ n: 1 });
    expect(other.value).toEqual({ m: 1 });
    expect(calls).toBe(0);
  });
});
