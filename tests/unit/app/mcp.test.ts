/**
 * MCP servers (issue 31 part 2, worker/app/mcp/) against a real MCP server on loopback (the SDK's
 * McpServer and Streamable HTTP transport, tests/unit/app/mcp-server.ts): adding one lists and caches
 * its tools under its name; a conversation's model calls them as ordinary tool calls (replay policy
 * from the server's hints, "ask first" under the approval policy); a conversation drops a server;
 * a server that is down gives the model and the settings an error in words while the cached list
 * stays offered, also after a reopen; tokens are never shown; hostile answers are refused with typed
 * errors; a removal forgets the server everywhere.
 */
import { fauxToolCall } from "@mariozechner/pi-ai";
import { afterAll, afterEach, expect, test } from "vitest";
import { createRegistry } from "../../../worker/agent/extensions/registry.ts";
import { AgentHarness } from "../../../worker/agent/harness.ts";
import { SETTINGS_CONVERSATION } from "../../../worker/agent/models/keys.ts";
import { policyOf } from "../../../worker/agent/tools/approval.ts";
import { builtinToolsExtension } from "../../../worker/agent/tools/builtin/index.ts";
import { setExtensionEnabled } from "../../../worker/app/extensions.ts";
import {
  checkToolList,
  connectMcp,
  McpAnswerRefused,
  McpUnreachable,
} from "../../../worker/app/mcp/client.ts";
import {
  addMcpServer,
  installStoredMcpServers,
  MCP_SERVERS_DOC,
  McpServerInvalid,
  mcpApi,
  refreshMcpServer,
  removeMcpServer,
  storedMcpServers,
} from "../../../worker/app/mcp/store.ts";
import { savedSecrets } from "../../../worker/app/secrets.ts";
import type { MemoryStore } from "../../../worker/store/open.ts";
import { fauxAgentModel, memoryStore } from "../../../worker/testing.ts";
import { callsThenAnswer, diagnosticsOf, toolResults } from "../agent/fixtures.ts";
import { startMcpServer, type TestMcpServer } from "./mcp-server.ts";

const servers: TestMcpServer[] = [];
const harnesses: AgentHarness[] = [];
const fauxes: Array<{ unregister(): void }> = [];
afterEach(async () => {
  for (const h of harnesses.splice(0)) await h.close().catch(() => undefined);
  for (const s of servers.splice(0)) await s.stop();
});
afterAll(() => {
  for (const f of fauxes) f.unregister();
});

async function server(options: Parameters<typeof startMcpServer>[0] = {}) {
  const s = await startMcpServer(options);
  servers.push(s);
  return s;
}

/** An engine as the app opens it: built-in tools, the stored servers installed before work resumes. */
async function engine(calls: Parameters<typeof callsThenAnswer> = [], store?: MemoryStore) {
  const faux = fauxAgentModel(callsThenAnswer(...calls));
  fauxes.push(faux);
  const extensions = createRegistry();
  extensions.install(builtinToolsExtension);
  const h = await AgentHarness.open(store ?? (await memoryStore()), {
    extensions,
    models: faux.models,
    defaultModel: faux.ref,
    paused: true,
  });
  harnesses.push(h);
  await installStoredMcpServers(h);
  h.resume();
  return h;
}

async function ask(h: AgentHarness, text: string, conversation?: number) {
  const c = conversation === undefined ? await h.root() : h.requireConversation(conversation);
  await (await c.submit({ type: "input", content: text, requestId: `r-${text}` })).wait();
  const results = await toolResults(c);
  return (results.at(-1)!.model as Array<{ isError: boolean; content: Array<{ text?: string }> }>)[0]!;
}

const textOf = (m: { content: Array<{ text?: string }> }) => m.content.map((c) => c.text ?? "").join("");

test("adding a server lists its tools under its name, caches them, and the model calls them", async () => {
  const s = await server();
  const h = await engine([fauxToolCall("docs_echo", { text: "hi" }, { id: "e1" })]);
  const view = await addMcpServer(h, { name: "docs", url: s.url, token: null });
  expect(view.tools.map((t) => t.name)).toEqual([
    "docs_echo",
    "docs_launch",
    "docs_huge",
    "docs_audio",
    "docs_failing",
  ]);
  expect(view.tools.find((t) => t.tool === "echo")?.replaySafe).toBe(true);
  expect(view.tools.find((t) => t.tool === "launch")?.replaySafe).toBe(false);
  // Cached in the store's settings conversation.
  expect(storedMcpServers(h)[0]!.tools.map((t) => t.name)).toContain("echo");
  // Offered under the server's extension, with its replay policy from the hints.
  const extension = h.extensions.snapshot().extension("mcp:docs");
  expect(extension?.tools?.map((t) => [t.name, t.replay])).toContainEqual(["docs_echo", "safe"]);
  expect(extension?.tools?.map((t) => [t.name, t.replay])).toContainEqual(["docs_launch", "unsafe"]);
  const result = await ask(h, "echo it");
  expect(result.isError).toBe(false);
  expect(textOf(result)).toBe("echo: hi");
  expect(s.calls).toEqual(["echo"]);
});

