/**
 * The growth bench's bulk seed (worker/core/bulk-seed.ts) on the memory store: after it, a reopened
 * harness sees every copied conversation with its documents and title, every entry in its
 * conversation (questions and answers, the oldest saying the rare word), and every terminal task;
 * the list and a search read them like rows the engine wrote.
 */
import { expect, test } from "vitest";
import { DOC, ENTRY } from "../../../worker/agent/records.ts";
import { ConversationList, TITLE_DOC } from "../../../worker/app/conversation-list.ts";
import { searchConversationPage } from "../../../worker/app/search.ts";
import { bulkSeed, RARE_WORD, SEED_MARKER } from "../../../worker/core/bulk-seed.ts";
import { noopTask } from "../../../worker/debug/ticker.ts";
import { echo, open, reopen } from "../agent/fixtures.ts";

test("copied conversations, entries and terminal tasks read like the engine's own after a reopen", async () => {
  const { h, store, faux } = await open(echo);
  h.registry.register(noopTask);
  const template = await h.createConversation({ ownership: { kind: "ownerless" } });
  const [, question, answer] = await h.transaction((tx) => [
    void tx.writeDoc(template.id, TITLE_DOC, { title: "Template" }),
    tx.appendEntry(template.id, {
      kind: ENTRY.user,
      model: [{ role: "user", content: SEED_MARKER, timestamp: 0 }],
    }).id,
    tx.appendEntry(template.id, {
      kind: ENTRY.assistant,
      model: [{ role: "assistant", content: [{ type: "text", text: SEED_MARKER }], timestamp: 0 }],
    }).id,
  ]);
  const task = await h.createTask(noopTask, null, {
    ownership: { kind: "conversation" },
    conversationId: template.id,
  });
  await h.waitForTask(task);
  const docs = new Map<string, unknown>();
  for (const name of Object.values(DOC)) docs.set(name, await h.doc(template.id, name));
  const { firstConversation } = await bulkSeed(store, {
    templateConversation: template.id,
    titleDoc: TITLE_DOC,
    templateQuestion: question!,
    templateAnswer: answer!,
    templateTask: task,
    conversations: 7,
    entries: 20,
    tasks: 9,
    now: 1,
  });
  await h.close();

  const h2 = await reopen(store, { models: faux.models, defaultModel: faux.ref });
  h2.registry.register(noopTask);
  const seeded = Array.from({ length: 7 }, (_, i) => firstConversation + i);
  // Their records, read when named (the reopen loads live work's only).
  for (const id of seeded) expect((await h2.loadConversation(id))?.id).toBe(id);
  for (const [name, value] of docs) {
    expect(value).toBeDefined();
    expect(await h2.doc(seeded[4]!, name)).toEqual(value);
  }
  const list = await ConversationList.open(h2);
  expect((await list.get(seeded[2]!))?.title).toBe("Seeded conversation 3");
  list.close();
  // Entries: 20 spread in order, questions and answers in turn, newer conversations holding newer ones.
  const all = (
    await Promise.all(seeded.map(async (id) => (await h2.requireLoadedConversation(id)).entries()))
  ).flat();
  expect(all.map((e) => e.kind)).toEqual(
    Array.from({ length: 20 }, (_, i) => (i % 2 ? ENTRY.assistant : ENTRY.user)),
  );
  expect(JSON.stringify(all[0]!.model)).toContain(`${RARE_WORD} Seeded question 1`);
  expect(JSON.stringify(all[19]!.model)).toContain("Seeded answer 20");
  const rare = await searchConversationPage(h2.store, RARE_WORD, { limit: 5 });
  expect(rare.ids).toEqual([seeded[0]]);
  // Terminal tasks: the template's and nine copies, spread over the new conversations.
  const tasks = await h2.tasks({ kind: noopTask.name });
  expect(tasks).toHaveLength(10);
  expect(tasks.every((t) => t.state.status === "terminal")).toBe(true);
  expect(new Set(tasks.slice(1).map((t) => t.conversationId))).toEqual(new Set(seeded));
});
