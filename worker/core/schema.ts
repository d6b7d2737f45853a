/**
 * The core's tables: the numbered schema migrations and where the owner epoch lives. The store knows
 * no table; the core hands it this `schema` (`Store.migrate`, first thing a session's load does), and
 * every query over these tables lives in the core. `migrations[i]` takes a store from `user_version`
 * i to i + 1; all pending ones run in one transaction. Never edit a shipped migration: append one.
 */
import type { Schema, Store } from "../store/types.ts";

export const migrations: readonly string[] = [
  // 1: the engine's records.
  `
  CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
  CREATE TABLE conversations (
    id INTEGER PRIMARY KEY,
    parent TEXT,
    owner_task INTEGER,
    owner_conversation INTEGER,
    created_at INTEGER NOT NULL
  );
  CREATE TABLE entries (
    id INTEGER PRIMARY KEY,
    conversation_id INTEGER NOT NULL,
    kind TEXT NOT NULL,
    body TEXT NOT NULL,
    by_task INTEGER
  );
  CREATE INDEX entries_by_conversation ON entries (conversation_id, id);
  CREATE TABLE tasks (
    id INTEGER PRIMARY KEY,
    conversation_id INTEGER NOT NULL,
    kind TEXT NOT NULL,
    version INTEGER NOT NULL,
    owner_task INTEGER,
    background INTEGER NOT NULL DEFAULT 0,
    abort_requested INTEGER NOT NULL DEFAULT 0,
    status TEXT NOT NULL,
    state TEXT NOT NULL,
    input TEXT NOT NULL,
    memos TEXT,
    started_at INTEGER,
    ended_at INTEGER
  );
  CREATE INDEX tasks_live ON tasks (status) WHERE status <> 'terminal';
  CREATE TABLE documents (
    conversation_id INTEGER NOT NULL,
    name TEXT NOT NULL,
    value TEXT NOT NULL,
    seq INTEGER NOT NULL,
    PRIMARY KEY (conversation_id, name)
  );
  CREATE TABLE submissions (
    id INTEGER PRIMARY KEY,
    conversation_id INTEGER NOT NULL,
    request_id TEXT,
    body TEXT NOT NULL
  );
  CREATE UNIQUE INDEX submissions_by_request ON submissions (conversation_id, request_id)
    WHERE request_id IS NOT NULL;
  `,
  // 2: document patches (worker/core/doc-patch.ts): a streaming writer's changes stored as they come,
  // replayed in id order on the document's row at open; a whole write of the document deletes them.
  // And each document's definition version (typed documents migrate older stored values), and
  // entries' head markers in a column of their own, so open finds each conversation's newest one.
  `
  CREATE TABLE doc_patches (
    id INTEGER PRIMARY KEY,
    conversation_id INTEGER NOT NULL,
    name TEXT NOT NULL,
    op TEXT NOT NULL
  );
  CREATE INDEX doc_patches_by_doc ON doc_patches (conversation_id, name);
  ALTER TABLE documents ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
  ALTER TABLE entries ADD COLUMN head INTEGER;
  UPDATE entries SET head = json_extract(body, '$.head') WHERE json_extract(body, '$.head') IS NOT NULL;
  CREATE INDEX entries_heads ON entries (conversation_id, id) WHERE head IS NOT NULL;
  `,
  // 3: the history of documents a fork copies as of its entry (worker/core/fork.ts): each commit that
  // writes one adds a row with the first entry id that commit could append (value NULL: deleted).
  `
  CREATE TABLE doc_history (
    id INTEGER PRIMARY KEY,
    conversation_id INTEGER NOT NULL,
    name TEXT NOT NULL,
    since_entry INTEGER NOT NULL,
    value TEXT,
    version INTEGER NOT NULL DEFAULT 1
  );
  CREATE INDEX doc_history_by_doc ON doc_history (conversation_id, name, since_entry);
  `,
  // 4: indexes for the reads an open and the tab's first calls make, so none of them scans a table
  // that grows with history (issue 16): the live tasks (tasks_live exists; the open names it), the
  // unsettled submissions, and one document's value across conversations (the conversation list's
  // titles and run states, usage totals).
  `
  CREATE INDEX submissions_unsettled ON submissions (id)
    WHERE json_extract(body, '$.status') IN ('queued', 'placed');
  CREATE INDEX documents_by_name ON documents (name);
  CREATE INDEX doc_patches_by_name ON doc_patches (name, id);
  `,
  // 5: moves of conversations between stores (worker/core/move.ts): one row per transfer id and role
  // ("out" on the sender, "in" on the receiver), its record as JSON. All are read at open.
  `
  CREATE TABLE moves (
    transfer TEXT NOT NULL,
    role TEXT NOT NULL,
    conversation_id INTEGER,
    body TEXT NOT NULL,
    PRIMARY KEY (transfer, role)
  );
  `,
  // 6: a move package's parts as they arrive (move.ts `stage`): one row per transfer id and part
  // index, the parts' count and UTF-8 size beside the text; the adopt or refuse commit deletes them.
  `
  CREATE TABLE move_parts (
    transfer TEXT NOT NULL,
    idx INTEGER NOT NULL,
    count INTEGER NOT NULL,
    bytes INTEGER NOT NULL,
    part TEXT NOT NULL,
    PRIMARY KEY (transfer, idx)
  );
  `,
  // 7: the document model (spec §3.2, worker/core/records.ts): each document is an incarnation with
  // an id never reused, a scope and a lifetime [created_at, retired_at) in commit positions (the
  // first entry id the commit could append). `row_key` is the number the scope's rows are keyed by
  // in `documents` (a conversation's id, 0 for the session, minus a task's id); `conversation_id`
  // is the conversation a deletion takes it with (a task document's: its task's). Existing
  // documents become incarnations alive from the start (created_at 0), with the ids of their rows;
  // a document whose history ends deleted becomes one retired at its last deletion, so snapshotAsOf
  // finds every value doc_history holds. Nothing is rewritten but the new column. Stores at 7 may
  // also hold patches that remove an item of an array (doc-patch.ts `remove`, the inbox's way of
  // taking an answered item off): a build before 7 would skip such a row, so it must refuse the store.
  `
  CREATE TABLE doc_records (
    id INTEGER PRIMARY KEY,
    scope TEXT NOT NULL,
    row_key INTEGER NOT NULL,
    conversation_id INTEGER,
    task_id INTEGER,
    kind TEXT NOT NULL,
    history TEXT,
    fork TEXT,
    created_at INTEGER NOT NULL,
    retired_at INTEGER
  );
  CREATE INDEX doc_records_by_address ON doc_records (row_key, kind, created_at);
  CREATE INDEX doc_records_by_conversation ON doc_records (conversation_id);
  CREATE INDEX doc_records_live_tasks ON doc_records (task_id) WHERE scope = 'task' AND retired_at IS NULL;
  ALTER TABLE documents ADD COLUMN doc_id INTEGER;
  UPDATE documents SET doc_id = rowid;
  INSERT INTO doc_records (id, scope, row_key, conversation_id, kind, history, created_at)
    SELECT d.rowid, 'conversation', d.conversation_id, d.conversation_id, d.name,
      CASE WHEN EXISTS (SELECT 1 FROM doc_history h WHERE h.conversation_id = d.conversation_id AND h.name = d.name)
        THEN 'rewindable' ELSE 'latest' END,
      0
    FROM documents d;
  INSERT INTO doc_records (scope, row_key, conversation_id, kind, history, created_at, retired_at)
    SELECT 'conversation', h.conversation_id, h.conversation_id, h.name, 'rewindable', 0, max(h.since_entry)
    FROM doc_history h
    WHERE NOT EXISTS (SELECT 1 FROM documents d WHERE d.conversation_id = h.conversation_id AND d.name = h.name)
    GROUP BY h.conversation_id, h.name;
  `,
  // 8: values out of line (worker/core/spill.ts, decision 0016): an entry's or a submission's long
  // strings in parts below a bounded row (a Durable Object's 2 MB), content-addressed, and which
  // conversations refer to each address (a deletion frees the parts no conversation names).
  `
  CREATE TABLE spills (
    hash TEXT NOT NULL,
    idx INTEGER NOT NULL,
    count INTEGER NOT NULL,
    part TEXT NOT NULL,
    PRIMARY KEY (hash, idx)
  );
  CREATE TABLE spill_refs (
    hash TEXT NOT NULL,
    conversation_id INTEGER NOT NULL,
    PRIMARY KEY (conversation_id, hash)
  );
  CREATE INDEX spill_refs_by_hash ON spill_refs (hash);
  `,
  // 9: conversation records loaded on demand (issue 30): the open reads the conversations live tasks
  // own, a deletion or a move the conversations a conversation's tasks own and the forks reading its
  // history, and the app's list pages the top-level conversations: each by an index, not by reading
  // every conversation.
  `
  CREATE INDEX conversations_by_owner_task ON conversations (owner_task) WHERE owner_task IS NOT NULL;
  CREATE INDEX conversations_by_owner ON conversations (owner_conversation) WHERE owner_conversation IS NOT NULL;
  CREATE INDEX conversations_by_parent ON conversations (json_extract(parent, '$.conversationId'))
    WHERE parent IS NOT NULL;
  CREATE INDEX conversations_top_level ON conversations (id) WHERE owner_task IS NULL;
  `,
];

export const SCHEMA_VERSION = migrations.length;

/**
 * The core's schema as the store takes it. The owner epoch is a row of `meta` (every build since the
 * epoch exists checks it there, so an older engine still running is fenced by a newer one's bump).
 */
export const schema: Schema = {
  migrations,
  epoch: {
    read: "SELECT value FROM meta WHERE key = 'epoch'",
    bump: "INSERT INTO meta (key, value) VALUES ('epoch', '1') ON CONFLICT (key) DO UPDATE SET value = CAST(value AS INTEGER) + 1",
  },
};

/** Bring `store` to the core's schema (a store opened outside a harness: a bench's scratch store). */
export function migrateStore(store: Store): Promise<void> {
  return store.migrate(schema);
}
