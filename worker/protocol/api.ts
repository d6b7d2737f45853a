/**
 * The engine API a tab calls, grouped by area (`api.conversations.create(...)`), and every value that
 * travels with it: the engine's status, the hello, the summaries, settings and outcomes. The same
 * interface on both sides: the tab's client (client.ts) sends each call as a message, the engine's
 * door (door.ts) checks it against its schema (schema.ts) and runs it. Invariants:
 * - every argument and result is plain JSON data (no functions, Maps, class instances, transferables;
 *   an absent optional field means the same as a missing one), except a watch's listener, which never
 *   travels: the client keeps it and the engine's frames are addressed to it by watch id (wire.ts);
 * - each method is async; an engine's typed errors reach the tab as an Error with the same `name`
 *   (and `code`), e.g. `ImportRefused`, `UnknownConversation`, `BadRequest`;
 * - this module has types and constants only (no engine code): the tab's bundle carries it for free.
 * Adding an engine call: its signature here, its argument schema in schema.ts (the compiler insists),
 * and the engine's side in worker/app/engine-host.ts (`EngineHost.tab`).
 */

import type { AgentEvent } from "../agent/events/types.ts";
import type { ModelChoice } from "../agent/models/keys.ts";
import type { KeyCheck } from "../agent/models/provider-problem.ts";
import type { ModelRef, ThinkingLevel, ToolPolicy, UsageState } from "../agent/records.ts";
import type { ApprovalAnswer, ApprovalRequest } from "../agent/tools/approval.ts";
import type { UsageRollup } from "../agent/usage.ts";
import type { UsageDays, UsageDaysQuery } from "../agent/usage-days.ts";
import type { WorkspaceFile } from "../agent/workspace/browse.ts";
import type { HarnessInspection, TaskGraph } from "../core/inspect.ts";
import type { MovePackage, RefuseAnswer, StageAnswer } from "../core/move.ts";
import type { EntryPage } from "../core/pages.ts";
import type { ConversationId, EntryId, EntryRecord, SubmissionId, TaskId } from "../core/types.ts";
import type { WatchFrame } from "../core/view-ops.ts";
import type { AttachmentDraft } from "./attachments.ts";

/**
 * Bumped whenever a message changes shape; a tab and an engine that differ refuse each other. 16:
 * `run.resendAsFork` takes the files to keep, and a call too long for a server space's frame travels
 * in parts (server-socket.ts `messageFrames`).
 */
export const PROTOCOL_VERSION = 16;

export const DEFAULT_STORE_NAME = "agent";

export type EngineStatus =
  | { phase: "starting"; detail: string }
  | { phase: "waiting-for-lock"; detail: string }
  | {
      phase: "ready";
      /** Where the store is: a browser's (IndexedDB, OPFS) or a server space's Durable Object. */
      storeKind: "idb" | "opfs" | "opfs-lent" | "durable-object";
      build: string;
      jspi: boolean;
      persisted: boolean | undefined;
    }
  | { phase: "handing-over"; detail: string }
  | { phase: "handed-over"; detail: string }
  | {
      phase: "failed";
      /** Where it failed: opening the store, a running engine that stopped, or reaching the engine. */
      stage: "open" | "run" | "connect";
      /** `discarded`: the browser deleted the saved data (worker/core/store-identity.ts); the engine waits for `store.startFresh`. */
      reason: "quota" | "corrupt" | "locked" | "unsupported" | "migration" | "discarded" | "unknown";
      message: string;
      advice: string;
      /** With `discarded`: the newest export made from the lost store, which can bring its conversation back. */
      lastExport?: { at: number; fileName: string };
    };

/** The `failed` status a tab and an engine of different protocols show: neither serves the other. */
export function protocolMismatch(protocols: {
  tab: number;
  engine: number;
}): Extract<EngineStatus, { phase: "failed" }> {
  return {
    phase: "failed",
    stage: "connect",
    reason: "unsupported",
    message: `this tab speaks protocol ${protocols.tab}, the engine ${protocols.engine}`,
    advice: "Reload the page to load the same version of the app as the engine.",
  };
}

/** What a tab says first on a connection: who it is and which protocol it speaks. */
export interface TabHello {
  readonly tabId: string;
  readonly protocol: number;
}

export interface Hello {
  readonly protocol: number;
  readonly build: string;
  readonly status: EngineStatus;
}

export interface ConversationSummary {
  readonly id: ConversationId;
  readonly title: string;
  readonly busy: boolean;
  /**
   * Set when the conversation went to another home (issue 27): `moving` (a move's first step froze
   * it; it runs nowhere here) or `moved` (it lives there as `remote`; this copy is read-only).
   */
  readonly away?: ConversationAway;
}

/** A page of the conversation list: the newest top-level conversations, and how many there are in all. */
export interface ConversationPage {
  readonly items: readonly ConversationSummary[];
  readonly total: number;
}

/** A page of a search (`conversations.searchPage`): the conversations found, newest activity first. */
export interface SearchPage {
  readonly items: readonly ConversationSummary[];
  /**
   * Where the next page starts (give it back as `before`); absent once the whole store was searched.
   * A conversation may be found again on a later page (an older message of it): keep it once.
   */
  readonly before?: number;
  /**
   * Where the next page's walk of the titles starts (give it back as `titlesBefore`); absent once
   * every title was walked. A page reads a bounded number of titles, so a page of a large store may
   * hold no title match yet while older titles remain.
   */
  readonly titlesBefore?: number;
}

/** Where a conversation that left this home went (see ConversationSummary.away). */
export interface ConversationAway {
  readonly status: "moving" | "moved";
  /** Its id in the other home, once the move is done. */
  readonly remote?: ConversationId;
}

/** A conversation's agent settings as the settings panel edits them. */
export interface AgentSettingsView {
  readonly model?: ModelRef;
  readonly thinkingLevel?: ThinkingLevel;
  readonly instructions?: string;
}

