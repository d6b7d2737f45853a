/**
 * The browser's engine host: the portable engine service (engine-service.ts, every harness-backed
 * call and each tab's watches) with what only the browser has, served by the protocol's door
 * (worker/protocol/door.ts). Invariants:
 * - every call waits for the harness (the store owned and open, see owner.ts); after a handover it
 *   refuses with "reload";
 * - each tab holds `tab:<id>`; when the engine is granted that lock the tab is gone, and its watches,
 *   status listeners and offered script workers are dropped;
 * - when the harness stops (handover, fatal error) every watch ends ("closed");
 * - `store.startFresh` is the one call served before the harness: it lets an owner waiting on a store
 *   the browser discarded go on (owner.ts); every export is noted in the store's marker, so a later
 *   discard can name the file that brings a conversation back;
 * - a tab's offer of script workers (browser/tab-script-workers.ts, on the browser-only side channel)
 *   is taken only from a tab that said hello, and ends with the tab.
 * Store ownership and handover live in browser/owner.ts, the start (owner first, this module loaded
 * meanwhile) in entry/boot.ts, the agent's configuration in app-agent.ts, the test endpoints in
 * debug/endpoints.ts. A new engine call goes in engine-service.ts.
 */

import type { AgentHarness } from "../agent/harness.ts";
import type { StoreOwner } from "../browser/owner.ts";
import type { HostPlatform } from "../browser/platform.ts";
import { storeLenders } from "../browser/store-lenders.ts";
import { lockShows } from "../browser/tab-locks.ts";
import { type TabOffer, tabScriptWorkers } from "../browser/tab-script-workers.ts";
import { errorMessage } from "../core/errors.ts";
import type { EngineService, TabCalls } from "../protocol/door.ts";
import {
  type EngineStatus,
  type EngineTimeline,
  type Hello,
  type RemoteApi,
  type StoreApi,
  type TabHello,
  tabLockName,
} from "../protocol/index.ts";
import { HarnessEngine } from "./engine-service.ts";
import { mcpApi } from "./mcp/store.ts";
import { remoteApi } from "./remote.ts";
import { ServerHome } from "./remote-peer.ts";

/** Keys the test endpoints' view of the engine (see `[engineInternals]`). */
export const engineInternals = Symbol("engine internals");

export interface EngineInternals {
  readonly platform: HostPlatform;
  readonly timeline: EngineTimeline;
  harness(): Promise<AgentHarness>;
  watchStats(): { watches: number; pendingFrames: number };
}

export class EngineHost implements EngineService {
  readonly #platform: HostPlatform;
  readonly #owner: StoreOwner;
  readonly #ready: Promise<AgentHarness>;
  readonly #engine: HarnessEngine;
  /** Moves to and from the configured server (remote-peer.ts): its own connection, the orchestrator. */
  readonly #home = new ServerHome({
    harness: () => this.#h(),
    onReport: (error) => console.warn("moves:", errorMessage(error)),
  });
  /** The server setting (remote.ts): the door serves it as the `remote` group, to this engine's tabs only. */
  readonly remote: RemoteApi = ((api) => ({
    ...api,
    set: async (url: string | null, token: string | null) => {
      await api.set(url, token);
      // A new server (or none): the moves' connection follows the setting.
      void this.#home.settingsChanged().catch((e: unknown) => console.warn("moves:", errorMessage(e)));
    },
  }))(remoteApi(() => this.#h()));
  /** MCP servers (mcp/store.ts): the door serves them as the `mcp` group, to this engine's tabs only. */
  readonly mcp = mcpApi(() => this.#h());
  /** "Run on the server" and "Bring back to this browser", for this engine's tabs only. */
  readonly homes = this.#home.api;
  /** Start fresh after the browser discarded the store (owner.ts waits for it). */
  readonly store: StoreApi = {
    startFresh: async () => (this.#owner.startFresh() ? "started" : "not-discarded"),
  };

  /** `started`: the owner already taking the store and opening the harness (boot.ts). */
  constructor(platform: HostPlatform, started: { owner: StoreOwner; ready: Promise<AgentHarness> }) {
    this.#platform = platform;
    this.#owner = started.owner;
    this.#ready = started.ready;
    this.#engine = new HarnessEngine({
      harness: () => this.#h(),
      build: platform.build,
      tabArrived: (tabId) => this.#watchTab(tabId),
    });
    this.#owner.listen({
      status: (status) => this.#engine.setStatus(status),
      stopping: () => {
        this.#home.close();
        this.#engine.stopAll();
      },
    });
    // The moves left unfinished by the last engine go on (once the server answers).
    void this.#ready
      .then(() => this.#home.start())
      .catch((e: unknown) => console.warn("moves:", errorMessage(e)));
  }

  async #h(): Promise<AgentHarness> {
    const phase = this.#engine.status.phase;
    if (phase === "handed-over" || phase === "handing-over") {
      throw new Error("this engine handed the store over to another tab; reload this one");
    }
    return this.#ready;
  }

  /** What the test endpoints read; a symbol key, so no tab can reach it through the port. */
  [engineInternals](): EngineInternals {
    return {
      platform: this.#platform,
      timeline: this.#owner.timeline,
      harness: () => this.#h(),
      watchStats: () => this.#engine.watchStats(),
    };
  }

  hello(tab: TabHello): Promise<Hello> {
    return this.#engine.hello(tab);
  }

  tab(tabId: string): TabCalls {
    const calls = this.#engine.tab(tabId);
    const conversations = calls.conversations;
    return {
      ...calls,
      conversations: {
        ...conversations,
        export: async (conversationId) => {
          const exported = await conversations.export(conversationId);
          await this.#owner.noteExport(exported.fileName);
          return exported;
        },
      },
    };
  }

  onStatus(tabId: string, listener: (status: EngineStatus) => void): void {
    this.#engine.onStatus(tabId, listener);
  }

  /** Tabs whose lock this engine waits on (once each, whether they said hello or offered first). */
  readonly #watched = new Set<string>();

  /**
   * Learn when tab `tabId` goes away: its lock is granted only once the tab released it. A tab's first
   * script says hello on its side channel right after asking for its lock, so the request may not show
   * yet: the watch starts once it does (tab-locks.ts).
   */
  #watchTab(tabId: string): void {
    if (this.#watched.has(tabId)) return;
    this.#watched.add(tabId);
    const name = tabLockName(tabId);
    void lockShows(navigator.locks, name).then(() =>
      navigator.locks.request(name, () => this.#dropTab(tabId)),
    );
  }

  #dropTab(tabId: string): void {
    this.#watched.delete(tabId);
    tabScriptWorkers.drop(tabId);
    storeLenders.drop(tabId);
    this.#engine.dropTab(tabId);
  }

  /**
   * A tab's script workers, offered on its side channel (browser-only, not the protocol), maybe before
   * its hello (its first script offers as soon as its lock is held): its lock tells when the offer
   * ends. The same channel lends the `opfs-lent` store's worker: boot.ts hands it to store-lenders.ts
   * at once, before this host exists, and the tab's going away drops it there too.
   */
  offerScriptWorkers(tabId: string, offer: TabOffer): void {
    this.#watchTab(tabId);
    tabScriptWorkers.offer(tabId, offer);
  }
}
