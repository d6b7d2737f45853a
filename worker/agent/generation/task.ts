/**
 * `pi.generation`: one model turn as a durable task. prepare (resolve the agent, record what the
 * model will see) -> request (stream; partials to pi.live at most every partialIntervalMs) ->
 * retry (durable backoff) | offline (wait for the network; the attempt is not counted) |
 * poll (a deferred response) -> tools (wait for the round, apply the
 * boundary, hand the run on; without afterTools hooks this lands in the last result's commit).
 * Invariants: exactly one pi.assistant entry per classified attempt; a partial left by a crash is
 * converted to an aborted entry before the next request; every terminal path that owns the run
 * settles its inputs and clears run, generation and tools in the same commit.
 *
 * This module wires the phases; each lives in its own module: request.ts (request, poll),
 * classification.ts (what an answer leads to), tools-phase.ts (the end of a tool round), turn.ts
 * (checkpoint types and commit bodies several phases share).
 */
import { defineTask, type TaskDefinition, type Tx } from "../../core/define.ts";
import type { ConversationId, Json, NextTaskState } from "../../core/types.ts";
import { compactionNeeded } from "../compaction/policy.ts";
import {
  type CompactionDefinition,
  type CompactionResult,
  startBackgroundCompaction,
  startBlockingCompaction,
} from "../compaction/task.ts";
import { endRun, finalBoundary, type InboxPolicy, settleInputs } from "../conversation/inbox.ts";
import { generationMoveIds } from "../move-ids.ts";
import { DOC, inbox, type LiveState, live, withModelId, writeDoc } from "../records.ts";
import { type AgentServices, atPhaseStart, sleepUntil } from "../services.ts";
import { abortPendingCalls } from "../tools/round.ts";
import type { GenerationDeps } from "./classification.ts";
import { poll, request } from "./request.ts";
import { awaitToolRound, wakeForToolRound } from "./tools-phase.ts";
import {
  cleanUpFailedGeneration,
  convertLeftoverPartial,
  failRun,
  type GenerationCheckpoint,
  type GenerationResult,
  type GenerationRuntime,
  type GenerationTask,
  prepareRequest,
  renderPrompt,
} from "./turn.ts";

export type { GenerationCheckpoint, GenerationResult } from "./turn.ts";
export { cleanUpFailedGeneration, convertLeftoverPartial, prepareRequest } from "./turn.ts";

export function createGenerationTask(
  services: AgentServices,
  policy: InboxPolicy,
  toolTask: () => TaskDefinition<never, never, never>,
  compactionTask: () => CompactionDefinition,
): TaskDefinition<Json, GenerationCheckpoint, GenerationResult> {
  const deps: GenerationDeps = { services, policy, toolTask, compactionTask };
  // Each phase resolves its hooks once, at its start (spec §7.5).
  const phaseDeps = (task: { conversationId: number }): GenerationDeps => ({
    ...deps,
    services: atPhaseStart(services, task.conversationId),
  });
  return defineTask<Json, GenerationCheckpoint, GenerationResult>({
    name: "pi.generation",
    cleanUp: cleanUpFailedGeneration,
    moveIds: generationMoveIds,
    // Version 2: a pinned request's `model` is `{ provider, modelId }` (version 1 stored `id`).
    version: 2,
    migrate: (input, checkpoint) => ({ input, checkpoint: withModelId(checkpoint) as GenerationCheckpoint }),
    // A generation created with its request already prepared (in the creating commit) is created
    // with `start` at that request instead.
    initial: () => ({ phase: "prepare", attempt: 1 }),
    phases: {
      prepare: (task, runtime, signal) => prepare(phaseDeps(task), task, runtime, signal),
      // Two parameters: the signal is made only if the provider or a hook reads it (request.ts).
      request: (task, runtime) => request(phaseDeps(task), task, runtime),
      poll: (task, runtime, signal) => poll(phaseDeps(task), task, runtime, signal),
      retry: (task, runtime, signal) => retry(deps.services, task, runtime, signal),
      offline: (task, runtime, signal) => waitForNetwork(deps.services, task, runtime, signal),
      tools: (task, runtime) => awaitToolRound(phaseDeps(task), task, runtime),
    },
    wake: {
      tools: (tx, task) => wakeForToolRound(deps, tx, task),
    },
    abort: (task, runtime, signal) => abort(phaseDeps(task), task, runtime, signal),
  });
}

/**
 * `prepare`: compact first when over the blocking threshold (waiting for it), else pin the request
 * (starting a background compaction when over that threshold). After an overflow, only a
 * compaction that placed its summary lets the request fit.
 */
