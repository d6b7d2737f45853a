/**
 * The session: the engine's single mutation line over a store, and its only group-commit layer (the
 * store runs one callback per transaction and groups nothing). Commits requested while a group waits
 * for the store join it: when the store's line reaches the group's transaction, each callback runs
 * against an overlay of its own, and is merged into the line's records (so the next callback of the
 * group reads it); a callback that throws is dropped alone (callbacks never touch SQL, so nothing
 * needs rolling back); then the group's rows are written once and COMMIT is one transaction for all
 * of them. Only after COMMIT returned are they merged into the published records and their change
 * sets published. Readers outside the line (`records`) therefore see only stored state, and a group
 * whose COMMIT fails leaves them exactly as they were (the line is reset to them). A storage failure
 * after a merge makes the session fatal: every later call rejects and the host must reopen. A
 * callback that touches the documents of a conversation not loaded yet, or names a conversation whose
 * record is not loaded yet, is dropped from its group and runs again, alone with a fresh overlay, once
 * they are (`DocsNotLoaded`; `ScopeNotLoaded` for what a deletion judges; `RequestNotLoaded` for a
 * lookup by requestId whose submission may be stored only). The store gets the core's
 * schema (schema.ts) before the session reads anything.
 */
import type { Query, Row, Sql, Store } from "../store/types.ts";
import { allOf, StoreClosed } from "../store/types.ts";
import {
  ConversationClosure,
  EDGE_COLUMNS,
  edgeFromRow,
  IN_IDS,
  ownedByQuery,
  readConversationClosure,
  readScope,
} from "./conversation-load.ts";
import type { AnyTaskDefinition } from "./define.ts";
import {
  conversationDocQueries,
  conversationDocsFrom,
  readConversationDocs,
  readDocsIn,
  readDocsNamed,
} from "./doc-load.ts";
import { HarnessClosed } from "./errors.ts";
import {
  ancestry,
  forkPointKey,
  isEntryId,
  loadForkPoint,
  readVisibleEntries,
  type Segment,
} from "./fork.ts";
import { checkNewOwners } from "./ownership.ts";
import { type EntryPage, readActivePage } from "./pages.ts";
import {
  moveFromRow,
  NEXT_IDS_KEY,
  type NextIds,
  readEntryRow,
  readSubmissionRow,
  TASK_COLUMNS,
  taskFromRow,
  validateOverlay,
  writeOverlay,
} from "./persist.ts";
import { type DocRules, inertTask, Overlay, Records, splitDocKey } from "./records.ts";
import { schema } from "./schema.ts";
import { type TxContext, TxImpl } from "./tx.ts";
import {
  type ChangeSet,
  type ConversationId,
  type ConversationRecord,
  type EntryId,
  type EntryRecord,
  type Json,
  ROOT_CONVERSATION_ID,
  type SubmissionId,
  type SubmissionRecord,
  type TaskId,
  type TaskRecord,
} from "./types.ts";

/**
 * An overlay over the line as it stood, and its transaction, for work decided ahead of its commit
 * (`Session.draft`). The commit it is handed to runs its callback in it instead of a fresh overlay
 * when no overlay was applied to the line since, so what was decided there holds.
 */
export interface Draft {
  readonly overlay: Overlay;
  readonly tx: TxImpl;
  readonly line: Records;
  readonly applied: number;
}

/** Most commits one group (one transaction) takes. */
const MAX_GROUP = 512;

export function isPromiseLike(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as { then?: unknown } | null)?.then === "function";
}

/** A request put aside until what its callback needed is loaded. */
interface Deferred {
  request: PendingCommit;
  load: () => Promise<void>;
}

/** conversation_id, name, since_entry, value, version (see fork.ts). */
type HistoryRow = [number, string, number, string | null, number];

interface PendingCommit {
  work: (tx: TxImpl, overlay: Overlay) => unknown;
  context: TxContext;
  /** An overlay the work was decided in ahead of its commit: taken when the line has not moved since. */
  draft: Draft | undefined;
  resolve: (v: unknown) => void;
  reject: (e: unknown) => void;
}

const ID_TABLES = ["tasks", "entries", "conversations", "submissions", "doc_records"] as const;

/** The id high-water marks a deletion stored (absent before any deletion; unreadable ones ignored). */
function parseNextIds(stored: unknown): Partial<NextIds> | undefined {
  if (stored === null || stored === undefined) return undefined;
  try {
    const value = JSON.parse(String(stored)) as Record<string, unknown>;
    const out: Partial<NextIds> = {};
    for (const key of ID_TABLES) {
      const n = value[key];
      if (Number.isSafeInteger(n)) out[key] = n as number;
    }
    return out;
  } catch {
    return undefined;
  }
}

/**
 * The statement reading the next id of each table: past its newest row, and past the high-water mark
 * a deletion kept (`nextIdsFrom`). One statement (each `max(id)` reads the end of its table's rowid
 * tree), not six.
 */
