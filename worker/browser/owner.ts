/**
 * The engine's ownership of its store: the Web Lock `store:<name>`, the handover between engines
 * (BroadcastChannel), and the one teardown. Invariants:
 * - the store is opened only while the lock is held, and closed before the lock is released;
 * - the owner epoch moves in this engine's first commit, before any of its writes (store/line.ts);
 * - an engine that finds the lock held asks the owner to hand over; the owner (when the asker's build
 *   is not older) stops reserving, lets running phases reach a commit (bounded grace), closes the
 *   store, then releases the lock: never a silent steal;
 * - an owner still starting when it was asked ignores the request; its "owner-ready" makes the
 *   waiting engine ask again;
 * - a handover and a fatal store error end the same way (`#stop`): stop serving, close, release;
 * - a store the browser discarded (its marker names a store that is not there: core/store-identity.ts)
 *   is never used silently: the owner reports `failed` with reason `discarded` and waits, holding the
 *   lock, writing nothing, until a person chooses to start fresh (`startFresh`); a new store gets
 *   its identity committed before its marker is written.
 */
import type { AgentHarness } from "../agent/harness.ts";
import {
  ensureStoreId,
  judgeStore,
  readStoreId,
  type StoreMarker,
  type StoreVerdict,
} from "../core/store-identity.ts";
import type { EngineStatus, EngineTimeline } from "../protocol/api.ts";
import { classifyStoreError, errorMessage } from "../store/errors.ts";
import type { OwnedStore } from "../store/types.ts";
import { type HandoverMessage, handoverChannelName, storeLockName } from "./handover.ts";
import type { HostPlatform } from "./platform.ts";

const HANDOVER_GRACE_MS = 2000;
/** After a failed COMMIT the store may never close cleanly; the owner epoch fences any late write. */
const FATAL_CLOSE_MS = 2000;

export interface OwnerEvents {
  /** The engine's lifecycle moved on (starting, waiting, ready, handing over, failed). */
  status(status: EngineStatus): void;
  /** The harness is about to close (a handover or a fatal error): stop serving anything from it. */
  stopping(): void;
}

/** Open the engine's harness on the store just opened; `onFatal` is its store-failure callback. */
export type OpenHarness = (store: OwnedStore, onFatal: (error: Error) => void) => Promise<AgentHarness>;

export class StoreOwner {
  readonly timeline: { -readonly [K in keyof EngineTimeline]: EngineTimeline[K] } = {
    startedAt: Date.now(),
    createdAt: performance.timeOrigin,
  };
  readonly #platform: HostPlatform;
  /** Who hears the events: set by `listen` (the engine's API may load after the open began). */
  #events: OwnerEvents | undefined;
  #lastStatus: EngineStatus | undefined;
  readonly #id = crypto.randomUUID();
  readonly #channel: BroadcastChannel;
  #harness: AgentHarness | undefined;
  #release: (() => void) | undefined;
  #waitingForLock = false;
  #failed = false;
  /** Set while the owner waits on a discarded store: a person's "start fresh" calls it. */
  #startFresh: (() => void) | undefined;
  /** The marker as this engine last wrote or found it (an export updates it). */
  #marker: StoreMarker | undefined;
  /** Marker writes, one after another. */
  #marking: Promise<void> = Promise.resolve();

  constructor(platform: HostPlatform) {
    this.#platform = platform;
    this.#channel = new BroadcastChannel(handoverChannelName(platform.storeName));
    this.#channel.onmessage = (e: MessageEvent<HandoverMessage>) => void this.#onMessage(e.data);
  }

  /** Send the owner's events to `events` from now on; it hears the newest status at once. */
  listen(events: OwnerEvents): void {
    this.#events = events;
    if (this.#lastStatus) events.status(this.#lastStatus);
  }

  #status(status: EngineStatus): void {
    this.#lastStatus = status;
    this.#events?.status(status);
  }