test("MCP tools ask first under the approval policy, even one the server marks read-only", async () => {
  const s = await server();
  const h = await engine();
  await addMcpServer(h, { name: "docs", url: s.url, token: null });
  await h.root();
  const tools = h.services.tools(1);
  const settings = { approval: { tools: {}, fallback: "ask" as const } };
  expect(policyOf(settings, {}, tools.get("docs_echo")!)).toBe("ask");
  expect(policyOf(settings, {}, tools.get("docs_launch")!)).toBe("ask");
  expect(policyOf(settings, {}, tools.get("read")!)).toBe("allow");
});

test("a conversation can drop a server's tools; the others keep them", async () => {
  const s = await server();
  const h = await engine();
  await addMcpServer(h, { name: "docs", url: s.url, token: null });
  await h.root();
  const other = await h.createConversation({ ownership: { kind: "ownerless" } });
  await setExtensionEnabled(h, 1, "mcp:docs", false);
  expect([...h.services.tools(1).keys()]).not.toContain("docs_echo");
  expect([...h.services.tools(other.id).keys()]).toContain("docs_echo");
});

test("a server that is down: the model gets an error in words, a refresh keeps the cached tools with the problem", async () => {
  const s = await server();
  const h = await engine([fauxToolCall("docs_launch", { item: "rocket" }, { id: "l1" })]);
  await addMcpServer(h, { name: "docs", url: s.url, token: null });
  await s.stop();
  const result = await ask(h, "launch it");
  expect(result.isError).toBe(true);
  expect(textOf(result)).toContain(`The MCP server "docs" (${s.url}) did not answer`);
  const view = await refreshMcpServer(h, "docs");
  expect(view.problem).toContain('the MCP server "docs"');
  expect(view.problem).toContain("did not answer");
  expect(view.tools.map((t) => t.name)).toContain("docs_launch");
  expect(s.launches).toEqual([]);
  // Back up: a refresh clears the problem.
  await s.restart();
  expect((await refreshMcpServer(h, "docs")).problem).toBeUndefined();
});

test("the cached tool list survives a reopen with the server down (an offline start still shows it)", async () => {
  const s = await server();
  const store = await memoryStore();
  const first = await engine([], store);
  await addMcpServer(first, { name: "docs", url: s.url, token: null });
  await first.close();
  await s.stop();
  const image = store.image();
  const reopened = await engine([], await memoryStore(image));
  expect(
    reopened.extensions
      .snapshot()
      .extension("mcp:docs")
      ?.tools?.map((t) => t.name),
  ).toContain("docs_echo");
  const listed = await mcpApi(async () => reopened).list();
  expect(listed[0]).toMatchObject({ name: "docs", url: s.url, hasToken: false });
});

test("a bearer token is sent, never shown, and redacted like an API key", async () => {
  const token = "tok-0123456789-secret";
  const s = await server({ token });
  const h = await engine([fauxToolCall("docs_echo", { text: "with token" }, { id: "e1" })]);
  const refused = await addMcpServer(h, { name: "docs", url: s.url, token: null }).catch((e: unknown) => e);
  expect(refused).toBeInstanceOf(McpUnreachable);
  expect((refused as Error).message).toContain("refused the token");
  expect(storedMcpServers(h)).toEqual([]);
  const view = await addMcpServer(h, { name: "docs", url: s.url, token });
  expect(view.hasToken).toBe(true);
  expect(JSON.stringify(view)).not.toContain(token);
  expect(JSON.stringify(await mcpApi(async () => h).list())).not.toContain(token);
  expect(savedSecrets((c, name) => h.docNow(c, name))).toContain(token);
  expect(textOf(await ask(h, "echo with the token"))).toBe("echo: with token");
});

test("bad settings are refused with McpServerInvalid before anything is stored", async () => {
  const s = await server();
  const h = await engine();
  const refuse = async (draft: { name: string; url: string; token: string | null }, words: string) => {
    const error = await addMcpServer(h, draft).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(McpServerInvalid);
    expect((error as Error).message).toContain(words);
  };
  await refuse({ name: "Has Caps", url: s.url, token: null }, "lowercase");
  await refuse({ name: "a_b", url: s.url, token: null }, "lowercase");
  await refuse({ name: "docs", url: "ftp://x", token: null }, "https://");
  await refuse({ name: "docs", url: "http://u:p@127.0.0.1/", token: null }, "user name");
  await refuse({ name: "docs", url: "not a url", token: null }, "not a URL");
  await refuse({ name: "docs", url: s.url, token: "has space" }, "token");
  await addMcpServer(h, { name: "docs", url: s.url, token: null });
  await refuse({ name: "docs", url: s.url, token: null }, "already added");
  expect(storedMcpServers(h).map((x) => x.name)).toEqual(["docs"]);
});

