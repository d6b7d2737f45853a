/**
 * The tab's end of a server space: the protocol (wire.ts, client.ts) over a WebSocket, and a
 * connection that survives the socket. Tab-side only: no schema, no door, no TypeBox.
 *
 * `socketTransport(socket)` is a `Transport` over one WebSocket: each message is one text frame of
 * JSON, except a call too long for a server's frame, which goes as parts back to back
 * (server-socket.ts `messageFrames`); a binary frame, a frame larger than `maxChars` or text that is not JSON is dropped unread;
 * nothing is sent unless the socket is open (the client refuses calls after the close instead of
 * waiting for a reply that cannot come).
 *
 * `connectServer(options)` keeps one connection to a space alive. Invariants:
 * - the token travels only in the WebSocket subprotocol list (`["durable-harness.v1", "token.<t>"]`),
 *   never in the URL, a message, a state report or an error text;
 * - on an unexpected close it reconnects after an exponential back-off with jitter (250 ms doubling
 *   to 10 s by default; back to the start after a connection that said hello), says hello again and
 *   re-opens every watch the consumer still holds, with the method and arguments it was opened with;
 * - a re-opened watch's first frame is the engine's whole state (a view's `replace`, a whole list, a
 *   snapshot), and frames of a previous socket are never delivered once it closed: the consumer sees
 *   nothing twice and misses nothing;
 * - a watch keeps the id its consumer got for its whole life (`watches.unwatch` takes that id);
 * - a call made while disconnected waits for the connection up to `waitMs`, then fails with a
 *   `Disconnected` error; a call in flight when the socket drops fails with `Disconnected` too (it is
 *   not repeated: the caller knows whether repeating it is safe; the tab's submits, carrying a
 *   requestId, are: src/lib/across-drops.ts). A watch is held instead: opened
 *   while disconnected, or cut off while opening, it opens on the next connection (its call
 *   resolves then), and only the engine's own refusal (`UnknownConversation`) or `close()` fails it;
 * - a refused token (the server's close code 4401/4403, an HTTP 401/403 answer to the handshake
 *   where the platform reports it, or, where it does not (a browser), the `probe`'s answer after a
 *   socket that never opened: the space's `check` route with the same token) stops reconnecting: the state becomes `unauthorized` and every
 *   waiting or later call fails with an `Unauthorized` error; a server of another protocol stops it
 *   too (`incompatible`).
 */

import { type EngineApi, type EngineStatus, type Hello, PROTOCOL_VERSION } from "./api.ts";
import { connectEngine, type EngineConnection } from "./client.ts";
import {
  messageFrames,
  SPACE_NAME,
  SPACE_SUBPROTOCOL,
  spacePath,
  spaceSocketProtocols,
} from "./server-socket.ts";
import { EngineError, type TabMessage, type Transport } from "./wire.ts";

/** The subprotocol every socket of this protocol names first; the token rides as a second one. */
export const SOCKET_SUBPROTOCOL = SPACE_SUBPROTOCOL;
/** The server's close codes for a refused token (no token, a wrong one, another space's). */
export const CLOSE_UNAUTHORIZED = 4401;
export const CLOSE_FORBIDDEN = 4403;

/** The subprotocol list that carries `token`. */
export const socketProtocols = spaceSocketProtocols;

/** What this module needs of a WebSocket: the browser's, or the `ws` package's in Node. */
export interface SocketLike {
  readonly readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  addEventListener(type: "open", listener: () => void): void;
  addEventListener(type: "message", listener: (event: { data: unknown }) => void): void;
  addEventListener(type: "close", listener: (event: { code: number; reason: string }) => void): void;
  addEventListener(type: "error", listener: (event: { message?: unknown; error?: unknown }) => void): void;
}

/** A WebSocket constructor (`globalThis.WebSocket` in a browser; `ws`'s `WebSocket` in Node). */
export type SocketConstructor = new (url: string, protocols: string[]) => SocketLike;

const OPEN = 1;
/** Larger than any legitimate message (the door's own limit is 65 MiB of JSON). */
const MAX_FRAME_CHARS = 66 * 1024 * 1024;

