/**
 * The builders of extensions (spec §7.1, §7.3, §7.4): identity functions for type inference that
 * check nothing (the registry checks at install).
 */
import type { ToolDefinition } from "../tools/contract.ts";
import type { Extension, PromptSection, Wrap } from "./types.ts";

export function defineExtension<E extends Extension>(extension: E): E {
  return extension;
}

export function section(
  key: string,
  render: PromptSection["render"],
  options: { tag?: boolean } = {},
): PromptSection {
  return { key, render, ...(options.tag !== undefined ? { tag: options.tag } : {}) };
}

/** Decorate the tool of that name (an object stands for its name) wherever the extension is selected. */
export function wrapTool(
  tool: string | { readonly name: string },
  wrap: (tool: ToolDefinition) => ToolDefinition,
): Wrap {
  return { tool: typeof tool === "string" ? tool : tool.name, wrap };
}

export function wrapSection(key: string, wrap: (section: PromptSection) => PromptSection): Wrap {
  return { section: key, wrap };
}
