/**
 * What the built-in agent tasks need from their host: models, tools, the workspace, settings and
 * hooks. Settings are read at each decision (getters allowed), never copied into durable state.
 */

import type {
  Api,
  AssistantMessageEventStream,
  Context,
  Model,
  SimpleStreamOptions,
} from "@mariozechner/pi-ai";
import type { AnyTaskDefinition, Tx } from "../core/define.ts";
import type { Harness } from "../core/harness.ts";
import { isCheckedJson } from "../core/persist.ts";
import type { ConversationId, Json, SubmissionRecord } from "../core/types.ts";
import type { EntryCache } from "./conversation/entries.ts";
import type { QueueMode, SubmissionDraft } from "./conversation/inbox.ts";
import type { ExecutionEnv } from "./env.ts";
import { type AgentHooks, composeHooks } from "./extensions/hooks.ts";
import type { RegistrySnapshot } from "./extensions/registry.ts";
import { resolveAgentCached } from "./extensions/resolve.ts";
import type { Extension, ResolvedAgent } from "./extensions/types.ts";
import { piAi } from "./models/pi-ai.ts";
import { providerProblem } from "./models/provider-problem.ts";
import type { ModelResolver } from "./models/resolver.ts";
import type { NetworkState } from "./network.ts";
import type { AgentState, ModelRef, ToolPolicy } from "./records.ts";
import type { ToolDefinition, ToolExecutionMode } from "./tools/contract.ts";
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
  /** `maxAgentDelayMs` is the specification's name for `maxDelayMs` (spec §2.2, pi-ai's RetryPolicy). */
  retry?: Partial<RetryPolicy> & { maxAgentDelayMs?: number };
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
  /** How long an idle conversation keeps its cached entries (ms, default 10 min); busy ones always keep them. */
  contextRetentionMs?: number;
  /**
   * The base of the default extension selection (spec §7.1): these installed extensions, in this
   * order, for a conversation whose pi.agent gives no exact list (`{ add, remove }` edits this base).
   * Default: every installed extension, in install order. An extension object stands for its name.
   */
  extensions?: readonly (string | Extension)[];
  /**
   * Tool approval (tools/approval.ts). Absent: every call runs freely, as the specification's
   * harness does. Given: each call's policy is the conversation's (pi.agent `toolPolicies`), else
   * `tools[name]`, else `allow` for a `readOnly` tool and `fallback` (default `ask`) for any other.
   */
  approval?: ApprovalSettings;
}

export interface ApprovalSettings {
  readonly tools?: Readonly<Record<string, ToolPolicy>>;
  readonly fallback?: ToolPolicy;
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
  contextRetentionMs: number;
  extensions: readonly string[] | undefined;
  approval: ApprovalSettings | undefined;
}

/**
 * The settings with their defaults, read afresh at each call (spec §2.2: read at every resolution,
 * getters are fine). Every task phase resolves them, several times per tool round, so what is absent
 * costs no allocation: no settings at all give one frozen resolution, an absent retry policy,
 * compaction or stream gives its frozen default.
 */
export function resolveSettings(s: AgentSettings | undefined): ResolvedSettings {
  if (s === undefined) return RESOLVED_DEFAULTS;
  return resolveGiven(checkSettings(s));
}

/**
 * Settings as read: an object, or undefined for none. Anything else is a TypeError where it is read:
 * a Promise (a settings function must answer synchronously, spec §2.2; read as an object it would
 * silently give every default), `null`, a number, a string, an array.
 */
export function checkSettings(s: unknown): AgentSettings | undefined {
  if (s === undefined) return undefined;
  if (typeof s !== "object" || s === null || Array.isArray(s))
    throw new TypeError(
      `settings must be an object (got ${s === null ? "null" : Array.isArray(s) ? "an array" : typeof s})`,
    );
  if (typeof (s as { then?: unknown }).then === "function")
    throw new TypeError("settings must be read synchronously: a settings function returned a Promise");
  return s as AgentSettings;
}

function resolveGiven(s: AgentSettings | undefined): ResolvedSettings {
  const compaction = s?.compaction;
  return {
    retry: resolveRetry(s?.retry),
    compaction: compaction === undefined ? FROZEN_COMPACTION : overDefaults(DEFAULT_COMPACTION, compaction),
    stream: checkStreamSettings(s?.stream),
    partialIntervalMs: s?.partialIntervalMs ?? 100,
    outputIntervalMs: s?.outputIntervalMs ?? 100,
    progressBytesPerSecond: s?.progressBytesPerSecond ?? 100 * 1024,
    steeringMode: s?.steeringMode ?? "one-at-a-time",
    followUpMode: s?.followUpMode ?? "one-at-a-time",
    toolExecution: s?.toolExecution ?? "parallel",
    contextRetentionMs: checkRetention(s?.contextRetentionMs),
    extensions: checkExtensionBase(s?.extensions),
    approval: checkApproval(s?.approval),
  };
}

