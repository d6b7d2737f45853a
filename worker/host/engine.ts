/**
 * The engine host: owns one store for its whole life under the Web Lock `store:<name>`, runs the
 * harness, and serves every connected tab with `EngineApi`. Invariants:
 * - the store is opened only after the lock is held, and closed before the lock is released;
 * - a newer build asks over BroadcastChannel; the owner stops reserving, lets running phases reach a
 *   commit (bounded grace), closes the store, then releases the lock (never a silent steal);
 * - each tab holds `tab:<id>`; when the engine is granted that lock the tab is gone, and its
 *   watches and status listeners are dropped.
 */
import type { Api, Model } from "@mariozechner/pi-ai";
import { AgentHarness } from "../agent/harness.ts";
import { demoModel, registerDemoProvider } from "../agent/models/demo-provider.ts";
import { createModelResolver } from "../agent/models/resolver.ts";
import { DOC, type LiveState } from "../agent/records.ts";
import { builtinTools } from "../agent/tools/builtin/index.ts";
import type { ConversationNode, Inspection } from "../core/harness.ts";
import type { ConversationView, Watch } from "../core/observe.ts";
import { type ConversationId, ROOT_CONVERSATION_ID } from "../core/types.ts";
import { watchFrame } from "../core/view-ops.ts";
import {
  type CompactOutcome,
  type ConversationSummary,
  type DebugApi,
  type EngineApi,
  type EngineStatus,
  type EngineTimeline,
  type HandoverMessage,
  type Hello,
  handoverChannelName,
  type ModelChoice,
  PROTOCOL_VERSION,
  protocolMismatch,
  type SubmitRequest,
  storeLockName,
  type TickerRequest,
  tabLockName,
  type WatchFrame,
} from "../protocol.ts";
import { classifyStoreError } from "../store/errors.ts";
import type { SqliteLine } from "../store/line.ts";
import { runBrowserBench } from "./bench.ts";
import { OpfsFs } from "./opfs-fs.ts";
import { noopTask, tickerTask } from "./ticker.ts";

export interface HostPlatform {
  readonly storeName: string;
  readonly storeKind: "idb" | "opfs";
  /** Comparable build id (ISO time of the build): a newer one may take the store over. */
  readonly build: string;
  openStore(): Promise<SqliteLine>;
  /** Open a throwaway store of the same kind and build under another name (the bench). */
  openScratchStore(name: string): Promise<SqliteLine>;
  /** Delete a scratch store's data (the bench cleans up after itself). */
  deleteScratchStore(name: string): Promise<void>;
  readonly jspi: boolean;
}

/** Settings live in documents of conversation 0, which no view, entry or export ever includes. */
const SETTINGS_CONVERSATION = 0;
const API_KEYS_DOC = "engine.apiKeys";
const HANDOVER_GRACE_MS = 2000;

export class EngineHost implements EngineApi {
  #status: EngineStatus = { phase: "starting", detail: "starting the engine" };
  #statusListeners = new Map<string, Set<(s: EngineStatus) => void>>();
  #harness: AgentHarness | undefined;
  #ready: Promise<AgentHarness>;
  #resolveReady!: (h: AgentHarness) => void;
  #rejectReady!: (e: Error) => void;
  #watches = new Map<number, { tabId: string; watch: Watch<ConversationView> }>();
  #nextWatch = 1;
  #tabs = new Set<string>();
  #releaseLock: (() => void) | undefined;
  #waitingForLock = false;
  #timeline: { -readonly [K in keyof EngineTimeline]: EngineTimeline[K] } = { startedAt: Date.now() };
  #channel: BroadcastChannel;
  readonly #id = crypto.randomUUID();
  readonly debug: DebugApi;

