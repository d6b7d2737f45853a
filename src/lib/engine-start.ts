/**
 * The engine's worker, started before the tab's app loads: `src/start.ts` (a module script of its own
 * in index.html, ahead of the app's) calls `startEngineEarly` as soon as this small module arrives,
 * so after a reload the engine fetches its script, compiles its store's wasm and opens its store
 * while the tab still fetches, evaluates and mounts the app. `EngineClient.connect` then takes that
 * worker (`takeEarlyWorker`) instead of creating it. Invariants:
 * The same first script also makes the tab known to the engine early, so the `opfs-lent` store (whose
 * worker a tab must lend: worker/browser/store-lenders.ts) does not wait for the app to load: it holds
 * the tab's Web Lock, and opens the script-worker side channel (script-worker-offer.ts) at once, its
 * hello lending a spare store worker started there and then, whose script and wasm load beside the
 * engine's own (a spare the engine does not use ends itself).
 * Invariants:
 * - this module stays small and imports nothing but the protocol's constants and the side channel's
 *   offer (it is the tab's first script; tests/unit/tab/engine-start.test.ts holds it to that);
 * - the worker's name is its configuration (store, build, test flags), computed here for both;
 * - only the SharedWorker engine starts early: the dedicated-worker fallback needs the tab's host
 *   lock first (engine.svelte.ts), and a taken-over early worker is handed out once;
 * - the start runs once a page: the first script is `async` (it runs once fetched, not after the
 *   parse), so the engine client calls the start too before it looks for the early worker, and the
 *   later of the two calls starts nothing (never a second engine connection or tab id);
 * - the tab's id is made once: the engine client takes it (`earlyTabId`) with the worker, and never
 *   offers the side channel again when this module did (a second offer would replace the first);
 * - the tab's lock is asked for before the side channel's hello is sent (the engine, granted that
 *   lock, drops the tab; it watches it only once the request shows), and a page that claims another
 *   protocol (a debug page testing refusal) offers nothing early.
 */
import { DEFAULT_STORE_NAME, PROTOCOL_VERSION } from "../../worker/protocol/api.ts";
import { tabLockName } from "../../worker/protocol/browser.ts";
import { offerScriptWorkers, spareStoreWorker } from "./script-worker-offer.ts";

/** The worker's name for a page of these query parameters: the engine reads its configuration from it. */
export function workerQuery(params: URLSearchParams): URLSearchParams {
  const query = new URLSearchParams({ store: params.get("store") ?? DEFAULT_STORE_NAME });
  if (params.get("build") === "asyncify") query.set("build", "asyncify");
  // A store kind the page forces (tests and benches): `idb`, or `opfs-lent` (the opfs store in a worker
  // this tab lends the SharedWorker). Without it the engine chooses (worker/browser/store-kind.ts).
  const kind = params.get("storeKind");
  if (kind === "idb" || kind === "opfs-lent") query.set("storeKind", kind);
  // Test pages ask for the engine's test endpoints (worker/debug/endpoints.ts); a worker of
  // another name is another worker, so a normal page never shares an engine that serves them.
  if (params.get("debug") === "1") {
    query.set("debug", "1");
    // The kill storm's effect tools (worker/debug/effects.ts): a path on this origin.
    const effects = params.get("effects");
    if (effects) query.set("effects", effects);
    // A moved engine clock (worker/entry/boot.ts `clockOffsetOf`): schedules' catch-up in e2e.
    const clockOffset = params.get("clockOffset");
    if (clockOffset) query.set("clockOffset", clockOffset);
  }
  // A test page that tests tool approval keeps its defaults (worker/entry/boot.ts).
  if (params.get("approval") === "1") query.set("approval", "1");
  return query;
}

/** Whether a page of these parameters runs its engine in the SharedWorker. */
export function usesSharedWorker(params: URLSearchParams): boolean {
  return params.get("engine") !== "dedicated" && typeof SharedWorker === "function";
}

