/**
 * Classifying a terminal answer of `pi.generation` (from a request or a poll), in one commit:
 * a failed attempt is kept as an entry and then compacted (a context overflow), waits for the
 * network (a network failure while the platform says offline: not counted against the retry
 * budget), retried (a retryable error, within the retry budget) or fails the run; tool calls start
 * the round; any
 * other answer ends the run, or continues it when an onYield hook asks. An answer that ended
 * normally with no text and no tool call (a stream the app could not read) is an error answer, said
 * in words, that fails the run. Exactly one pi.assistant entry is appended per classified attempt.
 */
import type { AssistantMessage, ToolCall } from "@mariozechner/pi-ai";
import type { TaskDefinition, Tx } from "../../core/define.ts";
import type { Json, NextTaskState, TaskRecord } from "../../core/types.ts";
import { isOverflow, overflowCompactable } from "../compaction/policy.ts";
import { type CompactionDefinition, startBlockingCompaction } from "../compaction/task.ts";
import {
  finalBoundary,
  finalSelectsUser,
  type InboxPolicy,
  placeAtBoundary,
  settleInputs,
} from "../conversation/inbox.ts";
import { type HookApi, hookApi } from "../extensions/hooks.ts";
import {
  appendAssistant,
  appendJsonAssistant,
  appendUser,
  DOC,
  type LiveState,
  live,
  providerJson,
  writeDoc,
} from "../records.ts";
import {
  type AgentServices,
  isNetworkError,
  isRetryableError,
  type RetryPolicy,
  retryDelayMs,
} from "../services.ts";
import { startToolRound } from "../tools/round.ts";
import {
  clearPartial,
  failRun,
  type GenerationCheckpoint,
  type GenerationResult,
  type GenerationRuntime,
  handRunTo,
} from "./turn.ts";

/** What the generation's phases share: the services, the inbox policy and the tasks it starts. */
export interface GenerationDeps {
  readonly services: AgentServices;
  readonly policy: InboxPolicy;
  readonly toolTask: () => TaskDefinition<never, never, never>;
  readonly compactionTask: () => CompactionDefinition;
}

type Task = TaskRecord<Json, GenerationCheckpoint, GenerationResult>;
type Next = NextTaskState<GenerationCheckpoint, GenerationResult>;

export interface Attempt {
  /** The attempt this answer belongs to (1 for the first request of the turn). */
  readonly attempt: number;
  /** How many of the turn's attempts failed offline: they do not count against the retry budget. */
  readonly uncounted: number;
  /** The tools the request offered (registered ones only). */
  readonly offered: readonly string[];
  /** The run already compacted once: an overflow fails instead of compacting again. */
  readonly compacted: boolean;
}

/** What an answer with nothing in it is kept as: the reason, in words, of an error answer. */
export const EMPTY_ANSWER_ERROR =
  "The model's answer came back empty (no text and no tool call): the app could not read what the provider sent. " +
  "Its reply may be in a format this model's API does not use. Try again, or choose another model.";

/**
 * An answer that ended normally with no text and no tool call is one the app could not read (a
 * provider stream in another format than the model's API, say): it is kept as an error answer
 * (pi-ai's stopReason "error") with the reason in words, never as an empty answer.
 */
export function emptyAnswerAsError(message: AssistantMessage): AssistantMessage {
  if (message.stopReason === "error" || message.stopReason === "aborted") return message;
  const said = message.content.some(
    (b) => b.type === "toolCall" || (b.type === "text" && b.text.trim() !== ""),
  );
  return said ? message : { ...message, stopReason: "error", errorMessage: EMPTY_ANSWER_ERROR };
}

export async function classify(
  deps: GenerationDeps,
  task: Task,
  runtime: GenerationRuntime,
  received: AssistantMessage,
  attempt: Attempt,
): Promise<void> {
  const message = emptyAnswerAsError(received);
  if (message.stopReason === "error" || message.stopReason === "aborted") {
    const failure = await failureKind(deps.services, task, message, attempt, runtime.signal);
    await runtime.commit((tx) => failedAttempt(deps, tx, task, message, attempt, failure));
    return;
  }
  if (message.stopReason === "toolUse" && message.content.some((b) => b.type === "toolCall")) {
    // The round starts the calls of the copy that is committed: the append freezes it, so their
    // arguments are the engine's own frozen JSON (validated without a copy of their own).
    const answer = providerJson(message);
    const calls = answer.content.filter((b): b is ToolCall => b.type === "toolCall");
    await runtime.commit((tx) => {
      const entry = appendJsonAssistant(tx, task.conversationId, answer);
      return startToolRound(deps.services, deps.toolTask(), tx, task, entry.id, calls, attempt.offered);
    });
    return;
  }
  const continuation = await askOnYield(
    deps.services,
    task,
    message,
    hookApi(runtime, deps.services),
    runtime.signal,
  );
  await runtime.commit((tx) => answered(deps, tx, task, message, continuation));
}

