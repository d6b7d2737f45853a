/**
 * MCP tools on a server space, in workerd (miniflare): the official SDK's client runs inside the
 * Durable Object (bundled into the server's worker: scripts/server-worker.mjs) against a real MCP
 * server (the SDK's, in Node on loopback: tests/unit/app/mcp-server.ts) that wants a bearer token.
 * The token is the server's secret (the binding `MCP_TOOLS_TOKEN`), never a browser's: a tab adds
 * the server over its socket without a token (`mcp.add`), and one that sends a token is refused
 * with the variable to set, nothing stored. The demo model calls the tool; the answer is in the
 * transcript and the token nowhere in it. The tool list is cached in the space's store: after
 * workerd is SIGKILLed and the MCP server stopped, the list is still there, and a call gives the
 * model an error in words.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { startMcpServer, type TestMcpServer } from "../unit/app/mcp-server.ts";
import { type ServerWorker, startServerWorker } from "./miniflare.ts";
import { SocketTab } from "./socket-tab.ts";

const TOKEN = "mcp-token-of-the-server-7f3a9c";

let server: ServerWorker;
let mcp: TestMcpServer;

beforeAll(async () => {
  mcp = await startMcpServer({ token: TOKEN });
  server = await startServerWorker({
    entry: "space-entry.ts",
    objects: { SPACES: "TestSpace" },
    bindings: { MCP_TOOLS_TOKEN: TOKEN },
  });
}, 120_000);

const tabs: SocketTab[] = [];
afterAll(async () => {
  await Promise.all(tabs.map((t) => t.close().catch(() => undefined)));
  await server?.stop();
  await mcp?.stop();
});

async function tabOn(space: string): Promise<SocketTab> {
  const url = new URL(`/space/${space}/socket`, server.url());
  url.protocol = "ws:";
  const tab = await SocketTab.open(url, {
    protocols: ["durable-harness.v1", `token.${server.token(space)}`],
  });
  tabs.push(tab);
  await tab.hello(`tab-${tabs.length}`);
  return tab;
}

interface Entry {
  kind: string;
  model?: Array<{ toolName?: string; isError?: boolean; content?: Array<{ text?: string }> }>;
}
interface View {
  busy: boolean;
  entries: Entry[];
}
interface ServerView {
  name: string;
  url: string;
  hasToken: boolean;
  tools: Array<{ name: string }>;
  problem?: string;
}

const view = (space: string, c: number) => server.call<View>(`/space/${space}/view?conversation=${c}`);

async function answered(space: string, c: number, results: number): Promise<View> {
  for (let i = 0; i < 300; i++) {
    const v = await view(space, c);
    const n = v.entries.filter((e) => e.kind === "pi.tool-result").length;
    if (!v.busy && n >= results && v.entries.at(-1)?.kind === "pi.assistant") return v;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`conversation ${c} of ${space} was never answered`);
}

const resultsOf = (v: View) =>
  v.entries
    .filter((e) => e.kind === "pi.tool-result")
    .map((e) => ({
      tool: e.model?.[0]?.toolName,
      error: e.model?.[0]?.isError === true,
      text: (e.model?.[0]?.content ?? []).map((c) => c.text ?? "").join(""),
    }));

describe("MCP servers of a server space", () => {
  test("added over a socket with the server's own token; its tool answers in workerd; the token is nowhere", async () => {
    const tab = await tabOn("mcp");
    // A browser's token is refused where it enters: nothing is stored.
    const refused = await tab.call("mcp.add", { name: "tools", url: mcp.url, token: "a-browser-token-123" });
    expect(refused.ok).toBe(false);
    expect(refused.error).toMatchObject({ name: "McpServerInvalid" });
    expect(refused.error?.message).toContain("MCP_TOOLS_TOKEN");
    expect(refused.error?.message).not.toContain("a-browser-token-123");
    expect(await tab.value("mcp.list")).toEqual([]);

    const added = await tab.value<ServerView>("mcp.add", { name: "tools", url: mcp.url, token: null });
    expect(added).toMatchObject({ name: "tools", hasToken: true });
    expect(added.tools.map((t) => t.name)).toContain("tools_echo");

    const c = await tab.value<number>("conversations.create", "mcp");
    await tab.value("run.submit", c, {
      text: 'call the tool tools_echo with {"text":"hello from the space"}',
      requestId: "echo-1",
    });
    const done = await answered("mcp", c, 1);
    expect(resultsOf(done)).toEqual([
      { tool: "tools_echo", error: false, text: "echo: hello from the space" },
    ]);
    expect(mcp.calls).toContain("echo");
    expect(JSON.stringify(done)).not.toContain(TOKEN);
    expect(JSON.stringify(await tab.value("mcp.list"))).not.toContain(TOKEN);
  });

  test("the tool list is cached in the space's store: after a SIGKILL, with the MCP server down, it is still offered and a call says the server is unreachable", async () => {
    await server.restart();
    await mcp.stop();
    try {
      const tab = await tabOn("mcp");
      const list = await tab.value<ServerView[]>("mcp.list");
      expect(list.map((s) => s.name)).toEqual(["tools"]);
      expect(list[0]!.tools.map((t) => t.name)).toContain("tools_echo");
      const c = await tab.value<number>("conversations.create", "offline");
      await tab.value("run.submit", c, {
        text: 'call the tool tools_echo with {"text":"anyone there?"}',
        requestId: "echo-2",
      });
      const done = await answered("mcp", c, 1);
      const [result] = resultsOf(done);
      expect(result).toMatchObject({ tool: "tools_echo", error: true });
      expect(result!.text).toMatch(/tools/);
      expect(JSON.stringify(done)).not.toContain(TOKEN);
    } finally {
      await mcp.restart();
    }
  });
});
