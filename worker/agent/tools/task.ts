/**
 * `pi.tool`: one tool call as a durable task. `call` resolves and validates the call, runs
 * `beforeTool` (block or rewrite) and validates again, commits intent (the final arguments and the
 * replay policy), executes, runs `afterTool` and commits the result. With no `beforeTool` hook there
 * is nothing between the answer and the intent, so the generation records the intent in the commit
 * that appends the answer (`intentAtCreation`) and the task starts in `execute`. `execute` resumed
 * after an interruption (`runtime.resumed`) is recovery: a call that is `safe` both as stored and as
 * registered now runs again with the stored arguments; anything else records an `interrupted` error
 * result built from the durable partial output. Nested calls (`api.executeTool`) are tasks owned by
 * the caller, keyed by position.
 */
import type { ToolCall } from "@mariozechner/pi-ai";
import { defineTask, type TaskDefinition, type TaskRuntime, type Tx } from "../../core/define.ts";
import { errorMessage } from "../../core/errors.ts";
import { assertJson } from "../../core/persist.ts";
import type { ConversationId, EntryId, Json, NextTaskState, TaskRecord } from "../../core/types.ts";
import type { ExecutionEnv } from "../env.ts";
import { hookApi } from "../extensions/hooks.ts";
import { agentDoc, DOC, type LiveState, modelMessages } from "../records.ts";
import { type AgentHooks, type AgentServices, atPhaseStart, type BeforeToolDecision } from "../services.ts";
import { validateToolArguments } from "./arguments.ts";
import {
  NestedCallMismatch,
  type ReplayPolicy,
  replayPolicyOf,
  type ToolApi,
  type ToolControl,
  type ToolDefinition,
  type ToolResult,
  toPiTool,
} from "./contract.ts";
import { type Binding, check, toolCommit, toolConversation } from "./handle.ts";
import { DEFAULT_OUTPUT_LIMITS, limitsOf, truncatedDiagnostic } from "./limits.ts";
import {
  appendResult,
  boundResult,
  cleanUpFailedTool,
  OutputBuffer,
  slotDone,
  toolResultEntry,
  updateSlot,
} from "./results.ts";

export type ToolTaskInput =
  | { assistant: EntryId; callId: string }
  | { nested: { name: string; arguments: Json; callId: string } };
export type ToolTaskCheckpoint =
  | { phase: "call" }
  | { phase: "execute"; arguments: Json; replay: ReplayPolicy };
export type ToolTaskResult = {
  entryId?: EntryId;
  isError?: boolean;
  control?: ToolControl;
  /** Nested calls hand their result to the caller instead of the transcript. */
  result?: ToolResult;
};
type Runtime = TaskRuntime<ToolTaskInput, ToolTaskCheckpoint, ToolTaskResult>;
type ToolTaskRecord = TaskRecord<ToolTaskInput, ToolTaskCheckpoint, ToolTaskResult>;

class ToolCallFailed extends Error {
  constructor(
    readonly code: "tool_unavailable" | "invalid_arguments" | "blocked",
    message: string,
  ) {
    super(message);
  }
}

/** The tool of that name among the conversation's tools (its selection and filter applied). */
function resolveToolFor(tools: ReadonlyMap<string, ToolDefinition>, name: string): ToolDefinition {
  const tool = tools.get(name);
  if (!tool) throw new ToolCallFailed("tool_unavailable", `tool ${name} is not available`);
  return tool;
}

/** The tool's repair of the model's arguments (spec §7.3), or them unchanged; a throw is invalid_arguments. */
function prepare(tool: ToolDefinition, args: unknown): unknown {
  if (!tool.prepareArguments) return args;
  try {
    return tool.prepareArguments(args);
  } catch (error) {
    throw new ToolCallFailed("invalid_arguments", errorMessage(error));
  }
}

