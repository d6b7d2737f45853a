/**
 * The engine's first line, shared by both worker entries: take the store's lock and open the store at
 * once, and load the rest of the engine meanwhile. Recovery after a reload waits for the store, not
 * for the engine's code: the wasm compiles and the lock is taken while the API module (app/engine-host.ts
 * and the agent under it) and pi-ai are fetched and evaluated. Invariants:
 * - this module's static imports are the owner and the store only (import-direction.test.ts lists
 *   app/engine-host.ts and app/app-agent.ts among the entries: pi-ai stays out of them too);
 * - a connection is served once the API module and the protocol's door are here; what a tab sends
 *   before waits in its transport (portTransport holds it);
 * - a port's first message says what it is: a tab's script-worker side channel
 *   (`{ scriptWorkers: tabId }`, browser-only: worker/protocol/browser.ts) or the tab protocol's hello
 *   (worker/protocol/door.ts checks it and everything after it);
 * - the harness is opened by the owner (lock held, store fenced), exactly as before.
 */
import { loadPiAi } from "../agent/models/pi-ai.ts";
import { StoreOwner } from "../browser/owner.ts";
import type { HostPlatform } from "../browser/platform.ts";
import type { TabOffer } from "../browser/tab-script-workers.ts";
import { PROTOCOL_VERSION } from "../protocol/api.ts";
import { isScriptWorkerHello } from "../protocol/browser.ts";
import { type EngineMessage, type PortLike, portTransport, type Transport } from "../protocol/wire.ts";

/** The query flag (page URL and worker name) that asks for the test endpoints (debug/endpoints.ts). */
export const TEST_ENDPOINTS_FLAG = "debug";
/**
 * The query parameter (worker name) naming a path on the page's origin where the effect tools
 * (debug/effects.ts) post; honoured only with the test endpoints.
 */
export const EFFECTS_PARAM = "effects";
/** The query flag with which a test page keeps the product's tool approval defaults. */
export const APPROVAL_FLAG = "approval";

/**
 * The query parameter with which a test page moves its engine's clock (ms, may be negative): the
 * harness's `now` runs that far ahead, so an e2e test can start the app "hours later" (schedules'
 * catch-up) without waiting. Honoured only with the test endpoints.
 */
export const CLOCK_OFFSET_PARAM = "clockOffset";

/** A test page's clock offset (0 on any other page, or when it is not a whole number). */
export function clockOffsetOf(params: URLSearchParams): number {
  if (params.get(TEST_ENDPOINTS_FLAG) !== "1") return 0;
  const offset = Number(params.get(CLOCK_OFFSET_PARAM) ?? 0);
  return Number.isSafeInteger(offset) ? offset : 0;
}

/** Test pages run every tool freely unless they ask for approval (`approval=1`); other pages never. */
export function approvalDefaultsOf(params: URLSearchParams): "ask" | "allow" {
  return params.get(TEST_ENDPOINTS_FLAG) === "1" && params.get(APPROVAL_FLAG) !== "1" ? "allow" : "ask";
}

export interface BootOptions {
  /** Serve the test endpoints too (the page asked with `?debug=1`). */
  testEndpoints: boolean;
  /**
   * Tool approval's defaults: the product's, unless a test page did not ask for them (`approval=1`):
   * then every tool runs freely unless a stored policy says otherwise (app/tool-policies.ts).
   */
  approvalDefaults?: "ask" | "allow";
  /**
   * The store's wasm compile the entry started (`preloadBrowserStore`): its end goes in the timeline.
   * `false`: none was started after all (the store kind chosen keeps its wasm in the lent worker; the
   * entry resolves it once that kind's own code here has loaded). pi-ai loads after it either way.
   */
  wasm?: Promise<unknown>;
  /** With `testEndpoints`: install the effect tools, posting to this path on the worker's origin. */
  effects?: string | null;
  /** With `testEndpoints`: run the engine's clock this many ms ahead (`clockOffsetOf`). */
  clockOffsetMs?: number;
}

/** A started engine, as its entry serves it. */
export interface ServedEngine {
  /** Serve the tab protocol on one connection (the door checks every message). */
  serve(transport: Transport<EngineMessage>): void;
  /** Take a tab's script-worker side channel (browser-only, apart from the protocol). */
  lendScriptWorkers(tabId: string, offer: TabOffer): void;
}

