/**
 * The dedicated-worker fallback (no SharedWorker, e.g. Chrome on Android): the tab that won the
 * store lock runs the same engine here on the `opfs` store kind (OPFSCoopSyncVFS). Like the
 * SharedWorker entry it stays small and lets boot.ts open the store while the rest loads; the tab's
 * messages that arrive meanwhile are kept (a worker's own messages are dropped when nobody listens).
 */
import type { Endpoint } from "comlink";
import { DEFAULT_STORE_NAME } from "../protocol.ts";
import { openBrowserStore, preloadBrowserStore } from "../store/browser.ts";
import { bootEngine, serveWhenReady, TEST_ENDPOINTS_FLAG } from "./boot.ts";

declare const __BUILD_ID__: string;
const params = new URLSearchParams((self as unknown as { name: string }).name);
const storeName = params.get("store") ?? DEFAULT_STORE_NAME;
const wasm = preloadBrowserStore({ kind: "opfs" });

/** `self` as an endpoint that holds the messages it gets until its listener is added. */
function heldSelf(): Endpoint {
  const held: MessageEvent[] = [];
  let listener: ((event: MessageEvent) => void) | undefined;
  self.addEventListener("message", (event) => (listener ? listener(event) : held.push(event)));
  return {
    postMessage: (message: unknown, transfer?: Transferable[]) => self.postMessage(message, transfer ?? []),
    addEventListener: (_type: string, l: EventListenerOrEventListenerObject) => {
      listener = typeof l === "function" ? l : (event) => l.handleEvent(event);
      for (const event of held.splice(0)) listener(event);
    },
    removeEventListener: () => {
      listener = undefined;
    },
  };
}
const endpoint = heldSelf();

const served = bootEngine(
  {
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
  },
  { testEndpoints: params.get(TEST_ENDPOINTS_FLAG) === "1", wasm },
);
serveWhenReady(served, endpoint);
