/**
 * Ownership rules, judged on a commit's candidate records (an overlay): cancellation intent, the
 * cascade of abort marks, failFast, the completing hold, and validation of waits (no self, no owner,
 * no cycle). Pure functions over `Overlay`; the scheduler and the runtime call them inside commits.
 */
import { InvalidTransition, OwnerNotLive, WaitCycle } from "./errors.ts";
import { sealBuilt } from "./persist.ts";
import { type Overlay, type OwnerEdge, patchTask } from "./records.ts";
import type {
  ConversationId,
  ConversationRecord,
  JoinPolicy,
  TaskId,
  TaskOutcome,
  TaskRecord,
} from "./types.ts";

/**
 * The owner of new owned work, if it may own it on the candidate records so far: a task that exists
 * and is not completing, terminal or abort-marked. Checked again on the commit's final candidate
 * records (`checkNewOwners`), so a task cannot own work it creates in the commit that finishes it.
 */
export function liveOwner(overlay: Overlay, id: TaskId): TaskRecord {
  const t = overlay.task(id);
  if (!t) throw new OwnerNotLive(`owner task ${id} does not exist`);
  const why =
    t.state.status === "completing" || t.state.status === "terminal"
      ? t.state.status
      : t.abortRequested
        ? "abort-marked"
        : undefined;
  if (why) throw new OwnerNotLive(`owner task ${id} is ${why} and cannot own new work`);
  return t;
}

/**
 * Judge the owners of the tasks and conversations a commit creates on its final candidate records
 * (before anything is stored): an owner finished or abort-marked later in the same commit refuses it.
 */
export function checkNewOwners(overlay: Overlay): void {
  for (const id of overlay.created) {
    const owner = overlay.tasks.get(id)?.owner;
    if (owner !== undefined) liveOwner(overlay, owner);
  }
  for (const c of overlay.conversations.values()) if (c.owner) liveOwner(overlay, c.owner.taskId);
}

/** A live owner's abort mark, or a held outcome other than completed. */
export function hasCancellationIntent(record: TaskRecord | undefined): boolean {
  if (!record || record.state.status === "terminal") return false;
  if (record.abortRequested) return true;
  return record.state.status === "completing" && record.state.outcome.status !== "completed";
}

export function outcomeOf(record: TaskRecord | undefined): TaskOutcome | undefined {
  if (!record) return undefined;
  const s = record.state;
  return s.status === "terminal" || s.status === "completing" ? s.outcome : undefined;
}

/**
 * Write `outcome` for `record`: terminal when its ordinary owned work is drained, otherwise held in
 * `completing`. Memos are dropped either way.
 */
export function finish(overlay: Overlay, record: TaskRecord, outcome: TaskOutcome, now: number): TaskRecord {
  const held = overlay.hasLiveOwnedWork(record.id);
  const next = held
    ? patchTask(record, { state: sealBuilt({ status: "completing", outcome }), memos: null })
    : patchTask(record, { state: sealBuilt({ status: "terminal", outcome }), memos: null, endedAt: now });
  overlay.setTask(next);
  return next;
}

/** Set the abort mark on a live task; returns whether it changed. */
export function mark(overlay: Overlay, id: TaskId): boolean {
  const t = overlay.task(id);
  if (!t || t.state.status === "terminal" || t.abortRequested) return false;
  overlay.setTask(patchTask(t, { abortRequested: true }));
  return true;
}

/**
 * Derive abort marks: the cascade below every cancelled owner, and failFast siblings. Walks live
 * tasks in id order, so owners (older) are judged before the work they own.
 */
export function deriveMarks(overlay: Overlay, liveIds: Iterable<TaskId>): TaskId[] {
  const marked: TaskId[] = [];
  for (const id of liveIds) {
    const t = overlay.task(id);
    if (!t || t.state.status === "terminal") continue;
    if (!t.abortRequested) {
      const owner = overlay.ownerTask(t);
      if (owner !== undefined && hasCancellationIntent(overlay.task(owner)) && mark(overlay, id))
        marked.push(id);
    }
    const s = overlay.task(id)!.state;
    if (s.status === "waiting" && s.policy === "failFast") {
      // A task holding or ending with a non-completed outcome fires the policy; the others awaited
      // are marked, never the failed ones themselves (a held failure stays unmarked while it drains).
      const failedIn = (w: TaskId) => {
        const o = outcomeOf(overlay.task(w));
        return o !== undefined && o.status !== "completed";
      };
      if (!s.on.some(failedIn)) continue;
      for (const w of s.on) if (!failedIn(w) && mark(overlay, w)) marked.push(w);
    }
  }
  return marked;
}

