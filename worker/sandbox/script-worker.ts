/**
 * The script worker's side: runs the scripts the engine sends, one at a time, in this worker's thread
 * (runScriptInThread, the same sandbox and limits as in the engine's thread). A tool call becomes a
 * `call` message and waits for the engine's `answer` (the engine journals the result before it
 * answers); console output, progress and the outcome go back as messages (messages.ts). Nothing here
 * knows which kind of worker it runs in: the entry (browser or Node) hands it an endpoint.
 * Invariant: the engine may terminate this worker at any moment (its watchdog, an abort); nothing
 * here needs to be cleaned up when it does.
 */
import { runScriptInThread } from "./in-thread.ts";
import { encodeError, type FromScriptWorker, type ToScriptWorker } from "./messages.ts";
import type { CallAnswer, ScriptHost } from "./types.ts";

export interface ScriptWorkerEndpoint {
  post(message: FromScriptWorker): void;
  listen(listener: (message: ToScriptWorker) => void): void;
}

export function serveScripts(endpoint: ScriptWorkerEndpoint): void {
  const pending = new Map<number, (answer: CallAnswer) => void>();
  let answered = 0;
  endpoint.listen((message) => {
    if (message.type === "answer") {
      const settle = pending.get(message.index);
      pending.delete(message.index);
      answered++;
      settle?.(message.answer);
      return;
    }
    pending.clear();
    answered = 0;
    void run(message);
  });

  async function run(message: Extract<ToScriptWorker, { type: "run" }>): Promise<void> {
    let lastPost = performance.now();
    const post = (out: FromScriptWorker) => {
      lastPost = performance.now();
      endpoint.post(out);
    };
    const host: ScriptHost = {
      start: message.start,
      seed: message.seed,
      functions: message.functions,
      globals: message.globals,
      print: (text) => post({ type: "print", text }),
      call: (name, args, index) =>
        new Promise<CallAnswer>((resolve) => {
          pending.set(index, resolve);
          post({ type: "call", name, args, index });
        }),
    };
    try {
      const outcome = await runScriptInThread(message.code, host, message.limits, {
        started: () => post({ type: "started" }),
        stretched: () => {
          if (performance.now() - lastPost >= message.limits.sliceMs / 4) post({ type: "beat" });
        },
        waiting: () => post({ type: "waiting", answered }),
      });
      post({ type: "done", value: outcome.value, cpuMs: outcome.cpuMs, calls: outcome.calls });
    } catch (error) {
      post({ type: "failed", error: encodeError(error) });
    }
  }
}