/** A connection to the SharedWorker engine of this query (the same worker on every call). */
export function sharedEngineWorker(query: URLSearchParams): SharedWorker {
  return new SharedWorker(new URL("../../worker/entry/shared-worker.ts", import.meta.url), {
    type: "module",
    name: query.toString(),
  });
}

/** The tab as the first script made it known: its id, and its Web Lock once held. */
export interface EarlyTab {
  readonly tabId: string;
  /** Resolves once `tab:<id>` is held (for the tab's whole life). */
  readonly held: Promise<void>;
  /** Whether the side channel was offered (the engine client then offers none). */
  readonly offered: boolean;
}

/** The performance mark set as the page asks for its engine's worker (the floor's page sets it too). */
export const WORKER_ASKED_MARK = "durable-agent:worker-asked";

/** Whether `startEngineEarly` has run on this page (it starts at most once). */
let begun = false;

/** A worker started early, not taken yet, and whether its script failed to load meanwhile. */
let early: { name: string; worker: SharedWorker; failed: boolean; tab: EarlyTab | undefined } | undefined;

/** Hold `tab:<id>` for the tab's whole life; resolves once it is held. */
export function holdTabLock(tabId: string): Promise<void> {
  return new Promise((held) => {
    void navigator.locks.request(tabLockName(tabId), () => {
      held();
      return new Promise<never>(() => undefined);
    });
  });
}

/**
 * Make the tab known to the engine early, all at once: its lock is asked for, and its side channel
 * says hello with a spare store worker's port, before this thread turns to loading the app (which
 * would hold back any answer to the engine). The engine waits for the lock request to show before it
 * watches the lock (worker/app/engine-host.ts).
 */
function announceTab(params: URLSearchParams, query: URLSearchParams): EarlyTab | undefined {
  // A debug page claiming another protocol tests the engine's refusal: it lends nothing before that.
  if (params.has("protocol") || typeof navigator === "undefined" || !navigator.locks) return undefined;
  if (typeof Worker !== "function") return undefined;
  const tabId = crypto.randomUUID();
  const held = holdTabLock(tabId);
  // The spare compiles its wasm at once (worker/entry/lent-store.ts says why).
  const spare = query.get("storeKind") === "idb" ? undefined : spareStoreWorker(tabId);
  offerScriptWorkers(sharedEngineWorker(query).port, tabId, {
    protocol: PROTOCOL_VERSION,
    ...(spare ? { spare } : {}),
  });
  return { tabId, held, offered: true };
}

/**
 * Start the engine's worker for this page now (nothing where the page does not use the SharedWorker),
 * once: the first script (async, so it may run before or after the app's) and the engine client both
 * call it, and whichever comes second starts nothing.
 */
export function startEngineEarly(params: URLSearchParams): void {
  if (begun) return;
  begun = true;
  if (!usesSharedWorker(params)) return;
  // The recovery bench reads when the page asked for its worker (tests/bench/recovery.ts).
  performance.mark(WORKER_ASKED_MARK);
  const query = workerQuery(params);
  const started = {
    name: query.toString(),
    worker: sharedEngineWorker(query),
    failed: false,
    tab: undefined as EarlyTab | undefined,
  };
  started.worker.addEventListener("error", () => {
    started.failed = true;
  });
  started.tab = announceTab(params, query);
  early = started;
}

/** The tab id the first script made known for this query (the engine client's id), if any. */
export function earlyTabId(query: URLSearchParams): string | undefined {
  return early && early.name === query.toString() ? early.tab?.tabId : undefined;
}

/**
 * The worker `startEngineEarly` started for this query, once (undefined when none was, or for
 * another query); `failed` says its script already failed to load; `tab` the tab it made known.
 */
export function takeEarlyWorker(
  query: URLSearchParams,
): { worker: SharedWorker; failed: boolean; tab: EarlyTab | undefined } | undefined {
  if (!early || early.name !== query.toString()) return undefined;
  const taken = early;
  early = undefined;
  return taken;
}
