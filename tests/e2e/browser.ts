/**
 * Browser helpers for the e2e suite.
 *
 * - `serveStatic(dir)`: a small node:http server of a built app on a free loopback port, with correct
 *   MIME types (application/wasm included) and optional extra headers (a CSP header, say).
 * - `launchBrowser()`: spawns the system Chromium on a fresh temporary profile (or a given one) with
 *   remote debugging on a free port, and connects playwright-core to it over CDP. Spawning it
 *   ourselves gives us the browser's pid (to SIGKILL it) and its DevTools endpoint (to reach the
 *   SharedWorker, which Playwright has no API for).
 * - `killAndRelaunch(b)`: SIGKILL the whole browser (its process group) and start it again on the same
 *   profile, as after a crash or power loss.
 * - `evaluateInSharedWorker(b, expression)`: `Runtime.evaluate` inside a SharedWorker via CDP
 *   (`Target.getTargets` type `shared_worker`, `Target.attachToTarget` flatten).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createReadStream } from "node:fs";
import { mkdtemp, rm, stat } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { extname, join, normalize, resolve, sep } from "node:path";
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core";
import { inject } from "vitest";
import WebSocket from "ws";
import { CHROMIUM_FLAGS } from "../../scripts/chromium.mjs";

// ---------------------------------------------------------------------------------------------
// Static server

export const MIME: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json; charset=utf-8",
  ".map": "application/json; charset=utf-8",
  ".webmanifest": "application/manifest+json; charset=utf-8",
  ".wasm": "application/wasm",
  ".png": "image/png",
  ".svg": "image/svg+xml",
  ".ico": "image/x-icon",
  ".txt": "text/plain; charset=utf-8",
  ".woff2": "font/woff2",
};

export interface StaticServer {
  /** Origin with a trailing slash, e.g. http://127.0.0.1:41234/ */
  readonly url: string;
  readonly port: number;
  /** Requests served so far, by path (to assert what the browser fetched). */
  readonly requests: string[];
  close(): Promise<void>;
}

export interface ServeOptions {
  /** Extra headers on every response (e.g. Content-Security-Policy, COOP/COEP). */
  headers?: Record<string, string>;
  /** Port to listen on; 0 (default) picks a free one. A restarted server can reuse its old port. */
  port?: number;
  /**
   * A second directory, served where `root` has no such file: fixture pages on the app's origin
   * (the bench's recovery floor opens the app's store, and IndexedDB is per origin).
   */
  fallback?: string;
}

/** The CSP of index.html, as a header: a meta tag does not cover workers, a header does. */
export const APP_CSP =
  "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; worker-src 'self'; connect-src 'self' https: http: wss: ws:; " +
  "style-src 'self'; img-src 'self' data: blob:; font-src 'self'; manifest-src 'self'; object-src 'none'; " +
  "base-uri 'self'; form-action 'none'";

export async function serveStatic(root: string, options: ServeOptions = {}): Promise<StaticServer> {
  const base = resolve(root);
  const requests: string[] = [];
  const server = createServer(async (req, res) => {
    const extra = options.headers ?? {};
    try {
      const pathname = decodeURIComponent(new URL(req.url ?? "/", "http://x").pathname);
      requests.push(pathname);
      if (req.method !== "GET" && req.method !== "HEAD") {
        res.writeHead(405, { Allow: "GET, HEAD", ...extra }).end();
        return;
      }
      let file = normalize(join(base, pathname));
      if (file !== base && !file.startsWith(base + sep)) {
        res.writeHead(403, extra).end();
        return;
      }
      let info = await stat(file).catch(() => undefined);
      if (info?.isDirectory()) {
        file = join(file, "index.html");
        info = await stat(file).catch(() => undefined);
      }
      if (!info && options.fallback) {
        const second = resolve(options.fallback);
        const other = normalize(join(second, pathname));
        if (other.startsWith(second + sep)) {
          file = other;
          info = await stat(file).catch(() => undefined);
        }
      }
      if (!info?.isFile()) {
        res.writeHead(404, { "Content-Type": "text/plain; charset=utf-8", ...extra }).end("not found");
        return;
      }
      res.writeHead(200, {
        "Content-Type": MIME[extname(file).toLowerCase()] ?? "application/octet-stream",
        "Content-Length": String(info.size),
        "Cache-Control": "no-cache",
        ...extra,
      });
      if (req.method === "HEAD") {
        res.end();
        return;
      }
      createReadStream(file).pipe(res);
    } catch (error) {
      res.writeHead(500, extra).end(String(error));
    }
  });
  await new Promise<void>((ok, fail) => {
    server.once("error", fail);
    server.listen(options.port ?? 0, "127.0.0.1", () => ok());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    port,
    requests,
    close: () =>
      new Promise<void>((ok) => {
        server.closeAllConnections();
        server.close(() => ok());
      }),
  };
}

/** Directories prepared by the e2e global setup. */
export function appDir(): string {
  return inject("appDir");
}
export function fixtureDir(): string {
  return inject("fixtureDir");
}

// ---------------------------------------------------------------------------------------------
// Browser

export interface LaunchedBrowser {
  readonly browser: Browser;
  /** The default context: the profile's own storage (IndexedDB, OPFS) lives here. */
  readonly context: BrowserContext;
  readonly profileDir: string;
  readonly pid: number;
  /** Browser-level DevTools websocket endpoint. */
  readonly wsEndpoint: string;
  /** Chromium's stderr so far (for diagnostics). */
  log(): string;
  newPage(): Promise<Page>;
  /** SIGKILL the browser's whole process group and wait until it is gone. Keeps the profile. */
  kill(): Promise<void>;
  /** Close the browser; removes the profile unless `keepProfile`. */
  close(options?: { keepProfile?: boolean }): Promise<void>;
}

export interface LaunchOptions {
  /** Reuse this profile directory instead of a fresh temporary one. */
  profileDir?: string;
  /** The Chromium binary; defaults to the one the e2e global setup found (outside vitest: required). */
  executablePath?: string;
  /** Extra Chromium flags. */
  args?: string[];
}

const live = new Set<ChildProcess>();
process.once("exit", () => {
  for (const child of live) killGroup(child, "SIGKILL");
});

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // Already gone.
  }
}

