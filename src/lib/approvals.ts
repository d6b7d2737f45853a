/**
 * How the chat words a tool call waiting for approval and the engine's answer to a decision. Pure
 * functions of protocol data (unit-tested in tests/unit/tab/approvals.test.ts).
 */
import type { ApprovalAnswer, ToolSlot } from "../../worker/protocol/index.ts";

/** The calls of a run that wait for a person's decision, in call order. */
export function waitingCalls(slots: readonly ToolSlot[] | undefined): ToolSlot[] {
  return (slots ?? []).filter((s) => s.status === "awaiting_approval" && s.approval && !s.approval.decision);
}

/** The engine's answer in words, or undefined when the decision was taken as sent. */
export function answerInWords(answer: ApprovalAnswer): string | undefined {
  if (answer.status === "decided") return undefined;
  if (answer.status === "not_waiting")
    return "This call no longer waits for a decision (it ended or was stopped).";
  const taken = answer.decision === "approve" ? "approved" : "denied";
  return `Already decided: someone ${taken} this call first (in another tab or window).`;
}
