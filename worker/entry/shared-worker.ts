/**
 * The SharedWorker entry: one engine for every tab of this build, on the `idb` store kind
 * (IDBBatchAtomicVFS; JSPI where WebAssembly.Suspending exists, Asyncify otherwise). It stays small:
 * the store's wasm starts compiling on its first line, and boot.ts opens the store while the rest of
 * the engine loads.
 */
import { opfsMarker } from "../browser/store-marker.ts";
import { DEFAULT_STORE_NAME } from "../protocol/api.ts";
import { chooseIdbBuild, jspiAvailable, openBrowserStore, preloadBrowserStore } from "../store/browser.ts";
import {
  acceptPort,
  approvalDefaultsOf,
  bootEngine,
  clockOffsetOf,
  EFFECTS_PARAM,
  TEST_ENDPOINTS_FLAG,
} from "./boot.ts";

declare const __BUILD_ID__: string;
const params = new URLSearchParams((self as unknown as { name: string }).name);
const storeName = params.get("store") ?? DEFAULT_STORE_NAME;
const build = params.get("build") === "asyncify" ? "asyncify" : undefined;
/**
 * `storeKind=opfs-lent` (a test or bench page's choice; the shipped kind is idb): the opfs store in a
 * dedicated worker a tab lends (worker/browser/store-lenders.ts).
 */
const lent = params.get("storeKind") === "opfs-lent";
const wasm = lent ? undefined : preloadBrowserStore({ kind: "idb", ...(build ? { build } : {}) });
const lenders = () => import("../browser/store-lenders.ts").then((m) => m.storeLenders);

/** What both store kinds share. The build id appears once in the bundle (a deploy test rewrites it as served). */
const common = { storeName, build: __BUILD_ID__ };

const served = bootEngine(
  lent
    ? {
        storeKind: "opfs-lent",
        ...common,
        jspi: false,
        marker: opfsMarker("opfs-lent", storeName),
        openStore: async () => (await lenders()).open(storeName),
        openScratchStore: async (name) => (await lenders()).open(name),
        deleteScratchStore: async (name) => {
          // The lent worker closed it; OPFS's asynchronous API removes the files from here.
          const dir = await (await navigator.storage.getDirectory()).getDirectoryHandle("stores");
          for (const file of [`${name}.db`, `${name}.db-journal`])
            await dir.removeEntry(file).catch(() => undefined);
        },
      }
    : {
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

  {
    testEndpoints: params.get(TEST_ENDPOINTS_FLAG) === "1",
    approvalDefaults: approvalDefaultsOf(params),
    ...(wasm ? { wasm } : {}),
    effects: params.get(EFFECTS_PARAM),
    clockOffsetMs: clockOffsetOf(params),
  },
);

(self as unknown as { onconnect: (e: MessageEvent) => void }).onconnect = (event) => {
  const port = event.ports[0];
  if (port) acceptPort(port, served);
};
