/**
 * Typed document tokens per scope, and typed access refusing a definition that disagrees with the
 * stored incarnation (spec §3.1): `defineDoc` makes a session, conversation or task token from the
 * definition's `scope`; a conversation definition declares `history` and `fork` ("asOf" only when
 * rewindable); typed access (a transaction's `read`/`write`, `AgentHarness.snapshot`) refuses with
 * DocumentSemanticsError an incarnation created with another history or fork rule, and nothing is
 * written; a migration cannot change them.
 */
import { afterEach, describe, expect, test } from "vitest";
import {
  AgentHarness,
  type AgentHarnessOptions,
  DocumentSemanticsError,
  defineDoc,
  InvalidTransition,
  type MemoryStore,
  type TaskId,
} from "../../../worker/index.ts";
import { fauxAgentModel, memoryStore, until } from "../../../worker/testing.ts";
import { echo } from "../agent/fixtures.ts";
import { done, joiner, parked } from "./fixtures.ts";

const opened: AgentHarness[] = [];
afterEach(async () => {
  for (const h of opened.splice(0)) await h.close().catch(() => undefined);
});

const hold = parked("holder");

async function harness(store: MemoryStore, options: Partial<AgentHarnessOptions> = {}) {
  const faux = fauxAgentModel(echo);
  const h = await AgentHarness.open(store, {
    models: faux.models,
    defaultModel: faux.ref,
    tasks: [hold],
    ...options,
  });
  opened.push(h);
  faux.unregister();
  return h;
}

/** Every stored row of a document name, whatever its scope: the row key and value. */
async function rows(store: MemoryStore, name: string) {
  const found = await store.read((sql) =>
    sql.all("SELECT conversation_id, value FROM documents WHERE name = ? ORDER BY conversation_id", [name]),
  );
  return found.map((r) => ({ key: Number(r["conversation_id"]), value: JSON.parse(String(r["value"])) }));
}

