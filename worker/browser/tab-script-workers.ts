/**
 * Script workers started by tabs, for an engine that cannot start its own (Chromium's SharedWorker
 * has no `Worker`). A connected tab offers its workers on its side channel (script-worker-channel.ts,
 * `EngineHost.offerScriptWorkers`); this module
 * turns the offers into the sandbox's `ScriptWorkerSpawner` (worker/sandbox/workers.ts):
 * - a new worker is asked of the live offering tab hosting the fewest of this engine's workers (the
 *   newest offer on a tie); until the tab hands back the worker's MessagePort, what the engine posts
 *   waits here. A tab whose worker failed to start offers no more (scripts go elsewhere, or to the
 *   engine's thread when no tab is left: `available` is false).
 * - terminate asks the tab to stop the worker and closes the engine's end of the port.
 * - a worker is lost (`ScriptWorkerLost`, which makes the script rerun elsewhere) when its tab goes
 *   away (`drop`, called when the engine is granted the tab's lock), when its port reports `close`,
 *   or when the tab stops answering a ping (asked by the watchdog; such a tab gets no more workers);
 *   each is counted by what noticed it first (`stats`).
 * Invariant: a worker is reported lost at most once, and never after it was terminated.
 */

import type { ScriptWorkerStats } from "../protocol/api.ts";
import { ScriptWorkerLost } from "../sandbox/errors.ts";
import type { FromScriptWorker, ToScriptWorker } from "../sandbox/messages.ts";
import type { ScriptWorkerPort } from "../sandbox/workers.ts";

/** The engine's end of a worker's channel (a MessagePort). */
export interface TabWorkerPort {
  postMessage(message: ToScriptWorker): void;
  addEventListener(type: "message", listener: (event: { data: FromScriptWorker }) => void): void;
  addEventListener(type: "close", listener: () => void): void;
  start(): void;
  close(): void;
}

/** A tab's offer as the engine calls it (over the tab's side channel: script-worker-channel.ts). */
export interface TabOffer {
  start(): Promise<{ id: number; port: TabWorkerPort }>;
  terminate(id: number): Promise<void>;
  ping(): Promise<true>;
}

/** How long a tab has to answer a ping before its worker counts as lost. */
export const PING_TIMEOUT_MS = 1000;

type LostBy = keyof ScriptWorkerStats["lost"];

interface Tab {
  readonly tabId: string;
  readonly offer: TabOffer;
  readonly order: number;
  readonly workers: Set<TabWorker>;
  gone: boolean;
  failed: boolean;
}

interface TabWorker {
  busy: boolean;
  lose(by: LostBy, reason: string): void;
}

export class TabScriptWorkers {
  readonly #tabs = new Map<string, Tab>();
  #offers = 0;
  #started = 0;
  readonly #lost: Record<LostBy, number> = { lock: 0, close: 0, ping: 0, start: 0 };

  /** Take `tabId`'s offer (a second offer from the same tab replaces the first). */
  offer(tabId: string, offer: TabOffer): void {
    const before = this.#tabs.get(tabId);
    if (before) this.drop(tabId);
    this.#tabs.set(tabId, {
      tabId,
      offer,
      order: ++this.#offers,
      workers: new Set(),
      gone: false,
      failed: false,
    });
  }

  /** The tab went away: its workers are lost. */
  drop(tabId: string): void {
    const tab = this.#tabs.get(tabId);
    if (!tab) return;
    this.#tabs.delete(tabId);
    tab.gone = true;
    for (const worker of [...tab.workers]) worker.lose("lock", "the tab hosting it closed");
  }

  /** Whether some tab can start a worker now. */
  readonly available = (): boolean => this.#pick() !== undefined;

  /** The sandbox's spawner: a worker in the chosen tab (throws when no tab offers). */
  readonly spawn = (): ScriptWorkerPort => {
    const tab = this.#pick();
    if (!tab) throw new ScriptWorkerLost("no tab offers script workers");
    return this.#startIn(tab);
  };

  stats(): ScriptWorkerStats {
    return {
      tabs: [...this.#tabs.values()].map((tab) => ({
        tabId: tab.tabId,
        workers: tab.workers.size,
        busy: [...tab.workers].filter((w) => w.busy).length,
        failed: tab.failed,
      })),
      started: this.#started,
      lost: { ...this.#lost },
    };
  }

  #pick(): Tab | undefined {
    let best: Tab | undefined;
    for (const tab of this.#tabs.values()) {
      if (tab.failed) continue;
      if (
        !best ||
        tab.workers.size < best.workers.size ||
        (tab.workers.size === best.workers.size && tab.order > best.order)
      )
        best = tab;
    }
    return best;
  }

  #startIn(tab: Tab): ScriptWorkerPort {
    this.#started++;
    const queued: ToScriptWorker[] = [];
    let port: TabWorkerPort | undefined;
    let id: number | undefined;
    let ended = false;
    let onMessage: ((message: FromScriptWorker) => void) | undefined;
    let onError: ((error: Error) => void) | undefined;
    const worker: TabWorker = {
      busy: false,
      lose: (by, reason) => {
        if (ended) return;
        end();
        this.#lost[by]++;
        onError?.(new ScriptWorkerLost(reason));
      },
    };
    const end = () => {
      ended = true;
      tab.workers.delete(worker);
      if (id !== undefined && !tab.gone) void tab.offer.terminate(id).catch(() => undefined);
      port?.close();
    };
    tab.workers.add(worker);
    tab.offer.start().then(
      (started) => {
        id = started.id;
        if (ended) {
          end();
          return;
        }
        port = started.port;
        port.addEventListener("message", (event) => onMessage?.(event.data));
        port.addEventListener("close", () => worker.lose("close", "its port closed"));
        port.start();
        for (const message of queued.splice(0)) port.postMessage(message);
      },
      (error: unknown) => {
        // A tab that cannot start a worker (its script failed to load, say) offers no more.
        if (!tab.gone) tab.failed = true;
        worker.lose(
          "start",
          `the tab could not start it (${error instanceof Error ? error.message : String(error)})`,
        );
      },
    );
    return {
      post: (message) => {
        if (ended) return;
        if (port) port.postMessage(message);
        else queued.push(message);
      },
      listen(message, error) {
        onMessage = message;
        onError = error;
      },
      hold: (busy) => {
        worker.busy = busy;
      },
      alive: async () => {
        if (tab.gone) return false;
        const answered = await Promise.race([
          tab.offer.ping().then(
            () => true,
            () => false,
          ),
          new Promise<false>((resolve) => setTimeout(() => resolve(false), PING_TIMEOUT_MS)),
        ]);
        if (!answered) {
          // A tab that does not answer gets no more workers.
          tab.failed = true;
          worker.lose("ping", "its tab stopped answering");
        }
        return answered;
      },
      terminate: () => {
        if (!ended) end();
      },
    };
  }
}

/** The engine's one registry: app/engine-host.ts takes the offers, script-workers.ts installs the spawner. */
export const tabScriptWorkers = new TabScriptWorkers();
