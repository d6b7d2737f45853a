/**
 * The approval desk of one conversation view: sends a person's decision on a waiting tool call
 * (`approvals.decide`) once per click, under a request id of its own, so a resent call is answered
 * the same; keeps the optional denial reason per call and what the engine answered, in words.
 */

import { errorMessage } from "../../worker/protocol/index.ts";
import { answerInWords } from "./approvals.ts";
import type { ConversationHome } from "./server.svelte.ts";

export class ApprovalDesk {
  /** A denial's reason per waiting call (task id), as typed. */
  reasons = $state<Record<number, string>>({});
  /** The call whose decision is on its way. */
  sending = $state<number | undefined>();
  /** What the engine said when the decision was not taken as sent (or an error), in words. */
  note = $state("");

  constructor(
    private readonly engine: () => ConversationHome,
    private readonly conversationId: () => number,
  ) {}

  async decide(
    taskId: number,
    decision: "approve" | "deny",
    options: { always?: boolean } = {},
  ): Promise<void> {
    const api = this.engine().api;
    if (!api || this.sending !== undefined) return;
    this.sending = taskId;
    this.note = "";
    const reason = decision === "deny" ? this.reasons[taskId]?.trim() : undefined;
    try {
      const answer = await api.approvals.decide(this.conversationId(), {
        taskId,
        decision,
        requestId: crypto.randomUUID(),
        ...(reason ? { reason } : {}),
        ...(options.always ? { always: true } : {}),
      });
      this.note = answerInWords(answer) ?? "";
    } catch (error) {
      this.note = errorMessage(error);
    } finally {
      this.sending = undefined;
    }
  }
}
