/**
 * The engine's MCP client (issue 31 part 2): one short connection to a remote MCP server over the
 * Streamable HTTP transport, through the official `@modelcontextprotocol/sdk` client, loaded on
 * demand (a dynamic import: neither the tab nor the engine's start loads it). Every answer crosses a
 * trust boundary. Invariants:
 * - the SDK checks the protocol (JSON-RPC, the result schemas); on top of it, every HTTP answer is
 *   read whole into memory only up to `maxAnswerBytes` (a larger one is refused with
 *   `McpAnswerRefused`, code `too_large`), the standalone GET stream is never opened (the client
 *   asks nothing the server would push), and redirects are not followed;
 * - a tool list is checked tool by tool (`checkToolList`): a name the model cannot call, a schema
 *   that is not an object schema or too long, a duplicate, are skipped with the reason; more than
 *   `maxTools` tools, or an answer that is not a list, refuse the whole list;
 * - a call's result may carry text and images (png, jpeg, gif, webp) only, within the byte bound:
 *   any other content type refuses it with `McpAnswerRefused`, code `unexpected_content`;
 * - a server that cannot be reached, or that answers with an HTTP error, is `McpUnreachable` with
 *   its name and address in words; the bearer token is only ever sent in the Authorization header,
 *   never put in an error's text.
 */
import type { ImageContent, TextContent } from "@mariozechner/pi-ai";
import { HarnessError } from "../../core/errors.ts";
import type { Json } from "../../core/types.ts";
import { schemaProblem } from "../user-tools/tool.ts";

/** The server's tool as the store caches it (its own name: the model calls `<server>_<name>`). */
export interface McpToolRecord {
  readonly name: string;
  readonly title?: string;
  readonly description: string;
  readonly inputSchema: Json;
  /** The server marks it `readOnlyHint` (replay-safe; never trusted to skip approval). */
  readonly readOnlyHint?: true;
  /** The server marks it `idempotentHint` (replay-safe). */
  readonly idempotentHint?: true;
}

/** A tool the server listed that the app does not offer, and why. */
export interface McpSkippedTool {
  readonly name: string;
  readonly reason: string;
}

export interface McpLimits {
  /** The largest HTTP answer read (bytes of its body). */
  readonly maxAnswerBytes: number;
  /** The most tools one server may list. */
  readonly maxTools: number;
  /** A request's time limit (ms). */
  readonly timeoutMs: number;
}

export const DEFAULT_MCP_LIMITS: McpLimits = { maxAnswerBytes: 1024 * 1024, maxTools: 64, timeoutMs: 60_000 };

const MAX_DESCRIPTION = 2_000;
const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;
const IMAGE_TYPES = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/** The server did not answer, or answered with an HTTP error: said with its name and address. */
export class McpUnreachable extends HarnessError {
  override readonly name = "McpUnreachable";
  constructor(message: string) {
    super("mcp_unreachable", message);
  }
}

/** The server answered with something this app refuses (too large, an unexpected content type, a bad list). */
export class McpAnswerRefused extends HarnessError {
  override readonly name = "McpAnswerRefused";
  constructor(
    readonly reason: "too_large" | "unexpected_content" | "bad_tool_list",
    message: string,
  ) {
    super(`mcp_answer_refused:${reason}`, message);
  }
}

export interface McpTarget {
  /** The server's name in the settings (for messages). */
  readonly name: string;
  readonly url: string;
  readonly token?: string;
}

export interface McpCallResult {
  readonly content: Array<TextContent | ImageContent>;
  readonly isError: boolean;
  readonly structured?: Json;
}

/** An open connection: list, call, close. */
export interface McpConnection {
  listTools(): Promise<{ tools: McpToolRecord[]; skipped: McpSkippedTool[] }>;
  callTool(name: string, args: Json, signal?: AbortSignal): Promise<McpCallResult>;
  close(): Promise<void>;
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

const where = (target: McpTarget) => `the MCP server "${target.name}" (${target.url})`;

/** A body read whole, refused past `max` bytes (whatever Content-Length claims). */
async function boundedBody(
  response: Response,
  max: number,
  target: McpTarget,
): Promise<Uint8Array<ArrayBuffer>> {
  const tooLarge = () =>
    new McpAnswerRefused("too_large", `${where(target)} sent an answer larger than ${max} bytes`);
  const declared = Number(response.headers.get("content-length") ?? Number.NaN);
  if (declared > max) {
    await response.body?.cancel().catch(() => undefined);
    throw tooLarge();
  }
  const reader = response.body?.getReader();
  if (!reader) return new Uint8Array(0);
  const parts: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > max) {
      await reader.cancel().catch(() => undefined);
      throw tooLarge();
    }
    parts.push(value);
  }
  const body = new Uint8Array(size);
  let at = 0;
  for (const p of parts) {
    body.set(p, at);
    at += p.byteLength;
  }
  return body;
}

