/**
 * Ordinary documents are not scanned at open (spec §3.3; issue 12 item 10, issue 16 item 3): opening a
 * store reads the rows live work needs (live tasks, unsettled submissions, the documents of their
 * conversations) and nothing of terminal tasks or idle conversations; those load on first access and
 * every read API returns what it returned before the reopen.
 */
import { expect, test } from "vitest";
import { internals } from "../../../worker/core/internals.ts";
import { defineTask, type Json, type MemoryStore, type TaskRecord } from "../../../worker/index.ts";
import { deferred, memoryStore, recordJobs, type StoreJob, until } from "../../../worker/testing.ts";
import { echo, open } from "../agent/fixtures.ts";

const IDLE = 12;
const NOTES = "app.notes";

/** A task that holds its first phase until the test lets it go (the live work of the reopened store). */
function holdTask(release: Promise<void>) {
  return defineTask<null, { phase: "hold" }, null>({
    name: "test.hold",
    version: 1,
    initial: () => ({ phase: "hold" }),
    phases: {
      hold: async (_t, runtime, signal) => {
        // Closing the harness stops the phase through its signal.
        await new Promise<void>((resolve, reject) => {
          void release.then(resolve);
          signal.addEventListener("abort", () => reject(signal.reason), { once: true });
        });
        await runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: null } }));
      },
    },
    abort: async (_t, runtime) =>
      void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
  });
}

/** Everything the read APIs say about a conversation. */
async function readAll(setup: Awaited<ReturnType<typeof open>>, c: number) {
  const { h } = setup;
  const conversation = await h.requireLoadedConversation(c);
  const docs: Record<string, Json | undefined> = {};
  for (const name of ["pi.agent", "pi.live", "pi.inbox", "pi.usage", "pi.provider", NOTES])
    docs[name] = await h.doc(c, name);
  return {
    docs,
    agent: await conversation.agentState(),
    entries: await conversation.entries(),
    view: await conversation.viewState(),
  };
}

/** A store with IDLE idle conversations (answered, so with terminal tasks, usage and a patched doc) and one live task in the root. */
async function seed(
  liveIn = 1,
): Promise<{ image: ReturnType<MemoryStore["image"]>; liveTask: number; ended: readonly TaskRecord[] }> {
  const release = deferred();
  const setup = await open(echo, { tasks: [holdTask(release.promise)] });
  const { h } = setup;
  for (let i = 0; i < IDLE; i++) {
    const c = await h.createConversation({ ownership: { kind: "ownerless" } });
    const sub = await c.submit({ type: "input", content: `question ${i}`, requestId: `q${i}` });
    await sub.wait();
    await h.transaction((tx) => tx.writeDoc(c.id, NOTES, { items: [`note ${i}`] }));
    await h.transaction((tx) => tx.patchDoc(c.id, NOTES, [{ path: ["items", 1], set: "more" }]));
  }
  const liveTask = await h.transaction((tx) =>
    tx.createTask(holdTask(release.promise), null, {
      ownership: { kind: "conversation" },
      conversationId: liveIn,
    }),
  );
  // The terminal records as the process that wrote them holds them (never read back from a row).
  const ended = await h.tasks({ status: "terminal" });
  await h.close();
  return { image: setup.store.image(), liveTask, ended };
}

test("opening a store reads no row of terminal tasks or idle conversations' documents", async () => {
  const { image, liveTask } = await seed();
  const store = await memoryStore(image);
  const recorder: { into: StoreJob[] } = { into: [] };
  recordJobs(store, recorder);
  const release = deferred();
  const setup = await open(echo, { store, tasks: [holdTask(release.promise)] });
  const statements = recorder.into.flatMap((job) => job.statements);
  expect(statements.length).toBeGreaterThan(0);
  const idle = new Set(Array.from({ length: IDLE }, (_, i) => i + 2));
  const offending = statements.filter((s) => {
    const sql = s.sql.replace(/\s+/g, " ");
    if (/\b(documents|doc_patches)\b/.test(sql)) {
      // Only per-conversation reads, and only of conversations with live work.
      const c = Number(s.params?.[0]);
      return !/conversation_id = \?/.test(sql) || idle.has(c);
    }
    if (/FROM entries/.test(sql) && /head IS NOT NULL/.test(sql)) return idle.has(Number(s.params?.[0]));
    if (/FROM tasks/.test(sql)) return !/status <> 'terminal'|max\(id\)/.test(sql);
    // Task documents: only the live ones (a terminal task's are retired), never a scan of every
    // task's (draw 39d: the records of every task document read at open passed).
    if (/FROM doc_records/.test(sql) && /scope = 'task'/.test(sql)) return !/retired_at IS NULL/.test(sql);
    return false;
  });
  expect(offending.map((s) => s.sql.replace(/\s+/g, " "))).toEqual([]);
  // The recovered live task runs (scheduling starts once the settings are loaded, after open's reads).
  await until(() => internals(setup.h).session.records.tasks.get(liveTask)?.state.status === "running", {
    what: "the recovered task running",
  });
  release.resolve();
  await setup.h.waitForTask(liveTask);
});

