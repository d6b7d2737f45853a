/**
 * Finding what a tool task runs: the call (in its assistant answer, or the nested input), the tool
 * of that name among the conversation's tools, and the model's arguments repaired and validated. A
 * failure here is a `ToolCallFailed` carrying the code of the error result the task writes
 * (`tool_unavailable`, `invalid_arguments`, `blocked`); anything else is not the call's fault.
 */
import type { ToolCall } from "@mariozechner/pi-ai";
import { errorMessage } from "../../../core/errors.ts";
import { modelMessages } from "../../records.ts";
import type { AgentServices } from "../../services.ts";
import { validateToolArguments } from "../arguments.ts";
import { type ToolDefinition, toPiTool } from "../contract.ts";
import type { ToolTaskRecord } from "./types.ts";

export class ToolCallFailed extends Error {
  constructor(
    readonly code: "tool_unavailable" | "invalid_arguments" | "blocked",
    message: string,
  ) {
    super(message);
  }
}

/** The tool of that name among the conversation's tools (its selection and filter applied). */
export function resolveToolFor(tools: ReadonlyMap<string, ToolDefinition>, name: string): ToolDefinition {
  const tool = tools.get(name);
  if (!tool) throw new ToolCallFailed("tool_unavailable", `tool ${name} is not available`);
  return tool;
}

/** The tool's repair of the model's arguments (spec §7.3), or them unchanged; a throw is invalid_arguments. */
export function prepare(tool: ToolDefinition, args: unknown): unknown {
  if (!tool.prepareArguments) return args;
  try {
    return tool.prepareArguments(args);
  } catch (error) {
    throw new ToolCallFailed("invalid_arguments", errorMessage(error));
  }
}

/** `toHooks`: beforeTool hooks get the result (as before, a copy of their own, not yet frozen). */
export function validate(
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

/** The task's call: its nested input, or the tool call in its assistant entry (undefined if gone). */
export async function readCall(services: AgentServices, task: ToolTaskRecord): Promise<ToolCall | undefined> {
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