/** A change to them: a given field replaces, null clears (back to the default), an absent one stays. */
export interface AgentSettingsChange {
  readonly thinkingLevel?: ThinkingLevel | null;
  readonly instructions?: string | null;
}

export const THINKING_LEVELS: readonly ThinkingLevel[] = ["off", "minimal", "low", "medium", "high", "xhigh"];
/** Instructions longer than this are refused where they enter. */
export const MAX_INSTRUCTIONS = 20_000;

/** A user tool as the settings show it: its source, its stored version and the version the engine runs. */
export interface UserToolView {
  readonly name: string;
  readonly description: string;
  /** The parameters' JSON schema, as JSON text. */
  readonly parameters: string;
  /** The async function's source: `async (args, tools) => ...`. */
  readonly body: string;
  /** 1 on the first save, one more on each save. */
  readonly version: number;
  readonly savedAt: number;
  /** The version the engine's registry runs now (absent: none; it equals `version` once reloaded). */
  readonly activeVersion?: number;
  /**
   * It arrived with an imported conversation and is opt-in: only conversations that select it get
   * it, until `userTools.enableEverywhere` (absent: the user's own, in every conversation by default).
   */
  readonly imported?: true;
}

/** What the settings send to save a user tool (a new name adds one, a stored name edits it). */
export interface UserToolDraft {
  readonly name: string;
  readonly description: string;
  /** JSON text of an object schema. */
  readonly parameters: string;
  readonly body: string;
}

/** An installed extension as a conversation's menu offers it. */
export interface ExtensionChoice {
  readonly name: string;
  /** Whether it is a user tool's extension (`user:<tool>`). */
  readonly user: boolean;
  /** The MCP server it stands for (`mcp:<server>`), absent for any other extension. */
  readonly mcp?: string;
  /** The tools it offers, by name. */
  readonly tools: readonly string[];
  /** Whether this conversation selects it. */
  readonly enabled: boolean;
  /** An imported user tool, opt-in: off unless a conversation selects it (see UserToolView.imported). */
  readonly imported?: true;
}

/** The demo model's speed presets. */
export type DemoSpeedName = "slow" | "normal" | "fast" | "instant";

export type InputMode = "followUp" | "steer";

export interface SubmitRequest {
  /** May be empty when files are attached. */
  readonly text: string;
  readonly mode?: InputMode;
  readonly requestId?: string;
  /**
   * Files given to the model with the text (attachments.ts: images as image content, text files and
   * a PDF's extracted text as text with their names). Checked before anything is stored; a file the
   * engine will not take, or an image for a model that reads text only, is an `AttachmentRefused`
   * error that says why in words, and nothing was written.
   */
  readonly attachments?: readonly AttachmentDraft[];
}

/** The `name` of the errors `conversations.fork` rejects with (the engine's typed errors). */
export type ForkError = "UnknownConversation" | "EntryNotVisible";

/**
 * The `name` of the errors `conversations.delete` rejects with: `UnknownConversation`, or
 * `ConversationNotDeletable` (the main conversation; one a task owns; one with forks; one still
 * working: its message says which, in words).
 */
export type DeleteError = "UnknownConversation" | "ConversationNotDeletable";

export type WithdrawOutcome = "withdrawn" | "already_placed" | "settled" | "not_found";

export type CompactOutcome =
  | { status: "summarized" }
  | { status: "nothing" }
  | { status: "failed"; reason: string };

/**
 * A watch's consumer: called with each value in order; the next one is sent only after its promise
 * resolved (the tab acknowledges it), and at most 100 wait (then one value with the whole newest
 * state replaces them).
 */
export type Listener<T> = (value: T) => Promise<void> | void;

/** The conversations: the list, and what makes, copies, names, finds, removes or moves one. */
export interface ConversationsApi {
  list(): Promise<ConversationSummary[]>;
  /**
   * Watch the conversation list: `listener` gets the list at once, then again after each commit that
   * changed it (created, renamed, became busy or idle). Lists are coalesced: a slow tab gets only the
   * newest, never a queue. Returns a watch id for `watches.unwatch`.
   */
  watch(listener: Listener<ConversationSummary[]>): Promise<number>;
  /**
   * Watch the newest `limit` (1-500) conversations of the list and its total: what a tab shows, so a
   * commit costs the tab O(limit) whatever the store holds. A page is delivered at once, then after
   * each commit that changed it (a conversation in it created, renamed, busy or idle, deleted; the
   * total), coalesced like `watch`. For more, watch again with a larger limit.
   */
  watchPage(options: { limit: number }, listener: Listener<ConversationPage>): Promise<number>;
  create(title?: string): Promise<ConversationId>;
  /**
   * A new conversation forked from `conversationId` at `entryId` (spec §3.7): it sees that
   * conversation's entries through `entryId` and its agent as it was then, with a context, inbox and
   * usage of its own; its title is the parent's with " (fork)". Rejects with an error whose `name`
   * is a `ForkError`: `UnknownConversation`, or `EntryNotVisible` (an entry not in that history).
   */
  fork(conversationId: ConversationId, entryId: EntryId): Promise<ConversationId>;
  /**
   * Delete a conversation (not the main one) with everything in it, in one commit: entries,
   * documents, tasks, inputs, and the conversations its tasks own. Refused while it works (stop it
   * first) or while a fork reads its history (delete the forks first): rejects with an error whose
   * `name` is a `DeleteError`. Every tab's list drops it; its watches end. Ids are never reused.
   */
  delete(conversationId: ConversationId): Promise<void>;
  /** Give a conversation a title (trimmed, at most 200 characters; an empty title is refused). */
  rename(conversationId: ConversationId, title: string): Promise<void>;
  /** The ids of the top-level conversations whose title or entries contain `text` (case-insensitive). */
  search(text: string): Promise<ConversationId[]>;
  /**
   * One page of a search for `text` (case-insensitive) in titles and message text: at most `limit`
   * (1-200) conversations. The first page (no `before`) holds the title matches, then conversations
   * by their newest matching message; each page reads a bounded number of stored messages (newest
   * first), so a page costs the same on any store, and `before` continues the search further back.
   */
  searchPage(
    text: string,
    options: { limit: number; before?: number; titlesBefore?: number },
  ): Promise<SearchPage>;
  /**
   * A conversation as export JSON (entries and documents, versioned; never a key) and a file name for
   * it. `import` takes such a text and makes it a new conversation in one commit; a malformed or
   * foreign file is refused with an `ImportRefused` error and nothing is written.
   */
  export(conversationId: ConversationId): Promise<{ fileName: string; text: string }>;
  import(text: string): Promise<ConversationId>;
}

