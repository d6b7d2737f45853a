/**
 * Starting a compaction (spec §8.7), and its status in `pi.live.compactions`: the status is added in
 * the commit that creates the task and removed in the commit that decides its outcome (or by the
 * scheduler's cleanup when it faults or is orphaned). The three ways to start differ only in owner,
 * background flag and placement: manual (conversation-owned), background threshold
 * (conversation-owned, background), blocking threshold or overflow (owned by the waiting generation).
 */
import type { CreateTaskOptions, Tx } from "../../core/define.ts";
import type { ConversationId, TaskRecord } from "../../core/types.ts";
import { type CompactionStatus, DOC, type LiveState, readDoc, writeDoc } from "../records.ts";
import type { CompactionCheckpoint, CompactionDefinition, CompactionInput } from "./types.ts";

function writeStatuses(
  tx: Tx,
  c: ConversationId,
  change: (others: CompactionStatus[]) => CompactionStatus[],
  taskId: number,
): void {
  const state = readDoc<LiveState>(tx, c, DOC.live, {});
  const compactions = change((state.compactions ?? []).filter((s) => s.taskId !== taskId));
  const { compactions: _old, ...rest } = state;
  writeDoc<LiveState>(tx, c, DOC.live, compactions.length > 0 ? { ...rest, compactions } : rest);
}

/** Set a compaction's status (its attempt and any durable backoff). */
export function setStatus(
  tx: Tx,
  task: { readonly id: number; readonly conversationId: ConversationId; readonly input: CompactionInput },
  progress: Pick<CompactionStatus, "attempt" | "retry">,
): void {
  const status: CompactionStatus = {
    taskId: task.id,
    reason: task.input.reason,
    blocking: task.input.blocking === true,
    attempt: progress.attempt,
    ...(progress.retry ? { retry: progress.retry } : {}),
  };
  // Listed in task id order (spec §8.2): a status rewritten in its retry keeps its place.
  writeStatuses(
    tx,
    task.conversationId,
    (others) => [...others, status].sort((a, b) => a.taskId - b.taskId),
    task.id,
  );
}

/** Remove a compaction's status: in the commit that decides its outcome. */
export function clearStatus(
  tx: Tx,
  task: { readonly id: number; readonly conversationId: ConversationId },
): void {
  writeStatuses(tx, task.conversationId, (others) => others, task.id);
}

/** A compaction ended without running its own outcome commit (faulted, orphaned): drop its status. */
export function cleanUpFailedCompaction(tx: Tx, task: TaskRecord): void {
  clearStatus(tx, task);
}

function start(
  tx: Tx,
  definition: CompactionDefinition,
  conversationId: ConversationId,
  input: CompactionInput,
  options: CreateTaskOptions<CompactionCheckpoint>,
): number {
  const taskId = tx.createTask(definition, input, options);
  setStatus(tx, { id: taskId, conversationId, input }, { attempt: 1 });
  return taskId;
}

/**
 * Start a compaction the generation `ownerTask` waits for (a threshold or an overflow): owned by the
 * generation, so it is aborted with it; its summary is appended directly.
 */
export function startBlockingCompaction(
  tx: Tx,
  definition: CompactionDefinition,
  conversationId: ConversationId,
  ownerTask: number,
  reason: "threshold" | "overflow",
): number {
  return start(
    tx,
    definition,
    conversationId,
    { reason, blocking: true },
    {
      ownership: { kind: "task", taskId: ownerTask },
    },
  );
}

/**
 * Start a compaction nobody waits for (a background threshold): conversation-owned and background,
 * so it survives Conversation.abort(); its summary is placed through the inbox like a manual one's.
 */
export function startBackgroundCompaction(
  tx: Tx,
  definition: CompactionDefinition,
  conversationId: ConversationId,
): number {
  return start(
    tx,
    definition,
    conversationId,
    { reason: "threshold" },
    {
      ownership: { kind: "conversation" },
      conversationId,
      background: true,
    },
  );
}

/** Create a manual compaction of `conversationId` in this commit; returns its task id. */
export function startCompaction(
  tx: Tx,
  definition: CompactionDefinition,
  conversationId: ConversationId,
  instructions?: string,
): number {
  if (instructions !== undefined && typeof instructions !== "string")
    throw new TypeError("compaction instructions must be text");
  const input: CompactionInput = { reason: "manual", ...(instructions ? { instructions } : {}) };
  return start(tx, definition, conversationId, input, {
    ownership: { kind: "conversation" },
    conversationId,
  });
}
