/**
 * The `execute` phase and the execution itself. The phase runs the committed intent: at once when
 * the intent was committed with the answer and nothing ran yet; after an interruption
 * (`runtime.resumed`) it is recovery: a call that is `safe` both as stored and as registered now
 * runs again with the stored arguments, anything else records an `interrupted` error result built
 * from the durable partial output. An execution that throws `HarnessClosed` (the engine closing under
 * it, as during a handover's grace) commits nothing, like an aborted one. `runTool` builds the call's environment and `ToolApi`, runs the
 * tool with its output streamed (throttled, bounded) into `pi.live`, runs the `afterTool` hooks and
 * commits the bounded result with the task's terminal state.
 */
import type { ToolCall } from "@mariozechner/pi-ai";
import { errorMessage, HarnessClosed } from "../../../core/errors.ts";
import type { RunningTask } from "../../../core/types.ts";
import type { ExecutionEnv } from "../../env.ts";
import { hookApi } from "../../extensions/hooks.ts";
import { type AgentHooks, type AgentServices, atPhaseStart } from "../../services.ts";
import { replayPolicyOf, type ToolDefinition, type ToolResult } from "../contract.ts";
import { limitsOf, type OutputLimits, truncatedDiagnostic } from "../limits.ts";
import {
  appendResult,
  boundResult,
  checkDiagnostic,
  OutputBuffer,
  slotDone,
  updateSlot,
} from "../results.ts";
import { readCall, resolveToolFor } from "./resolve.ts";
import { partialOutput, settleError, terminal } from "./settle.ts";
import { toolApi } from "./tool-api.ts";
import type {
  ToolTaskCheckpoint,
  ToolTaskContext,
  ToolTaskInput,
  ToolTaskRecord,
  ToolTaskResult,
  ToolTaskRuntime,
} from "./types.ts";

export async function executePhase(
  ctx: ToolTaskContext,
  task: RunningTask<ToolTaskInput, Extract<ToolTaskCheckpoint, { phase: "execute" }>, ToolTaskResult>,
  runtime: ToolTaskRuntime,
): Promise<void> {
  const phase = atPhaseStart(ctx.services, task.conversationId);
  const cp = task.state.checkpoint;
  const call = await readCall(ctx.services, task);
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
    await runTool(ctx, runtime, task, tool, call, cp.arguments, phase);
    return;
  }
  // Recovery: the intent committed, the result did not. A safe call runs again from a clean slot:
  // the earlier execution's output, details and diagnostics are removed (spec §9.4).
  if (call && tool && cp.replay === "safe" && replayPolicyOf(tool) === "safe") {
    await runtime.commit((tx) => {
      updateSlot(
        tx,
        task.conversationId,
        task.id,
        ({ output: _o, droppedBytes: _b, droppedLines: _l, details: _d, diagnostics: _g, ...s }) => ({
          ...s,
          status: "running",
        }),
      );
      return undefined;
    });
    await runTool(ctx, runtime, task, tool, call, cp.arguments, phase);
    return;
  }
  await settleError(
    runtime,
    task,
    call?.id ?? "?",
    call?.name ?? "?",
    "interrupted",
    "the tool call was interrupted before it reported a result; it may or may not have taken effect",
    partialOutput(ctx.services, task),
    "failed",
  );
}

/** What the tool's execution gave, after the `afterTool` hooks, before the bounds. */
interface Execution {
  result: ToolResult;
  /** The tool threw (or its environment could not be built). */
  failed: boolean;
  /** The result carries the retained output, so what its bounds dropped is reported. */
  fromOutput: boolean;
  /** Absent when execute() never ran (the environment could not be built). */
  durationMs: number | undefined;
}

/**
 * Run the tool with the committed arguments and commit its result (see the header). The
 * invocation's signal is read from the runtime where it is handed on (the environment's builder,
 * the tool's `api.signal`, hooks), so a call nobody listens to makes none; `runtime.aborted` looks.
 */
