/**
 * The hooks of the built-in tasks (spec §7.2) and how several compose. Each extension registers
 * handlers per task name (`hook(task, handlers)`); a conversation's hooks are its selected
 * extensions' handlers in extension order, gathered into one `AgentHooks` (arrays in that order).
 * How the arrays compose is decided where each hook runs; the table (spec §7.2):
 * - beforeRequest: replacement chain (each sees the previous output); a throw is reported, next runs;
 * - afterResponse, afterTools: every observer runs; a throw is reported, next runs;
 * - onYield: the first continuation wins; a throw is reported, next runs;
 * - beforeTool: argument replacement chain, the first block wins; a throw blocks the call;
 * - afterTool, onAbort: result replacement chain; a throw is reported, next runs;
 * - beforeCompact: the first decision wins; a throw is reported, next runs.
 * An abort of the phase propagates from any hook.
 * Every hook is called `(input, api, ctx)` (spec §7.2): `api` names the asking task, reads
 * committed documents (`doc`, `snapshot`) and the task's memos (`memo`, one namespace with the
 * task's own: prefix names), and holds the harness's `models`; `ctx.signal` is the asking phase's
 * signal. Tasks an extension defines ask their hooks through `runtime.hooks.each` (task-hooks.ts).
 */
import type { AssistantMessage, Message } from "@mariozechner/pi-ai";
import type { Tx } from "../../core/define.ts";
import type { ConversationId, EntryId, EntryRecord, Json } from "../../core/types.ts";
import { type DocumentSource, documentReader } from "../env.ts";
import type { ModelResolver } from "../models/resolver.ts";
import type { CompactionReason } from "../records.ts";
import type { ToolResult } from "../tools/contract.ts";

export type HookContext = { conversationId: ConversationId; taskId: number };

/**
 * What a hook reads (spec §7.2 HookApi, a DocumentReader): the asking task, committed documents
 * (`doc`, `snapshot`, and `snapshotAsOf` for a rewindable document as it was at an entry), the
 * task's memos, the harness's models.
 */
export interface HookApi extends HookContext {
  /** A committed document of the asking task's conversation (undefined when absent). */
  doc(name: string): Promise<Json | undefined>;
  /** A committed document of any conversation, the asking one by default (spec: `snapshot`). */
  snapshot(name: string, conversationId?: ConversationId): Promise<Json | undefined>;
  /**
   * A rewindable document of a conversation (the asking one by default) as it was at the end of
   * entry `at`'s commit (spec §3.3 `snapshotAsOf`): undefined when no incarnation was alive then;
   * refused for a document that keeps no history or an entry the conversation cannot see.
   */
  snapshotAsOf(name: string, at: EntryId, conversationId?: ConversationId): Promise<Json | undefined>;
  /** The harness's models (spec: `HarnessOptions.models`), to resolve a model a hook calls itself. */
  readonly models: ModelResolver;
  /** The asking task's memo: with a candidate, the first writer wins; without, a read. */
  memo<T extends Json>(name: string, candidate?: T | ((tx: Tx) => T)): Promise<T | undefined>;
}

/** The call's context: the asking phase's signal. */
export interface HookCallContext {
  readonly signal: AbortSignal;
}

/** What `hookApi` needs of the asking task's runtime. */
export interface HookRuntime {
  readonly taskId: number;
  readonly conversationId: ConversationId;
  memo<T extends Json>(name: string, candidate?: T | ((tx: Tx) => T)): Promise<T | undefined>;
}

/** What `hookApi` reads through: committed documents (the core harness) and the models. */
export interface HookReader {
  readonly core: DocumentSource;
  readonly models: ModelResolver;
}

/** The api handed to hooks asked by the task of `runtime`. */
export function hookApi(runtime: HookRuntime, reader: HookReader): HookApi {
  const { taskId, conversationId } = runtime;
  const { snapshot, snapshotAsOf } = documentReader(reader.core, conversationId);
  return Object.freeze({
    taskId,
    conversationId,
    models: reader.models,
    doc: (name: string) => reader.core.doc(conversationId, name),
    snapshot,
    snapshotAsOf,
    memo: <T extends Json>(name: string, candidate?: T | ((tx: Tx) => T)) => runtime.memo<T>(name, candidate),
  });
}

