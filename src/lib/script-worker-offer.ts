/**
 * This tab's script workers, offered to the SharedWorker engine (which cannot start workers in
 * Chromium): the engine asks for one when a codemode script needs it; the tab starts a dedicated
 * Worker on the engine's script-worker entry and hands the engine one end of a MessageChannel whose
 * other end the worker serves, so the engine and the worker talk directly and this tab's thread
 * carries nothing. The tab only starts, terminates, and answers the engine's ping.
 * Invariant: a worker is handed over only once it serves its port (it answered `connected`); a worker
 * that fails to load rejects `start`, and the engine then stops asking this tab.
 */
import * as Comlink from "comlink";
import type { ScriptWorkerOffer } from "../../worker/protocol.ts";

export function scriptWorkerOffer(): ScriptWorkerOffer {
  const workers = new Map<number, Worker>();
  let next = 0;
  return {
    async start() {
      const worker = new Worker(new URL("../../worker/entry/script-worker.ts", import.meta.url), {
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
      const id = ++next;
      workers.set(id, worker);
      return Comlink.transfer({ id, port: channel.port1 }, [channel.port1]);
    },
    async terminate(id) {
      workers.get(id)?.terminate();
      workers.delete(id);
    },
    async ping() {
      return true;
    },
  };
}
