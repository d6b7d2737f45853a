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
import { type SlotPartial, slotDone, toolResultEntry } from "../results.ts";
import type { ToolTaskCheckpoint, ToolTaskRecord, ToolTaskResult, ToolTaskRuntime } from "./types.ts";

/**
 * What the call reported before it stopped (durable in its pi.live slot): its output, details and
 * diagnostics, each when it has some.
 */
export function partialOutput(services: AgentServices, task: ToolTaskRecord): SlotPartial {
  const state = (services.core.docNow(task.conversationId, DOC.live) as LiveState | undefined) ?? {};
  const slot = state.tools?.find((s) => s.taskId === task.id);
  return {
    ...(slot?.output !== undefined ? { output: slot.output } : {}),
    ...(slot?.details !== undefined ? { details: slot.details } : {}),
    ...(slot?.diagnostics !== undefined ? { diagnostics: slot.diagnostics } : {}),
  };
}

/** Commit a harness-written error result and end the task (completed unless told otherwise). */
export async function settleError(
  runtime: ToolTaskRuntime,
  task: ToolTaskRecord,
  callId: string,
  name: string,
  code: string,
  message: string,
  partial?: SlotPartial,
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
