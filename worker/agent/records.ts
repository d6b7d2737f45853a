/**
 * The agent's durable vocabulary: built-in entry kinds and documents, their types, and typed
 * accessors over a transaction. Documents hold names and data, never code.
 */
import type { AssistantMessage, Message, ToolResultMessage, Usage, UserMessage } from "@mariozechner/pi-ai";
import type { Tx } from "../core/define.ts";
import { DocumentSemanticsError, DocumentVersionError, errorMessage } from "../core/errors.ts";
import { assertJson, jsonCopy, sealBuilt } from "../core/persist.ts";
import {
  type ConversationId,
  type DocScope,
  type DocumentRecord,
  type EntryId,
  type EntryRecord,
  type Json,
  SESSION_DOCS,
  type SubmissionId,
  type TaskId,
} from "../core/types.ts";

export const ENTRY = {
  user: "pi.user",
  assistant: "pi.assistant",
  toolResult: "pi.tool-result",
  system: "pi.system",
  reset: "pi.reset",
  compaction: "pi.compaction",
} as const;

export const DOC = {
  agent: "pi.agent",
  live: "pi.live",
  inbox: "pi.inbox",
  usage: "pi.usage",
  provider: "pi.provider",
} as const;

/** Which model: a provider and its model id (spec §2.2). Stored in pi.agent since its version 2. */
export type ModelRef = { provider: string; modelId: string };
export type ThinkingLevel = "off" | "minimal" | "low" | "medium" | "high" | "xhigh";

/** What a conversation stores about its agent: names, never code. */
export type AgentState = {
  model?: ModelRef;
  thinkingLevel?: ThinkingLevel;
  /**
   * Which installed extensions the conversation uses (names): exactly these, in order, or every
   * installed one with `add` appended and `remove` left out; absent: every installed one.
   */
  extensions?: string[] | { add?: string[]; remove?: string[] };
  /** Exactly these of the selected extensions' tools, in order, or all but `remove`; absent: all. */
  tools?: string[] | { remove: string[] };
  instructions?: string;
  /**
   * This conversation's approval policy per tool name (tools/approval.ts), over the settings'; absent
   * or a tool not named: the settings decide. "Always allow this tool here" writes `allow`.
   */
  toolPolicies?: Record<string, ToolPolicy>;
};

/** Whether a tool call runs freely (`allow`), waits for a person's approval (`ask`), or never runs. */
export type ToolPolicy = "allow" | "ask" | "never";

/**
 * A call waiting for a person (in its pi.live slot, status `awaiting_approval`), and then the first
 * decision taken on it: the call's arguments in words, and who decided what under which request id.
 */
export interface ApprovalState {
  /** The call's arguments in words, one line each (`path: notes/a.md`), bounded. */
  summary: string[];
  /** When it started waiting (the harness's clock). */
  since: number;
  decision?: ApprovalDecisionRecord;
}

export interface ApprovalDecisionRecord {
  decision: "approve" | "deny";
  /** The person's words with a denial (bounded); the model reads them in the error result. */
  reason?: string;
  /** The request that decided it: the same request again gets the same answer (idempotent). */
  requestId: string;
  at: number;
}

/** A system message as recorded in the transcript: the prompt sections and the offered tools. */
export interface SystemRecord {
  role: "system";
  content: "";
  sections: Record<string, string | null>;
  toolsAdded?: string[];
  toolsRemoved?: string[];
  timestamp: number;
}

export type ToolDiagnostic = { severity: "info" | "warn" | "error"; message: string; code?: string };

export interface ToolSlot {
  callId: string;
  name: string;
  taskId?: TaskId;
  /** `awaiting_approval`: the call waits for a person's decision (`approval`), nothing of it ran. */
  status: "pending" | "awaiting_approval" | "running" | "done";
  /** Present once the call had to wait for approval; it keeps the decision after the call ran. */
  approval?: ApprovalState;
  output?: string;
  droppedBytes?: number;
  droppedLines?: number;
  details?: Json;
  /** Diagnostics recorded through `api.diagnostic()` while it runs (spec §8.2). */
  diagnostics?: ToolDiagnostic[];
  entry?: EntryId;
}

