/**
 * The MCP client follows no redirect (worker/app/mcp/client.ts): it asks with `redirect: "manual"`
 * (workerd, where a server space runs it, has no "error" mode) and a 3xx answer is `McpUnreachable`
 * in words; the address it points to never gets the request, nor the token.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, expect, test } from "vitest";
import { connectMcp, McpUnreachable } from "../../../worker/app/mcp/client.ts";

const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await new Promise<void>((r) => s.close(() => r()));
});

async function listen(handler: Parameters<typeof createServer>[1]): Promise<string> {
  const server = createServer(handler);
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
}

test("a server that redirects is refused in words; the other address never hears of it", async () => {
  const reached: string[] = [];
  const elsewhere = await listen((req, res) => {
    reached.push(String(req.headers.authorization));
    res.writeHead(500).end();
  });
  const url = await listen((_req, res) => {
    res.writeHead(307, { location: elsewhere }).end();
  });
  const error = await connectMcp({ name: "docs", url, token: "redirect-token-123456" })
    .then((c) => c.listTools())
    .catch((e: unknown) => e);
  expect(error).toBeInstanceOf(McpUnreachable);
  expect((error as Error).message).toContain("redirected the request elsewhere");
  expect((error as Error).message).not.toContain("redirect-token-123456");
  expect(reached).toEqual([]);
});
