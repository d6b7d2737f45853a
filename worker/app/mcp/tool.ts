/**
 * An MCP server's tools as the agent offers them (issue 31 part 2): one extension per server,
 * `mcp:<server>`, so a conversation selects or drops a server like any other extension; each tool is
 * `<server>_<tool>` (a server's name has no `_`, so the split is unambiguous). Invariants:
 * - a call is an ordinary durable `pi.tool` task: its replay policy is `unsafe` unless the server
 *   marks the tool `readOnlyHint` or `idempotentHint`, so a crash mid-call gives the model the
 *   `interrupted` result instead of calling the server again;
 * - the server's hints never make a tool `readOnly` for approval: under the approval policy every MCP
 *   tool asks first unless the person says otherwise;
 * - the address and the token are read at the call (`target()`), as API keys are: a changed token is
 *   used from the next call on, and no token is kept in the tool's definition;
 * - a server that does not answer, or answers with what is refused, gives the model an error result
 *   saying so in words (never the token), not an exception.
 */
import type { Extension } from "../../agent/extensions/types.ts";
import { errorResult, type ToolDefinition, type ToolResult } from "../../agent/tools/contract.ts";
import type { Json } from "../../core/types.ts";
import {
  connectMcp,
  McpAnswerRefused,
  type McpLimits,
  type McpTarget,
  type McpToolRecord,
  McpUnreachable,
} from "./client.ts";

export const MCP_EXTENSION_PREFIX = "mcp:";
export const mcpExtensionName = (server: string): string => `${MCP_EXTENSION_PREFIX}${server}`;
export const isMcpExtension = (name: string): boolean => name.startsWith(MCP_EXTENSION_PREFIX);
export const mcpToolName = (server: string, tool: string): string => `${server}_${tool}`;

export interface McpToolOptions {
  /** The server's address and token now (undefined: it was removed from the settings). */
  readonly target: () => McpTarget | undefined;
  readonly limits?: Partial<McpLimits>;
  readonly fetch?: typeof fetch;
}

const sentence = (text: string) => `${text.charAt(0).toUpperCase()}${text.slice(1)}`;

/** The tool the model calls for `tool` of `server`. */
export function createMcpTool(server: string, tool: McpToolRecord, options: McpToolOptions): ToolDefinition {
  const safe = tool.readOnlyHint === true || tool.idempotentHint === true;
  return Object.freeze({
    name: mcpToolName(server, tool.name),
    label: `${tool.title ?? tool.name} (MCP server ${server})`,
    description: tool.description || `The tool ${tool.name} of the MCP server ${server}.`,
    parameters: tool.inputSchema as never,
    replay: safe ? ("safe" as const) : ("unsafe" as const),
    async execute(args: unknown, api: Parameters<ToolDefinition["execute"]>[1]): Promise<ToolResult> {
      const details = { server, tool: tool.name };
      const target = options.target();
      if (!target)
        return errorResult(`The MCP server "${server}" is no longer in the settings.`, {
          ...details,
          code: "mcp_removed",
        });
      let connection: Awaited<ReturnType<typeof connectMcp>> | undefined;
      try {
        connection = await connectMcp(target, {
          signal: api.signal,
          ...(options.limits ? { limits: options.limits } : {}),
          ...(options.fetch ? { fetch: options.fetch } : {}),
        });
        const result = await connection.callTool(tool.name, (args ?? {}) as Json, api.signal);
        return {
          content: result.content.length > 0 ? result.content : [{ type: "text", text: "(no content)" }],
          details: {
            ...details,
            ...(result.structured !== undefined ? { structured: result.structured } : {}),
          },
          ...(result.isError ? { isError: true } : {}),
        };
      } catch (error) {
        if (api.signal.aborted) throw error;
        if (error instanceof McpUnreachable || error instanceof McpAnswerRefused)
          return errorResult(`${sentence(error.message)}.`, { ...details, code: error.code });
        throw error;
      } finally {
        await connection?.close();
      }
    },
  }) as ToolDefinition;
}

/** The extension `mcp:<server>` with the server's cached tools. */
export function mcpExtension(
  server: string,
  tools: readonly McpToolRecord[],
  options: McpToolOptions,
): Extension {
  return Object.freeze({
    name: mcpExtensionName(server),
    tools: Object.freeze(tools.map((t) => createMcpTool(server, t, options))),
  });
}