/** A conversation's run: input in, stop, take back, start over, compact. */
export interface RunApi {
  /** Queue an input; a conversation without a title takes one from it, in the same commit. */
  submit(conversationId: ConversationId, request: SubmitRequest): Promise<SubmissionId>;
  /**
   * Edit and resend, in one commit: a fork of `conversationId` at the entry just before `entryId`
   * (or, when nothing is before it, a new conversation with that one's model, thinking level and
   * instructions) with `text` submitted there, and the message's attached files with it: all of
   * them, or when `keep` is given only those at its indexes (in the message's order; `[]` drops
   * them all). `text` may be empty when a file is kept. Resolves with the new conversation's id;
   * rejects like `conversations.fork` (a `ForkError`), and then nothing was written.
   */
  resendAsFork(
    conversationId: ConversationId,
    entryId: EntryId,
    text: string,
    keep?: readonly number[],
  ): Promise<ConversationId>;
  abort(conversationId: ConversationId): Promise<void>;
  /**
   * Withdraw a queued input (a steer or follow-up waiting in the inbox) before the agent takes it
   * (spec §2.2): `withdrawn` (it will never run; its submission is unanswered, `aborted`),
   * `already_placed` (the agent took it first), `settled` (it had already ended), `not_found` (no such
   * submission in this conversation).
   */
  withdraw(conversationId: ConversationId, submissionId: SubmissionId): Promise<WithdrawOutcome>;
  /** Start the context over (a pi.reset entry); earlier entries stay stored. */
  reset(conversationId: ConversationId): Promise<SubmissionId>;
  /**
   * Summarize the older context into a pi.compaction entry; resolves when the compaction ended:
   * `summarized` (its summary placed or queued), `nothing` (too little to compact), or `failed`
   * with the reason.
   */
  compact(conversationId: ConversationId): Promise<CompactOutcome>;
}

/** A conversation's model and agent settings, its extensions, and the app-wide demo speed. */
export interface SettingsApi {
  /** A conversation's model, thinking level and instructions (absent: the defaults). */
  agent(conversationId: ConversationId): Promise<AgentSettingsView>;
  /** Change a conversation's thinking level or instructions (checked here: a bad value is refused). */
  configure(conversationId: ConversationId, change: AgentSettingsChange): Promise<void>;
  setModel(conversationId: ConversationId, model: ModelRef): Promise<void>;
  models(): Promise<ModelChoice[]>;
  /** Every installed extension, with whether the conversation selects it (pi.agent `extensions`). */
  extensions(conversationId: ConversationId): Promise<ExtensionChoice[]>;
  /** Select or drop one extension for one conversation (from its next request on). */
  setExtensionEnabled(conversationId: ConversationId, name: string, enabled: boolean): Promise<void>;
  demoSpeed(): Promise<DemoSpeedName>;
  /** Every demo stream started from now on, in every tab, runs at this speed; it is kept in the store. */
  setDemoSpeed(speed: DemoSpeedName): Promise<void>;
}

/** API keys: they live in the store's settings and never reach entries, exports or logs. */
export interface KeysApi {
  /** Save a provider's key (null removes it). */
  set(provider: string, key: string | null): Promise<void>;
  has(provider: string): Promise<boolean>;
  /** The providers with a saved key (names only). */
  list(): Promise<string[]>;
  /**
   * Send one tiny request with the provider's saved key: `ok`, or what went wrong in words (missing,
   * rejected, network, other), never with the key in it.
   */
  test(provider: string): Promise<KeyCheck>;
}

/** The server this browser attaches to (issue 27), as the settings show it: never the token. */
export interface RemoteSettings {
  /** The server's address (`https://host` or a space's address), or null: browser only. */
  readonly url: string | null;
  readonly hasToken: boolean;
}

/** What the tab's own connection to the server needs (the token is a secret: see RemoteApi). */
export interface RemoteCredentials {
  readonly url: string;
  readonly token: string;
}

/**
 * The server setting, kept in the browser engine's store like API keys (worker/app/remote.ts).
 * Served by the browser engine only (a server space refuses it as an unknown method).
 */
export interface RemoteApi {
  get(): Promise<RemoteSettings>;
  /** The address and token, for the tab's own WebSocket only (never shown, logged or exported). */
  credentials(): Promise<RemoteCredentials | null>;
  /**
   * Save the address and the token (`token` null: keep the saved one); `url` null forgets both. A bad
   * address or token is refused with a `RemoteSettingsInvalid` error and nothing is written.
   */
  set(url: string | null, token: string | null): Promise<void>;
}

/**
 * The browser engine's own store, as its tabs reach it before the engine is ready (a server space
 * refuses it as an unknown method).
 */
export interface StoreApi {
  /**
   * The browser discarded the saved data (status `failed`, reason `discarded`) and a person chose to
   * go on with an empty store: the engine opens it and gets ready. `not-discarded` when the engine
   * was not waiting on a discarded store (nothing happens).
   */
  startFresh(): Promise<"started" | "not-discarded">;
}