  /**
   * Take the lock (asking the owner to hand over when another engine holds it), open the store and
   * the harness. Rejects with a classified StoreOpenError (the lock released) when it cannot.
   */
  async open(openHarness: OpenHarness): Promise<AgentHarness> {
    await this.#acquire();
    this.timeline.lockedAt = Date.now();
    this.#status({ phase: "starting", detail: "opening the store" });
    let harness: AgentHarness;
    let opened: OwnedStore | undefined;
    try {
      const store = await this.#platform.openStore((part, at) => {
        this.timeline[part] = at ?? Date.now();
      });
      opened = store;
      this.timeline.migratedAt = Date.now();
      // The marker's file depends on the store kind the open chose (store-kind.ts), so it is read
      // once the store is open, beside the store's own id.
      const [marker, storeId] = await Promise.all([this.#readMarker(), readStoreId(store)]);
      const verdict = judgeStore({ schemaVersion: store.schemaVersion, storeId }, marker);
      if (verdict.kind === "discarded") {
        // Nothing is written to what is there until a person has read why it is empty.
        this.#status(discardedStatus(verdict));
        await new Promise<void>((resolve) => {
          this.#startFresh = resolve;
        });
        this.#startFresh = undefined;
        this.#status({ phase: "starting", detail: "starting with an empty store" });
      }
      // The owner epoch moves in the first commit this engine makes (the resumed work's), not in a
      // commit of its own: safe because the connection excludes every other one from its first
      // read on (docs/ARCHITECTURE.md, "The owner epoch").
      store.fenceOnFirstCommit();
      this.timeline.openedAt = Date.now();
      harness = await openHarness(store, (error) => void this.#fail(error));
      await this.#mark(store, verdict, marker);
    } catch (error) {
      const e = await classifyStoreError(error, { store: this.#platform.storeName, stage: "open" });
      this.#status({
        phase: "failed",
        stage: "open",
        reason: e.reason,
        message: e.message,
        advice: e.advice,
      });
      // Closed before the lock goes (an opfs store's file handle is then free for the tab to read);
      // a close that hangs is given up, as after a fatal error.
      if (opened)
        await Promise.race([
          opened.close().catch(() => undefined),
          new Promise((resolve) => setTimeout(resolve, FATAL_CLOSE_MS)),
        ]);
      this.#release?.();
      throw e;
    }
    this.#harness = harness;
    this.timeline.readyAt = Date.now();
    // Calls wait for the harness, not for this status: whether storage is persisted (a browser
    // round trip) is said once known, off the recovery path.
    void this.#ready();
    return harness;
  }

  async #ready(): Promise<void> {
    const persisted = await navigator.storage?.persisted?.().catch(() => undefined);
    if (this.#failed || this.#lastStatus?.phase !== "starting") return;
    this.#status({
      phase: "ready",
      storeKind: this.#platform.storeKind,
      build: this.#platform.build,
      jspi: this.#platform.jspi,
      persisted,
    });
    this.#post("owner-ready");
  }

  /**
   * A person read that the browser discarded the store and chose to go on with what is there (an
   * empty store): the open goes on. False when the engine is not waiting on a discarded store.
   */
  startFresh(): boolean {
    if (!this.#startFresh) return false;
    this.#startFresh();
    return true;
  }

  /** An export was made from this store: the marker remembers it, so a later discard can name the file. */
  noteExport(fileName: string): Promise<void> {
    const marker = this.#marker;
    if (!marker) return Promise.resolve();
    return this.#writeMarker({ ...marker, lastExport: { at: Date.now(), fileName } });
  }

  async #readMarker(): Promise<StoreMarker | undefined> {
    try {
      return await this.#platform.marker?.read();
    } catch (error) {
      // No marker read is no evidence either way: the store is taken as it is (as before markers).
      console.warn(`store marker unreadable: ${errorMessage(error)}`);
      return undefined;
    }
  }

  /**
   * After the harness opened (the store migrated): give the store its identity, then mark it. A
   * failure here costs only the marker (said in a warning): the store's own first failing commit is
   * the harness's to report.
   */
  async #mark(store: OwnedStore, verdict: StoreVerdict, found: StoreMarker | undefined): Promise<void> {
    if (!this.#platform.marker) return;
    if (verdict.kind === "same") {
      this.#marker = found;
      return;
    }
    let storeId: string;
    try {
      storeId = await ensureStoreId(store);
    } catch (error) {
      console.warn(`store identity not written: ${errorMessage(error)}`);
      return;
    }
    await this.#writeMarker({ storeId, createdAt: Date.now() });
  }

  #writeMarker(marker: StoreMarker): Promise<void> {
    this.#marker = marker;
    this.#marking = this.#marking.then(() =>
      this.#platform.marker?.write(marker).catch((error: unknown) => {
        console.warn(`store marker not written: ${errorMessage(error)}`);
      }),
    );
    return this.#marking;
  }

  /** Hold the lock at once if it is free; otherwise ask its owner to hand over and wait for it. */
  async #acquire(): Promise<void> {
    this.#waitingForLock = true;
    if (!(await this.#hold({ ifAvailable: true }))) {
      this.#status({
        phase: "waiting-for-lock",
        detail: "another engine owns the store; asking it to hand over",
      });
      this.#post("handover-request");
      await this.#hold({});
    }
    this.#waitingForLock = false;
  }

  /** Request the lock and keep it until `#release`; false only when `ifAvailable` found it held. */
  #hold(options: LockOptions): Promise<boolean> {
    return new Promise((resolve, reject) => {
      navigator.locks
        .request(storeLockName(this.#platform.storeName), options, (lock) => {
          if (!lock) return resolve(false);
          resolve(true);
          return new Promise<void>((release) => {
            this.#release = release;
          });
        })
        .catch(reject);
    });
  }

  /**
   * The one teardown: stop serving, close the harness (running phases get `graceMs` to reach their
   * next commit; a close that hangs is given up after `giveUpAfterMs`), then release the lock.
   */
  async #stop(options: { graceMs?: number; giveUpAfterMs?: number }): Promise<void> {
    const harness = this.#harness;
    this.#harness = undefined;
    this.#events?.stopping();
    try {
      const closing = harness?.close(options.graceMs ? { graceMs: options.graceMs } : {});
      const giveUp = options.giveUpAfterMs;
      await (giveUp === undefined
        ? closing
        : Promise.race([closing, new Promise((resolve) => setTimeout(resolve, giveUp))]));
    } catch {
      // Releasing the lock is what counts: everything committed is stored.
    } finally {
      this.#release?.();
    }
  }

  /**
   * A COMMIT failed (storage full, the store taken over, an I/O error): memory may be ahead of the
   * disk, so the engine stops. Say why and what to do, close the store (everything committed stays),
   * and release the lock so the next engine (a reload) can reopen it.
   */
  async #fail(error: Error): Promise<void> {
    if (this.#failed) return;
    this.#failed = true;
    const e = await classifyStoreError(error, { store: this.#platform.storeName, stage: "run" });
    this.#status({
      phase: "failed",
      stage: "run",
      reason: e.reason,
      message: e.message,
      advice: e.advice,
    });
    await this.#stop({ giveUpAfterMs: FATAL_CLOSE_MS });
  }

  async #onMessage(message: HandoverMessage): Promise<void> {
    if (message.from === this.#id) return;
    const build = this.#platform.build;
    if (message.type === "owner-ready") {
      // An owner that was still starting when we asked ignored the request: ask it again now.
      if (this.#waitingForLock && message.build <= build) this.#post("handover-request");
      return;
    }
    if (message.type !== "handover-request" || !this.#harness || this.#failed) return;
    if (message.build < build) return; // an older build never takes over a newer one
    // The same build asks only when a tab chose "use it here" (the dedicated-worker fallback).
    const newer = message.build > build;
    this.#status({
      phase: "handing-over",
      detail: newer ? `a newer version (${message.build}) is taking over` : "another tab is taking over",
    });
    await this.#stop({ graceMs: HANDOVER_GRACE_MS });
    this.#status({
      phase: "handed-over",
      detail: newer
        ? "A newer version of the app took over in another tab."
        : "Another tab took over the app; this one is paused.",
    });
    this.#post("handover-released");
  }

  #post(type: HandoverMessage["type"]): void {
    this.#channel.postMessage({
      type,
      from: this.#id,
      build: this.#platform.build,
    } satisfies HandoverMessage);
  }
}

/** What a tab shows for a store the browser discarded: what happened, and what can be done. */
export function discardedStatus(
  verdict: Extract<StoreVerdict, { kind: "discarded" }>,
): Extract<EngineStatus, { phase: "failed" }> {
  const { marker, found } = verdict;
  const here = {
    empty: "the store opened empty",
    unnamed: "the store holds data written since, without its identity",
    other: "the store here is another one",
  }[found];
  const exported = marker.lastExport;
  return {
    phase: "failed",
    stage: "open",
    reason: "discarded",
    message:
      `the browser deleted this site's saved data (the IndexedDB store ${verdict.marker.storeId} that was here ` +
      `since ${new Date(marker.createdAt).toISOString()}); ${here}`,
    advice: exported
      ? `Choose "Start fresh" to go on with an empty store, then import "${exported.fileName}" (exported before) to bring its conversation back.`
      : `Choose "Start fresh" to go on with an empty store; no export was made from the lost one.`,
    ...(exported ? { lastExport: exported } : {}),
  };
}
