/**
 * The tab's engine client: connects to the SharedWorker engine (or, where SharedWorker is missing or
 * `?engine=dedicated` is set, runs the engine in a dedicated worker when this tab may own the store),
 * holds the tab's own Web Lock so the engine learns when the tab is gone, keeps the engine's status
 * as reactive state, and lends the SharedWorker engine this tab's script workers on a browser-only
 * side channel of its own (script-worker-offer.ts). Everything the tab knows about the engine arrives
 * through worker/protocol/: the API and its types (index.ts), the connection (client.ts) over a
 * MessagePort transport (wire.ts); the same client would speak to a server engine over a WebSocket.
 */
import { connectEngine, type EngineConnection } from "../../worker/protocol/client.ts";
import {
  type ConversationId,
  type ConversationSummary,
  DEFAULT_STORE_NAME,
  type EngineApi,
  type EngineStatus,
  errorMessage,
  hostTabLockName,
  PROTOCOL_VERSION,
  protocolMismatch,
  type TaskGraph,
  type WatchFrame,
} from "../../worker/protocol/index.ts";
import { type PortLike, portTransport, type TabMessage } from "../../worker/protocol/wire.ts";
import {
  earlyTabId,
  holdTabLock,
  sharedEngineWorker,
  startEngineEarly,
  takeEarlyWorker,
  usesSharedWorker,
  workerQuery,
} from "./engine-start.ts";
import { offerScriptWorkers } from "./script-worker-offer.ts";

export type HostMode = "shared" | "dedicated" | "elsewhere";

/** How many conversations the list shows at first, and how many more each "Show more" adds. */
export const LIST_PAGE = 100;
/** The most the list shows (the engine's page limit); older ones are found by search. */
export const LIST_MOST = 500;

export class EngineClient {
  #status = $state.raw<EngineStatus>({ phase: "starting", detail: "connecting to the engine" });
  /** Called once the status leaves "starting" (`pastStarting`). */
  #onPastStarting: (() => void)[] = [];
  /** The newest conversations (a page of the engine's list: `watchPage`), newest first. */
  conversations = $state.raw<ConversationSummary[]>([]);
  /** How many conversations the engine lists in all. */
  conversationTotal = $state.raw(0);
  mode = $state.raw<HostMode>("shared");
  /** This tab's id: the one the first script made known (engine-start.ts), or a new one. */
  readonly tabId: string;
  readonly storeName: string;
  api: EngineApi | undefined;
  /** The protocol this tab speaks (a debug page may claim another, to test the refusal). */
  readonly protocol: number;
  #worker: Worker | undefined;
  #connection: EngineConnection | undefined;
  #waitForHost: AbortController | undefined;
  #heard = false;
  #listLimit = LIST_PAGE;
  #listWatch: number | undefined;
  /** The tab's lock, when the first script already holds it. */
  #earlyLock: Promise<void> | undefined;
  /** The first script already offered this tab's workers on the side channel. */
  #offered = false;

  constructor(readonly params: URLSearchParams) {
    this.storeName = params.get("store") ?? DEFAULT_STORE_NAME;
    // The first script is async: should the app run first, it starts the worker here (once a page).
    startEngineEarly(params);
    this.tabId = earlyTabId(workerQuery(params)) ?? crypto.randomUUID();
    const claimed = Number(params.get("protocol"));
    this.protocol =
      params.get("debug") === "1" && Number.isInteger(claimed) && claimed > 0 ? claimed : PROTOCOL_VERSION;
  }

  /** The engine's status as this tab last heard it (or its own, while the engine cannot be reached). */
  get status(): EngineStatus {
    return this.#status;
  }

