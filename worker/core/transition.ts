/**
 * Applying a task's next state, as its own commit decided it: `running` moves the checkpoint,
 * `waiting` is checked for cycles and bad targets (and a timer's due time, timers.ts), `terminal` finishes the task (or holds it
 * `completing` while owned work lives). Shared by runtime commits and by wake continuations that the
 * scheduler runs inside the commit that satisfied a wait.
 */
import { InvalidTransition } from "./errors.ts";
import { finish, validateWait } from "./ownership.ts";
import { sealBuilt } from "./persist.ts";
import { type Overlay, patchTask } from "./records.ts";
import { validateUntil } from "./timers.ts";
import type { NextTaskState, RunningTask, TaskOutcome, TaskRecord } from "./types.ts";

export function applyNextState(
  overlay: Overlay,
  current: RunningTask,
  next: NextTaskState,
  mode: "run" | "abort",
  now: number,
): { record: TaskRecord; progressed: boolean } {
  switch (next.status) {
    case "running": {
      const record = patchTask(current, {
        state: sealBuilt({ status: "running", checkpoint: next.checkpoint }),
      });
      overlay.setTask(record);
      return { record, progressed: true };
    }
    case "waiting": {
      if (mode === "abort") throw new InvalidTransition("an abort handler may not wait");
      validateWait(overlay, current, next.on, next.policy);
      validateUntil(next.until);
      const record = patchTask(current, {
        state: sealBuilt({
          status: "waiting",
          checkpoint: next.checkpoint,
          on: sealBuilt([...next.on]),
          policy: next.policy,
          ...(next.until !== undefined ? { until: next.until } : {}),
        }),
      });
      overlay.setTask(record);
      return { record, progressed: false };
    }
    case "terminal":
      return { record: finish(overlay, current, validOutcome(next.outcome), now), progressed: false };
    default:
      throw new InvalidTransition(`a task may not commit status ${(next as { status: string }).status}`);
  }
}

function validOutcome(outcome: TaskOutcome): TaskOutcome {
  const kinds = ["completed", "failed", "aborted", "orphaned", "faulted"];
  if (!outcome || !kinds.includes(outcome.status)) {
    throw new InvalidTransition(
      `unknown outcome ${JSON.stringify((outcome as { status?: unknown })?.status)}`,
    );
  }
  return outcome;
}
