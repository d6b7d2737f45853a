/**
 * What the built-in agent tasks need from their host: models, tools, the workspace, settings and
 * hooks. Settings are read at each decision (getters allowed), never copied into durable state.
 */

import type { Api, AssistantMessageEventStream, Model } from "@mariozechner/pi-ai";
import {
  type AssistantMessage,
  type Context,
  type Message,
  type SimpleStreamOptions,
  streamSimple,
} from "@mariozechner/pi-ai";
import type { Harness } from "../core/harness.ts";
import type { ConversationId, EntryId, EntryRecord, Json } from "../core/types.ts";
import type { EntryCache } from "./conversation/entries.ts";
import type { QueueMode } from "./conversation/inbox.ts";
import type { ModelResolver } from "./models/resolver.ts";
import type { CompactionReason, ModelRef } from "./records.ts";
import type { ToolDefinition, ToolExecutionMode, ToolResult } from "./tools/contract.ts";
import type { WorkspaceFs } from "./workspace/fs.ts";

export interface RetryPolicy {
  enabled: boolean;
  maxRetries: number;
  baseDelayMs: number;
  maxDelayMs: number;
}

/**
 * Provider options for each request (pi-ai's StreamOptions): pinned into the attempt when it is
 * prepared, so a request resent after a restart carries the same ones; a retry prepares again.
 * `headers` are the exception: they often carry credentials, so like API keys they are read at
 * request time and never stored.
 */
export interface StreamSettings {
  transport?: "sse" | "websocket" | "auto";
  timeoutMs?: number;
  /** Provider/SDK retries within one attempt (the durable retry policy is `retry`). */
  maxRetries?: number;
  maxRetryDelayMs?: number;
  headers?: Record<string, string>;
  metadata?: Record<string, Json>;
  cacheRetention?: "none" | "short" | "long";
}

/** How much of a conversation a compaction keeps, and the room left for the summary (tokens). */
export interface CompactionSettings {
  /** Compact on its own: before a request above contextWindow - reserveTokens, and on overflow. */
  enabled: boolean;
  keepRecentTokens: number;
  reserveTokens: number;
  /** Start a compaction nobody waits for this far below the blocking threshold (0: never). */
  backgroundTokens: number;
}

export const DEFAULT_COMPACTION: CompactionSettings = {
  enabled: true,
  keepRecentTokens: 20_000,
  reserveTokens: 16_384,
  backgroundTokens: 32_768,
};

export interface AgentSettings {
  retry?: Partial<RetryPolicy>;
  compaction?: Partial<CompactionSettings>;
  /** Provider options for every request (default none: pi-ai's defaults). */
  stream?: StreamSettings;
  /** How often a streaming answer is committed to pi.live (ms). */
  partialIntervalMs?: number;
  /** How often a tool's streamed output is committed to pi.live (ms). */
  outputIntervalMs?: number;
  /**
   * Size pacing of those commits (spec §7.3): a commit that wrote n bytes delays the next by
   * n / progressBytesPerSecond seconds when that is longer than `outputIntervalMs` (default 100 KiB/s).
   */
  progressBytesPerSecond?: number;
  steeringMode?: QueueMode;
  followUpMode?: QueueMode;
  /** How the calls of one round run (default "parallel"; a sequential tool makes its round sequential). */
  toolExecution?: ToolExecutionMode;
}

export const DEFAULT_RETRY: RetryPolicy = {
  enabled: true,
  maxRetries: 3,
  baseDelayMs: 2000,
  maxDelayMs: 60_000,
};

export interface ResolvedSettings {
  retry: RetryPolicy;
  compaction: CompactionSettings;
  stream: StreamSettings;
  partialIntervalMs: number;
  outputIntervalMs: number;
  progressBytesPerSecond: number;
  steeringMode: QueueMode;
  followUpMode: QueueMode;
  toolExecution: ToolExecutionMode;
}

export function resolveSettings(s: AgentSettings | undefined): ResolvedSettings {
  return {
    retry: { ...DEFAULT_RETRY, ...(s?.retry ?? {}) },
    compaction: { ...DEFAULT_COMPACTION, ...(s?.compaction ?? {}) },
    stream: checkStreamSettings(s?.stream),
    partialIntervalMs: s?.partialIntervalMs ?? 100,
    outputIntervalMs: s?.outputIntervalMs ?? 100,
    progressBytesPerSecond: s?.progressBytesPerSecond ?? 100 * 1024,
    steeringMode: s?.steeringMode ?? "one-at-a-time",
    followUpMode: s?.followUpMode ?? "one-at-a-time",
    toolExecution: s?.toolExecution ?? "parallel",
  };
}

