/**
 * pi.compaction started by `Conversation.compact()` (spec §8.7, manual mode): the older part of the
 * active context is summarized by the conversation's model into one `pi.compaction` entry whose head
 * is the first kept entry, so later requests see the summary followed by the recent entries. Raw
 * history stays stored.
 *
 * Phases: `select` picks the cut and pins the summary request (model, thinking, stream options,
 * maxTokens, the range) in one commit; `summarize` sends it (a restart resends the same request);
 * `retry` waits out a retryable error's durable backoff. The summary is placed as a head write
 * (requestId `compaction:<taskId>`), so it follows the inbox rules: at once when idle, else at the
 * next boundary, and stale when a newer head moved the active range past its cut. The task does not
 * take run control; its status lives in pi.live.compactions until its outcome commit.
 */
import type { AssistantMessage } from "@mariozechner/pi-ai";
import { defineTask, type TaskDefinition, type TaskRuntime, type Tx } from "../../core/define.ts";
import type { ConversationId, EntryId, Json, SubmissionId, TaskRecord } from "../../core/types.ts";
import { SUMMARY_SYSTEM_PROMPT, selectCut, serializeForSummary } from "./range.ts";

export { SUMMARY_SYSTEM_PROMPT } from "./range.ts";

import { activeRange, deriveContext } from "../conversation/context.ts";
import { admit, type InboxPolicy } from "../conversation/inbox.ts";
import {
  type AgentState,
  addUsage,
  type CompactionReason,
  type CompactionStatus,
  DOC,
  ENTRY,
  errorAnswer,
  type LiveState,
  type ModelRef,
  readDoc,
  type ThinkingLevel,
  type UsageState,
  writeDoc,
  zeroUsage,
} from "../records.ts";
import {
  type AgentServices,
  isRetryableError,
  retryDelayMs,
  type StreamSettings,
  sleepUntil,
  withoutSecret,
} from "../services.ts";

export type { CompactionReason, CompactionStatus } from "../records.ts";
export interface CompactionInput {
  reason: CompactionReason;
  instructions?: string;
  /** Started by a generation that waits for it: the summary is appended directly. */
  blocking?: boolean;
}
/** Both absent when there was nothing to compact. */
export interface CompactionResult {
  submissionId?: SubmissionId;
  entryId?: EntryId;
}
interface SummaryRequest {
  attempt: number;
  model: ModelRef;
  thinkingLevel: ThinkingLevel;
  stream?: Omit<StreamSettings, "headers">;
  maxTokens: number;
  /** The newest entry the summary may cover, and the first one it keeps. */
  tail: EntryId;
  firstKept: EntryId;
}
export type CompactionDefinition = TaskDefinition<CompactionInput, CompactionCheckpoint, CompactionResult>;
export type CompactionCheckpoint =
  | { phase: "select" }
  | ({ phase: "summarize" } & SummaryRequest)
  | ({ phase: "retry"; until: number } & SummaryRequest);

type Runtime = TaskRuntime<CompactionInput, CompactionCheckpoint, CompactionResult>;
type Task = TaskRecord<CompactionInput, CompactionCheckpoint, CompactionResult>;

const SUMMARY_PROMPT =
  "Summarize the conversation above. Write what the assistant needs to continue: the goal, what was done, what was learned, and what remains.";
const SUMMARY_INTRO = "The conversation history before this point was compacted into the following summary:";

function setStatus(tx: Tx, c: ConversationId, taskId: number, status: CompactionStatus | undefined): void {
  const state = readDoc<LiveState>(tx, c, DOC.live, {});
  const others = (state.compactions ?? []).filter((s) => s.taskId !== taskId);
  const compactions = status ? [...others, status] : others;
  const { compactions: _old, ...rest } = state;
  writeDoc<LiveState>(tx, c, DOC.live, compactions.length > 0 ? { ...rest, compactions } : rest);
}

/** A compaction ended without running its own outcome commit (faulted, orphaned): drop its status. */
export function cleanUpFailedCompaction(tx: Tx, task: TaskRecord): void {
  setStatus(tx, task.conversationId, task.id, undefined);
}

/**
 * Start a compaction the generation `ownerTask` waits for (a threshold or an overflow): owned by the
 * generation, so it is aborted with it; its summary is appended directly.
 */
export function startBlockingCompaction(
  tx: Tx,
  definition: TaskDefinition<CompactionInput, CompactionCheckpoint, CompactionResult>,
  conversationId: ConversationId,
  ownerTask: number,
  reason: "threshold" | "overflow",
): number {
  const taskId = tx.createTask(
    definition,
    { reason, blocking: true },
    { ownership: { kind: "task", taskId: ownerTask } },
  );
  setStatus(tx, conversationId, taskId, { taskId, reason, blocking: true, attempt: 1 });
  return taskId;
}