describe("document tokens per scope (spec §3.1)", () => {
  test("a session token reads and writes the one session document: no conversation, kept across close and reopen", async () => {
    const prefs = defineDoc<{ theme: string }>({
      name: "app.prefs",
      scope: "session",
      initial: { theme: "light" },
    });
    expect(prefs.scope).toBe("session");
    expect("history" in prefs || "fork" in prefs).toBe(false);
    const store = await memoryStore();
    const h = await harness(store);
    expect(await h.snapshot(prefs)).toBeUndefined();
    expect(await h.transaction((tx) => prefs.read(tx))).toEqual({ theme: "light" }); // get-or-create
    await h.transaction((tx) => prefs.write(tx, { theme: "dark" }));
    expect(await rows(store, "app.prefs")).toEqual([{ key: 0, value: { theme: "dark" } }]);
    expect(await h.doc(1, "app.prefs")).toBeUndefined(); // not a conversation's
    expect(await h.docRecord({ kind: "session" }, "app.prefs")).toMatchObject({ scope: { kind: "session" } });
    await h.close();
    const again = await harness(await memoryStore(store.image()));
    expect(await again.snapshot(prefs)).toEqual({ theme: "dark" });
    expect(await again.transaction((tx) => prefs.read(tx))).toEqual({ theme: "dark" });
  });

  test("a task token reads and writes its task's document while the task lives; the task's end retires it and access throws", async () => {
    const scratch = defineDoc<{ step: number }>({ name: "app.scratch", scope: "task", initial: { step: 0 } });
    expect(scratch.scope).toBe("task");
    const store = await memoryStore();
    const h = await harness(store);
    await h.root();
    const id = await h.transaction((tx) => {
      const id = tx.createTask(hold, null, { ownership: { kind: "conversation" } }) as TaskId;
      expect(scratch.read(tx, id)).toEqual({ step: 0 });
      scratch.write(tx, id, { step: 1 });
      return id;
    });
    expect(await h.snapshot(scratch, id)).toEqual({ step: 1 });
    expect(await rows(store, "app.scratch")).toEqual([{ key: -id, value: { step: 1 } }]);
    expect(await h.docRecord({ kind: "task", taskId: id }, "app.scratch")).toMatchObject({
      scope: { kind: "task", taskId: id },
    });
    await h.abortTask(id);
    await done(h, id);
    expect(await h.snapshot(scratch, id)).toBeUndefined();
    await expect(h.transaction((tx) => scratch.read(tx, id))).rejects.toThrow(InvalidTransition);
    await expect(h.transaction((tx) => scratch.write(tx, id, { step: 2 }))).rejects.toThrow(
      InvalidTransition,
    );
  });

  // Sweep 42c, 43: every task token test used a running task; a check refusing the documents of a
  // task parked in waiting (live, with no invocation) passed them all.
  test("a task token reads and writes the document of a task parked in waiting: it is live, so access goes on until it ends (sweep 42c)", async () => {
    const scratch = defineDoc<{ step: number }>({ name: "app.waiting", scope: "task", initial: { step: 0 } });
    const join = joiner("waits-on-holder");
    const store = await memoryStore();
    const h = await harness(store, { tasks: [hold, join] });
    await h.root();
    const held = await h.transaction(
      (tx) => tx.createTask(hold, null, { ownership: { kind: "conversation" } }) as TaskId,
    );
    const waiting = await h.transaction(
      (tx) => tx.createTask(join, held, { ownership: { kind: "conversation" } }) as TaskId,
    );
    const isWaiting = () =>
      h.inspect().tasks.some((t) => t.record.id === waiting && t.state.kind === "waiting");
    await until(isWaiting, { what: "waiting" });
    expect(await h.transaction((tx) => scratch.read(tx, waiting))).toEqual({ step: 0 });
    await h.transaction((tx) => scratch.write(tx, waiting, { step: 1 }));
    expect(await h.snapshot(scratch, waiting)).toEqual({ step: 1 });
    expect(isWaiting()).toBe(true);
    await h.abortTask(held);
    await done(h, waiting);
    expect(await h.snapshot(scratch, waiting)).toBeUndefined();
    await expect(h.transaction((tx) => scratch.read(tx, waiting))).rejects.toThrow(InvalidTransition);
  });

  // Break 28R: creation and the version transition were tried only on conversation documents; a task
  // or session token's creating or migrating read that did not store its base passed every named test.
  test("a session or task token's read creates the absent document, and its read of an older stored version stores the migrated value at the new version", async () => {
    const versionOf = async (store: MemoryStore, name: string) => {
      const r = await store.read((sql) => sql.get("SELECT version FROM documents WHERE name = ?", [name]));
      return Number(r?.["version"]);
    };
    const calls: string[] = [];
    const store = await memoryStore();
    const h = await harness(store);
    await h.root();
    const prefs1 = defineDoc<{ theme: string }>({
      name: "app.prefs",
      scope: "session",
      initial: { theme: "x" },
    });
    const scratch1 = defineDoc<{ step: number }>({
      name: "app.scratch",
      scope: "task",
      initial: { step: 0 },
    });
    const prefs2 = defineDoc<{ look: string }>({
      name: "app.prefs",
      scope: "session",
      version: 2,
      initial: { look: "x" },
      migrate: (value) => {
        calls.push("prefs");
        return { look: (value as { theme: string }).theme };
      },
    });
    const scratch2 = defineDoc<{ steps: number }>({
      name: "app.scratch",
      scope: "task",
      version: 2,
      initial: { steps: 0 },
      migrate: (value) => {
        calls.push("scratch");
        return { steps: (value as { step: number }).step };
      },
    });
    // Creation: a read alone stores the initial value (get-or-create).
    const id = await h.transaction((tx) => {
      const id = tx.createTask(hold, null, { ownership: { kind: "conversation" } }) as TaskId;
      scratch1.read(tx, id);
      prefs1.read(tx);
      return id;
    });
    expect(await rows(store, "app.prefs")).toEqual([{ key: 0, value: { theme: "x" } }]);
    expect(await rows(store, "app.scratch")).toEqual([{ key: -id, value: { step: 0 } }]);
    await h.transaction((tx) => {
      scratch1.write(tx, id, { step: 3 });
      prefs1.write(tx, { theme: "dark" });
    });
    // A read-only snapshot migrates in memory only, at these scopes too (draw 35b, 11: a session or
    // task snapshot that stored its migration passed every named test): nothing stored changes.
    expect([await h.snapshot(prefs2), await h.snapshot(scratch2, id)]).toEqual([
      { look: "dark" },
      { steps: 3 },
    ]);
    expect(await rows(store, "app.prefs")).toEqual([{ key: 0, value: { theme: "dark" } }]);
    expect(await rows(store, "app.scratch")).toEqual([{ key: -id, value: { step: 3 } }]);
    expect([await versionOf(store, "app.prefs"), await versionOf(store, "app.scratch")]).toEqual([1, 1]);
    expect(await h.transaction((tx) => [prefs2.read(tx), scratch2.read(tx, id)])).toEqual([
      { look: "dark" },
      { steps: 3 },
    ]);
    expect(await rows(store, "app.prefs")).toEqual([{ key: 0, value: { look: "dark" } }]);
    expect(await rows(store, "app.scratch")).toEqual([{ key: -id, value: { steps: 3 } }]);
    expect([await versionOf(store, "app.prefs"), await versionOf(store, "app.scratch")]).toEqual([2, 2]);
    expect(calls).toContain("scratch");
  });

  test("a conversation token carries its history and fork; the defaults are latest and current", async () => {
    expect(defineDoc("app.a", { n: 0 })).toMatchObject({
      scope: "conversation",
      history: "latest",
      fork: "current",
    });
    expect(
      defineDoc({ name: "app.b", history: "rewindable", fork: "asOf", initial: { n: 0 } }),
    ).toMatchObject({ scope: "conversation", history: "rewindable", fork: "asOf" });
    expect(defineDoc({ name: "app.c", history: "rewindable", initial: { n: 0 } })).toMatchObject({
      history: "rewindable",
      fork: "current",
    });
  });

  // Sweep 42c, 44: every conversation definition in the named tests left scope unset; one that
  // declares scope "conversation", as the spec's own example does, refused as an unknown scope passed.
  test("a definition that declares scope conversation makes a conversation token, as one that leaves scope unset, and its typed access reads and writes (sweep 42c)", async () => {
    const container = defineDoc<{ image: string }>({
      name: "app.container",
      version: 1,
      scope: "conversation",
      history: "latest",
      fork: "current",
      initial: () => ({ image: "node:22" }),
    });
    expect(container).toMatchObject({ scope: "conversation", history: "latest", fork: "current" });
    expect(
      defineDoc({
        name: "app.d",
        scope: "conversation",
        history: "rewindable",
        fork: "asOf",
        initial: { n: 0 },
      }),
    ).toMatchObject({
      scope: "conversation",
      history: "rewindable",
      fork: "asOf",
    });
    const store = await memoryStore();
    const h = await harness(store);
    const root = await h.root();
    expect(await h.transaction((tx) => container.read(tx, root.id))).toEqual({ image: "node:22" });
    await h.transaction((tx) => container.write(tx, root.id, { image: "node:24" }));
    expect(await h.snapshot(container, root.id)).toEqual({ image: "node:24" });
  });

  test("definitions that are not the spec's are refused where they are made", () => {
    const bad: unknown[] = [
      { name: "app.x", fork: "asOf", initial: {} }, // asOf needs rewindable
      { name: "app.x", history: "latest", fork: "asOf", initial: {} },
      { name: "app.x", scope: "session", history: "latest", initial: {} },
      { name: "app.x", scope: "session", fork: "current", initial: {} },
      { name: "app.x", scope: "task", history: "rewindable", initial: {} },
      { name: "app.x", scope: "task", fork: "initial", initial: {} },
      { name: "app.x", scope: "document", initial: {} },
      { name: "app.x", history: "forever", initial: {} },
      { name: "app.x", fork: "copy", initial: {} },
      { name: "app.x", scope: "session", initial: [] }, // initial must be a JSON object
      { name: "app.x", scope: "task", version: 0, initial: {} },
    ];
    for (const definition of bad)
      expect(() => defineDoc(definition as never), JSON.stringify(definition)).toThrow(TypeError);
  });

  test("a raw writeDoc whose rules ask for fork asOf without history rewindable is refused where it is made, and nothing is written", async () => {
    // Break 31C (contrary before): the definition check held for defineDoc only; a raw
    // tx.writeDoc creating an incarnation stored {history: "latest", fork: "asOf"}, a record the
    // spec's DocumentRecord cannot hold (§3.1: fork "asOf" requires history "rewindable").
    const h = await harness(await memoryStore());
    await h.root();
    const write = (rules: { history: "latest" | "rewindable"; fork: "asOf" | "current" | "initial" }) =>
      h.transaction((tx) => {
        tx.appendEntry(1, { kind: "app.note", data: { text: "with it" } });
        tx.writeDoc(1, "app.raw", { n: 1 }, 1, rules);
      });
    await expect(write({ history: "latest", fork: "asOf" })).rejects.toThrow(InvalidTransition);
    expect(await h.docRecord(1, "app.raw")).toBeUndefined();
    expect(await h.entries(1)).toEqual([]);
    await write({ history: "rewindable", fork: "asOf" });
    expect(await h.docRecord(1, "app.raw")).toMatchObject({ history: "rewindable", fork: "asOf" });
  });

  test("a rewindable document given to the harness keeps its history: snapshotAsOf reads it as it was, also with fork current", async () => {
    const plan = defineDoc<{ n: number }>({ name: "app.plan", history: "rewindable", initial: { n: 0 } });
    const store = await memoryStore();
    const h = await harness(store, { documents: [plan] });
    await h.root();
    const first = await h.transaction((tx) => {
      plan.write(tx, 1, { n: 1 });
      return tx.appendEntry(1, { kind: "app.note", data: { text: "one" } }).id;
    });
    await h.transaction((tx) => {
      plan.write(tx, 1, { n: 2 });
      tx.appendEntry(1, { kind: "app.note", data: { text: "two" } });
    });
    expect((await h.snapshotAsOf(1, "app.plan", first))?.value).toEqual({ n: 1 });
    expect(await h.docRecord(1, "app.plan")).toMatchObject({ history: "rewindable", fork: "current" });
    // A fork copies its current value (fork "current"), not the value at the entry.
    const fork = await h.transaction((tx) =>
      tx.forkConversation(1, first, { ownership: { kind: "ownerless" } }),
    );
    expect(await h.snapshot(plan, fork.id)).toEqual({ n: 2 });
  });
});

