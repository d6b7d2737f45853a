/**
 * The lent store worker's entry: a dedicated worker a tab starts for the SharedWorker engine on the
 * `opfs-lent` store kind (src/lib/script-worker-offer.ts, `op: "store"`). Its first message brings the
 * port the engine talks over; it answers `connected` once it serves the port, then opens the opfs
 * store there when the engine asks (worker/store/lent.ts, which checks every message). When the
 * engine's end closes, the store closes (a transaction in flight rolls back) and the worker ends, so
 * the file's handle is free for the next lender.
 */
import { openBrowserStore, wasmMemoryBytes } from "../store/browser.ts";
import { serveLentStore } from "../store/lent.ts";

const scope = self as unknown as DedicatedWorkerGlobalScope;

scope.addEventListener(
  "message",
  (event: MessageEvent<{ type?: unknown; port?: unknown }>) => {
    const { type, port } = event.data ?? {};
    if (type !== "connect" || !(port instanceof MessagePort)) return;
    void serveLentStore(port, {
      open: (name) => openBrowserStore({ kind: "opfs", name }),
      memory: wasmMemoryBytes,
    }).then(() => scope.close());
    scope.postMessage({ type: "connected" });
  },
  { once: true },
);
