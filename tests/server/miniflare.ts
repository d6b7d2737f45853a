/**
 * Starting the server tests' worker (tests/server/worker/entry.ts) in workerd from Node: bundle it
 * with esbuild (the suite, the Durable Object store and the core: no Node module may reach it) and
 * serve it with miniflare 3 (the last line that runs on Node 20), its Durable Objects on SQLite and
 * persisted to a folder, so a restart (`restart()`: SIGKILL of workerd, then a new one on the same
 * folder) finds exactly what was committed. Failing to start is an error that says so, never a skip.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { Miniflare } from "miniflare";
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
  /** Send a request to the worker; answers its JSON, failing on a non-2xx status with the body. */
  call<T>(path: string, init?: { method?: string }): Promise<T>;
  /** Kill workerd (SIGKILL, as miniflare disposes) and start a new one on the same folder. */
  restart(): Promise<void>;
  /** Kill workerd and remove the folder. */
  stop(): Promise<void>;
}

let bundled: Promise<string> | undefined;

/** The worker as one ES module (built once per test process). */
export function bundleWorker(): Promise<string> {
  bundled ??= build({
    entryPoints: [join(here, "worker", "entry.ts")],
    bundle: true,
    format: "esm",
    platform: "neutral",
    target: "es2022",
    write: false,
    logLevel: "silent",
  }).then((result) => {
    const file = result.outputFiles[0];
    if (!file) throw new Error("esbuild produced no output for the server tests' worker");
    return file.text;
  });
  return bundled;
}

export async function startServerWorker(): Promise<ServerWorker> {
  workerdBinary();
  const script = await bundleWorker();
  const persist = mkdtempSync(join(tmpdir(), "dostore-"));
  const make = () =>
    new Miniflare({
      modules: true,
      script,
      scriptPath: resolve(here, "worker", "entry.js"),
      compatibilityDate: COMPATIBILITY_DATE,
      durableObjects: { OBJECTS: { className: "ConformanceObject", useSQLite: true } },
      durableObjectsPersist: persist,
    });
  const start = async (mf: Miniflare) => {
    try {
      await within(mf.ready, START_TIMEOUT_MS, "miniflare starting workerd");
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
  return {
    async call<T>(path: string, init: { method?: string } = {}): Promise<T> {
      // A new connection each time: workerd reset a kept-alive one reused after a long request.
      const response = await mf.dispatchFetch(`http://server.test${path}`, {
        method: init.method ?? "GET",
        headers: { connection: "close" },
      });
      const text = await response.text();
      if (!response.ok) throw new Error(`${init.method ?? "GET"} ${path}: ${response.status} ${text}`);
      return JSON.parse(text) as T;
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