describe("rewindable history and versions (spec §3.6)", () => {
  test("rewindable history is not rewritten by a migration: an older entry's value keeps its stored version, and a token migrates it only in memory", async () => {
    const v1 = defineDoc<{ n: number }>({ name: "app.plan", history: "rewindable", initial: { n: 0 } });
    const v2 = defineDoc<{ count: number }>({
      name: "app.plan",
      history: "rewindable",
      version: 2,
      initial: { count: 0 },
      migrate: (old) => ({ count: (old as { n: number }).n }),
    });
    const store = await memoryStore();
    const h = await harness(store, { documents: [v1] });
    await h.root();
    const first = await h.transaction((tx) => {
      v1.write(tx, 1, { n: 1 });
      return tx.appendEntry(1, { kind: "app.note", data: { text: "one" } }).id;
    });
    const history = () =>
      store.read((sql) => sql.all("SELECT version, value FROM doc_history ORDER BY id", []));
    const before = await history();
    // The current value is migrated by the first transaction that reads it through the newer token.
    const second = await h.transaction((tx) => {
      v2.write(tx, 1, { count: v2.read(tx, 1).count + 1 });
      return tx.appendEntry(1, { kind: "app.note", data: { text: "two" } }).id;
    });
    expect(await h.snapshot(v2, 1)).toEqual({ count: 2 });
    // The older entry's value is as it was stored, at version 1; its history row was not rewritten.
    const old = await h.snapshotAsOf(1, "app.plan", first);
    expect(old).toMatchObject({ value: { n: 1 }, version: 1 });
    expect((await history()).slice(0, before.length)).toEqual(before);
    // A reader migrates it after reading it, in memory (the token's view), writing nothing.
    expect(v2.view({ value: old!.value, version: old!.version })).toEqual({ count: 1 });
    expect((await h.snapshotAsOf(1, "app.plan", second))?.value).toEqual({ count: 2 });
    expect((await history()).slice(0, before.length)).toEqual(before);
  });
});

