import { defineExtension } from "../../extensions/define.ts";
import type { ToolDefinition } from "../contract.ts";
import { createCodemodeTool } from "./codemode.ts";
import { createEditTool } from "./edit.ts";
import { createLsTool } from "./ls.ts";
import { createReadTool } from "./read.ts";
import { createSleepTool } from "./sleep.ts";
import { createSubagentTool } from "./subagent.ts";
import { createWriteTool } from "./write.ts";

export {
  createCodemodeTool,
  createEditTool,
  createLsTool,
  createReadTool,
  createSleepTool,
  createSubagentTool,
  createWriteTool,
};

/** The built-in tools (the workspace's, then `sleep`, `subagent` and `codemode`), in the order the model is shown them. */
export const builtinTools: readonly ToolDefinition[] = Object.freeze([
  createLsTool(),
  createReadTool(),
  createWriteTool(),
  createEditTool(),
  createSleepTool(),
  createSubagentTool(),
  createCodemodeTool(),
]);

/** The built-in tools as an extension like any other (spec §7.1): install it to offer them. */
export const builtinToolsExtension = defineExtension({ name: "workspace-tools", tools: builtinTools });

/** A name -> tool lookup over `tools` (the built-ins by default). */
export function toolRegistry(
  tools: readonly ToolDefinition[] = builtinTools,
): ReadonlyMap<string, ToolDefinition> {
  const map = new Map<string, ToolDefinition>();
  for (const tool of tools) {
    if (map.has(tool.name)) throw new Error(`duplicate tool name ${tool.name}`);
    map.set(tool.name, tool);
  }
  return map;
}

const builtins = toolRegistry();

/** The built-in tool of that name, if any. */
export function toolByName(name: string): ToolDefinition | undefined {
  return builtins.get(name);
}