test("opening a store whose only live work is outside the root reads none of the idle root's documents (break 28A)", async () => {
  // Break 28A: with the live task in the root, an open that also read the root's documents passed.
  const { image, liveTask } = await seed(2);
  const store = await memoryStore(image);
  const recorder: { into: StoreJob[] } = { into: [] };
  recordJobs(store, recorder);
  const release = deferred();
  const setup = await open(echo, { store, tasks: [holdTask(release.promise)] });
  const idle = new Set([1, ...Array.from({ length: IDLE - 1 }, (_, i) => i + 3)]);
  const offending = recorder.into
    .flatMap((job) => job.statements)
    .map((s) => ({ sql: s.sql.replace(/\s+/g, " "), c: Number(s.params?.[0]) }))
    .filter(
      ({ sql, c }) =>
        /\b(documents|doc_patches)\b/.test(sql) && (!/conversation_id = \?/.test(sql) || idle.has(c)),
    );
  expect(offending.map((s) => s.sql)).toEqual([]);
  await until(() => internals(setup.h).session.records.tasks.get(liveTask)?.state.status === "running", {
    what: "the recovered task running",
  });
  expect(internals(setup.h).session.records.docsLoaded.has(1)).toBe(false);
  release.resolve();
  await setup.h.waitForTask(liveTask);
});

test("opening a store whose only live work is in a fork reads none of its idle parent's documents (draw 32b)", async () => {
  // Draw 32b: an open that read the documents of a live conversation's fork parent passed the two
  // tests above, whose live conversations have no parent.
  const release = deferred();
  const setup = await open(echo, { tasks: [holdTask(release.promise)] });
  const parent = await setup.h.createConversation({ ownership: { kind: "ownerless" } });
  await (await parent.submit({ type: "input", content: "question", requestId: "q" })).wait();
  await setup.h.transaction((tx) => tx.writeDoc(parent.id, NOTES, { items: ["note"] }));
  const at = (await parent.entries()).at(-1)!.id;
  const child = await parent.fork(at, { ownership: { kind: "ownerless" } });
  const liveTask = await setup.h.transaction((tx) =>
    tx.createTask(holdTask(release.promise), null, {
      ownership: { kind: "conversation" },
      conversationId: child.id,
    }),
  );
  await setup.h.close();
  const store = await memoryStore(setup.store.image());
  const recorder: { into: StoreJob[] } = { into: [] };
  recordJobs(store, recorder);
  const reopened = await open(echo, { store, tasks: [holdTask(release.promise)] });
  const offending = recorder.into
    .flatMap((job) => job.statements)
    .map((s) => ({ sql: s.sql.replace(/\s+/g, " "), c: Number(s.params?.[0]) }))
    .filter(
      ({ sql, c }) =>
        /\b(documents|doc_patches)\b/.test(sql) && (!/conversation_id = \?/.test(sql) || c === parent.id),
    );
  expect(offending.map((s) => s.sql)).toEqual([]);
  const records = internals(reopened.h).session.records;
  expect(records.docsLoaded.has(child.id)).toBe(true);
  expect(records.docsLoaded.has(parent.id)).toBe(false);
  release.resolve();
  await reopened.h.waitForTask(liveTask);
});

