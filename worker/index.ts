/**
 * The engine's public API. Runs in Node (tests, benchmarks) and in workers; no DOM.
 */
export { openStore, type OpenStoreOptions, type MemoryImage, type MemoryStore } from "./store/open.ts";
export {
  type Store,
  type StoreKind,
  type FaultPoint,
  type Sql,
  StoreClosed,
  StoreFailed,
  StoreOpenError,
} from "./store/types.ts";
export {
  defineTask,
  Registry,
  type AnyTaskDefinition,
  type CreateTaskOptions,
  type PhaseHandler,
  type TaskDefinition,
  type TaskRuntime,
  type Tx,
} from "./core/define.ts";
export * from "./core/errors.ts";
export { AbortRequested } from "./core/runtime.ts";
export {
  Harness,
  type AbortResult,
  type ConversationNode,
  type HarnessOptions,
  type Inspection,
  type TaskNode,
} from "./core/harness.ts";
export type { Blocked } from "./core/scheduler.ts";
export * from "./core/types.ts";
export { AgentHarness, type AgentHarnessOptions } from "./agent/harness.ts";
export { Conversation, Submission, type AgentChange, type Settlement } from "./agent/conversation.ts";
export { ConversationBusy, type SubmissionDraft, type QueueMode } from "./agent/inbox.ts";
export {
  DOC,
  ENTRY,
  defineDoc,
  defineEntry,
  type AgentState,
  type InboxState,
  type LiveState,
  type ModelRef,
  type ToolSlot,
  type UsageState,
} from "./agent/records.ts";
export type { AgentHooks, AgentSettings, BeforeToolDecision, StreamFn } from "./agent/services.ts";
export { defineTool, type ToolApi, type ToolDefinition, type ToolResult, OUTPUT_LIMITS } from "./agent/tool.ts";
export { builtinTools } from "./agent/tools/index.ts";
export { MemoryFs, OpfsFs, type WorkspaceFs } from "./agent/fs.ts";
export { createModelResolver, type ModelResolver } from "./agent/models.ts";
export { demoModel, registerDemoProvider, setDemoSpeed } from "./agent/demo-provider.ts";
export { deriveContext } from "./agent/context.ts";
export type { ConversationView, Frame, ViewOp, Watch } from "./core/observe.ts";
