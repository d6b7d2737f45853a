/**
 * What an open and the list's first page read must not grow with history (issue 30, item 4: what
 * serves live work is O(live work), not O(store)). Counted, never timed: a recording store counts
 * the rows every job returns. Two stores hold the same live work (a running ticker) and a dozen
 * titled conversations; the second also holds 1,000 idle conversations with their documents, 2,000
 * entries and 10,000 terminal tasks (copied by the growth bench's bulk seed). The app's open reads
 * the same rows from both, not one `conversations` row more (the agent loads conversation records on
 * demand: docs/ARCHITECTURE.md, "Flat as the store grows"); the list's open reads nothing, and its first page (its ids and the total by the top-level index, then
 * their documents) reads the same rows from both, as does a
 * conversation's usage roll-up (which the tab asks for when a conversation opens).
 */
import { expect, test } from "vitest";
import type { AgentHarness } from "../../../worker/agent/harness.ts";
import { ENTRY } from "../../../worker/agent/records.ts";
import { openAppHarness } from "../../../worker/app/app-agent.ts";
import { ConversationList, TITLE_DOC } from "../../../worker/app/conversation-list.ts";
import { bulkSeed, SEED_MARKER } from "../../../worker/core/bulk-seed.ts";
import { noopTask, tickerTask } from "../../../worker/debug/ticker.ts";
import { ROOT_CONVERSATION_ID } from "../../../worker/index.ts";
import { tickEntry } from "../../../worker/protocol/index.ts";
import type { MemoryImage } from "../../../worker/store/open.ts";
import { memoryStore, recordJobs, type StoreJob, until } from "../../../worker/testing.ts";
import { appOpenOptions } from "./open-fixtures.ts";

const IDLE_CONVERSATIONS = 1_000;
const TERMINAL_TASKS = 10_000;

const options = appOpenOptions;

/** The two images: live work and a dozen titled conversations; the same plus the idle history. */
async function images(): Promise<{ small: MemoryImage; big: MemoryImage }> {
  const store = await memoryStore();
  const h = await openAppHarness(store, options());
  const ticks: number[] = [];
  h.subscribe((change) => {
    for (const e of change.entries) if (tickEntry.is(e)) ticks.push(e.id);
  });
  // A ticker that outlives the test: the live work both stores resume.
  await h.createTask(
    tickerTask,
    { phases: 1_000_000, delayMs: 5 },
    { ownership: { kind: "conversation" }, conversationId: ROOT_CONVERSATION_ID },
  );
  const template = await h.transaction((tx) => {
    const made = Array.from({ length: 12 }, (_, i) => {
      const c = tx.createConversation({ kind: "ownerless" });
      tx.writeDoc(c.id, TITLE_DOC, { title: `Topic ${i + 1}` });
      return c.id;
    });
    const first = made[0]!;
    const question = tx.appendEntry(first, {
      kind: ENTRY.user,
      model: [{ role: "user", content: SEED_MARKER, timestamp: 0 }],
    }).id;
    const answer = tx.appendEntry(first, {
      kind: ENTRY.assistant,
      model: [{ role: "assistant", content: [{ type: "text", text: SEED_MARKER }], timestamp: 0 }],
    }).id;
    return { conversation: first, question, answer };
  });
  h.registry.register(noopTask);
  const done = await h.createTask(noopTask, null, {
    ownership: { kind: "conversation" },
    conversationId: template.conversation,
  });
  await h.waitForTask(done);
  await until(() => ticks.length >= 2, { what: "the ticker ticking" });
  // The world stops here: both stores are this image, the second with the history added.
  const small = (await memoryStore(store.image())).image();
  const grown = await memoryStore(small);
  await bulkSeed(grown, {
    templateConversation: template.conversation,
    titleDoc: TITLE_DOC,
    templateQuestion: template.question,
    templateAnswer: template.answer,
    templateTask: done,
    conversations: IDLE_CONVERSATIONS,
    entries: 2 * IDLE_CONVERSATIONS,
    tasks: TERMINAL_TASKS,
    now: 1,
  });
  await h.close();
  return { small, big: grown.image() };
}

const rows = (jobs: readonly StoreJob[]) => jobs.reduce((n, j) => n + j.rowsRead, 0);

/** Open the app over `image`, then the list, then its first page of 10: the rows each step read. */
async function measure(image: MemoryImage) {
  const store = await memoryStore(image);
  const counts = {
    total: Number((await store.read((sql) => sql.get("SELECT count(*) AS n FROM tasks")))?.["n"]),
  };
  const recorder: { into: StoreJob[] } = { into: [] };
  recordJobs(store, recorder);
  const h: AgentHarness = await openAppHarness(store, options());
  const open = recorder.into.splice(0);
  const list = await ConversationList.open(h);
  const listOpen = recorder.into.splice(0).filter((j) => j.kind === "read");
  const page = await list.page(10);
  // Reads only: the resumed ticker's commits go on meanwhile.
  const firstPage = recorder.into.splice(0).filter((j) => j.kind === "read");
  // What the tab asks when a conversation opens: its usage roll-up.
  await h.conversationUsage(ROOT_CONVERSATION_ID);
  const usage = recorder.into.splice(0).filter((j) => j.kind === "read");
  list.close();
  await h.close();
  return {
    tasks: counts.total,
    page,
    // The open's reads, and its commits' (a ticker's tick may land before the open returns).
    openRows: rows(open.filter((j) => j.kind === "read")),
    listOpenJobs: listOpen.length,
    pageRows: rows(firstPage),
    pageJobs: firstPage.length,
    usageRows: rows(usage),
  };
}

test("the app's open and the list's first page read what live work and the page need, not the history", async () => {
  const { small, big } = await images();
  const before = await measure(small);
  const after = await measure(big);
  // The history is there.
  expect(after.tasks - before.tasks).toBe(TERMINAL_TASKS);
  expect(after.page.total - before.page.total).toBe(IDLE_CONVERSATIONS);
  // The open: not one row more (no conversation, task, document, entry or submission of the
  // history).
  expect(after.openRows - before.openRows).toBe(0);
  // The list's open reads nothing; its first page reads the same rows whatever the store holds.
  expect(before.listOpenJobs).toBe(0);
  expect(after.listOpenJobs).toBe(0);
  // Two reads: its ids and the total by the top-level index, then their two documents.
  expect(after.pageJobs).toBe(2);
  expect(after.pageRows).toBe(before.pageRows);
  expect(after.pageRows).toBeLessThanOrEqual(10 + 1 + 2 * 10);
  expect(after.page.items).toHaveLength(10);
  expect(after.page.items[0]!.title).toBe(`Seeded conversation ${IDLE_CONVERSATIONS}`);
  // A conversation's usage roll-up reads its own and its subagents' documents, not every one.
  expect(after.usageRows).toBe(before.usageRows);
});