/** Hooks, run in order; each phase reads them once at its start. */
export interface AgentHooks {
  /** May replace the messages of this request only. */
  beforeRequest?: Array<
    (
      messages: Message[],
      api: HookApi,
      ctx: HookCallContext,
    ) => Message[] | undefined | Promise<Message[] | undefined>
  >;
  /** Observes every final message before it is classified. */
  afterResponse?: Array<
    (message: AssistantMessage, api: HookApi, ctx: HookCallContext) => void | Promise<void>
  >;
  /** When a run answers: return text to continue the run with another user message (first wins). */
  onYield?: Array<
    (
      message: AssistantMessage,
      api: HookApi,
      ctx: HookCallContext,
    ) => string | undefined | Promise<string | undefined>
  >;
  /** Observes a finished tool round. */
  afterTools?: Array<
    (results: ToolRoundResult[], api: HookApi, ctx: HookCallContext) => void | Promise<void>
  >;
  /**
   * Block a call or rewrite its arguments (validated again afterwards). `id` is the call's id in
   * the assistant message (pi-ai's `ToolCall.id`): two calls of one tool in a round differ by it.
   */
  beforeTool?: Array<
    (
      call: { id: string; name: string; arguments: unknown },
      api: HookApi,
      ctx: HookCallContext,
    ) => BeforeToolDecision | undefined | Promise<BeforeToolDecision | undefined>
  >;
  /**
   * Replace the result an aborted call records (by default its durable partial output, as an error).
   * Runs in the call's abort handler; a hook that throws is reported and skipped.
   */
  onAbort?: Array<
    (
      call: { id: string; name: string; arguments: unknown },
      result: ToolResult,
      api: HookApi,
      ctx: HookCallContext,
    ) => ToolResult | undefined | Promise<ToolResult | undefined>
  >;
  /**
   * After a compaction chose its range, before it summarizes: decline it, or supply the summary.
   * The first decision wins; a hook that throws is reported and skipped.
   */
  beforeCompact?: Array<
    (
      input: BeforeCompactInput,
      api: HookApi,
      ctx: HookCallContext,
    ) => BeforeCompactDecision | undefined | Promise<BeforeCompactDecision | undefined>
  >;
  /** Replace a tool's result. */
  afterTool?: Array<
    (
      call: { id: string; name: string; arguments: unknown; result: ToolResult },
      api: HookApi,
      ctx: HookCallContext,
    ) => ToolResult | undefined | Promise<ToolResult | undefined>
  >;
}

export type BeforeToolDecision = { block: string } | { arguments: unknown };

/** What a compaction is about to summarize (spec §7.2): the head marker, if any, first. */
export interface BeforeCompactInput {
  readonly reason: CompactionReason;
  readonly entries: readonly EntryRecord[];
  /** The model messages of those entries, as the summarizer would read them. */
  readonly messages: readonly Message[];
  /** The first entry kept verbatim: the summary's head. */
  readonly firstKept: EntryId;
  readonly instructions?: string;
}

/** Skip the compaction (it completes with nothing placed), or place this summary instead of asking the model. */
export type BeforeCompactDecision = { readonly decline: true } | { readonly summary: string };

export interface ToolRoundResult {
  callId: string;
  name: string;
  entryId?: number;
  isError: boolean;
  terminate: boolean;
  /** The handoff text the result's control carries (spec §7.3). */
  handoff?: string;
  /** Tool names the result's control adds to the conversation's tools filter (spec §7.3). */
  addTools?: readonly string[];
}

/** The built-in tasks and the hook names each asks. */
export const HOOKS_OF_TASK = {
  "pi.generation": ["beforeRequest", "afterResponse", "onYield", "afterTools"],
  "pi.tool": ["beforeTool", "afterTool", "onAbort"],
  "pi.compaction": ["beforeCompact"],
} as const satisfies Record<string, readonly (keyof AgentHooks)[]>;

export type BuiltinTaskName = keyof typeof HOOKS_OF_TASK;
export const BUILTIN_TASKS = Object.keys(HOOKS_OF_TASK) as readonly BuiltinTaskName[];

/** One handler of a hook, as an extension registers it. */
export type HookHandler<K extends keyof AgentHooks> = NonNullable<AgentHooks[K]>[number];

/** The handlers an extension may register for a built-in task: one function per hook. */
export type TaskHooks<T extends BuiltinTaskName> = {
  readonly [K in (typeof HOOKS_OF_TASK)[T][number]]?: HookHandler<K>;
};

/** A hook set of one extension for one task (by name, so it survives a reload of the task). */
export interface HookRegistration {
  readonly task: string;
  readonly handlers: object;
}

export function hook<T extends BuiltinTaskName>(task: T, handlers: TaskHooks<T>): HookRegistration;
export function hook(task: string, handlers: object): HookRegistration;
export function hook(task: string, handlers: object): HookRegistration {
  return { task, handlers };
}

/**
 * The registrations' handlers gathered into arrays, in registration order. Only a built-in task's
 * own hook names are taken from a registration for it; other tasks' registrations are not read here.
 */
export function composeHooks(registrations: Iterable<HookRegistration>): AgentHooks {
  const out: Record<string, unknown[]> = {};
  for (const r of registrations) {
    const names = (HOOKS_OF_TASK as Record<string, readonly string[]>)[r.task];
    if (!names) continue;
    for (const name of names) {
      const handler = (r.handlers as Record<string, unknown>)[name];
      if (typeof handler === "function") (out[name] ??= []).push(handler);
    }
  }
  return out as AgentHooks;
}

/** `hooks` (arrays of handlers) as registrations, one per handler, in order. */
export function registrationsOf(hooks: AgentHooks): HookRegistration[] {
  const out: HookRegistration[] = [];
  for (const [task, names] of Object.entries(HOOKS_OF_TASK)) {
    for (const name of names) {
      for (const handler of (hooks[name] ?? []) as unknown[])
        out.push({ task, handlers: { [name]: handler } });
    }
  }
  return out;
}
