/**
 * The messages between the engine and a script worker, and how an error crosses them. The engine
 * sends a script and then the answers to its tool calls; the worker sends the calls, the console
 * output, its progress (for the engine's watchdog) and the outcome. Everything is structured-clone
 * safe (plain JSON). An error crosses as its class name and fields and is rebuilt on the engine's
 * side as the same sandbox error class, so callers tell the limits apart as before.
 */
import {
  CpuSliceExceeded,
  CpuTimeExceeded,
  MemoryLimitExceeded,
  NestedCallLimitExceeded,
  OutputLimitExceeded,
  ScriptError,
  StackLimitExceeded,
} from "./errors.ts";
import type { CallAnswer, SandboxLimits } from "./types.ts";

export type ToScriptWorker =
  | {
      readonly type: "run";
      readonly code: string;
      readonly start: number;
      readonly seed: number;
      readonly functions: readonly string[];
      readonly globals: Readonly<Record<string, unknown>>;
      readonly limits: SandboxLimits;
    }
  | { readonly type: "answer"; readonly index: number; readonly answer: CallAnswer };

export type FromScriptWorker =
  /** The interpreter is loaded and the prelude ran: the script's first stretch starts. */
  | { readonly type: "started" }
  /** A stretch ended (sent at most every quarter slice): the script is alive and yielding. */
  | { readonly type: "beat" }
  /** Nothing runs until an answer arrives; `answered` counts the answers received so far. */
  | { readonly type: "waiting"; readonly answered: number }
  | { readonly type: "call"; readonly name: string; readonly args: unknown; readonly index: number }
  | { readonly type: "print"; readonly text: string }
  | { readonly type: "done"; readonly value: unknown; readonly cpuMs: number; readonly calls: number }
  /** The run failed (the worker may run another script). */
  | { readonly type: "failed"; readonly error: EncodedError };

export interface EncodedError {
  readonly name: string;
  readonly message: string;
  /** The limit's value for a limit error; the script's stack for a ScriptError. */
  readonly detail?: number | string;
}

export function encodeError(error: unknown): EncodedError {
  if (!(error instanceof Error)) return { name: "Error", message: String(error) };
  const e = error as Error & Record<string, unknown>;
  const detail =
    error instanceof CpuSliceExceeded
      ? error.sliceMs
      : error instanceof CpuTimeExceeded
        ? error.cpuMs
        : error instanceof MemoryLimitExceeded ||
            error instanceof StackLimitExceeded ||
            error instanceof OutputLimitExceeded
          ? error.bytes
          : error instanceof NestedCallLimitExceeded
            ? error.calls
            : error instanceof ScriptError
              ? error.scriptStack
              : undefined;
  return { name: e.name, message: e.message, ...(detail === undefined ? {} : { detail }) };
}

/** The error an encoded one stands for: the sandbox's own classes are rebuilt, any other is an Error. */
export function decodeError(encoded: EncodedError): Error {
  const n = typeof encoded.detail === "number" ? encoded.detail : 0;
  switch (encoded.name) {
    case "CpuSliceExceeded":
      return new CpuSliceExceeded(n);
    case "CpuTimeExceeded":
      return new CpuTimeExceeded(n);
    case "MemoryLimitExceeded":
      return new MemoryLimitExceeded(n);
    case "StackLimitExceeded":
      return new StackLimitExceeded(n);
    case "OutputLimitExceeded":
      return new OutputLimitExceeded(n);
    case "NestedCallLimitExceeded":
      return new NestedCallLimitExceeded(n);
    case "ScriptError":
      return new ScriptError(
        encoded.message,
        typeof encoded.detail === "string" ? encoded.detail : undefined,
      );
    default: {
      const error = new Error(encoded.message);
      error.name = encoded.name;
      return error;
    }
  }
}
