/**
 * A real MCP server for the tests (no mock of the protocol): the SDK's `McpServer` behind its
 * `StreamableHTTPServerTransport` (stateless: a server and a transport per request), on a loopback
 * port of Node's http server, with CORS open so a page's engine may call it too (the e2e test).
 * Tools: `echo` (read-only: "echo: <text>"), `launch` (unsafe: counts its runs; `gate` holds it
 * until released), `huge` (a text past any bound), `audio` (content of a type the app refuses),
 * `failing` (an MCP error result). `hostileList` serves a tool list of bad names and schemas
 * instead. With `token`, a request without `Authorization: Bearer <token>` gets 401.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";

export interface TestMcpServerOptions {
  readonly token?: string;
  readonly hostileList?: boolean;
  readonly hugeBytes?: number;
}

export interface TestMcpServer {
  readonly url: string;
  readonly port: number;
  /** `launch`'s runs, by item. */
  readonly launches: string[];
  /** The tools/call requests received, by tool name. */
  readonly calls: string[];
  /** Hold every `launch` until `release()` (it has started once `started` resolves). */
  gate(): { started: Promise<void>; release: () => void };
  stop(): Promise<void>;
  /** Listen again on the same port after `stop()`. */
  restart(): Promise<void>;
}

const CORS = {
  "access-control-allow-origin": "*",
  "access-control-allow-methods": "GET, POST, DELETE, OPTIONS",
  "access-control-allow-headers":
    "content-type, authorization, mcp-session-id, mcp-protocol-version, last-event-id",
  "access-control-expose-headers": "mcp-session-id",
};

export async function startMcpServer(options: TestMcpServerOptions = {}): Promise<TestMcpServer> {
  const launches: string[] = [];
  const calls: string[] = [];
  let held: { started: () => void; wait: Promise<void> } | undefined;

  const build = (): McpServer => {
    const mcp = new McpServer({ name: "test-mcp", version: "1.0.0" });
    if (options.hostileList) {
      mcp.server.registerCapabilities({ tools: {} });
      mcp.server.setRequestHandler(ListToolsRequestSchema, async () => ({
        tools: [
          { name: "fine", description: "a good one", inputSchema: { type: "object", properties: {} } },
          { name: "has spaces", description: "bad name", inputSchema: { type: "object" } },
          { name: "fine", description: "a duplicate", inputSchema: { type: "object" } },
          {
            name: "bigschema",
            description: "too long a schema",
            inputSchema: {
              type: "object",
              properties: { x: { type: "string", description: "y".repeat(20_000) } },
            },
          },
          {
            name: "weird",
            description: "unknown type",
            inputSchema: { type: "object", properties: { x: { type: "blob" } } },
          },
          { name: "long", description: "z".repeat(5_000), inputSchema: { type: "object" } },
        ],
      }));
      return mcp;
    }
    mcp.registerTool(
      "echo",
      {
        title: "Echo",
        description: "Says the text back.",
        inputSchema: { text: z.string() },
        annotations: { readOnlyHint: true },
      },
      async ({ text }) => {
        calls.push("echo");
        return { content: [{ type: "text", text: `echo: ${text}` }] };
      },
    );
    mcp.registerTool(
      "launch",
      {
        description: "Launches an item (a side effect: not safe to repeat).",
        inputSchema: { item: z.string() },
      },
      async ({ item }) => {
        calls.push("launch");
        if (held) {
          held.started();
          await held.wait;
        }
        launches.push(item);
        return { content: [{ type: "text", text: `launched ${item} (launch #${launches.length})` }] };
      },
    );
    mcp.registerTool("huge", { description: "Answers with too much text." }, async () => {
      calls.push("huge");
      return { content: [{ type: "text", text: "x".repeat(options.hugeBytes ?? 2 * 1024 * 1024) }] };
    });
    mcp.registerTool("audio", { description: "Answers with a sound." }, async () => {
      calls.push("audio");
      return { content: [{ type: "audio", data: "AAAA", mimeType: "audio/wav" }] };
    });
    mcp.registerTool("failing", { description: "Always fails." }, async () => {
      calls.push("failing");
      return { content: [{ type: "text", text: "the printer is on fire" }], isError: true };
    });
    return mcp;
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    for (const [k, v] of Object.entries(CORS)) res.setHeader(k, v);
    if (req.method === "OPTIONS") {
      res.writeHead(204).end();
      return;
    }
    if (options.token && req.headers.authorization !== `Bearer ${options.token}`) {
      res.writeHead(401, { "content-type": "application/json" }).end('{"error":"unauthorized"}');
      return;
    }
    if (req.method !== "POST") {
      res.writeHead(405).end();
      return;
    }
    const mcp = build();
    const transport = new StreamableHTTPServerTransport({}); // no session id generator: stateless
    res.on("close", () => {
      void transport.close();
      void mcp.close();
    });
    await mcp.connect(transport);
    await transport.handleRequest(req, res);
  };

  let server: Server | undefined;
  let port = 0;
  const listen = () =>
    new Promise<void>((resolve) => {
      server = createServer((req, res) => {
        handle(req, res).catch(() => {
          if (!res.headersSent) res.writeHead(500).end();
        });
      });
      server.listen(port, "127.0.0.1", () => {
        port = (server!.address() as AddressInfo).port;
        resolve();
      });
    });
  await listen();

  return {
    get url() {
      return `http://127.0.0.1:${port}/mcp`;
    },
    get port() {
      return port;
    },
    launches,
    calls,
    gate() {
      let started!: () => void;
      const startedP = new Promise<void>((r) => (started = r));
      let release!: () => void;
      const wait = new Promise<void>((r) => (release = r));
      held = { started, wait };
      return {
        started: startedP,
        release: () => {
          held = undefined;
          release();
        },
      };
    },
    async stop() {
      const s = server;
      server = undefined;
      if (!s) return;
      s.closeAllConnections();
      await new Promise<void>((r) => s.close(() => r()));
    },
    restart: listen,
  };
}