/** `toHooks`: beforeTool hooks get the result (as before, a copy of their own, not yet frozen). */
function validate(
  tool: ToolDefinition,
  call: ToolCall,
  args: unknown,
  options: { toHooks?: boolean } = {},
): unknown {
  try {
    return validateToolArguments(
      toPiTool(tool),
      { ...call, arguments: args as Record<string, unknown> },
      { copy: options.toHooks === true },
    );
  } catch (error) {
    throw new ToolCallFailed("invalid_arguments", errorMessage(error));
  }
}

/**
 * The `execute` checkpoint a call can start at, decided inside the commit that appends its answer:
 * only when no `beforeTool` hook could block or rewrite it and its arguments validate. Otherwise
 * undefined, and the task starts in `call` (which also writes the error results).
 */
export function intentAtCreation(
  services: AgentServices,
  tx: Tx,
  c: ConversationId,
  call: ToolCall,
): Extract<ToolTaskCheckpoint, { phase: "execute" }> | undefined {
  const agent = services.agent(c, agentDoc.read(tx, c));
  if ((agent.hooks.beforeTool ?? []).length > 0) return undefined;
  try {
    const tool = resolveToolFor(agent.tools, call.name);
    const args = validate(tool, call, prepare(tool, call.arguments));
    assertJson(args);
    return { phase: "execute", arguments: args as Json, replay: replayPolicyOf(tool) };
  } catch {
    return undefined;
  }
}

