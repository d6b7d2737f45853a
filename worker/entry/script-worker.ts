/**
 * The browser's script worker entry: serves the engine's codemode scripts
 * (worker/sandbox/script-worker.ts). Two ways in, told apart by the first message:
 * - started by the engine's own worker (the dedicated-worker engine): scripts come over `self`;
 * - started by a tab for the SharedWorker engine (src/lib/script-worker-offer.ts): the first message
 *   brings the port the engine talks over, and the worker answers `connected` on `self` once it serves
 *   it (the tab hands the engine its end only then).
 */
import type { FromScriptWorker, ToScriptWorker } from "../sandbox/messages.ts";
import { serveScripts } from "../sandbox/script-worker.ts";

/** What a tab sends first, and what the worker answers. */
type Connect = { readonly type: "connect"; readonly port: MessagePort };

const scope = self as unknown as {
  postMessage(message: FromScriptWorker | { type: "connected" }): void;
  addEventListener(type: "message", listener: (event: MessageEvent<ToScriptWorker | Connect>) => void): void;
  removeEventListener(
    type: "message",
    listener: (event: MessageEvent<ToScriptWorker | Connect>) => void,
  ): void;
};

const first = (event: MessageEvent<ToScriptWorker | Connect>) => {
  scope.removeEventListener("message", first);
  const message = event.data;
  if (message.type === "connect") {
    const port = message.port;
    serveScripts({
      post: (out) => port.postMessage(out),
      listen(listener) {
        port.addEventListener("message", (e: MessageEvent<ToScriptWorker>) => listener(e.data));
        port.start();
      },
    });
    scope.postMessage({ type: "connected" });
    return;
  }
  serveScripts({
    post: (out) => scope.postMessage(out),
    listen(listener) {
      listener(message);
      scope.addEventListener("message", (e) => listener(e.data as ToScriptWorker));
    },
  });
};
scope.addEventListener("message", first);