export async function runTool(
  ctx: ToolTaskContext,
  runtime: ToolTaskRuntime,
  task: ToolTaskRecord,
  tool: ToolDefinition,
  call: ToolCall,
  args: unknown,
  phase: AgentServices,
): Promise<void> {
  const { services } = ctx;
  const hooks = phase.hooks();
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
  let ended = false;
  // Built per execution, off the line (a rerun after recovery builds it again); a throw is the
  // call's ordinary error result.
  let env: ExecutionEnv | undefined;
  let envFailed: { error: unknown } | undefined;
  try {
    env = services.envBuilder ? await services.env(c, runtime.signal) : undefined;
  } catch (error) {
    if (runtime.aborted) throw error;
    envFailed = { error };
  }
  const api = toolApi(ctx, { runtime, task, call, env, output, ended: () => ended, phase });
  let result: ToolResult;
  let failed = false;
  let fromOutput = false;
  const started = performance.now();
  try {
    if (envFailed) throw envFailed.error;
    result = await tool.execute(args as never, api);
    // A result's own diagnostics must be diagnostics: a bad one fails the call like a throw.
    if (result?.diagnostics !== undefined) {
      if (!Array.isArray(result.diagnostics)) throw new TypeError("a result's diagnostics must be a list");
      result = { ...result, diagnostics: result.diagnostics.map(checkDiagnostic) };
    }
  } catch (error) {
    ended = true;
    // The engine closing under the call (a handover's grace: the harness is sealed, its waits and
    // calls refuse with HarnessClosed while the signal has not fired yet) is not the call's failure:
    // nothing is committed, the task stays running and the next engine runs it again.
    if (runtime.aborted || error instanceof HarnessClosed) {
      // The call ended here too: output() and the other progress calls refuse from now on (spec
      // §7.3), as after any other end (break 30C: an aborted call's api kept taking output).
      await output.stop();
      throw error;
    }
    failed = true;
    const message = errorMessage(error);
    fromOutput = output.text !== "";
    result = { content: fromOutput ? [{ type: "text", text: output.text }] : [], isError: true };
    result = { ...result, content: [...result.content, { type: "text", text: `Error: ${message}` }] };
  }
  ended = true;
  // How long execute() took; a call whose environment could not be built never executed, so its
  // result has none (spec §8.4; draw 38 D).
  const durationMs = envFailed ? undefined : Math.round(performance.now() - started);
  await output.stop();
  if (runtime.aborted) {
    output.settle(runtime.signal.reason);
    throw runtime.signal.reason;
  }
  // Without details of its own, the result gets the last ones the call reported (spec §7.3).
  if (result.details === undefined && output.details) result = { ...result, details: output.details.value };
  result = await afterTool(ctx, runtime, hooks, call, args, result);
  try {
    await commitResult(runtime, task, call, limits, output, { result, failed, fromOutput, durationMs });
  } catch (error) {
    output.settle(error);
    throw error;
  }
  // The result's commit is the last flush: a details() promise still pending settles with it.
  output.settle();
}

/** The `afterTool` chain: each hook may replace the result; a throw is reported and skipped. */
async function afterTool(
  ctx: ToolTaskContext,
  runtime: ToolTaskRuntime,
  hooks: AgentHooks,
  call: ToolCall,
  args: unknown,
  result: ToolResult,
): Promise<ToolResult> {
  for (const hook of hooks.afterTool ?? []) {
    try {
      result =
        (await hook(
          { id: call.id, name: call.name, arguments: args, result },
          hookApi(runtime, ctx.services),
          {
            signal: runtime.signal,
          },
        )) ?? result;
    } catch (error) {
      // Reported, and the next hook sees the result as it was (spec §7.2); an abort propagates.
      if (runtime.aborted) throw error;
      ctx.services.report(error);
    }
  }
  return result;
}

/** Bound the result, add its diagnostics, and commit it with the task's terminal state. */
async function commitResult(
  runtime: ToolTaskRuntime,
  task: ToolTaskRecord,
  call: ToolCall,
  limits: OutputLimits,
  buffer: OutputBuffer,
  execution: Execution,
): Promise<void> {
  const streamed = buffer.retained;
  const c = task.conversationId;
  const { failed, durationMs } = execution;
  let { result, fromOutput } = execution;
  // Without content of its own, the result is the retained output, and what its bounds dropped.
  if (result.content.length === 0 && streamed.text !== "") {
    fromOutput = true;
    result = { ...result, content: [{ type: "text", text: streamed.text }] };
  }
  const { diagnostics: given, ...rest } = result;
  const bounded = boundResult(rest, limits);
  const dropped = fromOutput ? truncatedDiagnostic(streamed, limits) : undefined;
  // Those recorded through the api, then the result's, then the harness's (spec §7.3).
  const diagnostics = [
    ...buffer.diagnostics,
    ...(given ?? []),
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
    if ("nested" in task.input) {
      const nested = diagnostics.length > 0 ? { ...bounded.result, diagnostics } : bounded.result;
      return terminal(failed ? "failed" : "completed", { ...value, result: nested }, "tool_error");
    }
    const entry = appendResult(tx, c, call.id, call.name, bounded.result, diagnostics, durationMs);
    slotDone(tx, c, task.id, entry.id);
    return terminal(failed ? "failed" : "completed", { ...value, entryId: entry.id }, "tool_error");
  });
}
