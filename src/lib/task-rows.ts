/**
 * The task panel's words for one live task (components/TaskTree.svelte), from the engine's task graph
 * node and what `inspect()` says of it. Invariants: the status line always says the task's status
 * (and phase, or the held outcome) whole, never cut by the name; the background and stopping flags,
 * a wait (on which tasks, under which policy) and a blocked task's reason and error are each said
 * when they hold and only then.
 */
import type { TaskGraphNode, TaskInspection } from "../../worker/protocol/index.ts";

export interface TaskWords {
  /** "pi.tool #2": what the task is. */
  readonly name: string;
  /** "running · execute", "waiting · tools", "completing · completed". */
  readonly status: string;
  /** "background", "stopping". */
  readonly flags: readonly string[];
  /** "waits on #2, #3 until all settle", when it waits on live tasks. */
  readonly waits?: string;
  /** "blocked: its definition is missing (…)", when the scheduler cannot run it. */
  readonly blocked?: string;
}

const POLICY: Record<string, string> = {
  allSettled: "until all settle",
  failFast: "until all succeed or one fails",
};

const BLOCKED: Record<string, string> = {
  missing_task: "no task of this kind is registered in this build",
  task_too_old: "its record is newer than this build's task definition",
  migration_failed: "its record could not be migrated to this build",
  corrupt_record: "its stored record is damaged",
};

/** What the panel says of `node` (`inspection`: `inspect()`'s entry for it, if any). */
export function taskWords(node: TaskGraphNode, inspection?: Pick<TaskInspection, "state">): TaskWords {
  const s = node.state;
  const status = s.status === "completing" ? `completing · ${s.outcome}` : `${s.status} · ${s.phase}`;
  const flags = [...(node.background ? ["background"] : []), ...(node.abortRequested ? ["stopping"] : [])];
  const waits =
    s.status === "waiting" && s.on.length > 0
      ? `waits on ${s.on.map((id) => `#${id}`).join(", ")} ${POLICY[s.policy] ?? `(${s.policy})`}`
      : undefined;
  const state = inspection?.state;
  const blocked =
    state?.kind === "blocked"
      ? `blocked: ${BLOCKED[state.reason] ?? state.reason}${state.error ? ` (${state.error})` : ""}`
      : undefined;
  return {
    name: `${node.kind} #${node.id}`,
    status,
    flags,
    ...(waits !== undefined ? { waits } : {}),
    ...(blocked !== undefined ? { blocked } : {}),
  };
}
