/**
 * What a crash left inside tool calls, read from a committed store image (the one a crashed engine
 * left, or a copy taken while a call runs): the calls whose intent was committed and started but
 * whose result was not. After reopening, those are the calls recovery runs again (replay-safe ones)
 * or answers with an `interrupted` result (every other one). Reads only; never opens a harness.
 */

import type { ToolApi } from "../agent/tools/contract.ts";
import type { WorkspaceFs } from "../agent/workspace/fs.ts";
import { storedTasks } from "../core/queries.ts";
import type { MemoryStore } from "../store/open.ts";

/** The call ids (as in the model's tool calls; nested calls as `parent/key`) the crash cut. */
export async function toolCallsCutByCrash(committed: MemoryStore): Promise<string[]> {
  const tasks = await storedTasks(committed, { kind: "pi.tool" });
  return tasks.flatMap(({ input: stored, state }) => {
    const input = stored as { callId?: string; nested?: { callId: string } };
    // A call reserved in `execute` started running; one stored `pending` there was never started.
    const cut =
      state.status === "running" && (state.checkpoint as { phase?: string } | undefined)?.phase === "execute";
    const callId = input.callId ?? input.nested?.callId;
    return cut && callId !== undefined ? [callId] : [];
  });
}

/** Whether the crash cut the call `callId` (see `toolCallsCutByCrash`). */
export async function wasToolCallCutByCrash(committed: MemoryStore, callId: string): Promise<boolean> {
  return (await toolCallsCutByCrash(committed)).includes(callId);
}

/**
 * A `ToolApi` for running a tool's `execute` outside a harness (unit tests of a tool alone): the
 * given members (the environment: `env`, else the workspace `fs`), and every harness-bound one
 * (commits, conversations, nested calls, memos, tasks, documents, the agent) rejecting; diagnostics
 * and details are accepted and dropped, the registry is empty and no model is known.
 */
export function detachedToolApi(
  parts: Pick<ToolApi, "output"> & { fs: WorkspaceFs } & Partial<
      Pick<ToolApi, "signal" | "toolCallId" | "env">
    >,
): ToolApi {
  const detached = () => Promise.reject(new Error("this tool api is not bound to a harness"));
  return {
    signal: parts.signal ?? new AbortController().signal,
    toolCallId: parts.toolCallId ?? "call-1",
    taskId: 0,
    conversationId: 0,
    env: "env" in parts ? parts.env : { fs: parts.fs },
    output: parts.output,
    executeTool: detached,
    commit: detached,
    conversation: () => undefined,
    entry: detached,
    memo: detached,
    recordedCall: detached,
    tools: () => new Map(),
    taskDefinition: () => undefined,
    registry: {
      installed: () => [],
      extension: () => undefined,
      tools: () => [],
      tasks: () => [],
      task: () => undefined,
      hasTask: () => false,
    },
    agent: detached,
    models: { resolve: () => undefined, list: () => [] },
    diagnostic: () => undefined,
    details: async () => undefined,
    createTask: detached,
    getTask: detached,
    waitForTask: detached,
    snapshot: detached,
  };
}
