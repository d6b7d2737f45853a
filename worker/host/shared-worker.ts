/**
 * The SharedWorker entry: one engine for every tab of this build, on the `idb` store kind
 * (IDBBatchAtomicVFS; JSPI where WebAssembly.Suspending exists, Asyncify otherwise).
 */
import * as Comlink from "comlink";
import { DEFAULT_STORE_NAME } from "../protocol.ts";
import { chooseIdbBuild, jspiAvailable, openBrowserStore } from "../store/browser.ts";
import { EngineHost } from "./engine.ts";
import { installBrowserScriptWorkers } from "./script-workers.ts";
import { TEST_ENDPOINTS_FLAG, withTestEndpoints } from "./test-endpoints.ts";

declare const __BUILD_ID__: string;
const params = new URLSearchParams((self as unknown as { name: string }).name);
const storeName = params.get("store") ?? DEFAULT_STORE_NAME;
const build = params.get("build") === "asyncify" ? "asyncify" : undefined;

const host = new EngineHost({
  storeName,
  storeKind: "idb",
  build: __BUILD_ID__,
  jspi: chooseIdbBuild(build) === "jspi" && jspiAvailable(),
  openStore: () => openBrowserStore({ kind: "idb", name: storeName, ...(build ? { build } : {}) }),
  openScratchStore: (name) => openBrowserStore({ kind: "idb", name, ...(build ? { build } : {}) }),
  deleteScratchStore: (name) =>
    new Promise<void>((resolve, reject) => {
      // One store, one IndexedDB database of the same name (see store/browser.ts).
      const request = indexedDB.deleteDatabase(name);
      request.onsuccess = () => resolve();
      request.onerror = () => reject(request.error);
    }),
});
// Codemode scripts off the engine's thread where this worker can start workers (see script-workers.ts).
installBrowserScriptWorkers();
void host.start();
const served = params.get(TEST_ENDPOINTS_FLAG) === "1" ? withTestEndpoints(host) : host;

(self as unknown as { onconnect: (e: MessageEvent) => void }).onconnect = (event) => {
  const port = event.ports[0];
  if (port) Comlink.expose(served, port);
};