/** A transport over one WebSocket (see the header). `onClose` hears the close code and reason. */
export function socketTransport<Out>(
  socket: SocketLike,
  options: { maxChars?: number } = {},
): Transport<Out> & { onClosed(listener: (code: number, reason: string) => void): void } {
  const maxChars = options.maxChars ?? MAX_FRAME_CHARS;
  const held: unknown[] = [];
  let receive: ((message: unknown) => void) | undefined;
  let closed = false;
  const closeListeners: ((code: number, reason: string) => void)[] = [];
  socket.addEventListener("message", (event) => {
    if (closed || typeof event.data !== "string" || event.data.length > maxChars) return;
    let message: unknown;
    try {
      message = JSON.parse(event.data);
    } catch {
      return;
    }
    if (receive) receive(message);
    else held.push(message);
  });
  socket.addEventListener("close", (event) => {
    if (closed) return;
    closed = true;
    for (const l of closeListeners) l(event.code, event.reason);
  });
  return {
    send(message) {
      if (closed || socket.readyState !== OPEN) return;
      const text = JSON.stringify(message);
      const call = (message as { id?: unknown }).id;
      // A call longer than a server's frame goes in parts, back to back (server-socket.ts).
      if (typeof call === "number") for (const frame of messageFrames(text, call)) socket.send(frame);
      else socket.send(text);
    },
    onMessage(r) {
      receive = r;
      for (const message of held.splice(0)) r(message);
    },
    onClose(c) {
      closeListeners.push(() => c());
    },
    onClosed(listener) {
      closeListeners.push(listener);
    },
    close() {
      if (closed) return;
      closed = true;
      for (const l of closeListeners) l(1000, "closed by the tab");
      try {
        socket.close(1000, "closed by the tab");
      } catch {
        // already closing
      }
    },
  };
}

/** Where a server connection stands, in a form the UI words (no token, ever). */
export type ServerState =
  | { readonly state: "connecting" }
  | { readonly state: "connected"; readonly build: string }
  /** Waiting `delayMs` before attempt `attempt`; `reached`: the last socket opened before it closed. */
  | {
      readonly state: "reconnecting";
      readonly attempt: number;
      readonly delayMs: number;
      readonly reached: boolean;
    }
  /** The server refused the token: no more attempts until the settings change. */
  | { readonly state: "unauthorized"; readonly message: string }
  /** The server speaks another protocol version: no more attempts. */
  | { readonly state: "incompatible"; readonly message: string }
  | { readonly state: "closed" };

export interface BackoffOptions {
  /** The first delay (ms). */
  readonly initialMs: number;
  /** The largest delay (ms). */
  readonly maxMs: number;
}

export const DEFAULT_BACKOFF: BackoffOptions = { initialMs: 250, maxMs: 10_000 };

/**
 * The delay before reconnect attempt `attempt` (1 = the first after a drop): `initialMs` doubling
 * up to `maxMs`, of which a random half is taken off (`random()` in [0, 1)), so tabs that lost the
 * same server do not come back in step.
 */
