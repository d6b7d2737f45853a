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
  tabLockName,
  type WatchFrame,
} from "../../worker/protocol/index.ts";
import { type PortLike, portTransport, type TabMessage } from "../../worker/protocol/wire.ts";
import { offerScriptWorkers } from "./script-worker-offer.ts";

export type HostMode = "shared" | "dedicated" | "elsewhere";

export class EngineClient {
  status = $state.raw<EngineStatus>({ phase: "starting", detail: "connecting to the engine" });
  conversations = $state.raw<ConversationSummary[]>([]);
  mode = $state.raw<HostMode>("shared");
  readonly tabId = crypto.randomUUID();
  readonly storeName: string;
  api: EngineApi | undefined;
  /** The protocol this tab speaks (a debug page may claim another, to test the refusal). */
  readonly protocol: number;
  #worker: Worker | undefined;
  #connection: EngineConnection | undefined;
  #waitForHost: AbortController | undefined;
  #heard = false;

  constructor(readonly params: URLSearchParams) {
    this.storeName = params.get("store") ?? DEFAULT_STORE_NAME;
    const claimed = Number(params.get("protocol"));
    this.protocol =
      params.get("debug") === "1" && Number.isInteger(claimed) && claimed > 0 ? claimed : PROTOCOL_VERSION;
  }

  /** Hold `tab:<id>` for the tab's whole life; resolves once it is held. */
  #holdTabLock(): Promise<void> {
    return new Promise((held) => {
      void navigator.locks.request(tabLockName(this.tabId), () => {
        held();
        return new Promise<never>(() => undefined);
      });
    });
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
      const forceDedicated = this.params.get("engine") === "dedicated";
      // The worker reads its configuration from its name (Vite needs a static worker URL).
      const query = this.#workerQuery();
      const shared = !forceDedicated && typeof SharedWorker === "function";
      if (shared) {
        // Created before this tab takes its own lock: the engine opens the store meanwhile. It
        // learns of the tab only from hello, which waits for that lock.
        const worker = this.#sharedWorker(query);
        worker.addEventListener("error", () => this.#workerFailed());
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

  /** A connection to the SharedWorker engine of this query (the same worker on every call). */
  #sharedWorker(query: URLSearchParams): SharedWorker {
    return new SharedWorker(new URL("../../worker/entry/shared-worker.ts", import.meta.url), {
      type: "module",
      name: query.toString(),
    });
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
    const query = new URLSearchParams({ store: this.storeName });
    if (this.params.get("build") === "asyncify") query.set("build", "asyncify");
    // The opfs store in a worker this tab lends the SharedWorker (worker/browser/store-lenders.ts): a
    // choice for tests and benches; the shipped store kind is idb.
    if (this.params.get("storeKind") === "opfs-lent") query.set("storeKind", "opfs-lent");
    // Test pages ask for the engine's test endpoints (worker/debug/endpoints.ts); a worker of
    // another name is another worker, so a normal page never shares an engine that serves them.
    if (this.params.get("debug") === "1") {
      query.set("debug", "1");
      // The kill storm's effect tools (worker/debug/effects.ts): a path on this origin.
      const effects = this.params.get("effects");
      if (effects) query.set("effects", effects);
    }
    // A test page that tests tool approval keeps its defaults (worker/entry/boot.ts).
    if (this.params.get("approval") === "1") query.set("approval", "1");
    return query;
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
    if (this.mode === "shared" && typeof Worker === "function")
      offerScriptWorkers(this.#sharedWorker(this.#workerQuery()).port, this.tabId);
    // The list is live from here on; the engine answers once it is ready (not awaited: status first).
    // The engine pushes its status from the hello on (the connection's onStatus).
    void api.conversations
      .watch((list: ConversationSummary[]) => {
        this.conversations = list;
      })
      .catch(() => undefined);
    if (hello.status.phase === "ready") await this.refresh();
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

  async refresh(): Promise<void> {
    if (!this.api) return;
    this.conversations = await this.api.conversations.list();
  }
}