/** An MCP server as the settings show it (issue 31 part 2; worker/app/mcp/): never its token. */
export interface McpServerView {
  /** Its name in the settings: its tools are `<name>_<tool>`, its extension `mcp:<name>`. */
  readonly name: string;
  readonly url: string;
  readonly hasToken: boolean;
  /** The cached tool list (what the agent offers, offline too). */
  readonly tools: readonly {
    /** What the model calls. */
    readonly name: string;
    /** The server's own name for it. */
    readonly tool: string;
    readonly description: string;
    /** The server marks it read-only or idempotent: a crash mid-call may call it again. */
    readonly replaySafe: boolean;
  }[];
  /** Tools the server listed that are not offered, with the reason. */
  readonly skipped: readonly { readonly name: string; readonly reason: string }[];
  /** When the tools were last listed. */
  readonly listedAt: number;
  /** The last refresh failed: what happened, in words, and when (the cached tools stay offered). */
  readonly problem?: string;
  readonly problemAt?: number;
}

/** What the settings send to add a server. */
export interface McpServerDraft {
  readonly name: string;
  readonly url: string;
  /** A bearer token (kept like an API key: never shown again, never exported), or null for none. */
  readonly token: string | null;
}

/**
 * A change to a server's setting (`McpApi.update`): what is absent stays as it is. The token is
 * never shown back, so an edit that leaves it out keeps it; `null` removes it.
 */
export interface McpServerChange {
  readonly name?: string;
  readonly url?: string;
  readonly token?: string | null;
}

/**
 * Remote MCP servers (Streamable HTTP), kept in the engine's store like API keys: the browser
 * engine's, or a server space's own (whose tokens are the server's secrets, never sent here: a
 * draft carrying one is refused). A refused setting is an `McpServerInvalid` error; a server that
 * does not answer when added is `McpUnreachable`, and one whose answer is refused `McpAnswerRefused`.
 */
export interface McpApi {
  list(): Promise<McpServerView[]>;
  /** Ask the server for its tools, then store it: its tools are offered in every conversation by default. */
  add(draft: McpServerDraft): Promise<McpServerView>;
  /**
   * Change a server's name, address or token: the changed server must answer with its tools (as
   * when added), then one commit stores it and renames its extension in every conversation's choice.
   */
  update(name: string, change: McpServerChange): Promise<McpServerView>;
  /** List its tools again; a server that does not answer keeps its cached tools, with `problem`. */
  refresh(name: string): Promise<McpServerView>;
  /** Forget it (and its token); no conversation keeps selecting it. */
  remove(name: string): Promise<void>;
}

/** A move as the browser engine's tabs see it (its durable intent: worker/app/moves.ts). */
export interface MoveView {
  readonly transfer: string;
  /** `toServer`: a conversation of this browser goes to the server; `back`: a server's comes here. */
  readonly direction: "toServer" | "back";
  /** The conversation in this browser (toServer: from the start; back: once adopted). */
  readonly local?: ConversationId;
  /** The conversation on the server (back: from the start; toServer: once adopted there). */
  readonly remote?: ConversationId;
  /** `pending` until it ended: `done` (in the other home now) or `cancelled` (it stayed; `reason`). */
  readonly status: "pending" | "done" | "cancelled";
  readonly reason?: string;
}

/**
 * Moving conversations between this browser and the configured server (issue 27): served by the
 * browser engine to its tabs. A call resolves when the move ended (`done` or `cancelled`), or with
 * `pending` when the server was lost midway: the engine finishes it by itself when the server is
 * back (and at every start). Refused before anything is written, with a typed error:
 * `HomeUnavailable` (`code`: `no_server` none is configured, `unauthorized` the server refused the
 * token, `unreachable` it did not answer) or `MoveRefused` (`code` `move_refused:<reason>`, e.g.
 * `too_large`, `subagent`, `moved`).
 */
export interface HomesApi {
  /** "Run on the server": move a conversation of this browser to the server. */
  toServer(conversationId: ConversationId): Promise<MoveView>;
  /** "Bring back to this browser": move the server's conversation `remoteConversationId` here. */
  bringBack(remoteConversationId: ConversationId): Promise<MoveView>;
  /** Every move this browser started, the pending ones included (newest last). */
  list(): Promise<MoveView[]>;
}

/** The workspace's files (shared by every conversation). */
export interface WorkspaceApi {
  /** Every file of the workspace with its size (at most 5,000). */
  files(): Promise<WorkspaceFile[]>;
  read(path: string): Promise<string>;
  delete(path: string): Promise<void>;
}

/** The user's own tools. */
export interface UserToolsApi {
  /** The user tools kept in the store, each with the version the engine runs. */
  list(): Promise<UserToolView[]>;
  /**
   * Check and store a user tool (its body is compiled in the engine's sandbox, never in the tab),
   * then install it: the next call uses it, a running call finishes on its old version. Bad code, a
   * bad schema or a name another extension's tool has is refused with a `UserToolInvalid` error
   * whose message says what is wrong; nothing is stored then.
   */
  save(draft: UserToolDraft): Promise<UserToolView>;
  /** Remove a user tool (conversations that select it stop getting it). */
  remove(name: string): Promise<void>;
  /** Clear an imported tool's opt-in mark: every conversation that does not drop it gets it. */
  enableEverywhere(name: string): Promise<void>;
}

