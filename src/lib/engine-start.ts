/**
 * The engine's worker, started before the tab's app loads: `src/start.ts` (a module script of its own
 * in index.html, ahead of the app's) calls `startEngineEarly` as soon as this small module arrives,
 * so after a reload the engine fetches its script, compiles its store's wasm and opens its store
 * while the tab still fetches, evaluates and mounts the app. `EngineClient.connect` then takes that
 * worker (`takeEarlyWorker`) instead of creating it. Invariants:
 * - this module stays small and imports nothing but the protocol's constants (it is the tab's first
 *   script; tests/unit/tab/engine-start.test.ts holds it to that);
 * - the worker's name is its configuration (store, build, test flags), computed here for both;
 * - only the SharedWorker engine starts early: the dedicated-worker fallback needs the tab's host
 *   lock first (engine.svelte.ts), and a taken-over early worker is handed out once.
 */
import { DEFAULT_STORE_NAME } from "../../worker/protocol/api.ts";

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

/** A worker started early, not taken yet, and whether its script failed to load meanwhile. */
let early: { name: string; worker: SharedWorker; failed: boolean } | undefined;

/** Start the engine's worker for this page now (nothing where the page does not use the SharedWorker). */
export function startEngineEarly(params: URLSearchParams): void {
  if (early || !usesSharedWorker(params)) return;
  const name = workerQuery(params).toString();
  const started = { name, worker: sharedEngineWorker(workerQuery(params)), failed: false };
  started.worker.addEventListener("error", () => {
    started.failed = true;
  });
  early = started;
}

/**
 * The worker `startEngineEarly` started for this query, once (undefined when none was, or for
 * another query); `failed` says its script already failed to load.
 */
export function takeEarlyWorker(
  query: URLSearchParams,
): { worker: SharedWorker; failed: boolean } | undefined {
  if (!early || early.name !== query.toString()) return undefined;
  const taken = early;
  early = undefined;
  return taken;
}
