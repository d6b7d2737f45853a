/**
 * The lent store worker's entry: a dedicated worker a tab starts for the SharedWorker engine on the
 * `opfs-lent` store kind (src/lib/script-worker-offer.ts, `op: "store"`). Its first message brings the
 * port the engine talks over; it answers `connected` once it serves the port, then opens the opfs
 * store there when the engine asks (worker/store/lent/server.ts, which checks every message). When the
 * engine's end closes, the store closes (a transaction in flight rolls back) and the worker ends, so
 * the file's handle is free for the next lender. Its wasm starts compiling as soon as it connects.
 * A spare (`spare: tabId`: the tab's first script started it before the engine asked, and lent it
 * with its hello: src/lib/engine-start.ts) compiles at once too, and ends itself when the engine sends
 * nothing within SPARE_STORE_MS; the engine uses a spare's port only well within that (PRELENT_MS).
 * Asking first whether another tab is open (and so lends the store) cost the first tab its head
 * start: the engine's open arrived before the lock query's answer, and the compile began only then
 * (about 30-50 ms later on the recovery bench); a spare in a second tab compiles for nothing instead
 * (one compile on a worker thread, freed when the spare ends).
 */
import { SPARE_STORE_MS } from "../protocol/browser.ts";
import { openBrowserStore, preloadBrowserStore, wasmMemoryBytes } from "../store/browser.ts";
import { serveLentStore } from "../store/lent/server.ts";
import type { LentOpenParts } from "../store/lent/wire.ts";

const scope = self as unknown as DedicatedWorkerGlobalScope;
const now = () => performance.timeOrigin + performance.now();
/** When this worker reached each step of the open (sent with its answer: the recovery bench's parts). */
const parts: { -readonly [K in keyof LentOpenParts]: LentOpenParts[K] } = { scriptAt: now() };
/** Compile the store's wasm (once: a second call finds it compiled), stamping when it is. */
const compile = () => {
  parts.compileAt ??= now();
  return preloadBrowserStore({ kind: "opfs" }).then(() => {
    parts.wasmAt ??= now();
  });
};

scope.addEventListener(
  "message",
  (event: MessageEvent<{ type?: unknown; port?: unknown; spare?: unknown }>) => {
    const { type, port, spare } = event.data ?? {};
    if (type !== "connect" || !(port instanceof MessagePort)) return;
    if (typeof spare === "string") {
      const unused = setTimeout(() => scope.close(), SPARE_STORE_MS);
      port.addEventListener("message", () => clearTimeout(unused), { once: true });
    }
    void compile();
    void serveLentStore(port, {
      open: async (name) => {
        parts.askedAt = now();
        await compile();
        const line = await openBrowserStore({
          kind: "opfs",
          name,
          stamp: (step) => {
            parts[`${step}At`] = now();
          },
        });
        parts.openedAt = now();
        return line;
      },
      memory: wasmMemoryBytes,
      parts: () => ({ ...parts }),
    }).then(() => scope.close());
    scope.postMessage({ type: "connected" });
  },
  { once: true },
);