/** Watching committed state, and reading a conversation's entries. */
export interface WatchesApi {
  /**
   * Watch a conversation: `listener` gets the current view at once, then each commit's frame (paced,
   * see `Listener`). Returns a watch id for `unwatch`. The view is paged: it carries the newest
   * entries of the active range (150 at first, and those appended since) and counts the others in
   * `older`; `entriesBefore` fetches them.
   */
  conversation(conversationId: ConversationId, listener: Listener<WatchFrame>): Promise<number>;
  /**
   * Watch a conversation's agent events (spec §9.4): `listener` gets `[snapshot]` at once, then one
   * commit's events per call; a tab more than 100 batches behind gets one `[snapshot]` of the newest
   * state instead. Returns a watch id for `unwatch`.
   */
  events(conversationId: ConversationId, listener: Listener<readonly AgentEvent[]>): Promise<number>;
  /**
   * Watch the live task graph (spec §9.5): `listener` gets the graph at once, then again after each
   * commit that changed a node (a tab 100 graphs behind gets only the newest). Returns a watch id.
   */
  taskGraph(listener: Listener<TaskGraph>): Promise<number>;
  /** End a watch of any kind (conversation, list, events, task graph); an unknown id is ignored. */
  unwatch(watchId: number): Promise<void>;
  entries(conversationId: ConversationId): Promise<EntryRecord[]>;
  /**
   * A page of older entries for a paged view (`conversation`): the `limit` (at most 1,000) entries of
   * the active range just before entry `beforeId` in the view's order (`pageCursor(view)`: the view's
   * first entry that is not a head marker), with the range's head marker once they reach its start,
   * and how many entries precede them (`older`). `applyPage(view, page)` puts it in front.
   */
  entriesBefore(conversationId: ConversationId, beforeId: EntryId, limit: number): Promise<EntryPage>;
}

/** The task panel: the live tasks and what the scheduler makes of them. */
export interface TasksApi {
  /** The live tasks keyed by decimal id: owner, owned conversations, phase, wait, held outcome (spec §9.5). */
  graph(): Promise<TaskGraph>;
  /**
   * Every live task with what the scheduler makes of it (running, ready, waiting, completing, blocked
   * with the reason), the queued and placed submissions, diagnostics, and a fatal store error.
   */
  inspect(): Promise<HarnessInspection>;
  /**
   * Abort one task: durably marked, its invocation signalled; its owned work is aborted first
   * (bottom-up). `terminal` when it had already finished. An unknown id is an `UnknownTask` error.
   */
  abort(taskId: TaskId): Promise<"marked" | "terminal">;
}

/** A tool's approval policies as the settings show them (worker/app/tool-policies.ts). */
export interface ToolPolicyView {
  readonly name: string;
  readonly label?: string;
  /** It only reads: it runs freely by default. */
  readonly readOnly: boolean;
  /** The product's default for it. */
  readonly default: ToolPolicy;
  /** The person's app-wide choice (absent: the default). */
  readonly app?: ToolPolicy;
  /** This conversation's own choice (absent: the app-wide one). */
  readonly conversation?: ToolPolicy;
  /** The one that applies. */
  readonly effective: ToolPolicy;
}

/**
 * Tool calls that wait for a person (a call whose policy is `ask` waits in its pi.live slot, status
 * `awaiting_approval`, with its arguments in words) and the policies that decide which do.
 */
export interface ApprovalsApi {
  /**
   * Approve or deny a waiting call, in one commit: the first decision wins (`decided`); a later one
   * gets `already_decided` with the decision taken; the same `requestId` again gets the same answer
   * and writes nothing; a call that does not wait (ended, aborted) gets `not_waiting`. A denial's
   * `reason` is given to the model; `always` with an approval lets this conversation run the tool
   * freely from now on. An unknown conversation is an `UnknownConversation` error.
   */
  decide(conversationId: ConversationId, request: ApprovalRequest): Promise<ApprovalAnswer>;
  /** Every tool with its policies: app-wide, and with a conversation, that conversation's too. */
  policies(conversationId?: ConversationId): Promise<ToolPolicyView[]>;
  /** Set one tool's policy (null: back to the default), app-wide or, with a conversation, there only. */
  setPolicy(tool: string, policy: ToolPolicy | null, conversationId?: ConversationId): Promise<void>;
}

/** When a schedule is due: a cron expression (five fields), or once at a time (epoch ms). */
export type ScheduleWhen =
  | { readonly kind: "cron"; readonly cron: string }
  | { readonly kind: "once"; readonly at: number };

/**
 * What a person sets for a schedule (worker/app/schedules.ts): the input it submits, when, in which
 * IANA time zone its cron (and its words) are read, and what a start does with occurrences missed
 * while the app was closed: run each once (`run`) or skip them (`skip`), saying which.
 */
export interface ScheduleDraft {
  readonly text: string;
  readonly when: ScheduleWhen;
  readonly timeZone: string;
  readonly catchUp: "run" | "skip";
}

/** A schedule as kept in its conversation's `app.schedules` document (every tab's view shows it). */
export interface Schedule extends ScheduleDraft {
  readonly id: string;
  /** In words: "At 09:00, Monday through Friday (Europe/Berlin)". */
  readonly description: string;
  readonly paused: boolean;
  /** Bumped by each edit, pause and resume: only the task of the current revision fires it. */
  readonly revision: number;
  readonly createdAt: number;
  /** Occurrences after this time are still to come (set at creation, edit and resume). */
  readonly after: number;
  /** When it fires next (absent: paused, or a one-off that is done). */
  readonly next?: number;
  /** A one-off that fired (or was skipped): nothing more to come. */
  readonly done?: boolean;
  /** Its last firing: when, and how many occurrences it ran and skipped then. */
  readonly last?: { readonly at: number; readonly ran: number; readonly skipped: number };
}

/** The `app.schedules` document: a conversation's schedules, in creation order. */
export interface SchedulesDoc {
  readonly items: readonly Schedule[];
}

/** A draft in words before it is saved: its description and the next times it would fire. */
export interface SchedulePreview {
  readonly description: string;
  readonly next: readonly number[];
}

/**
 * Schedules attached to a conversation, which submit an input when due (worker/app/schedules.ts).
 * A draft the engine cannot use is refused as a `ScheduleInvalid` error, code `bad_cron`,
 * `bad_time_zone`, `past_time` or `bad_text`; an unknown schedule is `unknown_schedule`. The
 * schedules themselves are read from the conversation's view (`app.schedules`).
 */
