/**
 * Submissions and the inbox: admission rules, boundary placement and settlement. Every function
 * here runs inside one commit (it only writes through `tx`), so admission, placement and the run it
 * starts are atomic. Placement happens only at boundaries: after a tool round (`postTools`: writes
 * and steers) and when a run answers (`final`: writes, steers and follow-ups).
 */
import type { UserMessage } from "@mariozechner/pi-ai";
import type { Tx } from "../../core/define.ts";
import { HarnessError, InvalidTransition } from "../../core/errors.ts";
import type {
  ConversationId,
  EntryDraft,
  EntryRecord,
  Json,
  SubmissionId,
  SubmissionRecord,
} from "../../core/types.ts";
import {
  appendUser,
  DOC,
  ENTRY,
  type EntryDraftJson,
  type InboxItem,
  inbox,
  type LiveState,
  live,
  writeDoc,
} from "../records.ts";

export type QueueMode = "one-at-a-time" | "all";

export type SubmissionDraft =
  | {
      type: "input";
      content: UserMessage["content"];
      whenBusy?: "followUp" | "steer" | "reject";
      requestId?: string;
    }
  | { type: "write"; entry: EntryDraftJson; requestId?: string };

/** `whenBusy: "reject"` on a busy conversation. Nothing was written. */
export class ConversationBusy extends HarnessError {
  override readonly name = "ConversationBusy";
  constructor(conversationId: ConversationId) {
    super("conversation_busy", `conversation ${conversationId} is busy`);
  }
}

export interface InboxPolicy {
  steeringMode(): QueueMode;
  followUpMode(): QueueMode;
  /** Create the generation that answers `inputs`; returns its task id. */
  startGeneration(tx: Tx, conversationId: ConversationId): number;
}

function validateContent(content: unknown): asserts content is UserMessage["content"] {
  if (typeof content === "string") return;
  if (
    Array.isArray(content) &&
    content.every((c) => c && typeof c === "object" && (c.type === "text" || c.type === "image"))
  )
    return;
  throw new InvalidTransition("input content must be a string or a list of text and image parts");
}

/** An entry to write; `head: "self"` (a reset) becomes the entry's own id when it is appended. */
type Drafted = Omit<EntryDraft, "head"> & { head?: EntryDraft["head"] | "self" };

/** A write's entry draft, checked. Any host may write `head: "self"` (spec §2.2), not only reset(). */
function entryDraft(draft: EntryDraftJson): Drafted {
  if (!draft || typeof draft.kind !== "string" || draft.kind.length === 0)
    throw new InvalidTransition("a write needs an entry with a kind");
  const { head, ...rest } = draft;
  return { ...rest, ...(head !== undefined ? { head } : {}) } as Drafted;
}

function appendWrite(tx: Tx, conversationId: ConversationId, drafted: Drafted) {
  // Entry ids are global and increasing: the entry appended next gets lastEntryId() + 1.
  const head = drafted.head === "self" ? tx.lastEntryId() + 1 : drafted.head;
  return tx.appendEntry(conversationId, {
    ...drafted,
    ...(head !== undefined ? { head } : {}),
  } as EntryDraft);
}

/**
 * Whether a final boundary now would select a user item (a steer or a follow-up) or a reset: then an
 * onYield continuation is dropped (spec §6, §8.3).
 */
export function finalSelectsUser(tx: Tx, conversationId: ConversationId): boolean {
  return inbox(tx, conversationId).items.some(
    (i) => i.mode !== "write" || (i.mode === "write" && i.entry.head === "self"),
  );
}

/** A reset is queued: the next boundary starts a fresh context (see finishToolRound). */
export function resetQueued(tx: Tx, conversationId: ConversationId): boolean {
  return inbox(tx, conversationId).items.some((i) => i.mode === "write" && i.entry.head === "self");
}

/**
 * Admit a reset: a `pi.reset` write whose head is itself, so the active range starts over at it,
 * carrying the handoff (if any) as a user message. Placed like any write: at once when the
 * conversation is idle, else at the next boundary, where it ends the current run.
 */
export function admitReset(
  tx: Tx,
  policy: InboxPolicy,
  conversationId: ConversationId,
  handoff?: string,
): SubmissionRecord {
  return admit(tx, policy, conversationId, { type: "write", entry: resetDraft(tx, handoff) });
}

/** A `pi.reset` entry draft: head itself, the handoff (if any) as its user message. */
function resetDraft(tx: Tx, handoff: string | undefined): EntryDraftJson {
  if (handoff !== undefined && typeof handoff !== "string")
    throw new InvalidTransition("a reset's handoff must be text");
  const message: UserMessage | undefined =
    handoff === undefined ? undefined : { role: "user", content: handoff, timestamp: tx.now() };
  return {
    kind: ENTRY.reset,
    head: "self",
    ...(message ? { model: [message] as unknown as Json } : {}),
  };
}

/**
 * Append a reset at once (a tool round's handoff, spec §7.3, §8.5: the round's closing commit is
 * the boundary): the same entry `admitReset` places, with no submission.
 */
