/**
 * `pi.generation`: one model turn as a durable task. prepare (resolve the agent, record what the
 * model will see) -> request (stream; partials to pi.live at most every partialIntervalMs) ->
 * retry (durable backoff) | poll (a deferred response) -> tools (wait for the round, apply the
 * boundary, hand the run on; without afterTools hooks this lands in the last result's commit).
 * Invariants: exactly one pi.assistant entry per classified attempt; a partial left by a crash is
 * converted to an aborted entry before the next request; every terminal path that owns the run
 * settles its inputs and clears run, generation and tools in the same commit.
 */
import {
  type AssistantMessage,
  type AssistantMessageEvent,
  isContextOverflow,
  type ToolCall,
} from "@mariozechner/pi-ai";
import { defineTask, type TaskDefinition, type Tx } from "../../core/define.ts";
import type {
  ConversationId,
  EntryRecord,
  Json,
  NextTaskState,
  TaskId,
  TaskRecord,
} from "../../core/types.ts";
import { selectCut } from "../compaction/range.ts";
import {
  type CompactionDefinition,
  type CompactionResult,
  contextTokens,
  startBackgroundCompaction,
  startBlockingCompaction,
} from "../compaction/task.ts";
import { activeRange, deriveContext } from "../conversation/context.ts";
import {
  endRun,
  finalBoundary,
  type InboxPolicy,
  placeAtBoundary,
  resetQueued,
  settleInputs,
} from "../conversation/inbox.ts";
import { type DeferredAnswer, isDeferred } from "../models/resolver.ts";
import {
  type AgentState,
  appendAssistant,
  appendUser,
  DOC,
  type LiveState,
  live,
  readDoc,
  writeDoc,
} from "../records.ts";
import {
  type AgentServices,
  type HookContext,
  isRetryableError,
  retryDelayMs,
  sleepUntil,
  type ToolRoundResult,
  withoutSecret,
} from "../services.ts";
import { toPiTool } from "../tools/contract.ts";
import { abortPendingCalls, continueSequentialRound, startToolRound } from "../tools/round.ts";
import { PartialWriter } from "./partial.ts";
import {
  clearPartial,
  committed,
  convertLeftoverPartial,
  deferTo,
  errorMessage,
  failRun,
  type GenerationCheckpoint,
  type GenerationResult,
  prepareRequest,
  type GenerationRuntime as Runtime,
  roundResults,
  runHooks,
} from "./turn.ts";

export type { GenerationCheckpoint, GenerationResult } from "./turn.ts";
export { cleanUpFailedGeneration, convertLeftoverPartial, prepareRequest } from "./turn.ts";

/**
 * Whether the request about to be prepared needs a compaction first (spec §8.3), with compaction
 * enabled, a model with a context window and something to compact: `blocking` above
 * contextWindow - reserveTokens (the request waits for it); `background` above that less
 * backgroundTokens when none is under way (the request does not wait). One estimate serves both.
 */
export function compactionNeeded(
  services: AgentServices,
  tx: Tx,
  c: ConversationId,
  entries: readonly EntryRecord[],
): "blocking" | "background" | undefined {
  const settings = services.settings().compaction;
  if (!settings.enabled) return undefined;
  const ref = readDoc<AgentState>(tx, c, DOC.agent, {}).model ?? services.defaultModel;
  const model = ref ? services.models.resolve(ref) : undefined;
  if (!model || !(model.contextWindow > 0)) return undefined;
  const tokens = contextTokens(entries);
  const blockingAt = model.contextWindow - settings.reserveTokens;
  let need: "blocking" | "background" | undefined;
  if (tokens > blockingAt) need = "blocking";
  else if (
    settings.backgroundTokens > 0 &&
    tokens > blockingAt - settings.backgroundTokens &&
    (live(tx, c).compactions?.length ?? 0) === 0
  )
    need = "background";
  if (!need || selectCut(activeRange(entries), settings.keepRecentTokens) === undefined) return undefined;
  return need;
}

