/**
 * The portable engine service: adapts `EngineApi` (what each tab calls, grouped by area;
 * worker/protocol/api.ts) to an agent harness, as the `EngineService` the protocol's door serves
 * (worker/protocol/door.ts: it checks every message before a method here runs). It runs wherever
 * the harness runs: the browser's engine host (engine-host.ts) composes it with the browser's parts
 * (store ownership and handover, tab locks, tab script workers), the server's space
 * (worker/entry/server.ts, worker/server/space.ts) serves it on each WebSocket. It keeps what is per
 * tab: the tabs that said hello, their status listeners and their watches. Invariants:
 * - every harness-backed call waits for `harness()` (the host's: it may refuse, e.g. after a handover);
 * - `dropTab(tabId)` ends that tab's watches and status listeners; the host calls it when it knows
 *   the tab is gone (the browser: the tab's lock; the server: the socket's close);
 * - `stopAll()` ends every watch ("closed"), as when the harness stops;
 * - `setStatus` reaches every tab's status listeners; a listener's failure is nobody else's;
 * - nothing here touches a browser or server global (no locks, no workers, no `navigator`).
 * A new engine call: a method here, one line in `tab()`, and its signature and schema in
 * worker/protocol/ (api.ts, schema.ts; door.ts's table).
 */

import { watchEvents } from "../agent/events/stream.ts";
import type { AgentHarness } from "../agent/harness.ts";
import type { ModelRef } from "../agent/records.ts";
import { usageDays } from "../agent/usage-days.ts";
import { listWorkspaceFiles } from "../agent/workspace/browse.ts";
import type { HarnessInspection, TaskGraph } from "../core/inspect.ts";
import type { ConversationView, Watch } from "../core/observe.ts";
import { type EntryPage, MAX_PAGE } from "../core/pages.ts";
import type { ConversationId, EntryId, TaskId } from "../core/types.ts";
import { watchFrame } from "../core/view-ops.ts";
import type { EngineService, TabCalls } from "../protocol/door.ts";
import {
  type AgentEvent,
  type AgentSettingsChange,
  type AgentSettingsView,
  type CompactOutcome,
  type ConversationPage,
  type ConversationSummary,
  type DemoSpeedName,
  type EngineStatus,
  type ExtensionChoice,
  type Hello,
  type KeyCheck,
  type ModelChoice,
  PROTOCOL_VERSION,
  protocolMismatch,
  type SearchPage,
  type SubmitRequest,
  type TabHello,
  type TimelinePage,
  type TimelineRange,
  type UsageRollup,
  type UsageState,
  type UserToolDraft,
  type UserToolView,
  type WatchFrame,
  type WithdrawOutcome,
  type WorkspaceFile,
} from "../protocol/index.ts";
import { ConversationList, TITLE_DOC } from "./conversation-list.ts";
import {
  conversationExtensions,
  deleteUserTool,
  exportedUserTools,
  saveUserToolDraft,
  setExtensionEnabled,
  userToolViews,
} from "./extensions.ts";
import {
  checkTitle,
  createTitled,
  forkTitle,
  importTitled,
  redactedIn,
  resendAsFork,
  submitWithTitle,
} from "./intents.ts";
import {
  createSchedule,
  deleteSchedule,
  endSchedules,
  pauseSchedule,
  previewSchedule,
  updateSchedule,
} from "./schedules.ts";
import { searchConversationText, searchConversationPage as searchTextPage } from "./search.ts";

import { redactTitle, savedSecrets } from "./secrets.ts";
import { checkAgentChange, storedDemoSpeed, writeDemoSpeed } from "./settings.ts";
import { publicPage, rerunToolCall, timelineDetail, watchTimeline } from "./timeline.ts";
import { setToolPolicy, toolPolicyViews } from "./tool-policies.ts";
import { conversationTrace } from "./trace.ts";
import { exportConversation } from "./transfer.ts";
import { enableUserToolEverywhere } from "./user-tools/store.ts";

/** The most conversations a list page (`watchPage`) and a search page (`searchPage`) hold. */
const MAX_LIST_PAGE = 500;
const MAX_SEARCH_PAGE = 200;

/** A page's limit: a whole number from 1 to `most`. */
function pageLimit(limit: unknown, most: number): number {
  if (typeof limit !== "number" || !Number.isFinite(limit))
    throw new TypeError("a page's limit must be a number");
  return Math.max(1, Math.min(most, Math.floor(limit)));
}