export interface LiveState {
  run?: { taskId: TaskId; inputs: SubmissionId[] };
  generation?: {
    taskId: TaskId;
    attempt: number;
    message?: AssistantMessage;
    retry?: { at: number; error: string };
    /**
     * Waiting for the network since `since` (the platform said offline when `error` came);
     * `nextCheckAt`: when the platform next looks, as it last said (absent until it said).
     */
    offline?: { since: number; error: string; nextCheckAt?: number };
    /** Waiting for a deferred response: the next poll. */
    deferred?: { pollAt: number };
  };
  tools?: ToolSlot[];
  /** Compactions under way (spec §8.2): added when the task is created, removed by its outcome. */
  compactions?: CompactionStatus[];
}

export type InboxItem =
  | { id: SubmissionId; mode: "steer" | "followUp"; content: UserMessage["content"] }
  | { id: SubmissionId; mode: "write"; entry: EntryDraftJson };

export type CompactionReason = "manual" | "threshold" | "overflow";
export interface CompactionStatus {
  taskId: number;
  reason: CompactionReason;
  blocking: boolean;
  attempt: number;
  retry?: { at: number; error: string };
}

export interface InboxState {
  items: InboxItem[];
}

export interface UsageState {
  models: Record<string, Usage>;
  tools: Record<string, Usage>;
}

export type EntryDraftJson = {
  kind: string;
  data?: Json;
  model?: Json;
  head?: number | "self";
  edits?: EntryRecord["edits"];
};

export function readDoc<T>(tx: Tx, conversationId: ConversationId, name: string, fallback: T): T {
  return (tx.readDoc(conversationId, name) as T | undefined) ?? fallback;
}

export function writeDoc<T>(tx: Tx, conversationId: ConversationId, name: string, value: T): void {
  tx.writeDoc(conversationId, name, value as unknown as Json);
}

export const live = (tx: Tx, c: ConversationId): LiveState => readDoc<LiveState>(tx, c, DOC.live, {});
export const inbox = (tx: Tx, c: ConversationId): InboxState =>
  readDoc<InboxState>(tx, c, DOC.inbox, { items: [] });

/** A committed document of a view's `docs` (as a watch delivers them), or `fallback` when absent. */
function viewDoc<T>(docs: Readonly<Record<string, Json>>, name: string, fallback: T): T {
  return (docs[name] as T | undefined) ?? fallback;
}

/** A view's `pi.live` (what runs now: the streaming message, tool slots, compactions). */
export const liveOf = (docs: Readonly<Record<string, Json>>): LiveState =>
  viewDoc<LiveState>(docs, DOC.live, {});
/** A view's `pi.inbox` (queued inputs and writes). */
export const inboxOf = (docs: Readonly<Record<string, Json>>): InboxState =>
  viewDoc<InboxState>(docs, DOC.inbox, { items: [] });
/** A view's `pi.usage` (model spend per provider/model, tools' own spend per tool). */
export const usageOf = (docs: Readonly<Record<string, Json>>): UsageState =>
  viewDoc<UsageState>(docs, DOC.usage, { models: {}, tools: {} });

export function zeroUsage(): Usage {
  return {
    input: 0,
    output: 0,
    cacheRead: 0,
    cacheWrite: 0,
    totalTokens: 0,
    cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
  };
}

export function addUsage(a: Usage, b: Usage): Usage {
  return {
    input: a.input + b.input,
    output: a.output + b.output,
    cacheRead: a.cacheRead + b.cacheRead,
    cacheWrite: a.cacheWrite + b.cacheWrite,
    totalTokens: a.totalTokens + b.totalTokens,
    cost: {
      input: a.cost.input + b.cost.input,
      output: a.cost.output + b.cost.output,
      cacheRead: a.cost.cacheRead + b.cost.cacheRead,
      cacheWrite: a.cost.cacheWrite + b.cost.cacheWrite,
      total: a.cost.total + b.cost.total,
    },
  };
}

/**
 * The assistant answer that stands for a request that failed without one (the provider threw, no
 * model, a failed poll): no content, no spend, `stopReason: "error"` and the error's message. Stamped
 * with the harness clock (`now`), like every message the engine writes (spec §2.2 HarnessOptions.now).
 */