/**
 * The tasks that hold for `id` (its owner chain through owning tasks and owning conversations): a
 * wait on one of them would wait on a task that waits for it. The chain stops at a background task,
 * whose conversation's owner does not hold for it (spec §5.5), so a background task may wait on the
 * owner of its conversation.
 */
function ownerChain(overlay: Overlay, id: TaskId): Set<TaskId> {
  const chain = new Set<TaskId>();
  let t = overlay.task(id);
  while (t) {
    const up = overlay.ownerTask(t);
    if (up === undefined || chain.has(up)) break;
    chain.add(up);
    t = overlay.task(up);
  }
  return chain;
}

/** Refuse a wait on a missing task, on itself, on its owner chain, or one that closes a cycle. */
export function validateWait(
  overlay: Overlay,
  waiter: TaskRecord,
  on: readonly TaskId[],
  policy: JoinPolicy,
): void {
  if (!Array.isArray(on)) throw new InvalidTransition("waiting needs an `on` list of task ids");
  if (policy !== "failFast" && policy !== "allSettled")
    throw new InvalidTransition(`unknown join policy ${String(policy)}`);
  const owners = ownerChain(overlay, waiter.id);
  for (const id of on) {
    if (id === waiter.id) throw new WaitCycle(`task ${waiter.id} cannot wait on itself`);
    if (!overlay.exists(id)) throw new InvalidTransition(`task ${waiter.id} waits on missing task ${id}`);
    if (owners.has(id)) throw new WaitCycle(`task ${waiter.id} cannot wait on task ${id}, which owns it`);
    // A task that ended before this process opened is not in memory: its edge is read (TaskNotLoaded).
    if (policy === "failFast" && overlay.loadedEdge(id)?.owner !== waiter.id) {
      throw new InvalidTransition(
        `failFast waits only on owned tasks; task ${id} is not owned by ${waiter.id}`,
      );
    }
  }
  // Wait-for edges: a waiting task waits on its `on`; an owner waits on its ordinary owned work (spec
  // §5.5: it ends only once that drained, holding `completing` meanwhile): its live children and the
  // live non-background tasks of the conversations it owns.
  const seen = new Set<TaskId>();
  const stack = [...on];
  while (stack.length > 0) {
    const id = stack.pop()!;
    if (id === waiter.id)
      throw new WaitCycle(`waiting on [${on.join(", ")}] would close a cycle through task ${waiter.id}`);
    if (seen.has(id)) continue;
    seen.add(id);
    const t = overlay.task(id);
    if (!t || t.state.status === "terminal") continue;
    if (t.state.status === "waiting") stack.push(...t.state.on);
    stack.push(...overlay.liveOwnedWork(id));
  }
}

type OwnerView = {
  task(id: TaskId): TaskRecord | undefined;
  /** A task on an owner chain, also one that finished before this process opened. */
  ownerEdge(id: TaskId): OwnerEdge | undefined;
  conversation(id: ConversationId): ConversationRecord | undefined;
};

/**
 * Ordinary traversal from a conversation (spec §5.4), judged on `view`: the live tasks whose owner
 * chain (owner task, then the task owning the conversation, and so on up) reaches `conversationId`,
 * following owner edges whether or not those owners are still live. A background task is a
 * boundary (it and all below it are left out) unless `background` is set, also one that finished
 * before this process opened (its edge was read at open).
 */
export function ordinaryScope(
  view: OwnerView,
  liveIds: Iterable<TaskId>,
  conversationId: ConversationId,
  options: { background?: boolean } = {},
): TaskId[] {
  const out: TaskId[] = [];
  for (const id of liveIds) {
    const t = view.task(id);
    if (t && t.state.status !== "terminal" && reaches(view, t, conversationId, options.background === true))
      out.push(id);
  }
  return out;
}

function reaches(
  view: OwnerView,
  start: TaskRecord,
  target: ConversationId,
  crossBackground: boolean,
): boolean {
  let task: OwnerEdge | undefined = start;
  let conversation: ConversationId = start.conversationId;
  // Owner edges form a tree; the bound only guards against a corrupt store.
  for (let steps = 0; steps < 100_000; steps++) {
    if (task) {
      if (task.background && !crossBackground) return false;
      const owner: OwnerEdge | undefined = task.owner !== undefined ? view.ownerEdge(task.owner) : undefined;
      if (owner) {
        task = owner;
        continue;
      }
      // Conversation-owned, or (a corrupt store) its owner task is unknown.
      conversation = task.conversationId;
    }
    if (conversation === target) return true;
    const owner = view.conversation(conversation)?.owner;
    if (!owner) return false;
    task = view.ownerEdge(owner.taskId);
    conversation = owner.conversationId;
  }
  return false;
}