export interface SchedulesApi {
  preview(draft: ScheduleDraft): Promise<SchedulePreview>;
  create(conversationId: ConversationId, draft: ScheduleDraft): Promise<Schedule>;
  update(conversationId: ConversationId, scheduleId: string, draft: ScheduleDraft): Promise<Schedule>;
  setPaused(conversationId: ConversationId, scheduleId: string, paused: boolean): Promise<Schedule>;
  delete(conversationId: ConversationId, scheduleId: string): Promise<void>;
}

/** What the models cost. */
export interface UsageApi {
  /** Every conversation's usage added up (tokens and cost per model, tools' own spend per tool). */
  total(): Promise<UsageState>;
  /** One conversation's own usage and its subagents' share (the conversations its tasks own), each once. */
  conversation(conversationId: ConversationId): Promise<UsageRollup>;
  /**
   * Tokens and cost per day and per model over every conversation (worker/agent/usage-days.ts), the
   * days counted in the asker's IANA time zone, at most 366 of them. A zone or range the engine
   * cannot use is refused as a `UsageQueryInvalid` error, code `bad_time_zone` or `bad_range`.
   */
  days(query: UsageDaysQuery): Promise<UsageDays>;
}

/**
 * A conversation's run exported as OpenTelemetry spans (worker/app/trace.ts): the OTLP JSON text of
 * an `ExportTraceServiceRequest`, one span per task, no message content and no secrets.
 */
export interface TracesApi {
  export(conversationId: ConversationId): Promise<{ fileName: string; text: string }>;
}

/** How a timeline's bar ended, or what it does now (issue 31 part 5; worker/app/timeline.ts). */
export type BarOutcome = "ok" | "error" | "aborted" | "interrupted" | "running" | "waiting";

/** What a bar stands for: a model turn, a tool call, a subagent, a compaction, an approval wait. */
export type BarKind = "generation" | "tool" | "subagent" | "compaction" | "approval" | "other";

/** One bar of a run's timeline: a task (or a tool call's wait for approval) on a time axis. */
export interface TimelineBar {
  /** `t<task id>` for a task, `a<task id>` for that tool call's approval wait. */
  readonly id: string;
  readonly taskId: TaskId;
  /** The bar it is nested under (the owner task, or the task owning its conversation). */
  readonly parent?: string;
  readonly conversationId: ConversationId;
  readonly kind: BarKind;
  /** The task's technical kind (`pi.tool`). */
  readonly taskKind: string;
  /** In a person's words: "answer", "read tool", "subagent", "waiting for your approval". */
  readonly label: string;
  readonly outcome: BarOutcome;
  /** Epoch ms. */
  readonly start: number;
  /** Absent: still going. */
  readonly end?: number;
  /** Tokens and cost, where the task has usage (a model turn, a tool that reports spend). */
  readonly usage?: {
    readonly input: number;
    readonly output: number;
    readonly total: number;
    readonly cost: number;
  };
  /** Why it ended, or why it waits or is blocked, in words. */
  readonly why: string;
  /** A tool call's assistant entry and call id (what "Rerun this tool call" takes). */
  readonly call?: { readonly entryId: EntryId; readonly callId: string };
}

/**
 * What a timeline shows of one time range: the bars of the tasks that overlap it (at most the
 * page's limit, the longest first), how many tasks overlap it in all, and the time the whole run
 * spans (what zooming out shows).
 */
export interface TimelinePage {
  readonly conversationId: ConversationId;
  readonly from: number;
  readonly to: number;
  /** The engine's clock when the page was read (a live bar ends here). */
  readonly now: number;
  readonly span: { readonly start?: number; readonly end?: number; readonly tasks: number };
  readonly bars: readonly TimelineBar[];
  /** Tasks overlapping the range; more than the bars' tasks when the page was cut at its limit. */
  readonly total: number;
}

/** A range of a timeline: absent `from`/`to` follow the run's start and now. */
export interface TimelineRange {
  readonly from?: number;
  readonly to?: number;
  /** At most this many tasks (1-500; default 200). */
  readonly limit?: number;
}

/** A bar opened: its entries (what the task appended) and the bar again, as of now. */
export interface TimelineDetail {
  readonly bar: TimelineBar;
  readonly entries: readonly EntryRecord[];
}

/** The answer to `timeline.rerunTool`: the new call's task and the entry holding the new call. */
export interface RerunAnswer {
  readonly taskId: TaskId;
  readonly entryId: EntryId;
  readonly callId: string;
}

/**
 * A conversation's run as a picture (issue 31 part 5; worker/app/timeline.ts): its tasks and its
 * subagents' tasks as bars on a time axis, paged by time range, watched live. A conversation the
 * engine does not know is an `UnknownConversation` error.
 */
export interface TimelineApi {
  /** The bars of one range (see TimelinePage). */
  page(conversationId: ConversationId, range: TimelineRange): Promise<TimelinePage>;
  /**
   * Watch one range: `listener` gets its page at once, then again after each commit that changed
   * a task (or a tool call's wait) of the conversation or its subagents; a slow tab gets only the
   * newest page. Returns a watch id for `watches.unwatch`.
   */
  watch(
    conversationId: ConversationId,
    range: TimelineRange,
    listener: Listener<TimelinePage>,
  ): Promise<number>;
  /** One task's bar and the entries it appended (at most 200); an unknown task is `UnknownTask`. */
  detail(conversationId: ConversationId, taskId: TaskId): Promise<TimelineDetail>;
  /**
   * "Rerun this tool call": a new call of the same tool with the same arguments, as a run of its
   * own (its answer entry names the original call; the original stays in the history), going
   * through the tool's approval policy. The same `requestId` again answers the same call. Refused
   * with a `RerunRefused` error (code `busy`: the conversation is working; `not_a_call`: no such
   * call in its history).
   */
  rerunTool(
    conversationId: ConversationId,
    request: { entryId: EntryId; callId: string; requestId: string },
  ): Promise<RerunAnswer>;
}