/** The fetch the transport uses: no GET stream, no redirect, bounded bodies, errors in words. */
function guardedFetch(target: McpTarget, limits: McpLimits, base: typeof fetch) {
  return async (input: string | URL, init?: RequestInit): Promise<Response> => {
    const method = (init?.method ?? "GET").toUpperCase();
    // The standalone stream is for what the server pushes unasked: this client asks for none.
    if (method === "GET") return new Response(null, { status: 405 });
    let response: Response;
    try {
      // "manual", not "error": workerd (a server space) implements only "follow" and "manual".
      response = await base(input, { ...init, redirect: "manual" });
    } catch (error) {
      if (init?.signal?.aborted) throw error;
      // The runtime's words without their closing full stop ("Network connection lost."): the
      // sentence around them ends with its own.
      const detail = (error instanceof Error ? error.message : String(error)).trim().replace(/\.+$/, "");
      throw new McpUnreachable(`${where(target)} did not answer (${detail})`);
    }
    // A redirect is not followed (a browser's is opaque: type "opaqueredirect", status 0).
    if (response.type === "opaqueredirect" || (response.status >= 300 && response.status < 400)) {
      await response.body?.cancel().catch(() => undefined);
      throw new McpUnreachable(
        `${where(target)} redirected the request elsewhere (redirects are not followed)`,
      );
    }
    if (method === "DELETE") return response;
    if (!response.ok && response.status !== 202) {
      await response.body?.cancel().catch(() => undefined);
      const why =
        response.status === 401 || response.status === 403
          ? "refused the token (check it in Settings)"
          : `answered HTTP ${response.status}${response.statusText ? ` ${response.statusText}` : ""}`;
      throw new McpUnreachable(`${where(target)} ${why}`);
    }
    const body = await boundedBody(response, limits.maxAnswerBytes, target);
    return new Response(response.status === 202 || body.byteLength === 0 ? null : body, {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
  };
}

/** The list as the server sent it, checked tool by tool (see the module header). */
export function checkToolList(
  tools: unknown,
  server: string,
  limits: Pick<McpLimits, "maxTools"> = DEFAULT_MCP_LIMITS,
): { tools: McpToolRecord[]; skipped: McpSkippedTool[] } {
  if (!Array.isArray(tools))
    throw new McpAnswerRefused(
      "bad_tool_list",
      `the MCP server "${server}" sent a tool list that is not a list`,
    );
  if (tools.length > limits.maxTools)
    throw new McpAnswerRefused(
      "bad_tool_list",
      `the MCP server "${server}" lists ${tools.length} tools; at most ${limits.maxTools} are accepted`,
    );
  const kept: McpToolRecord[] = [];
  const skipped: McpSkippedTool[] = [];
  const seen = new Set<string>();
  for (const tool of tools) {
    const rawName = isObject(tool) && typeof tool["name"] === "string" ? tool["name"] : "";
    const name = rawName.slice(0, 100);
    const skip = (reason: string) => skipped.push({ name: name || "(no name)", reason });
    if (!isObject(tool) || !TOOL_NAME.test(rawName)) {
      skip("its name is not 1-64 letters, digits, _ or -");
      continue;
    }
    if (`${server}_${rawName}`.length > 64) {
      skip(`"${server}_${rawName}" is longer than the 64 characters a model accepts`);
      continue;
    }
    if (seen.has(rawName)) {
      skip("the server lists two tools of this name");
      continue;
    }
    const schema = tool["inputSchema"];
    const problem = schemaProblem(schema);
    if (problem) {
      skip(problem);
      continue;
    }
    seen.add(rawName);
    const description = typeof tool["description"] === "string" ? tool["description"] : "";
    const title = typeof tool["title"] === "string" ? tool["title"].slice(0, 200) : undefined;
    const hints = isObject(tool["annotations"]) ? tool["annotations"] : {};
    kept.push({
      name: rawName,
      ...(title ? { title } : {}),
      description:
        description.length > MAX_DESCRIPTION ? `${description.slice(0, MAX_DESCRIPTION - 1)}…` : description,
      inputSchema: schema as Json,
      ...(hints["readOnlyHint"] === true ? { readOnlyHint: true as const } : {}),
      ...(hints["idempotentHint"] === true ? { idempotentHint: true as const } : {}),
    });
  }
  return { tools: kept, skipped };
}

/** A call's content checked: text and images only (see the module header). */
export function checkCallContent(
  content: unknown,
  target: Pick<McpTarget, "name">,
): Array<TextContent | ImageContent> {
  if (!Array.isArray(content))
    throw new McpAnswerRefused(
      "unexpected_content",
      `the MCP server "${target.name}" sent a result without content`,
    );
  return content.map((c) => {
    const type = isObject(c) ? c["type"] : undefined;
    if (isObject(c) && type === "text" && typeof c["text"] === "string")
      return { type: "text", text: c["text"] };
    if (
      isObject(c) &&
      type === "image" &&
      typeof c["data"] === "string" &&
      typeof c["mimeType"] === "string" &&
      IMAGE_TYPES.includes(c["mimeType"])
    )
      return { type: "image", data: c["data"], mimeType: c["mimeType"] };
    const said = typeof type === "string" ? `"${type.slice(0, 40)}"` : "unknown";
    const extra = type === "image" ? " (an image of a type this app does not show)" : "";
    throw new McpAnswerRefused(
      "unexpected_content",
      `the MCP server "${target.name}" answered with content of type ${said}${extra}: this app accepts text and images only`,
    );
  });
}

/** The SDK, loaded once, on first use. */
let sdk:
  | Promise<
      [
        typeof import("@modelcontextprotocol/sdk/client/index.js"),
        typeof import("@modelcontextprotocol/sdk/client/streamableHttp.js"),
        typeof import("@modelcontextprotocol/sdk/validation/cfworker"),
      ]
    >
  | undefined;
const loadSdk = () =>
  (sdk ??= Promise.all([
    import("@modelcontextprotocol/sdk/client/index.js"),
    import("@modelcontextprotocol/sdk/client/streamableHttp.js"),
    // A validator without eval: the app's pages forbid 'unsafe-eval'.
    import("@modelcontextprotocol/sdk/validation/cfworker"),
  ]));

/** What an SDK error says, as an error of ours (the unreachable and refused ones pass through). */
function ours(error: unknown, target: McpTarget): Error {
  let e: unknown = error;
  // The transport's errors may arrive wrapped (`cause`).
  for (let depth = 0; depth < 4 && e instanceof Error; depth++) {
    if (e instanceof McpUnreachable || e instanceof McpAnswerRefused) return e;
    e = (e as { cause?: unknown }).cause;
  }
  if (error instanceof Error && error.name === "AbortError") return error;
  const message = error instanceof Error ? error.message : String(error);
  return new McpUnreachable(`${where(target)} failed: ${message}`);
}

/** Connect (the protocol's initialize) to `target`; throws McpUnreachable when it does not answer. */
export async function connectMcp(
  target: McpTarget,
  options: { limits?: Partial<McpLimits>; fetch?: typeof fetch; signal?: AbortSignal } = {},
): Promise<McpConnection> {
  const limits: McpLimits = { ...DEFAULT_MCP_LIMITS, ...(options.limits ?? {}) };
  const [{ Client }, { StreamableHTTPClientTransport }, { CfWorkerJsonSchemaValidator }] = await loadSdk();
  let url: URL;
  try {
    url = new URL(target.url);
  } catch {
    throw new McpUnreachable(`the MCP server "${target.name}" has no valid address`);
  }
  const transport = new StreamableHTTPClientTransport(url, {
    fetch: guardedFetch(target, limits, options.fetch ?? ((...a) => fetch(...a))),
    ...(target.token ? { requestInit: { headers: { Authorization: `Bearer ${target.token}` } } } : {}),
    reconnectionOptions: {
      maxRetries: 0,
      initialReconnectionDelay: 1000,
      maxReconnectionDelay: 1000,
      reconnectionDelayGrowFactor: 1,
    },
  });
  const client = new Client(
    { name: "pi-durable-app", version: "1" },
    { jsonSchemaValidator: new CfWorkerJsonSchemaValidator() },
  );
  const request = (signal?: AbortSignal) => ({
    timeout: limits.timeoutMs,
    ...(signal ? { signal } : {}),
  });
  try {
    await client.connect(transport, request(options.signal));
  } catch (error) {
    await client.close().catch(() => undefined);
    throw ours(error, target);
  }
  return {
    async listTools() {
      try {
        const listed = await client.listTools(undefined, request(options.signal));
        return checkToolList(listed.tools, target.name, limits);
      } catch (error) {
        throw ours(error, target);
      }
    },
    async callTool(name, args, signal) {
      try {
        const result = await client.callTool(
          { name, arguments: (isObject(args) ? args : {}) as Record<string, unknown> },
          undefined,
          request(signal),
        );
        const content = checkCallContent(result.content, target);
        const structured = isObject(result.structuredContent)
          ? (result.structuredContent as Json)
          : undefined;
        return {
          content,
          isError: result.isError === true,
          ...(structured !== undefined ? { structured } : {}),
        };
      } catch (error) {
        throw ours(error, target);
      }
    },
    async close() {
      await client.close().catch(() => undefined);
    },
  };
}