interface Failure {
  /** A context overflow a compaction can cure. */
  readonly overflow: boolean;
  /** A network failure while the platform is offline: wait for the network, then try again. */
  readonly offline?: true;
  /** Set when the error is retryable and the retry budget allows another attempt. */
  readonly retry?: RetryPolicy;
}

/**
 * Decided before the commit (they read settings, the entry cache and the network): what a failed
 * attempt gets. Only the attempts not spent offline count against `maxRetries`.
 */
async function failureKind(
  services: AgentServices,
  task: Task,
  message: AssistantMessage,
  attempt: Attempt,
  signal: AbortSignal,
): Promise<Failure> {
  const error = message.stopReason === "error";
  const overflow = error && !attempt.compacted && overflowCompactable(services, task.conversationId, message);
  if (error && !overflow && isNetworkError(message.errorMessage) && services.settings().retry.enabled) {
    if (!(await services.network.check(signal))) return { overflow: false, offline: true };
  }
  const retry = services.settings().retry;
  // Spec §8.3: an overflow not compacted (nothing to cut, compaction off, a second one) is never
  // retried, though its text may also read retryable (a gateway's 502 carrying it).
  const retryable = error && isRetryableError(message.errorMessage) && !isOverflow(services, message);
  return {
    overflow,
    ...(retryable && retry.enabled && attempt.attempt - attempt.uncounted <= retry.maxRetries
      ? { retry }
      : {}),
  };
}

/** Keep the failed attempt, then compact and prepare again, retry after a backoff, or fail the run. */
function failedAttempt(
  deps: GenerationDeps,
  tx: Tx,
  task: Task,
  message: AssistantMessage,
  { attempt, compacted, uncounted }: Attempt,
  failure: Failure,
): Next {
  const c = task.conversationId;
  appendAssistant(tx, c, message);
  clearPartial(tx, c);
  const carried = {
    ...(compacted ? { compacted: true as const } : {}),
    ...(uncounted > 0 ? { uncounted } : {}),
  };
  if (failure.overflow) {
    // Compact, then prepare again: the recovery request does not count as a retry.
    const id = startBlockingCompaction(tx, deps.compactionTask(), c, task.id, "overflow");
    return {
      status: "waiting",
      checkpoint: {
        phase: "prepare",
        attempt,
        ...carried,
        compacted: true,
        compaction: id,
        overflow: message.errorMessage ?? "context overflow",
      },
      on: [id],
      policy: "allSettled",
    };
  }
  if (failure.offline) {
    const since = tx.now();
    writeDoc<LiveState>(tx, c, DOC.live, {
      ...live(tx, c),
      generation: { taskId: task.id, attempt, offline: { since, error: message.errorMessage ?? "error" } },
    });
    return { status: "running", checkpoint: { phase: "offline", attempt, since, ...carried } };
  }
  if (failure.retry) {
    const until = tx.now() + retryDelayMs(failure.retry, attempt - uncounted);
    writeDoc<LiveState>(tx, c, DOC.live, {
      ...live(tx, c),
      generation: { taskId: task.id, attempt, retry: { at: until, error: message.errorMessage ?? "error" } },
    });
    return { status: "running", checkpoint: { phase: "retry", attempt, until, ...carried } };
  }
  return failRun(tx, c, task.id, "model_error", message.errorMessage ?? message.stopReason);
}

/** The first onYield hook that returns a continuation wins. */
async function askOnYield(
  services: AgentServices,
  task: Task,
  message: AssistantMessage,
  api: HookApi,
  signal: AbortSignal,
): Promise<string | undefined> {
  for (const h of services.hooks(task.conversationId).onYield ?? []) {
    try {
      const continuation = await h(message, api, { signal });
      if (continuation !== undefined) return continuation;
    } catch (error) {
      // A throw is reported and the next hook asked (spec §7.2), unless the phase was aborted.
      if (signal.aborted) throw error;
      services.report(error);
    }
  }
  return undefined;
}

/** An answer: append it; then continue the run with the continuation, or settle it at the final boundary. */
function answered(
  deps: GenerationDeps,
  tx: Tx,
  task: Task,
  message: AssistantMessage,
  continuation: string | undefined,
): Next {
  const c = task.conversationId;
  const entry = appendAssistant(tx, c, message);
  clearPartial(tx, c);
  const run = live(tx, c).run;
  if (run?.taskId === task.id) {
    // The continuation applies only when this final boundary selects no user item and no reset.
    if (continuation !== undefined && !finalSelectsUser(tx, c)) {
      placeAtBoundary(tx, deps.policy, c, "final"); // writes only: nothing else is queued
      appendUser(tx, c, continuation);
      handRunTo(tx, c, deps.policy, run.inputs);
    } else {
      settleInputs(tx, run.inputs, { status: "done", answer: entry.id });
      finalBoundary(tx, deps.policy, c);
    }
  }
  return { status: "terminal", outcome: { status: "completed", result: { entryId: entry.id } } };
}