export function appendReset(tx: Tx, conversationId: ConversationId, handoff: string): EntryRecord {
  return appendWrite(tx, conversationId, entryDraft(resetDraft(tx, handoff)));
}

/**
 * A head write is stale when its head is older than where the active range starts now (the newest
 * head marker's head): placing it would bring back entries a newer head cut off. It is answered
 * `unanswered: stale` and dropped. User inputs and resets never become stale.
 */
function isStale(tx: Tx, conversationId: ConversationId, draft: Drafted): boolean {
  // A reset's head is itself: never stale.
  if (draft.head === undefined || draft.head === "self") return false;
  const start = tx.activeHead(conversationId);
  return start !== undefined && draft.head < start;
}

const WHEN_BUSY: ReadonlySet<unknown> = new Set(["steer", "followUp", "reject"]);

/** Admit a submission (inside a commit). Returns the stored record (existing one for a known requestId). */
export function admit(
  tx: Tx,
  policy: InboxPolicy,
  conversationId: ConversationId,
  draft: SubmissionDraft,
): SubmissionRecord {
  // Checked at the door, before anything is read or written (spec §2.2's SubmissionDraft).
  const type: unknown = draft.type;
  if (type !== "input" && type !== "write")
    throw new InvalidTransition(`a submission is an "input" or a "write", not ${JSON.stringify(type)}`);
  if (draft.type === "input" && draft.whenBusy !== undefined && !WHEN_BUSY.has(draft.whenBusy))
    throw new InvalidTransition(
      `whenBusy is "steer", "followUp" or "reject", not ${JSON.stringify(draft.whenBusy)}`,
    );
  if (draft.requestId !== undefined) {
    const existing = tx.submissionByRequest(conversationId, draft.requestId);
    if (existing) {
      if (existing.type !== draft.type)
        throw new InvalidTransition(`request ${draft.requestId} was a ${existing.type} submission`);
      return existing;
    }
  }
  const state = live(tx, conversationId);
  const busy = state.run !== undefined;
  const items = inbox(tx, conversationId).items;
  const base = { conversationId, ...(draft.requestId !== undefined ? { requestId: draft.requestId } : {}) };
  if (draft.type === "input") {
    validateContent(draft.content);
    if (busy && draft.whenBusy === "reject") throw new ConversationBusy(conversationId);
    if (!busy && items.length === 0) {
      const entry = appendUser(tx, conversationId, draft.content);
      const sub = tx.createSubmission({ ...base, type: "input", status: "placed", entry: entry.id });
      startRun(tx, policy, conversationId, [sub.id]);
      return sub;
    }
    const mode = draft.whenBusy === "steer" ? "steer" : "followUp";
    const sub = tx.createSubmission({
      ...base,
      type: "input",
      status: "queued",
      mode,
      payload: draft.content as Json,
    });
    enqueue(tx, conversationId, items, { id: sub.id, mode, content: draft.content });
    if (!busy) finalBoundary(tx, policy, conversationId);
    return tx.submission(sub.id)!;
  }
  const drafted = entryDraft(draft.entry);
  // The ordered passive path (spec §6): appended at once only when idle with an empty inbox;
  // otherwise every write, display-only ones too, queues behind what is waiting.
  if (!busy && items.length === 0) {
    if (isStale(tx, conversationId, drafted))
      return tx.createSubmission({ ...base, type: "write", status: "unanswered", reason: "stale" });
    const entry = appendWrite(tx, conversationId, drafted);
    return tx.createSubmission({ ...base, type: "write", status: "done", entry: entry.id });
  }
  const sub = tx.createSubmission({
    ...base,
    type: "write",
    status: "queued",
    payload: draft.entry as unknown as Json,
  });
  enqueue(tx, conversationId, items, { id: sub.id, mode: "write", entry: draft.entry });
  if (!busy) finalBoundary(tx, policy, conversationId);
  return tx.submission(sub.id)!;
}

export function startRun(
  tx: Tx,
  policy: InboxPolicy,
  conversationId: ConversationId,
  inputs: SubmissionId[],
): void {
  const taskId = policy.startGeneration(tx, conversationId);
  const state = live(tx, conversationId);
  writeDoc<LiveState>(tx, conversationId, DOC.live, { ...state, run: { taskId, inputs } });
}

/**
 * Add `item` at the end of the inbox. The inbox can hold thousands of queued items, so an item is
 * stored as a patch that adds it (doc-patch.ts), not as the whole list again: queueing costs the
 * same whatever the queue's length.
 */
function enqueue(tx: Tx, conversationId: ConversationId, items: readonly InboxItem[], item: InboxItem): void {
  if (tx.readDoc(conversationId, DOC.inbox) === undefined)
    writeDoc(tx, conversationId, DOC.inbox, { items: [...items, item] });
  else
    tx.patchDoc(conversationId, DOC.inbox, [{ path: ["items", items.length], set: item as unknown as Json }]);
}

