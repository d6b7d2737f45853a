/**
 * The engine's first line, shared by both worker entries: take the store's lock and open the store at
 * once, and load the rest of the engine meanwhile. Recovery after a reload waits for the store, not
 * for the engine's code: the wasm compiles and the lock is taken while the API module (engine.ts and
 * the agent under it) and pi-ai are fetched and evaluated. Invariants:
 * - this module's static imports are the owner and the store only (import-direction.test.ts lists
 *   engine.ts and app-harness.ts among the entries: pi-ai stays out of them too);
 * - a port is served once the API module is here; what a tab sends before waits in its port;
 * - the harness is opened by the owner (lock held, store fenced), exactly as before.
 */
import * as Comlink from "comlink";
import { loadPiAi } from "../agent/models/pi-ai.ts";
import { StoreOwner } from "../browser/owner.ts";
import type { HostPlatform } from "../browser/platform.ts";

/** The query flag (page URL and worker name) that asks for the test endpoints (test-endpoints.ts). */
export const TEST_ENDPOINTS_FLAG = "debug";

export interface BootOptions {
  /** Serve the test endpoints too (the page asked with `?debug=1`). */
  testEndpoints: boolean;
  /** The store's wasm compile the entry started (`preloadBrowserStore`): its end goes in the timeline. */
  wasm?: Promise<void>;
}

/** Start the engine; resolves with what its ports serve. */
export function bootEngine(platform: HostPlatform, options: BootOptions): Promise<object> {
  const owner = new StoreOwner(platform);
  void options.wasm?.then(() => {
    owner.timeline.wasmAt = Date.now();
  });
  // pi-ai is a chunk of its own (agent/models/pi-ai.ts): fetched and evaluated while the lock is
  // taken and the store opens. The harness open awaits it (a failure surfaces there, where the load
  // is tried again).
  loadPiAi().then(
    () => {
      owner.timeline.piAiAt = Date.now();
    },
    () => undefined,
  );
  const ready = owner.open(async (store, onFatal) => {
    // Codemode scripts off the engine's thread where this worker can start workers (script-workers.ts).
    (await import("../browser/script-workers.ts")).installBrowserScriptWorkers();
    // Test pages' engines also run the test tasks (a store a test page used reopens in a test page).
    const tasks = options.testEndpoints ? (await import("../debug/ticker.ts")).debugTasks : [];
    return (await import("../app/app-agent.ts")).openAppHarness(store, { onFatal, tasks });
  });
  // The owner reported a failure as the engine's status; every call then rejects with it.
  ready.catch(() => undefined);
  return import("../app/engine-host.ts").then(async ({ EngineHost }) => {
    owner.timeline.apiAt = Date.now();
    const host = new EngineHost(platform, { owner, ready });
    if (!options.testEndpoints) return host;
    return (await import("../debug/endpoints.ts")).withTestEndpoints(host);
  });
}

/** Serve `served` on `endpoint` once it is here (a MessagePort queues messages until then). */
export function serveWhenReady(served: Promise<object>, endpoint: Comlink.Endpoint): void {
  void served.then((api) => Comlink.expose(api, endpoint));
}
