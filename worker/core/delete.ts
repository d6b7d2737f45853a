/**
 * Deleting a conversation (`Tx.deleteConversation`): what goes with it and when it is refused. A
 * deletion takes the conversation and the conversations its tasks own (a subagent's, transitively),
 * and removes their entries, documents, tasks and submissions in the deleting commit (persist.ts).
 * Invariants:
 * - nothing left behind reads what is deleted: a conversation whose history a fork outside the
 *   deleted set reads is refused (`forked`); so is one a task owns (`owned`: it goes with its
 *   owner's conversation) and the root conversation (`root`: every open expects it);
 * - nothing live is deleted: a live task (background ones too) in the set refuses the deletion
 *   (`busy`); the caller stops the work first (abort, then wait). An unsettled submission with no
 *   live task beside it does not refuse it: nothing runs or would run it (a failed run leaves its
 *   follow-ups queued until the next submission places them), so it goes with its conversation and
 *   its waiters settle it unanswered, `deleted` (Submission.wait);
 * - ids are never reused: the deleting commit stores the id counters' high-water marks, which the
 *   session takes at open (session.ts), so a reopened store does not hand a deleted id out again.
 */
import { ConversationNotDeletable, UnknownConversation } from "./errors.ts";
import type { Overlay } from "./records.ts";
import { type ConversationId, type ConversationRecord, ROOT_CONVERSATION_ID, type TaskId } from "./types.ts";

/** The conversations a deletion of `id` removes (`id` first), or a typed refusal. */
export function deletionSet(o: Overlay, id: ConversationId): ConversationId[] {
  const record = o.conversation(id);
  if (!record) throw new UnknownConversation(id);
  if (id === ROOT_CONVERSATION_ID)
    throw new ConversationNotDeletable(id, "root", [], "the main conversation cannot be deleted");
  if (record.owner)
    throw new ConversationNotDeletable(
      id,
      "owned",
      [record.owner.conversationId],
      `conversation ${id} belongs to a task of conversation ${record.owner.conversationId}: delete that one instead`,
    );
  // The conversations below it and their forks, from memory: loaded first (ScopeNotLoaded reruns).
  o.needScope(id);
  const all: ConversationRecord[] = [];
  for (const c of o.base.conversations.values()) if (o.conversation(c.id) === c) all.push(c);
  for (const c of o.conversations.values())
    if (!o.base.conversations.has(c.id) && o.conversation(c.id)) all.push(c);
  // The set: the conversation and, transitively, the conversations its tasks own.
  const set = new Set([id]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const c of all)
      if (c.owner && set.has(c.owner.conversationId) && !set.has(c.id)) {
        set.add(c.id);
        grew = true;
      }
  }
  const forks = all
    .filter((c) => c.parent && set.has(c.parent.conversationId) && !set.has(c.id))
    .map((c) => c.id);
  if (forks.length > 0)
    throw new ConversationNotDeletable(
      id,
      "forked",
      forks,
      `conversation ${id} has forks that read its history (${forks.map((f) => `conversation ${f}`).join(", ")}): delete them first`,
    );
  const live: TaskId[] = [];
  const candidates = new Set<TaskId>([...o.base.live, ...o.created]);
  for (const taskId of candidates) {
    const t = o.task(taskId);
    if (t && t.state.status !== "terminal" && set.has(t.conversationId)) live.push(taskId);
  }
  if (live.length > 0)
    throw new ConversationNotDeletable(
      id,
      "busy",
      live.sort((a, b) => a - b),
      `conversation ${id} is still working (${live.length} live task${live.length === 1 ? "" : "s"}): stop it first`,
    );
  return [...set];
}
