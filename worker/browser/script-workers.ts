/**
 * The browser platform's script workers: a dedicated Worker per script worker, started by the
 * engine's own worker, so codemode scripts run off the engine's thread (worker/sandbox/workers.ts).
 * Only where the engine's worker can start one: Chromium exposes no `Worker` in a SharedWorker
 * (measured with Chromium 156: `typeof Worker` is "undefined" there), so the SharedWorker engine
 * runs scripts in workers its tabs start and hand over (tab-script-workers.ts), and in its own thread
 * while no tab offers one; the dedicated-worker engine starts them itself.
 */
import { type ScriptWorkerSpawner, setScriptWorkers } from "../sandbox/workers.ts";
import { tabScriptWorkers } from "./tab-script-workers.ts";

/** The spawner, or undefined where this worker cannot start workers. */
export function browserScriptWorkers(): ScriptWorkerSpawner | undefined {
  if (typeof Worker !== "function") return undefined;
  return () => {
    const worker = new Worker(new URL("../entry/script-worker.ts", import.meta.url), {
      type: "module",
      name: "script-worker",
    });
    return {
      post: (message) => worker.postMessage(message),
      listen(onMessage, onError) {
        worker.addEventListener("message", (event) => onMessage(event.data));
        worker.addEventListener("error", (event) => {
          event.preventDefault();
          onError(new Error(`the script worker failed: ${event.message || "it could not start"}`));
        });
      },
      terminate: () => worker.terminate(),
    };
  };
}

/** Run scripts in script workers this worker starts, else in ones its tabs offer, else in its own thread. */
export function installBrowserScriptWorkers(): void {
  const own = browserScriptWorkers();
  if (own) setScriptWorkers(own);
  else setScriptWorkers(tabScriptWorkers.spawn, { available: tabScriptWorkers.available });
}
