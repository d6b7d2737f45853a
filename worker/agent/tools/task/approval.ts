/**
 * The `approval` phase: a call whose policy asks first (tools/approval.ts) waits here for a person.
 * `enterApproval` commits the wait: the checkpoint holds the final arguments and the replay policy,
 * and the call's pi.live slot says `awaiting_approval` with the arguments in words, in one commit.
 * The phase then waits, without committing, until the slot holds a decision (`decideApproval`,
 * committed by whoever decided): an approval commits the `execute` intent and runs the tool; a
 * denial ends the call with a `denied` error result carrying the person's reason.
 * Invariants: nothing of the call runs before an approval is committed; the wait is held by the
 * committed checkpoint, not by memory, so a reload, a crash or a handover finds it waiting again
 * (this phase has no effect, so running it again after an interruption is safe); an abort ends the
 * wait through the task's abort handler (`aborted`), and a decision that arrives after it is refused
 * (`not_waiting`).
 */
import type { Tx } from "../../../core/define.ts";
import type { Json, RunningTask } from "../../../core/types.ts";
import { DOC, type LiveState, type ToolSlot } from "../../records.ts";
import { atPhaseStart } from "../../services.ts";
import { argumentsInWords, deniedMessage } from "../approval.ts";
import type { ReplayPolicy } from "../contract.ts";
import { updateSlot } from "../results.ts";
import { runTool } from "./execute.ts";
import { readCall, resolveToolFor } from "./resolve.ts";
import { settleError } from "./settle.ts";
import type {
  ToolTaskCheckpoint,
  ToolTaskContext,
  ToolTaskInput,
  ToolTaskRecord,
  ToolTaskResult,
  ToolTaskRuntime,
} from "./types.ts";

type ApprovalCheckpoint = Extract<ToolTaskCheckpoint, { phase: "approval" }>;

/** The commit that makes a call wait for approval: the slot's words and the checkpoint, together. */
export function enterApproval(
  tx: Tx,
  task: ToolTaskRecord,
  args: unknown,
  replay: ReplayPolicy,
): { status: "running"; checkpoint: ApprovalCheckpoint } {
  updateSlot(tx, task.conversationId, task.id, (s) => ({
    ...s,
    status: "awaiting_approval",
    approval: { summary: argumentsInWords(args), since: tx.now() },
  }));
  return { status: "running", checkpoint: { phase: "approval", arguments: args as Json, replay } };
}

export async function approvalPhase(
  ctx: ToolTaskContext,
  task: RunningTask<ToolTaskInput, ApprovalCheckpoint, ToolTaskResult>,
  runtime: ToolTaskRuntime,
  signal: AbortSignal,
): Promise<void> {
  const { services } = ctx;
  const slot = (): ToolSlot | undefined =>
    (services.core.docNow<Json>(task.conversationId, DOC.live) as LiveState | undefined)?.tools?.find(
      (s) => s.taskId === task.id,
    );
  // Held until a decision is committed (or the invocation ends: abort, close, handover).
  await services.core.waitUntil(() => slot()?.approval?.decision !== undefined || !slot()?.approval, signal);
  const decision = slot()?.approval?.decision;
  // The tools are resolved now, after the wait, as at the start of any phase (spec §7.5).
  const phase = atPhaseStart(services, task.conversationId);
  const call = await readCall(services, task);
  if (!call) {
    await settleError(runtime, task, "?", "?", "tool_unavailable", "the tool call was not found");
    return;
  }
  if (!decision) {
    // Only if something rewrote pi.live under a waiting call: nobody decided, so it did not run.
    const message = "the approval request was lost before anyone decided; the call did not run";
    await settleError(runtime, task, call.id, call.name, "approval_lost", message);
    return;
  }
  if (decision.decision === "deny") {
    // The person's words are the result's text (the model reads them first); the code says `denied`.
    const words = { output: deniedMessage(call.name, decision.reason) };
    await settleError(runtime, task, call.id, call.name, "denied", "the person denied this call", words);
    return;
  }
  let tool: ReturnType<typeof resolveToolFor>;
  try {
    tool = resolveToolFor(phase.tools(), call.name);
  } catch {
    await settleError(
      runtime,
      task,
      call.id,
      call.name,
      "tool_unavailable",
      `tool ${call.name} is not available`,
    );
    return;
  }
  const { arguments: args, replay } = task.state.checkpoint;
  await runtime.commit((tx) => {
    updateSlot(tx, task.conversationId, task.id, (s) => ({ ...s, status: "running" }));
    return { status: "running", checkpoint: { phase: "execute", arguments: args, replay } };
  });
  await runTool(ctx, runtime, task, tool, call, args, phase);
}