export function errorAnswer(
  source: { api: string; provider: string; model: string },
  error: unknown,
  now: number,
): AssistantMessage {
  return {
    role: "assistant",
    content: [],
    api: source.api,
    provider: source.provider,
    model: source.model,
    usage: zeroUsage(),
    stopReason: "error",
    errorMessage: errorMessage(error),
    timestamp: now,
  };
}

/**
 * A provider's message as strict JSON (spec §3.4: a committed value is plain JSON): pi-ai leaves
 * optional fields as `undefined` members (`errorMessage`, `responseId`), which the engine refuses.
 * A JSON copy drops them, as storing it would; it is taken where provider output enters. The copy
 * is the JSON round trip's result: plain data (plain objects and arrays, strings, finite numbers,
 * booleans, null) is copied directly with its undefined members left out, which is what the round
 * trip gives it; anything else in it (a Date, a class instance, a function, NaN, -0, a hole...)
 * takes the round trip itself. The direct copy is the core's `jsonCopy`: frozen and known to be
 * strict JSON as it is made, so appending it walks it no second time.
 */
export function providerJson<T>(value: T): T {
  const copy = jsonCopy(value);
  return (copy === undefined ? JSON.parse(JSON.stringify(value)) : copy) as T;
}

/** Append an assistant message and count its spend in pi.usage, in the same commit. */
export function appendAssistant(tx: Tx, c: ConversationId, received: AssistantMessage): EntryRecord {
  return appendJsonAssistant(tx, c, providerJson(received));
}

/**
 * appendAssistant for a message that is already strict JSON (a `providerJson` copy): appended as it
 * is, so the appended entry holds this very object (frozen by the append).
 */
export function appendJsonAssistant(tx: Tx, c: ConversationId, message: AssistantMessage): EntryRecord {
  const entry = tx.appendEntry(c, { kind: ENTRY.assistant, model: [message] as unknown as Json });
  const usage = readDoc<UsageState>(tx, c, DOC.usage, { models: {}, tools: {} });
  const key = `${message.provider}/${message.model}`;
  const models = {
    ...usage.models,
    [key]: usageSum(usage.models[key] ?? zeroUsage(), message.usage ?? zeroUsage()),
  };
  writeDoc<UsageState>(tx, c, DOC.usage, sealBuilt({ ...usage, models: sealBuilt(models) }));
  return entry;
}

/**
 * `addUsage` for pi.usage, sealed: every tool round writes the totals, built here of sums and of
 * committed or checked parts, so the commit does not walk them again (a sum that is not a finite
 * number is still refused, with NotJson, here).
 */
function usageSum(a: Usage, b: Usage): Usage {
  const sum = addUsage(a, b);
  sealBuilt(sum.cost);
  return sealBuilt(sum);
}

/** Count a tool call's own model spend in pi.usage.tools[name], in the commit of its result. */
export function addToolUsage(tx: Tx, c: ConversationId, name: string, spent: Usage): void {
  const usage = readDoc<UsageState>(tx, c, DOC.usage, { models: {}, tools: {} });
  const tools = sealBuilt({ ...usage.tools, [name]: usageSum(usage.tools[name] ?? zeroUsage(), spent) });
  writeDoc<UsageState>(tx, c, DOC.usage, sealBuilt({ ...usage, tools }));
}

export function appendUser(tx: Tx, c: ConversationId, content: UserMessage["content"]): EntryRecord {
  const message: UserMessage = { role: "user", content, timestamp: tx.now() };
  return tx.appendEntry(c, {
    kind: ENTRY.user,
    model: [message] as unknown as Json,
    timestamp: message.timestamp,
  });
}

export function modelMessages(entry: Pick<EntryRecord, "model">): Message[] {
  return Array.isArray(entry.model) ? (entry.model as unknown as Message[]) : [];
}

export function toolResultOf(entry: EntryRecord): ToolResultMessage | undefined {
  const m = modelMessages(entry)[0];
  return m?.role === "toolResult" ? m : undefined;
}

