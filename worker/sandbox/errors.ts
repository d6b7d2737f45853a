/**
 * The sandbox's errors. Each limit has its own class (all `SandboxLimitError`s) so that a caller can
 * tell which bound stopped a script; `ScriptError` is the script's own uncaught throw, and
 * `ReplayDiverged` a rerun that does not match what the first run recorded. Messages are meant for
 * the model: they say what happened and which limit applied. `ScriptWorkerLost` is no error of the
 * script's: its worker went away, and the run is retried elsewhere (run.ts).
 */

export type SandboxLimit = "slice" | "cpu" | "memory" | "stack" | "output" | "calls" | "result";

export abstract class SandboxLimitError extends Error {
  abstract readonly limit: SandboxLimit;
}

/** One synchronous stretch of the script (between two awaits) ran longer than its time slice. */
export class CpuSliceExceeded extends SandboxLimitError {
  readonly limit = "slice" as const;
  constructor(readonly sliceMs: number) {
    super(`the script ran ${sliceMs} ms without yielding (its time slice); it was stopped`);
    this.name = "CpuSliceExceeded";
  }
}

/** The script's CPU time, over all its slices, passed the total budget. */
export class CpuTimeExceeded extends SandboxLimitError {
  readonly limit = "cpu" as const;
  constructor(readonly cpuMs: number) {
    super(`the script used more than ${cpuMs} ms of CPU time in total; it was stopped`);
    this.name = "CpuTimeExceeded";
  }
}

export class MemoryLimitExceeded extends SandboxLimitError {
  readonly limit = "memory" as const;
  constructor(readonly bytes: number) {
    super(`the script ran out of memory (limit ${Math.round(bytes / 1024 / 1024)} MiB)`);
    this.name = "MemoryLimitExceeded";
  }
}

export class StackLimitExceeded extends SandboxLimitError {
  readonly limit = "stack" as const;
  constructor(readonly bytes: number) {
    super(`the script's call stack overflowed (limit ${Math.round(bytes / 1024)} KiB): too deep a recursion`);
    this.name = "StackLimitExceeded";
  }
}

export class OutputLimitExceeded extends SandboxLimitError {
  readonly limit = "output" as const;
  constructor(readonly bytes: number) {
    super(`the script printed more than ${bytes} bytes of console output; it was stopped`);
    this.name = "OutputLimitExceeded";
  }
}

export class NestedCallLimitExceeded extends SandboxLimitError {
  readonly limit = "calls" as const;
  constructor(readonly calls: number) {
    super(`the script made more than ${calls} tool calls; it was stopped`);
    this.name = "NestedCallLimitExceeded";
  }
}

/**
 * The script's return value, as JSON, is larger than its bound: a tool's result is stored whole in
 * the transcript (its details), so a script may not hand back more than `resultBytes`.
 */
export class ResultLimitExceeded extends SandboxLimitError {
  readonly limit = "result" as const;
  constructor(
    readonly bytes: number,
    readonly returned: number,
  ) {
    super(
      `the script returned ${returned} bytes of JSON, more than its limit of ${bytes}; return less (a summary, or write the data to a file)`,
    );
    this.name = "ResultLimitExceeded";
  }
}

/** The script threw (or its promise rejected) and nothing caught it. */
export class ScriptError extends Error {
  constructor(
    message: string,
    readonly scriptStack?: string,
  ) {
    super(message);
    this.name = "ScriptError";
  }
}

/** A rerun after a crash took another path than the run it replays, or runs in another sandbox. */
export class ReplayDiverged extends Error {
  constructor(readonly difference: string) {
    super(`replay diverged: ${difference}`);
    this.name = "ReplayDiverged";
  }
}

/**
 * The script's worker went away under it for a reason of the platform's, not the script's: the tab
 * hosting it closed, or stopped answering. Never a limit: the script reruns elsewhere (run.ts).
 */
export class ScriptWorkerLost extends Error {
  constructor(readonly reason: string) {
    super(`the script's worker was lost: ${reason}`);
    this.name = "ScriptWorkerLost";
  }
}