/**
 * The API each tab gets over its connection. `hello` comes first (the engine refuses other calls
 * before it); after an accepted hello the engine pushes its status at once and at every change.
 */
export interface EngineApi {
  hello(tab: TabHello): Promise<Hello>;
  readonly conversations: ConversationsApi;
  readonly run: RunApi;
  readonly settings: SettingsApi;
  readonly keys: KeysApi;
  readonly workspace: WorkspaceApi;
  readonly userTools: UserToolsApi;
  readonly watches: WatchesApi;
  readonly tasks: TasksApi;
  readonly usage: UsageApi;
  readonly traces: TracesApi;
  readonly approvals: ApprovalsApi;
  readonly schedules: SchedulesApi;
  /** A conversation's run as a picture, and rerunning a tool call from it. */
  readonly timeline: TimelineApi;
  /** The server setting: the browser engine serves it, a server space does not. */
  readonly remote: RemoteApi;
  /** MCP servers: the browser engine serves them, a server space does not. */
  readonly mcp: McpApi;
  /** Moving conversations to and from the server: the browser engine serves it, a server space does not. */
  readonly homes: HomesApi;
  /** The browser engine's store before it is ready (start fresh after a discard); a server space does not serve it. */
  readonly store: StoreApi;
  /** A move's steps, as the browser engine calls them on a server space (which alone serves them). */
  readonly moves: MovesApi;
  /**
   * The test and bench endpoints (worker/debug/endpoints.ts): served only by an engine whose page
   * was opened with `?debug=1`; any other engine refuses them as an unknown method.
   */
  readonly debug: DebugApi;
}

/**
 * The engine side of moving a conversation between homes (worker/core/move.ts; the orchestrator is
 * worker/app/moves.ts): the steps another home's orchestrator calls on this engine, e.g. a browser
 * engine calling its server space over the WebSocket. A refusal arrives as an error named
 * `MoveRefused` with code `move_refused:<reason>` (`peerError` rebuilds it). Served by a server
 * space only (worker/server/space.ts, to the browser engine that drives a move); the browser engine
 * serves it to nobody. Each call is idempotent under its transfer id.
 */
export interface MovesApi {
  /** Step 1 here (this home sends): the package, again the same for the same transfer. */
  prepare(transfer: string, conversationId: ConversationId): Promise<MovePackage>;
  /** Step 2 here (this home receives): checked whole, adopted once per transfer. */
  adopt(pkg: MovePackage): Promise<{ conversationId: ConversationId }>;
  /**
   * Step 2 for a package too large for one message, first half: store part `index` of `count` of
   * the package's JSON text (idempotent; bounded in all by the import limit, `too_large`).
   */
  stage(transfer: string, index: number, count: number, part: string): Promise<StageAnswer>;
  /** Step 2 from the staged parts: joined, checked whole and adopted once per transfer. */
  adoptStaged(transfer: string): Promise<{ conversationId: ConversationId }>;
  /** Step 3 here: done, the conversation living in the other home's `conversationId`. */
  finish(transfer: string, conversationId: ConversationId): Promise<void>;
  /** Never adopt `transfer` here (or the id it was adopted as, if it was). */
  refuse(transfer: string): Promise<RefuseAnswer>;
  /** Undo step 1 here, after the other home refused the transfer. */
  cancel(transfer: string): Promise<void>;
}

/** A function of the API, whatever it takes. */
type Method = (...args: never[]) => Promise<unknown>;

/** Every method's wire name: `"hello"`, `"conversations.create"`, `"debug.stats"`, ... */
export type MethodName = {
  [G in keyof EngineApi & string]: EngineApi[G] extends Method
    ? G
    : { [M in keyof EngineApi[G] & string]: `${G}.${M}` }[keyof EngineApi[G] & string];
}[keyof EngineApi & string];

/** A test task that commits one entry per phase; e2e tests drive and check it. */
export interface TickerRequest {
  readonly phases: number;
  readonly delayMs: number;
  readonly conversationId?: ConversationId;
}

export interface TickerStatus {
  readonly taskId: TaskId;
  readonly status: string;
  /** Phase numbers of the ticker's entries, in commit order. */
  readonly trail: number[];
}

/** What `debug.runScript` saw: the outcome, how long it took, the engine thread's longest stall. */
export interface ScriptProbe {
  /** The value as JSON, or the error's class name. */
  readonly outcome: string;
  readonly ms: number;
  readonly maxStallMs: number;
}

/** The tabs offering script workers to this engine, and how its lost workers were noticed. */
export interface ScriptWorkerStats {
  readonly tabs: readonly { tabId: string; workers: number; busy: number; failed: boolean }[];
  /** Workers started in tabs so far. */
  readonly started: number;
  /** Lost workers by what noticed first: the tab's lock, the port's close event, a failed ping or start. */
  readonly lost: Readonly<Record<"lock" | "close" | "ping" | "start", number>>;
}

