/**
 * Editing an MCP server (worker/app/mcp/store.ts `updateMcpServer`, the `mcp.update` call) against
 * real MCP servers on loopback (tests/unit/app/mcp-server.ts): a rename keeps the token and moves the
 * server's extension in every conversation's selection; a new address and token are used from then on
 * (the server must answer, else nothing is written); `null` removes the token; the token never shows
 * in a view. On a server space (tokens from the server's secrets) a change carrying a token is
 * refused, and the secret is what the list uses.
 */
import { afterEach, expect, test } from "vitest";
import { AgentHarness } from "../../../worker/agent/harness.ts";
import { SETTINGS_CONVERSATION } from "../../../worker/agent/models/keys.ts";
import { DOC } from "../../../worker/agent/records.ts";
import { McpUnreachable } from "../../../worker/app/mcp/client.ts";
import {
  addMcpServer,
  MCP_SERVERS_DOC,
  McpServerInvalid,
  mcpApi,
  storedMcpServers,
  updateMcpServer,
} from "../../../worker/app/mcp/store.ts";
import { memoryStore } from "../../../worker/testing.ts";
import { startMcpServer, type TestMcpServer } from "./mcp-server.ts";

const servers: TestMcpServer[] = [];
const harnesses: AgentHarness[] = [];
afterEach(async () => {
  for (const h of harnesses.splice(0)) await h.close().catch(() => undefined);
  for (const s of servers.splice(0)) await s.stop();
});

async function server(options: Parameters<typeof startMcpServer>[0] = {}) {
  const s = await startMcpServer(options);
  servers.push(s);
  return s;
}

async function engine(): Promise<AgentHarness> {
  const h = await AgentHarness.open(await memoryStore());
  harnesses.push(h);
  return h;
}

test("a rename keeps the token and renames the server's extension in every conversation's selection", async () => {
  const s = await server({ token: "token-one-123456" });
  const h = await engine();
  await addMcpServer(h, { name: "docs", url: s.url, token: "token-one-123456" });
  const c = (await h.createConversation({ ownership: { kind: "ownerless" } })).id;
  await h.requireConversation(c).configure({ extensions: { remove: ["mcp:docs"] } });
  const view = await updateMcpServer(h, "docs", { name: "notes" });
  expect(view).toMatchObject({ name: "notes", url: s.url, hasToken: true });
  expect(view.tools.map((t) => t.name)).toContain("notes_echo");
  expect(storedMcpServers(h).map((x) => [x.name, x.token])).toEqual([["notes", "token-one-123456"]]);
  expect((h.docNow(c, DOC.agent) as { extensions?: unknown }).extensions).toEqual({ remove: ["mcp:notes"] });
  expect(h.extensions.snapshot().extension("mcp:docs")).toBeUndefined();
  expect(h.extensions.snapshot().extension("mcp:notes")).toBeDefined();
  expect(JSON.stringify(await mcpApi(async () => h).list())).not.toContain("token-one-123456");
});

test("a new address and token are used from then on; one that does not answer writes nothing; null removes the token", async () => {
  const first = await server({ token: "token-first-1234" });
  const second = await server({ token: "token-second-5678" });
  const open = await server();
  const h = await engine();
  await addMcpServer(h, { name: "docs", url: first.url, token: "token-first-1234" });
  const moved = await updateMcpServer(h, "docs", { url: second.url, token: "token-second-5678" });
  expect(moved).toMatchObject({ url: second.url, hasToken: true });
  // Back to the first address with the second token kept: refused by that server, nothing written.
  const before = h.docNow(SETTINGS_CONVERSATION, MCP_SERVERS_DOC);
  await expect(updateMcpServer(h, "docs", { url: first.url })).rejects.toBeInstanceOf(McpUnreachable);
  expect(h.docNow(SETTINGS_CONVERSATION, MCP_SERVERS_DOC)).toBe(before);
  // A server that wants none: the token removed.
  const cleared = await updateMcpServer(h, "docs", { url: open.url, token: null });
  expect(cleared).toMatchObject({ url: open.url, hasToken: false });
  expect(storedMcpServers(h)[0]!.token).toBeUndefined();
});

test("a bad change, an unknown server or a taken name is refused with nothing written", async () => {
  const s = await server();
  const h = await engine();
  await addMcpServer(h, { name: "docs", url: s.url, token: null });
  await addMcpServer(h, { name: "more", url: s.url, token: null });
  const before = h.docNow(SETTINGS_CONVERSATION, MCP_SERVERS_DOC);
  for (const [name, change] of [
    ["docs", { name: "Bad Name" }],
    ["docs", { url: "ftp://x" }],
    ["docs", { name: "more" }],
    ["nope", { url: s.url }],
  ] as const)
    await expect(updateMcpServer(h, name, change)).rejects.toBeInstanceOf(McpServerInvalid);
  expect(h.docNow(SETTINGS_CONVERSATION, MCP_SERVERS_DOC)).toBe(before);
});

test("on a server space: a change carrying a token is refused; the server's secret is what lists", async () => {
  const s = await server({ token: "the-servers-secret-99" });
  const h = await engine();
  const secretToken = (name: string) => (name === "docs" ? "the-servers-secret-99" : undefined);
  const added = await addMcpServer(h, { name: "docs", url: s.url, token: null }, { secretToken });
  expect(added.hasToken).toBe(true);
  const refused = await updateMcpServer(h, "docs", { token: "from-a-browser-1234" }, { secretToken }).catch(
    (e: unknown) => e,
  );
  expect(refused).toBeInstanceOf(McpServerInvalid);
  expect((refused as Error).message).toContain("MCP_DOCS_TOKEN");
  expect((refused as Error).message).not.toContain("from-a-browser-1234");
  expect(storedMcpServers(h)[0]!.token).toBeUndefined();
  // Renamed, its token is the new name's secret: none here, so the server refuses it.
  await expect(updateMcpServer(h, "docs", { name: "other" }, { secretToken })).rejects.toBeInstanceOf(
    McpUnreachable,
  );
});
