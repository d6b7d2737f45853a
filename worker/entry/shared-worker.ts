/**
 * The SharedWorker entry: one engine for every tab of this build. Its store kind (decision 0015,
 * worker/browser/store-kind.ts): an existing store keeps its kind; a new one is `opfs-lent` (the opfs
 * store in a dedicated worker a tab lends, worker/browser/store-lenders.ts) where the browser has OPFS
 * sync access handles, `idb` (IDBBatchAtomicVFS; JSPI where WebAssembly.Suspending exists, Asyncify
 * otherwise) where it has not. A page may force a kind with `storeKind=idb|opfs-lent` (tests,
 * benches). It stays small: the store's wasm starts compiling early, and boot.ts opens the store
 * while the rest of the engine loads.
 */

import type { HostPlatform } from "../browser/platform.ts";
import {
  chooseStoreKind,
  choosingPlatform,
  readKindEvidence,
  requestedStoreKind,
} from "../browser/store-kind.ts";
import { opfsMarker } from "../browser/store-marker.ts";
import { DEFAULT_STORE_NAME } from "../protocol/api.ts";
import { chooseIdbBuild, jspiAvailable, openBrowserStore, preloadBrowserStore } from "../store/browser.ts";
import {
  acceptPort,
  approvalDefaultsOf,
  bootEngine,
  clockOffsetOf,
  EFFECTS_PARAM,
  loadSideChannel,
  TEST_ENDPOINTS_FLAG,
} from "./boot.ts";

declare const __BUILD_ID__: string;
const params = new URLSearchParams((self as unknown as { name: string }).name);
const storeName = params.get("store") ?? DEFAULT_STORE_NAME;
const build = params.get("build") === "asyncify" ? "asyncify" : undefined;
const requested = requestedStoreKind(params);
const lenders = () => import("../browser/store-lenders.ts").then((m) => m.storeLenders);

/** What both store kinds share. The build id appears once in the bundle (a deploy test rewrites it as served). */
const common = { storeName, build: __BUILD_ID__ };

const platforms: Record<"idb" | "opfs-lent", HostPlatform> = {
  "opfs-lent": {
    storeKind: "opfs-lent",
    ...common,
    jspi: false,
    marker: opfsMarker("opfs-lent", storeName),
    openStore: async (stamp) => (await lenders()).open(storeName, stamp),
    openScratchStore: async (name) => (await lenders()).open(name),
    deleteScratchStore: async (name) => {
      // The lent worker closed it; OPFS's asynchronous API removes the files from here.
      const dir = await (await navigator.storage.getDirectory()).getDirectoryHandle("stores");
      for (const file of [`${name}.db`, `${name}.db-journal`, `${name}.db-wal`])
        await dir.removeEntry(file).catch(() => undefined);
    },
  },
  idb: {
    storeKind: "idb",
    ...common,
    jspi: chooseIdbBuild(build) === "jspi" && jspiAvailable(),
    marker: opfsMarker("idb", storeName),
    openStore: () => openBrowserStore({ kind: "idb", name: storeName, ...(build ? { build } : {}) }),
    openScratchStore: (name) => openBrowserStore({ kind: "idb", name, ...(build ? { build } : {}) }),
    deleteScratchStore: (name) =>
      new Promise<void>((resolve, reject) => {
        // One store, one IndexedDB database of the same name (see store/browser.ts).
        const request = indexedDB.deleteDatabase(name);
        request.onsuccess = () => resolve();
        request.onerror = () => reject(request.error);
      }),
  },
};

// A tab's hello may lend the store's worker: its handler's modules load now (boot.ts).
void loadSideChannel().catch(() => undefined);

const preloadIdb = () => preloadBrowserStore({ kind: "idb", ...(build ? { build } : {}) });
/**
 * The opfs-lent store's code here (its wasm compiles in the lent worker), then a lender at hand (a
 * tab's hello lends one; at most LENDER_WAIT_MS): `false`, no wasm compiled. The engine's larger
 * modules wait for it, so the thread is free for the tab's hello (a message waits behind a module's
 * evaluation), and evaluate while the lent worker opens the store, when this thread has nothing else.
 */
const LENDER_WAIT_MS = 150;
const preloadLent = () =>
  lenders()
    .then((l) => l.lenderAtHand(LENDER_WAIT_MS))
    .then(
      () => false as const,
      () => false as const,
    );
/**
 * The store's code loads first, before the engine's larger modules take the thread: the idb wasm
 * compiles at once where idb is sure (forced) or likely (what the browser shows before the lock: the
 * choice itself is made again under it); for the opfs-lent kind, whose wasm compiles in the lent
 * worker, the lenders' module (with the lent store's client) loads instead. pi-ai waits for either
 * (boot.ts).
 */
const wasm: Promise<unknown> =
  requested === "idb"
    ? preloadIdb()
    : requested === "opfs-lent"
      ? preloadLent()
      : readKindEvidence(storeName).then<unknown, unknown>(
          (evidence) => (chooseStoreKind(evidence).kind === "idb" ? preloadIdb() : preloadLent()),
          () => false,
        );

const served = bootEngine(
  requested
    ? platforms[requested]
    : choosingPlatform({ platforms, decide: async () => chooseStoreKind(await readKindEvidence(storeName)) }),
  {
    testEndpoints: params.get(TEST_ENDPOINTS_FLAG) === "1",
    approvalDefaults: approvalDefaultsOf(params),
    wasm,
    effects: params.get(EFFECTS_PARAM),
    clockOffsetMs: clockOffsetOf(params),
  },
);

(self as unknown as { onconnect: (e: MessageEvent) => void }).onconnect = (event) => {
  const port = event.ports[0];
  if (port) acceptPort(port, served);
};
