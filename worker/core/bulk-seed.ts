/**
 * Bulk seeding for the growth bench (tests/bench/growth.bench.ts, through `debug.seedGrowth`): a store
 * made large in a few big transactions, by copying rows the engine itself wrote for a template. A
 * harness writing 100,000 conversations and a million entries commit by commit would take minutes;
 * SQLite copying rows inside one statement takes seconds.
 *
 * Invariants:
 * - Only for a bench's store. The rows are written past the harness's back: the harness that holds
 *   the store keeps its id counters and records in memory, so it must never commit again. The
 *   caller closes it (the page goes away, the engine with it) and the next engine's open reads the
 *   rows like any others (ids come from `max(id) + 1` at open).
 * - Every row is one the engine could have written: each new conversation is ownerless with a copy
 *   of the template's documents (each its own incarnation, alive from the start), its title named by
 *   its number; entries alternate a question and an answer (copies of the template's two entries,
 *   kind and body, with their text replaced), spread over the new conversations in order, so a newer
 *   conversation holds newer entries; terminal tasks are copies of a template terminal task, spread
 *   the same way.
 * - The first entry written (the oldest) also says `RARE_WORD`, which no other entry says: a search
 *   for it must reach the oldest rows.
 * - At most `SEED_BATCH` rows of one table per transaction.
 */
import type { Sql, Store } from "../store/types.ts";

/** A word only the oldest seeded entry holds. */
export const RARE_WORD = "zebrafinch";
/** Where the template's text stands in its entry bodies, replaced in each copy. */
export const SEED_MARKER = "@@SEED@@";
/** Rows of one table one transaction writes at most. */
const SEED_BATCH = 200_000;

export interface BulkSeed {
  /** A conversation whose documents every new conversation copies (it must have a `titleDoc`). */
  templateConversation: number;
  /** The document holding a conversation's `{ title }` (the app's): each copy's says its number. */
  titleDoc: string;
  /** A question's and an answer's entry id whose bodies hold `SEED_MARKER` where their text goes. */
  templateQuestion: number;
  templateAnswer: number;
  /** A terminal task every new task copies (kind, state, input), or none when `tasks` is 0. */
  templateTask?: number;
  conversations: number;
  entries: number;
  tasks: number;
  now: number;
}

const seq = "WITH RECURSIVE n(i) AS (SELECT ? UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?)";

async function nextId(sql: Sql, table: string): Promise<number> {
  return Number((await sql.get(`SELECT coalesce(max(id), 0) + 1 AS m FROM ${table}`))?.["m"] ?? 1);
}

