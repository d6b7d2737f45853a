/**
 * Starting the server tests' worker (tests/server/worker/entry.ts) in workerd from Node: bundle it
 * with esbuild (the suite, the Durable Object store and the core: no Node module may reach it) and
 * serve it with miniflare 3 (the last line that runs on Node 20), its Durable Objects on SQLite and
 * persisted to a folder, so a restart (`restart()`: SIGKILL of workerd, then a new one on the same
 * folder) finds exactly what was committed. Failing to start is an error that says so, never a skip.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { Miniflare } from "miniflare";

const here = dirname(fileURLToPath(import.meta.url));

/** The compatibility date the worker runs at (workerd 1.20250718 knows dates up to its own). */
const COMPATIBILITY_DATE = "2025-07-01";

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
  let mf = make();
  try {
    await mf.ready;
  } catch (error) {
    rmSync(persist, { recursive: true, force: true });
    throw new Error(
      `miniflare could not start workerd: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  return {
    async call<T>(path: string, init: { method?: string } = {}): Promise<T> {
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
      await mf.ready;
    },
    async stop() {
      await mf.dispose();
      rmSync(persist, { recursive: true, force: true });
    },
  };
}
