/**
 * The engine's types that travel to a tab, re-exported from where the engine defines them (once, in
 * the engine). Type-only: nothing here exists at run time, so importing it costs the tab no bytes.
 */

export type { AssistantMessage, Message as ModelMessage, Usage } from "@mariozechner/pi-ai";
export type {
  AgentEvent,
  AgentEventType,
  InboxEventItem,
  MessageChange,
  OutputChange,
  SnapshotEvent,
} from "../agent/events/types.ts";
export type { ModelChoice } from "../agent/models/keys.ts";
export type { KeyCheck, ProviderProblem } from "../agent/models/provider-problem.ts";
export type {
  ApprovalDecisionRecord,
  ApprovalState,
  CompactionStatus,
  InboxItem,
  InboxState,
  LiveState,
  ModelRef,
  ThinkingLevel,
  ToolPolicy,
  ToolSlot,
  UsageState,
} from "../agent/records.ts";
/** The built-in documents a view carries (`view.docs["pi.live"]`, `view.docs["pi.inbox"]`), typed. */
export type { ApprovalAnswer, ApprovalRequest } from "../agent/tools/approval.ts";
export type { UsageRollup } from "../agent/usage.ts";
export type { UsageDayRow, UsageDays, UsageDaysQuery } from "../agent/usage-days.ts";
export type { WorkspaceFile } from "../agent/workspace/browse.ts";
export type {
  HarnessInspection,
  TaskGraph,
  TaskGraphNode,
  TaskGraphState,
  TaskInspection,
  TaskInspectionState,
} from "../core/inspect.ts";
export type { EntryPage } from "../core/pages.ts";
export type { Blocked } from "../core/scheduler.ts";
export type {
  ConversationId,
  ConversationRecord,
  EntryEdit,
  EntryId,
  EntryRecord,
  Json,
  SubmissionId,
  TaskId,
  TaskStatus,
} from "../core/types.ts";
export type {
  ChangeFrame,
  ConversationView,
  SnapshotFrame,
  ViewChange,
  ViewOp,
  WatchFrame,
} from "../core/view-ops.ts";