  set status(status: EngineStatus) {
    this.#status = status;
    if (status.phase === "starting") return;
    for (const settle of this.#onPastStarting.splice(0)) settle();
  }

  /**
   * Resolves once the status leaves "starting" (the engine is ready, failed, waits for another tab,
   * ...), or after `capMs` whichever is first: src/main.ts mounts the app then (its mount would
   * take the cores the engine's open needs, and before the open it has nothing to show).
   */
  pastStarting(capMs: number): Promise<void> {
    if (this.#status.phase !== "starting") return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, capMs);
      this.#onPastStarting.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /** Hold `tab:<id>` for the tab's whole life (unless the first script does); resolves once it is held. */
  #holdTabLock(): Promise<void> {
    return this.#earlyLock ?? holdTabLock(this.tabId);
  }

  /**
   * Hold `host-tab:<store>` for the tab's whole life (the dedicated-worker fallback: one engine tab per
   * store). With `wait` false, resolves false at once when another tab holds it.
   */
  #holdHostLock(wait: boolean, signal?: AbortSignal): Promise<boolean> {
    return new Promise((resolve, reject) => {
      const options: LockOptions = wait ? (signal ? { signal } : {}) : { ifAvailable: true };
      navigator.locks
        .request(hostTabLockName(this.storeName), options, (lock) => {
          if (!lock) {
            resolve(false);
            return;
          }
          resolve(true);
          return new Promise<never>(() => undefined);
        })
        .catch(reject);
    });
  }

  async connect(): Promise<void> {
    try {
      // The worker reads its configuration from its name (Vite needs a static worker URL).
      const query = this.#workerQuery();
      const shared = usesSharedWorker(this.params);
      if (shared) {
        // Started by src/start.ts before the app loaded (engine-start.ts), or now; either way before
        // this tab takes its own lock: the engine opens the store meanwhile. It learns of the tab
        // only from hello, which waits for that lock.
        const early = takeEarlyWorker(query);
        if (early?.tab?.tabId === this.tabId) {
          this.#earlyLock = early.tab.held;
          this.#offered = early.tab.offered;
        }
        const worker = early?.worker ?? sharedEngineWorker(query);
        worker.addEventListener("error", () => this.#workerFailed());
        if (early?.failed) this.#workerFailed();
        this.#connect(worker.port);
        this.mode = "shared";
      }
      await this.#holdTabLock();
      if (!shared) {
        if (await this.#holdHostLock(false)) {
          this.#startDedicated(query);
        } else if (this.params.get("takeover") === "1") {
          await this.takeOver();
          return;
        } else {
          // Another tab runs the engine (or this tab's previous page is still going away): say so,
          // and start here once that tab has gone.
          this.mode = "elsewhere";
          this.status = { phase: "waiting-for-lock", detail: "The app is open in another tab." };
          this.#waitForHost = new AbortController();
          void this.#holdHostLock(true, this.#waitForHost.signal).then(
            () => {
              if (this.mode !== "elsewhere") return;
              this.#startDedicated(query);
              return this.#hello();
            },
            () => undefined,
          );
          return;
        }
      }
      await this.#hello();
    } catch (error) {
      this.status = {
        phase: "failed",
        stage: "connect",
        reason: "unknown",
        message: `the engine could not be reached: ${errorMessage(error)}`,
        advice: "Reload the page; if it keeps failing, close the app's other tabs and try again.",
      };
    }
  }

  /** Speak the protocol over `port`; the engine's status pushes land in `status`. */
  #connect(port: PortLike): void {
    this.#connection?.close();
    const connection = connectEngine(portTransport<TabMessage>(port));
    connection.onStatus((status) => {
      this.status = status;
      if (status.phase === "ready") void this.refresh();
    });
    this.#connection = connection;
    this.api = connection.api;
  }

