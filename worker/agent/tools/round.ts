/**
 * Starting a tool round from a tool-calling answer, in the commit that appends the answer: a result
 * at once for a tool that is not offered, and a `pi.tool` task owned by the generation for every other
 * call. Parallel rounds (the default) start every task now; a sequential round (settings
 * `toolExecution: "sequential"`, or any called tool with `executionMode: "sequential"`) starts the
 * first and keeps the rest in the checkpoint's `pending`, each started by the commit that ends the
 * previous one. Slots in pi.live list every call in order, a pending call without a task yet.
 */
import type { ToolCall } from "@mariozechner/pi-ai";
import type { TaskDefinition, Tx } from "../../core/define.ts";
import { sealBuilt } from "../../core/persist.ts";
import type { ConversationId, EntryId, Json, NextTaskState, TaskId, TaskRecord } from "../../core/types.ts";
import type { GenerationCheckpoint, GenerationResult } from "../generation/turn.ts";
import { DOC, type LiveState, live, type ToolSlot, writeDoc } from "../records.ts";
import type { AgentServices } from "../services.ts";
import { toolResultEntry } from "./results.ts";
import { intentAtCreation } from "./task/call.ts";

type ToolsCheckpoint = Extract<GenerationCheckpoint, { phase: "tools" }>;
type Generation = TaskRecord<Json, GenerationCheckpoint, GenerationResult>;
type Next = NextTaskState<GenerationCheckpoint, GenerationResult>;

/** True when this round's calls must run one after another. */
export function isSequentialRound(
  services: AgentServices,
  c: ConversationId,
  calls: readonly ToolCall[],
): boolean {
  if (services.settings().toolExecution === "sequential") return true;
  const registered = services.tools(c);
  return calls.some((call) => registered.get(call.name)?.executionMode === "sequential");
}

/** The answer's commit: results for unavailable tools, tasks for the rest; waits on what it started. */
export function startToolRound(
  services: AgentServices,
  toolTask: TaskDefinition<never, never, never>,
  tx: Tx,
  generation: Generation,
  assistant: EntryId,
  calls: readonly ToolCall[],
  offered: readonly string[],
): Next {
  const c = generation.conversationId;
  const sequential = isSequentialRound(services, c, calls);
  const slots: ToolSlot[] = [];
  const ids: TaskId[] = [];
  const pending: string[] = [];
  for (const call of calls) {
    if (!offered.includes(call.name)) {
      const result = toolResultEntry(
        tx,
        c,
        call.id,
        call.name,
        `tool ${call.name} is not available`,
        "tool_unavailable",
      );
      slots.push({ callId: call.id, name: call.name, status: "done", entry: result.id });
      continue;
    }
    if (sequential && ids.length > 0) {
      pending.push(call.id);
      slots.push({ callId: call.id, name: call.name, status: "pending" });
      continue;
    }
    // With no hook between the answer and the intent, this commit records the intent too.
    const intent = intentAtCreation(services, tx, c, call);
    const id = tx.createTask(toolTask, sealBuilt({ assistant, callId: call.id }) as never, {
      ownership: { kind: "task", taskId: generation.id },
      ...(intent ? { start: intent as never, reserve: true } : {}),
    });
    ids.push(id);
    slots.push({ callId: call.id, name: call.name, taskId: id, status: intent ? "running" : "pending" });
  }
  const { generation: _g, ...state } = live(tx, c);
  // Built here around checked parts (the answer's call ids and names, task ids): sealed without a walk.
  for (const slot of slots) sealBuilt(slot);
  writeDoc<LiveState>(tx, c, DOC.live, sealBuilt({ ...state, tools: sealBuilt(slots) }));
  return waitOn(
    sealBuilt({
      phase: "tools",
      assistant,
      tools: sealBuilt(ids),
      ...(pending.length ? { pending: sealBuilt(pending) } : {}),
    }),
    ids,
  );
}

/**
 * A sequential round whose current call has ended: start the next pending call (its task goes
 * through validation and beforeTool in its own `call` phase) and wait on it. Undefined when none is left.
 */
export function continueSequentialRound(
  toolTask: TaskDefinition<never, never, never>,
  tx: Tx,
  generation: Generation,
): Next | undefined {
  const cp = (generation.state as { checkpoint: GenerationCheckpoint }).checkpoint as ToolsCheckpoint;
  const [callId, ...rest] = cp.pending ?? [];
  if (callId === undefined) return undefined;
  const c = generation.conversationId;
  const id = tx.createTask(toolTask, { assistant: cp.assistant, callId } as never, {
    ownership: { kind: "task", taskId: generation.id },
  });
  const state = live(tx, c);
  writeDoc<LiveState>(tx, c, DOC.live, {
    ...state,
    tools: (state.tools ?? []).map((s) => (s.callId === callId ? { ...s, taskId: id } : s)),
  });
  const tools = [...cp.tools, id];
  return waitOn(
    { phase: "tools", assistant: cp.assistant, tools, ...(rest.length ? { pending: rest } : {}) },
    [id],
  );
}

/**
 * The generation is aborted mid-round: calls that never got a task get an `aborted` error result, so
 * the transcript answers every call of the answer.
 */
export function abortPendingCalls(tx: Tx, c: ConversationId): void {
  const state = live(tx, c);
  if (!state.tools?.some((s) => s.status === "pending" && s.taskId === undefined)) return;
  const tools = state.tools.map((s) => {
    if (s.status !== "pending" || s.taskId !== undefined) return s;
    const entry = toolResultEntry(
      tx,
      c,
      s.callId,
      s.name,
      "the run was aborted before this call started",
      "aborted",
    );
    return { callId: s.callId, name: s.name, status: "done" as const, entry: entry.id };
  });
  writeDoc<LiveState>(tx, c, DOC.live, { ...state, tools });
}

function waitOn(checkpoint: ToolsCheckpoint, on: TaskId[]): Next {
  return { status: "waiting", checkpoint, on, policy: "allSettled" };
}
