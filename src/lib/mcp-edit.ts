/**
 * Editing an MCP server in the settings: what the form holds, and the change it sends
 * (`mcp.update`). The saved token is never shown back, so the form's token field starts empty and
 * an empty field keeps the saved one; "remove the saved token" sends `null`. Only what differs from
 * the server as listed is sent. Pure: unit-tested in tests/unit/tab/mcp-edit.test.ts.
 */
import type { McpServerChange, McpServerView } from "../../worker/protocol/index.ts";

export interface McpEditForm {
  name: string;
  url: string;
  /** A new token; empty: keep the saved one. */
  token: string;
  /** Remove the saved token (when no new one is given). */
  dropToken: boolean;
}

/** The form for `server`: its name and address, no token. */
export function editFormOf(server: Pick<McpServerView, "name" | "url">): McpEditForm {
  return { name: server.name, url: server.url, token: "", dropToken: false };
}

/** The change the form asks for (empty when it asks for none). */
export function mcpChange(
  server: Pick<McpServerView, "name" | "url" | "hasToken">,
  form: McpEditForm,
): McpServerChange {
  const name = form.name.trim();
  const url = form.url.trim();
  const token = form.token.trim();
  return {
    ...(name !== server.name ? { name } : {}),
    ...(url !== server.url ? { url } : {}),
    ...(token ? { token } : form.dropToken && server.hasToken ? { token: null } : {}),
  };
}
