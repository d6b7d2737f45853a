/**
 * The tool task's records and what its parts share. A `pi.tool` task starts in `call` (resolve,
 * validate, `beforeTool`, commit the intent) or, when the generation committed the intent with the
 * answer, in `execute` (a call whose policy asks first waits in `approval` before it); its
 * checkpoint then holds the final arguments and the replay policy. Its
 * result is the transcript entry it appended, or for a nested call (`api.executeTool`) the result
 * itself, handed to the calling tool instead of the transcript.
 */
import type { TaskDefinition, TaskRuntime } from "../../../core/define.ts";
import type { EntryId, Json, TaskRecord } from "../../../core/types.ts";
import type { AgentServices } from "../../services.ts";
import type { ReplayPolicy, ToolControl, ToolResult } from "../contract.ts";

export type ToolTaskInput =
  | { assistant: EntryId; callId: string }
  | { nested: { name: string; arguments: Json; callId: string } };
export type ToolTaskCheckpoint =
  | { phase: "call" }
  /** Waiting for a person's decision (approval.ts): the final arguments, nothing of the call ran. */
  | { phase: "approval"; arguments: Json; replay: ReplayPolicy }
  | { phase: "execute"; arguments: Json; replay: ReplayPolicy };
export type ToolTaskResult = {
  entryId?: EntryId;
  isError?: boolean;
  control?: ToolControl;
  /** Nested calls hand their result to the caller instead of the transcript. */
  result?: ToolResult;
};
export type ToolTaskRuntime = TaskRuntime<ToolTaskInput, ToolTaskCheckpoint, ToolTaskResult>;
export type ToolTaskRecord = TaskRecord<ToolTaskInput, ToolTaskCheckpoint, ToolTaskResult>;
export type ToolTaskDefinition = TaskDefinition<ToolTaskInput, ToolTaskCheckpoint, ToolTaskResult>;

/** What every part of the tool task works with. */
export interface ToolTaskContext {
  readonly services: AgentServices;
  /** The tool task's own definition: a nested call is a task of it, owned by the calling one. */
  readonly definition: () => ToolTaskDefinition;
}