const NEXT_IDS_QUERY: Query = {
  sql: `SELECT ${ID_TABLES.map((t) => `(SELECT max(id) FROM ${t}) AS ${t}`).join(", ")}, (SELECT value FROM meta WHERE key = ?) AS marks`,
  params: [NEXT_IDS_KEY],
};

function nextIdsFrom(row: Row | undefined): NextIds {
  const marks = parseNextIds(row?.["marks"]);
  const next = (table: keyof NextIds) => Math.max(Number(row?.[table] ?? 0) + 1, marks?.[table] ?? 1);
  return {
    tasks: next("tasks"),
    entries: next("entries"),
    conversations: next("conversations"),
    submissions: next("submissions"),
    doc_records: next("doc_records"),
  };
}

/** Thrown out of a group whose callbacks all failed, so the store rolls it back. */
const NOTHING_TO_COMMIT = new Error("nothing to commit");

export class Session {
  /** Published state: merged only after COMMIT. Every reader outside the commit line uses this. */
  readonly records = new Records();
  /** The line's state: the published records plus the group being assembled (see `line`). */
  #line = this.records;
  /**
   * Entries merged on the line and not published yet (the group being assembled, and one that
   * committed but has not told its listeners): what no cache of published changes holds yet
   * (`Tx.appendedEntries`). In id order.
   */
  #unpublished: EntryRecord[] = [];
  #listeners = new Set<(change: ChangeSet) => void>();
  #fatal: Error | undefined;
  /**
   * Called synchronously after a merge (still inside the transaction): the scheduler's kick. Skipped
   * for commits that only move running tasks between checkpoints (see `onlyCheckpointMoves`), and
   * for the scheduler's own plan when it left nothing for another (`Overlay.settled`).
   */
  onMerged: () => void = () => undefined;
  /** Called once when the session becomes fatal. */
  onFatal: (error: Error) => void = () => undefined;
  /** Runs inside every commit that creates a conversation, right after it is created. */
  onConversationCreated: (tx: TxImpl, record: ConversationRecord) => void = () => undefined;
  /** Called when a task is created with a definition, so the registry can learn it. */
  onDefinition: (definition: AnyTaskDefinition) => void = () => undefined;
  /**
   * The rules a new conversation incarnation is created with, by name (spec §3.1, §3.7; the harness's
   * `forks` option, fixed for the session's life). Asked only when a record is created (and to
   * complete a record stored before records kept the fork rule): a document that has a record follows
   * the record (records.ts DocMeta), whatever this process's option says of its name.
   */
  get docRules(): DocRules {
    return this.records.docRules;
  }
  set docRules(rules: DocRules) {
    this.records.docRules = rules;
    this.#line.docRules = rules;
  }
  /** The largest row body the store takes (HarnessOptions.maxValueBytes); undefined: unbounded. */
  maxValueBytes: number | undefined = undefined;
  /**
   * Most commits a group takes (fixed for the session's life). 1: one commit per transaction, for
   * crash sweeps that must cut between any two commits (`HarnessOptions.groupCommit`).
   */
  maxGroup = MAX_GROUP;

  constructor(
    readonly store: Store,
    readonly now: () => number,
  ) {}

  get fatal(): Error | undefined {
    return this.#fatal;
  }

  /**
   * The records commits on the line read: published state plus the merged commits of the group in
   * flight. Only code running on the line (commit callbacks, the scheduler's planning) uses them.
   */
  get line(): Records {
    return this.#line;
  }