describe("typed access refuses a definition that disagrees with the stored incarnation (spec §3.1)", () => {
  test("a document created latest/current is refused to a token declaring rewindable or asOf or initial, in a transaction and a snapshot; nothing is written", async () => {
    const latest = defineDoc<{ n: number }>({ name: "app.plan", initial: { n: 0 } });
    const store = await memoryStore();
    const h = await harness(store);
    await h.transaction((tx) => latest.write(tx, 1, { n: 1 }));
    expect(await h.docRecord(1, "app.plan")).toMatchObject({ history: "latest", fork: "current" });
    await h.close();

    const others = [
      defineDoc<{ n: number }>({ name: "app.plan", history: "rewindable", fork: "asOf", initial: { n: 0 } }),
      defineDoc<{ n: number }>({ name: "app.plan", history: "rewindable", initial: { n: 0 } }),
      defineDoc<{ n: number }>({ name: "app.plan", fork: "initial", initial: { n: 0 } }),
    ];
    for (const other of others) {
      // Reopened by a process whose definition says otherwise, and which gives it to the harness.
      const again = await harness(await memoryStore(store.image()), { documents: [other] });
      const read = await again.transaction((tx) => other.read(tx, 1)).catch((e: unknown) => e);
      expect(read).toBeInstanceOf(DocumentSemanticsError);
      expect(read).toMatchObject({
        code: "document_semantics",
        document: "app.plan",
        declared: { history: other.history, fork: other.fork },
        stored: { history: "latest", fork: "current" },
      });
      await expect(again.transaction((tx) => other.write(tx, 1, { n: 9 }))).rejects.toThrow(
        DocumentSemanticsError,
      );
      await expect(again.snapshot(other, 1)).rejects.toThrow(DocumentSemanticsError);
      // The incarnation keeps its stored semantics whatever this process declares.
      expect(await again.docRecord(1, "app.plan")).toMatchObject({ history: "latest", fork: "current" });
      expect(await again.snapshot(latest, 1)).toEqual({ n: 1 });
      expect(await again.transaction((tx) => latest.read(tx, 1))).toEqual({ n: 1 });
      await again.close();
    }
    expect(await rows(await memoryStore(store.image()), "app.plan")).toEqual([{ key: 1, value: { n: 1 } }]);
  });

  test("a refused typed write that its transaction catches writes nothing: the commit goes on, the stored value, version and record unchanged", async () => {
    // Break 29D (contrary): the named tests let the refusal fail the whole transaction, which rolled
    // the write back; the write was made before the check, so a caller catching the refusal inside
    // the transaction committed the disagreeing token's value into the stored incarnation.
    const latest = defineDoc<{ n: number }>({ name: "app.plan", initial: { n: 0 } });
    const other = defineDoc<{ n: number }>({
      name: "app.plan",
      version: 2,
      history: "rewindable",
      fork: "asOf",
      initial: { n: 0 },
    });
    const store = await memoryStore();
    const h = await harness(store);
    await h.root();
    await h.transaction((tx) => latest.write(tx, 1, { n: 1 }));
    const record = await h.docRecord(1, "app.plan");
    const caught = await h.transaction((tx) => {
      let refused: unknown;
      try {
        other.write(tx, 1, { n: 9 });
      } catch (error) {
        refused = error;
      }
      tx.appendEntry(1, { kind: "app.note", data: "the commit goes on" });
      return refused;
    });
    expect(caught).toBeInstanceOf(DocumentSemanticsError);
    expect(await h.doc(1, "app.plan")).toEqual({ n: 1 });
    expect(await h.docRecord(1, "app.plan")).toEqual(record);
    const stored = await store.read((sql) =>
      sql.get("SELECT version, value FROM documents WHERE conversation_id = 1 AND name = 'app.plan'"),
    );
    expect({ version: stored?.["version"], value: stored?.["value"] }).toEqual({
      version: 1,
      value: '{"n":1}',
    });
    expect(await h.snapshot(latest, 1)).toEqual({ n: 1 });
  });

  test("a harness given a token that declares other rules than the stored record follows the record: no history kept, snapshotAsOf refused, a fork copies the current value", async () => {
    const latest = defineDoc<{ n: number }>({ name: "app.plan", initial: { n: 0 } });
    const asOf = defineDoc<{ n: number }>({
      name: "app.plan",
      history: "rewindable",
      fork: "asOf",
      initial: { n: 0 },
    });
    const store = await memoryStore();
    const h = await harness(store);
    const root = await h.root();
    const e1 = await h.transaction((tx) => {
      latest.write(tx, root.id, { n: 1 });
      return tx.appendEntry(root.id, { kind: "app.note", data: "1" }).id;
    });
    await h.close();

    const againStore = await memoryStore(store.image());
    const again = await harness(againStore, { documents: [asOf] });
    await expect(again.transaction((tx) => asOf.read(tx, root.id))).rejects.toThrow(DocumentSemanticsError);
    const e2 = await again.transaction((tx) => {
      latest.write(tx, root.id, { n: 2 });
      return tx.appendEntry(root.id, { kind: "app.note", data: "2" }).id;
    });
    await expect(again.snapshotAsOf(root.id, "app.plan", e2)).rejects.toThrow(InvalidTransition);
    const history = await againStore.read((sql) =>
      sql.get("SELECT count(*) AS n FROM doc_history WHERE name = 'app.plan'"),
    );
    expect(history?.["n"]).toBe(0);
    const fork = await again.transaction((tx) =>
      tx.forkConversation(root.id, e1, { ownership: { kind: "ownerless" } }),
    );
    expect(await again.snapshot(latest, fork.id)).toEqual({ n: 2 });
    expect(await again.docRecord(fork.id, "app.plan")).toMatchObject({ history: "latest", fork: "current" });
  });

  test("a document created rewindable/asOf is refused to a latest token, even one whose migrate would read it", async () => {
    const rewindable = defineDoc<{ n: number }>({
      name: "app.plan",
      history: "rewindable",
      fork: "asOf",
      initial: { n: 0 },
    });
    const store = await memoryStore();
    const h = await harness(store, { documents: [rewindable] });
    await h.transaction((tx) => rewindable.write(tx, 1, { n: 1 }));
    await h.close();
    const newer = defineDoc<{ count: number }>({
      name: "app.plan",
      version: 2,
      initial: { count: 0 },
      migrate: (value) => ({ count: (value as { n: number }).n }),
    });
    const again = await harness(await memoryStore(store.image()), { documents: [newer] });
    await expect(again.transaction((tx) => newer.read(tx, 1))).rejects.toThrow(DocumentSemanticsError);
    await expect(again.snapshot(newer, 1)).rejects.toThrow(DocumentSemanticsError);
    expect(await again.docRecord(1, "app.plan")).toMatchObject({ history: "rewindable", fork: "asOf" });
    const stored = await again.store.read((sql) =>
      sql.get("SELECT version, value FROM documents WHERE conversation_id = 1 AND name = 'app.plan'"),
    );
    expect({ version: stored?.["version"], value: stored?.["value"] }).toEqual({
      version: 1,
      value: '{"n":1}',
    });
  });

  test("the harness's own pi.agent token is rewindable with fork asOf, and its typed access passes", async () => {
    const store = await memoryStore();
    const h = await harness(store);
    const c = await h.root();
    expect(await h.docRecord(c.id, "pi.agent")).toMatchObject({ history: "rewindable", fork: "asOf" });
  });
});