/** Write `seed`'s rows in batches; resolves with the id of the first new conversation. */
export async function bulkSeed(store: Store, seed: BulkSeed): Promise<{ firstConversation: number }> {
  const { conversations: count, entries, tasks } = seed;
  if (count < 1) throw new RangeError("bulkSeed needs at least one conversation");
  const first = await store.read((sql) => nextId(sql, "conversations"));
  const titled = await store.read((sql) =>
    sql.get("SELECT 1 AS t FROM documents WHERE conversation_id = ? AND name = ?", [
      seed.templateConversation,
      seed.titleDoc,
    ]),
  );
  if (!titled) throw new RangeError(`bulkSeed's template conversation needs a ${seed.titleDoc} document`);
  const docCount = Number(
    (
      await store.read((sql) =>
        sql.get("SELECT count(*) AS k FROM documents WHERE conversation_id = ?", [seed.templateConversation]),
      )
    )?.["k"] ?? 0,
  );
  const batches = async (total: number, write: (sql: Sql, from: number, to: number) => Promise<void>) => {
    for (let from = 0; from < total; from += SEED_BATCH) {
      const to = Math.min(total, from + SEED_BATCH);
      await store.commit((sql) => write(sql, from, to));
    }
  };
  const perDocs = Math.max(1, Math.floor(SEED_BATCH / Math.max(1, docCount)));
  for (let from = 0; from < count; from += perDocs) {
    const to = Math.min(count, from + perDocs);
    await store.commit(async (sql) => {
      await sql.run(
        `${seq} INSERT INTO conversations (id, parent, owner_task, owner_conversation, created_at) SELECT ? + i, NULL, NULL, NULL, ? FROM n`,
        [from, to, first, seed.now],
      );
      const doc0 = await nextId(sql, "doc_records");
      // The template's documents numbered 0..k-1, each copied once per new conversation.
      const tpl = `tpl AS (SELECT ROW_NUMBER() OVER (ORDER BY d.name) - 1 AS j, d.name, d.value, d.seq, d.version, r.history, r.fork FROM documents d JOIN doc_records r ON r.id = d.doc_id WHERE d.conversation_id = ?)`;
      await sql.run(
        `${seq}, ${tpl} INSERT INTO doc_records (id, scope, row_key, conversation_id, task_id, kind, history, fork, created_at, retired_at)
         SELECT ? + (i - ?) * ? + j, 'conversation', ? + i, ? + i, NULL, name, history, fork, 0, NULL FROM n, tpl`,
        [from, to, seed.templateConversation, doc0, from, docCount, first, first],
      );
      await sql.run(
        `${seq}, ${tpl} INSERT INTO documents (conversation_id, name, value, seq, version, doc_id)
         SELECT ? + i, name, CASE WHEN name = ? THEN json_object('title', 'Seeded conversation ' || (i + 1)) ELSE value END,
           seq, version, ? + (i - ?) * ? + j FROM n, tpl`,
        [from, to, seed.templateConversation, first, seed.titleDoc, doc0, from, docCount],
      );
    });
  }
  // Each copy takes its template's kind with its body: the core names no entry kind of its own.
  const bodies = await store.read(async (sql) => {
    const entry = async (id: number) => {
      const row = await sql.get("SELECT kind, body FROM entries WHERE id = ?", [id]);
      return { kind: String(row?.["kind"]), body: String(row?.["body"]) };
    };
    return { question: await entry(seed.templateQuestion), answer: await entry(seed.templateAnswer) };
  });
  await batches(entries, async (sql, from, to) => {
    const entry0 = await nextId(sql, "entries");
    await sql.run(
      `${seq} INSERT INTO entries (id, conversation_id, kind, body, by_task, head)
       SELECT ? + i - ?, ? + (i * ? / ?),
         CASE i % 2 WHEN 0 THEN ? ELSE ? END,
         replace(CASE i % 2 WHEN 0 THEN ? ELSE ? END, ?,
           CASE WHEN i = 0 THEN '${RARE_WORD} ' ELSE '' END || CASE i % 2 WHEN 0 THEN 'Seeded question ' ELSE 'Seeded answer ' END || (i + 1)),
         NULL, NULL FROM n`,
      [
        from,
        to,
        entry0,
        from,
        first,
        count,
        entries,
        bodies.question.kind,
        bodies.answer.kind,
        bodies.question.body,
        bodies.answer.body,
        SEED_MARKER,
      ],
    );
  });
  if (tasks > 0 && seed.templateTask !== undefined) {
    const template = seed.templateTask;
    await batches(tasks, async (sql, from, to) => {
      const task0 = await nextId(sql, "tasks");
      await sql.run(
        `${seq} INSERT INTO tasks (id, conversation_id, kind, version, owner_task, background, abort_requested, status, state, input, memos, started_at, ended_at)
         SELECT ? + i - ?, ? + (i * ? / ?), t.kind, t.version, NULL, 0, 0, t.status, t.state, t.input, NULL, t.started_at, t.ended_at
         FROM n, (SELECT * FROM tasks WHERE id = ? AND status = 'terminal') t`,
        [from, to, task0, from, first, count, tasks, template],
      );
    });
  }
  return { firstConversation: first };
}
