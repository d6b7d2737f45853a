/**
 * The tab's engine client: connects to the SharedWorker engine (or, where SharedWorker is missing or
 * `?engine=dedicated` is set, runs the engine in a dedicated worker when this tab may own the store),
 * holds the tab's own Web Lock so the engine learns when the tab is gone, and keeps the engine's
 * status as reactive state. Everything the tab knows about the engine arrives through protocol.ts.
 */
import * as Comlink from "comlink";
import {
  type ConversationSummary,
  DEFAULT_STORE_NAME,
  type EngineApi,
  type EngineStatus,
  PROTOCOL_VERSION,
  storeLockName,
  tabLockName,
} from "../../worker/protocol.ts";

export type HostMode = "shared" | "dedicated" | "elsewhere";

export class EngineClient {
  status = $state.raw<EngineStatus>({ phase: "starting", detail: "connecting to the engine" });
  conversations = $state.raw<ConversationSummary[]>([]);
  mode = $state.raw<HostMode>("shared");
  online = $state.raw(typeof navigator === "undefined" ? true : navigator.onLine);
  readonly tabId = crypto.randomUUID();
  readonly storeName: string;
  api: Comlink.Remote<EngineApi> | undefined;
  #worker: Worker | undefined;

  constructor(readonly params: URLSearchParams) {
    this.storeName = params.get("store") ?? DEFAULT_STORE_NAME;
    addEventListener("online", () => (this.online = true));
    addEventListener("offline", () => (this.online = false));
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

  async connect(): Promise<void> {
    await this.#holdTabLock();
    const forceDedicated = this.params.get("engine") === "dedicated";
    // The worker reads its configuration from its name (Vite needs a static worker URL).
    const query = new URLSearchParams({ store: this.storeName });
    if (this.params.get("build") === "asyncify") query.set("build", "asyncify");
    if (!forceDedicated && typeof SharedWorker === "function") {
      const worker = new SharedWorker(new URL("../../worker/host/shared-worker.ts", import.meta.url), {
        type: "module",
        name: query.toString(),
      });
      this.api = Comlink.wrap<EngineApi>(worker.port);
      this.mode = "shared";
    } else {
      const held = await navigator.locks.query();
      const owned = held.held?.some((l) => l.name === storeLockName(this.storeName));
      if (owned && this.params.get("takeover") !== "1") {
        this.mode = "elsewhere";
        this.status = { phase: "waiting-for-lock", detail: "The app is open in another tab." };
        return;
      }
      this.#startDedicated(query);
    }
    await this.#hello();
  }

  /** Run the engine here (the other tab's engine hands the store over). */
  async takeOver(): Promise<void> {
    const query = new URLSearchParams({ store: this.storeName });
    this.#startDedicated(query);
    await this.#hello();
  }

  #startDedicated(query: URLSearchParams): void {
    this.#worker = new Worker(new URL("../../worker/host/dedicated-worker.ts", import.meta.url), {
      type: "module",
      name: query.toString(),
    });
    this.api = Comlink.wrap<EngineApi>(this.#worker);
    this.mode = "dedicated";
  }

  async #hello(): Promise<void> {
    const api = this.api!;
    const hello = await api.hello({ tabId: this.tabId, protocol: PROTOCOL_VERSION });
    this.status = hello.status;
    await api.onStatus(
      this.tabId,
      Comlink.proxy((status: EngineStatus) => {
        this.status = status;
        if (status.phase === "ready") void this.refresh();
      }),
    );
    if (hello.status.phase === "ready") await this.refresh();
  }

  async refresh(): Promise<void> {
    if (!this.api) return;
    this.conversations = await this.api.conversations();
  }
}