const STREAM_CHECKS: Record<keyof StreamSettings, (v: unknown) => boolean> = {
  transport: (v) => v === "sse" || v === "websocket" || v === "auto",
  timeoutMs: (v) => typeof v === "number" && Number.isFinite(v) && v > 0,
  maxRetries: (v) => Number.isInteger(v) && (v as number) >= 0,
  maxRetryDelayMs: (v) => typeof v === "number" && Number.isFinite(v) && v >= 0,
  headers: (v) =>
    !!v && typeof v === "object" && !Array.isArray(v) && Object.values(v).every((h) => typeof h === "string"),
  metadata: (v) => !!v && typeof v === "object" && !Array.isArray(v),
  cacheRetention: (v) => v === "none" || v === "short" || v === "long",
};

/** Stream settings as given, or a TypeError naming the first bad field. */
function checkStreamSettings(stream: StreamSettings | undefined): StreamSettings {
  if (stream === undefined) return {};
  if (!stream || typeof stream !== "object" || Array.isArray(stream))
    throw new TypeError("settings.stream must be an object");
  for (const [key, value] of Object.entries(stream)) {
    const check = STREAM_CHECKS[key as keyof StreamSettings];
    if (!check) throw new TypeError(`settings.stream.${key} is not a stream option`);
    if (value !== undefined && !check(value)) throw new TypeError(`settings.stream.${key} is invalid`);
  }
  return stream;
}

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
}

export type StreamFn = (
  model: Model<Api>,
  context: Context,
  options: SimpleStreamOptions,
) => AssistantMessageEventStream;

export interface AgentServices {
  /** The core harness, read through its public operations (committed documents, entries, clock). */
  readonly core: Harness;
  /** Committed entries per conversation, read incrementally. */
  readonly entries: EntryCache;
  readonly models: ModelResolver;
  readonly defaultModel: ModelRef | undefined;
  readonly fs: WorkspaceFs;
  readonly stream: StreamFn;
  settings(): ResolvedSettings;
  hooks(): AgentHooks;
  /** Every registered tool by name. */
  tools(): ReadonlyMap<string, ToolDefinition>;
  /** The key for a provider, read at request time; never stored, logged or committed. */
  apiKey(provider: string): string | undefined;
  report(error: unknown): void;
}

/**
 * The services as one phase sees them: the hooks resolved once, now, at the phase's start (spec
 * §7.5), so a registry change while the phase runs takes effect at the next phase.
 */
export function atPhaseStart(services: AgentServices): AgentServices {
  const hooks = services.hooks();
  return { ...services, hooks: () => hooks };
}

export const defaultStream: StreamFn = (model, context, options) => streamSimple(model, context, options);

/** Exponential backoff: base * 2^(attempt-1), capped. */
export function retryDelayMs(policy: RetryPolicy, attempt: number): number {
  return Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** Math.max(0, attempt - 1));
}

/** Provider errors worth retrying: rate limits, overload, 5xx, timeouts, dropped connections. */
export function isRetryableError(message: string | undefined): boolean {
  if (!message) return false;
  return /\b(408|409|425|429|500|502|503|504|529)\b|overload|rate.?limit|too many requests|timed? ?out|timeout|ECONNRESET|ETIMEDOUT|ECONNREFUSED|socket hang up|network|fetch failed|temporar|unavailable/i.test(
    message,
  );
}

/** Sleep until `until` on `now`'s clock; rejects when the signal aborts. */
export function sleepUntil(until: number, now: () => number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    // Timers may fire a little early by the wall clock: wait again until the deadline has passed.
    const wait = () => {
      const delay = until - now();
      if (delay <= 0) {
        signal.removeEventListener("abort", onAbort);
        resolve();
        return;
      }
      timer = setTimeout(wait, delay);
    };
    signal.addEventListener("abort", onAbort, { once: true });
    wait();
  });
}

/** `message` with every occurrence of `secret` replaced (keys of 8 characters or more). */
export function withoutSecret<T>(message: T, secret: string): T {
  if (secret.length < 8) return message;
  const text = JSON.stringify(message);
  if (!text.includes(secret)) return message;
  return JSON.parse(text.split(secret).join("[redacted]")) as T;
}
