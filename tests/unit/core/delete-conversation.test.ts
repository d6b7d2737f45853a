/**
 * Deleting a conversation (worker/core/delete.ts): everything of it goes in one commit, what depends
 * on it refuses the deletion with a typed reason, and no id it used is handed out again, also after
 * the store is reopened (the counters' high-water marks are kept in meta).
 */
import { describe, expect, test } from "vitest";
import { internals } from "../../../worker/core/internals.ts";
import {
  type ConversationId,
  ConversationNotDeletable,
  type DeleteRefusal,
  DOC,
  defineTask,
  Harness,
  type Json,
  type MemoryStore,
  ROOT_CONVERSATION_ID,
  type SubmissionId,
  UnknownConversation,
} from "../../../worker/index.ts";
import { deferred, fauxError, memoryStore, until } from "../../../worker/testing.ts";
import { echo, inboxOf, open, reopen } from "../agent/fixtures.ts";
import { abortedByHandler, complete, done, outcome, parked, running } from "./fixtures.ts";

const ownerless = { ownership: { kind: "ownerless" as const } };

/**
 * Creates a conversation it owns (one note in it), then completes in a later commit (an owner must be
 * live to own) with that conversation's id.
 */
const spawner = defineTask<Json, { phase: "go" } | { phase: "finish"; conversation: ConversationId }, Json>({
  name: "spawner",
  version: 1,
  initial: () => ({ phase: "go" }),
  phases: {
    go: async (task, runtime) => {
      await runtime.commit((tx) => {
        const c = tx.createConversation({ kind: "task", taskId: task.id });
        tx.appendEntry(c.id, { kind: "note", data: "owned" });
        return { status: "running", checkpoint: { phase: "finish", conversation: c.id } };
      });
    },
    finish: async (task, runtime) => {
      await runtime.commit(() => complete(task.state.checkpoint.conversation));
    },
  },
  abort: abortedByHandler,
});

/** Every row of the store that names the conversation, table by table (empty tables left out). */
async function rowsOf(store: MemoryStore, id: ConversationId): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  await store.read(async (sql) => {
    for (const table of ["entries", "tasks", "submissions", "documents", "doc_patches", "doc_history"]) {
      const n = Number(
        (await sql.get(`SELECT count(*) AS n FROM ${table} WHERE conversation_id = ?`, [id]))?.["n"],
      );
      if (n > 0) out[table] = n;
    }
    const n = Number((await sql.get("SELECT count(*) AS n FROM conversations WHERE id = ?", [id]))?.["n"]);
    if (n > 0) out["conversations"] = n;
  });
  return out;
}

/** The refusal a deletion rejects with: its reason and blockers (fails the test on anything else). */
async function refusal(
  h: Harness,
  id: ConversationId,
): Promise<{ reason: DeleteRefusal; blockers: number[] }> {
  const error = await h.deleteConversation(id).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ConversationNotDeletable);
  const { reason, blockers, name } = error as ConversationNotDeletable;
  expect(name).toBe("ConversationNotDeletable");
  return { reason, blockers: [...blockers] };
}