const FROZEN_RETRY: RetryPolicy = Object.freeze({ ...DEFAULT_RETRY });
const FROZEN_COMPACTION: CompactionSettings = Object.freeze({ ...DEFAULT_COMPACTION });
const NO_STREAM: StreamSettings = Object.freeze({});
/** What no settings resolve to, frozen all the way down (made once the defaults above exist). */
const RESOLVED_DEFAULTS: ResolvedSettings = Object.freeze(resolveGiven(undefined));

/** The retry policy over its defaults; the specification's `maxAgentDelayMs` is the cap, `maxDelayMs`. */
function resolveRetry(retry: AgentSettings["retry"]): RetryPolicy {
  if (retry === undefined) return FROZEN_RETRY;
  const { maxAgentDelayMs, ...rest } = retry;
  return {
    ...overDefaults(DEFAULT_RETRY, rest),
    ...(maxAgentDelayMs !== undefined ? { maxDelayMs: maxAgentDelayMs } : {}),
  };
}

/**
 * `given` over `defaults` key by key: a key given as undefined keeps its default, as an absent one
 * does (a spread would put the undefined in: spec §2.2, every field over its built-in default).
 */
function overDefaults<T extends object>(defaults: T, given: Partial<T>): T {
  const out = { ...defaults } as Record<string, unknown>;
  for (const [key, value] of Object.entries(given)) if (value !== undefined) out[key] = value;
  return out as T;
}

/** The default selection's base as names (an extension object stands for its name), or a TypeError. */
function checkExtensionBase(value: unknown): readonly string[] | undefined {
  if (value === undefined) return undefined;
  const named = (n: unknown) =>
    typeof n === "string" || (!!n && typeof n === "object" && typeof (n as Extension).name === "string");
  if (!Array.isArray(value) || !value.every(named))
    throw new TypeError("settings.extensions must be a list of extension names");
  return extensionNames(value);
}

/** The names a default selection's base stands for (the list itself when it holds names only). */
export function extensionNames(list: readonly (string | Extension)[]): readonly string[];
export function extensionNames(
  list: readonly (string | Extension)[] | undefined,
): readonly string[] | undefined;
export function extensionNames(
  list: readonly (string | Extension)[] | undefined,
): readonly string[] | undefined {
  if (list === undefined || list.every((n) => typeof n === "string"))
    return list as readonly string[] | undefined;
  return list.map((n) => (typeof n === "string" ? n : n.name));
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
  if (stream === undefined) return NO_STREAM;
  if (!stream || typeof stream !== "object" || Array.isArray(stream))
    throw new TypeError("settings.stream must be an object");
  for (const [key, value] of Object.entries(stream)) {
    const check = STREAM_CHECKS[key as keyof StreamSettings];
    if (!check) throw new TypeError(`settings.stream.${key} is not a stream option`);
    if (value !== undefined && !check(value)) throw new TypeError(`settings.stream.${key} is invalid`);
  }
  return stream;
}

const POLICIES: readonly unknown[] = ["allow", "ask", "never"];

/** Approval settings as given, or a TypeError naming the bad field. */
function checkApproval(value: ApprovalSettings | undefined): ApprovalSettings | undefined {
  if (value === undefined) return undefined;
  if (!value || typeof value !== "object" || Array.isArray(value))
    throw new TypeError("settings.approval must be an object");
  if (value.fallback !== undefined && !POLICIES.includes(value.fallback))
    throw new TypeError('settings.approval.fallback must be "allow", "ask" or "never"');
  for (const [name, policy] of Object.entries(value.tools ?? {}))
    if (!POLICIES.includes(policy))
      throw new TypeError(`settings.approval.tools.${name} must be "allow", "ask" or "never"`);
  return value;
}

/** contextRetentionMs as given (default 600,000), or a TypeError when it is not a number >= 0. */
function checkRetention(ms: number | undefined): number {
  if (ms === undefined) return 600_000;
  if (typeof ms !== "number" || Number.isNaN(ms) || ms < 0)
    throw new TypeError("settings.contextRetentionMs must be a number >= 0");
  return ms;
}

