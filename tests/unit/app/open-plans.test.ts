/**
 * What an open costs must not grow with history (issue 16 item 3): every statement a reopen runs, and
 * those of the tab's first calls (the conversation list's titles and run states, the usage total),
 * is checked with EXPLAIN QUERY PLAN against a store holding finished tasks, settled submissions and
 * idle conversations: none walks a table that grows with history, except through a partial index
 * holding only live rows (tasks_live, submissions_unsettled). `conversations` is read whole by design.
 */
import { expect, test } from "vitest";
import { ConversationList, TITLE_DOC } from "../../../worker/app/conversation-list.ts";
import { memoryStore, recordJobs, type StoreJob } from "../../../worker/testing.ts";
import { echo, open } from "../agent/fixtures.ts";

const HISTORY_TABLES = /^SCAN (tasks|entries|documents|doc_patches|doc_history|submissions)\b/;
const LIVE_ONLY = /USING (COVERING )?INDEX (tasks_live|submissions_unsettled)\b/;

test("a reopen and the tab's first reads walk no table that grows with history", async () => {
  const first = await open(echo);
  for (let i = 0; i < 3; i++) {
    const c = await first.h.createConversation({ ownership: { kind: "ownerless" } });
    await (await c.submit({ type: "input", content: `question ${i}`, requestId: `q${i}` })).wait();
    await first.h.transaction((tx) => tx.writeDoc(c.id, TITLE_DOC, { title: `title ${i}` }));
  }
  await first.h.close();

  const store = await memoryStore(first.store.image());
  const recorder: { into: StoreJob[] } = { into: [] };
  recordJobs(store, recorder);
  const second = await open(echo, { store });
  const list = await ConversationList.open(second.h);
  expect((await list.list()).map((c) => c.title)).toEqual(["Main", "title 0", "title 1", "title 2"]);
  await second.h.usage();

  const statements = new Map<string, readonly unknown[] | undefined>();
  for (const job of recorder.into)
    for (const s of job.statements) if (/^\s*SELECT/i.test(s.sql)) statements.set(s.sql, s.params);
  expect(statements.size).toBeGreaterThan(5);
  const walks: string[] = [];
  for (const [sql, params] of statements) {
    const plan = await store.read((q) => q.all(`EXPLAIN QUERY PLAN ${sql}`, params as never));
    for (const step of plan) {
      const detail = String(step["detail"]);
      if (HISTORY_TABLES.test(detail) && !LIVE_ONLY.test(detail))
        walks.push(`${sql.replace(/\s+/g, " ")} -> ${detail}`);
    }
  }
  expect(walks).toEqual([]);
  list.close();
  await second.h.close();
});
