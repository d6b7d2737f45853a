/**
 * Runs one script in the QuickJS sandbox: in a script worker the engine can terminate when the
 * platform installed them and one can be had now (workers.ts), else in the calling thread
 * (in-thread.ts). Both keep the same limits, errors and host contract (types.ts); only how long a
 * runaway can hold the engine's thread differs: never, in a worker; up to a slice plus one builtin
 * call between two interrupt polls, in the thread (see docs/ARCHITECTURE.md, "Extensions and code
 * mode").
 * A worker can be lost under its script (`ScriptWorkerLost`: the tab hosting it closed or stopped
 * answering). The script then reruns from its start in another worker, or in the calling thread when
 * none can be had, with the same clock and seed: each call it makes again gets the first run's answer
 * (the promise the host gave, which settles with the journaled result; the host is not asked twice),
 * and the console output the first run already streamed is not streamed again. A rerun that calls
 * something else goes to the host, which reports the divergence. Invariant: a lost worker never
 * fails the call, and never doubles a nested call or a line of output.
 */
import { ScriptWorkerLost } from "./errors.ts";
import { runScriptInThread } from "./in-thread.ts";
import {
  type CallAnswer,
  DEFAULT_SANDBOX_LIMITS,
  type SandboxLimits,
  type ScriptHost,
  type ScriptRun,
} from "./types.ts";
import { runScriptInWorker, scriptWorkersAvailable } from "./workers.ts";

export {
  type CallAnswer,
  DEFAULT_SANDBOX_LIMITS,
  type SandboxLimits,
  type ScriptHost,
  type ScriptRun,
} from "./types.ts";

/** Workers lost under one script before it runs in the calling thread instead. */
const MAX_LOST_WORKERS = 3;

/** Run `code` (an async function's body) under `limits`. */
export async function runScript(
  code: string,
  host: ScriptHost,
  limits: SandboxLimits = DEFAULT_SANDBOX_LIMITS,
): Promise<ScriptRun> {
  if (!scriptWorkersAvailable()) return runScriptInThread(code, host, limits);
  const rerunnable = rerunnableHost(host);
  for (let lost = 0; ; ) {
    try {
      return await runScriptInWorker(code, rerunnable.host, limits);
    } catch (error) {
      if (!(error instanceof ScriptWorkerLost)) throw error;
      lost++;
      rerunnable.rerun();
      if (lost >= MAX_LOST_WORKERS || !scriptWorkersAvailable())
        return runScriptInThread(code, rerunnable.host, limits);
    }
  }
}

/** `host` for a script that may run again from its start: calls and output are given once. */
function rerunnableHost(host: ScriptHost): { host: ScriptHost; rerun(): void } {
  const calls = new Map<number, { name: string; args: string; answer: Promise<CallAnswer> }>();
  /** Output characters streamed so far, and how many of them the current run has printed again. */
  let streamed = 0;
  let printed = 0;
  return {
    host: {
      ...host,
      call(name, args, index) {
        const made = calls.get(index);
        const json = JSON.stringify(args) ?? "undefined";
        if (made && made.name === name && made.args === json) return made.answer;
        const answer = host.call(name, args, index);
        if (!made) calls.set(index, { name, args: json, answer });
        return answer;
      },
      print(text) {
        printed += text.length;
        if (printed <= streamed) return;
        host.print(text.slice(text.length - (printed - streamed)));
        streamed = printed;
      },
    },
    rerun() {
      printed = 0;
    },
  };
}