export interface EngineTimeline {
  /** The worker's creation (its `performance.timeOrigin`): the tab's part of the start ends here. */
  readonly createdAt?: number;
  readonly startedAt: number;
  readonly lockedAt?: number;
  /** The store opened and migrated, before its owner-epoch fence (the bench shows the fence apart). */
  readonly migratedAt?: number;
  readonly openedAt?: number;
  readonly readyAt?: number;
  readonly firstTickAt?: number;
  /** pi-ai's chunk loaded and evaluated (its load starts at the engine's first line). */
  readonly piAiAt?: number;
  /** The engine's API module (engine-host.ts and the agent under it) loaded. */
  readonly apiAt?: number;
  /** The store's wasm and its glue fetched and compiled (started on the engine's first line). */
  readonly wasmAt?: number;
  /** The store open's parts (`OpenStamps`, worker/browser/platform.ts): the kind chosen (a page that forced none). */
  readonly kindAt?: number;
  /** opfs-lent: a tab able to lend was at hand (its offer, or the port its first script lent). */
  readonly lenderAt?: number;
  /** opfs-lent: the lent store worker's port arrived. */
  readonly lentPortAt?: number;
  /** opfs-lent: the lent worker answered the open (its script, its wasm, the OPFS file opened there). */
  readonly lentOpenAt?: number;
  /** opfs-lent, on the lent worker's clock: its script's first line. */
  readonly lentScriptAt?: number;
  /** opfs-lent, on the lent worker's clock: its store's wasm compile began. */
  readonly lentCompileAt?: number;
  /** opfs-lent, on the lent worker's clock: its store's wasm compiled. */
  readonly lentWasmAt?: number;
  /** opfs-lent, on the lent worker's clock: the engine's open arrived there. */
  readonly lentAskedAt?: number;
  /** opfs-lent, on the lent worker's clock: the open's wasm instance made. */
  readonly lentInstanceAt?: number;
  /** opfs-lent, on the lent worker's clock: the OPFS VFS made (its module, its file handles). */
  readonly lentVfsAt?: number;
  /** opfs-lent, on the lent worker's clock: SQLite opened the database file. */
  readonly lentFileAt?: number;
  /** opfs-lent, on the lent worker's clock: the database open there (before the engine's migrate). */
  readonly lentOpenedAt?: number;
  /** The modules the harness's open needs (the app's agent, script workers, the test tasks) arrived. */
  readonly modulesAt?: number;
}

/** A committed partial answer: its text, and ms since the epoch (sub-ms) when its commit was seen. */
export interface PartialStamp {
  readonly at: number;
  readonly text: string;
}

export interface EngineStats {
  readonly transactions: number;
  readonly commits: number;
  readonly build: string;
  /** Watches held for tabs, and their undelivered frames. */
  readonly watches: number;
  readonly pendingFrames: number;
  /**
   * Wall-clock times (ms since the epoch) of this engine's start, the store lock granted, the store
   * open (migrated; its owner epoch moves in the first commit), ready (recovered, scheduling), and its
   * first tick commit.
   */
  readonly timeline: EngineTimeline;
  /**
   * The `opfs-lent` store kind's lenders (worker/browser/store-lenders.ts): tabs that can lend, the
   * tab lending each open store (`spare`: its worker is the one that tab's first script lent with its
   * side channel's hello), and every handover of a store to a new lender with its pause.
   */
  readonly lentStore?: {
    readonly lenders: number;
    readonly lending: ReadonlyArray<{
      readonly store: string;
      readonly tabId: string;
      readonly spare: boolean;
    }>;
    readonly handovers: ReadonlyArray<{
      readonly store: string;
      readonly reason: string;
      readonly pauseMs: number;
      readonly foundStored: boolean;
      readonly replayed: number;
    }>;
  };
}

/** The test and bench endpoints (`debug.*`, worker/debug/endpoints.ts), on `?debug=1` pages only. */
export interface DebugApi {
  startTicker(request: TickerRequest): Promise<TaskId>;
  ticker(taskId: TaskId): Promise<TickerStatus>;
  /** SQLite transactions and commits since this engine opened the store. */
  stats(): Promise<EngineStats>;
  /**
   * Start recording (again, from empty) every committed partial answer (`pi.live`'s streaming
   * message): its text and when the engine saw its commit (the second-tab latency bench).
   */
  recordPartials(): Promise<void>;
  /** The partial answers recorded since `recordPartials`. */
  partials(): Promise<PartialStamp[]>;
  /** Raw transactions/s and engine steps/s measured in this worker (the browser bench). */
  bench(options: { seconds: number }): Promise<Record<string, number>>;
  /** Fill the store: terminal tasks in one conversation, and idle conversations with documents. */
  seed(options: {
    tasks: number;
    conversations?: number;
    batch?: number;
  }): Promise<{ conversationId: ConversationId; tasks: number; conversations: number; ms: number }>;
  /**
   * A new conversation holding `entries` committed messages (a question and its markdown answer in
   * turn, of varied lengths, the last one an answer naming its number), for the long-chat bench and
   * e2e. Resolves with its id once committed.
   */
  seedChat(options: { entries: number }): Promise<ConversationId>;
  /**
   * The growth bench's store (worker/core/bulk-seed.ts): a long chat of `chatEntries` messages, then
   * `conversations` conversations holding `entries` messages and `tasks` terminal tasks between them,
   * copied in a few big transactions past the harness. The engine must not be used afterwards: close
   * its page; the next engine opens the store whole.
   */
  seedGrowth(options: {
    conversations: number;
    entries: number;
    tasks: number;
    chatEntries: number;
  }): Promise<{ chatId: ConversationId; firstConversation: ConversationId; ms: number }>;
  /** The wasm memory this engine's store holds now, in bytes (its JS heap is read over CDP). */
  memory(): Promise<{ wasmBytes: number }>;
  /** One commit (a document written in `conversationId`) at a time, `commits` times: each one's ms. */
  commitLatency(options: { conversationId: ConversationId; commits: number }): Promise<number[]>;
  /**
   * Run `code` in the codemode sandbox from this engine (no tools; default limits but those given),
   * in a script worker when one can be had, in the engine's thread with `inThread`; the engine's
   * thread stall is sampled meanwhile.
   */
  runScript(request: {
    code: string;
    sliceMs?: number;
    cpuMs?: number;
    inThread?: boolean;
  }): Promise<ScriptProbe>;
  /** The tabs offering script workers (worker/browser/tab-script-workers.ts). */
  scriptWorkers(): Promise<ScriptWorkerStats>;
}
