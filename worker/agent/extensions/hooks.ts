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
 */
import type { AssistantMessage, Message } from "@mariozechner/pi-ai";
import type { ConversationId, EntryId, EntryRecord } from "../../core/types.ts";
import type { CompactionReason } from "../records.ts";
import type { ToolResult } from "../tools/contract.ts";

export type HookContext = { conversationId: ConversationId; taskId: number };

/** Hooks, run in order; each phase reads them once at its start. */
export interface AgentHooks {
  /** May replace the messages of this request only. */
  beforeRequest?: Array<
    (messages: Message[], ctx: HookContext) => Message[] | undefined | Promise<Message[] | undefined>
  >;
  /** Observes every final message before it is classified. */
  afterResponse?: Array<(message: AssistantMessage, ctx: HookContext) => void | Promise<void>>;
  /** When a run answers: return text to continue the run with another user message (first wins). */
  onYield?: Array<
    (message: AssistantMessage, ctx: HookContext) => string | undefined | Promise<string | undefined>
  >;
  /** Observes a finished tool round. */
  afterTools?: Array<(results: ToolRoundResult[], ctx: HookContext) => void | Promise<void>>;
  /** Block a call or rewrite its arguments (validated again afterwards). */
  beforeTool?: Array<
    (
      call: { name: string; arguments: unknown },
      ctx: HookContext,
    ) => BeforeToolDecision | undefined | Promise<BeforeToolDecision | undefined>
  >;
  /**
   * Replace the result an aborted call records (by default its durable partial output, as an error).
   * Runs in the call's abort handler; a hook that throws is reported and skipped.
   */
  onAbort?: Array<
    (
      call: { name: string; arguments: unknown },
      result: ToolResult,
      ctx: HookContext,
    ) => ToolResult | undefined | Promise<ToolResult | undefined>
  >;
  /**
   * After a compaction chose its range, before it summarizes: decline it, or supply the summary.
   * The first decision wins; a hook that throws is reported and skipped.
   */
  beforeCompact?: Array<
    (
      input: BeforeCompactInput,
      ctx: HookContext,
    ) => BeforeCompactDecision | undefined | Promise<BeforeCompactDecision | undefined>
  >;
  /** Replace a tool's result. */
  afterTool?: Array<
    (
      call: { name: string; arguments: unknown; result: ToolResult },
      ctx: HookContext,
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
