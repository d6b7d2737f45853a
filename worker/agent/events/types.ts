/**
 * The agent events of one conversation (spec §9.4, experimental): the shapes a consumer receives.
 * Every event is relative to the `snapshot` and the events before it, never to the documents' layout;
 * a `snapshot` replaces everything a consumer holds. Pure types, no behaviour.
 */
import type { AssistantMessage, Message, Usage } from "@mariozechner/pi-ai";
import type { EntryRecord, Json, SubmissionId, SubmissionRecord, TaskId } from "../../core/types.ts";
import type {
  AgentState,
  CompactionReason,
  CompactionStatus,
  InboxItem,
  ToolDiagnostic,
  ToolSlot,
  UsageState,
} from "../records.ts";

/** An inbox item as events show it: its submission and mode, not its content. */
export interface InboxEventItem {
  readonly id: SubmissionId;
  readonly mode: InboxItem["mode"];
}

export interface SnapshotEvent {
  readonly type: "snapshot";
  /** The active range: the newest head marker (if any) and the entries after its head. */
  readonly entries: readonly EntryRecord[];
  readonly run?: { readonly inputs: readonly SubmissionId[] };
  /** The current generation attempt: its in-flight partial, retry backoff, or deferred poll. */
  readonly generation?: {
    readonly attempt: number;
    readonly message?: AssistantMessage;
    readonly retry?: { readonly at: number; readonly error: string };
    readonly deferred?: { readonly pollAt: number };
  };
  readonly tools: readonly ToolSlot[];
  readonly compactions: readonly CompactionStatus[];
  readonly inbox: readonly InboxEventItem[];
  /** `pi.agent`; `{}` when absent. */
  readonly agent: AgentState;
  readonly usage: UsageState;
}

type Block = AssistantMessage["content"][number];

/** One change to the in-flight assistant message, relative to that message. */
export type MessageChange =
  | {
      readonly type: "text_start" | "thinking_start" | "toolcall_start";
      readonly contentIndex: number;
      readonly block: Block;
    }
  | { readonly type: "text_delta" | "thinking_delta"; readonly contentIndex: number; readonly delta: string }
  | {
      readonly type: "toolcall_delta";
      readonly contentIndex: number;
      /** Where the string grew, relative to the call's `arguments`. */
      readonly path: readonly (string | number)[];
      readonly delta: string;
    }
  | { readonly type: "block"; readonly contentIndex: number; readonly block: Block }
  | { readonly type: "message"; readonly message: AssistantMessage };

/**
 * A tool's retained output window changed: `trimStart` characters (UTF-16 code units) dropped from
 * its front and then `append` added, or the whole window replaced by `set`.
 */
export type OutputChange =
  | { readonly trimStart?: number; readonly append?: string }
  | { readonly set: string };

export type AgentEvent =
  | SnapshotEvent
  | { readonly type: "run_start"; readonly inputs: readonly SubmissionId[] }
  | { readonly type: "run_end"; readonly inputs: readonly SubmissionId[] }
  | { readonly type: "turn_start" }
  | { readonly type: "turn_end" }
  | { readonly type: "message_start"; readonly message: Message }
  | { readonly type: "message_update"; readonly usage: Usage; readonly changes: readonly MessageChange[] }
  | { readonly type: "message_end"; readonly entry: EntryRecord }
  | {
      readonly type: "tool_execution_start";
      readonly toolCallId: string;
      readonly toolName: string;
      readonly args: Readonly<Record<string, Json>>;
    }
  | {
      readonly type: "tool_execution_update";
      readonly toolCallId: string;
      readonly toolName: string;
      readonly output?: OutputChange;
      /** The slot's current details; `null` once removed. */
      readonly details?: Json;
      /** The slot's current diagnostics (recorded through `api.diagnostic()`); `[]` once removed. */
      readonly diagnostics?: readonly ToolDiagnostic[];
    }
  /** `entry` is absent when the tool task faulted or was orphaned, or its run ended without one. */
  | {
      readonly type: "tool_execution_end";
      readonly toolCallId: string;
      readonly toolName: string;
      readonly entry?: EntryRecord;
    }
  | { readonly type: "inbox_update"; readonly items: readonly InboxEventItem[] }
  | { readonly type: "submission"; readonly record: SubmissionRecord }
  | {
      readonly type: "auto_retry_start";
      readonly attempt: number;
      readonly at: number;
      readonly errorMessage: string;
    }
  | { readonly type: "auto_retry_end"; readonly attempt: number }
  | { readonly type: "deferred_poll"; readonly pollAt: number }
  | { readonly type: "entry_appended"; readonly entry: EntryRecord }
  | { readonly type: "agent_changed"; readonly agent: AgentState }
  | { readonly type: "usage_changed"; readonly usage: UsageState }
  | { readonly type: "task_failed"; readonly taskId: TaskId; readonly kind: string; readonly message: string }
  | {
      readonly type: "compaction_start";
      readonly taskId: TaskId;
      readonly reason: CompactionReason;
      readonly blocking: boolean;
    }
  /** The task's receipt tells whether it produced a summary; the summary entry has its own events. */
  | { readonly type: "compaction_end"; readonly taskId: TaskId; readonly reason: CompactionReason };

export type AgentEventType = AgentEvent["type"];