/** A typed custom entry kind. */
export function defineEntry<D extends Json>(kind: string) {
  if (!kind || kind.startsWith("pi.")) throw new TypeError(`entry kind ${kind} is reserved or empty`);
  return {
    kind,
    /** Spec §2.2: takes `undefined` too (a lookup that found nothing), which is not one. */
    is<E extends Pick<EntryRecord, "kind">>(entry: E | undefined): entry is E & { data: D } {
      return entry?.kind === kind;
    },
    draft(data: D): { kind: string; data: D } {
      return { kind, data };
    },
  };
}

/** What every custom document definition has: its name, version, initial value and upgrade from older versions. */
interface CommonDocDefinition<T extends Json> {
  readonly name: string;
  /** A positive integer (default 1); raise it when the value's shape changes, with `migrate`. */
  readonly version?: number;
  /** The value of a document never written (an object; a function is called for each fresh copy). */
  readonly initial: T | (() => T);
  /** The current version's value from a stored one of `fromVersion`; gets a copy, may change it. */
  readonly migrate?: (value: Json, fromVersion: number) => T;
}

/**
 * A conversation document's semantics (spec §3.1). `history`: "latest" (default) keeps only the
 * current value; "rewindable" keeps each committed value, so `snapshotAsOf` reads it as it was at an
 * entry. `fork` (spec §3.7): "current" (default) copies the parent's value when the fork is made,
 * "initial" starts the child at `initial`, "asOf" (rewindable only) copies the value at the fork's
 * entry. The write that creates an incarnation through its token stores them in its record (spec
 * §3.3: definitions are not registered); a write by name takes those given in
 * `AgentHarnessOptions.documents`.
 */
type ConversationDocSemantics =
  | { readonly scope?: "conversation"; readonly history?: "latest"; readonly fork?: "current" | "initial" }
  | {
      readonly scope?: "conversation";
      readonly history: "rewindable";
      readonly fork?: "asOf" | "current" | "initial";
    };

/** A conversation document's definition (the default scope). */
export type DocDefinition<T extends Json> = CommonDocDefinition<T> & ConversationDocSemantics;
/** A session document's definition: one value for the whole store, current-only (spec §3.1). */
export type SessionDocDefinition<T extends Json> = CommonDocDefinition<T> & { readonly scope: "session" };
/** A task document's definition: current-only, never copied by a fork, retired with its task (spec §3.1). */
export type TaskDocDefinition<T extends Json> = CommonDocDefinition<T> & { readonly scope: "task" };

/** What every typed document token has: its definition's name and version, and reads through it. */
interface DocTokenBase<T extends Json> {
  readonly name: string;
  readonly version: number;
  /**
   * A stored value read through the definition outside a transaction (`stored` is the value and its
   * version), migrated in memory; one never written reads as the initial value. Never writes. (The
   * public snapshot, `AgentHarness.snapshot`, gives undefined for an absent document instead.)
   */
  view(stored: { value: Json | undefined; version: number | undefined }): T;
}

/**
 * A typed conversation document: reads migrate older stored versions, writes store the current one.
 * Typed access refuses (DocumentSemanticsError) an incarnation whose stored history or fork rule is
 * not the token's (spec §3.1): a definition cannot reinterpret a document's lifetime.
 */
export interface DocToken<T extends Json> extends DocTokenBase<T> {
  readonly scope: "conversation";
  readonly history: "latest" | "rewindable";
  readonly fork: "asOf" | "current" | "initial";
  /**
   * The document in this transaction (spec §3.3 typed `tx.doc()`, get-or-create): one never written
   * is created with its initial value in this transaction; a value stored at an older version is
   * migrated and the migrated value written in this same transaction. A newer stored version, or an
   * older one without `migrate`, throws DocumentVersionError.
   */
  read(tx: Tx, c: ConversationId): T;
  write(tx: Tx, c: ConversationId, value: T): void;
}

/** A typed session document (`read`/`write` as a conversation token's, with no conversation). */
export interface SessionDocToken<T extends Json> extends DocTokenBase<T> {
  readonly scope: "session";
  read(tx: Tx): T;
  write(tx: Tx, value: T): void;
}

/**
 * A typed task document (`read`/`write` as a conversation token's, of a live task): a terminal task's
 * documents are gone, so access to them throws.
 */
export interface TaskDocToken<T extends Json> extends DocTokenBase<T> {
  readonly scope: "task";
  read(tx: Tx, task: TaskId): T;
  write(tx: Tx, task: TaskId, value: T): void;
}