function groupAlive(pid: number): boolean {
  try {
    process.kill(-pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function waitFor(condition: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

export async function launchBrowser(options: LaunchOptions = {}): Promise<LaunchedBrowser> {
  const executable = options.executablePath ?? inject("chromiumPath");
  const profileDir = options.profileDir ?? (await mkdtemp(join(tmpdir(), "durable-e2e-profile-")));
  const child = spawn(
    executable,
    [
      ...CHROMIUM_FLAGS,
      `--user-data-dir=${profileDir}`,
      "--remote-debugging-address=127.0.0.1",
      "--remote-debugging-port=0",
      "--no-default-browser-check",
      "--password-store=basic",
      "--use-mock-keychain",
      ...(options.args ?? []),
      "about:blank",
    ],
    // Its own process group, so a kill reaches every Chromium process it started.
    { detached: true, stdio: ["ignore", "ignore", "pipe"] },
  );
  live.add(child);
  let stderr = "";
  let exited = false;
  child.once("exit", () => {
    exited = true;
    live.delete(child);
  });
  const wsEndpoint = await new Promise<string>((ok, fail) => {
    const timer = setTimeout(
      () => fail(new Error(`Chromium did not start in 30 s:\n${stderr.slice(-4000)}`)),
      30_000,
    );
    child.stderr?.setEncoding("utf8");
    child.stderr?.on("data", (text: string) => {
      stderr = (stderr + text).slice(-64_000);
      const match = /DevTools listening on (ws:\/\/\S+)/.exec(stderr);
      if (match?.[1]) {
        clearTimeout(timer);
        ok(match[1]);
      }
    });
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      fail(new Error(`Chromium exited at start (code ${code}, signal ${signal}):\n${stderr.slice(-4000)}`));
    });
    child.once("error", (error) => {
      clearTimeout(timer);
      fail(error);
    });
  });
  const pid = child.pid!;
  const browser = await chromium.connectOverCDP(wsEndpoint);
  const context = browser.contexts()[0];
  if (!context) throw new Error("Chromium has no default context");

  const kill = async () => {
    killGroup(child, "SIGKILL");
    await waitFor(() => exited && !groupAlive(pid), 15_000, `Chromium ${pid} to die`);
    await browser.close().catch(() => undefined);
  };

  return {
    browser,
    context,
    profileDir,
    pid,
    wsEndpoint,
    log: () => stderr,
    newPage: () => context.newPage(),
    kill,
    async close(closeOptions = {}) {
      if (!exited) {
        try {
          const session = await browser.newBrowserCDPSession();
          await session.send("Browser.close");
        } catch {
          // The connection may drop before the reply; the exit below is what counts.
        }
        try {
          await waitFor(() => exited, 10_000, "Chromium to exit");
        } catch {
          killGroup(child, "SIGKILL");
        }
      }
      killGroup(child, "SIGKILL"); // stragglers of the group, if any
      await waitFor(() => exited && !groupAlive(pid), 15_000, `Chromium ${pid} to die`).catch(
        () => undefined,
      );
      await browser.close().catch(() => undefined);
      if (!closeOptions.keepProfile) {
        await rm(profileDir, { recursive: true, force: true, maxRetries: 5, retryDelay: 100 });
      }
    },
  };
}

/** SIGKILL the browser and start it again on the same profile. */
export async function killAndRelaunch(b: LaunchedBrowser, options: Omit<LaunchOptions, "profileDir"> = {}) {
  await b.kill();
  return launchBrowser({ ...options, profileDir: b.profileDir });
}

// ---------------------------------------------------------------------------------------------
// CDP: the SharedWorker

interface CdpTarget {
  targetId: string;
  type: string;
  url: string;
  title: string;
}

/** A minimal client for the browser-level DevTools websocket (flattened sessions). */
export class Cdp {
  #ws: WebSocket;
  #next = 1;
  #pending = new Map<number, { ok: (v: unknown) => void; fail: (e: Error) => void; method: string }>();
  #listeners: Array<(method: string, params: unknown, sessionId: string | undefined) => void> = [];

  private constructor(ws: WebSocket) {
    this.#ws = ws;
    ws.on("message", (data) => {
      const message = JSON.parse(String(data)) as {
        id?: number;
        method?: string;
        params?: unknown;
        sessionId?: string;
        result?: unknown;
        error?: { message: string; code: number };
      };
      if (message.id === undefined) {
        if (message.method)
          for (const listen of this.#listeners) listen(message.method, message.params, message.sessionId);
        return;
      }
      const waiter = this.#pending.get(message.id);
      if (!waiter) return;
      this.#pending.delete(message.id);
      if (message.error) waiter.fail(new Error(`${waiter.method}: ${message.error.message}`));
      else waiter.ok(message.result);
    });
    ws.on("close", () => {
      for (const waiter of this.#pending.values())
        waiter.fail(new Error(`${waiter.method}: CDP connection closed`));
      this.#pending.clear();
    });
  }

  static connect(wsEndpoint: string): Promise<Cdp> {
    return new Promise((ok, fail) => {
      const ws = new WebSocket(wsEndpoint, { perMessageDeflate: false });
      ws.once("open", () => ok(new Cdp(ws)));
      ws.once("error", fail);
    });
  }

  send<T = unknown>(method: string, params: object = {}, sessionId?: string): Promise<T> {
    const id = this.#next++;
    return new Promise<T>((ok, fail) => {
      this.#pending.set(id, { ok: ok as (v: unknown) => void, fail, method });
      this.#ws.send(JSON.stringify(sessionId ? { id, method, params, sessionId } : { id, method, params }));
    });
  }

  /** Hear every event (of every attached session: `sessionId` says which). */
  onEvent(listen: (method: string, params: unknown, sessionId: string | undefined) => void): void {
    this.#listeners.push(listen);
  }

  close(): void {
    this.#ws.close();
  }
}

/** Wait until a SharedWorker whose URL contains `urlIncludes` exists; returns its target. */
export async function waitForSharedWorker(b: LaunchedBrowser, urlIncludes = "", timeoutMs = 15_000) {
  const cdp = await Cdp.connect(b.wsEndpoint);
  try {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const { targetInfos } = await cdp.send<{ targetInfos: CdpTarget[] }>("Target.getTargets");
      const found = targetInfos.find((t) => t.type === "shared_worker" && t.url.includes(urlIncludes));
      if (found) return found;
      if (Date.now() > deadline) {
        const seen = targetInfos.map((t) => `${t.type} ${t.url}`).join("\n  ");
        throw new Error(
          `no shared_worker target matching "${urlIncludes}" after ${timeoutMs} ms; targets:\n  ${seen}`,
        );
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  } finally {
    cdp.close();
  }
}

/**
 * Evaluate `expression` inside the SharedWorker whose URL contains `urlIncludes` and return its value
 * (promises are awaited; the value must be JSON-serializable).
 */
export async function evaluateInSharedWorker<T = unknown>(
  b: LaunchedBrowser,
  expression: string,
  urlIncludes = "",
): Promise<T> {
  const target = await waitForSharedWorker(b, urlIncludes);
  const cdp = await Cdp.connect(b.wsEndpoint);
  try {
    const { sessionId } = await cdp.send<{ sessionId: string }>("Target.attachToTarget", {
      targetId: target.targetId,
      flatten: true,
    });
    try {
      const reply = await cdp.send<{
        result: { value?: unknown; description?: string };
        exceptionDetails?: { text: string; exception?: { description?: string } };
      }>("Runtime.evaluate", { expression, awaitPromise: true, returnByValue: true }, sessionId);
      if (reply.exceptionDetails) {
        const detail = reply.exceptionDetails.exception?.description ?? reply.exceptionDetails.text;
        throw new Error(`evaluation in SharedWorker ${target.url} threw: ${detail}`);
      }
      return reply.result.value as T;
    } finally {
      await cdp.send("Target.detachFromTarget", { sessionId }).catch(() => undefined);
    }
  } finally {
    cdp.close();
  }
}

/**
 * Call `__engine.api.<group>.<method>(...args)` (`method` is its wire name, e.g. "keys.set") in an app
 * page opened with `?debug=1`, which also gives the page's engine its test endpoints (`debug.*`).
 * Every call is async.
 */
export function engine<T>(page: Page, method: string, ...args: unknown[]): Promise<T> {
  return page.evaluate(
    ({ method, args }) => {
      const path = method.split(".");
      let target = (globalThis as unknown as { __engine: { api: Record<string, unknown> } }).__engine.api;
      for (const key of path.slice(0, -1)) target = target[key] as Record<string, unknown>;
      return (target[path.at(-1)!] as (...a: unknown[]) => Promise<unknown>)(...args);
    },
    { method, args },
  ) as Promise<T>;
}
