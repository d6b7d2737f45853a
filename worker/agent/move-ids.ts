/**
 * How the agent's stored values are renumbered when a conversation moves to another store
 * (worker/core/move.ts): the `moveIds` hooks of `pi.generation`, `pi.tool`, `pi.compaction` and
 * `pi.subagent`, and the hooks for the agent's documents (`pi.live`, `pi.inbox`) and submission
 * payloads (a write's entry draft). Every task, entry, submission and conversation id these values
 * hold goes through the move's id maps; anything else is copied. Documents an app defines are
 * copied as they are unless it passes its own hook (`AgentHarnessOptions.moves`).
 * Invariant: a value that names something the move does not carry makes the move refuse
 * (`MoveRefused`, thrown by the maps), never a dangling id in the new home.
 */
import type { MoveIds, TaskMoveHooks } from "../core/define.ts";
import type { MovedSubmission, MoveHooks } from "../core/move.ts";
import type { EntryEdit, Json } from "../core/types.ts";
import type { CompactionCheckpoint, CompactionInput, CompactionResult } from "./compaction/types.ts";
import type { GenerationCheckpoint, GenerationResult } from "./generation/turn.ts";
import { DOC, type EntryDraftJson, type InboxState, type LiveState } from "./records.ts";
import type { ToolTaskCheckpoint, ToolTaskInput, ToolTaskResult } from "./tools/task/types.ts";

export const generationMoveIds: TaskMoveHooks<Json, GenerationCheckpoint, GenerationResult> = {
  input: (input) => input,
  checkpoint: (cp, ids) => {
    switch (cp.phase) {
      case "prepare":
        return cp.compaction !== undefined ? { ...cp, compaction: ids.task(cp.compaction) } : cp;
      case "request":
      case "poll":
        return { ...cp, cutoff: ids.entryAtOrBefore(cp.cutoff) };
      case "tools":
        return { ...cp, assistant: ids.entry(cp.assistant), tools: cp.tools.map((id) => ids.task(id)) };
      default:
        return cp;
    }
  },
  result: (result, ids) => (result ? { entryId: ids.entry(result.entryId) } : result),
};

export const toolMoveIds: TaskMoveHooks<ToolTaskInput, ToolTaskCheckpoint, ToolTaskResult> = {
  input: (input, ids) => ("assistant" in input ? { ...input, assistant: ids.entry(input.assistant) } : input),
  checkpoint: (cp) => cp,
  result: (result, ids) =>
    result.entryId !== undefined ? { ...result, entryId: ids.entry(result.entryId) } : result,
  memo: (name, value, ids) => {
    // A nested call's task (tool-api.ts); the background subagent's memo names a conversation that
    // does not move, so the maps refuse it.
    if (name.startsWith("nested:")) return ids.task(value as number);
    if (name === "tool:subagent") {
      const started = value as { taskId: number; conversationId: number };
      return {
        ...started,
        taskId: ids.task(started.taskId),
        conversationId: ids.conversation(started.conversationId),
      };
    }
    return value;
  },
};

export const compactionMoveIds: TaskMoveHooks<CompactionInput, CompactionCheckpoint, CompactionResult> = {
  input: (input) => input,
  checkpoint: (cp, ids) =>
    cp.phase === "select"
      ? cp
      : { ...cp, tail: ids.entryAtOrBefore(cp.tail), firstKept: ids.entry(cp.firstKept) },
  result: (result, ids) => ({
    ...(result.submissionId !== undefined ? { submissionId: ids.submission(result.submissionId) } : {}),
    ...(result.entryId !== undefined ? { entryId: ids.entry(result.entryId) } : {}),
  }),
};

export const subagentMoveIds: TaskMoveHooks<{ task: string; parent: number }, { phase: "run" }, never> = {
  input: (input, ids) => ({ ...input, parent: ids.conversation(input.parent) }),
  checkpoint: (cp) => cp,
};

function moveDraft(draft: EntryDraftJson, ids: MoveIds): EntryDraftJson {
  return {
    ...draft,
    ...(typeof draft.head === "number" ? { head: ids.entry(draft.head) } : {}),
    ...(draft.edits !== undefined
      ? { edits: draft.edits.map((edit): EntryEdit => ({ ...edit, target: ids.entry(edit.target) })) }
      : {}),
  };
}

function moveLive(live: LiveState, ids: MoveIds): LiveState {
  return {
    ...live,
    ...(live.run
      ? {
          run: { taskId: ids.task(live.run.taskId), inputs: live.run.inputs.map((id) => ids.submission(id)) },
        }
      : {}),
    ...(live.generation
      ? { generation: { ...live.generation, taskId: ids.task(live.generation.taskId) } }
      : {}),
    ...(live.tools
      ? {
          tools: live.tools.map((slot) => ({
            ...slot,
            ...(slot.taskId !== undefined ? { taskId: ids.task(slot.taskId) } : {}),
            ...(slot.entry !== undefined ? { entry: ids.entry(slot.entry) } : {}),
          })),
        }
      : {}),
    ...(live.compactions
      ? { compactions: live.compactions.map((c) => ({ ...c, taskId: ids.task(c.taskId) })) }
      : {}),
  };
}

function moveInbox(state: InboxState, ids: MoveIds): InboxState {
  return {
    ...state,
    items: state.items.map((item) =>
      item.mode === "write"
        ? { ...item, id: ids.submission(item.id), entry: moveDraft(item.entry, ids) }
        : { ...item, id: ids.submission(item.id) },
    ),
  };
}

/** The agent's document and payload hooks, then `app`'s for the documents it defines. */
export function agentMoveHooks(app: MoveHooks = {}): MoveHooks {
  return {
    document: (name, value, ids) => {
      if (name === DOC.live) return moveLive(value as unknown as LiveState, ids) as unknown as Json;
      if (name === DOC.inbox) return moveInbox(value as unknown as InboxState, ids) as unknown as Json;
      return app.document ? app.document(name, value, ids) : value;
    },
    payload: (submission: MovedSubmission, ids) => {
      if (submission.type === "write" && submission.payload !== undefined)
        return moveDraft(submission.payload as unknown as EntryDraftJson, ids) as unknown as Json;
      return app.payload ? app.payload(submission, ids) : submission.payload;
    },
  };
}