  /**
   * Load the live part of the store: live tasks, unsettled submissions, id counters, the records of
   * the conversations those tasks and submissions belong to, of the conversations live tasks own, of
   * the root and of `docs` (with their chains: conversation-load.ts), and the documents of the
   * conversations those tasks and submissions belong to and of `docs` (the scopes the layer above
   * reads right after the open: `HarnessOptions.preloadDocs`). One read, its statements in two
   * batches (`allOf`: one round trip each on a lent store) where the stored chains are short: what
   * the open reads by itself, then what those rows name; longer chains, a fork without a head marker
   * of its own and spilled values read on after them.
   */
  async load(options: { docs?: readonly ConversationId[] } = {}): Promise<void> {
    const r = this.records;
    await this.store.migrate(schema);
    await this.store.read(async (sql) => {
      const [moves = [], staged = [], live = [], next = [], taskDocs = [], submissions = []] = await allOf(
        sql,
        [
          { sql: "SELECT body FROM moves ORDER BY rowid" },
          { sql: "SELECT transfer, idx, count, bytes FROM move_parts" },
          // Named: without statistics SQLite prefers walking the whole table in id order to the
          // partial index, and a store of many finished tasks then reads all of them at open.
          {
            sql: `SELECT ${TASK_COLUMNS} FROM tasks INDEXED BY tasks_live WHERE status <> 'terminal' ORDER BY id`,
          },
          NEXT_IDS_QUERY,
          // Live tasks' live task documents (a partial index): the commit that ends one retires them.
          {
            sql: "SELECT task_id, kind FROM doc_records INDEXED BY doc_records_live_tasks WHERE scope = 'task' AND retired_at IS NULL",
          },
          {
            sql: "SELECT * FROM submissions WHERE json_extract(body, '$.status') IN ('queued', 'placed') ORDER BY id",
          },
        ],
      );
      for (const row of moves) {
        const move = moveFromRow(row);
        if (move) r.putMove(move);
      }
      for (const row of staged)
        r.putStaged(String(row["transfer"]), Number(row["idx"]), Number(row["count"]), Number(row["bytes"]));
      for (const row of live) {
        const { record, corrupt } = taskFromRow(row);
        r.putTask(record);
        if (corrupt) r.corrupt.set(record.id, corrupt);
      }
      // Ids are never reused: past the newest row, and past the high-water marks a deletion kept.
      const ids = nextIdsFrom(next[0]);
      r.nextTaskId = ids.tasks;
      r.nextEntryId = ids.entries;
      // Id 1 is the root's alone, whether or not it exists yet (created lazily: Harness.ensureRoot).
      r.nextConversationId = Math.max(ids.conversations, ROOT_CONVERSATION_ID + 1);
      r.firstNewConversationId = r.nextConversationId;
      r.nextSubmissionId = ids.submissions;
      r.nextDocId = ids.doc_records;
      for (const row of taskDocs) {
        const taskId = Number(row["task_id"]);
        let names = r.tasksWithDocs.get(taskId);
        if (!names) r.tasksWithDocs.set(taskId, (names = new Set()));
        names.add(String(row["kind"]));
      }
      for (const row of submissions) r.putSubmission(await readSubmissionRow(sql, row));
      // Terminal tasks that live waits name (failFast and resumption judge their outcomes).
      const named = new Set<number>();
      for (const id of r.live) {
        const s = r.tasks.get(id)!.state;
        if (s.status === "waiting") for (const w of s.on) if (!r.tasks.has(w)) named.add(w);
      }
      // Documents of the conversations live work runs in; every other conversation's load on first
      // access (ensureDocs).
      const needed = new Set<ConversationId>();
      for (const id of r.live) needed.add(r.tasks.get(id)!.conversationId);
      for (const sub of r.submissions.values()) needed.add(sub.conversationId);
      for (const c of options.docs ?? []) needed.add(c);
      const withDocs = [...needed];
      // Their records with their chains, those of the conversations live tasks own (liveOwnedWork
      // reads them) and the root's; every other record loads when first named. The second batch: the
      // named tasks, the owned conversations' ids, the closure's first round and those documents.
      const closure = new ConversationClosure(r, [...needed, ROOT_CONVERSATION_ID]);
      const owned = ownedByQuery([...r.live]);
      const first = closure.next();
      const docQueries = withDocs.map((c) =>
        conversationDocQueries([{ conversationId: c, cap: Number.MAX_SAFE_INTEGER }]),
      );
      const second = await allOf(sql, [
        ...(named.size > 0
          ? [
              {
                sql: `SELECT ${TASK_COLUMNS} FROM tasks WHERE id IN ${IN_IDS}`,
                params: [JSON.stringify([...named])],
              },
            ]
          : []),
        ...(owned ? [owned] : []),
        ...first,
        ...docQueries.flat(),
      ]);
      let at = 0;
      if (named.size > 0) for (const row of second[at++] ?? []) r.putTask(taskFromRow(row).record);
      if (owned) closure.need((second[at++] ?? []).map((row) => Number(row["id"])));
      closure.take(second.slice(at, (at += first.length)));
      for (let queries = closure.next(); queries.length > 0; queries = closure.next())
        closure.take(await allOf(sql, queries));
      r.installConversations(closure.loaded);
      // No root stored: it is created in this process, which then sees every submission it admits.
      if (!r.conversations.has(ROOT_CONVERSATION_ID)) r.firstNewConversationId = ROOT_CONVERSATION_ID;
      for (const [i, c] of withDocs.entries()) {
        const rows = second.slice(at, (at += docQueries[i]!.length));
        r.installDocs(c, await conversationDocsFrom(sql, this.segments(c), rows));
      }
    });
    this.#line = r.clone();
  }

  #loadingDocs = new Map<ConversationId, Promise<void>>();
  /** Fork points read invisible because their entry was not committed yet, by that entry's id. */
  #unseenForkPoints = new Map<EntryId, string[]>();

  /**
   * Inside a store job on the line: make the records of `ids` (with their chains) present in both
   * copies (conversation-load.ts). Reads nothing when they are.
   */
  async loadRecords(sql: Sql, ids: Iterable<ConversationId>): Promise<void> {
    const r = this.records;
    const missing = [...ids].filter((id) => !r.knowsConversation(id));
    if (missing.length === 0) return;
    const loaded = await readConversationClosure(sql, r, missing);
    r.installConversations(loaded);
    this.#line.installConversations(loaded);
  }

