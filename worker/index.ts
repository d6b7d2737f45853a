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