async function prepare(
  { services, compactionTask }: GenerationDeps,
  task: GenerationTask<"prepare">,
  runtime: GenerationRuntime,
  signal: AbortSignal,
): Promise<void> {
  const c = task.conversationId;
  const cp = task.state.checkpoint;
  const waited = cp.compaction !== undefined ? (await runtime.outcomes([cp.compaction]))[0] : undefined;
  const summarized =
    waited?.status === "completed" && (waited.result as CompactionResult)?.entryId !== undefined;
  const entries = await services.entries.get(c);
  // Sections render before the commit (they may be async); pi.agent changed meanwhile: again.
  for (let stale = true; stale; ) {
    const rendered = await renderPrompt(services, c, entries, signal);
    stale = false;
    await runtime.commit((tx) => {
      if (cp.overflow !== undefined && !summarized)
        return failRun(tx, c, task.id, "model_error", cp.overflow);
      const need = cp.compacted ? undefined : compactionNeeded(services, tx, c, entries);
      if (need === "blocking") {
        const id = startBlockingCompaction(tx, compactionTask(), c, task.id, "threshold");
        return {
          status: "waiting",
          checkpoint: {
            ...carried(cp),
            phase: "prepare",
            attempt: cp.attempt,
            compacted: true,
            compaction: id,
          },
          on: [id],
          policy: "allSettled",
        };
      }
      const prepared = prepareRequest(services, tx, c, task.id, cp.attempt, entries, rendered);
      if (prepared.status === "render") {
        stale = true;
        return undefined;
      }
      if (prepared.status === "failed") return failRun(tx, c, task.id, "no_model", prepared.detail);
      if (need === "background") startBackgroundCompaction(tx, compactionTask(), c);
      return { status: "running", checkpoint: { ...prepared.checkpoint, ...carried(cp) } };
    });
  }
}

/** What a checkpoint hands on to the next phase of the same turn: compacted once, uncounted attempts. */
function carried(cp: { compacted?: true; uncounted?: number }): { compacted?: true; uncounted?: number } {
  return {
    ...(cp.compacted ? { compacted: true as const } : {}),
    ...(cp.uncounted ? { uncounted: cp.uncounted } : {}),
  };
}

/** `retry`: wait out the durable backoff, then prepare the next attempt. */
async function retry(
  services: AgentServices,
  task: GenerationTask<"retry">,
  runtime: GenerationRuntime,
  signal: AbortSignal,
) {
  const cp = task.state.checkpoint;
  services.wakeAt(cp.until);
  await sleepUntil(cp.until, () => runtime.now(), signal);
  await runtime.commit((tx) => nextAttempt(tx, task.conversationId, cp.attempt + 1, carried(cp)));
}

/**
 * `offline`: wait until the platform says the network may be back (at once when it already is, as
 * after a reload), then prepare the next attempt; the one that failed offline is not counted. When
 * the platform next looks goes to pi.live as it is scheduled (`offline.nextCheckAt`).
 */
async function waitForNetwork(
  services: AgentServices,
  task: GenerationTask<"offline">,
  runtime: GenerationRuntime,
  signal: AbortSignal,
) {
  const cp = task.state.checkpoint;
  // Each next look the platform schedules goes to pi.live (a person is told when), one commit at a time.
  let told = Promise.resolve();
  const tell = (at: number) => {
    told = told
      .then(() =>
        runtime.commit((tx) => {
          const state = live(tx, task.conversationId);
          const offline = state.generation?.taskId === task.id ? state.generation.offline : undefined;
          if (offline && offline.nextCheckAt !== at) {
            writeDoc<LiveState>(tx, task.conversationId, DOC.live, {
              ...state,
              generation: { ...state.generation!, offline: { ...offline, nextCheckAt: at } },
            });
          }
          return undefined;
        }, signal),
      )
      // The wait ended (aborted, handed over): nothing left to tell.
      .then(
        () => undefined,
        () => undefined,
      );
  };
  await services.network.whenOnline(signal, tell);
  await told;
  await runtime.commit((tx) =>
    nextAttempt(tx, task.conversationId, cp.attempt + 1, {
      ...carried(cp),
      uncounted: (cp.uncounted ?? 0) + 1,
    }),
  );
}

/** Leave a wait (a backoff, the network) for `prepare` of `attempt`; pi.live says which attempt is next. */
function nextAttempt(
  tx: Tx,
  c: ConversationId,
  attempt: number,
  carry: { compacted?: true; uncounted?: number },
): NextTaskState<GenerationCheckpoint, GenerationResult> {
  const state = live(tx, c);
  if (state.generation) {
    const { retry: _r, offline: _o, ...generation } = state.generation;
    writeDoc<LiveState>(tx, c, DOC.live, { ...state, generation: { ...generation, attempt } });
  }
  return { status: "running", checkpoint: { phase: "prepare", attempt, ...carry } };
}

/**
 * The abort handler: cancel a deferred response (best effort), then in one commit keep the partial
 * as an aborted answer, answer the round's pending calls, and end the run this task owns at a final
 * boundary when an input is queued: the abort's own commit withdrew the inputs queued then, so one
 * queued now was admitted while the run was ending, and it starts the next run (ending the run bare
 * left it queued forever, with nothing live to answer it).
 */
async function abort(
  { services, policy }: GenerationDeps,
  task: Parameters<TaskDefinition<Json, GenerationCheckpoint, GenerationResult>["abort"]>[0],
  runtime: GenerationRuntime,
  signal: AbortSignal,
): Promise<void> {
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
      // Queued writes alone wait for the next input, as after any abort.
      if (inbox(tx, c).items.some((i) => i.mode !== "write")) finalBoundary(tx, policy, c);
      else endRun(tx, c);
    }
    return { status: "terminal", outcome: { status: "aborted", reason: "aborted" } };
  });
}
