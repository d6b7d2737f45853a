/**
 * The `tools` phase of `pi.generation`: the round's calls ran as `pi.tool` tasks owned by the
 * generation; when the last one ends, the round's results go to the afterTools hooks and one commit
 * removes the round's slots and either ends the run (every result asked to terminate, a result
 * handed off, or a reset is queued) or places steering at the post-tools boundary and hands the run to the next generation.
 * Without afterTools hooks this lands in the last result's commit (the `wake` continuation).
 */
import type { Tx } from "../../core/define.ts";
import type { NextTaskState, TaskId, TaskRecord } from "../../core/types.ts";
import {
  appendReset,
  finalBoundary,
  placeAtBoundary,
  resetQueued,
  settleInputs,
} from "../conversation/inbox.ts";
import { hookApi } from "../extensions/hooks.ts";
import { type AgentState, agentDoc, DOC, type LiveState, live, writeDoc } from "../records.ts";
import type { ToolRoundResult } from "../services.ts";
import { continueSequentialRound } from "../tools/round.ts";
import type { GenerationDeps } from "./classification.ts";
import {
  committed,
  type GenerationCheckpoint,
  type GenerationResult,
  type GenerationRuntime,
  type GenerationTask,
  handRunTo,
  roundResults,
  runHooks,
} from "./turn.ts";

type Next = NextTaskState<GenerationCheckpoint, GenerationResult>;

/** The phase handler: run the afterTools hooks, then finish the round in one commit. */
export async function awaitToolRound(
  deps: GenerationDeps,
  task: GenerationTask<"tools">,
  runtime: GenerationRuntime,
): Promise<void> {
  const { services } = deps;
  // A sequential round whose wake did not start the next call (a restart in between).
  if (task.state.checkpoint.pending?.length) {
    await runtime.commit((tx) => continueSequentialRound(deps.toolTask(), tx, task));
    return;
  }
  const slots = committed<LiveState>(services, task.conversationId, DOC.live, {}).tools ?? [];
  const records = new Map<TaskId, TaskRecord | undefined>();
  for (const slot of slots)
    if (slot.taskId !== undefined) records.set(slot.taskId, await runtime.getTask(slot.taskId));
  const results = roundResults(slots, (id) => records.get(id), { missing: "failed" })!;
  await runHooks(
    services.hooks(task.conversationId).afterTools,
    (h) => h(results, hookApi(runtime, services), { signal: runtime.signal }),
    { report: services.report, signal: runtime.signal },
  );
  await runtime.commit((tx) => finishToolRound(deps, tx, task, results));
}

/**
 * The wake continuation: start the next call of a sequential round, or (without afterTools hooks,
 * every result in) finish the round in the commit that ended its last call.
 */
export function wakeForToolRound(
  deps: GenerationDeps,
  tx: Tx,
  task: GenerationTask<"tools">,
): Next | undefined {
  const next = continueSequentialRound(deps.toolTask(), tx, task);
  if (next) return next;
  if ((deps.services.hooks(task.conversationId).afterTools ?? []).length > 0) return undefined;
  const results = roundResults(live(tx, task.conversationId).tools ?? [], (id) => tx.getTask(id), {
    missing: "unfinished",
  });
  return results && finishToolRound(deps, tx, task, results);
}

/** The round's one closing commit (see the module comment). */
function finishToolRound(
  { policy }: GenerationDeps,
  tx: Tx,
  task: GenerationTask<"tools">,
  results: ToolRoundResult[],
): Next {
  const c = task.conversationId;
  const cp = task.state.checkpoint;
  const terminate = results.length > 0 && results.every((r) => r.terminate);
  // The last handoff of the round (in call order) wins.
  const handoff = results.findLast((r) => r.handoff !== undefined)?.handoff;
  addTools(
    tx,
    c,
    results.flatMap((r) => r.addTools ?? []),
  );
  const run = live(tx, c).run;
  const { tools: _t, ...state } = live(tx, c);
  writeDoc<LiveState>(tx, c, DOC.live, state);
  if (run?.taskId === task.id) {
    if (terminate || handoff !== undefined) {
      // A handoff ends the run like a terminating round, after starting the context over from it.
      if (handoff !== undefined) appendReset(tx, c, handoff);
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
 * The round's `addTools` controls (spec §8.5): each name is appended to an exact `tools` list unless
 * present, or taken out of a `{ remove }` list; with no filter every tool is offered already, so
 * nothing is written. The next preparation sees the edited filter.
 */
function addTools(tx: Tx, c: TaskRecord["conversationId"], names: readonly string[]): void {
  if (names.length === 0) return;
  const agent = agentDoc.read(tx, c);
  const filter = agent.tools;
  if (filter === undefined) return;
  let tools: AgentState["tools"];
  if (Array.isArray(filter))
    tools = [...filter, ...names.filter((n, i) => !filter.includes(n) && names.indexOf(n) === i)];
  else tools = { remove: filter.remove.filter((n) => !names.includes(n)) };
  if (JSON.stringify(tools) === JSON.stringify(filter)) return;
  agentDoc.write(tx, c, { ...agent, tools });
}
