/**
 * The dedicated-worker fallback (no SharedWorker, e.g. Chrome on Android): the tab that won the
 * store lock runs the same engine here on the `opfs` store kind (OPFSCoopSyncVFS).
 */
import * as Comlink from "comlink";
import { DEFAULT_STORE_NAME } from "../protocol.ts";
import { openBrowserStore } from "../store/browser.ts";
import { EngineHost } from "./engine.ts";
import { installBrowserScriptWorkers } from "./script-workers.ts";
import { TEST_ENDPOINTS_FLAG, withTestEndpoints } from "./test-endpoints.ts";

declare const __BUILD_ID__: string;
const params = new URLSearchParams((self as unknown as { name: string }).name);
const storeName = params.get("store") ?? DEFAULT_STORE_NAME;

const host = new EngineHost({
  storeName,
  storeKind: "opfs",
  build: __BUILD_ID__,
  jspi: false,
  openStore: () => openBrowserStore({ kind: "opfs", name: storeName }),
  openScratchStore: (name) => openBrowserStore({ kind: "opfs", name }),
  deleteScratchStore: async (name) => {
    // The opfs kind keeps a store as stores/<name>.db (plus its journal) in the origin's OPFS.
    const root = await navigator.storage.getDirectory();
    const dir = await root.getDirectoryHandle("stores").catch(() => undefined);
    if (!dir) return;
    const names: string[] = [];
    for await (const key of (dir as unknown as { keys(): AsyncIterable<string> }).keys()) {
      if (key.startsWith(`${name}.db`)) names.push(key);
    }
    for (const key of names) await dir.removeEntry(key).catch(() => undefined);
  },
});
// Codemode scripts off the engine's thread where this worker can start workers (see script-workers.ts).
installBrowserScriptWorkers();
void host.start();
Comlink.expose(params.get(TEST_ENDPOINTS_FLAG) === "1" ? withTestEndpoints(host) : host);