/**
 * Start a compaction nobody waits for (a background threshold): conversation-owned and background,
 * so it survives Conversation.abort(); its summary is placed through the inbox like a manual one's.
 */
export function startBackgroundCompaction(
  tx: Tx,
  definition: TaskDefinition<CompactionInput, CompactionCheckpoint, CompactionResult>,
  conversationId: ConversationId,
): number {
  const taskId = tx.createTask(
    definition,
    { reason: "threshold" },
    { ownership: { kind: "conversation" }, conversationId, background: true },
  );
  setStatus(tx, conversationId, taskId, { taskId, reason: "threshold", blocking: false, attempt: 1 });
  return taskId;
}

/** Create a manual compaction of `conversationId` in this commit; returns its task id. */
export function startCompaction(
  tx: Tx,
  definition: TaskDefinition<CompactionInput, CompactionCheckpoint, CompactionResult>,
  conversationId: ConversationId,
  instructions?: string,
): number {
  if (instructions !== undefined && typeof instructions !== "string")
    throw new TypeError("compaction instructions must be text");
  const input: CompactionInput = { reason: "manual", ...(instructions ? { instructions } : {}) };
  const taskId = tx.createTask(definition, input, { ownership: { kind: "conversation" }, conversationId });
  setStatus(tx, conversationId, taskId, { taskId, reason: "manual", blocking: false, attempt: 1 });
  return taskId;
}