describe("deleting a conversation", () => {
  test("removes its entries, documents, tasks and submissions in one commit and ends its watches", async () => {
    const { h, store } = await open(echo);
    const c = await h.createConversation(ownerless);
    const sub = await c.submit({ type: "input", content: "hello" });
    expect((await sub.wait()).status).toBe("done");
    const taskIds = (await h.tasks()).filter((t) => t.conversationId === c.id).map((t) => t.id);
    expect(taskIds.length).toBeGreaterThan(0);
    expect(Object.keys(await rowsOf(store, c.id)).sort()).toEqual(
      expect.arrayContaining(["conversations", "documents", "entries", "submissions", "tasks"]),
    );
    const watch = await h.mount(c.id).watch();
    let commits = 0;
    const stop = h.subscribe(() => commits++);

    expect(await h.deleteConversation(c.id)).toEqual([c.id]);
    stop();

    expect(commits).toBe(1);
    expect(await rowsOf(store, c.id)).toEqual({});
    expect(await watch.closed).toBe("deleted");
    expect(h.conversationRecord(c.id)).toBeUndefined();
    expect(h.conversation(c.id)).toBeUndefined();
    expect(await h.submissionRecord(sub.id)).toBeUndefined();
    for (const id of taskIds) expect(await h.getTask(id)).toBeUndefined();
    expect((await h.docsNamed(DOC.live)).has(c.id)).toBe(false);
    expect(await h.entries(c.id)).toEqual([]);
    // The rest of the store is untouched: the root conversation still answers.
    const root = await h.root();
    expect((await (await root.submit({ type: "input", content: "still here" })).wait()).status).toBe("done");
  });

  test("never hands out an id it used again, also after the store is reopened", async () => {
    const { h, store, faux } = await open(echo);
    const older = await h.createConversation(ownerless);
    const newest = await h.createConversation(ownerless);
    const sub = await newest.submit({ type: "input", content: "hi" });
    await sub.wait();
    const used = {
      conversation: newest.id,
      entry: Math.max(...(await newest.entries()).map((e) => e.id)),
      task: Math.max(...(await h.tasks()).filter((t) => t.conversationId === newest.id).map((t) => t.id)),
      submission: sub.id,
    };
    await h.deleteConversation(newest.id);

    const fresh = async (harness: typeof h) => {
      const c = await harness.createConversation(ownerless);
      const s = await c.submit({ type: "input", content: "again" });
      await s.wait();
      return {
        conversation: c.id,
        entry: Math.min(...(await c.entries()).map((e) => e.id)),
        task: Math.min(...(await harness.tasks()).filter((t) => t.conversationId === c.id).map((t) => t.id)),
        submission: s.id as SubmissionId,
      };
    };
    const pastUsed = (ids: typeof used) => {
      expect(ids.conversation).toBeGreaterThan(used.conversation);
      expect(ids.entry).toBeGreaterThan(used.entry);
      expect(ids.task).toBeGreaterThan(used.task);
      expect(ids.submission).toBeGreaterThan(used.submission);
    };
    // Reopened right after the deletion: the deleted rows were the newest of every table.
    const reopened = await reopen(store, { models: faux.models, defaultModel: faux.ref });
    pastUsed(await fresh(reopened));
    pastUsed(await fresh(h));
    expect(h.conversationRecord(older.id)).toBeDefined();
  });

  test("after a deletion, records made later count too: a reopen hands out ids above them, not from the deletion's marks (draw 37b)", async () => {
    // Draw 37bA: the marks a deletion keeps taken over the newest rows (not the larger of the two)
    // passed the test above, which reopens right after the deletion, when the marks are the larger.
    const { h, store, faux } = await open(echo);
    const doomed = await h.createConversation(ownerless);
    await (await doomed.submit({ type: "input", content: "hi" })).wait();
    await h.deleteConversation(doomed.id);
    const later = await h.createConversation(ownerless);
    const sub = await later.submit({ type: "input", content: "after the deletion" });
    await sub.wait();
    const used = {
      conversation: later.id as number,
      entry: Math.max(...(await later.entries()).map((e) => e.id)),
      task: Math.max(...(await h.tasks()).filter((t) => t.conversationId === later.id).map((t) => t.id)),
      submission: sub.id as number,
    };
    const reopened = await reopen(store, { models: faux.models, defaultModel: faux.ref });
    const c = await reopened.createConversation(ownerless);
    const s = await c.submit({ type: "input", content: "again" });
    await s.wait();
    expect(c.id).toBeGreaterThan(used.conversation);
    expect(Math.min(...(await c.entries()).map((e) => e.id))).toBeGreaterThan(used.entry);
    expect(
      Math.min(...(await reopened.tasks()).filter((t) => t.conversationId === c.id).map((t) => t.id)),
    ).toBeGreaterThan(used.task);
    expect(s.id).toBeGreaterThan(used.submission);
    expect((await reopened.loadedConversation(later.id))?.id).toBe(later.id);
  });
});

