/**
 * The tool task's abort handler: the call ends `aborted` with an error result. A top-level call
 * whose conversation has `onAbort` hooks gets the aborted result its slot's durable output, details
 * and diagnostics make, passed through those hooks (each may replace it; the `aborted` diagnostic
 * stays); any other call gets a harness-written
 * `aborted` result carrying the partial output.
 */
import type { ToolCall } from "@mariozechner/pi-ai";
import { hookApi } from "../../extensions/hooks.ts";
import { type AgentHooks, atPhaseStart } from "../../services.ts";
import type { ToolDefinition, ToolResult } from "../contract.ts";
import { DEFAULT_OUTPUT_LIMITS, limitsOf } from "../limits.ts";
import { appendResult, boundResult, slotDone } from "../results.ts";
import { readCall, resolveToolFor } from "./resolve.ts";
import { partialOutput, settleError, terminal } from "./settle.ts";
import type { ToolTaskContext, ToolTaskRecord, ToolTaskRuntime } from "./types.ts";

const ABORTED = { severity: "error" as const, code: "aborted", message: "the tool call was aborted" };

export async function abortToolCall(
  ctx: ToolTaskContext,
  task: ToolTaskRecord,
  runtime: ToolTaskRuntime,
): Promise<void> {
  const phase = atPhaseStart(ctx.services, task.conversationId);
  const hooks = phase.hooks().onAbort ?? [];
  const call = await readCall(ctx.services, task).catch(() => undefined);
  if (call && hooks.length > 0 && !("nested" in task.input)) {
    await settleAbortedWithHooks(ctx, runtime, task, call, hooks, phase.tools());
    return;
  }
  await settleError(
    runtime,
    task,
    call?.id ?? "?",
    call?.name ?? "?",
    "aborted",
    "the tool call was aborted",
    partialOutput(ctx.services, task),
    "aborted",
  );
}

/** The aborted result after the onAbort chain: each hook may replace it; the aborted diagnostic stays. */
async function settleAbortedWithHooks(
  ctx: ToolTaskContext,
  runtime: ToolTaskRuntime,
  task: ToolTaskRecord,
  call: ToolCall,
  hooks: NonNullable<AgentHooks["onAbort"]>,
  tools: ReadonlyMap<string, ToolDefinition>,
): Promise<void> {
  const c = task.conversationId;
  const partial = partialOutput(ctx.services, task);
  // The hooks get the result the harness would write (spec §8.4): the slot's durable output, details
  // and diagnostics, the harness's `aborted` one last.
  const recorded = [...(partial.diagnostics ?? []), ABORTED];
  const retained: ToolResult = {
    content: partial.output ? [{ type: "text", text: partial.output }] : [],
    isError: true,
    ...(partial.details !== undefined ? { details: partial.details } : {}),
    diagnostics: recorded,
  };
  let result = retained;
  const api = hookApi(runtime, ctx.services);
  for (const hook of hooks) {
    try {
      result =
        (await hook({ id: call.id, name: call.name, arguments: call.arguments }, result, api, {
          signal: runtime.signal,
        })) ?? result;
    } catch (error) {
      // Reported, and the next runs (spec §7.2); once this invocation is signalled (the harness
      // closing), the error propagates: abort errors from any hook do.
      if (runtime.signal.aborted) throw error;
      ctx.services.report(error);
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
    // The chain's diagnostics (those it was given, unless a hook replaced them), the `aborted` one
    // kept, then the truncation of a hook's content (spec §7.3, §8.4).
    const { diagnostics: given, ...result } = bounded.result;
    const chained = given ?? recorded;
    const entry = appendResult(tx, c, call.id, call.name, result, [
      ...chained,
      ...(chained.some((d) => d.severity === "error" && d.code === "aborted") ? [] : [ABORTED]),
      ...bounded.diagnostics,
    ]);
    slotDone(tx, c, task.id, entry.id);
    return terminal("aborted", { entryId: entry.id, isError: true }, "the tool call was aborted");
  });
}