/**
 * Define a typed custom document: `defineDoc(name, initial)` or `defineDoc({ name, version, initial,
 * migrate, scope, history, fork })`; the token's kind follows `scope` (default "conversation").
 * Names starting with "pi." are the harness's own. A definition that is not one of the spec's
 * (history or fork on a session or task document, "asOf" without "rewindable", an unknown word) is
 * refused with a TypeError.
 */
export function defineDoc<T extends Json>(name: string, initial: T): DocToken<T>;
export function defineDoc<T extends Json>(definition: SessionDocDefinition<T>): SessionDocToken<T>;
export function defineDoc<T extends Json>(definition: TaskDocDefinition<T>): TaskDocToken<T>;
export function defineDoc<T extends Json>(definition: DocDefinition<T>): DocToken<T>;
export function defineDoc<T extends Json>(
  nameOrDefinition: string | DocDefinition<T> | SessionDocDefinition<T> | TaskDocDefinition<T>,
  initial?: T,
): DocToken<T> | SessionDocToken<T> | TaskDocToken<T> {
  const definition =
    typeof nameOrDefinition === "string"
      ? ({ name: nameOrDefinition, initial: initial as T } as DocDefinition<T>)
      : nameOrDefinition;
  const { name } = definition;
  if (!name || name.startsWith("pi.")) throw new TypeError(`document name ${name} is reserved or empty`);
  const scope = definition.scope ?? "conversation";
  if (scope === "conversation") return docToken(definition as DocDefinition<T>);
  if (scope !== "session" && scope !== "task")
    throw new TypeError(
      `document ${name}: scope must be "conversation", "session" or "task", not ${String(scope)}`,
    );
  const loose = definition as { history?: unknown; fork?: unknown };
  if (loose.history !== undefined || loose.fork !== undefined)
    throw new TypeError(
      `document ${name}: a ${scope} document is current-only and never forked: it declares no history or fork`,
    );
  const access = typedAccess(definition);
  if (scope === "session") {
    return {
      scope,
      name,
      version: access.version,
      read: (tx) => access.read(tx, SESSION_DOCS),
      write: (tx, value) => access.write(tx, SESSION_DOCS, value),
      view: access.view,
    };
  }
  return {
    scope,
    name,
    version: access.version,
    read: (tx, taskId) => access.read(tx, { kind: "task", taskId }),
    write: (tx, taskId, value) => access.write(tx, { kind: "task", taskId }, value),
    view: access.view,
  };
}

/**
 * A definition's reads and writes at any scope: version checks, get-or-create, migration on read,
 * JSON objects only. `check` runs on the incarnation's record after each access (inside `tx`).
 */
function typedAccess<T extends Json>(
  definition: CommonDocDefinition<T>,
  check: (tx: Tx, scope: DocScope) => void = () => undefined,
  /** A conversation token's rules: a write that creates its incarnation takes them (spec §3.3). */
  semantics?: { readonly history: "latest" | "rewindable"; readonly fork: "asOf" | "current" | "initial" },
) {
  const { name, migrate } = definition;
  const version = definition.version ?? 1;
  if (!Number.isInteger(version) || version < 1)
    throw new TypeError(`document ${name}: version must be a positive integer, not ${version}`);
  const fresh = (): T => {
    const value =
      typeof definition.initial === "function" ? (definition.initial as () => T)() : definition.initial;
    return structuredClone(plainJsonObject(name, "initial", value));
  };
  if (typeof definition.initial !== "function") fresh();
  const upgrade = (value: Json, stored: number): T => {
    if (stored > version || !migrate) throw new DocumentVersionError(name, stored, version);
    return plainJsonObject(name, "migrate", migrate(structuredClone(value), stored));
  };
  const view = (stored: { value: Json | undefined; version: number | undefined }): T => {
    if (stored.value === undefined) return fresh();
    const at = stored.version ?? 1;
    return at === version ? (stored.value as T) : upgrade(stored.value, at);
  };
  return {
    version,
    view,
    read(tx: Tx, scope: DocScope): T {
      const value = tx.readDoc(scope, name);
      const at = tx.docVersion(scope, name);
      if (value === undefined) {
        // Get-or-create (spec §3.3): the only typed access that creates an absent document.
        const created = fresh();
        tx.writeDoc(scope, name, created, version, semantics);
        check(tx, scope);
        return created;
      }
      check(tx, scope);
      if (at === version) return value as T;
      const migrated = upgrade(value, at ?? 1);
      tx.writeDoc(scope, name, migrated, version);
      return migrated;
    },
    write(tx: Tx, scope: DocScope, value: T): void {
      // Checked before writing: a refusal its caller catches must leave the commit without the write.
      check(tx, scope);
      tx.writeDoc(scope, name, jsonObject(name, "a written value", value), version, semantics);
    },
  };
}