export function backoffDelay(attempt: number, backoff: BackoffOptions, random: () => number): number {
  const base = Math.min(backoff.maxMs, backoff.initialMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(base / 2 + (random() * base) / 2);
}

export interface ServerOptions {
  /** The space's socket URL (`ws:` or `wss:`). */
  readonly url: string;
  readonly token: string;
  readonly tabId: string;
  /** The protocol this tab speaks (PROTOCOL_VERSION). */
  readonly protocol?: number;
  /** The WebSocket constructor (default: `globalThis.WebSocket`). */
  readonly WebSocket?: SocketConstructor;
  readonly backoff?: BackoffOptions;
  readonly random?: () => number;
  /** How long a call made while disconnected waits for the connection (default 15 s). */
  readonly waitMs?: number;
  /** Told every state change. */
  readonly onState?: (state: ServerState) => void;
  /** Told each status the server engine pushes. */
  readonly onStatus?: (status: EngineStatus) => void;
  /**
   * Asked when a socket closed before it opened and the platform did not say why (a browser never
   * sees the handshake's HTTP status): whether the server refuses the token, answers, or cannot be
   * reached (`probeServer` asks the space's `check` route).
   */
  readonly probe?: () => Promise<Probe>;
}

/** What a probe of the server found. */
export type Probe = "unauthorized" | "reachable" | "unreachable";

/**
 * Ask `checkUrl` (a space's `check` route, which admits exactly what its socket admits) with the
 * token as a bearer: 401/403 is a refused token, any other answer a reachable server, no answer an
 * unreachable one. The token travels in the header only.
 */
export async function probeServer(
  checkUrl: string,
  token: string,
  fetcher: typeof fetch = globalThis.fetch,
): Promise<Probe> {
  try {
    const response = await fetcher(checkUrl, { headers: { authorization: `Bearer ${token}` } });
    return response.status === 401 || response.status === 403 ? "unauthorized" : "reachable";
  } catch {
    return "unreachable";
  }
}

export interface ServerConnection {
  /** The space's engine API; its watches outlive the sockets (see the header). */
  readonly api: EngineApi;
  readonly state: ServerState;
  /** Stop: no more attempts; pending and later calls fail with `Disconnected`. */
  close(): void;
}

/** A watch the consumer holds: what opened it, and where it is open now. */
interface HeldWatch {
  readonly method: string;
  readonly args: readonly unknown[];
  readonly listener: (value: unknown) => unknown;
  /** Opened once at least (the reconnect re-opens it; before, its own call does). */
  established: boolean;
  /** The socket generation it is open on, and its id there. */
  open?: { generation: number; id: number } | undefined;
}

/** An error as the client's other errors are: a `name` to check, never the token in the message. */
const failure = (name: "Disconnected" | "Unauthorized" | "Incompatible", message: string) =>
  new EngineError({ name, message });

/** Whether an error is the connection's (the call never got an answer), not the engine's. */
const isDisconnected = (e: unknown) => e instanceof Error && e.name === "Disconnected";

/** What a handshake error says, where the platform says anything (Node's `ws`: the HTTP status). */
function refusedByHttp(event: { message?: unknown; error?: unknown }): boolean {
  const text = [event.message, event.error instanceof Error ? event.error.message : undefined]
    .filter((t) => typeof t === "string")
    .join(" ");
  return /\b40[13]\b/.test(text);
}

/** Keep one connection to a server space (see the header). */
export function connectServer(options: ServerOptions): ServerConnection {
  const given = options.WebSocket ?? (globalThis as unknown as { WebSocket?: SocketConstructor }).WebSocket;
  if (!given) throw new Error("this platform has no WebSocket");
  const Socket: SocketConstructor = given;
  const backoff = options.backoff ?? DEFAULT_BACKOFF;
  const random = options.random ?? Math.random;
  const waitMs = options.waitMs ?? 15_000;
  const protocol = options.protocol ?? PROTOCOL_VERSION;

  let state: ServerState = { state: "connecting" };
  let generation = 0;
  /** The socket being opened or open now. */
  let current: Transport<TabMessage> | undefined;
  /** The connection that said hello, while it lasts. */
  let live: { generation: number; connection: EngineConnection } | undefined;
  let attempt = 0;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let stopped = false;
  const held = new Map<number, HeldWatch>();
  let nextWatch = 1;
  /** Calls waiting for a connection. */
  const waiters = new Set<{ ready(): void; fail(e: Error): void }>();

  const setState = (next: ServerState) => {
    state = next;
    options.onState?.(next);
  };

  function stop(next: ServerState, error: Error): void {
    stopped = true;
    if (timer !== undefined) clearTimeout(timer);
    live = undefined;
    current?.close();
    for (const w of waiters) w.fail(error);
    waiters.clear();
    setState(next);
  }

  function open(): void {
    if (stopped) return;
    const mine = ++generation;
    let opened = false;
    let httpRefused = false;
    let socket: SocketLike;
    try {
      socket = new Socket(options.url, socketProtocols(options.token));
    } catch {
      // A malformed URL: there is nothing to retry.
      stop(
        { state: "incompatible", message: "the server address is not a WebSocket address" },
        failure("Disconnected", "the server address is not valid"),
      );
      return;
    }
    const transport = socketTransport<TabMessage>(socket);
    current = transport;
    socket.addEventListener("error", (event) => {
      if (!opened && refusedByHttp(event)) httpRefused = true;
    });
    transport.onClosed((code) => {
      if (generation !== mine || stopped) return;
      if (live?.generation === mine) live = undefined;
      for (const w of held.values()) if (w.open?.generation === mine) w.open = undefined;
      if (code === CLOSE_UNAUTHORIZED || code === CLOSE_FORBIDDEN || httpRefused) {
        refused(code === CLOSE_FORBIDDEN ? "the server refused this token for this space" : undefined);
        return;
      }
      if (opened || !options.probe) {
        retry(opened);
        return;
      }
      // Closed before it opened, and the platform does not say why: ask the server.
      void options.probe().then((found) => {
        if (generation !== mine || stopped) return;
        if (found === "unauthorized") refused(undefined);
        else retry(found === "reachable");
      });
    });
    socket.addEventListener("open", () => {
      opened = true;
      const connection = connectEngine(transport);
      connection.onStatus((status) => {
        if (generation === mine) options.onStatus?.(status);
      });
      connection.api.hello({ tabId: options.tabId, protocol }).then(
        (hello: Hello) => {
          if (generation !== mine || stopped) return;
          if (hello.protocol !== protocol) {
            const message = `this app speaks protocol ${protocol}, the server ${hello.protocol}`;
            stop({ state: "incompatible", message }, failure("Incompatible", message));
            return;
          }
          attempt = 0;
          live = { generation: mine, connection };
          setState({ state: "connected", build: hello.build });
          for (const w of waiters) w.ready();
          waiters.clear();
          for (const [id, w] of held) if (w.established) void openWatch(id, w).catch(() => undefined);
        },
        () => undefined, // the close that failed the hello schedules the retry
      );
    });
  }

  function refused(words: string | undefined): void {
    const message = words ?? "the server refused the token";
    stop({ state: "unauthorized", message }, failure("Unauthorized", message));
  }

  function retry(reached: boolean): void {
    attempt++;
    const delayMs = backoffDelay(attempt, backoff, random);
    setState({ state: "reconnecting", attempt, delayMs, reached });
    timer = setTimeout(() => {
      timer = undefined;
      open();
    }, delayMs);
  }

  /** The live connection, waiting for it (bounded) when there is none. */
  function connection(): Promise<{ generation: number; connection: EngineConnection }> {
    if (live) return Promise.resolve(live);
    if (stopped) {
      return Promise.reject(
        state.state === "unauthorized"
          ? failure("Unauthorized", state.message)
          : state.state === "incompatible"
            ? failure("Incompatible", state.message)
            : failure("Disconnected", "the server connection was closed"),
      );
    }
    return new Promise((resolve, reject) => {
      const waiter = {
        ready: () => {
          clearTimeout(deadline);
          if (live) resolve(live);
          else reject(failure("Disconnected", "the server is not connected"));
        },
        fail: (e: Error) => {
          clearTimeout(deadline);
          reject(e);
        },
      };
      const deadline = setTimeout(() => {
        waiters.delete(waiter);
        reject(failure("Disconnected", `the server did not answer within ${Math.round(waitMs / 1000)} s`));
      }, waitMs);
      waiters.add(waiter);
    });
  }

  /** Invoke `method` on a connection's API (the client's Proxy turns it into a call message). */
  function invoke(c: EngineConnection, method: string, args: readonly unknown[]): Promise<unknown> {
    const [group, name] = method.split(".") as [string, string];
    const target = (
      c.api as unknown as Record<string, Record<string, (...a: unknown[]) => Promise<unknown>>>
    )[group]!;
    return target[name]!(...args);
  }

  /** Open held watch `id` on the live connection; its frames reach the consumer while it lasts. */
  async function openWatch(id: number, w: HeldWatch): Promise<void> {
    const { generation: gen, connection: c } = await connection();
    if (held.get(id) !== w) return;
    // Marked open before the call: the first frames may come before the reply.
    w.open = { generation: gen, id: -1 };
    let engineId: number;
    try {
      engineId = (await invoke(c, w.method, [
        ...w.args,
        (value: unknown) => {
          // A frame of a socket that closed since, or of a watch the consumer dropped: not delivered.
          if (held.get(id) !== w || w.open?.generation !== gen || generation !== gen) return;
          return w.listener(value) as Promise<void> | void;
        },
      ])) as number;
    } catch (e) {
      if (w.open?.generation === gen) w.open = undefined;
      throw e;
    }
    if (held.get(id) !== w) {
      void invoke(c, "watches.unwatch", [engineId]).catch(() => undefined);
      return;
    }
    w.open = { generation: gen, id: engineId };
    w.established = true;
  }

  async function watch(
    method: string,
    args: unknown[],
    listener: (value: unknown) => unknown,
  ): Promise<number> {
    const id = nextWatch++;
    const w: HeldWatch = { method, args, listener, established: false };
    held.set(id, w);
    for (;;) {
      try {
        await openWatch(id, w);
        return id;
      } catch (e) {
        if (!isDisconnected(e) || stopped) {
          held.delete(id);
          throw e;
        }
        // The socket dropped while it opened: try again on the next one (within the wait bound).
      }
    }
  }

  async function unwatch(id: number): Promise<void> {
    const w = held.get(id);
    if (!w) return;
    held.delete(id);
    const now = live;
    if (w.open && now && w.open.generation === now.generation && w.open.id >= 0)
      await invoke(now.connection, "watches.unwatch", [w.open.id]).catch(() => undefined);
  }

  async function call(method: string, given: unknown[]): Promise<unknown> {
    const last = given.at(-1);
    if (typeof last === "function")
      return watch(method, given.slice(0, -1), last as (value: unknown) => unknown);
    if (method === "watches.unwatch") return unwatch(Number(given[0]));
    const { connection: c } = await connection();
    return invoke(c, method, given);
  }

  const group = (name: string) =>
    new Proxy(
      {},
      {
        get: (_, method) =>
          typeof method === "string" && method !== "then"
            ? (...args: unknown[]) => call(`${name}.${method}`, args)
            : undefined,
      },
    );
  const groups = new Map<string, object>();
  const api = new Proxy(
    {},
    {
      get: (_, name) => {
        if (typeof name !== "string" || name === "then") return undefined;
        // The connection says hello itself, on every socket.
        if (name === "hello")
          return async () => {
            throw new Error("the server connection says hello itself");
          };
        let g = groups.get(name);
        if (!g) groups.set(name, (g = group(name)));
        return g;
      },
    },
  ) as EngineApi;

  open();
  return {
    api,
    get state() {
      return state;
    },
    close() {
      if (stopped) return;
      held.clear();
      stop({ state: "closed" }, failure("Disconnected", "the server connection was closed"));
    },
  };
}

/** What a one-off check of a server found, in a form the settings word. */
export type ServerCheck =
  | { readonly ok: true; readonly build: string }
  | {
      readonly ok: false;
      /** `refused`: the server answered but would not serve the socket (its log says why). */
      readonly problem: "unauthorized" | "unreachable" | "refused" | "incompatible";
      readonly message: string;
    };

/**
 * Open one socket to `url` with `token`, say hello, and close it: `ok`, or why not (the token
 * refused, nothing answered within `timeoutMs`, another protocol). Never retries; never says the token.
 */
export function checkServer(options: {
  url: string;
  token: string;
  tabId: string;
  protocol?: number;
  WebSocket?: SocketConstructor;
  timeoutMs?: number;
  probe?: () => Promise<Probe>;
}): Promise<ServerCheck> {
  return new Promise((resolve) => {
    let settled = false;
    const deadline = setTimeout(
      () => done({ ok: false, problem: "unreachable", message: "the server did not answer in time" }),
      options.timeoutMs ?? 10_000,
    );
    let connection: ServerConnection | undefined;
    connection = connectServer({
      ...options,
      waitMs: options.timeoutMs ?? 10_000,
      onState: (s) => {
        if (s.state === "connected") done({ ok: true, build: s.build });
        else if (s.state === "unauthorized") done({ ok: false, problem: "unauthorized", message: s.message });
        else if (s.state === "incompatible") done({ ok: false, problem: "incompatible", message: s.message });
        else if (s.state === "reconnecting")
          done(
            s.reached
              ? { ok: false, problem: "refused", message: "the server answered but closed the connection" }
              : { ok: false, problem: "unreachable", message: "nothing answered at that address" },
          );
      },
    });
    function done(check: ServerCheck): void {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      queueMicrotask(() => connection?.close());
      resolve(check);
    }
  });
}

const SPACE_PATH = /^(.*?)\/space\/([A-Za-z0-9_-]{1,64})(?:\/(?:socket|check))?\/*$/;

/** The space a token names: a server's token is `<space>.<mac>` (worker/server/token.ts). */
export function tokenSpace(token: string | undefined): string | undefined {
  const dot = token?.lastIndexOf(".") ?? -1;
  const space = dot > 0 ? token?.slice(0, dot) : undefined;
  return space && SPACE_NAME.test(space) ? space : undefined;
}

/**
 * Where a space is, from what a person pastes: the server's address (`http://127.0.0.1:8787`, the
 * space then named by its token) or a space's own (`https://host/space/home`, or the `ws(s)://`
 * socket address): the socket's address, the `check` route's and the space's name. Throws, in
 * words, when it is not an http(s) or ws(s) URL or names no space.
 */
export function spaceAddress(
  address: string,
  token?: string,
): { socketUrl: string; checkUrl: string; space: string } {
  let url: URL;
  try {
    url = new URL(address.trim());
  } catch {
    throw new Error("the server address is not a URL (it starts with http:// or https://)");
  }
  const scheme = { "http:": "ws:", "https:": "wss:", "ws:": "ws:", "wss:": "wss:" }[url.protocol];
  if (!scheme) throw new Error("the server address starts with http://, https://, ws:// or wss://");
  const match = SPACE_PATH.exec(url.pathname);
  const base = (match ? match[1]! : url.pathname).replace(/\/+$/, "");
  const space = match?.[2] ?? tokenSpace(token);
  if (!space) throw new Error("the address names no space (…/space/<name>), and neither does the token");
  const http = scheme === "wss:" ? "https:" : "http:";
  return {
    socketUrl: `${scheme}//${url.host}${base}${spacePath(space, "socket")}`,
    checkUrl: `${http}//${url.host}${base}${spacePath(space, "check")}`,
    space,
  };
}
