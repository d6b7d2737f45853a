/**
 * pi.compaction (spec §8.7): the older part of the active context is summarized by the conversation's
 * model into one `pi.compaction` entry whose head is the first kept entry, so later requests see the
 * summary followed by the recent entries. Raw history stays stored.
 *
 * Phases: `select` (select.ts) picks the cut, asks the `beforeCompact` hooks, and pins the summary
 * request (model, thinking, stream options, maxTokens, the range) in one commit; `summarize`
 * (summary.ts) sends it (a restart resends the same request) and classifies the answer; `retry`
 * waits out a retryable error's durable backoff. The summary is placed as a head write (requestId
 * `compaction:<taskId>`), so it follows the inbox rules: at once when idle, else at the next
 * boundary, and stale when a newer head moved the active range past its cut; a blocking compaction
 * appends it directly. The task does not take run control; its status lives in pi.live.compactions
 * until its outcome commit (start.ts). This module wires the phases.
 */
import { defineTask } from "../../core/define.ts";
import type { InboxPolicy } from "../conversation/inbox.ts";
import { compactionMoveIds } from "../move-ids.ts";
import { withModelId } from "../records.ts";
import { type AgentServices, atPhaseStart, sleepUntil } from "../services.ts";
import { select } from "./select.ts";
import { cleanUpFailedCompaction, clearStatus, setStatus } from "./start.ts";
import { classifySummary, requestSummary } from "./summary.ts";
import type {
  CompactionAt,
  CompactionCheckpoint,
  CompactionDefinition,
  CompactionDeps,
  CompactionInput,
  CompactionResult,
  CompactionRuntime,
  CompactionTask,
} from "./types.ts";

export type { CompactionReason, CompactionStatus } from "../records.ts";
export { SUMMARY_SYSTEM_PROMPT } from "./range.ts";
export {
  cleanUpFailedCompaction,
  startBackgroundCompaction,
  startBlockingCompaction,
  startCompaction,
} from "./start.ts";
export type {
  CompactionCheckpoint,
  CompactionDefinition,
  CompactionInput,
  CompactionResult,
} from "./types.ts";

export function createCompactionTask(services: AgentServices, policy: InboxPolicy): CompactionDefinition {
  // Each phase resolves its hooks once, at its start (spec §7.5).
  const phaseDeps = (task: { conversationId: number }): CompactionDeps => ({
    services: atPhaseStart(services, task.conversationId),
    policy,
  });
  return defineTask<CompactionInput, CompactionCheckpoint, CompactionResult>({
    name: "pi.compaction",
    cleanUp: cleanUpFailedCompaction,
    moveIds: compactionMoveIds,
    // Version 2: a pinned summary request's `model` is `{ provider, modelId }` (version 1 stored `id`).
    version: 2,
    migrate: (input, checkpoint) => ({
      input: input as unknown as CompactionInput,
      checkpoint: withModelId(checkpoint) as CompactionCheckpoint,
    }),
    initial: () => ({ phase: "select" }),
    phases: {
      select: (task, runtime, signal) => select(phaseDeps(task), task, runtime, signal),
      summarize: (task, runtime, signal) => summarize(phaseDeps(task), task, runtime, signal),
      retry: (task, runtime, signal) => retry(services, task, runtime, signal),
    },
    abort: (task, runtime) => abort(task, runtime),
  });
}

/** Send the pinned request, then classify its answer in one commit. */
async function summarize(
  deps: CompactionDeps,
  task: CompactionAt<"summarize">,
  runtime: CompactionRuntime,
  signal: AbortSignal,
): Promise<void> {
  const { phase: _p, ...cp } = task.state.checkpoint;
  const answer = await requestSummary(deps, task, cp, signal);
  await runtime.commit((tx) => classifySummary(deps, tx, task, cp, answer));
}

/** Sleep out the durable backoff, then summarize again with the next attempt and the same request. */
async function retry(
  services: AgentServices,
  task: CompactionAt<"retry">,
  runtime: CompactionRuntime,
  signal: AbortSignal,
): Promise<void> {
  const { phase: _p, until, ...cp } = task.state.checkpoint;
  services.wakeAt(until);
  await sleepUntil(until, () => runtime.now(), signal);
  await runtime.commit((tx) => {
    const next = { ...cp, attempt: cp.attempt + 1 };
    setStatus(tx, task, { attempt: next.attempt });
    return { status: "running", checkpoint: { phase: "summarize", ...next } };
  });
}

/** Remove the status and end aborted; no entry is written. */
async function abort(task: CompactionTask, runtime: CompactionRuntime): Promise<void> {
  await runtime.commit((tx) => {
    clearStatus(tx, task);
    return { status: "terminal", outcome: { status: "aborted", reason: "aborted" } };
  });
}
