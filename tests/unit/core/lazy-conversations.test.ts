/**
 * Conversation records load on demand (issue 30, item 4: what serves live work is O(live work), not
 * O(store)). The core harness's open reads the records live work needs; every other conversation's
 * record loads when something names it, and then everything works as if it had been read at open:
 * a commit naming it (rerun after the load), a fork of it, a deletion judging its forks and owned
 * conversations, the owner chain of a conversation a finished task owns. Rows are counted, never
 * timed (a recording store counts the rows every job returns). A crash sweep runs work naming records not
 * loaded (a task created in one, a deletion of another) through every crash point.
 */
import { describe, expect, test } from "vitest";
import { internals } from "../../../worker/core/internals.ts";
import {
  type ConversationId,
  ConversationNotDeletable,
  defineTask,
  Harness,
  type Json,
  type MemoryStore,
} from "../../../worker/index.ts";
import {
  CRASH_MODES,
  CRASH_SWEEP_TEST_TIMEOUT_MS,
  crashSweep,
  deferred,
  memoryStore,
  recordJobs,
  type StoreJob,
  until,
} from "../../../worker/testing.ts";

const IDLE = 60;

/** A task that holds its phase until released (the live work both stores resume). */
function holdTask(release: Promise<void>, name = "test.hold") {
  return defineTask<null, { phase: "hold" }, null>({
    name,
    version: 1,
    initial: () => ({ phase: "hold" }),
    phases: {
      hold: async (_t, runtime, signal) => {
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

/** Creates a conversation it owns (one note in it), then completes with its id. */
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
      await runtime.commit(() => ({
        status: "terminal",
        outcome: { status: "completed", result: task.state.checkpoint.conversation },
      }));
    },
  },
  abort: async (_t, runtime) =>
    void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
});

const hold = holdTask(new Promise(() => undefined));
const tasks = [hold, spawner];

interface History {
  /** Ownerless conversations with one note each. */
  idle: ConversationId[];
  /** The note of each idle conversation, by conversation. */
  notes: Map<ConversationId, number>;
  /** A fork of `idle[0]` at its note. */
  fork: ConversationId;
  /** A conversation (a spawner's, finished) owned by a task of `idle[1]`. */
  owned: ConversationId;
}

/** Idle history: IDLE ownerless conversations with a note, a fork of the first, a finished spawner's owned one in the second. */
async function addHistory(h: Harness): Promise<History> {
  const notes = new Map<ConversationId, number>();
  const idle = await h.transaction((tx) =>
    Array.from({ length: IDLE }, (_, i) => {
      const c = tx.createConversation({ kind: "ownerless" }).id;
      notes.set(c, tx.appendEntry(c, { kind: "note", data: `idle ${i}` }).id);
      return c;
    }),
  );
  const fork = (await h.forkRecord(idle[0]!, notes.get(idle[0]!)!, { ownership: { kind: "ownerless" } })).id;
  const spawned = await h.createTask(spawner, null, {
    ownership: { kind: "conversation" },
    conversationId: idle[1]!,
  });
  const done = await h.waitForTask(spawned);
  expect(done.state.status).toBe("terminal");
  const owned = (done.state as { outcome: { result: ConversationId } }).outcome.result;
  return { idle, notes, fork, owned };
}

/** A store with a live task in the root; and the same store with the idle history added. */
async function images(): Promise<{
  small: ReturnType<MemoryStore["image"]>;
  big: ReturnType<MemoryStore["image"]>;
  history: History;
}> {
  const store = await memoryStore();
  const h = await Harness.open(store, { tasks });
  await h.createTask(hold, null, { ownership: { kind: "conversation" }, conversationId: 1 });
  await h.close();
  const small = store.image();
  const grown = await memoryStore(small);
  const g = await Harness.open(grown, { tasks });
  const history = await addHistory(g);
  await g.close();
  return { small, big: grown.image(), history };
}

async function openCounting(image: ReturnType<MemoryStore["image"]>) {
  const store = await memoryStore(image);
  const recorder: { into: StoreJob[] } = { into: [] };
  recordJobs(store, recorder);
  const h = await Harness.open(store, { tasks });
  const reads = recorder.into.filter((j) => j.kind === "read");
  return { h, rows: reads.reduce((n, j) => n + j.rowsRead, 0), store };
}

test("the core harness's open reads the same rows over idle conversations, forks and owned conversations", async () => {
  const { small, big, history } = await images();
  const before = await openCounting(small);
  const after = await openCounting(big);
  // The history is there, and none of it is read: not one conversation row more.
  const count = async (s: MemoryStore) =>
    Number((await s.read((sql) => sql.get("SELECT count(*) AS n FROM conversations")))?.["n"]);
  expect((await count(after.store)) - (await count(before.store))).toBe(IDLE + 2);
  expect(after.rows - before.rows).toBe(0);
  const records = internals(after.h).session.records;
  expect(records.conversations.has(history.idle[0]!)).toBe(false);
  expect(records.conversations.has(history.owned)).toBe(false);
  // The live work resumed.
  await until(() => [...records.live].some((id) => records.tasks.get(id)?.state.status === "running"), {
    what: "the recovered task running",
  });
  // Loaded on first access, with its chains: the owned conversation's owner edge (a finished task).
  const owned = await after.h.loadConversation(history.owned);
  expect(owned?.owner?.conversationId).toBe(history.idle[1]);
  expect(records.conversations.has(history.idle[1]!)).toBe(true);
  expect(records.formerOwners.has(owned!.owner!.taskId)).toBe(true);
  expect(await after.h.loadConversation(10_000)).toBeUndefined();
  await before.h.close();
  await after.h.close();
});

test("commits and reads naming conversations not loaded work as if they had been read at open", async () => {
  const { big, history } = await images();
  const h = await Harness.open(await memoryStore(big), { tasks });
  const records = internals(h).session.records;
  const [a, b, c, d] = history.idle;
  // A commit naming one: it reruns after the load, and sees it; a never-created id reads absent.
  const seen = await h.transaction((tx) => {
    tx.appendEntry(c!, { kind: "note", data: "later" });
    return { record: tx.conversation(d!), absent: tx.conversation(10_000) };
  });
  expect(seen.record?.id).toBe(d);
  expect(seen.absent).toBeUndefined();
  expect((await h.entries(c!)).map((e) => e.data)).toEqual([`idle 2`, "later"]);
  // A fork of an unloaded source reads its history.
  const source = history.idle[5]!;
  expect(records.conversations.has(source)).toBe(false);
  const fork = await h.forkRecord(source, history.notes.get(source)!, { ownership: { kind: "ownerless" } });
  expect((await h.entries(fork.id)).map((e) => e.data)).toEqual(["idle 5"]);
  // A fork made before the open, of a source made before it too (neither loaded), reads it.
  expect((await h.entries(history.fork)).map((e) => e.data)).toEqual(["idle 0"]);
  await h.close();

  // Deletions, on a fresh open (nothing of the history loaded).
  const again = await Harness.open(await memoryStore(big), { tasks });
  // Through the session's commit (the harness's deleteConversation loads ahead): the commit loads.
  const session = internals(again).session;
  const fresh = session.records;
  expect(fresh.conversations.has(a!)).toBe(false);
  // A commit deleting a conversation whose fork is not loaded: refused, the fork named.
  const refused = await session
    .commit((tx) => tx.deleteConversation(a!))
    .then(
      () => undefined,
      (e: unknown) => e,
    );
  expect(refused).toBeInstanceOf(ConversationNotDeletable);
  expect((refused as ConversationNotDeletable).reason).toBe("forked");
  expect([...(refused as ConversationNotDeletable).blockers]).toEqual([history.fork]);
  // One whose tasks own a conversation not loaded: both go.
  expect(fresh.conversations.has(history.owned)).toBe(false);
  expect((await session.commit((tx) => tx.deleteConversation(b!))).sort((x, y) => x - y)).toEqual(
    [b!, history.owned].sort((x, y) => x - y),
  );
  expect(await again.loadConversation(history.owned)).toBeUndefined();
  await again.close();
});

test("the owner chain of a conversation a finished task owns is followed after a lazy load", async () => {
  const { big, history } = await images();
  const h = await Harness.open(await memoryStore(big), { tasks });
  const release = deferred();
  const held = holdTask(release.promise, "test.hold2");
  h.registry.register(held);
  // A task created in the owned conversation (not loaded): its record and owner chain load with it.
  const id = await h.transaction((tx) =>
    tx.createTask(held, null, {
      ownership: { kind: "conversation" },
      conversationId: history.owned,
    }),
  );
  // Ordinary traversal from the owner's conversation reaches it through the finished owner's edge.
  let idle = false;
  const waiting = h.waitForConversationIdle(history.idle[1]!).then(() => {
    idle = true;
  });
  await until(() => internals(h).session.records.tasks.get(id)?.state.status === "running", {
    what: "the task in the owned conversation running",
  });
  expect(idle).toBe(false);
  release.resolve();
  await waiting;
  expect(idle).toBe(true);
  await h.close();
});

test("the lazy open and the loads walk no table that grows with history, conversations included", async () => {
  const { big, history } = await images();
  const store = await memoryStore(big);
  const recorder: { into: StoreJob[] } = { into: [] };
  recordJobs(store, recorder);
  const h = await Harness.open(store, { tasks });
  await h.loadConversation(history.owned);
  await internals(h).session.ensureScope(history.idle[0]!);
  await h.deleteConversation(history.fork);
  const statements = new Map<string, readonly unknown[] | undefined>();
  for (const job of recorder.into)
    for (const s of job.statements) if (/^\s*(WITH|SELECT)/i.test(s.sql)) statements.set(s.sql, s.params);
  const walks: string[] = [];
  for (const [sql, params] of statements) {
    const plan = await store.read((q) => q.all(`EXPLAIN QUERY PLAN ${sql}`, params as never));
    for (const step of plan) {
      const detail = String(step["detail"]);
      // An automatic index is built by walking the table.
      if (
        /AUTOMATIC/.test(detail) ||
        (/^SCAN (conversations|tasks|entries|documents|doc_patches|doc_history|submissions)\b/.test(detail) &&
          !/USING (COVERING )?INDEX (tasks_live|submissions_unsettled)\b/.test(detail))
      )
        walks.push(`${sql.replace(/\s+/g, " ")} -> ${detail}`);
    }
  }
  expect(statements.size).toBeGreaterThan(5);
  expect(walks).toEqual([]);
  await h.close();
});

test("a move of a conversation not loaded, whose tasks own a finished one, sends its history", async () => {
  const { big, history } = await images();
  const sender = await Harness.open(await memoryStore(big), { tasks });
  const records = internals(sender).session.records;
  const moving = history.idle[1]!;
  expect(records.conversations.has(moving)).toBe(false);
  expect(records.conversations.has(history.owned)).toBe(false);
  // Its record loads with the commit (a rerun); the subagent check needs only the conversations
  // with live work, all in memory: the finished spawner's conversation is not read.
  const pkg = await sender.prepareMove("T-lazy", moving);
  expect(records.conversations.has(moving)).toBe(true);
  expect(records.conversations.has(history.owned)).toBe(false);
  expect(pkg.entries.map((e) => e.data)).toEqual(["idle 1"]);
  const receiver = await Harness.open(await memoryStore(), { tasks });
  const adopted = await receiver.adoptMove(JSON.parse(JSON.stringify(pkg)));
  expect((await receiver.entries(adopted)).map((e) => e.data)).toEqual(["idle 1"]);
  await sender.finishMove("T-lazy", adopted);
  expect(sender.awayOf(moving)).toMatchObject({ status: "done" });
  await receiver.close();
  await sender.close();
});

describe("crash sweep: work naming conversations not loaded", () => {
  // Idle history only (no live task): a spawner started in one idle conversation (its commit names a
  // record not loaded), and the deletion of another (its scope not loaded).
  const idleImage = async () => {
    const store = await memoryStore();
    const h = await Harness.open(store, { tasks });
    const history = await addHistory(h);
    await h.close();
    return { image: store.image(), history };
  };
  for (const mode of CRASH_MODES)
    test(
      mode.name,
      async () => {
        const { image, history } = await idleImage();
        const [, , , spawnIn, deleted] = history.idle;
        await crashSweep(
          {
            name: "lazy records",
            image,
            services: () => null,
            open: (store, _s, options) => Harness.open(store, { tasks, groupCommit: options.groupCommit }),
            finish: async (h) => {
              const started = (await h.tasks({ kind: "spawner" })).find((t) => t.conversationId === spawnIn);
              const id =
                started?.id ??
                (await h.createTask(spawner, null, {
                  ownership: { kind: "conversation" },
                  conversationId: spawnIn!,
                }));
              const done = await h.waitForTask(id);
              const owned = (done.state as { outcome: { result: ConversationId } }).outcome.result;
              if (await h.loadConversation(deleted!)) await h.deleteConversation(deleted!);
              return {
                outcome: done.state.status,
                owner: (await h.loadConversation(owned))?.owner?.conversationId,
                owned: (await h.entries(owned)).map((e) => e.data),
                deleted: await h.loadConversation(deleted!),
              };
            },
          },
          {
            mode,
            baseline: (run) =>
              expect(run.result).toEqual({
                outcome: "terminal",
                owner: spawnIn,
                owned: ["owned"],
                deleted: undefined,
              }),
            check: (run, baseline) => expect(run.result, run.label).toEqual(baseline.result),
            atLeast: mode.groupCommit ? 4 : 5,
          },
        );
      },
      CRASH_SWEEP_TEST_TIMEOUT_MS,
    );
});