test("hostile tool lists: bad names, duplicates and bad schemas are skipped with the reason", async () => {
  const s = await server({ hostileList: true });
  const h = await engine();
  const view = await addMcpServer(h, { name: "bad", url: s.url, token: null });
  expect(view.tools.map((t) => t.name)).toEqual(["bad_fine", "bad_long"]);
  expect(view.tools[1]!.description.length).toBeLessThanOrEqual(2_000);
  const reasons = Object.fromEntries(view.skipped.map((x) => [x.name, x.reason]));
  expect(Object.keys(reasons).sort()).toEqual(["bigschema", "fine", "has spaces", "weird"]);
  expect(reasons["has spaces"]).toContain("name");
  expect(reasons["fine"]).toContain("two tools");
  expect(reasons["bigschema"]).toContain("longer than");
  expect(reasons["weird"]).toContain("unknown type");
  // Too many tools, or no list at all, refuse the whole answer.
  const many = Array.from({ length: 70 }, (_, i) => ({ name: `t${i}`, inputSchema: { type: "object" } }));
  expect(() => checkToolList(many, "bad")).toThrow(McpAnswerRefused);
  expect(() => checkToolList({ tools: [] }, "bad")).toThrow(McpAnswerRefused);
});

test("hostile results: too large, an unexpected content type, an MCP error: each an error result in words", async () => {
  const s = await server();
  const h = await engine([
    fauxToolCall("docs_huge", {}, { id: "h1" }),
    fauxToolCall("docs_audio", {}, { id: "a1" }),
    fauxToolCall("docs_failing", {}, { id: "f1" }),
  ]);
  await addMcpServer(h, { name: "docs", url: s.url, token: null });
  const root = await h.root();
  await (await root.submit({ type: "input", content: "go", requestId: "r" })).wait();
  const results = (await toolResults(root)).map(
    (e) => (e.model as Array<{ toolName: string; isError: boolean; content: Array<{ text?: string }> }>)[0]!,
  );
  const byTool = Object.fromEntries(results.map((m) => [m.toolName, m]));
  expect(byTool["docs_huge"]!.isError).toBe(true);
  expect(textOf(byTool["docs_huge"]!)).toContain("larger than 1048576 bytes");
  expect(byTool["docs_audio"]!.isError).toBe(true);
  expect(textOf(byTool["docs_audio"]!)).toContain('content of type "audio"');
  expect(byTool["docs_failing"]!.isError).toBe(true);
  expect(textOf(byTool["docs_failing"]!)).toBe("the printer is on fire");
  // The typed errors, at the client.
  const connection = await connectMcp({ name: "docs", url: s.url });
  try {
    await expect(connection.callTool("huge", {})).rejects.toMatchObject({
      name: "McpAnswerRefused",
      reason: "too_large",
    });
    await expect(connection.callTool("audio", {})).rejects.toMatchObject({
      name: "McpAnswerRefused",
      reason: "unexpected_content",
    });
  } finally {
    await connection.close();
  }
});

test("aborting the run while an MCP call runs ends the call with the aborted result", async () => {
  const s = await server();
  const h = await engine([fauxToolCall("docs_launch", { item: "slow" }, { id: "l1" })]);
  await addMcpServer(h, { name: "docs", url: s.url, token: null });
  const gate = s.gate();
  const root = await h.root();
  await root.submit({ type: "input", content: "launch slowly", requestId: "r" });
  await gate.started;
  await root.abort();
  gate.release();
  await root.waitForIdle();
  const [result] = await toolResults(root);
  expect(diagnosticsOf(result!).map((d) => d.code)).toContain("aborted");
});

test("removing a server forgets it, its token and every conversation's choice of it", async () => {
  const s = await server();
  const h = await engine();
  await addMcpServer(h, { name: "docs", url: s.url, token: "tok-0123456789" });
  await h.root();
  await setExtensionEnabled(h, 1, "mcp:docs", false);
  await removeMcpServer(h, "docs");
  expect(h.extensions.snapshot().extension("mcp:docs")).toBeUndefined();
  expect(h.docNow(SETTINGS_CONVERSATION, MCP_SERVERS_DOC)).toEqual({ servers: [] });
  expect(JSON.stringify((await h.requireConversation(1).agentState()).extensions ?? [])).not.toContain(
    "mcp:docs",
  );
});