/**
 * Take the items at `indexes` (increasing) out of the inbox, each as a patch that removes it, last
 * first so that each index still names its item: answering one of 10,000 queued follow-ups stores
 * one small row, not the 9,999 left (the patches are folded into one whole write every
 * PATCH_ROW_LIMIT rows).
 */
function dequeue(tx: Tx, conversationId: ConversationId, indexes: readonly number[]): void {
  if (indexes.length === 0) return;
  tx.patchDoc(
    conversationId,
    DOC.inbox,
    indexes.toReversed().map((i) => ({ path: ["items", i], remove: true as const })),
  );
}

/**
 * What a boundary takes from the inbox, in one pass over it: every write, and the steers (at
 * `postTools` and `final`) and follow-ups (at `final` only), all of them or the first one of each
 * as the queue modes say. One pass: the inbox can hold thousands of items and a boundary comes
 * with every answer.
 */
function select(
  items: readonly InboxItem[],
  steering: QueueMode,
  followUps: QueueMode | undefined,
): { writes: InboxItem[]; users: InboxItem[]; indexes: number[] } {
  const writes: InboxItem[] = [];
  const users: InboxItem[] = [];
  const indexes: number[] = [];
  let steers = 0;
  let follows = 0;
  items.forEach((item, i) => {
    if (item.mode === "write") writes.push(item);
    else if (item.mode === "steer") {
      if (steering === "one-at-a-time" && steers++ > 0) return;
      users.push(item);
    } else {
      if (followUps === undefined || (followUps === "one-at-a-time" && follows++ > 0)) return;
      users.push(item);
    }
    indexes.push(i);
  });
  // Placed in id order (a follow-up sent before a steer is placed before it).
  users.sort((a, b) => a.id - b.id);
  return { writes, users, indexes };
}

/** Place what a boundary selects; returns the ids of the user items placed (in id order). */
export function placeAtBoundary(
  tx: Tx,
  policy: InboxPolicy,
  conversationId: ConversationId,
  kind: "postTools" | "final",
): SubmissionId[] {
  const items = inbox(tx, conversationId).items;
  if (items.length === 0) return [];
  const { writes, users, indexes } = select(
    items,
    policy.steeringMode(),
    kind === "final" ? policy.followUpMode() : undefined,
  );
  for (const item of writes) {
    if (item.mode !== "write") continue;
    const drafted = entryDraft(item.entry);
    const { payload: _p, ...sub } = tx.submission(item.id)!;
    // Heads placed earlier at this boundary count: the active range may have moved past its target.
    if (isStale(tx, conversationId, drafted)) {
      tx.updateSubmission({ ...sub, status: "unanswered", reason: "stale" });
      continue;
    }
    const entry = appendWrite(tx, conversationId, drafted);
    tx.updateSubmission({ ...sub, status: "done", entry: entry.id });
  }
  const placed: SubmissionId[] = [];
  for (const item of users) {
    if (item.mode === "write") continue;
    const entry = appendUser(tx, conversationId, item.content);
    const { payload: _p, ...sub } = tx.submission(item.id)!;
    tx.updateSubmission({ ...sub, status: "placed", entry: entry.id });
    placed.push(item.id);
  }
  dequeue(tx, conversationId, indexes);
  return placed;
}

/** The run answered (or the conversation is idle with queued items): place, then start the next run. */
export function finalBoundary(tx: Tx, policy: InboxPolicy, conversationId: ConversationId): void {
  const placed = placeAtBoundary(tx, policy, conversationId, "final");
  const state = live(tx, conversationId);
  const { run: _run, generation: _g, tools: _t, ...rest } = state;
  writeDoc<LiveState>(tx, conversationId, DOC.live, rest);
  if (placed.length > 0) startRun(tx, policy, conversationId, placed);
}

export function settleInputs(
  tx: Tx,
  ids: readonly SubmissionId[],
  settlement: { status: "done"; answer: number } | { status: "unanswered"; reason: string; detail?: string },
): void {
  for (const id of ids) {
    const sub = tx.submission(id);
    if (!sub || sub.status === "done" || sub.status === "unanswered") continue;
    const { payload: _p, ...rest } = sub;
    tx.updateSubmission({ ...rest, ...settlement });
  }
}

/** Remove the run's presentation state (run, generation, tools) without touching the inbox. */
export function endRun(tx: Tx, conversationId: ConversationId): void {
  const { run: _run, generation: _g, tools: _t, ...rest } = live(tx, conversationId);
  writeDoc<LiveState>(tx, conversationId, DOC.live, rest);
}

/** Withdraw a queued item: unanswered `aborted`, out of the inbox. */
export function withdraw(tx: Tx, conversationId: ConversationId, id: SubmissionId): boolean {
  const index = inbox(tx, conversationId).items.findIndex((i) => i.id === id);
  if (index < 0) return false;
  dequeue(tx, conversationId, [index]);
  const { payload: _p, ...sub } = tx.submission(id)!;
  tx.updateSubmission({ ...sub, status: "unanswered", reason: "aborted" });
  return true;
}
