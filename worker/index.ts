/**
 * The engine's public API. Runs in Node (tests, benchmarks) and in workers; no DOM.
 */

export { type ContextView, deriveContext } from "./agent/conversation/context.ts";
export {
  type AgentChange,
  Conversation,
  configure,
  type ResolvedAgentView,
  type Settlement,
  Submission,
} from "./agent/conversation/handles.ts";
export { ConversationBusy, type QueueMode, type SubmissionDraft } from "./agent/conversation/inbox.ts";
export { type EnvBuilder, type EnvTarget, type ExecutionEnv, workspaceEnv } from "./agent/env.ts";
export {
  AgentEventStream,
  type WatchEventsOptions,
  watchEvents,
} from "./agent/events/stream.ts";
export type {
  AgentEvent,
  AgentEventType,
  InboxEventItem,
  MessageChange,
  OutputChange,
  SnapshotEvent,
} from "./agent/events/types.ts";
export { defineExtension, section, wrapSection, wrapTool } from "./agent/extensions/define.ts";
export {
  type BuiltinTaskName,
  type HookApi,
  type HookHandler,
  type HookRegistration,
  hook,
  type TaskHooks,
} from "./agent/extensions/hooks.ts";
export {
  createRegistry,
  ExtensionInvalid,
  type ExtensionRegistry,
  RegistryInvalid,
  type RegistryReader,
  type RegistrySnapshot,
} from "./agent/extensions/registry.ts";
export { type AgentHookRunner, agentHooks } from "./agent/extensions/task-hooks.ts";
export type { Extension, PromptInput, PromptSection, ResolvedAgent, Wrap } from "./agent/extensions/types.ts";
export { AgentHarness, type AgentHarnessOptions, OPTIONS_EXTENSION } from "./agent/harness.ts";
export {
  createModelResolver,
  type DeferredAnswer,
  type DeferredHandle,
  isDeferred,
  type ModelResolver,
} from "./agent/models/resolver.ts";
export { ALWAYS_ONLINE, type NetworkState } from "./agent/network.ts";
export {
  type AgentState,
  DOC,
  type DocDefinition,
  type DocToken,
  defineDoc,
  defineEntry,
  ENTRY,
  type InboxState,
  type LiveState,
  type ModelRef,
  type SessionDocToken,
  type TaskDocToken,
  type ToolDiagnostic,
  type ToolSlot,
  type UsageState,
} from "./agent/records.ts";
export type {
  AgentHooks,
  AgentSettings,
  BeforeCompactDecision,
  BeforeCompactInput,
  BeforeToolDecision,
  StreamFn,
  StreamSettings,
} from "./agent/services.ts";
export {
  CODEMODE_TOOL,
  type CodemodeOptions,
  CpuSliceExceeded,
  CpuTimeExceeded,
  createCodemodeTool,
  DEFAULT_SANDBOX_LIMITS,
  MemoryLimitExceeded,
  NestedCallLimitExceeded,
  OutputLimitExceeded,
  ReplayDiverged,
  SandboxLimitError,
  type SandboxLimits,
  ScriptError,
  StackLimitExceeded,
} from "./agent/tools/builtin/codemode.ts";
export { builtinTools, builtinToolsExtension } from "./agent/tools/builtin/index.ts";
export { createSubagentTool, SUBAGENT_TASK } from "./agent/tools/builtin/subagent.ts";
export {
  defineTool,
  errorResult,
  NestedCallMismatch,
  OUTPUT_LIMITS,
  type ReplayPolicy,
  type ToolApi,
  type ToolConversation,
  type ToolDefinition,
  type ToolExecutionMode,
  type ToolInput,
  type ToolResult,
  type ToolSettlement,
  type ToolSubmission,
  textResult,
} from "./agent/tools/contract.ts";
export type { OutputLimits } from "./agent/tools/limits.ts";
export { isInterruptedResult, isToolResultEntry, type ToolResultEntry } from "./agent/tools/results.ts";
export { sumUsage, type UsageRollup } from "./agent/usage.ts";
export type { WorkspaceFs } from "./agent/workspace/fs.ts";
export { MemoryFs } from "./agent/workspace/memory-fs.ts";
export { demoModel, registerDemoProvider, setDemoSpeed } from "./app/demo-model.ts";
export {
  harnessPeer,
  type MoveIntent,
  type MovePeer,
  type MoveResult,
  Moves,
  moveOps,
} from "./app/moves.ts";
export { OpfsFs } from "./browser/opfs-fs.ts";
export {
  type AnyTaskDefinition,
  type CreateTaskOptions,
  defineTask,
  type HookRunner,
  type MoveIds,
  type PhaseHandler,
  Registry,
  type TaskDefinition,
  type TaskMoveHooks,
  type TaskRuntime,
  type Tx,
} from "./core/define.ts";
export type { DocPatch, DocPath } from "./core/doc-patch.ts";
export { type DocumentSnapshot, DocumentState } from "./core/documents.ts";
export * from "./core/errors.ts";
export { type AbortResult, Harness, type HarnessOptions } from "./core/harness.ts";
export type {
  HarnessInspection,
  TaskGraph,
  TaskGraphNode,
  TaskGraphState,
  TaskInspection,
  TaskInspectionState,
} from "./core/inspect.ts";
export {
  checkPackage,
  MOVE_FORMAT,
  MOVE_VERSION,
  type MovedEntry,
  type MovedSubmission,
  type MovedTask,
  type MoveHooks,
  type MovePackage,
  type RefuseAnswer,
} from "./core/move.ts";
export type { ConversationView, Frame, ViewChange, ViewOp, Watch } from "./core/observe.ts";
export { AbortRequested } from "./core/runtime.ts";
export type { Blocked } from "./core/scheduler.ts";
export { MAX_TIMER_DELAY_MS, type TimerPort, timerWait } from "./core/timers.ts";
export * from "./core/types.ts";
export { type MemoryImage, type MemoryStore, type OpenStoreOptions, openStore } from "./store/open.ts";
export {
  type FaultPoint,
  type Sql,
  type Store,
  StoreClosed,
  StoreFailed,
  type StoreKind,
  StoreOpenError,
} from "./store/types.ts";