  /** Resolves with a conversation's record once it is in memory (undefined: there is none). */
  async conversation(id: ConversationId): Promise<ConversationRecord | undefined> {
    if (!this.records.knowsConversation(id)) await this.store.read((sql) => this.loadRecords(sql, [id]));
    return this.records.conversations.get(id);
  }

  /**
   * Resolves once the conversations below `id` (owned by its tasks, transitively) and the forks of
   * any of them are in memory with their chains (a deletion's judgement reads them).
   */
  ensureScope(id: ConversationId): Promise<void> {
    if (this.records.hasScope(id)) return Promise.resolve();
    return this.store.read(async (sql) => {
      await this.loadRecords(sql, await readScope(sql, id));
      this.records.scopeLoaded.add(id);
      this.#line.scopeLoaded.add(id);
    });
  }

  /** A conversation's visible history as segments (itself, then its ancestors: fork.ts). */
  segments(conversationId: ConversationId): Segment[] {
    return ancestry((id) => this.records.conversations.get(id), conversationId);
  }

  /**
   * A fork point read while its entry was not committed yet is invisible for want of the entry, not
   * for good: once a commit appends that entry, the point is read again on its next use. Only such
   * points are kept here (by entry id), so a commit looks at nothing when there are none.
   */
  #forgetUnseenForkPoints(entries: readonly { readonly id: EntryId }[], line: Records): void {
    for (const e of entries) {
      const keys = this.#unseenForkPoints.get(e.id);
      if (keys === undefined) continue;
      this.#unseenForkPoints.delete(e.id);
      for (const key of keys) {
        line.forkPoints.delete(key);
        this.records.forkPoints.delete(key);
      }
    }
  }

  /**
   * Resolves once the fork point of `parent` at `at` is in memory (read from the store on first use).
   * A fork point is a fact about committed entries and documents: `at` must be committed.
   */
  ensureForkPoint(parent: ConversationId, at: number): Promise<void> {
    // Not an entry id: tx.forkConversation refuses it without a fork point.
    if (!isEntryId(at)) return Promise.resolve();
    const key = forkPointKey(parent, at);
    if (this.records.forkPoints.has(key)) return Promise.resolve();
    return this.store.read(async (sql) => {
      await this.loadRecords(sql, [parent]);
      const point = await loadForkPoint(sql, this.segments(parent), at, this.docRules);
      this.records.forkPoints.set(key, point);
      this.#line.forkPoints.set(key, point);
      // Invisible because its entry is not committed yet: forgotten once a commit appends it.
      if (!point.visible && at >= this.#line.nextEntryId) {
        const keys = this.#unseenForkPoints.get(at);
        if (keys) keys.push(key);
        else this.#unseenForkPoints.set(at, [key]);
      }
    });
  }

  /**
   * Resolves once the conversation's documents are in memory (read from the store on first access,
   * at once when they are). Documents may be kept under an id no conversation has (an app's settings);
   * those load the same way.
   */
  ensureDocs(conversationId: ConversationId): Promise<void> {
    const r = this.records;
    if (r.docsLoaded.has(conversationId)) return Promise.resolve();
    let loading = this.#loadingDocs.get(conversationId);
    if (!loading) {
      // Read and installed inside one job on the line: every commit merged before it is on disk.
      loading = this.store
        .read(async (sql) => {
          // Its record with its chains first (the segments read its ancestry).
          await this.loadRecords(sql, [conversationId]);
          const loaded = await readConversationDocs(sql, conversationId, this.segments(conversationId));
          // Both copies: nothing merged on the line can touch documents that were not loaded.
          r.installDocs(conversationId, loaded);
          this.#line.installDocs(conversationId, loaded);
        })
        .finally(() => this.#loadingDocs.delete(conversationId));
      this.#loadingDocs.set(conversationId, loading);
    }
    return loading;
  }

  /**
   * The committed value of document `name` in every conversation that has one: from memory where the
   * conversation's documents are loaded, from the store for the others (without loading them).
   */
  docsNamed(name: string): Promise<Map<ConversationId, Json>> {
    const r = this.records;
    return this.store.read(async (sql) => {
      const out = await readDocsNamed(sql, name, (c) => !r.docsLoaded.has(c));
      for (const c of r.docsLoaded) {
        const value = r.getDoc(c, name);
        if (value !== undefined) out.set(c, value);
      }
      return out;
    });
  }

  /**
   * The committed documents `names` of conversations `ids`, by conversation then name: from memory
   * for the conversations whose documents are loaded, from the store for the others (without loading
   * them: one read job, none when every one is in memory). O(ids), whatever the store holds.
   */
  async docsIn(
    names: readonly string[],
    ids: readonly ConversationId[],
  ): Promise<Map<ConversationId, Map<string, Json>>> {
    const r = this.records;
    const fromMemory = () => {
      const out = new Map<ConversationId, Map<string, Json>>();
      for (const c of ids) {
        if (!r.docsLoaded.has(c)) continue;
        const docs = new Map<string, Json>();
        for (const name of names) {
          const value = r.getDoc(c, name);
          if (value !== undefined) docs.set(name, value);
        }
        out.set(c, docs);
      }
      return out;
    };
    if (ids.every((c) => r.docsLoaded.has(c))) return fromMemory();
    return this.store.read(async (sql) => {
      const stored = await readDocsIn(
        sql,
        names,
        ids.filter((c) => !r.docsLoaded.has(c)),
      );
      // Read inside the job: what memory holds is exactly what is committed at this point.
      for (const [c, docs] of fromMemory()) stored.set(c, docs);
      return stored;
    });
  }

  /** Requests whose callback needed documents or fork points not in memory: load, then queue them again. */
  #retryAfterLoad(deferred: Deferred[]): void {
    if (deferred.length === 0) return;
    Promise.all(deferred.map((d) => d.load())).then(
      () => {
        this.#pending.unshift(...deferred.map((d) => d.request));
        this.#restart();
      },
      (error: unknown) => {
        for (const { request } of deferred) request.reject(error);
      },
    );
  }

  /**
   * Each call is a subscription of its own (a wrapper, not the function, is kept): its disposer is
   * idempotent and ends that subscription only, never a later one of the same function.
   */
  subscribe(listener: (change: ChangeSet) => void): () => void {
    const subscription = (change: ChangeSet) => listener(change);
    this.#listeners.add(subscription);
    return () => {
      this.#listeners.delete(subscription);
    };
  }

  /**
   * Run `work` in a transaction; resolves after COMMIT with its value. Commits requested while a
   * group is being assembled join it (engine-level group commit): each callback runs against its
   * own overlay, a callback that throws is dropped alone (callbacks never touch SQL, so nothing
   * needs rolling back), the group's rows are written once (a task moved twice in a group is
   * written once) and COMMIT is one transaction for all of them.
   */
  commit<T>(
    work: (tx: TxImpl, overlay: Overlay) => T | Promise<T>,
    context: TxContext = {},
    draft?: Draft,
  ): Promise<T> {
    if (this.#fatal) return Promise.reject(new HarnessClosed(`engine stopped: ${this.#fatal.message}`));
    this.#outstanding++;
    let settled = false;
    const settle = () => {
      if (!settled && --this.#outstanding === 0) for (const quiet of this.#quietWaiters.splice(0)) quiet();
      settled = true;
    };
    return new Promise<T>((resolve, reject) => {
      this.#pending.push({
        work,
        context,
        draft,
        resolve: (v) => {
          settle();
          resolve(v as T);
        },
        reject: (e) => {
          settle();
          reject(e);
        },
      });
      if (!this.#assembling) {
        this.#assembling = true;
        void this.#runGroup();
      }
    });
  }

  #pending: PendingCommit[] = [];

  /**
   * A fresh overlay over the line as it stands, with a transaction (no context), for work decided
   * ahead of its commit: the scheduler plans in it, and hands it to the commit that carries the plan
   * out (`commit(work, {}, draft)`). That commit's callback gets the draft itself when nothing was
   * applied to the line in between (the decisions made there are the ones a fresh overlay would give)
   * and it was never sealed; otherwise a fresh overlay, and the callback decides again.
   */
  draft(): Draft {
    const line = this.#line;
    const overlay = new Overlay(line);
    return { overlay, tx: new TxImpl(this, overlay, {}), line, applied: line.applied };
  }
  /** Commits requested and not settled yet (queued, deferred for documents, or in a group). */
  #outstanding = 0;

  /**
   * No commit is outstanding: the published records are what the line holds, so a decision that
   * writes nothing can read them as if it ran on the line (the scheduler's step, spec §5.1).
   */
  get quiet(): boolean {
    return this.#outstanding === 0;
  }

  #quietWaiters: Array<() => void> = [];

  /**
   * Resolves once no commit is outstanding: close awaits it before it closes the store, so commits
   * queued at its seal settle (spec §2.2), also one that starts a later group or goes back for a load.
   */
  untilQuiet(): Promise<void> {
    if (this.#outstanding === 0) return Promise.resolve();
    return new Promise((resolve) => this.#quietWaiters.push(resolve));
  }
  #assembling = false;

  /** Settles when the newest group (and so every group before it: the store is FIFO) has ended. */
  #lastGroup: Promise<void> | undefined;

  /**
   * Resolves once every commit merged so far is on disk (the groups in flight have committed), at
   * once when none is in flight; rejects when one of them failed. For work that may start only on
   * committed state but has nothing to write itself (the scheduler launching a created-reserved task).
   */
  barrier(): Promise<void> {
    if (this.#fatal) return Promise.reject(new HarnessClosed(`engine stopped: ${this.#fatal.message}`));
    return this.#lastGroup ?? Promise.resolve();
  }

  async #runGroup(): Promise<void> {
    let settle!: (error: unknown) => void;
    const group = new Promise<void>((resolve, reject) => {
      settle = (error) => (error === undefined ? resolve() : reject(error));
    });
    group.catch(() => undefined); // a failure is reported to the group's own callers
    this.#lastGroup = group;
    settle(await this.#assembleAndCommit());
    if (this.#lastGroup === group) this.#lastGroup = undefined;
  }

  /** One group: assemble, write, COMMIT, publish. Returns the error that failed it, if any. */
  async #assembleAndCommit(): Promise<unknown> {
    type Done = {
      resolve: (v: unknown) => void;
      reject: (e: unknown) => void;
      value: unknown;
      overlay: Overlay;
    };
    const done: Done[] = [];
    let patchRows: Overlay | undefined;
    const failed: Array<{ reject: (e: unknown) => void; error: unknown }> = [];
    const deferred: Deferred[] = [];
    // Values of "asOf" documents each merged callback wrote, for doc_history (fork.ts).
    const history: HistoryRow[] = [];
    try {
      await this.store.commit(async (sql) => {
        const merged: Overlay[] = [];
        // Each task's record as stored before this group (what its row holds), for narrow updates.
        const stored = new Map<TaskId, TaskRecord | undefined>();
        let count = 0;
        const limit = Math.max(1, this.maxGroup);
        // Merged changes the scheduler has not planned for yet. It plans once the queue is empty
        // (not after every merge: a group of n finishing tasks would be planned n times), and what it
        // reserves joins this group.
        let unplanned = false;
        for (;;) {
          while (this.#pending.length > 0 && count < limit) {
            const request = this.#pending.shift()!;
            count++;
            if (this.#fatal) {
              failed.push({
                reject: request.reject,
                error: new HarnessClosed(`engine stopped: ${this.#fatal.message}`),
              });
              continue;
            }
            const line = this.#line;
            const draft = request.draft;
            const current =
              draft !== undefined &&
              draft.line === line &&
              draft.applied === line.applied &&
              !draft.overlay.sealed;
            const overlay = current ? draft.overlay : new Overlay(line);
            const tx = current ? draft.tx : new TxImpl(this, overlay, request.context);
            let value: unknown;
            let thrown: { error: unknown } | undefined;
            try {
              // Most callbacks are synchronous: awaiting only a promise saves a turn per callback.
              value = request.work(tx, overlay);
              if (isPromiseLike(value)) value = await value;
              overlay.sealed = true;
              if (
                overlay.missingDocs === undefined &&
                overlay.missingScope === undefined &&
                overlay.missingRequest === undefined &&
                overlay.missingTask === undefined
              ) {
                if (overlay.creationFailure) throw overlay.creationFailure.error;
                checkNewOwners(overlay);
                validateOverlay(overlay);
              }
            } catch (error) {
              overlay.sealed = true;
              thrown = { error };
            }
            // It needed documents not in memory (even if it caught that): run it again once loaded.
            const missingDocs = overlay.missingDocs;
            if (missingDocs !== undefined) {
              deferred.push({ request, load: () => this.ensureDocs(missingDocs) });
              continue;
            }
            const missingScope = overlay.missingScope;
            if (missingScope !== undefined) {
              deferred.push({ request, load: () => this.ensureScope(missingScope) });
              continue;
            }
            const missingRequest = overlay.missingRequest;
            if (missingRequest !== undefined) {
              deferred.push({
                request,
                load: () => this.ensureRequest(missingRequest.conversationId, missingRequest.requestId),
              });
              continue;
            }
            const missingTask = overlay.missingTask;
            if (missingTask !== undefined) {
              deferred.push({ request, load: () => this.ensureTaskEdge(missingTask) });
              continue;
            }
            const missingFork = overlay.missingFork;
            if (missingFork !== undefined) {
              deferred.push({
                request,
                load: () => this.ensureForkPoint(missingFork.parent, missingFork.at),
              });
              continue;
            }
            if (thrown) {
              failed.push({ reject: request.reject, error: thrown.error });
              continue;
            }
            merged.push(overlay);
            for (const id of overlay.tasks.keys()) if (!stored.has(id)) stored.set(id, line.tasks.get(id));
            const inert = overlay.settled || onlyCheckpointMoves(overlay, line);
            if (overlay.docs.size > 0) this.#noteHistory(overlay, history);
            line.apply(overlay);
            if (this.#unseenForkPoints.size > 0 && overlay.entries.length > 0)
              this.#forgetUnseenForkPoints(overlay.entries, line);
            for (const e of overlay.entries) this.#unpublished.push(e);
            done.push({ resolve: request.resolve, reject: request.reject, value, overlay });
            if (!inert) unplanned = true;
          }
          if (!unplanned) break;
          unplanned = false;
          this.onMerged();
          if (count >= limit) break;
          // Let the scheduler's drain (a microtask) add its reservation to this group.
          await new Promise<void>((r) => queueMicrotask(r));
          if (this.#pending.length === 0) break;
        }
        // Requests from now on open the next group.
        this.#assembling = false;
        if (done.length === 0) throw NOTHING_TO_COMMIT;
        let writes = merged[0]!;
        if (merged.length > 1) {
          writes = new Overlay(this.#line);
          for (const overlay of merged) writes.absorb(overlay);
        }
        await writeOverlay(sql, writes, stored, this.maxValueBytes);
        for (const row of history)
          await sql.run(
            "INSERT INTO doc_history (conversation_id, name, since_entry, value, version) VALUES (?, ?, ?, ?, ?)",
            row,
          );
        this.#line.notePatchRows(writes);
        patchRows = writes;
      });
    } catch (error) {
      this.#assembling = false;
      // Whatever the group merged on the line never reached the disk: back to the published state.
      if (done.length > 0) {
        this.#line = this.records.clone();
        this.#unpublished = [];
      }
      if (error === NOTHING_TO_COMMIT) {
        for (const { reject, error: e } of failed) reject(e);
        this.#retryAfterLoad(deferred);
        this.#restart();
        return undefined;
      }
      // Merged commits that did not reach COMMIT leave memory ahead of the disk.
      if (done.length > 0 || error instanceof StoreClosed) this.fail(error as Error);
      for (const { reject, error: e } of failed) reject(e);
      for (const d of done) d.reject(error);
      if (this.#fatal) {
        // Nothing will ever commit again: fail whatever still waits instead of retrying forever.
        for (const request of [...deferred.map((d) => d.request), ...this.#pending.splice(0)])
          request.reject(new HarnessClosed(`engine stopped: ${this.#fatal.message}`));
        return error;
      }
      // The store refused this group without running it (e.g. a fenced write): fail its head.
      if (done.length === 0 && failed.length === 0 && deferred.length === 0)
        this.#pending.shift()?.reject(error);
      this.#retryAfterLoad(deferred);
      this.#restart();
      return error;
    }
    for (const { reject, error } of failed) reject(error);
    // Stored: merge into the published records (in commit order), then tell the listeners.
    const changes = done.map((d) => this.records.merge(d.overlay));
    if (patchRows) this.records.notePatchRows(patchRows);
    // Published from here on; a later group's entries (merged meanwhile) have higher ids.
    const published = done.at(-1)!.overlay.nextEntryId;
    if (this.#unpublished.length > 0) this.#unpublished = this.#unpublished.filter((e) => e.id >= published);
    for (let i = 0; i < done.length; i++) {
      this.#publish(changes[i]!);
      done[i]!.resolve(done[i]!.value);
    }
    this.#retryAfterLoad(deferred);
    this.#restart();
    return undefined;
  }

  /**
   * The rewindable documents `overlay` (not merged yet) wrote, as doc_history rows. Whether a document
   * keeps its history is its incarnation's record's rule (spec §3.2), held in memory with it (no read):
   * a write's the live one's, a retirement's the one it ended.
   */
  #noteHistory(overlay: Overlay, history: HistoryRow[]): void {
    for (const [key, value] of overlay.docs) {
      const { rowKey, name } = splitDocKey(key);
      // Conversation documents only: session and task documents have no history (spec §3.1).
      if (rowKey <= 0) continue;
      const meta = overlay.docMetaOf(key) ?? overlay.base.docMeta.get(key);
      if (meta?.history !== "rewindable") continue;
      history.push([
        rowKey,
        name,
        overlay.firstEntryId,
        value === undefined ? null : JSON.stringify(value),
        overlay.docVersions.get(key) ?? overlay.base.docVersions.get(key) ?? 1,
      ]);
    }
  }

  #restart(): void {
    if (this.#pending.length > 0 && !this.#assembling) {
      this.#assembling = true;
      void this.#runGroup();
    }
  }

  fail(error: Error): void {
    if (this.#fatal) return;
    this.#fatal = error;
    this.onFatal(error);
  }

  /** A conversation's entries merged on the line and not published yet, in id order. */
  unpublishedEntries(conversationId: ConversationId): readonly EntryRecord[] {
    if (this.#unpublished.length === 0) return [];
    return this.#unpublished.filter((e) => e.conversationId === conversationId);
  }

  #publish(change: ChangeSet): void {
    for (const listener of this.#listeners) {
      try {
        listener(change);
      } catch {
        // Listeners must not throw; one that does is not allowed to break the line.
      }
    }
  }

  /** Keep a settled submission read from the store, where neither copy knows a newer one. */
  #remember(sub: SubmissionRecord): void {
    if (!this.records.submissions.has(sub.id)) this.records.putSubmission(sub);
    if (!this.#line.submissions.has(sub.id)) this.#line.putSubmission(sub);
  }

  /** A submission, from memory or from the store. */
  async submission(id: SubmissionId): Promise<SubmissionRecord | undefined> {
    const known = this.records.submissions.get(id);
    if (known) return known;
    const sub = await this.store.read(async (sql) => {
      const row = await sql.get("SELECT * FROM submissions WHERE id = ?", [id]);
      return row ? readSubmissionRow(sql, row) : undefined;
    });
    if (!sub) return undefined;
    this.#remember(sub);
    return sub;
  }

  /**
   * The submission a conversation admitted under `requestId`, if any: from memory, else from the
   * store (remembered either way, so a commit's lookup by the same key needs no read).
   */
  async submissionByRequest(
    conversationId: ConversationId,
    requestId: string,
  ): Promise<SubmissionRecord | undefined> {
    const key = `${conversationId}:${requestId}`;
    const known = this.records.requests.get(key);
    if (known !== undefined) return this.submission(known);
    if (this.records.requestsAbsent.has(key)) return undefined;
    // Read and remembered inside one job on the line: every commit merged before it is on disk.
    return this.store.read(async (sql) => {
      const row = await sql.get("SELECT * FROM submissions WHERE conversation_id = ? AND request_id = ?", [
        conversationId,
        requestId,
      ]);
      const sub = row ? await readSubmissionRow(sql, row) : undefined;
      if (sub) this.#remember(sub);
      else this.#rememberAbsent(key);
      return sub;
    });
  }

  /** Resolves once a commit's lookup of `requestId` in the conversation can answer from memory. */
  async ensureRequest(conversationId: ConversationId, requestId: string): Promise<void> {
    await this.submissionByRequest(conversationId, requestId);
  }

  /**
   * Resolves once a commit can read the owner edge of task `id` from memory: a task that ended before
   * this process opened is read from the store (its edge remembered in both copies, or its absence).
   */
  async ensureTaskEdge(id: TaskId): Promise<void> {
    if (this.records.ownerEdge(id) !== undefined || this.records.tasksAbsent.has(id)) return;
    // Read and remembered inside one job on the line: every commit merged before it is on disk.
    await this.store.read(async (sql) => {
      const row = await sql.get(`SELECT ${EDGE_COLUMNS} FROM tasks WHERE id = ?`, [id]);
      const edge = row ? edgeFromRow(row) : undefined;
      for (const r of [this.records, this.#line]) {
        if (r.tasks.has(id) || r.formerOwners.has(id)) continue;
        if (edge) r.formerOwners.set(id, edge);
        else r.tasksAbsent.add(id);
      }
    });
  }

  /** The store has no submission under this key: both copies answer so, unless one admitted it since. */
  #rememberAbsent(key: string): void {
    for (const r of [this.records, this.#line]) if (!r.requests.has(key)) r.requestsAbsent.add(key);
  }

  async entry(id: number): Promise<EntryRecord | undefined> {
    return this.store.read(async (sql) => {
      const row = await sql.get("SELECT * FROM entries WHERE id = ?", [id]);
      return row ? readEntryRow(sql, row) : undefined;
    });
  }

  /**
   * A conversation's visible entries in id order (a fork's inherited ones first: fork.ts), from
   * `afterId` (exclusive), at most `limit`.
   */
  entries(
    conversationId: ConversationId,
    options: { afterId?: number; limit?: number; upTo?: number } = {},
  ): Promise<EntryRecord[]> {
    return this.store.read(async (sql) => {
      await this.loadRecords(sql, [conversationId]);
      return readVisibleEntries(sql, this.segments(conversationId), options);
    });
  }

  /** A page of a conversation's active range: the `limit` entries before `before` in view order (pages.ts). */
  entryPage(
    conversationId: ConversationId,
    options: { before?: EntryId; limit: number },
  ): Promise<EntryPage> {
    return this.store.read(async (sql) => {
      await this.loadRecords(sql, [conversationId]);
      return readActivePage(sql, this.segments(conversationId), options);
    });
  }

  /** A task record, from memory or (for old terminal tasks) from the store. */
  async task(id: TaskId): Promise<TaskRecord | undefined> {
    const known = this.records.tasks.get(id);
    if (known) return known;
    const row = await this.store.read((sql) =>
      sql.get(`SELECT ${TASK_COLUMNS} FROM tasks WHERE id = ?`, [id]),
    );
    // Inert like a record in memory (records.ts inertTask): the caller gets a record, not a handle.
    return row ? inertTask(taskFromRow(row).record) : undefined;
  }
}

/**
 * Does this commit (not yet merged) only move running tasks to a new running checkpoint, or add a
 * memo? Such a commit cannot make work runnable or change a mark, a hold or a wait, so the scheduler
 * is not woken for it (the common phase-to-phase step of a busy engine). Anything else wakes it.
 */
function onlyCheckpointMoves(overlay: Overlay, records: Records): boolean {
  if (
    overlay.tasks.size === 0 ||
    overlay.created.size > 0 ||
    overlay.migratedInputs.size > 0 ||
    overlay.conversations.size > 0 ||
    overlay.entries.length > 0 ||
    overlay.docs.size > 0 ||
    overlay.submissions.size > 0 ||
    overlay.moves.size > 0 ||
    overlay.stagedParts.size > 0 ||
    overlay.unstaged.size > 0
  ) {
    return false;
  }
  for (const t of overlay.tasks.values()) {
    const before = records.tasks.get(t.id);
    if (
      before?.state.status !== "running" ||
      t.state.status !== "running" ||
      before.abortRequested !== t.abortRequested ||
      before.version !== t.version
    ) {
      return false;
    }
  }
  return true;
}
