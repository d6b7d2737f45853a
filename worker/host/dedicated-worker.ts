/**
 * The dedicated-worker fallback (no SharedWorker, e.g. Chrome on Android): the tab that won the
 * store lock runs the same engine here on the `opfs` store kind (OPFSCoopSyncVFS).
 */
import * as Comlink from "comlink";
import { DEFAULT_STORE_NAME } from "../protocol.ts";
import { openBrowserStore } from "../store/browser.ts";
import { EngineHost } from "./engine.ts";

declare const __BUILD_ID__: string;
const storeName = new URLSearchParams((self as unknown as { name: string }).name).get("store") ?? DEFAULT_STORE_NAME;

const host = new EngineHost({
  storeName,
  storeKind: "opfs",
  build: __BUILD_ID__,
  jspi: false,
  openStore: () => openBrowserStore({ kind: "opfs", name: storeName }),
});
void host.start();
Comlink.expose(host);
