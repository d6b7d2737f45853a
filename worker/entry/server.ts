/**
 * The server engine's worker (workerd, Cloudflare): the `Space` Durable Object class with the app's
 * agent (worker/app/space-agent.ts, code mode included; MCP tokens from `MCP_<NAME>_TOKEN`) and the
 * app's engine service on its sockets (worker/app/engine-service.ts, with the space's `mcp` group),
 * and the front door. The front door admits a request to
 * `/space/<name>/<route>` only with that space's token (worker/server/token.ts): no token 401, a
 * wrong token or another space's 403, each `{ error, code }` as JSON, before anything reaches the
 * space (nothing is read or written); the admitted go to the object of that name (`SPACES`).
 * Routes: `GET /space/<name>/socket` (the protocol over a WebSocket), `GET /space/<name>/check`
 * (answered here: the token opens the space), and the space's own routes (worker/server/space.ts).
 * Every answer allows any origin (a token, never a cookie, is what admits), so the app served
 * elsewhere can reach it. The token never appears in an answer or a log.
 */
import quickjsModule from "@jitl/quickjs-wasmfile-release-sync/wasm";
import { mcpTokenFromEnv, openSpaceHarness, spaceEngine } from "../app/space-agent.ts";
import { setInterpreterModule } from "../sandbox/interpreter.ts";
import { Space, type SpaceEnv, type SpaceState } from "../server/space.ts";
import { checkToken, requestToken } from "../server/token.ts";

// workerd compiles no WebAssembly at run time: the interpreter's module comes with the upload (the
// bundler makes this import a `CompiledWasm` module; wrangler's default rules do the same).
setInterpreterModule(quickjsModule);

export class SpaceObject extends Space {
  constructor(state: SpaceState, env: SpaceEnv) {
    // MCP tokens are the server's own secrets (`MCP_<NAME>_TOKEN`), never a browser's.
    const agent = { codemode: true, mcpToken: (name: string) => mcpTokenFromEnv(env, name) };
    super(state, env, (store, ports) => openSpaceHarness(store, ports, agent), {
      engine: spaceEngine(agent),
    });
  }
}

export interface SpaceNamespace {
  idFromName(name: string): unknown;
  get(id: unknown): { fetch(request: Request): Promise<Response> };
}

/** What the front door reads of the worker's environment. */
export interface FrontEnv {
  readonly SPACES: SpaceNamespace;
  /** The secret every space's token is made with (`wrangler secret put SPACE_TOKEN_SECRET`). */
  readonly SPACE_TOKEN_SECRET?: string;
}

const CORS = {
  "access-control-allow-origin": "*",
  "access-control-allow-methods": "GET, POST, OPTIONS",
  "access-control-allow-headers": "authorization, content-type",
  "access-control-max-age": "600",
};

function answer(body: unknown, status = 200): Response {
  return Response.json(body, { status, headers: CORS });
}

/** `/space/<name>/<route>` to the object of that name once its token is checked; anything else is not found. */
export async function routeToSpace(request: Request, env: FrontEnv): Promise<Response> {
  const match = /^\/space\/([A-Za-z0-9_-]{1,64})\/([a-z]+)$/.exec(new URL(request.url).pathname);
  if (!match) return answer({ error: "no such route", code: "not-found" }, 404);
  if (request.method === "OPTIONS") return new Response(null, { status: 204, headers: CORS });
  const space = match[1]!;
  const verdict = await checkToken(env.SPACE_TOKEN_SECRET, space, requestToken(request));
  if (!verdict.ok) return answer({ error: verdict.error, code: verdict.code }, verdict.status);
  if (match[2] === "check") return answer({ ok: true, space });
  const response = await env.SPACES.get(env.SPACES.idFromName(space)).fetch(request);
  if (response.status === 101) return response;
  const headers = new Headers(response.headers);
  for (const [name, value] of Object.entries(CORS)) headers.set(name, value);
  return new Response(response.body, { status: response.status, headers });
}

export default {
  fetch(request: Request, env: FrontEnv): Promise<Response> {
    return routeToSpace(request, env);
  },
};
