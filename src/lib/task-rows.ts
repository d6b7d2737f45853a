/**
 * The task panel's words for one live task (components/TaskTree.svelte), from the engine's task graph
 * node and what `inspect()` says of it. A person reads what the task does (`taskLabel`: "answering",
 * "running the write tool", "waiting for 2 tools") and the conversation by its title
 * (`conversationLabel`); the technical words (`taskWords`: kind, id, status and phase, the wait's
 * task ids and policy) are there on demand. Invariants: the status line always says the task's
 * status (and phase, or the held outcome) whole, never cut by the name; the background and stopping
 * flags, a wait (on which tasks, under which policy) and a blocked task's reason and error are each
 * said when they hold and only then.
 */
import type { TaskGraph, TaskGraphNode, TaskInspection } from "../../worker/protocol/index.ts";

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
      : s.status === "waiting" && s.until !== undefined
        ? `sleeps until ${new Date(s.until).toISOString()}`
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

/** What the tab knows besides the graph: the names of tool calls (by their task), from pi.live. */
export interface TaskContext {
  /** The tool a pi.tool task runs, when the open conversation's live slots name it. */
  readonly toolName?: (taskId: number) => string | undefined;
}

/** "the write tool", or "a tool" when its name is not known here. */
const toolPhrase = (name: string | undefined) => (name ? `the ${name} tool` : "a tool");

/** "2 tools", "the write tool": what a wait on `on` is for, counted by kind. */
function waitedOn(on: readonly number[], graph: TaskGraph | undefined, context: TaskContext): string {
  const kinds = on.map((id) => graph?.tasks[String(id)]?.kind);
  if (kinds.length > 0 && kinds.every((k) => k === "pi.tool")) {
    if (on.length === 1) return toolPhrase(context.toolName?.(on[0]!));
    return `${on.length} tools`;
  }
  if (kinds.length > 0 && kinds.every((k) => k === "pi.compaction"))
    return "the conversation to be compacted";
  if (kinds.length > 0 && kinds.every((k) => k === "pi.subagent"))
    return on.length === 1 ? "a subagent" : `${on.length} subagents`;
  return on.length === 1 ? "another task" : `${on.length} other tasks`;
}

/**
 * What a live task is doing, in a person's words: "answering", "running the write tool", "waiting
 * for 2 tools", "waiting for the network". The task's kind, id and phase are the technical words
 * (`taskWords`), shown on demand.
 */
export function taskLabel(node: TaskGraphNode, graph?: TaskGraph, context: TaskContext = {}): string {
  const s = node.state;
  if (s.status === "completing") return "finishing";
  const phase = s.status === "pending" ? undefined : s.phase;
  const waitingFor =
    s.status === "waiting" && s.on.length > 0 ? `waiting for ${waitedOn(s.on, graph, context)}` : undefined;
  switch (node.kind) {
    case "pi.generation":
      if (waitingFor) return waitingFor;
      if (s.status === "pending") return "about to answer";
      if (phase === "retry") return "waiting to try the model again";
      if (phase === "offline") return "waiting for the network";
      if (phase === "poll") return "waiting for the model's answer";
      return "answering";
    case "pi.tool": {
      const tool = toolPhrase(context.toolName?.(node.id));
      if (waitingFor) return `${waitingFor} (${tool})`;
      if (s.status === "running" && s.phase === "approval") return `waiting for your approval to run ${tool}`;
      return s.status === "pending" ? `about to run ${tool}` : `running ${tool}`;
    }
    case "pi.compaction":
      return waitingFor ?? "compacting the older part of the conversation";
    case "pi.subagent":
      return waitingFor ?? "running a subagent";
    case "app.schedule":
      return s.status === "waiting" && s.until !== undefined
        ? `scheduled run, next at ${new Date(s.until).toLocaleString([], { dateStyle: "medium", timeStyle: "short" })}`
        : "starting a scheduled run";
    default:
      return waitingFor ?? (s.status === "pending" ? `about to run ${node.kind}` : `running ${node.kind}`);
  }
}

/**
 * How the panel names a conversation: its title when the tab knows it, a subagent's conversation
 * when a task owns it, else its number.
 */
export function conversationLabel(
  id: number,
  title: string | undefined,
  options: { owned: boolean },
): string {
  if (title) return title;
  return options.owned ? `a subagent's conversation (${id})` : `conversation ${id}`;
}
