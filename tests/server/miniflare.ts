/**
 * Starting the server tests' worker (tests/server/worker/entry.ts) in workerd from Node: bundle it
 * with esbuild (the suite, the Durable Object store and the core: no Node module may reach it) and
 * serve it with miniflare 3 (the last line that runs on Node 20), its Durable Objects on SQLite and
 * persisted to a folder, so a restart (`restart()`: SIGKILL of workerd, then a new one on the same
 * folder) finds exactly what was committed. Failing to start is an error that says so, never a skip.
 * Every worker gets a `SPACE_TOKEN_SECRET` (random unless the bindings give one), and `call()` sends
 * the token of the space a `/space/<name>/` path names (Authorization: Bearer), as a client of the
 * front door must; `raw()` sends exactly what it is given (the refusal tests).
 */
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Miniflare } from "miniflare";
import {
  bundleServerWorker,
  QUICKJS_WASM_MODULE,
  quickjsWasm,
  spaceToken,
} from "../../scripts/server-worker.mjs";
import { within } from "../../worker/testing/wait.ts";

const here = dirname(fileURLToPath(import.meta.url));

/** The compatibility date the worker runs at (workerd 1.20250718 knows dates up to its own). */
const COMPATIBILITY_DATE = "2025-07-01";

/** How long workerd may take to start before the stage fails (it took about 0.1-0.7 s here). */
const START_TIMEOUT_MS = 30_000;

/**
 * The workerd binary miniflare will spawn (its own override, or the `workerd` package's platform
 * binary). A missing one fails here with what to do: miniflare would only emit an unhandled spawn
 * error and never become ready.
 */
function workerdBinary(): string {
  const override = process.env["MINIFLARE_WORKERD_PATH"];
  let binary = override;
  if (binary === undefined) {
    const workerd = createRequire(import.meta.url)("workerd") as { default?: unknown };
    binary = typeof workerd.default === "string" ? workerd.default : "";
  }
  if (!binary || !existsSync(binary))
    throw new Error(
      `workerd is not installed (${binary || "the workerd package names no binary"}${override ? ", from MINIFLARE_WORKERD_PATH" : ""}): run npm ci; the binary comes in @cloudflare/workerd-<platform>`,
    );
  return binary;
}

export interface ServerWorker {
  /**
   * Send a request to the worker (with the token of the space its path names); answers its JSON,
   * failing on a non-2xx status with the body.
   */
  call<T>(path: string, init?: { method?: string; body?: unknown }): Promise<T>;
  /** Send a request as given (no token added): its status and JSON body. */
  raw(
    path: string,
    init?: { method?: string; body?: unknown; headers?: Record<string, string> },
  ): Promise<{ status: number; body: unknown }>;
  /** The worker's address over real HTTP (for WebSockets); it changes with `restart()`. */
  url(): URL;
  /** The token of `space` under this worker's secret. */
  token(space: string): string;
  /**
   * Send a POST and answer its body's lines as they arrive (a streamed response, which `call` would
   * read whole), each with the time (`performance.now()`) it was read here; fails on a non-2xx status.
   */
  lines(path: string): AsyncIterable<{ line: string; at: number }>;
  /** Kill workerd (SIGKILL, as miniflare disposes) and start a new one on the same folder. */
  restart(): Promise<void>;
  /** Kill workerd and remove the folder. */
  stop(): Promise<void>;
}

/** What a test's worker runs: its entry (in tests/server/worker/), its Durable Object classes, its bindings. */
export interface WorkerOptions {
  /**
   * The entry module: a file name in tests/server/worker/ (default: the store's, `entry.ts`), or an
   * absolute path (the bench's entries live in tests/bench/server/).
   */
  readonly entry?: string;
  /** Binding name -> Durable Object class (SQLite-backed); default: the store's `OBJECTS`. */
  readonly objects?: Readonly<Record<string, string>>;
  /** Plain-text bindings (the worker's `env`). */
  readonly bindings?: Readonly<Record<string, string>>;
}

const bundled = new Map<string, Promise<string>>();

/** An entry's file: a name in tests/server/worker/, or an absolute path as it is. */
const entryFile = (entry: string) => (isAbsolute(entry) ? entry : join(here, "worker", entry));

/** The worker as one ES module (built once per entry and test process). */
export function bundleWorker(entry = "entry.ts"): Promise<string> {
  let done = bundled.get(entry);
  if (!done) bundled.set(entry, (done = bundleServerWorker(entryFile(entry))));
  return done;
}