export function createGenerationTask(
  services: AgentServices,
  policy: InboxPolicy,
  toolTask: () => TaskDefinition<never, never, never>,
  compactionTask: () => CompactionDefinition,
) {
  const definition: TaskDefinition<Json, GenerationCheckpoint, GenerationResult> = defineTask<
    Json,
    GenerationCheckpoint,
    GenerationResult
  >({
    name: "pi.generation",
    version: 1,
    // A generation created with its request already prepared (in the creating commit) is created
    // with `start` at that request instead.
    initial: () => ({ phase: "prepare", attempt: 1 }),
    phases: {
      prepare: async (task, runtime) => {
        const c = task.conversationId;
        const cp = task.state.checkpoint;
        // After an overflow, only a compaction that placed its summary lets the request fit.
        const waited = cp.compaction !== undefined ? (await runtime.outcomes([cp.compaction]))[0] : undefined;
        const summarized =
          waited?.status === "completed" && (waited.result as CompactionResult)?.entryId !== undefined;
        const entries = await services.entries.get(c);
        await runtime.commit((tx) => {
          if (cp.overflow !== undefined && !summarized)
            return failRun(tx, c, task.id, "model_error", cp.overflow);
          const need = cp.compacted ? undefined : compactionNeeded(services, tx, c, entries);
          if (need === "blocking") {
            const id = startBlockingCompaction(tx, compactionTask(), c, task.id, "threshold");
            return {
              status: "waiting",
              checkpoint: { phase: "prepare", attempt: cp.attempt, compacted: true, compaction: id },
              on: [id],
              policy: "allSettled",
            };
          }
          const checkpoint = prepareRequest(services, tx, c, task.id, cp.attempt, entries);
          if (!checkpoint.ok) return failRun(tx, c, task.id, "no_model", checkpoint.detail);
          if (need === "background") startBackgroundCompaction(tx, compactionTask(), c);
          return {
            status: "running",
            checkpoint: { ...checkpoint.checkpoint, ...(cp.compacted ? { compacted: true as const } : {}) },
          };
        });
      },

      request: async (task, runtime, signal) => {
        const c = task.conversationId;
        const cp = task.state.checkpoint;
        const ctx: HookContext = { conversationId: c, taskId: task.id };
        // A partial committed before a crash is kept as an aborted answer, never resent.
        if (committed<LiveState>(services, c, DOC.live, {}).generation?.message) {
          await runtime.commit((tx) => {
            convertLeftoverPartial(tx, c);
            return undefined;
          });
        }
        const model = services.models.resolve(cp.model);
        if (!model) {
          await runtime.commit((tx) =>
            failRun(tx, c, task.id, "no_model", `unknown model ${cp.model.provider}/${cp.model.id}`),
          );
          return;
        }
        const entries = await services.entries.get(c, cp.cutoff);
        const derived = deriveContext(entries);
        const registered = services.tools();
        const offered = derived.tools.filter((n) => registered.has(n));
        let messages = derived.messages;
        const hooks = services.hooks();
        await runHooks(hooks.beforeRequest, async (h) => {
          messages = (await h(messages, ctx)) ?? messages;
        });
        const provider = committed<{ sessionId?: string }>(services, c, DOC.provider, {});
        const apiKey = services.apiKey(model.provider);
        const headers = services.settings().stream.headers;
        const partials = new PartialWriter(
          runtime,
          c,
          task.id,
          cp.attempt,
          services.settings().partialIntervalMs,
        );
        let final: AssistantMessage | undefined;
        try {
          // Inside the try: a provider that throws at once (no such API registered, a bad option)
          // gives an error answer like any other failure, not a faulted task.
          const stream = services.stream(
            model,
            {
              ...(derived.systemPrompt ? { systemPrompt: derived.systemPrompt } : {}),
              messages,
              tools: offered.map((n) => toPiTool(registered.get(n)!)),
            },
            {
              ...(cp.stream ?? {}),
              ...(headers ? { headers } : {}),
              signal,
              ...(cp.thinkingLevel !== "off" ? { reasoning: cp.thinkingLevel } : {}),
              ...(provider.sessionId ? { sessionId: provider.sessionId } : {}),
              ...(apiKey ? { apiKey } : {}),
            },
          );
          for await (const event of stream as AsyncIterable<AssistantMessageEvent>) {
            if (event.type === "done") final = event.message;
            else if (event.type === "error") final = event.error;
            else if ("partial" in event) partials.offer(event.partial);
          }
          final ??= await stream.result();
        } catch (error) {
          final = errorMessage(model.api, model.provider, model.id, error);
        }
        // Stopped before any return: no throttled partial may land after the outcome's commit.
        await partials.stop();
        if (signal.aborted) return; // the abort handler (or the next engine) converts the partial
        // A provider may echo the key in an error ("invalid key sk-..."): it never reaches an entry.
        if (apiKey) final = withoutSecret(final, apiKey);
        if (isDeferred(final)) {
          // Not an answer yet: keep the handle and poll for it (no entry, no hooks).
          const handle = final.deferred;
          await runtime.commit((tx) => deferTo(tx, task.id, c, cp, handle, tx.now()));
          return;
        }
        await runHooks(hooks.afterResponse, (h) => h(final!, ctx));
        await classify(task, runtime, final, cp.attempt, offered, cp.compacted === true);
      },

      poll: async (task, runtime, signal) => {
        const c = task.conversationId;
        const cp = task.state.checkpoint;
        await sleepUntil(cp.pollAt, () => runtime.now(), signal);
        const model = services.models.resolve(cp.model);
        if (!model) {
          await runtime.commit((tx) =>
            failRun(tx, c, task.id, "no_model", `unknown model ${cp.model.provider}/${cp.model.id}`),
          );
          return;
        }
        let answer: AssistantMessage | DeferredAnswer;
        try {
          if (!services.models.fetchDeferred)
            throw new Error(
              `the model resolver cannot fetch deferred responses (${model.provider}/${model.id})`,
            );
          answer = await services.models.fetchDeferred(model, cp.handle, signal);
        } catch (error) {
          if (signal.aborted) return;
          answer = errorMessage(model.api, model.provider, model.id, error);
        }
        if (signal.aborted) return;
        if (isDeferred(answer)) {
          const handle = answer.deferred;
          // Still deferred: the next poll is strictly later than this one.
          await runtime.commit((tx) =>
            deferTo(tx, task.id, c, cp, handle, Math.max(tx.now(), cp.pollAt + 1)),
          );
          return;
        }
        const registered = services.tools();
        const offered = deriveContext(await services.entries.get(c, cp.cutoff)).tools.filter((n) =>
          registered.has(n),
        );
        const message = answer;
        await runHooks(services.hooks().afterResponse, (h) =>
          h(message, { conversationId: c, taskId: task.id }),
        );
        // Every classifying commit replaces pi.live.generation, so the deferred note goes with it.
        await classify(task, runtime, message, cp.attempt, offered, false);
      },

      retry: async (task, runtime, signal) => {
        const cp = task.state.checkpoint;
        await sleepUntil(cp.until, () => runtime.now(), signal);
        await runtime.commit((tx) => {
          const state = live(tx, task.conversationId);
          if (state.generation) {
            const { retry: _r, ...generation } = state.generation;
            writeDoc<LiveState>(tx, task.conversationId, DOC.live, {
              ...state,
              generation: { ...generation, attempt: cp.attempt + 1 },
            });
          }
          return {
            status: "running",
            checkpoint: {
              phase: "prepare",
              attempt: cp.attempt + 1,
              ...(cp.compacted ? { compacted: true } : {}),
            },
          };
        });
      },

      tools: async (task, runtime) => {
        // A sequential round whose wake did not start the next call (a restart in between).
        if (task.state.checkpoint.pending?.length) {
          await runtime.commit((tx) => continueSequentialRound(toolTask(), tx, task));
          return;
        }
        const slots = committed<LiveState>(services, task.conversationId, DOC.live, {}).tools ?? [];
        const records = new Map<TaskId, TaskRecord | undefined>();
        for (const slot of slots)
          if (slot.taskId !== undefined) records.set(slot.taskId, await runtime.getTask(slot.taskId));
        const results = roundResults(slots, (id) => records.get(id), true)!;
        await runHooks(services.hooks().afterTools, (h) =>
          h(results, { conversationId: task.conversationId, taskId: task.id }),
        );
        await runtime.commit((tx) => finishToolRound(tx, task, results));
      },
    },

    // Without afterTools hooks the round's end is pure bookkeeping: it lands in the commit of the
    // last tool result (the scheduler runs it there), not in a transaction of its own.
    wake: {
      tools: (tx, task) => {
        const next = continueSequentialRound(toolTask(), tx, task);
        if (next) return next;
        if ((services.hooks().afterTools ?? []).length > 0) return undefined;
        const results = roundResults(
          live(tx, task.conversationId).tools ?? [],
          (id) => tx.getTask(id),
          false,
        );
        return results && finishToolRound(tx, task, results);
      },
    },

    abort: async (task, runtime, signal) => {
      const c = task.conversationId;
      const cp = task.state.status === "running" ? task.state.checkpoint : undefined;
      if (cp?.phase === "poll") {
        const model = services.models.resolve(cp.model);
        if (model && services.models.cancelDeferred) {
          try {
            await services.models.cancelDeferred(model, cp.handle, signal);
          } catch (error) {
            runtime.report(error);
          }
        }
      }
      await runtime.commit((tx) => {
        convertLeftoverPartial(tx, c);
        abortPendingCalls(tx, c);
        const run = live(tx, c).run;
        if (run?.taskId === task.id) {
          settleInputs(tx, run.inputs, { status: "unanswered", reason: "aborted" });
          endRun(tx, c);
        }
        return { status: "terminal", outcome: { status: "aborted", reason: "aborted" } };
      });
    },
  });

  /**
   * The tools phase's one commit: remove the round's slots, then end the run (every result asked to
   * terminate) or place steering at the post-tools boundary and hand the run to the next generation.
   */
  function finishToolRound(
    tx: Tx,
    task: TaskRecord<Json, GenerationCheckpoint, GenerationResult>,
    results: ToolRoundResult[],
  ): NextTaskState<GenerationCheckpoint, GenerationResult> {
    const c = task.conversationId;
    const cp = (task.state as { checkpoint: GenerationCheckpoint }).checkpoint as Extract<
      GenerationCheckpoint,
      { phase: "tools" }
    >;
    const terminate = results.length > 0 && results.every((r) => r.terminate);
    const run = live(tx, c).run;
    const { tools: _t, ...state } = live(tx, c);
    writeDoc<LiveState>(tx, c, DOC.live, state);
    if (run?.taskId === task.id) {
      if (terminate) {
        settleInputs(tx, run.inputs, { status: "done", answer: cp.assistant });
        finalBoundary(tx, policy, c);
      } else if (resetQueued(tx, c)) {
        // A reset at this boundary ends the run as a final boundary would: its inputs are left
        // unanswered (reset), and queued users (follow-ups too) start over in the new context.
        settleInputs(tx, run.inputs, { status: "unanswered", reason: "reset" });
        finalBoundary(tx, policy, c);
      } else {
        const steers = placeAtBoundary(tx, policy, c, "postTools");
        handRunTo(tx, c, policy, [...run.inputs, ...steers]);
      }
    }
    return { status: "terminal", outcome: { status: "completed", result: { entryId: cp.assistant } } };
  }

  /**
   * Classify a terminal answer (from a request or a poll) in one commit: a failed attempt is kept and
   * retried or fails the run; tool calls start the round; anything else answers the run (or continues
   * it when an onYield hook asks).
   */
  async function classify(
    task: TaskRecord<Json, GenerationCheckpoint, GenerationResult>,
    runtime: Runtime,
    message: AssistantMessage,
    attempt: number,
    offered: readonly string[],
    compacted: boolean,
  ): Promise<void> {
    const c = task.conversationId;
    const ctx: HookContext = { conversationId: c, taskId: task.id };
    const calls = message.content.filter((b): b is ToolCall => b.type === "toolCall");
    if (message.stopReason === "error" || message.stopReason === "aborted") {
      const retry = services.settings().retry;
      const retryable = message.stopReason === "error" && isRetryableError(message.errorMessage);
      const overflow = message.stopReason === "error" && !compacted && overflowCompactable(c, message);
      await runtime.commit((tx) => {
        appendAssistant(tx, c, message);
        clearPartial(tx, c);
        if (overflow) {
          // Compact, then prepare again: the recovery request does not count as a retry.
          const id = startBlockingCompaction(tx, compactionTask(), c, task.id, "overflow");
          return {
            status: "waiting",
            checkpoint: {
              phase: "prepare",
              attempt,
              compacted: true,
              compaction: id,
              overflow: message.errorMessage ?? "context overflow",
            },
            on: [id],
            policy: "allSettled",
          };
        }
        if (retryable && retry.enabled && attempt <= retry.maxRetries) {
          const until = tx.now() + retryDelayMs(retry, attempt);
          const state = live(tx, c);
          writeDoc<LiveState>(tx, c, DOC.live, {
            ...state,
            generation: {
              taskId: task.id,
              attempt: attempt,
              retry: { at: until, error: message.errorMessage ?? "error" },
            },
          });
          return {
            status: "running",
            checkpoint: {
              phase: "retry",
              attempt: attempt,
              until,
              ...(compacted ? { compacted: true } : {}),
            },
          };
        }
        return failRun(tx, c, task.id, "model_error", message.errorMessage ?? message.stopReason);
      });
      return;
    }
    if (message.stopReason === "toolUse" && calls.length > 0) {
      await runtime.commit((tx) => {
        const entry = appendAssistant(tx, c, message);
        return startToolRound(services, toolTask(), tx, task, entry.id, calls, offered);
      });
      return;
    }
    let continuation: string | undefined;
    for (const h of services.hooks().onYield ?? []) {
      continuation = await h(message, ctx);
      if (continuation !== undefined) break;
    }
    await runtime.commit((tx) => {
      const entry = appendAssistant(tx, c, message);
      clearPartial(tx, c);
      const run = live(tx, c).run;
      if (run?.taskId === task.id) {
        if (continuation !== undefined) {
          appendUser(tx, c, continuation);
          handRunTo(tx, c, policy, run.inputs);
        } else {
          settleInputs(tx, run.inputs, { status: "done", answer: entry.id });
          finalBoundary(tx, policy, c);
        }
      }
      return { status: "terminal", outcome: { status: "completed", result: { entryId: entry.id } } };
    });
  }

  /** A context overflow that a compaction can cure: enabled, recognized, and something to compact. */
  function overflowCompactable(c: ConversationId, message: AssistantMessage): boolean {
    const settings = services.settings().compaction;
    if (!settings.enabled) return false;
    const model = services.models.resolve({ provider: message.provider, id: message.model });
    if (!isContextOverflow(message, model?.contextWindow)) return false;
    const entries = services.entries.peek(c);
    return entries !== undefined && selectCut(activeRange(entries), settings.keepRecentTokens) !== undefined;
  }

  /** The next generation takes over the run (same inputs, plus steers placed at this boundary). */
  function handRunTo(tx: Tx, c: ConversationId, p: InboxPolicy, inputs: number[]): void {
    const next = p.startGeneration(tx, c);
    const state = live(tx, c);
    const { generation: _g, tools: _t, ...rest } = state;
    writeDoc<LiveState>(tx, c, DOC.live, { ...rest, run: { taskId: next, inputs } });
  }

  return definition;
}