export function createCompactionTask(services: AgentServices, policy: InboxPolicy) {
  const done = (result: CompactionResult) => ({
    status: "terminal" as const,
    outcome: { status: "completed" as const, result },
  });
  const failed = (tx: Tx, task: Task, message: string, detail?: string) => {
    setStatus(tx, task.conversationId, task.id, undefined);
    return {
      status: "terminal" as const,
      outcome: { status: "failed" as const, error: { message, ...(detail !== undefined ? { detail } : {}) } },
    };
  };

  /** One summary request: its final message (errors are data: an error answer). */
  async function request(task: Task, cp: SummaryRequest, signal: AbortSignal): Promise<AssistantMessage> {
    const c = task.conversationId;
    const model = services.models.resolve(cp.model);
    const entries = await services.entries.get(c, cp.tail);
    const summarized = activeRange(entries).filter((e) => e.head !== undefined || e.id < cp.firstKept);
    const conversation = serializeForSummary(deriveContext(summarized).messages);
    const focus = task.input.instructions ? `\n\nAdditional focus: ${task.input.instructions}` : "";
    const provider = readCommitted<{ sessionId?: string }>(c, DOC.provider);
    const apiKey = model ? services.apiKey(model.provider) : undefined;
    const headers = services.settings().stream.headers;
    if (!model)
      return errorAnswer(summaryModel(cp.model), `unknown model ${cp.model.provider}/${cp.model.id}`);
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
          ...(provider?.sessionId ? { sessionId: provider.sessionId } : {}),
          ...(apiKey ? { apiKey } : {}),
        },
      );
      const final = await stream.result();
      return apiKey ? withoutSecret(final, apiKey) : final;
    } catch (error) {
      const answer = errorAnswer(summaryModel(cp.model), error);
      return apiKey ? withoutSecret(answer, apiKey) : answer;
    }
  }

  function readCommitted<T>(c: ConversationId, name: string): T | undefined {
    return services.core.docNow(c, name) as T | undefined;
  }

  /** The classifying commit: count the spend, then place, retry or fail. */
  function classify(tx: Tx, task: Task, cp: SummaryRequest, answer: AssistantMessage) {
    const c = task.conversationId;
    const usage = readDoc<UsageState>(tx, c, DOC.usage, { models: {}, tools: {} });
    const key = `${cp.model.provider}/${cp.model.id}`;
    writeDoc<UsageState>(tx, c, DOC.usage, {
      ...usage,
      models: {
        ...usage.models,
        [key]: addUsage(usage.models[key] ?? zeroUsage(), answer.usage ?? zeroUsage()),
      },
    });
    const text = answer.content
      .filter((b) => b.type === "text")
      .map((b) => b.text)
      .join("")
      .trim();
    const calls = answer.content.some((b) => b.type === "toolCall");
    if (answer.stopReason === "stop" && text.length > 0 && !calls) {
      const wrapped = `${SUMMARY_INTRO}\n\n<summary>\n${text}\n</summary>`;
      const entry = {
        kind: ENTRY.compaction,
        head: cp.firstKept,
        model: [{ role: "user", content: [{ type: "text", text: wrapped }], timestamp: tx.now() }] as Json,
        data: { reason: task.input.reason },
      };
      setStatus(tx, c, task.id, undefined);
      // A blocking compaction runs while its run waits: nothing else is placed meanwhile.
      if (task.input.blocking) return done({ entryId: tx.appendEntry(c, entry).id });
      const submission = admit(tx, policy, c, { type: "write", requestId: `compaction:${task.id}`, entry });
      return done({ submissionId: submission.id });
    }
    const retry = services.settings().retry;
    if (
      answer.stopReason === "error" &&
      isRetryableError(answer.errorMessage) &&
      retry.enabled &&
      cp.attempt <= retry.maxRetries
    ) {
      const until = tx.now() + retryDelayMs(retry, cp.attempt);
      const error = answer.errorMessage ?? "error";
      setStatus(tx, c, task.id, {
        taskId: task.id,
        reason: task.input.reason,
        blocking: task.input.blocking === true,
        attempt: cp.attempt,
        retry: { at: until, error },
      });
      return { status: "running" as const, checkpoint: { ...cp, phase: "retry" as const, until } };
    }
    return failed(
      tx,
      task,
      "model_error",
      answer.errorMessage ?? (text ? answer.stopReason : "empty summary"),
    );
  }

  const definition: TaskDefinition<CompactionInput, CompactionCheckpoint, CompactionResult> = defineTask<
    CompactionInput,
    CompactionCheckpoint,
    CompactionResult
  >({
    name: "pi.compaction",
    cleanUp: cleanUpFailedCompaction,
    version: 1,
    initial: () => ({ phase: "select" }),
    phases: {
      select: async (task, runtime: Runtime) => {
        const c = task.conversationId;
        const entries = await services.entries.get(c);
        await runtime.commit((tx) => {
          const agent = readDoc<AgentState>(tx, c, DOC.agent, {});
          const ref = agent.model ?? services.defaultModel;
          const model = ref ? services.models.resolve(ref) : undefined;
          if (!ref || !model)
            return failed(
              tx,
              task,
              "no_model",
              ref ? `unknown model ${ref.provider}/${ref.id}` : "no model is configured",
            );
          const settings = services.settings();
          const range = activeRange(entries);
          const firstKept = selectCut(range, settings.compaction.keepRecentTokens);
          if (firstKept === undefined) {
            setStatus(tx, c, task.id, undefined);
            return done({});
          }
          const { headers: _h, ...stream } = settings.stream;
          const cap = Math.floor(0.8 * settings.compaction.reserveTokens);
          const request: SummaryRequest = {
            attempt: 1,
            model: { provider: ref.provider, id: ref.id },
            thinkingLevel: agent.thinkingLevel ?? "off",
            ...(Object.keys(stream).length > 0 ? { stream: structuredClone(stream) } : {}),
            maxTokens: model.maxTokens > 0 ? Math.min(cap, model.maxTokens) : cap,
            tail: range.at(-1)?.id ?? firstKept,
            firstKept,
          };
          return { status: "running", checkpoint: { phase: "summarize", ...request } };
        });
      },
      summarize: async (task, runtime: Runtime, signal) => {
        const { phase: _p, ...cp } = task.state.checkpoint;
        const answer = await request(task, cp, signal);
        await runtime.commit((tx) => classify(tx, task, cp, answer));
      },
      retry: async (task, runtime: Runtime, signal) => {
        const { phase: _p, until, ...cp } = task.state.checkpoint;
        await sleepUntil(until, () => runtime.now(), signal);
        await runtime.commit((tx) => {
          const next = { ...cp, attempt: cp.attempt + 1 };
          setStatus(tx, task.conversationId, task.id, {
            taskId: task.id,
            reason: task.input.reason,
            blocking: task.input.blocking === true,
            attempt: next.attempt,
          });
          return { status: "running", checkpoint: { phase: "summarize", ...next } };
        });
      },
    },
    abort: async (task, runtime: Runtime) => {
      await runtime.commit((tx) => {
        setStatus(tx, task.conversationId, task.id, undefined);
        return { status: "terminal", outcome: { status: "aborted", reason: "aborted" } };
      });
    },
  });
  return definition;
}

/** Whose answer a failed summary request is (the API is unknown when the model is not resolved). */
function summaryModel(model: ModelRef): { api: string; provider: string; model: string } {
  return { api: "unknown", provider: model.provider, model: model.id };
}