/** The token of `space` (worker/server/token.ts's scheme, computed as scripts/server.mjs does). */
export const spaceTokenOf = spaceToken;

export async function startServerWorker(options: WorkerOptions = {}): Promise<ServerWorker> {
  workerdBinary();
  const entry = options.entry ?? "entry.ts";
  const script = await bundleWorker(entry);
  const objects = options.objects ?? { OBJECTS: "ConformanceObject" };
  const persist = mkdtempSync(join(tmpdir(), "dostore-"));
  const secret = options.bindings?.["SPACE_TOKEN_SECRET"] ?? randomBytes(32).toString("base64url");
  const make = () =>
    new Miniflare({
      // The module given as such, not as a script for miniflare to parse: pi-ai's bundle has an
      // `import(specifier)` (its Node-only key lookup, never called in workerd) that the parser refuses.
      modules: [
        { type: "ESModule", path: entryFile(entry).replace(/\.ts$/, ".js"), contents: script },
        {
          type: "CompiledWasm",
          path: resolve(dirname(entryFile(entry)), QUICKJS_WASM_MODULE),
          contents: quickjsWasm(),
        },
      ],
      compatibilityDate: COMPATIBILITY_DATE,
      durableObjects: Object.fromEntries(
        Object.entries(objects).map(([binding, className]) => [binding, { className, useSQLite: true }]),
      ),
      durableObjectsPersist: persist,
      bindings: { SPACE_TOKEN_SECRET: secret, ...options.bindings },
    });
  let url: URL | undefined;
  const start = async (mf: Miniflare) => {
    try {
      url = await within(mf.ready, START_TIMEOUT_MS, "miniflare starting workerd");
    } catch (error) {
      await mf.dispose().catch(() => undefined);
      throw new Error(
        `miniflare could not start workerd: ${error instanceof Error ? error.message : String(error)}`,
      );
    }
  };
  let mf = make();
  try {
    await start(mf);
  } catch (error) {
    rmSync(persist, { recursive: true, force: true });
    throw error;
  }
  const send = async (
    path: string,
    init: { method?: string; body?: unknown; headers?: Record<string, string> },
  ): Promise<{ status: number; text: string }> => {
    // A new connection each time: workerd reset a kept-alive one reused after a long request.
    const response = await mf.dispatchFetch(`http://server.test${path}`, {
      method: init.method ?? "GET",
      headers: { connection: "close", "content-type": "application/json", ...init.headers },
      ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
    });
    return { status: response.status, text: await response.text() };
  };
  return {
    async call<T>(path: string, init: { method?: string; body?: unknown } = {}): Promise<T> {
      const space = /^\/space\/([^/]+)\//.exec(path)?.[1];
      const headers: Record<string, string> =
        space === undefined ? {} : { authorization: `Bearer ${spaceTokenOf(secret, space)}` };
      const { status, text } = await send(path, { ...init, headers });
      if (status < 200 || status > 299) throw new Error(`${init.method ?? "GET"} ${path}: ${status} ${text}`);
      return JSON.parse(text) as T;
    },
    async raw(path, init = {}) {
      const { status, text } = await send(path, init);
      return { status, body: text === "" ? undefined : JSON.parse(text) };
    },
    url() {
      if (!url) throw new Error("the worker is not started");
      return url;
    },
    token: (space) => spaceTokenOf(secret, space),
    async *lines(path: string): AsyncIterable<{ line: string; at: number }> {
      const space = /^\/space\/([^/]+)\//.exec(path)?.[1];
      const response = await mf.dispatchFetch(`http://server.test${path}`, {
        method: "POST",
        headers: {
          connection: "close",
          ...(space === undefined ? {} : { authorization: `Bearer ${spaceTokenOf(secret, space)}` }),
        },
      });
      if (!response.ok || !response.body)
        throw new Error(`POST ${path}: ${response.status} ${await response.text()}`);
      const decoder = new TextDecoder();
      let pending = "";
      for await (const chunk of response.body) {
        const at = performance.now();
        pending += decoder.decode(chunk as Uint8Array, { stream: true });
        const complete = pending.split("\n");
        pending = complete.pop() ?? "";
        for (const line of complete) yield { line, at };
      }
      if (pending !== "") yield { line: pending, at: performance.now() };
    },
    async restart() {
      await mf.dispose();
      mf = make();
      await start(mf);
    },
    async stop() {
      await mf.dispose();
      rmSync(persist, { recursive: true, force: true });
    },
  };
}