/** The documents an export carries: the agent's settings, its usage, the title. */
const EXPORTED_DOCS = ["pi.agent", "pi.usage", TITLE_DOC] as const;

/** A performance mark where the runtime has them (the browser bench reads them; workerd may not). */
function mark(name: string): void {
  if (typeof performance !== "undefined" && typeof performance.mark === "function") performance.mark(name);
}

export interface HarnessEngineOptions {
  /** The harness every call runs on; it may refuse (the browser's after a handover). */
  harness(): Promise<AgentHarness>;
  /** The engine's build, as `hello` answers it. */
  readonly build: string;
  /** The status before the host sets one (default: starting). */
  readonly status?: EngineStatus;
  /** Told once per tab id, at its first accepted hello (the browser watches the tab's lock). */
  tabArrived?(tabId: string): void;
}

export class HarnessEngine implements EngineService {
  readonly #harness: () => Promise<AgentHarness>;
  readonly #build: string;
  readonly #tabArrived: ((tabId: string) => void) | undefined;
  #status: EngineStatus;
  #statusListeners = new Map<string, Set<(s: EngineStatus) => void>>();
  #watches = new Map<number, { tabId: string; watch: Watch<ConversationView> }>();
  #nextWatch = 1;
  #tabs = new Set<string>();
  /** The conversation list of the current harness, and each tab's watches of it. */
  #list: { harness: AgentHarness; list: Promise<ConversationList> } | undefined;
  #listWatches = new Map<number, { tabId: string; stop: () => void }>();
  /** Each tab's event streams and task-graph watches. */
  #streams = new Map<number, { tabId: string; stop: () => void; pending: () => number }>();

  constructor(options: HarnessEngineOptions) {
    this.#harness = () => options.harness();
    this.#build = options.build;
    this.#tabArrived = options.tabArrived?.bind(options);
    this.#status = options.status ?? { phase: "starting", detail: "starting the engine" };
  }

  /** The status now (what a hello answers and a new status listener hears first). */
  get status(): EngineStatus {
    return this.#status;
  }