/** Start the engine; resolves with what its connections serve. */
export function bootEngine(platform: HostPlatform, options: BootOptions): Promise<ServedEngine> {
  const owner = new StoreOwner(platform);
  void options.wasm?.then((compiled) => {
    if (compiled !== false) owner.timeline.wasmAt = Date.now();
  });
  // The engine's larger modules wait for the store's own code (the idb wasm, or the lent store's client
  // and a lender at hand): their evaluation would take the thread the store's open needs.
  const storeCodeHere = (options.wasm ?? Promise.resolve()).then(
    () => undefined,
    () => undefined,
  );
  // pi-ai is a chunk of its own (agent/models/pi-ai.ts): fetched and evaluated while the store opens,
  // but only once the store's wasm has compiled (its catalogue's evaluation would take the thread the
  // compile needs; the store's open is mostly waiting on IndexedDB). The harness open awaits it
  // before any task can start, after its read (a failure surfaces there, where the load is tried again).
  void storeCodeHere
    .then(() => loadPiAi())
    .then(
      () => {
        owner.timeline.piAiAt = Date.now();
      },
      () => undefined,
    );
  // The modules the harness's open needs, fetched together rather than one after another, and while
  // the store opens (after its wasm, as pi-ai): the open waits for them only if they are not here yet.
  const harnessModules = storeCodeHere.then(() =>
    Promise.all([
      import("../browser/script-workers.ts"),
      // Test pages' engines also run the test tasks (a store a test page used reopens in a test page).
      options.testEndpoints ? import("../debug/ticker.ts") : undefined,
      options.testEndpoints && options.effects ? import("../debug/effects.ts") : undefined,
      import("../app/app-agent.ts"),
    ] as const),
  );
  // A failed fetch surfaces in the open, which awaits it.
  harnessModules.catch(() => undefined);
  const ready = owner.open(async (store, onFatal) => {
    const [scriptWorkers, ticker, effects, appAgent] = await harnessModules;
    owner.timeline.modulesAt = Date.now();
    // Codemode scripts off the engine's thread where this worker can start workers (script-workers.ts).
    scriptWorkers.installBrowserScriptWorkers();
    const tasks = ticker?.debugTasks ?? [];
    const extensions =
      effects && options.effects ? [effects.effectToolsAt(options.effects, self.location.origin)] : [];
    return appAgent.openAppHarness(store, {
      onFatal,
      tasks,
      extensions,
      approval: { defaults: options.approvalDefaults ?? "ask" },
      ...(options.testEndpoints && options.clockOffsetMs
        ? { now: () => Date.now() + (options.clockOffsetMs ?? 0) }
        : {}),
    });
  });
  // The owner reported a failure as the engine's status; every call then rejects with it.
  ready.catch(() => undefined);
  // The engine's API (the host, the door) loads after the store's own code too: the tabs' calls wait
  // for the store anyway.
  return storeCodeHere
    .then(() => Promise.all([import("../app/engine-host.ts"), import("../protocol/door.ts")]))
    .then(async ([{ EngineHost }, { serveConnection }]) => {
      owner.timeline.apiAt = Date.now();
      const host = new EngineHost(platform, { owner, ready });
      const engine = options.testEndpoints
        ? (await import("../debug/endpoints.ts")).withTestEndpoints(host)
        : host;
      return {
        serve: (transport) => void serveConnection({ transport, engine }),
        lendScriptWorkers: (tabId, offer) => host.offerScriptWorkers(tabId, offer),
      };
    });
}

/** Serve the protocol on `port` (a dedicated worker's own scope, say) once the engine is here. */
export function serveWhenReady(served: Promise<ServedEngine>, port: PortLike): void {
  const transport = portTransport<EngineMessage>(port);
  void served.then((engine) => engine.serve(transport));
}

/** The modules a tab's side channel needs. */
type SideChannel = readonly [
  typeof import("../browser/script-worker-channel.ts"),
  typeof import("../browser/store-lenders.ts"),
];
let sideChannel: Promise<SideChannel> | undefined;

/**
 * The two small modules a tab's side channel needs (its script workers, the store's lenders), loaded
 * once. The SharedWorker entry starts the load on its first line, so a tab's hello (which may lend the
 * store's worker) finds them here rather than waiting for their fetch: measured, the lender was at
 * hand 60 ms after the store's lock (median of 5, quiet machine) with the load started by the hello,
 * 9-41 ms with it started on the first line.
 */
export function loadSideChannel(): Promise<SideChannel> {
  sideChannel ??= Promise.all([
    import("../browser/script-worker-channel.ts"),
    import("../browser/store-lenders.ts"),
  ] as const);
  // A failed fetch is tried again by the next hello.
  sideChannel.catch(() => {
    sideChannel = undefined;
  });
  return sideChannel;
}

/**
 * A SharedWorker's new connection: its first message says whether it is a tab's script-worker side
 * channel or the tab protocol; the protocol's transport starts listening at once (nothing is lost
 * while the engine loads).
 */
export function acceptPort(port: MessagePort, served: Promise<ServedEngine>): void {
  const first = (event: MessageEvent) => {
    port.removeEventListener("message", first);
    if (isScriptWorkerHello(event.data)) {
      const { scriptWorkers: tabId, protocol, store } = event.data;
      const spare = event.ports[0];
      // A tab of another version lends nothing.
      if (protocol !== PROTOCOL_VERSION) return;
      const prelent = store !== undefined && spare ? { id: store, port: spare, at: Date.now() } : undefined;
      // The store's lender is at hand as soon as these two small modules are (the store may be opening
      // already, waiting for one); the script workers and the tab's lock watch once the engine is here.
      void loadSideChannel().then(([{ tabOfferOver }, { storeLenders }]) => {
        const offer = tabOfferOver(port, prelent);
        storeLenders.offer(tabId, offer);
        void served.then((engine) => engine.lendScriptWorkers(tabId, offer));
      });
      return;
    }
    const transport = portTransport<EngineMessage>(port, [event.data]);
    void served.then((engine) => engine.serve(transport));
  };
  port.addEventListener("message", first);
  port.start();
}
