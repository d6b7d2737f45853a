/**
 * Runs one script in the QuickJS sandbox: in a script worker the engine can terminate when the
 * platform installed them (workers.ts), else in the calling thread (in-thread.ts). Both keep the same
 * limits, errors and host contract (types.ts); only how long a runaway can hold the engine's thread
 * differs: never, in a worker; up to a slice plus one builtin call between two interrupt polls, in the
 * thread (see docs/ARCHITECTURE.md, "Extensions and code mode").
 */
import { runScriptInThread } from "./in-thread.ts";
import { DEFAULT_SANDBOX_LIMITS, type SandboxLimits, type ScriptHost, type ScriptRun } from "./types.ts";
import { runScriptInWorker, scriptWorkersInstalled } from "./workers.ts";

export {
  type CallAnswer,
  DEFAULT_SANDBOX_LIMITS,
  type SandboxLimits,
  type ScriptHost,
  type ScriptRun,
} from "./types.ts";

/** Run `code` (an async function's body) under `limits`. */
export function runScript(
  code: string,
  host: ScriptHost,
  limits: SandboxLimits = DEFAULT_SANDBOX_LIMITS,
): Promise<ScriptRun> {
  return scriptWorkersInstalled()
    ? runScriptInWorker(code, host, limits)
    : runScriptInThread(code, host, limits);
}