  constructor(readonly platform: HostPlatform) {
    this.#ready = new Promise((resolve, reject) => {
      this.#resolveReady = resolve;
      this.#rejectReady = reject;
    });
    this.#ready.catch(() => undefined);
    this.#channel = new BroadcastChannel(handoverChannelName(platform.storeName));
    this.#channel.onmessage = (e: MessageEvent<HandoverMessage>) => void this.#onHandoverMessage(e.data);
    this.debug = {
      startTicker: (r) => this.#startTicker(r),
      ticker: async (taskId) => {
        const h = await this.#ready;
        const record = await h.getTask(taskId);
        const entries = record ? await h.session.entries(record.conversationId) : [];
        const trail = entries
          .filter((e) => e.kind === "test.tick" && (e.data as { taskId?: number })?.taskId === taskId)
          .map((e) => (e.data as { n: number }).n);
        return {
          taskId,
          status: record
            ? record.state.status === "terminal"
              ? record.state.outcome.status
              : record.state.status
            : "missing",
          trail,
        };
      },
      stats: async () => {
        const h = await this.#ready;
        let pendingFrames = 0;
        for (const { watch } of this.#watches.values()) pendingFrames += watch.pending;
        return {
          transactions: h.store.stats.transactions,
          commits: h.store.stats.commits,
          build: this.platform.build,
          watches: this.#watches.size,
          pendingFrames,
          timeline: { ...this.#timeline },
        };
      },
      bench: (options) => runBrowserBench(this.platform, options),
      seed: (options) => this.#seed(options),
    };
  }

  get status(): EngineStatus {
    return this.#status;
  }

  #setStatus(status: EngineStatus): void {
    this.#status = status;
    for (const listeners of this.#statusListeners.values())
      for (const l of listeners) void Promise.resolve(l(status)).catch(() => undefined);
  }

  /** Take the lock (asking the owner to hand over if needed), then open the store and the harness. */
  async start(): Promise<void> {
    const name = storeLockName(this.platform.storeName);
    const locks = navigator.locks;
    this.#waitingForLock = true;
    const held = new Promise<void>((acquired) => {
      const hold = (lock: Lock | null) => {
        if (!lock) return Promise.resolve(false);
        this.#waitingForLock = false;
        acquired();
        return new Promise<boolean>((release) => {
          this.#releaseLock = () => release(true);
        });
      };
      void locks.request(name, { ifAvailable: true }, hold).then((got) => {
        if (got !== false) return;
        this.#setStatus({
          phase: "waiting-for-lock",
          detail: "another engine owns the store; asking it to hand over",
        });
        this.#post({ type: "handover-request", from: this.#id, build: this.platform.build });
        void locks.request(name, (lock) => {
          this.#waitingForLock = false;
          return hold(lock);
        });
      });
    });
    await held;
    this.#timeline.lockedAt = Date.now();
    this.#setStatus({ phase: "starting", detail: "opening the store" });
    try {
      const store = await this.platform.openStore();
      await store.fence();
      this.#timeline.openedAt = Date.now();
      registerDemoProvider();
      const persisted = await navigator.storage?.persisted?.().catch(() => undefined);
      const harness = await AgentHarness.open(store, {
        tasks: [tickerTask, noopTask],
        models: createModelResolver({ extra: [demoModel as unknown as Model<Api>] }),
        defaultModel: { provider: demoModel.provider, id: demoModel.id },
        tools: builtinTools,
        fs: new OpfsFs(),
        apiKey: (provider) => {
          // Loaded right after open (below), so a synchronous read is safe.
          const keys = harness.docNow<Record<string, string>>(SETTINGS_CONVERSATION, API_KEYS_DOC);
          return keys?.[provider];
        },
        onReport: (error) => console.warn("engine:", error instanceof Error ? error.message : String(error)),
        onFatal: (error) => void this.#stopOnFatal(error),
      });
      this.#harness = harness;
      await harness.doc(SETTINGS_CONVERSATION, API_KEYS_DOC);
      // The recovery bench times navigation -> the first tick this engine commits (after COMMIT).
      const unsubscribe = harness.subscribe((change) => {
        if (!change.entries.some((e) => e.kind === "test.tick")) return;
        this.#timeline.firstTickAt = Date.now();
        unsubscribe();
      });
      this.#timeline.readyAt = Date.now();
      this.#resolveReady(harness);
      this.#setStatus({
        phase: "ready",
        storeKind: this.platform.storeKind,
        build: this.platform.build,
        jspi: this.platform.jspi,
        persisted,
      });
      this.#post({ type: "owner-ready", from: this.#id, build: this.platform.build });
    } catch (error) {
      const e = await classifyStoreError(error, { store: this.platform.storeName, stage: "open" });
      this.#setStatus({
        phase: "failed",
        stage: "open",
        reason: e.reason,
        message: e.message,
        advice: e.advice,
      });
      this.#rejectReady(e);
      this.#releaseLock?.();
    }
  }

  /**
   * A COMMIT failed (storage full, the store taken over, an I/O error): memory may be ahead of the
   * disk, so the engine stops. Tell every tab why and what to do, close the store (everything
   * committed stays), and release the lock so the next engine (a reload) can reopen it.
   */
  async #stopOnFatal(error: Error): Promise<void> {
    if (this.#status.phase === "failed") return;
    const failure = await classifyStoreError(error, { store: this.platform.storeName, stage: "run" });
    this.#setStatus({
      phase: "failed",
      stage: "run",
      reason: failure.reason,
      message: failure.message,
      advice: failure.advice,
    });
    const harness = this.#harness;
    this.#harness = undefined;
    for (const { watch } of this.#watches.values()) watch.end("closed");
    this.#watches.clear();
    try {
      // Bounded: after a failed COMMIT the store may never close cleanly; the owner epoch fences any
      // late write if the next engine opens the store first.
      await Promise.race([harness?.close(), new Promise((resolve) => setTimeout(resolve, 2000))]);
    } catch {
      // Releasing the lock is what counts.
    } finally {
      this.#releaseLock?.();
    }
  }

  #post(message: HandoverMessage): void {
    this.#channel.postMessage(message);
  }

  async #onHandoverMessage(message: HandoverMessage): Promise<void> {
    if (message.from === this.#id) return;
    if (message.type === "owner-ready") {
      // An owner that was still starting when we asked ignored the request: ask it again now.
      if (this.#waitingForLock && message.build <= this.platform.build) {
        this.#post({ type: "handover-request", from: this.#id, build: this.platform.build });
      }
      return;
    }
    if (message.type !== "handover-request") return;
    if (!this.#harness || this.#status.phase !== "ready") return;
    if (message.build < this.platform.build) return; // an older build never takes over a newer one
    // The same build asks only when a tab chose "use it here" (the dedicated-worker fallback).
    const newer = message.build > this.platform.build;
    this.#setStatus({
      phase: "handing-over",
      detail: newer ? `a newer version (${message.build}) is taking over` : "another tab is taking over",
    });
    const harness = this.#harness;
    this.#harness = undefined;
    for (const { watch } of this.#watches.values()) watch.end("closed");
    this.#watches.clear();
    try {
      await harness.close({ graceMs: HANDOVER_GRACE_MS });
    } finally {
      this.#releaseLock?.();
      this.#setStatus({
        phase: "handed-over",
        detail: newer
          ? "A newer version of the app took over in another tab."
          : "Another tab took over the app; this one is paused.",
      });
      this.#post({ type: "handover-released", from: this.#id, build: this.platform.build });
    }
  }

  async #h(): Promise<AgentHarness> {
    if (this.#status.phase === "handed-over" || this.#status.phase === "handing-over") {
      throw new Error("this engine handed the store over to another tab; reload this one");
    }
    return this.#ready;
  }

  // --- EngineApi --------------------------------------------------------------------------

  async hello(tab: { tabId: string; protocol: number }): Promise<Hello> {
    if (tab.protocol !== PROTOCOL_VERSION) {
      return {
        protocol: PROTOCOL_VERSION,
        build: this.platform.build,
        status: protocolMismatch({ tab: tab.protocol, engine: PROTOCOL_VERSION }),
      };
    }
    if (!this.#tabs.has(tab.tabId)) {
      this.#tabs.add(tab.tabId);
      // Granted only once the tab's own lock is released: the tab is gone.
      void navigator.locks.request(tabLockName(tab.tabId), () => this.#dropTab(tab.tabId));
    }
    return { protocol: PROTOCOL_VERSION, build: this.platform.build, status: this.#status };
  }

  #dropTab(tabId: string): void {
    this.#tabs.delete(tabId);
    this.#statusListeners.delete(tabId);
    for (const [id, w] of this.#watches) {
      if (w.tabId !== tabId) continue;
      this.#watches.delete(id);
      void w.watch.stop();
    }
  }

  async onStatus(tabId: string, listener: (status: EngineStatus) => void): Promise<void> {
    let set = this.#statusListeners.get(tabId);
    if (!set) this.#statusListeners.set(tabId, (set = new Set()));
    set.add(listener);
    void Promise.resolve(listener(this.#status)).catch(() => undefined);
  }

  async conversations(): Promise<ConversationSummary[]> {
    const h = await this.#h();
    const out: ConversationSummary[] = [];
    // Two documents of every conversation, without loading each conversation's documents.
    const titles = await h.docsNamed<{ title?: string }>("app.title");
    const lives = await h.docsNamed<LiveState & Record<string, never>>(DOC.live);
    for (const record of h.session.records.conversations.values()) {
      if (record.owner) continue;
      const title =
        titles.get(record.id)?.title ??
        (record.id === ROOT_CONVERSATION_ID ? "Main" : `Conversation ${record.id}`);
      const live = lives.get(record.id) ?? {};
      out.push({ id: record.id, title, busy: live.run !== undefined, entries: 0 });
    }
    return out;
  }

  async createConversation(title?: string): Promise<ConversationId> {
    const h = await this.#h();
    const c = await h.createConversation();
    if (title) await h.transaction((tx) => tx.writeDoc(c.id, "app.title", { title }));
    return c.id;
  }

  async submit(conversationId: ConversationId, request: SubmitRequest): Promise<number> {
    const h = await this.#h();
    const sub = await h.requireConversation(conversationId).submit({
      type: "input",
      content: request.text,
      whenBusy: request.mode ?? "followUp",
      ...(request.requestId ? { requestId: request.requestId } : {}),
    });
    return sub.id;
  }

  async abort(conversationId: ConversationId): Promise<void> {
    const h = await this.#h();
    await h.requireConversation(conversationId).abort();
  }

  async reset(conversationId: ConversationId): Promise<number> {
    const h = await this.#h();
    return (await h.requireConversation(conversationId).reset()).id;
  }

  async compact(conversationId: ConversationId): Promise<CompactOutcome> {
    const h = await this.#h();
    const taskId = await h.requireConversation(conversationId).compact();
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

  async setModel(conversationId: ConversationId, model: { provider: string; id: string }): Promise<void> {
    const h = await this.#h();
    await h.requireConversation(conversationId).configure({ model });
  }

  async models(): Promise<ModelChoice[]> {
    const h = await this.#h();
    return h.services.models.list().map((m) => ({ ...m, needsKey: m.provider !== demoModel.provider }));
  }

  async setApiKey(provider: string, key: string | null): Promise<void> {
    const h = await this.#h();
    await h.transaction((tx) => {
      const keys = {
        ...((tx.readDoc(SETTINGS_CONVERSATION, API_KEYS_DOC) as Record<string, string> | undefined) ?? {}),
      };
      if (key) keys[provider] = key;
      else delete keys[provider];
      tx.writeDoc(SETTINGS_CONVERSATION, API_KEYS_DOC, keys);
    });
  }

  async hasApiKey(provider: string): Promise<boolean> {
    const h = await this.#h();
    return Boolean((await h.doc<Record<string, string>>(SETTINGS_CONVERSATION, API_KEYS_DOC))?.[provider]);
  }

  async watch(
    tabId: string,
    conversationId: ConversationId,
    listener: (frame: WatchFrame) => Promise<void> | void,
  ): Promise<number> {
    const h = await this.#h();
    h.requireConversation(conversationId);
    const watch = await h.mount(conversationId).watch();
    const id = this.#nextWatch++;
    this.#watches.set(id, { tabId, watch });
    // The first frame carries the whole view; then only operations (and whole views after an overflow).
    await listener({ seq: 0, ops: [{ op: "replace" }], value: watch.value });
    watch.start((frame) => listener(watchFrame(frame)));
    return id;
  }

  async unwatch(watchId: number): Promise<void> {
    const w = this.#watches.get(watchId);
    this.#watches.delete(watchId);
    await w?.watch.stop();
  }

  async entries(conversationId: ConversationId) {
    const h = await this.#h();
    return h.requireConversation(conversationId).entries();
  }

  async taskGraph(): Promise<ConversationNode[]> {
    return (await this.#h()).taskGraph();
  }

  async inspect(): Promise<Inspection> {
    return (await this.#h()).inspect();
  }

  async #seed(options: {
    tasks: number;
    conversations?: number;
    batch?: number;
  }): Promise<{ conversationId: ConversationId; tasks: number; conversations: number; ms: number }> {
    const h = await this.#h();
    const started = performance.now();
    const total = Math.max(0, Math.floor(options.tasks));
    const batch = Math.max(1, Math.min(2000, Math.floor(options.batch ?? 500)));
    const conversation = await h.createConversation();
    await h.transaction((tx) => tx.writeDoc(conversation.id, "app.title", { title: "Seeded tasks" }));
    for (let done = 0; done < total; ) {
      const n = Math.min(batch, total - done);
      const ids = await h.transaction((tx) =>
        Array.from({ length: n }, () => tx.createTask(noopTask, null, { conversationId: conversation.id })),
      );
      await Promise.all(ids.map((id) => h.waitForTask(id)));
      done += n;
    }
    // Idle conversations with their documents (the built-in ones, a title) and a short exchange.
    const conversations = Math.max(0, Math.floor(options.conversations ?? 0));
    for (let done = 0; done < conversations; ) {
      const n = Math.min(100, conversations - done);
      await h.transaction((tx) => {
        for (let i = 0; i < n; i++) {
          const c = tx.createConversation({ kind: "ownerless" });
          tx.writeDoc(c.id, "app.title", { title: `Seeded conversation ${done + i + 1}` });
          tx.appendEntry(c.id, { kind: "test.seed", data: { role: "user", text: "a question" } });
          tx.appendEntry(c.id, { kind: "test.seed", data: { role: "assistant", text: "an answer" } });
        }
      });
      done += n;
    }
    return { conversationId: conversation.id, tasks: total, conversations, ms: performance.now() - started };
  }

  async #startTicker(request: TickerRequest): Promise<number> {
    const h = await this.#h();
    const phases = Math.max(1, Math.min(10_000, Math.floor(request.phases)));
    const delayMs = Math.max(0, Math.min(60_000, Math.floor(request.delayMs)));
    return h.createTask(
      tickerTask,
      { phases, delayMs },
      { conversationId: request.conversationId ?? ROOT_CONVERSATION_ID },
    );
  }
}