export function createToolTask(services: AgentServices) {
  const definition: TaskDefinition<ToolTaskInput, ToolTaskCheckpoint, ToolTaskResult> = defineTask<
    ToolTaskInput,
    ToolTaskCheckpoint,
    ToolTaskResult
  >({
    name: "pi.tool",
    cleanUp: cleanUpFailedTool,
    version: 1,
    initial: () => ({ phase: "call" }),
    phases: {
      call: async (task, runtime, signal) => {
        // Each phase resolves its hooks and tools once, at its start (spec §7.5): a tool found
        // here keeps its implementation until its execution ends.
        const phase = atPhaseStart(services, task.conversationId);
        const hooks = phase.hooks();
        const call = await readCall(task);
        const api = hookApi(runtime, services);
        let tool: ToolDefinition;
        let args: unknown;
        try {
          if (!call)
            throw new ToolCallFailed("tool_unavailable", "the tool call was not found in its answer");
          tool = resolveToolFor(phase.tools(), call.name);
          args = validate(tool, call, prepare(tool, call.arguments), {
            toHooks: (hooks.beforeTool ?? []).length > 0,
          });
          for (const hook of hooks.beforeTool ?? []) {
            let decision: BeforeToolDecision | undefined;
            try {
              decision = await hook({ name: call.name, arguments: args }, api, { signal });
            } catch (error) {
              // An ordinary throw blocks the call with its text (spec §7.2); an abort propagates.
              if (signal.aborted) throw error;
              throw new ToolCallFailed("blocked", errorMessage(error));
            }
            if (decision && "block" in decision) throw new ToolCallFailed("blocked", decision.block);
            if (decision && "arguments" in decision) args = decision.arguments;
          }
          args = validate(tool, call, args);
        } catch (error) {
          if (!(error instanceof ToolCallFailed)) throw error;
          await settleError(runtime, task, call?.id ?? "?", call?.name ?? "?", error.code, error.message);
          return;
        }
        const replay = replayPolicyOf(tool);
        await runtime.commit((tx) => {
          updateSlot(tx, task.conversationId, task.id, (s) => ({ ...s, status: "running" }));
          return { status: "running", checkpoint: { phase: "execute", arguments: args as Json, replay } };
        });
        await execute(runtime, task, tool, call!, args, signal, hooks);
      },

      execute: async (task, runtime, signal) => {
        const phase = atPhaseStart(services, task.conversationId);
        const hooks = phase.hooks();
        const cp = task.state.checkpoint;
        const call = await readCall(task);
        let tool: ToolDefinition | undefined;
        try {
          tool = call ? resolveToolFor(phase.tools(), call.name) : undefined;
        } catch {
          tool = undefined;
        }
        if (!runtime.resumed) {
          // The intent was committed with the answer and nothing ran yet: execute it now.
          if (!call || !tool) {
            const message = call ? `tool ${call.name} is not available` : "the tool call was not found";
            await settleError(runtime, task, call?.id ?? "?", call?.name ?? "?", "tool_unavailable", message);
            return;
          }
          await execute(runtime, task, tool, call, cp.arguments, signal, hooks);
          return;
        }
        // Recovery: the intent committed, the result did not.
        if (call && tool && cp.replay === "safe" && replayPolicyOf(tool) === "safe") {
          await runtime.commit((tx) => {
            updateSlot(
              tx,
              task.conversationId,
              task.id,
              ({ output: _o, droppedBytes: _b, droppedLines: _l, ...s }) => ({ ...s, status: "running" }),
            );
            return undefined;
          });
          await execute(runtime, task, tool, call, cp.arguments, signal, hooks);
          return;
        }
        const partial = partialOutput(task);
        await settleError(
          runtime,
          task,
          call?.id ?? "?",
          call?.name ?? "?",
          "interrupted",
          "the tool call was interrupted before it reported a result; it may or may not have taken effect",
          partial,
          "failed",
        );
      },
    },
    abort: async (task, runtime) => {
      const phase = atPhaseStart(services, task.conversationId);
      const hooks = phase.hooks().onAbort ?? [];
      const call = await readCall(task).catch(() => undefined);
      if (call && hooks.length > 0 && !("nested" in task.input)) {
        await settleAbortedWithHooks(runtime, task, call, hooks, phase.tools());
        return;
      }
      await settleError(
        runtime,
        task,
        call?.id ?? "?",
        call?.name ?? "?",
        "aborted",
        "the tool call was aborted",
        partialOutput(task),
        "aborted",
      );
    },
  });

  async function readCall(task: ToolTaskRecord): Promise<ToolCall | undefined> {
    const input = task.input;
    if ("nested" in input)
      return {
        type: "toolCall",
        id: input.nested.callId,
        name: input.nested.name,
        arguments: input.nested.arguments as Record<string, unknown>,
      };
    const entry =
      services.entries.peek(task.conversationId)?.findLast((e) => e.id === input.assistant) ??
      (await services.core.entry(input.assistant));
    if (!entry) return undefined;
    for (const m of modelMessages(entry)) {
      if (m.role !== "assistant") continue;
      const call = m.content.find((b): b is ToolCall => b.type === "toolCall" && b.id === input.callId);
      if (call) return call;
    }
    return undefined;
  }

  function partialOutput(task: ToolTaskRecord): string | undefined {
    const state = (services.core.docNow(task.conversationId, DOC.live) as LiveState | undefined) ?? {};
    return state.tools?.find((s) => s.taskId === task.id)?.output;
  }

  /** Commit a harness-written error result and end the task (completed unless told otherwise). */
  async function settleError(
    runtime: Runtime,
    task: ToolTaskRecord,
    callId: string,
    name: string,
    code: string,
    message: string,
    partial?: string,
    status: "completed" | "failed" | "aborted" = "completed",
  ): Promise<void> {
    await runtime.commit((tx) => {
      const c = task.conversationId;
      if ("nested" in task.input) {
        const result: ToolResult = {
          content: [{ type: "text", text: `${code}: ${message}` }],
          isError: true,
        };
        return terminal(status, { isError: true, result }, message);
      }
      const entry = toolResultEntry(tx, c, callId, name, message, code, partial);
      slotDone(tx, c, task.id, entry.id);
      return terminal(status, { entryId: entry.id, isError: true }, message);
    });
  }

  /** The aborted result after the onAbort chain: each hook may replace it; the aborted diagnostic stays. */
  async function settleAbortedWithHooks(
    runtime: Runtime,
    task: ToolTaskRecord,
    call: ToolCall,
    hooks: NonNullable<AgentHooks["onAbort"]>,
    tools: ReadonlyMap<string, ToolDefinition>,
  ): Promise<void> {
    const c = task.conversationId;
    const partial = partialOutput(task);
    const retained: ToolResult = { content: partial ? [{ type: "text", text: partial }] : [], isError: true };
    let result = retained;
    const api = hookApi(runtime, services);
    for (const hook of hooks) {
      try {
        result =
          (await hook({ name: call.name, arguments: call.arguments }, result, api, {
            signal: runtime.signal,
          })) ?? result;
      } catch (error) {
        services.report(error);
      }
    }
    let limits = DEFAULT_OUTPUT_LIMITS;
    try {
      limits = limitsOf(resolveToolFor(tools, call.name));
    } catch {
      // An unresolvable tool's replacement is bounded by the defaults.
    }
    // The retained output was bounded while the call ran: only a hook's replacement is bounded
    // again (spec §8.4), so a tool replaced mid-call with tighter limits does not cut it.
    const bounded =
      result === retained
        ? { result: retained, diagnostics: [] }
        : boundResult({ ...result, isError: true }, limits);
    await runtime.commit((tx) => {
      const entry = appendResult(tx, c, call.id, call.name, bounded.result, [
        { severity: "error", code: "aborted", message: "the tool call was aborted" },
        ...bounded.diagnostics,
      ]);
      slotDone(tx, c, task.id, entry.id);
      return terminal("aborted", { entryId: entry.id, isError: true }, "the tool call was aborted");
    });
  }

  async function execute(
    runtime: Runtime,
    task: ToolTaskRecord,
    tool: ToolDefinition,
    call: ToolCall,
    args: unknown,
    signal: AbortSignal,
    hooks: AgentHooks,
  ): Promise<void> {
    const c = task.conversationId;
    const settings = services.settings();
    const limits = limitsOf(tool);
    const output = new OutputBuffer((change) => runtime.commit(change), {
      conversationId: c,
      taskId: task.id,
      limits,
      intervalMs: settings.outputIntervalMs,
      bytesPerSecond: settings.progressBytesPerSecond,
    });
    let position = 0;
    let ended = false;
    // Built per execution, off the line (a rerun after recovery builds it again); a throw is the
    // call's ordinary error result.
    let env: ExecutionEnv | undefined;
    let envFailed: { error: unknown } | undefined;
    try {
      env = await services.env(c, signal);
    } catch (error) {
      if (signal.aborted) throw error;
      envFailed = { error };
    }
    const binding: Binding = { services, runtime, signal, ended: () => ended };
    const api: ToolApi = {
      signal,
      toolCallId: call.id,
      taskId: task.id,
      conversationId: c,
      fs: services.fs,
      env,
      output: (chunk) => output.append(chunk),
      commit: (change) => toolCommit(binding, change),
      conversation: (id) => toolConversation(binding, id),
      entry: (id) => services.core.entry(id),
      memo: async (name, candidate) => {
        check(binding);
        return (await runtime.memo(`tool:${name}`, candidate as never, signal)) as never;
      },
      taskDefinition: (name) => services.taskDefinition(name),
      executeTool: async (name, nestedArgs, options) => {
        const key = options?.key ?? `#${position++}`;
        let created = false;
        const childId = await runtime.memo<number>(`nested:${key}`, (tx) => {
          created = true;
          return tx.createTask(
            definition,
            { nested: { name, arguments: nestedArgs as Json, callId: `${call.id}/${key}` } },
            { ownership: { kind: "task", taskId: task.id } },
          );
        });
        if (options?.sameAsRecorded && !created)
          await checkRecorded(runtime, childId!, key, name, nestedArgs);
        const child = await runtime.waitForTask(childId!, signal);
        const outcome = child.state.status === "terminal" ? child.state.outcome : undefined;
        const result =
          outcome && "result" in outcome ? (outcome.result as ToolTaskResult | undefined)?.result : undefined;
        return (
          result ?? {
            content: [
              { type: "text", text: `nested call ${name} ended ${outcome?.status ?? "without a result"}` },
            ],
            isError: true,
          }
        );
      },
      recordedCall: async (key) => {
        const childId = await runtime.memo<number>(`nested:${key}`);
        return childId === undefined ? undefined : recordedCallOf(await runtime.getTask(childId));
      },
      tools: () => services.tools(c),
    };
    let result: ToolResult;
    let failed = false;
    /** The result carries the retained output, so what its bounds dropped is reported. */
    let fromOutput = false;
    const started = performance.now();
    try {
      if (envFailed) throw envFailed.error;
      result = await tool.execute(args as never, api);
    } catch (error) {
      ended = true;
      if (signal.aborted) throw error;
      failed = true;
      const message = errorMessage(error);
      fromOutput = output.text !== "";
      result = { content: fromOutput ? [{ type: "text", text: output.text }] : [], isError: true };
      result = { ...result, content: [...result.content, { type: "text", text: `Error: ${message}` }] };
    }
    ended = true;
    const durationMs = Math.round(performance.now() - started);
    await output.stop();
    if (signal.aborted) throw signal.reason;
    for (const hook of hooks.afterTool ?? []) {
      try {
        result =
          (await hook({ name: call.name, arguments: args, result }, hookApi(runtime, services), {
            signal,
          })) ?? result;
      } catch (error) {
        // Reported, and the next hook sees the result as it was (spec §7.2); an abort propagates.
        if (signal.aborted) throw error;
        services.report(error);
      }
    }
    // Without content of its own, the result is the retained output, and what its bounds dropped.
    const streamed = output.retained;
    if (result.content.length === 0 && streamed.text !== "") {
      fromOutput = true;
      result = { ...result, content: [{ type: "text", text: streamed.text }] };
    }
    const bounded = boundResult(result, limits);
    const dropped = fromOutput ? truncatedDiagnostic(streamed, limits) : undefined;
    const diagnostics = [
      ...(failed
        ? [{ severity: "error" as const, code: "tool_error", message: "the tool threw an error" }]
        : []),
      ...(dropped ? [dropped] : []),
      ...bounded.diagnostics,
    ];
    await runtime.commit((tx) => {
      const value: ToolTaskResult = {
        isError: bounded.result.isError === true,
        ...(bounded.result.control ? { control: bounded.result.control } : {}),
      };
      if ("nested" in task.input)
        return terminal(failed ? "failed" : "completed", { ...value, result: bounded.result }, "tool_error");
      const entry = appendResult(tx, c, call.id, call.name, bounded.result, diagnostics, durationMs);
      slotDone(tx, c, task.id, entry.id);
      return terminal(failed ? "failed" : "completed", { ...value, entryId: entry.id }, "tool_error");
    });
  }

  return definition;
}