export type {
  AgentHooks,
  BeforeCompactDecision,
  BeforeCompactInput,
  BeforeToolDecision,
  HookContext,
  ToolRoundResult,
} from "./extensions/hooks.ts";

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
  /** The harness's workspace (`fs`): the app's files; a conversation's environment only through a builder. */
  readonly fs: WorkspaceFs;
  /** Whether environments come from a builder (`AgentHarnessOptions.env`): built off the commit line only. */
  readonly envBuilder: boolean;
  /**
   * `c`'s environment for one use (a tool execution, a preparation): the builder's; without a
   * builder, none (spec §2.2). Rejects with the builder's error.
   */
  env(c: ConversationId, signal: AbortSignal): Promise<ExecutionEnv | undefined>;
  readonly stream: StreamFn;
  settings(): ResolvedSettings;
  /** The registry's snapshot: the current one, or the one a phase took at its start. */
  registry(): RegistrySnapshot;
  /** A conversation's committed pi.agent (empty when absent). */
  readAgent(c: ConversationId): AgentState;
  /** What `c` resolves to from `registry()` and its pi.agent (`state` when given, else committed). */
  agent(c: ConversationId, state?: AgentState): ResolvedAgent;
  /** The hooks of `c`'s selected extensions; without `c`, every installed extension's. */
  hooks(c?: ConversationId): AgentHooks;
  /** The tools `c` resolves to, by name, in order; without `c`, every installed tool (a later name wins). */
  tools(c?: ConversationId): ReadonlyMap<string, ToolDefinition>;
  /** The key for a provider, read at request time; never stored, logged or committed. */
  apiKey(provider: string): string | undefined;
  /** Every other secret an answer must not carry into an entry (`AgentHarnessOptions.secrets`). */
  secrets(): readonly string[];
  /** The platform's network state: asked when a request failed on the network (network.ts). */
  readonly network: NetworkState;
  /**
   * A task is about to wait for a durable deadline (a retry's or a compaction's backoff, a deferred
   * response's poll time): the host's `wakeAt` (AgentHarnessOptions), or nothing.
   */
  wakeAt(at: number): void;
  report(error: unknown): void;
  /**
   * Admit a submission inside a commit by the inbox's rules (placed at once when idle, else queued);
   * a known `requestId` returns the submission admitted under it. For tools and tasks that submit.
   */
  admit(tx: Tx, conversationId: ConversationId, draft: SubmissionDraft): SubmissionRecord;
  /** A registered task definition by name (tools create the tasks of definitions the harness holds). */
  taskDefinition(name: string): AnyTaskDefinition | undefined;
  /** In a phase's services (`atPhaseStart` with a conversation): its pi.agent then, and what it resolved to. */
  readonly phaseAgent?: { readonly state: AgentState; readonly resolved: ResolvedAgent };
}

/**
 * The registry readers of the services, over the snapshots `registry` gives; `base` is the default
 * selection's base (settings.extensions), read at each resolution.
 */
export function resolvers(
  registry: () => RegistrySnapshot,
  readAgent: (c: ConversationId) => AgentState,
  report: (error: unknown) => void,
  base: () => readonly string[] | undefined = () => undefined,
): Pick<AgentServices, "registry" | "agent" | "hooks" | "tools"> {
  const agent = (c: ConversationId, state?: AgentState) => {
    const names = base();
    return resolveAgentCached(registry(), state ?? readAgent(c), report, names ? { base: names } : {});
  };
  return {
    registry,
    agent,
    hooks: (c) =>
      c === undefined
        ? composeHooks(
            registry()
              .installed()
              .flatMap((e) => e.hooks ?? []),
          )
        : agent(c).hooks,
    tools: (c) => {
      if (c !== undefined) return agent(c).tools;
      const all = new Map<string, ToolDefinition>();
      for (const { tool } of registry().tools()) all.set(tool.name, tool);
      return all;
    },
  };
}

/**
 * The services as one phase sees them (spec §7.1, §7.5): the registry snapshot taken now, at the
 * phase's start, and `c`'s agent (tools, sections, hooks) resolved from it once, so a registry
 * change while the phase runs takes effect at the next phase.
 */
