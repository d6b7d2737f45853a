/**
 * `pi.tool`: one tool call as a durable task. Its parts, one module each:
 * - `call.ts`: the `call` phase (resolve and validate the call, run `beforeTool`, apply the approval
 *   policy, commit the intent)
 *   and `intentAtCreation`, the intent the generation commits with the answer when no hook could
 *   change it (the task then starts in `execute`);
 * - `execute.ts`: the `execute` phase (run the intent, or recover it after a crash: replay a call
 *   that is `safe`, else record `interrupted`) and the execution (output, `afterTool`, the result);
 * - `approval.ts`: the `approval` phase (a call that asks first waits there for a person's decision);
 * - `tool-api.ts`: the `ToolApi` an execution gets, with nested calls as owned tasks keyed by position;
 * - `abort.ts`: the abort handler (`onAbort` hooks, the `aborted` result);
 * - `resolve.ts`, `settle.ts`, `types.ts`: finding the call and its tool, the harness-written error
 *   results, and the task's records.
 */
import { defineTask } from "../../../core/define.ts";
import { toolMoveIds } from "../../move-ids.ts";
import type { AgentServices } from "../../services.ts";
import { cleanUpFailedTool } from "../results.ts";
import { abortToolCall } from "./abort.ts";
import { approvalPhase } from "./approval.ts";
import { callPhase } from "./call.ts";
import { executePhase } from "./execute.ts";
import type {
  ToolTaskCheckpoint,
  ToolTaskContext,
  ToolTaskDefinition,
  ToolTaskInput,
  ToolTaskResult,
} from "./types.ts";

export function createToolTask(services: AgentServices): ToolTaskDefinition {
  const ctx: ToolTaskContext = { services, definition: () => definition };
  const definition: ToolTaskDefinition = defineTask<ToolTaskInput, ToolTaskCheckpoint, ToolTaskResult>({
    name: "pi.tool",
    cleanUp: cleanUpFailedTool,
    moveIds: toolMoveIds,
    version: 1,
    initial: () => ({ phase: "call" }),
    phases: {
      call: (task, runtime, signal) => callPhase(ctx, task, runtime, signal),
      approval: (task, runtime, signal) => approvalPhase(ctx, task, runtime, signal),
      // Two parameters: the signal is made only if the execution hands it on (runTool).
      execute: (task, runtime) => executePhase(ctx, task, runtime),
    },
    abort: (task, runtime) => abortToolCall(ctx, task, runtime),
  });
  return definition;
}