/**
 * Typed access refuses a token whose rules are not its incarnation's (spec §3.1): a conversation
 * document's stored `record` keeps the history and fork rule it was created with. One check for every
 * typed read and write: a transaction's, the harness's `snapshot` and a tool's `api.snapshot`.
 */
export function refuseOtherSemantics(
  name: string,
  semantics: { readonly history: "latest" | "rewindable"; readonly fork: "asOf" | "current" | "initial" },
  record: DocumentRecord | undefined,
): void {
  if (
    record &&
    "history" in record &&
    (record.history !== semantics.history || record.fork !== semantics.fork)
  )
    throw new DocumentSemanticsError(name, semantics, { history: record.history, fork: record.fork });
}

/** The token of a conversation document definition, the harness's own (pi.*) included. */
function docToken<T extends Json>(definition: DocDefinition<T>): DocToken<T> {
  const { name } = definition;
  const history = definition.history ?? "latest";
  if (history !== "latest" && history !== "rewindable")
    throw new TypeError(`document ${name}: history must be "latest" or "rewindable", not ${String(history)}`);
  const fork = definition.fork ?? "current";
  if (fork !== "current" && fork !== "initial" && fork !== "asOf")
    throw new TypeError(`document ${name}: fork must be "current", "initial" or "asOf", not ${String(fork)}`);
  if (fork === "asOf" && history !== "rewindable")
    throw new TypeError(
      `document ${name}: fork "asOf" needs history "rewindable" (the value at an entry is kept only then)`,
    );
  const semantics = { history, fork };
  const access = typedAccess(
    definition,
    (tx, scope) => refuseOtherSemantics(name, semantics, tx.docRecord(scope, name)),
    semantics,
  );
  return {
    scope: "conversation",
    name,
    version: access.version,
    history,
    fork,
    read: (tx, c) => access.read(tx, c),
    write: (tx, c, value) => access.write(tx, c, value),
    view: access.view,
  };
}

function jsonObject<T>(name: string, what: string, value: T): T {
  if (value === null || typeof value !== "object" || Array.isArray(value))
    throw new TypeError(`document ${name}: ${what} must be a JSON object`);
  return value;
}

/**
 * What `initial()` and `migrate()` return is a plain JSON object (spec §3.1, §3.4), checked where it
 * is made: a read-only snapshot hands it back without a commit's check, so a Date, a Map or an
 * `undefined` member is refused here with `NotJson`.
 */
function plainJsonObject<T>(name: string, what: string, value: T): T {
  assertJson(jsonObject(name, what, value));
  return value;
}

/**
 * pi.agent (spec §2.2): version 2 names a model `{ provider, modelId }`; version 1 stored
 * `{ provider, id }`, read as version 2 (and stored so by the next transaction that reads it).
 */
export const agentDoc: DocToken<AgentState> = docToken<AgentState>({
  name: DOC.agent,
  version: 2,
  history: "rewindable",
  fork: "asOf",
  initial: () => ({}),
  migrate: (value) => withModelId(value) as AgentState,
});

/**
 * `value` with its `model` (a version 1 ModelRef, `{ provider, id }`) renamed to `{ provider, modelId }`;
 * anything else is returned as it is. Used by pi.agent and by the tasks that pin a model in their checkpoint.
 */
export function withModelId<T extends Json>(value: T): T {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return value;
  const model = value.model;
  if (model === null || typeof model !== "object" || Array.isArray(model)) return value;
  if (model.modelId !== undefined || model.id === undefined) return value;
  const { id, ...rest } = model;
  return { ...value, model: { ...rest, modelId: id } };
}
