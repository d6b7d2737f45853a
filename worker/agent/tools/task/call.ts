/**
 * The `call` phase: from the model's tool call to a committed intent. Resolve the tool, validate the
 * arguments, run the `beforeTool` hooks (each may block the call or rewrite its arguments) and
 * validate again, then apply the approval policy (tools/approval.ts: `never` ends the call with a
 * `not_allowed` error result, `ask` commits the `approval` wait, task/approval.ts), else commit the
 * final arguments and the replay policy (checkpoint `execute`) and run the tool. A call that cannot run ends here with an error result. With no `beforeTool` hook there
 * and a policy that lets the call run freely, there is nothing between the answer and the intent, so the generation records the intent in the commit
 * that appends the answer (`intentAtCreation`) and the task never enters this phase.
 */
import type { ToolCall } from "@mariozechner/pi-ai";
import type { Tx } from "../../../core/define.ts";
import { errorMessage } from "../../../core/errors.ts";
import { assertJson, sealBuilt } from "../../../core/persist.ts";
import type { ConversationId, Json, RunningTask } from "../../../core/types.ts";
import { type HookApi, hookApi } from "../../extensions/hooks.ts";
import { agentDoc } from "../../records.ts";
import {
  type AgentHooks,
  type AgentServices,
  atPhaseStart,
  type BeforeToolDecision,
} from "../../services.ts";
import { policyOf } from "../approval.ts";
import { replayPolicyOf, type ToolDefinition } from "../contract.ts";
import { updateSlot } from "../results.ts";
import { approvalPhase, enterApproval } from "./approval.ts";
import { runTool } from "./execute.ts";
import { prepare, readCall, resolveToolFor, ToolCallFailed, validate } from "./resolve.ts";
import { settleError } from "./settle.ts";
import type {
  ToolTaskCheckpoint,
  ToolTaskContext,
  ToolTaskInput,
  ToolTaskResult,
  ToolTaskRuntime,
} from "./types.ts";

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
  const state = agentDoc.read(tx, c);
  const agent = services.agent(c, state);
  if ((agent.hooks.beforeTool ?? []).length > 0) return undefined;
  try {
    const tool = resolveToolFor(agent.tools, call.name);
    // A call that asks first (or never runs) decides that in its own `call` phase.
    if (policyOf(services.settings(), state, tool) !== "allow") return undefined;
    const args = validate(tool, call, prepare(tool, call.arguments));
    assertJson(args);
    // Checked arguments in a wrapper built here: sealed by its members, not walked again.
    return sealBuilt({ phase: "execute" as const, arguments: args as Json, replay: replayPolicyOf(tool) });
  } catch {
    return undefined;
  }
}

export async function callPhase(
  ctx: ToolTaskContext,
  task: RunningTask<ToolTaskInput, Extract<ToolTaskCheckpoint, { phase: "call" }>, ToolTaskResult>,
  runtime: ToolTaskRuntime,
  signal: AbortSignal,
): Promise<void> {
  // Each phase resolves its hooks and tools once, at its start (spec §7.5): a tool found
  // here keeps its implementation until its execution ends.
  const phase = atPhaseStart(ctx.services, task.conversationId);
  const hooks = phase.hooks();
  const call = await readCall(ctx.services, task);
  const api = hookApi(runtime, ctx.services);
  let decided: { tool: ToolDefinition; args: unknown };
  try {
    if (!call) throw new ToolCallFailed("tool_unavailable", "the tool call was not found in its answer");
    decided = await decideArguments(phase.tools(), hooks, call, api, signal);
  } catch (error) {
    if (!(error instanceof ToolCallFailed)) throw error;
    await settleError(runtime, task, call?.id ?? "?", call?.name ?? "?", error.code, error.message);
    return;
  }
  const { tool, args } = decided;
  const replay = replayPolicyOf(tool);
  // The model's calls are judged by the approval policy; a nested call runs under its caller's.
  const policy =
    "nested" in task.input ? "allow" : policyOf(phase.settings(), phase.readAgent(task.conversationId), tool);
  if (policy === "never") {
    const message = `the tool ${call!.name} is set never to run in this conversation; the call did not run`;
    await settleError(runtime, task, call!.id, call!.name, "not_allowed", message);
    return;
  }
  if (policy === "ask") {
    const waiting = await runtime.commit((tx) => enterApproval(tx, task, args, replay));
    await approvalPhase(ctx, waiting as Parameters<typeof approvalPhase>[1], runtime, signal);
    return;
  }
  await runtime.commit((tx) => {
    updateSlot(tx, task.conversationId, task.id, (s) => ({ ...s, status: "running" }));
    return { status: "running", checkpoint: { phase: "execute", arguments: args as Json, replay } };
  });
  await runTool(ctx, runtime, task, tool, call!, args, phase);
}

/**
 * The tool and the arguments the call runs with: resolved, repaired and validated, then through
 * the `beforeTool` chain and validated again. Throws `ToolCallFailed` for a call that must not run.
 */
async function decideArguments(
  tools: ReadonlyMap<string, ToolDefinition>,
  hooks: AgentHooks,
  call: ToolCall,
  api: HookApi,
  signal: AbortSignal,
): Promise<{ tool: ToolDefinition; args: unknown }> {
  const tool = resolveToolFor(tools, call.name);
  let args = validate(tool, call, prepare(tool, call.arguments), {
    toHooks: (hooks.beforeTool ?? []).length > 0,
  });
  for (const hook of hooks.beforeTool ?? []) {
    let decision: BeforeToolDecision | undefined;
    try {
      decision = await hook({ id: call.id, name: call.name, arguments: args }, api, { signal });
    } catch (error) {
      // An ordinary throw blocks the call with its text (spec §7.2); an abort propagates.
      if (signal.aborted) throw error;
      throw new ToolCallFailed("blocked", errorMessage(error));
    }
    // A member set to undefined is absent (the spec's decision is { arguments?, block? }): an
    // empty block still blocks, an undefined one does not; undefined arguments replace nothing.
    const { block, arguments: replaced } = (decision ?? {}) as { block?: string; arguments?: unknown };
    if (block !== undefined) throw new ToolCallFailed("blocked", block);
    if (replaced !== undefined) args = replaced;
  }
  return { tool, args: validate(tool, call, args) };
}