  #workerQuery(): URLSearchParams {
    return workerQuery(this.params);
  }

  /** The worker's script failed to load or start (an error before the engine ever answered). */
  #workerFailed(): void {
    if (this.#heard) return;
    this.status = {
      phase: "failed",
      stage: "connect",
      reason: "unknown",
      message: "the engine's worker failed to load",
      advice: "Reload the page; if the app was just updated, reload once more to load the new version.",
    };
  }

  /**
   * The browser discarded the saved data and the person chose to go on with an empty store: the
   * engine gets ready (its status push follows). False when the engine was not waiting on that.
   */
  async startFresh(): Promise<boolean> {
    if (!this.api) return false;
    return (await this.api.store.startFresh()) === "started";
  }

  /** Run the engine here (the other tab's engine hands the store over). */
  async takeOver(): Promise<void> {
    this.#waitForHost?.abort();
    this.#startDedicated(this.#workerQuery());
    await this.#hello();
  }

  #startDedicated(query: URLSearchParams): void {
    this.#worker = new Worker(new URL("../../worker/entry/dedicated-worker.ts", import.meta.url), {
      type: "module",
      name: query.toString(),
    });
    this.#worker.addEventListener("error", () => this.#workerFailed());
    this.#connect(this.#worker);
    this.mode = "dedicated";
  }

  async #hello(): Promise<void> {
    const api = this.api!;
    const hello = await api.hello({ tabId: this.tabId, protocol: this.protocol });
    this.#heard = true;
    if (hello.protocol !== this.protocol) {
      // A different version of the app: never mix them (the engine refuses us, and we it).
      this.status =
        hello.status.phase === "failed"
          ? hello.status
          : protocolMismatch({ tab: this.protocol, engine: hello.protocol });
      return;
    }
    this.status = hello.status;
    // The SharedWorker engine cannot start script workers: it runs codemode scripts in ours, lent on
    // a second connection to the same worker (browser-only, apart from the protocol).
    // The first script may have offered them already (engine-start.ts): a second offer would replace it.
    if (this.mode === "shared" && typeof Worker === "function" && !this.#offered)
      offerScriptWorkers(sharedEngineWorker(this.#workerQuery()).port, this.tabId, {
        protocol: this.protocol,
      });
    // The list is live from here on; the engine answers once it is ready (not awaited: status first).
    // The engine pushes its status from the hello on (the connection's onStatus).
    void this.#watchList();
    if (hello.status.phase === "ready") await this.refresh();
  }

  /**
   * (Re)open the watch of the list's page at the current limit, then end the one before: a page costs
   * the tab O(limit) whatever the store holds (the engine's `watchPage`).
   */
  async #watchList(): Promise<void> {
    const api = this.api;
    if (!api) return;
    const limit = this.#listLimit;
    const id = await api.conversations
      .watchPage({ limit }, (page) => {
        if (limit !== this.#listLimit) return;
        this.conversations = [...page.items];
        this.conversationTotal = page.total;
      })
      .catch(() => undefined);
    if (id === undefined) return;
    const before = this.#listWatch;
    this.#listWatch = id;
    if (before !== undefined && before !== id) void api.watches.unwatch(before).catch(() => undefined);
  }

  /** Whether more conversations exist than the list shows, and the list may show more. */
  get canShowMore(): boolean {
    return this.conversations.length < this.conversationTotal && this.#listLimit < LIST_MOST;
  }

  /** Show `LIST_PAGE` more of the list (up to `LIST_MOST`). */
  showMore(): void {
    this.#listLimit = Math.min(LIST_MOST, this.#listLimit + LIST_PAGE);
    void this.#watchList();
  }

  /**
   * Whether the list's page speaks for conversation `id`: it is in it, or newer than its oldest, or
   * the page is the whole list. A conversation older than the page is not known to be gone.
   */
  covers(id: ConversationId): boolean {
    const list = this.conversations;
    return list.length >= this.conversationTotal || id >= (list.at(-1)?.id ?? 0);
  }

  /** Watch a conversation (its promise paces delivery: the frame is acknowledged after it). Returns the watch id. */
  watch(
    conversationId: ConversationId,
    listener: (frame: WatchFrame) => Promise<void> | void,
  ): Promise<number> {
    if (!this.api) return Promise.reject(new Error("not connected to the engine"));
    return this.api.watches.conversation(conversationId, listener);
  }

  /** Watch the live task graph (its promise paces delivery). Returns the watch id. */
  watchTaskGraph(listener: (graph: TaskGraph) => Promise<void> | void): Promise<number> {
    if (!this.api) return Promise.reject(new Error("not connected to the engine"));
    return this.api.watches.taskGraph(listener);
  }

  /** Read the list's page again (a new watch: after a restart of the engine the old one ended). */
  async refresh(): Promise<void> {
    await this.#watchList();
  }
}
