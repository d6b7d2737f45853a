/**
 * A script worker in Node (worker_threads): serves the engine's scripts over the parent port. Started
 * by `nodeScriptWorkers` (script-workers.ts) with tsx registered, so it loads the sandbox's TypeScript
 * source directly.
 */
import { parentPort } from "node:worker_threads";
import type { ToScriptWorker } from "../sandbox/messages.ts";
import { serveScripts } from "../sandbox/script-worker.ts";

const port = parentPort;
if (!port) throw new Error("the script worker entry runs in a worker thread");
serveScripts({
  post: (message) => port.postMessage(message),
  listen: (listener) => port.on("message", (message: ToScriptWorker) => listener(message)),
});