function recordedCallOf(child: TaskRecord | undefined): { name: string; arguments: Json } | undefined {
  const input = child?.input as ToolTaskInput | undefined;
  if (!input || !("nested" in input)) return undefined;
  return { name: input.nested.name, arguments: input.nested.arguments };
}

/** Rejects with `NestedCallMismatch` when the task recorded under `key` is another call. */
async function checkRecorded(
  runtime: Runtime,
  childId: number,
  key: string,
  name: string,
  args: unknown,
): Promise<void> {
  const recorded = recordedCallOf(await runtime.getTask(childId));
  if (!recorded) return;
  if (recorded.name !== name || JSON.stringify(recorded.arguments) !== JSON.stringify(args ?? null))
    throw new NestedCallMismatch(
      key,
      { name: recorded.name, arguments: recorded.arguments },
      { name, arguments: args },
    );
}

function terminal(
  status: "completed" | "failed" | "aborted",
  result: ToolTaskResult,
  message: string,
): NextTaskState<ToolTaskCheckpoint, ToolTaskResult> {
  if (status === "completed") return { status: "terminal", outcome: { status: "completed", result } };
  if (status === "failed")
    return { status: "terminal", outcome: { status: "failed", error: { message }, result } };
  return { status: "terminal", outcome: { status: "aborted", reason: message, result } };
}
