/**
 * The Node platform's script workers (worker_threads), for tests and benches: `useNodeScriptWorkers()`
 * makes every script run in a worker thread the engine can terminate (worker/sandbox/workers.ts), the
 * way a browser engine does with a dedicated Worker. A worker loads the sandbox's TypeScript source
 * through tsx (a dev dependency), registered inside the worker before its entry is imported.
 */
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import { Worker } from "node:worker_threads";
import type { FromScriptWorker } from "../sandbox/messages.ts";
import { type ScriptWorkerSpawner, setScriptWorkers } from "../sandbox/workers.ts";

/** CommonJS, as `eval` workers are: register tsx's ESM loader, then import the entry. */
const BOOT = `const { workerData } = require("node:worker_threads");
import(workerData.tsx).then((tsx) => { tsx.register(); return import(workerData.entry); });`;

export function nodeScriptWorkers(): ScriptWorkerSpawner {
  // `require.resolve` finds the CommonJS build; the worker imports its ES module twin.
  const tsx = pathToFileURL(
    createRequire(import.meta.url)
      .resolve("tsx/esm/api")
      .replace(/\.cjs$/, ".mjs"),
  ).href;
  const entry = new URL("./script-worker-entry.ts", import.meta.url).href;
  return () => {
    const worker = new Worker(BOOT, { eval: true, workerData: { tsx, entry } });
    return {
      post: (message) => worker.postMessage(message),
      listen(onMessage, onError) {
        worker.on("message", (message: FromScriptWorker) => onMessage(message));
        worker.on("error", onError);
        worker.on("exit", (code) => onError(new Error(`the script worker exited (code ${code})`)));
      },
      hold: (busy) => (busy ? worker.ref() : worker.unref()),
      terminate: () => void worker.terminate(),
    };
  };
}

/** Run every script in a Node worker thread from now on (undefined: back to the calling thread). */
export function useNodeScriptWorkers(options: { enabled: boolean } = { enabled: true }): void {
  setScriptWorkers(options.enabled ? nodeScriptWorkers() : undefined);
}
