/**
 * How a tool task ends without a result of the tool's own: a harness-written error result (the call
 * could not run, was interrupted by a crash, or was aborted) committed with the task's terminal
 * state, in one commit. A nested call's error goes to its caller, a top-level one into the
 * transcript, in the slot the call held in `pi.live`.
 */
import type { NextTaskState } from "../../../core/types.ts";
import { DOC, type LiveState } from "../../records.ts";
import type { AgentServices } from "../../services.ts";
import type { ToolResult } from "../contract.ts";
import { slotDone, toolResultEntry } from "../results.ts";
import type { ToolTaskCheckpoint, ToolTaskRecord, ToolTaskResult, ToolTaskRuntime } from "./types.ts";

/** The output the call streamed before it stopped (durable in its pi.live slot), if any. */
export function partialOutput(services: AgentServices, task: ToolTaskRecord): string | undefined {
  const state = (services.core.docNow(task.conversationId, DOC.live) as LiveState | undefined) ?? {};
  return state.tools?.find((s) => s.taskId === task.id)?.output;
}

/** Commit a harness-written error result and end the task (completed unless told otherwise). */
export async function settleError(
  runtime: ToolTaskRuntime,
  task: ToolTaskRecord,
  callId: string,
  name: string,
  code: string,
  message: string,
  partial?: string,
  status: "completed" | "failed" | "aborted" = "completed",
): Promise<void> {
  await runtime.commit((tx) => {
    const c = task.conversationId;
    if ("nested" in task.input) {
      const result: ToolResult = {
        content: [{ type: "text", text: `${code}: ${message}` }],
        isError: true,
      };
      return terminal(status, { isError: true, result }, message);
    }
    const entry = toolResultEntry(tx, c, callId, name, message, code, partial);
    slotDone(tx, c, task.id, entry.id);
    return terminal(status, { entryId: entry.id, isError: true }, message);
  });
}

/** The terminal state of a tool task with `result`; `message` is the failure's or the abort's reason. */
export function terminal(
  status: "completed" | "failed" | "aborted",
  result: ToolTaskResult,
  message: string,
): NextTaskState<ToolTaskCheckpoint, ToolTaskResult> {
  if (status === "completed") return { status: "terminal", outcome: { status: "completed", result } };
  if (status === "failed")
    return { status: "terminal", outcome: { status: "failed", error: { message }, result } };
  return { status: "terminal", outcome: { status: "aborted", reason: message, result } };
}