describe("a deletion is refused, with its reason, and changes nothing", () => {
  test("the root conversation, an unknown one, and one a task owns (it goes with its owner's)", async () => {
    const store = await memoryStore();
    const h = await Harness.open(store);
    const parent = (await h.transaction((tx) => tx.createConversation({ kind: "ownerless" }))).id;
    const taskId = await h.createTask(spawner, null, {
      ownership: { kind: "conversation" },
      conversationId: parent,
    });
    const finished = await done(h, taskId);
    expect(outcome(finished)?.status).toBe("completed");
    const owned = (outcome(finished) as { result: ConversationId }).result;

    expect(await refusal(h, ROOT_CONVERSATION_ID)).toEqual({ reason: "root", blockers: [] });
    await expect(h.deleteConversation(9999)).rejects.toBeInstanceOf(UnknownConversation);
    expect(await refusal(h, owned)).toEqual({ reason: "owned", blockers: [parent] });
    expect(await rowsOf(store, owned)).toEqual({ conversations: 1, entries: 1 });

    // Deleting the owner's conversation takes the owned one with it.
    expect(await h.deleteConversation(parent)).toEqual([parent, owned]);
    expect(await rowsOf(store, owned)).toEqual({});
    expect(await rowsOf(store, parent)).toEqual({});
    await h.close();
  });

  test("one whose history a fork reads, until the fork is deleted", async () => {
    const store = await memoryStore();
    const h = await Harness.open(store);
    const parent = (await h.transaction((tx) => tx.createConversation({ kind: "ownerless" }))).id;
    const at = (await h.transaction((tx) => tx.appendEntry(parent, { kind: "note", data: "one" }))).id;
    const fork = (await h.forkRecord(parent, at, ownerless)).id;

    expect(await refusal(h, parent)).toEqual({ reason: "forked", blockers: [fork] });
    expect((await h.entries(fork)).map((e) => e.id)).toEqual([at]);

    await h.deleteConversation(fork);
    await h.deleteConversation(parent);
    expect(await rowsOf(store, parent)).toEqual({});
    await h.close();
  });

  test("one with live work, background work included, until it is stopped", async () => {
    const store = await memoryStore();
    const h = await Harness.open(store);
    const c = (await h.transaction((tx) => tx.createConversation({ kind: "ownerless" }))).id;
    const park = parked("park");
    const live = await h.createTask(park, null, { ownership: { kind: "conversation" }, conversationId: c });
    const background = await h.createTask(park, null, {
      ownership: { kind: "conversation" },
      conversationId: c,
      background: true,
    });
    await until(() => running(h) === 2, { what: "both tasks running" });

    expect(await refusal(h, c)).toEqual({ reason: "busy", blockers: [live, background] });
    await h.abortTask(live);
    await done(h, live);
    expect(await refusal(h, c)).toEqual({ reason: "busy", blockers: [background] });
    expect((await h.getTask(live))?.state.status).toBe("terminal");

    await h.abortTask(background);
    await done(h, background);
    expect(await h.deleteConversation(c)).toEqual([c]);
    expect(await rowsOf(store, c)).toEqual({});
    await h.close();
  });

  test("not one whose failed run left a queued input and nothing running: the input is settled unanswered, deleted", async () => {
    const hold = deferred();
    const { h, store } = await open(async (req, n) => {
      if (n === 1) {
        await hold.promise;
        return fauxError("400 invalid request");
      }
      return echo(req, n);
    });
    const c = await h.createConversation(ownerless);
    const one = await c.submit({ type: "input", content: "one" });
    const two = await c.submit({ type: "input", content: "two" });
    // While the run runs, its generation refuses the deletion.
    const generation = (await h.tasks()).filter(
      (t) => t.conversationId === c.id && t.state.status !== "terminal",
    );
    expect(generation.map((t) => t.kind)).toEqual(["pi.generation"]);
    expect(await refusal(h, c.id)).toEqual({ reason: "busy", blockers: [generation[0]!.id] });
    hold.resolve();
    expect(await one.wait()).toMatchObject({ status: "unanswered", reason: "model_error" });
    // The failed run leaves the follow-up queued; nothing runs or would run until another input.
    await c.waitForIdle();
    expect((await two.record()).status).toBe("queued");
    expect(inboxOf(h, c.id).items.map((i) => i.id)).toEqual([two.id]);
    const waiting = two.wait();
    expect(h.inspect().submissions.map((s) => s.id)).toEqual([two.id]);

    expect(await h.deleteConversation(c.id)).toEqual([c.id]);
    // Settled by the deletion, so inspect() leaves it out (draw 36b: a deletion that kept the
    // conversation's unsettled submissions in memory listed it queued).
    expect(h.inspect().submissions).toEqual([]);
    expect(await waiting).toEqual({ status: "unanswered", reason: "deleted" });
    expect(await two.wait()).toEqual({ status: "unanswered", reason: "deleted" });
    expect(await rowsOf(store, c.id)).toEqual({});
  });
});

describe("a deletion forgets what it deleted", () => {
  test("the owner edges read with its owned conversations of the deleted conversations' finished tasks", async () => {
    const store = await memoryStore();
    const first = await Harness.open(store, { tasks: [spawner] });
    const parent = (await first.transaction((tx) => tx.createConversation({ kind: "ownerless" }))).id;
    const kept = (await first.transaction((tx) => tx.createConversation({ kind: "ownerless" }))).id;
    const spawn = (conversationId: ConversationId) =>
      first.createTask(spawner, null, { ownership: { kind: "conversation" }, conversationId });
    const gone = await spawn(parent);
    const stays = await spawn(kept);
    for (const id of [gone, stays]) expect(outcome(await done(first, id))?.status).toBe("completed");
    await first.close();

    // After a reopen, the finished spawners are known only by their owner edges, read with the
    // conversations they own (none at open: no live work names them).
    const h = await Harness.open(await memoryStore(store.image()), { tasks: [spawner] });
    const session = internals(h).session;
    const former = session.records.formerOwners;
    expect(former.size).toBe(0);
    await session.ensureScope(parent);
    await session.ensureScope(kept);
    expect([...former.keys()].sort((a, b) => a - b)).toEqual([gone, stays]);
    const deleted = await h.deleteConversation(parent);
    expect(deleted).toHaveLength(2);
    expect([...former.keys()]).toEqual([stays]);
    await h.close();
  });
});
