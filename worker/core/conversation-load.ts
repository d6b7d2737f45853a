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
import type { Sql } from "../store/types.ts";
import { conversationFromRow } from "./persist.ts";
import type { LoadedConversations, OwnerEdge, Records } from "./records.ts";
import type { ConversationId, ConversationRecord, TaskId } from "./types.ts";

const IN_IDS = "(SELECT value FROM json_each(?))";

/**
 * The records of `ids` not in `known` yet, with both of their chains upward (see the header), in
 * rounds of one statement per kind: as many rounds as the chains are long.
 */
export async function readConversationClosure(
  sql: Sql,
  records: Records,
  ids: Iterable<ConversationId>,
): Promise<LoadedConversations> {
  const out: LoadedConversations = { conversations: [], edges: [] };
  const seen = new Set<ConversationId>();
  const seenTasks = new Set<TaskId>();
  let want = new Set<ConversationId>();
  let wantTasks = new Set<TaskId>();
  const needConversation = (id: ConversationId) => {
    if (Number.isSafeInteger(id) && id >= 1 && !records.conversations.has(id) && !seen.has(id)) {
      seen.add(id);
      want.add(id);
    }
  };
  const needEdge = (id: TaskId) => {
    if (records.ownerEdge(id) === undefined && !seenTasks.has(id)) {
      seenTasks.add(id);
      wantTasks.add(id);
    }
  };
  const climb = (record: ConversationRecord) => {
    if (record.parent) needConversation(record.parent.conversationId);
    if (record.owner) {
      needConversation(record.owner.conversationId);
      needEdge(record.owner.taskId);
    }
  };
  for (const id of ids) {
    needConversation(id);
    // A loaded record whose chains were read with it needs nothing; one created here has them too.
  }
  while (want.size > 0 || wantTasks.size > 0) {
    const conversations = want;
    const tasks = wantTasks;
    want = new Set();
    wantTasks = new Set();
    if (conversations.size > 0)
      for (const row of await sql.all(`SELECT * FROM conversations WHERE id IN ${IN_IDS}`, [
        JSON.stringify([...conversations]),
      ])) {
        const record = conversationFromRow(row);
        out.conversations.push(record);
        climb(record);
      }
    if (tasks.size > 0)
      for (const row of await sql.all(
        `SELECT id, conversation_id, owner_task, background FROM tasks WHERE id IN ${IN_IDS}`,
        [JSON.stringify([...tasks])],
      )) {
        const edge: OwnerEdge = {
          id: Number(row["id"]),
          conversationId: Number(row["conversation_id"]),
          ...(row["owner_task"] !== null ? { owner: Number(row["owner_task"]) } : {}),
          background: Number(row["background"]) === 1,
        };
        out.edges.push(edge);
        if (edge.owner !== undefined) needEdge(edge.owner);
        needConversation(edge.conversationId);
      }
  }
  return out;
}

/** The ids of the conversations the tasks `owners` own (the open reads those of the live tasks). */
export async function readOwnedBy(sql: Sql, owners: readonly TaskId[]): Promise<ConversationId[]> {
  if (owners.length === 0) return [];
  const rows = await sql.all(`SELECT id FROM conversations WHERE owner_task IN ${IN_IDS}`, [
    JSON.stringify(owners),
  ]);
  return rows.map((row) => Number(row["id"]));
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