// Spec §3.3 "Ordinary definitions are not registered": the token is the source of a new incarnation's
// history and fork (reading 23b found it contrary: the harness refused a token it was not given).
test("an ordinary definition is not registered: a token's typed access creates its incarnation with the token's history and fork, and the record keeps them", async () => {
  const hist = defineDoc<{ n: number }>({
    name: "app.unlisted-hist",
    initial: { n: 0 },
    history: "rewindable",
    fork: "asOf",
  });
  const fresh = defineDoc<{ n: number }>({ name: "app.unlisted-fresh", initial: { n: 0 }, fork: "initial" });
  const store = await memoryStore();
  // No `documents` option: neither definition is given to the harness.
  const h = await harness(store);
  await h.transaction((tx) => hist.write(tx, 1, { n: 1 }));
  expect(await h.transaction((tx) => fresh.read(tx, 1))).toEqual({ n: 0 });
  expect(await h.docRecord(1, "app.unlisted-hist")).toMatchObject({ history: "rewindable", fork: "asOf" });
  expect(await h.docRecord(1, "app.unlisted-fresh")).toMatchObject({ history: "latest", fork: "initial" });
  // The record keeps them for a process that never saw the definitions.
  await h.close();
  const again = await harness(await memoryStore(store.image()));
  expect(await again.docRecord(1, "app.unlisted-hist")).toMatchObject({
    history: "rewindable",
    fork: "asOf",
  });
  expect(await again.transaction((tx) => hist.read(tx, 1))).toEqual({ n: 1 });
});