  /** A new status, told to every tab's listeners. */
  setStatus(status: EngineStatus): void {
    this.#status = status;
    for (const listeners of this.#statusListeners.values())
      for (const l of listeners) void Promise.resolve(l(status)).catch(() => undefined);
  }

  /** The harness stops (handover, fatal error): every watch ends ("closed"), the list is dropped. */
  stopAll(): void {
    for (const { watch } of this.#watches.values()) watch.end("closed");
    this.#watches.clear();
    for (const { stop } of this.#listWatches.values()) stop();
    this.#listWatches.clear();
    for (const { stop } of this.#streams.values()) stop();
    this.#streams.clear();
    void this.#list?.list.then((l) => l.close());
    this.#list = undefined;
  }

  /** Whether tab `tabId` said hello and is not known to be gone. */
  hasTab(tabId: string): boolean {
    return this.#tabs.has(tabId);
  }

  /** Tab `tabId` is gone: its watches and status listeners end. */
  dropTab(tabId: string): void {
    this.#tabs.delete(tabId);
    this.#statusListeners.delete(tabId);
    for (const [id, w] of this.#watches) {
      if (w.tabId !== tabId) continue;
      this.#watches.delete(id);
      void w.watch.stop();
    }
    for (const [id, w] of this.#listWatches) {
      if (w.tabId !== tabId) continue;
      this.#listWatches.delete(id);
      w.stop();
    }
    for (const [id, w] of this.#streams) {
      if (w.tabId !== tabId) continue;
      this.#streams.delete(id);
      w.stop();
    }
  }

  /** Open watches and the frames they hold back (the test endpoints and the server's stats). */
  watchStats(): { watches: number; pendingFrames: number } {
    let pendingFrames = 0;
    for (const { watch } of this.#watches.values()) pendingFrames += watch.pending;
    for (const { pending } of this.#streams.values()) pendingFrames += pending();
    return { watches: this.#watches.size + this.#streams.size, pendingFrames };
  }

  /** The calls of tab `tabId`, grouped as `EngineApi` has them (its watches are the tab's). */
  tab(tabId: string): TabCalls {
    return {
      conversations: {
        list: () => this.listConversations(),
        watch: (listener) => this.watchConversations(tabId, listener),
        create: (title) => this.createConversation(title),
        fork: (conversationId, entryId) => this.forkConversation(conversationId, entryId),
        delete: (conversationId) => this.deleteConversation(conversationId),
        rename: (conversationId, title) => this.renameConversation(conversationId, title),
        search: (text) => this.searchConversations(text),
        watchPage: (options, listener) => this.watchConversationPage(tabId, options, listener),
        searchPage: (text, options) => this.searchConversationPage(text, options),
        export: (conversationId) => this.exportConversation(conversationId),
        import: (text) => this.importConversation(text),
      },
      run: {
        submit: (conversationId, request) => this.submit(conversationId, request),
        resendAsFork: (conversationId, entryId, text, keep) =>
          this.resendAsFork(conversationId, entryId, text, keep),
        abort: (conversationId) => this.abort(conversationId),
        withdraw: (conversationId, submissionId) => this.withdraw(conversationId, submissionId),
        reset: (conversationId) => this.reset(conversationId),
        compact: (conversationId) => this.compact(conversationId),
      },
      settings: {
        agent: (conversationId) => this.agentSettings(conversationId),
        configure: (conversationId, change) => this.configureAgent(conversationId, change),
        setModel: (conversationId, model) => this.setModel(conversationId, model),
        models: () => this.models(),
        extensions: (conversationId) => this.conversationExtensions(conversationId),
        setExtensionEnabled: (conversationId, name, enabled) =>
          this.setExtensionEnabled(conversationId, name, enabled),
        demoSpeed: () => this.demoSpeed(),
        setDemoSpeed: (speed) => this.setDemoSpeed(speed),
      },
      keys: {
        set: (provider, key) => this.setApiKey(provider, key),
        has: (provider) => this.hasApiKey(provider),
        list: () => this.apiKeys(),
        test: (provider) => this.testApiKey(provider),
      },
      workspace: {
        files: () => this.workspaceFiles(),
        read: (path) => this.readWorkspaceFile(path),
        delete: (path) => this.deleteWorkspaceFile(path),
      },
      userTools: {
        list: () => this.listUserTools(),
        save: (draft) => this.saveUserTool(draft),
        remove: (name) => this.removeUserTool(name),
        enableEverywhere: (name) => this.enableUserToolEverywhere(name),
      },
      watches: {
        conversation: (conversationId, listener) => this.watch(tabId, conversationId, listener),
        events: (conversationId, listener) => this.watchEvents(tabId, conversationId, listener),
        taskGraph: (listener) => this.watchTaskGraph(tabId, listener),
        unwatch: (watchId) => this.unwatch(watchId),
        entries: (conversationId) => this.entries(conversationId),
        entriesBefore: (conversationId, beforeId, limit) =>
          this.entriesBefore(conversationId, beforeId, limit),
      },
      tasks: {
        graph: () => this.taskGraph(),
        inspect: () => this.inspect(),
        abort: (taskId) => this.abortTask(taskId),
      },
      usage: {
        total: () => this.totalUsage(),
        conversation: (conversationId) => this.conversationUsage(conversationId),
        days: async (query) => usageDays((await this.#harness()).store, query),
      },
      traces: {
        export: (conversationId) => this.exportTrace(conversationId),
      },
      approvals: {
        decide: async (conversationId, request) =>
          (await this.#harness()).decideApproval(conversationId, request),
        policies: async (conversationId) => toolPolicyViews(await this.#harness(), conversationId),
        setPolicy: async (tool, policy, conversationId) =>
          setToolPolicy(await this.#harness(), tool, policy, conversationId),
      },
      schedules: {
        preview: async (draft) => previewSchedule(draft, (await this.#harness()).now()),
        create: async (conversationId, draft) => createSchedule(await this.#harness(), conversationId, draft),
        update: async (conversationId, id, draft) =>
          updateSchedule(await this.#harness(), conversationId, id, draft),
        setPaused: async (conversationId, id, paused) =>
          pauseSchedule(await this.#harness(), conversationId, id, paused),
        delete: async (conversationId, id) => deleteSchedule(await this.#harness(), conversationId, id),
      },
      timeline: {
        page: async (conversationId, range) => publicPage(await this.#harness(), conversationId, range),
        watch: (conversationId, range, listener) =>
          this.watchTimeline(tabId, conversationId, range, listener),
        detail: async (conversationId, taskId) =>
          timelineDetail(await this.#harness(), conversationId, taskId),
        rerunTool: async (conversationId, request) =>
          rerunToolCall(await this.#harness(), conversationId, request),
      },
    };
  }

  // --- What the groups call --------------------------------------------------------------

  async hello(tab: TabHello): Promise<Hello> {
    if (tab.protocol !== PROTOCOL_VERSION) {
      return {
        protocol: PROTOCOL_VERSION,
        build: this.#build,
        status: protocolMismatch({ tab: tab.protocol, engine: PROTOCOL_VERSION }),
      };
    }
    if (!this.#tabs.has(tab.tabId)) {
      this.#tabs.add(tab.tabId);
      this.#tabArrived?.(tab.tabId);
    }
    return { protocol: PROTOCOL_VERSION, build: this.#build, status: this.#status };
  }

  onStatus(tabId: string, listener: (status: EngineStatus) => void): void {
    let set = this.#statusListeners.get(tabId);
    if (!set) this.#statusListeners.set(tabId, (set = new Set()));
    set.add(listener);
    void Promise.resolve(listener(this.#status)).catch(() => undefined);
  }

  /** The conversation list of the harness now serving (built on first use). */
  async #conversationList(): Promise<ConversationList> {
    const h = await this.#harness();
    if (this.#list?.harness !== h) this.#list = { harness: h, list: ConversationList.open(h) };
    return this.#list.list;
  }

  async listConversations(): Promise<ConversationSummary[]> {
    return (await this.#conversationList()).list();
  }

  async watchConversations(
    tabId: string,
    listener: (list: ConversationSummary[]) => Promise<void> | void,
  ): Promise<number> {
    const list = await this.#conversationList();
    const id = this.#nextWatch++;
    const stop = list.watch(listener, () => this.#listWatches.delete(id));
    this.#listWatches.set(id, { tabId, stop });
    return id;
  }

  async watchConversationPage(
    tabId: string,
    options: { limit: number },
    listener: (page: ConversationPage) => Promise<void> | void,
  ): Promise<number> {
    const limit = pageLimit(options?.limit, MAX_LIST_PAGE);
    const list = await this.#conversationList();
    const id = this.#nextWatch++;
    const stop = list.watchPage(limit, listener, () => this.#listWatches.delete(id));
    this.#listWatches.set(id, { tabId, stop });
    return id;
  }

  /**
   * A page of a search: on the first (no `before`) the title matches, newest first, then the text
   * matches of a bounded read of the entries (search.ts `searchConversationPage`), each conversation once.
   */
  async searchConversationPage(
    text: string,
    options: { limit: number; before?: number; titlesBefore?: number },
  ): Promise<SearchPage> {
    if (typeof text !== "string") throw new TypeError("search text must be a string");
    const limit = pageLimit(options?.limit, MAX_SEARCH_PAGE);
    const before = options?.before;
    if (before !== undefined && !(Number.isSafeInteger(before) && before >= 1))
      throw new TypeError("search's before must be an entry id");
    const titlesBefore = options?.titlesBefore;
    if (titlesBefore !== undefined && !(Number.isSafeInteger(titlesBefore) && titlesBefore >= 1))
      throw new TypeError("search's titlesBefore must be a conversation id");
    const needle = text.slice(0, 500).trim().toLowerCase();
    if (!needle) return { items: [] };
    const list = await this.#conversationList();
    const h = await this.#harness();
    // The first page (no cursor) searches the titles, then the text; a later one goes on with what
    // the last left unfinished: the titles below `titlesBefore`, the text below `before`. Each walk
    // of the titles reads a bounded number of them (TITLE_PAGE_SCAN), as each text walk reads a
    // bounded window of entries.
    const first = before === undefined && titlesBefore === undefined;
    const titles =
      first || titlesBefore !== undefined
        ? await list.titleMatches(needle, limit, titlesBefore !== undefined ? { before: titlesBefore } : {})
        : { items: [] };
    const items = titles.items;
    const titleCursor = titles.before !== undefined ? { titlesBefore: titles.before } : {};
    if (!first && before === undefined) return { items, ...titleCursor };
    // Titles filled the page: the next one goes on with the titles, then the text matches from where
    // they stood (from the newest entry on the first page: `before` past every id).
    if (items.length === limit) return { items, before: before ?? Number.MAX_SAFE_INTEGER, ...titleCursor };
    const secrets = savedSecrets((c, name) => h.docNow(c, name));
    const page = await searchTextPage(h.store, needle, {
      limit: limit - items.length,
      ...(before !== undefined && before !== Number.MAX_SAFE_INTEGER ? { before } : {}),
      secrets,
      accept: (ids) => list.listedAmong(ids),
      skip: new Set(items.map((c) => c.id)),
    });
    items.push(...(await list.pick(page.ids)));
    return { items, ...(page.before !== undefined ? { before: page.before } : {}), ...titleCursor };
  }

  async renameConversation(conversationId: ConversationId, title: string): Promise<void> {
    const h = await this.#harness();
    const trimmed = checkTitle(title);
    await h.requireLoadedConversation(conversationId);
    await h.transaction((tx) => tx.writeDoc(conversationId, TITLE_DOC, { title: redactedIn(tx, trimmed) }));
  }

  async deleteConversation(conversationId: ConversationId): Promise<void> {
    if (!Number.isSafeInteger(conversationId))
      throw new TypeError("deleteConversation takes a conversation id");
    const h = await this.#harness();
    // Its schedules' tasks end first (a live task refuses the deletion); the schedules go with it.
    if (await h.loadConversation(conversationId)) await endSchedules(h, conversationId);
    await h.deleteConversation(conversationId);
  }

  async searchConversations(text: string): Promise<ConversationId[]> {
    if (typeof text !== "string") throw new TypeError("search text must be a string");
    const list = await this.#conversationList();
    const h = await this.#harness();
    const secrets = savedSecrets((c, name) => h.docNow(c, name));
    const found = await searchConversationText(h.store, text.slice(0, 500), { secrets });
    const listed = await list.listedAmong(found);
    return found.filter((id) => listed.has(id));
  }

  async createConversation(title?: string): Promise<ConversationId> {
    return createTitled(await this.#harness(), title);
  }

  async forkConversation(conversationId: ConversationId, entryId: EntryId): Promise<ConversationId> {
    if (!Number.isInteger(conversationId) || !Number.isInteger(entryId))
      throw new TypeError("forkConversation takes a conversation id and an entry id (integers)");
    const h = await this.#harness();
    const fork = await h.forkConversation(conversationId, entryId, {
      ownership: { kind: "ownerless" },
      init: (tx, id) => forkTitle(tx, conversationId, id),
    });
    return fork.id;
  }

  async submit(conversationId: ConversationId, request: SubmitRequest): Promise<number> {
    return (await submitWithTitle(await this.#harness(), conversationId, request)).id;
  }

  async resendAsFork(
    conversationId: ConversationId,
    entryId: EntryId,
    text: string,
    keep?: readonly number[],
  ): Promise<ConversationId> {
    return resendAsFork(await this.#harness(), conversationId, entryId, text, keep);
  }

  async abort(conversationId: ConversationId): Promise<void> {
    const h = await this.#harness();
    await (await h.requireLoadedConversation(conversationId)).abort();
  }

  async withdraw(conversationId: ConversationId, submissionId: number): Promise<WithdrawOutcome> {
    const h = await this.#harness();
    const outcome = await h.abortSubmission(submissionId, undefined, conversationId);
    return outcome === "aborted" ? "withdrawn" : outcome;
  }

  async reset(conversationId: ConversationId): Promise<number> {
    const h = await this.#harness();
    return (await (await h.requireLoadedConversation(conversationId)).reset()).id;
  }

  async compact(conversationId: ConversationId): Promise<CompactOutcome> {
    const h = await this.#harness();
    const taskId = await (await h.requireLoadedConversation(conversationId)).compact();
    const done = await h.waitForTask(taskId);
    const outcome = done.state.status === "terminal" ? done.state.outcome : undefined;
    if (outcome?.status !== "completed") {
      const error =
        outcome && "error" in outcome ? (outcome.error as { message?: string; detail?: string }) : undefined;
      return { status: "failed", reason: error?.detail ?? error?.message ?? outcome?.status ?? "unknown" };
    }
    const result = (outcome.result ?? {}) as { submissionId?: number; entryId?: number };
    return result.submissionId !== undefined || result.entryId !== undefined
      ? { status: "summarized" }
      : { status: "nothing" };
  }

  async setModel(conversationId: ConversationId, model: ModelRef): Promise<void> {
    const h = await this.#harness();
    await (await h.requireLoadedConversation(conversationId)).configure({ model });
  }

  async models(): Promise<ModelChoice[]> {
    return (await this.#harness()).models.list();
  }

  async setApiKey(provider: string, key: string | null): Promise<void> {
    await (await this.#harness()).models.setKey(provider, key);
  }

  async hasApiKey(provider: string): Promise<boolean> {
    return (await this.#harness()).models.hasKey(provider);
  }

  async apiKeys(): Promise<string[]> {
    return (await this.#harness()).models.providersWithKeys();
  }

  async testApiKey(provider: string): Promise<KeyCheck> {
    if (typeof provider !== "string" || !provider) throw new TypeError("testApiKey needs a provider name");
    return (await this.#harness()).models.testKey(provider);
  }

  async agentSettings(conversationId: ConversationId): Promise<AgentSettingsView> {
    const agent = await (
      await (await this.#harness()).requireLoadedConversation(conversationId)
    ).agentState();
    return {
      ...(agent.model ? { model: agent.model } : {}),
      ...(agent.thinkingLevel ? { thinkingLevel: agent.thinkingLevel } : {}),
      ...(agent.instructions !== undefined ? { instructions: agent.instructions } : {}),
    };
  }

  async configureAgent(conversationId: ConversationId, change: AgentSettingsChange): Promise<void> {
    const h = await this.#harness();
    await (await h.requireLoadedConversation(conversationId)).configure(checkAgentChange(change));
  }

  async exportConversation(conversationId: ConversationId): Promise<{ fileName: string; text: string }> {
    const h = await this.#harness();
    const secrets = savedSecrets((c, name) => h.docNow(c, name));
    const text = await exportConversation(h, conversationId, {
      documents: EXPORTED_DOCS,
      secrets,
      userTools: await exportedUserTools(h, conversationId),
    });
    const title = ((await h.doc(conversationId, TITLE_DOC)) as { title?: string } | undefined)?.title;
    // The file name comes from the title, redacted with today's secrets (it may predate them).
    const slug = redactTitle(title ?? `conversation-${conversationId}`, secrets)
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, "-")
      .replace(/^-+|-+$/g, "")
      .slice(0, 60);
    return { fileName: `${slug || "conversation"}.json`, text };
  }

  async importConversation(text: string): Promise<ConversationId> {
    return importTitled(await this.#harness(), text, { documents: EXPORTED_DOCS });
  }

  async workspaceFiles(): Promise<WorkspaceFile[]> {
    return listWorkspaceFiles((await this.#harness()).services.fs);
  }

  async readWorkspaceFile(path: string): Promise<string> {
    return (await this.#harness()).services.fs.read(path);
  }

  async deleteWorkspaceFile(path: string): Promise<void> {
    const fs = (await this.#harness()).services.fs;
    if (!fs.remove) throw new Error("this workspace cannot delete files");
    if (typeof path !== "string" || !path.trim()) throw new TypeError("name a file to delete");
    await fs.remove(path);
  }

  async demoSpeed(): Promise<DemoSpeedName> {
    return storedDemoSpeed(await this.#harness());
  }

  async setDemoSpeed(speed: DemoSpeedName): Promise<void> {
    await writeDemoSpeed(await this.#harness(), speed);
  }

  async listUserTools(): Promise<UserToolView[]> {
    return userToolViews(await this.#harness());
  }

  async saveUserTool(draft: UserToolDraft): Promise<UserToolView> {
    return saveUserToolDraft(await this.#harness(), draft);
  }

  async removeUserTool(name: string): Promise<void> {
    await deleteUserTool(await this.#harness(), name);
  }

  async enableUserToolEverywhere(name: string): Promise<void> {
    await enableUserToolEverywhere(await this.#harness(), name);
  }

  async conversationExtensions(conversationId: ConversationId): Promise<ExtensionChoice[]> {
    return conversationExtensions(await this.#harness(), conversationId);
  }

  async setExtensionEnabled(conversationId: ConversationId, name: string, enabled: boolean): Promise<void> {
    await setExtensionEnabled(await this.#harness(), conversationId, name, enabled);
  }

  async watch(
    tabId: string,
    conversationId: ConversationId,
    listener: (frame: WatchFrame) => Promise<void> | void,
  ): Promise<number> {
    mark("watch:called");
    const h = await this.#harness();
    await h.requireLoadedConversation(conversationId);
    const watch = await h.pageMount(conversationId).watch();
    const id = this.#nextWatch++;
    this.#watches.set(id, { tabId, watch });
    // The first frame carries the whole (paged) view; then only operations (and whole views after an
    // overflow).
    // The marks time a watch's opening (the browser bench reads them): the view read, then sent.
    mark("watch:read");
    await listener({ seq: 0, ops: [{ op: "replace" }], value: watch.value });
    watch.start((frame) => listener(watchFrame(frame)));
    return id;
  }

  async watchEvents(
    tabId: string,
    conversationId: ConversationId,
    listener: (events: readonly AgentEvent[]) => Promise<void> | void,
  ): Promise<number> {
    const h = await this.#harness();
    await h.requireLoadedConversation(conversationId);
    const stream = await watchEvents(h, conversationId);
    const id = this.#nextWatch++;
    this.#streams.set(id, { tabId, stop: () => void stream.stop(), pending: () => stream.pending });
    void stream.closed.then(() => this.#streams.delete(id));
    // The snapshot first; later batches wait in the stream meanwhile.
    await listener([stream.snapshot]);
    stream.start((events) => listener(events));
    return id;
  }

  async watchTaskGraph(tabId: string, listener: (graph: TaskGraph) => Promise<void> | void): Promise<number> {
    const h = await this.#harness();
    const watch = await h.watchTaskGraph();
    const id = this.#nextWatch++;
    this.#streams.set(id, { tabId, stop: () => void watch.stop(), pending: () => watch.pending });
    void watch.closed.then(() => this.#streams.delete(id));
    await listener(watch.value);
    watch.start((frame) => listener(frame.value));
    return id;
  }

  /** A run's timeline, watched (timeline.ts): the first page before this resolves, then one per change. */
  async watchTimeline(
    tabId: string,
    conversationId: ConversationId,
    range: TimelineRange,
    listener: (page: TimelinePage) => Promise<void> | void,
  ): Promise<number> {
    const h = await this.#harness();
    const id = this.#nextWatch++;
    const watch = await watchTimeline(h, conversationId, range, listener);
    this.#streams.set(id, { tabId, stop: () => watch.stop(), pending: () => watch.pending });
    void watch.closed.then(() => this.#streams.delete(id));
    return id;
  }

  async unwatch(watchId: number): Promise<void> {
    this.#listWatches.get(watchId)?.stop();
    this.#streams.get(watchId)?.stop();
    this.#streams.delete(watchId);
    const w = this.#watches.get(watchId);
    this.#watches.delete(watchId);
    await w?.watch.stop();
  }

  async entries(conversationId: ConversationId) {
    const h = await this.#harness();
    return (await h.requireLoadedConversation(conversationId)).entries();
  }

  async entriesBefore(conversationId: ConversationId, beforeId: EntryId, limit: number): Promise<EntryPage> {
    const h = await this.#harness();
    await h.requireLoadedConversation(conversationId);
    if (!Number.isInteger(beforeId) || !Number.isInteger(limit) || limit < 1)
      throw new TypeError("entriesBefore takes an entry id and a positive whole limit");
    return h.entryPage(conversationId, { before: beforeId, limit: Math.min(limit, MAX_PAGE) });
  }

  async taskGraph(): Promise<TaskGraph> {
    return (await this.#harness()).taskGraph();
  }

  async abortTask(taskId: TaskId): Promise<"marked" | "terminal"> {
    if (!Number.isSafeInteger(taskId) || taskId < 1) throw new TypeError("abortTask needs a task id");
    return (await this.#harness()).abortTask(taskId);
  }

  async totalUsage(): Promise<UsageState> {
    return (await this.#harness()).usage();
  }

  async conversationUsage(conversationId: ConversationId): Promise<UsageRollup> {
    return (await this.#harness()).conversationUsage(conversationId);
  }

  /** A conversation's run as OTLP JSON (trace.ts), cleared of every saved secret. */
  async exportTrace(conversationId: ConversationId): Promise<{ fileName: string; text: string }> {
    const h = await this.#harness();
    const secrets = savedSecrets((c, name) => h.docNow(c, name));
    return conversationTrace(h, conversationId, { secrets, now: h.now() });
  }

  async inspect(): Promise<HarnessInspection> {
    return (await this.#harness()).inspect();
  }
}
