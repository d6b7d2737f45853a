/**
 * Record ids (spec §1.5, §2, §2.1): ids are plain numbers per record type, entry ids are global and
 * increase across conversations, an id once committed is never handed out again (also after a
 * reopen), and the root conversation is id 1 in every store.
 */
import { expect, test } from "vitest";
import { type EntryRecord, Harness, ROOT_CONVERSATION_ID, type Tx } from "../../../worker/index.ts";
import { memoryStore } from "../../../worker/testing.ts";
import { ping } from "./fixtures.ts";

const note = (tx: Tx, conversationId: number, text: string): EntryRecord =>
  tx.appendEntry(conversationId, { kind: "app.note", data: { text } });

test("entry ids are global: they increase across conversations in commit order", async () => {
  const h = await Harness.open(await memoryStore());
  const other = await h.transaction((tx) => tx.createConversation({ kind: "ownerless" }));
  const ids: number[] = [];
  for (const c of [ROOT_CONVERSATION_ID, other.id, ROOT_CONVERSATION_ID, other.id]) {
    ids.push((await h.transaction((tx) => note(tx, c, `to ${c}`))).id);
  }
  const inOneCommit = await h.transaction((tx) => [note(tx, other.id, "a").id, note(tx, 1, "b").id]);
  ids.push(...inOneCommit);
  expect(ids).toEqual([...ids].sort((a, b) => a - b));
  expect(new Set(ids).size).toBe(ids.length);
  await h.close();
});

test("an id once committed is never handed out again: after a reopen, new records get ids above every committed one", async () => {
  const store = await memoryStore();
  const h = await Harness.open(store, { tasks: [ping] });
  const first = await h.transaction((tx) => {
    const conversation = tx.createConversation({ kind: "ownerless" });
    return {
      conversation: conversation.id,
      entry: note(tx, conversation.id, "one").id,
      task: tx.createTask(ping, null, {
        ownership: { kind: "conversation" },
        conversationId: conversation.id,
      }),
      submission: tx.createSubmission({ conversationId: conversation.id, type: "write", status: "queued" })
        .id,
    };
  });
  await h.waitForTask(first.task);
  await h.close();

  const again = await Harness.open(await memoryStore(store.image()), { tasks: [ping] });
  const second = await again.transaction((tx) => {
    const conversation = tx.createConversation({ kind: "ownerless" });
    return {
      conversation: conversation.id,
      entry: note(tx, conversation.id, "two").id,
      task: tx.createTask(ping, null, {
        ownership: { kind: "conversation" },
        conversationId: conversation.id,
      }),
      submission: tx.createSubmission({ conversationId: conversation.id, type: "write", status: "queued" })
        .id,
    };
  });
  for (const key of ["conversation", "entry", "task", "submission"] as const)
    expect(second[key], key).toBeGreaterThan(first[key]);
  // Sweep 42b, 67: a TaskId is the plain number itself, also as read back from the store.
  expect(typeof first.task).toBe("number");
  const loaded = await again.getTask(first.task);
  expect([typeof loaded?.id, loaded?.id]).toEqual(["number", first.task]);
  expect((await again.tasks()).map((t) => typeof t.id)).toEqual(["number", "number"]);
  await again.close();
});

test("the root conversation is id 1, created ownerless by the first open; a reopen finds the same root", async () => {
  const store = await memoryStore();
  const h = await Harness.open(store);
  const root = await h.transaction((tx) => tx.conversation(ROOT_CONVERSATION_ID));
  expect(ROOT_CONVERSATION_ID).toBe(1);
  expect(root).toMatchObject({ id: 1 });
  expect(root?.owner).toBeUndefined();
  await h.transaction((tx) => note(tx, ROOT_CONVERSATION_ID, "kept"));
  await h.close();

  const again = await Harness.open(await memoryStore(store.image()));
  const after = await again.transaction((tx) => ({
    root: tx.conversation(ROOT_CONVERSATION_ID),
    next: tx.createConversation({ kind: "ownerless" }).id,
  }));
  expect(after.root).toEqual(root);
  expect(after.next).toBe(2);
  await again.close();
});

test("entry ids stay global when commits are requested together: one group, distinct ids increasing in request order", async () => {
  const h = await Harness.open(await memoryStore());
  const other = await h.transaction((tx) => tx.createConversation({ kind: "ownerless" }));
  const targets = [ROOT_CONVERSATION_ID, other.id, other.id, ROOT_CONVERSATION_ID, other.id];
  // Requested in one turn: the session groups them into one transaction, each callback over the last.
  const ids = await Promise.all(
    targets.map((c, i) => h.transaction((tx) => [note(tx, c, `${i}a`).id, note(tx, c, `${i}b`).id])),
  );
  const flat = ids.flat();
  expect(new Set(flat).size).toBe(flat.length);
  expect(flat).toEqual([...flat].sort((a, b) => a - b));
  const stored = [...(await h.entries(ROOT_CONVERSATION_ID)), ...(await h.entries(other.id))].map(
    (e) => e.id,
  );
  expect([...stored].sort((a, b) => a - b)).toEqual(flat);
  await h.close();
});
