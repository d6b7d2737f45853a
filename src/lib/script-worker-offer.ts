/**
 * This tab's script workers, lent to the SharedWorker engine (which cannot start workers in
 * Chromium), on the browser-only side channel of worker/protocol/browser.ts: a second connection to
 * the SharedWorker, apart from the protocol's. The engine asks for a worker when a codemode script
 * needs one; the tab starts a dedicated Worker on the engine's script-worker entry and hands the
 * engine one end of a MessageChannel whose other end the worker serves, so the engine and the worker
 * talk directly and this tab's thread carries nothing. The tab only starts, terminates, and answers
 * the engine's ping.
 * Invariants: a worker is handed over only once it serves its port (it answered `connected`); a worker
 * that fails to load answers `start` with an error, and the engine then stops asking this tab. A spare
 * store worker (started by the tab's first script before the engine asks: engine-start.ts) is lent
 * with the hello, under a worker id of its own; one the engine never opens ends itself
 * (worker/entry/lent-store.ts, SPARE_STORE_MS).
 */
import type {
  ScriptWorkerHello,
  ScriptWorkerReply,
  ScriptWorkerRequest,
} from "../../worker/protocol/index.ts";

/** A spare store worker: started now, served over `port` once it runs (engine-start.ts lends it at once). */
export function spareStoreWorker(tabId: string): { worker: Worker; port: MessagePort } {
  const worker = new Worker(new URL("../../worker/entry/lent-store.ts", import.meta.url), {
    type: "module",
    name: "lent-store",
  });
  const channel = new MessageChannel();
  worker.postMessage({ type: "connect", port: channel.port2, spare: tabId }, [channel.port2]);
  return { worker, port: channel.port1 };
}

/** A script worker, or a lent store worker (the `opfs-lent` store kind's: worker/entry/lent-store.ts). */
async function startWorker(
  kind: "script" | "store" = "script",
): Promise<{ worker: Worker; port: MessagePort }> {
  const worker =
    kind === "store"
      ? new Worker(new URL("../../worker/entry/lent-store.ts", import.meta.url), {
          type: "module",
          name: "lent-store",
        })
      : new Worker(new URL("../../worker/entry/script-worker.ts", import.meta.url), {
          type: "module",
          name: "script-worker",
        });
  const channel = new MessageChannel();
  try {
    await new Promise<void>((resolve, reject) => {
      worker.addEventListener("message", (event: MessageEvent<{ type?: string }>) => {
        if (event.data?.type === "connected") resolve();
      });
      worker.addEventListener("error", (event) => {
        event.preventDefault();
        reject(new Error(`the script worker failed: ${event.message || "it could not start"}`));
      });
      worker.postMessage({ type: "connect", port: channel.port2 }, [channel.port2]);
    });
  } catch (error) {
    worker.terminate();
    throw error;
  }
  return { worker, port: channel.port1 };
}

export interface OfferOptions {
  /** The protocol this tab speaks (the engine refuses an offer of another). */
  readonly protocol: number;
  /**
   * A store worker started before the engine asked (the tab's first script: engine-start.ts), lent
   * with the hello itself: its port travels in the hello, so the engine opens its store without a
   * round trip through this tab's thread, which is busy loading the app meanwhile.
   */
  readonly spare?: { readonly worker: Worker; readonly port: MessagePort };
}

/** Serve the engine's requests for this tab's workers on `port` (the side channel's connection). */
export function offerScriptWorkers(port: MessagePort, tabId: string, options: OfferOptions): void {
  const workers = new Map<number, Worker>();
  let next = 0;
  const answer = (reply: ScriptWorkerReply, transfer: Transferable[] = []) =>
    port.postMessage(reply, transfer);
  port.addEventListener("message", (event: MessageEvent<ScriptWorkerRequest>) => {
    const request = event.data;
    if (request.op === "ping") answer({ id: request.id, ok: true });
    else if (request.op === "terminate") {
      workers.get(request.worker)?.terminate();
      workers.delete(request.worker);
      answer({ id: request.id, ok: true });
    } else if (request.op === "start" || request.op === "store")
      startWorker(request.op === "start" ? "script" : "store").then(
        ({ worker, port: workerPort }) => {
          const id = ++next;
          workers.set(id, worker);
          answer({ id: request.id, ok: true, worker: id }, [workerPort]);
        },
        (error: unknown) =>
          answer({
            id: request.id,
            ok: false,
            message: error instanceof Error ? error.message : String(error),
          }),
      );
  });
  port.start();
  const spare = options.spare;
  const spareId = spare ? ++next : undefined;
  if (spare && spareId !== undefined) workers.set(spareId, spare.worker);
  const hello: ScriptWorkerHello = {
    scriptWorkers: tabId,
    protocol: options.protocol,
    ...(spareId !== undefined ? { store: spareId } : {}),
  };
  port.postMessage(hello, spare ? [spare.port] : []);
}
