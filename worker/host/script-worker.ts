/**
 * The browser's script worker entry (a dedicated Worker started by the engine's worker): serves the
 * engine's codemode scripts over its message channel (worker/sandbox/script-worker.ts).
 */
import type { FromScriptWorker, ToScriptWorker } from "../sandbox/messages.ts";
import { serveScripts } from "../sandbox/script-worker.ts";

const scope = self as unknown as {
  postMessage(message: FromScriptWorker): void;
  addEventListener(type: "message", listener: (event: MessageEvent<ToScriptWorker>) => void): void;
};
serveScripts({
  post: (message) => scope.postMessage(message),
  listen: (listener) => scope.addEventListener("message", (event) => listener(event.data)),
});
