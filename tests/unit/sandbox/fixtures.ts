/**
 * What the script-worker tests share: the sandbox limits their scripts run under. The slice is short
 * (50 ms) so that a runaway is stopped quickly, the CPU budget long (5 s) so that a script waiting on
 * slow tool calls is never stopped by it; memory, stack, output and calls are small but not in the way.
 */
import type { SandboxLimits } from "../../../worker/sandbox/types.ts";

export const WORKER_TEST_LIMITS: SandboxLimits = {
  sliceMs: 50,
  cpuMs: 5_000,
  memoryBytes: 16 * 1024 * 1024,
  stackBytes: 256 * 1024,
  outputBytes: 64 * 1024,
  calls: 100,
};
