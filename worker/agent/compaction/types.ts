/**
 * The compaction task's durable shapes (spec §8.7): its input, checkpoints, result and the pinned
 * summary request, with the dependencies its phases share. Types only, plus the two outcomes every
 * phase may end with.
 */
import type { TaskDefinition, TaskRuntime } from "../../core/define.ts";
import type { EntryId, NextTaskState, RunningTask, SubmissionId, TaskRecord } from "../../core/types.ts";
import type { InboxPolicy } from "../conversation/inbox.ts";
import type { CompactionReason, ModelRef, ThinkingLevel } from "../records.ts";
import type { AgentServices, StreamSettings } from "../services.ts";

export interface CompactionInput {
  reason: CompactionReason;
  instructions?: string;
  /** Started by a generation that waits for it: the summary is appended directly. */
  blocking?: boolean;
}

/** Both absent when there was nothing to compact, or a hook declined. */
export interface CompactionResult {
  submissionId?: SubmissionId;
  entryId?: EntryId;
}

export interface SummaryRequest {
  attempt: number;
  model: ModelRef;
  thinkingLevel: ThinkingLevel;
  stream?: Omit<StreamSettings, "headers">;
  maxTokens: number;
  /** The newest entry the summary may cover, and the first one it keeps. */
  tail: EntryId;
  firstKept: EntryId;
}

export type CompactionCheckpoint =
  | { phase: "select" }
  | ({ phase: "summarize" } & SummaryRequest)
  | ({ phase: "retry"; until: number } & SummaryRequest);

export type CompactionDefinition = TaskDefinition<CompactionInput, CompactionCheckpoint, CompactionResult>;
export type CompactionRuntime = TaskRuntime<CompactionInput, CompactionCheckpoint, CompactionResult>;
export type CompactionTask = TaskRecord<CompactionInput, CompactionCheckpoint, CompactionResult>;
/** A compaction task while one of its phases runs, its checkpoint at phase `P`. */
export type CompactionAt<P extends CompactionCheckpoint["phase"]> = RunningTask<
  CompactionInput,
  Extract<CompactionCheckpoint, { phase: P }>,
  CompactionResult
>;
export type CompactionNext = NextTaskState<CompactionCheckpoint, CompactionResult>;

/** What the phases share: the services (hooks resolved at the phase's start) and the inbox rules. */
export interface CompactionDeps {
  readonly services: AgentServices;
  readonly policy: InboxPolicy;
}

export function completed(result: CompactionResult): CompactionNext {
  return { status: "terminal", outcome: { status: "completed", result } };
}

export function failed(error: { message: string; detail?: { reason: string } }): CompactionNext {
  return { status: "terminal", outcome: { status: "failed", error } };
}