test("an idle conversation's documents load on first access: every read API returns what it did before", async () => {
  const release = deferred();
  const first = await open(echo, { tasks: [holdTask(release.promise)] });
  for (let i = 0; i < 3; i++) {
    const c = await first.h.createConversation({ ownership: { kind: "ownerless" } });
    await (await c.submit({ type: "input", content: `question ${i}`, requestId: `q${i}` })).wait();
    await first.h.transaction((tx) => tx.writeDoc(c.id, NOTES, { items: [`note ${i}`] }));
    await first.h.transaction((tx) => tx.patchDoc(c.id, NOTES, [{ path: ["items", 1], set: "more" }]));
  }
  const before = [];
  for (const c of [2, 3, 4]) before.push(await readAll(first, c));
  const usage = await first.h.usage();
  const graph = first.h.taskGraph();
  const stored = await first.h.tasks();
  await first.h.close();

  const second = await open(echo, {
    store: await memoryStore(first.store.image()),
    tasks: [holdTask(release.promise)],
  });
  expect(internals(second.h).session.records.docsLoaded.has(2)).toBe(false);
  // A total across conversations, before any of them loaded.
  expect(await second.h.usage()).toEqual(usage);
  expect(second.h.taskGraph()).toEqual(graph);
  expect(await second.h.tasks()).toEqual(stored);
  const after = [];
  for (const c of [2, 3, 4]) after.push(await readAll(second, c));
  expect(after).toEqual(before);
  release.resolve();
});

test("a commit reading an idle conversation's documents sees them, and its work there goes on", async () => {
  const first = await open(echo);
  const c = await first.h.createConversation({ ownership: { kind: "ownerless" } });
  const idle = await first.h.createConversation({ ownership: { kind: "ownerless" } });
  for (const conversation of [c, idle])
    await (await conversation.submit({ type: "input", content: "one", requestId: "one" })).wait();
  await first.h.transaction((tx) => tx.writeDoc(c.id, NOTES, { items: ["kept"] }));
  await first.h.close();

  const second = await open(echo, { store: await memoryStore(first.store.image()) });
  expect(internals(second.h).session.records.docsLoaded.has(c.id)).toBe(false);
  // Read inside a transaction: the session loads the documents and runs the callback again.
  const seen = await second.h.transaction((tx) => tx.readDoc(c.id, NOTES));
  expect(seen).toEqual({ items: ["kept"] });
  // A new submission in another idle conversation: its inbox is read in the submitting commit, and
  // the generation that answers it reads the conversation's documents.
  expect(internals(second.h).session.records.docsLoaded.has(idle.id)).toBe(false);
  const again = await second.h.requireLoadedConversation(idle.id);
  await (await again.submit({ type: "input", content: "two", requestId: "two" })).wait();
  const texts = (await again.entries())
    .filter((e) => e.kind === "pi.assistant")
    .map((e) => JSON.stringify(e.model));
  expect(texts.some((t) => t.includes("echo: two"))).toBe(true);
});

test("after an open that read none of them, terminal tasks and idle conversations answer inspect, waits and a fork", async () => {
  const { image, liveTask, ended } = await seed();
  const running = (h: Awaited<ReturnType<typeof open>>["h"]) =>
    until(() => internals(h).session.records.tasks.get(liveTask)?.state.status === "running", {
      what: "the recovered task running",
    });
  const first = await open(echo, { store: await memoryStore(image), tasks: [holdTask(deferred().promise)] });
  await running(first.h);
  const inspection = first.h.inspect();
  const terminal = (await first.h.tasks({ status: "terminal" })).at(-1)!;
  const idle = await first.h.requireLoadedConversation(2);
  const idleEntries = await idle.entries();
  const idleAgent = await idle.agentState();
  await first.h.close();

  const release = deferred();
  const second = await open(echo, { store: await memoryStore(image), tasks: [holdTask(release.promise)] });
  const records = internals(second.h).session.records;
  // Nothing of them is in memory after the open.
  expect(records.tasks.has(terminal.id)).toBe(false);
  expect(records.docsLoaded.has(2)).toBe(false);
  await running(second.h);
  expect(second.h.inspect()).toEqual(inspection);
  // On access: the terminal task's record and outcome, as stored.
  expect(await second.h.getTask(terminal.id)).toEqual(terminal);
  expect(await second.h.waitForTask(terminal.id)).toEqual(terminal);
  // As the process that wrote it held it: every field read back from its row (times, owner, flags).
  expect(terminal).toEqual(ended.find((t) => t.id === terminal.id));
  expect(terminal.endedAt).toEqual(expect.any(Number));
  // A fork of the idle conversation at its last entry sees its history and its agent.
  const at = idleEntries.at(-1)!.id;
  const child = await (await second.h.requireLoadedConversation(2)).fork(at, {
    ownership: { kind: "ownerless" },
  });
  expect((await child.entries()).filter((e) => e.id <= at)).toEqual(idleEntries);
  expect(await child.agentState()).toEqual(idleAgent);
  release.resolve();
  await second.h.waitForTask(liveTask);
});
