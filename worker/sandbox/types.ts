/**
 * What a script run is given and gives back, shared by the two ways a script runs (in the engine's
 * thread, or in a script worker the engine can terminate): its limits, its host (the tools it may
 * call, its console, its clock start and seed) and its outcome. Values cross only as JSON.
 */

export interface SandboxLimits {
  /** Longest synchronous stretch (ms) before the script is stopped. */
  readonly sliceMs: number;
  /** Total CPU time (ms) over all stretches. */
  readonly cpuMs: number;
  readonly memoryBytes: number;
  readonly stackBytes: number;
  /** Console output, in UTF-8 bytes. */
  readonly outputBytes: number;
  /** Tool calls the script may make. */
  readonly calls: number;
  /** The returned value's JSON, in UTF-8 bytes (DEFAULT_RESULT_BYTES when absent). */
  readonly resultBytes?: number;
}

/** A script's result is stored whole in the transcript: at most 1 MiB of JSON by default. */
export const DEFAULT_RESULT_BYTES = 1024 * 1024;

export const DEFAULT_SANDBOX_LIMITS: SandboxLimits = {
  sliceMs: 200,
  cpuMs: 10_000,
  memoryBytes: 64 * 1024 * 1024,
  stackBytes: 512 * 1024,
  outputBytes: 256 * 1024,
  calls: 1000,
  resultBytes: DEFAULT_RESULT_BYTES,
};

/** What a tool call gives the script: a value, or an error it throws at the `await`. */
export type CallAnswer = { isError: false; value: unknown } | { isError: true; text: string };

export interface ScriptHost {
  /** The virtual clock's start (ms since the epoch). */
  readonly start: number;
  readonly seed: number;
  /** The tools the script may call, by name. */
  readonly functions: readonly string[];
  /** Read-only JSON values the script sees as globals (a name already taken is skipped). */
  readonly globals?: Readonly<Record<string, unknown>>;
  /** Call a tool; `index` counts the script's calls from 0. A rejection stops the script with it. */
  call(name: string, args: unknown, index: number): Promise<CallAnswer>;
  print(text: string): void;
  readonly signal?: AbortSignal;
}

export interface ScriptRun {
  /** The script's return value as JSON (undefined when it returned nothing). */
  readonly value: unknown;
  /** CPU time spent inside QuickJS (ms). */
  readonly cpuMs: number;
  readonly calls: number;
}
