/**
 * The dedicated-worker fallback (no SharedWorker, e.g. Chrome on Android): the tab that won the
 * store lock runs the same engine here on the `opfs` store kind (OPFSCoopSyncVFS). Like the
 * SharedWorker entry it stays small and lets boot.ts open the store while the rest loads; the tab's
 * messages that arrive meanwhile are kept (the protocol's port transport listens from the first line:
 * a worker's own messages are dropped when nobody listens). One connection: its own tab's.
 */
import { opfsMarker } from "../browser/store-marker.ts";
import { DEFAULT_STORE_NAME } from "../protocol/api.ts";
import { openBrowserStore, preloadBrowserStore } from "../store/browser.ts";
import {
  approvalDefaultsOf,
  bootEngine,
  clockOffsetOf,
  EFFECTS_PARAM,
  serveWhenReady,
  TEST_ENDPOINTS_FLAG,
} from "./boot.ts";

declare const __BUILD_ID__: string;
const params = new URLSearchParams((self as unknown as { name: string }).name);
const storeName = params.get("store") ?? DEFAULT_STORE_NAME;
const wasm = preloadBrowserStore({ kind: "opfs" });

const served = bootEngine(
  {
    storeName,
    storeKind: "opfs",
    build: __BUILD_ID__,
    jspi: false,
    marker: opfsMarker("opfs", storeName),
    openStore: () => openBrowserStore({ kind: "opfs", name: storeName }),
    openScratchStore: (name) => openBrowserStore({ kind: "opfs", name }),
    deleteScratchStore: async (name) => {
      // The opfs kind keeps a store as stores/<name>.db (plus its log and journal) in the origin's OPFS.
      const root = await navigator.storage.getDirectory();
      const dir = await root.getDirectoryHandle("stores").catch(() => undefined);
      if (!dir) return;
      const names: string[] = [];
      for await (const key of (dir as unknown as { keys(): AsyncIterable<string> }).keys()) {
        if (key.startsWith(`${name}.db`)) names.push(key);
      }
      for (const key of names) await dir.removeEntry(key).catch(() => undefined);
    },
  },
  {
    testEndpoints: params.get(TEST_ENDPOINTS_FLAG) === "1",
    approvalDefaults: approvalDefaultsOf(params),
    wasm,
    effects: params.get(EFFECTS_PARAM),
    clockOffsetMs: clockOffsetOf(params),
  },
);
serveWhenReady(served, self);
