/**
 * The server engine's worker (workerd, Cloudflare): the `Space` Durable Object class with the app's
 * agent (worker/app/space-agent.ts, code mode included), and a front door that sends `/space/<name>/<route>` to the
 * space named `<name>` (one object per name, through the `SPACES` binding). Nothing checks who
 * calls yet: tokens come with the WebSocket door (issue 27, item 5).
 */
import quickjsModule from "@jitl/quickjs-wasmfile-release-sync/wasm";
import { openSpaceHarness } from "../app/space-agent.ts";
import { setInterpreterModule } from "../sandbox/interpreter.ts";
import { Space, type SpaceEnv, type SpaceState } from "../server/space.ts";

// workerd compiles no WebAssembly at run time: the interpreter's module comes with the upload (the
// bundler makes this import a `CompiledWasm` module; wrangler's default rules do the same).
setInterpreterModule(quickjsModule);

export class SpaceObject extends Space {
  constructor(state: SpaceState, env: SpaceEnv) {
    super(state, env, (store, ports) => openSpaceHarness(store, ports, { codemode: true }));
  }
}

interface SpaceNamespace {
  idFromName(name: string): unknown;
  get(id: unknown): { fetch(request: Request): Promise<Response> };
}

/** `/space/<name>/...` to the object of that name; anything else is not found. */
export function routeToSpace(request: Request, spaces: SpaceNamespace): Promise<Response> | Response {
  const match = /^\/space\/([A-Za-z0-9_-]{1,64})\/[a-z]+$/.exec(new URL(request.url).pathname);
  if (!match) return Response.json({ error: "no such route" }, { status: 404 });
  return spaces.get(spaces.idFromName(match[1]!)).fetch(request);
}

export default {
  fetch(request: Request, env: { SPACES: SpaceNamespace }): Promise<Response> | Response {
    return routeToSpace(request, env.SPACES);
  },
};
