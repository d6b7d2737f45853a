/**
 * The engine's public API. Runs in Node (tests, benchmarks) and in workers; no DOM.
 */

export { deriveContext } from "./agent/context.ts";
export { type AgentChange, Conversation, type Settlement, Submission } from "./agent/conversation.ts";
export { demoModel, registerDemoProvider, setDemoSpeed } from "./agent/demo-provider.ts";
export { MemoryFs, OpfsFs, type WorkspaceFs } from "./agent/fs.ts";
export { AgentHarness, type AgentHarnessOptions } from "./agent/harness.ts";
export { ConversationBusy, type QueueMode, type SubmissionDraft } from "./agent/inbox.ts";
export {
  createModelResolver,
  type DeferredAnswer,
  type DeferredHandle,
  isDeferred,
  type ModelResolver,
} from "./agent/models.ts";
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
  type ToolSlot,
  type UsageState,
} from "./agent/records.ts";
export type {
  AgentHooks,
  AgentSettings,
  BeforeToolDecision,
  StreamFn,
  StreamSettings,
} from "./agent/services.ts";
export {
  defineTool,
  OUTPUT_LIMITS,
  type ToolApi,
  type ToolDefinition,
  type ToolExecutionMode,
  type ToolResult,
} from "./agent/tool.ts";
export { builtinTools } from "./agent/tools/index.ts";
export {
  type AnyTaskDefinition,
  type CreateTaskOptions,
  defineTask,
  type PhaseHandler,
  Registry,
  type TaskDefinition,
  type TaskRuntime,
  type Tx,
} from "./core/define.ts";
export type { DocPatch, DocPath } from "./core/doc-patch.ts";
export * from "./core/errors.ts";
export {
  type AbortResult,
  type ConversationNode,
  Harness,
  type HarnessOptions,
  type Inspection,
  type TaskNode,
} from "./core/harness.ts";
export type { ConversationView, Frame, ViewOp, Watch } from "./core/observe.ts";
export { AbortRequested } from "./core/runtime.ts";
export type { Blocked } from "./core/scheduler.ts";
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
