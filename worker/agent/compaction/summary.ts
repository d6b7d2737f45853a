/**
 * The summary (spec §8.7): the pinned request that asks the conversation's model for it, the commit
 * that classifies the answer (count the spend, then place, retry or fail), and the placement of a
 * summary, from the model or from a `beforeCompact` hook: a `pi.compaction` entry headed at the first
 * kept entry, appended directly by a blocking compaction, admitted as a write submission otherwise.
 */
import type { AssistantMessage } from "@mariozechner/pi-ai";
import type { Tx } from "../../core/define.ts";
import type { ConversationId, EntryId, Json } from "../../core/types.ts";
import { activeRange, summarizedPart } from "../conversation/context.ts";
import { admit } from "../conversation/inbox.ts";
import { providerSession } from "../provider-session.ts";
import {
  addUsage,
  DOC,
  ENTRY,
  errorAnswer,
  type ModelRef,
  readDoc,
  type UsageState,
  writeDoc,
  zeroUsage,
} from "../records.ts";
import { isRetryableError, retryDelayMs, withoutSecrets } from "../services.ts";
import { SUMMARY_SYSTEM_PROMPT, serializeForSummary } from "./range.ts";
import { clearStatus, setStatus } from "./start.ts";
import {
  type CompactionDeps,
  type CompactionNext,
  type CompactionTask,
  completed,
  failed,
  type SummaryRequest,
} from "./types.ts";

const SUMMARY_PROMPT =
  "Summarize the conversation above. Write what the assistant needs to continue: the goal, what was done, what was learned, and what remains.";
const SUMMARY_INTRO = "The conversation history before this point was compacted into the following summary:";

/** One summary request: its final message (errors are data: an error answer). */
export async function requestSummary(
  { services }: CompactionDeps,
  task: CompactionTask,
  cp: SummaryRequest,
  signal: AbortSignal,
): Promise<AssistantMessage> {
  const c = task.conversationId;
  const model = services.models.resolve(cp.model);
  const entries = await services.entries.get(c, cp.tail);
  const conversation = serializeForSummary(summarizedPart(activeRange(entries), cp.firstKept).messages);
  const focus = task.input.instructions ? `\n\nAdditional focus: ${task.input.instructions}` : "";
  const sessionId = await providerSession(services.core, c);
  const apiKey = model ? services.apiKey(model.provider) : undefined;
  const headers = services.settings().stream.headers;
  if (!model)
    return errorAnswer(
      summaryModel(cp.model),
      `unknown model ${cp.model.provider}/${cp.model.modelId}`,
      services.core.now(),
    );
  try {
    const stream = services.stream(
      model,
      {
        systemPrompt: SUMMARY_SYSTEM_PROMPT,
        messages: [
          {
            role: "user",
            content: `<conversation>\n${conversation}\n</conversation>\n\n${SUMMARY_PROMPT}${focus}`,
            timestamp: services.core.now(),
          },
        ],
      },
      {
        ...(cp.stream ?? {}),
        ...(headers ? { headers } : {}),
        signal,
        cacheRetention: "none",
        maxTokens: cp.maxTokens,
        ...(cp.thinkingLevel !== "off" ? { reasoning: cp.thinkingLevel } : {}),
        sessionId,
        ...(apiKey ? { apiKey } : {}),
      },
    );
    const final = await stream.result();
    return withoutSecrets(final, apiKey, services.secrets());
  } catch (error) {
    const answer = errorAnswer(summaryModel(cp.model), error, services.core.now());
    return withoutSecrets(answer, apiKey, services.secrets());
  }
}

/** The classifying commit: count the spend, then place, retry or fail. */
export function classifySummary(
  deps: CompactionDeps,
  tx: Tx,
  task: CompactionTask,
  cp: SummaryRequest,
  answer: AssistantMessage,
): CompactionNext {
  countSpend(tx, task.conversationId, cp.model, answer);
  const text = answer.content
    .filter((b) => b.type === "text")
    .map((b) => b.text)
    .join("")
    .trim();
  const calls = answer.content.some((b) => b.type === "toolCall");
  if (answer.stopReason === "stop" && text.length > 0 && !calls)
    return placeSummary(deps, tx, task, { summary: text, firstKept: cp.firstKept });
  const retry = deps.services.settings().retry;
  if (
    answer.stopReason === "error" &&
    isRetryableError(answer.errorMessage) &&
    retry.enabled &&
    cp.attempt <= retry.maxRetries
  ) {
    const until = tx.now() + retryDelayMs(retry, cp.attempt);
    setStatus(tx, task, { attempt: cp.attempt, retry: { at: until, error: answer.errorMessage ?? "error" } });
    return { status: "running", checkpoint: { ...cp, phase: "retry", until } };
  }
  clearStatus(tx, task);
  return failed({
    message: answer.errorMessage ?? (text ? answer.stopReason : "empty summary"),
    detail: { reason: "model_error" },
  });
}

/** Every summarization attempt's usage counts with the conversation's, placed or not. */
function countSpend(tx: Tx, c: ConversationId, model: ModelRef, answer: AssistantMessage): void {
  const usage = readDoc<UsageState>(tx, c, DOC.usage, { models: {}, tools: {} });
  const key = `${model.provider}/${model.modelId}`;
  writeDoc<UsageState>(tx, c, DOC.usage, {
    ...usage,
    models: {
      ...usage.models,
      [key]: addUsage(usage.models[key] ?? zeroUsage(), answer.usage ?? zeroUsage()),
    },
  });
}

/**
 * Place `summary` as the compaction's entry, headed at `firstKept`, and complete: appended directly
 * when the run waits for it (blocking), else admitted as the write submission `compaction:<taskId>`.
 */
export function placeSummary(
  { policy }: CompactionDeps,
  tx: Tx,
  task: CompactionTask,
  placement: { readonly summary: string; readonly firstKept: EntryId },
): CompactionNext {
  const c = task.conversationId;
  const wrapped = `${SUMMARY_INTRO}\n\n<summary>\n${placement.summary}\n</summary>`;
  const entry = {
    kind: ENTRY.compaction,
    head: placement.firstKept,
    model: [{ role: "user", content: [{ type: "text", text: wrapped }], timestamp: tx.now() }] as Json,
    data: { reason: task.input.reason },
  };
  clearStatus(tx, task);
  // A blocking compaction runs while its run waits: nothing else is placed meanwhile.
  if (task.input.blocking) return completed({ entryId: tx.appendEntry(c, entry).id });
  const submission = admit(tx, policy, c, { type: "write", requestId: `compaction:${task.id}`, entry });
  return completed({ submissionId: submission.id });
}

/** Whose answer a failed summary request is (the API is unknown when the model is not resolved). */
function summaryModel(model: ModelRef): { api: string; provider: string; model: string } {
  return { api: "unknown", provider: model.provider, model: model.modelId };
}