export function atPhaseStart(services: AgentServices, c?: ConversationId): AgentServices {
  const snapshot = services.registry();
  const base = services.settings().extensions;
  let reported = false;
  const report = (error: unknown) => {
    reported = true;
    services.report(error);
  };
  if (c === undefined) {
    const r = resolvers(
      () => snapshot,
      services.readAgent,
      services.report,
      () => base,
    );
    const hooks = r.hooks();
    return { ...services, ...r, hooks: () => hooks };
  }
  const state = services.readAgent(c);
  const last = lastPhase.get(services);
  if (
    last !== undefined &&
    last.c === c &&
    last.snapshot === snapshot &&
    sameNames(last.base, base) &&
    last.state === state
  )
    return last.phase;
  const r = resolvers(
    () => snapshot,
    services.readAgent,
    services.report,
    () => base,
  );
  const agent = resolveAgentCached(snapshot, state, report, base ? { base } : {});
  const phase: AgentServices = {
    ...services,
    ...r,
    phaseAgent: { state, resolved: agent },
    agent: (id, state) => (id === c && state === undefined ? agent : r.agent(id, state)),
    hooks: (id) => (id === undefined || id === c ? agent.hooks : r.hooks(id)),
    tools: (id) => (id === undefined || id === c ? agent.tools : r.tools(id)),
  };
  // Kept only when nothing about it can differ at the next phase: the same snapshot, base names and
  // committed pi.agent value (checked JSON: frozen, so its identity stands for its content), and a
  // resolution that reported nothing (one that did reports again at every phase, as before).
  if (!reported && isCheckedJson(state))
    lastPhase.set(services, { c, snapshot, base: base && [...base], state, phase });
  else lastPhase.delete(services);
  return phase;
}

/**
 * Whether two default selection bases name the same extensions in the same order. The kept base is
 * a copy: a host may edit its settings' list in place (settings are never copied, spec §2.2).
 */
function sameNames(kept: readonly string[] | undefined, base: readonly string[] | undefined): boolean {
  if (kept === undefined || base === undefined) return kept === base;
  return kept.length === base.length && kept.every((name, i) => name === base[i]);
}

/**
 * The last view `atPhaseStart` made for each services object. Building one spreads the whole
 * services object, and every phase of a conversation's round (the tool's, the next request's)
 * asked for the same one: same snapshot, same base, same committed pi.agent.
 */
const lastPhase = new WeakMap<
  AgentServices,
  {
    c: ConversationId;
    snapshot: RegistrySnapshot;
    base: readonly string[] | undefined;
    state: AgentState;
    phase: AgentServices;
  }
>();

/** pi-ai's streamSimple (loaded by then: an open harness has loaded pi-ai, see models/pi-ai.ts). */
export const defaultStream: StreamFn = (model, context, options) =>
  piAi().streamSimple(model, context, options);

/** Exponential backoff: base * 2^(attempt-1), capped. */
export function retryDelayMs(policy: RetryPolicy, attempt: number): number {
  return Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** Math.max(0, attempt - 1));
}

/**
 * Provider errors worth retrying: rate limits, overload, 5xx, timeouts, dropped connections, and a
 * network that could not be reached (`isNetworkError`).
 */
export function isRetryableError(message: string | undefined): boolean {
  if (!message) return false;
  return (
    /\b(408|409|425|429|500|502|503|504|529)\b|overload|rate.?limit|too many requests|timed? ?out|timeout|ECONNRESET|ETIMEDOUT|ECONNREFUSED|socket hang up|network|fetch failed|temporar|unavailable/i.test(
      message,
    ) || isNetworkError(message)
  );
}

/**
 * A request that failed for want of a network (the words browsers and SDKs use: "Failed to fetch",
 * "Connection error.", "Load failed", a refused or reset connection), not a provider's answer: a
 * rejected or missing key is never one, whatever else its message says.
 */
export function isNetworkError(message: string | undefined): boolean {
  return providerProblem(message) === "network";
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

/**
 * `message` without the request's key nor any of `services.secrets()` (each of 8 characters or
 * more), longest first so a secret that holds another leaves no piece: one JSON walk, not one each.
 */
export function withoutSecrets<T>(message: T, apiKey: string | undefined, secrets: readonly string[]): T {
  // Nothing to look for (no key, no stored secret): every request of a keyless model.
  if (!apiKey && secrets.length === 0) return message;
  const all = [...new Set([...(apiKey ? [apiKey] : []), ...secrets])]
    .filter((s) => s.length >= 8)
    .sort((a, b) => b.length - a.length);
  if (all.length === 0) return message;
  const text = JSON.stringify(message);
  let out = text;
  for (const secret of all) if (out.includes(secret)) out = out.split(secret).join("[redacted]");
  return out === text ? message : (JSON.parse(out) as T);
}

/** `message` with every occurrence of `secret` replaced (keys of 8 characters or more). */
export function withoutSecret<T>(message: T, secret: string): T {
  if (secret.length < 8) return message;
  const text = JSON.stringify(message);
  if (!text.includes(secret)) return message;
  return JSON.parse(text.split(secret).join("[redacted]")) as T;
}
