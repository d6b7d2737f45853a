/**
 * Reading conversation records from the store on demand (issue 30: what serves live work is
 * O(live work), not O(store)). The session's records hold the conversations live work needs (read at
 * open) and the others once something named them; this module reads them by index.
 * Invariants it keeps for `Records`:
 * - a conversation's record is in memory with both of its chains upward: its fork ancestry (the
 *   parents whose history it reads: fork.ts `ancestry`) and its owner chain (the owner task's edge,
 *   that task's owner edges, and every conversation on the way: ownership.ts `reaches`), so a walk
 *   that starts from a loaded record never meets one that is not;
 * - the conversations a live task owns are in memory (read at open by `owner_task`; every later one
 *   is created in this process), so `liveOwnedWork` is complete;
 * - the conversations below one (owned by its tasks, transitively) and the forks that read their
 *   history are in memory once `Records.scopeLoaded` names it (`readScope`: a deletion
 *   needs them; read by `owner_conversation` and the parent index).
 * The reads take ids as one JSON parameter (`json_each`), so a statement's text does not depend on
 * how many there are.
 */
import { allOf, type Query, type Row, type Sql } from "../store/types.ts";
import { conversationFromRow } from "./persist.ts";
import type { LoadedConversations, OwnerEdge, Records } from "./records.ts";
import type { ConversationId, TaskId } from "./types.ts";

/** The columns of a task row its owner edge is read from (`edgeFromRow`). */
export const EDGE_COLUMNS = "id, conversation_id, owner_task, background";

/** A task's owner edge from a row of `EDGE_COLUMNS`. */
export function edgeFromRow(row: Row): OwnerEdge {
  return {
    id: Number(row["id"]),
    conversationId: Number(row["conversation_id"]),
    ...(row["owner_task"] !== null && row["owner_task"] !== undefined
      ? { owner: Number(row["owner_task"]) }
      : {}),
    background: Number(row["background"]) === 1,
  };
}

/** A JSON array parameter's ids, for `IN`. */
export const IN_IDS = "(SELECT value FROM json_each(?))";

/**
 * Reading the records of some conversations with both of their chains upward (see the header), in
 * rounds: each round is one statement per kind (conversations, owner edges), sent together
 * (`allOf`), and names what the next round reads; as many rounds as the chains are long. The open
 * sends its first round with its other reads (session.ts `load`); `readConversationClosure` runs
 * them all.
 */
export class ConversationClosure {
  readonly loaded: LoadedConversations = { conversations: [], edges: [] };
  readonly #records: Records;
  readonly #seen = new Set<ConversationId>();
  readonly #seenTasks = new Set<TaskId>();
  #want = new Set<ConversationId>();
  #wantTasks = new Set<TaskId>();
  /** Which kinds the round `next` gave asked for, in order. */
  #asked: Array<"conversations" | "edges"> = [];

  /** The records of `ids` not in `records` yet (a loaded record's chains were read with it). */
  constructor(records: Records, ids: Iterable<ConversationId> = []) {
    this.#records = records;
    this.need(ids);
  }

  /** Read these too (those not in memory and not asked yet), from the next round on. */
  need(ids: Iterable<ConversationId>): void {
    for (const id of ids) {
      if (
        Number.isSafeInteger(id) &&
        id >= 1 &&
        !this.#records.conversations.has(id) &&
        !this.#seen.has(id)
      ) {
        this.#seen.add(id);
        this.#want.add(id);
      }
    }
  }

  #needEdge(id: TaskId): void {
    if (this.#records.ownerEdge(id) === undefined && !this.#seenTasks.has(id)) {
      this.#seenTasks.add(id);
      this.#wantTasks.add(id);
    }
  }

  /** The next round's statements: none once the chains are complete. Hand their rows to `take`. */
  next(): Query[] {
    const queries: Query[] = [];
    this.#asked = [];
    if (this.#want.size > 0) {
      queries.push({
        sql: `SELECT * FROM conversations WHERE id IN ${IN_IDS}`,
        params: [JSON.stringify([...this.#want])],
      });
      this.#asked.push("conversations");
    }
    if (this.#wantTasks.size > 0) {
      queries.push({
        sql: `SELECT ${EDGE_COLUMNS} FROM tasks WHERE id IN ${IN_IDS}`,
        params: [JSON.stringify([...this.#wantTasks])],
      });
      this.#asked.push("edges");
    }
    this.#want = new Set();
    this.#wantTasks = new Set();
    return queries;
  }

  /** The rows of the round `next` gave, one array per statement in its order. */
  take(results: readonly (readonly Row[])[]): void {
    this.#asked.forEach((kind, i) => {
      for (const row of results[i] ?? []) {
        if (kind === "conversations") {
          const record = conversationFromRow(row);
          this.loaded.conversations.push(record);
          if (record.parent) this.need([record.parent.conversationId]);
          if (record.owner) {
            this.need([record.owner.conversationId]);
            this.#needEdge(record.owner.taskId);
          }
        } else {
          const edge = edgeFromRow(row);
          this.loaded.edges.push(edge);
          if (edge.owner !== undefined) this.#needEdge(edge.owner);
          this.need([edge.conversationId]);
        }
      }
    });
    this.#asked = [];
  }
}

/**
 * The records of `ids` not in `records` yet, with both of their chains upward (see the header), in
 * rounds of one batch each (`ConversationClosure`): as many rounds as the chains are long.
 */
export async function readConversationClosure(
  sql: Sql,
  records: Records,
  ids: Iterable<ConversationId>,
): Promise<LoadedConversations> {
  const closure = new ConversationClosure(records, ids);
  for (let queries = closure.next(); queries.length > 0; queries = closure.next())
    closure.take(await allOf(sql, queries));
  return closure.loaded;
}

/** The statement reading the ids of the conversations the tasks `owners` own (none when there are none). */
export function ownedByQuery(owners: readonly TaskId[]): Query | undefined {
  if (owners.length === 0) return undefined;
  return {
    sql: `SELECT id FROM conversations WHERE owner_task IN ${IN_IDS}`,
    params: [JSON.stringify(owners)],
  };
}

/**
 * The ids of the conversations below `id` (owned by its tasks, transitively) and of the forks of any
 * of them and of `id` itself: what a deletion of `id` must judge (a move needs only live work's, loaded).
 */
export async function readScope(sql: Sql, id: ConversationId): Promise<ConversationId[]> {
  const rows = await sql.all(
    `WITH RECURSIVE below(id) AS (
       SELECT ?
       UNION SELECT c.id FROM conversations c JOIN below ON c.owner_conversation = below.id)
     SELECT id FROM below
     UNION SELECT c.id FROM conversations c
       WHERE json_extract(c.parent, '$.conversationId') IN (SELECT id FROM below) AND c.parent IS NOT NULL`,
    [id],
  );
  return rows.map((row) => Number(row["id"]));
}
