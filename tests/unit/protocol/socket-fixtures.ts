/**
 * A real WebSocket server in Node for the socket tests: the `ws` package serving the door
 * (`serveConnection`) over a small live engine, with the token in the subprotocol. The engine holds
 * one conversation whose entries a test appends (`commit`); a conversation watch sends the whole
 * view first (`replace`) and then one frame per commit, each after the previous one was acknowledged,
 * as the real engine does. The server can drop every socket (`dropAll`), refuse tokens by close code
 * or by HTTP status, and count the sockets it accepted.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { type WebSocket, WebSocketServer } from "ws";
import { serveConnection } from "../../../worker/protocol/door.ts";
import type { ConversationSummary, Listener, WatchFrame } from "../../../worker/protocol/index.ts";
import { CLOSE_UNAUTHORIZED, SOCKET_SUBPROTOCOL } from "../../../worker/protocol/socket.ts";
import type { EngineMessage, Transport } from "../../../worker/protocol/wire.ts";
import { type FakeEngine, fakeEngine } from "./fixtures.ts";

/** The engine's end of one `ws` socket (what door2's server does with the hibernation API). */
export function serverTransport(socket: WebSocket): Transport<EngineMessage> {
  const held: unknown[] = [];
  let receive: ((m: unknown) => void) | undefined;
  let closed = false;
  let onClosed: (() => void) | undefined;
  socket.on("message", (data, isBinary) => {
    if (closed || isBinary) return;
    let message: unknown;
    try {
      message = JSON.parse(String(data));
    } catch {
      message = { unreadable: true };
    }
    if (receive) receive(message);
    else held.push(message);
  });
  socket.on("close", () => {
    if (closed) return;
    closed = true;
    onClosed?.();
  });
  return {
    send: (m) => {
      if (!closed && socket.readyState === socket.OPEN) socket.send(JSON.stringify(m));
    },
    onMessage: (r) => {
      receive = r;
      for (const m of held.splice(0)) r(m);
    },
    onClose: (c) => {
      onClosed = c;
    },
    close: () => {
      closed = true;
      socket.close();
    },
  };
}

interface LiveWatch {
  readonly conversation: boolean;
  readonly push: (value: unknown) => Promise<void>;
  stopped: boolean;
}

export interface LiveEngine extends FakeEngine {
  /** Append an entry to conversation 1 and send it to every open conversation watch. */
  commit(text: string): Promise<void>;
  /** Add a conversation to the list (every open list watch gets the whole list). */
  addConversation(title: string): Promise<void>;
  readonly entries: { id: number; text: string }[];
  readonly openWatches: () => number;
}

/** The fake engine, with a conversation and a list that change and watches that follow them. */
export function liveEngine(): LiveEngine {
  const fake = fakeEngine();
  const entries: { id: number; text: string }[] = [];
  const list: ConversationSummary[] = [{ id: 1, title: "Main", busy: false }];
  const watches = new Set<LiveWatch>();
  let nextWatch = 500;
  const record = (e: { id: number; text: string }) => ({
    id: e.id,
    conversationId: 1,
    kind: "test.note",
    data: { text: e.text },
  });
  const view = () => ({ conversation: { id: 1, createdAt: 0 }, entries: entries.map(record), docs: {} });
  const open = <T>(conversation: boolean, first: T, listener: Listener<T>): Promise<number> => {
    // Frames are sent in order, each after the previous one was consumed (acknowledged).
    let chain = Promise.resolve();
    const w: LiveWatch = {
      conversation,
      stopped: false,
      push: (value) => {
        chain = chain.then(async () => {
          if (!w.stopped) await listener(value as T);
        });
        return chain;
      },
    };
    watches.add(w);
    const id = nextWatch++;
    ids.set(id, w);
    void w.push(first).catch(() => undefined);
    return Promise.resolve(id);
  };
  const ids = new Map<number, LiveWatch>();
  const base = fake.tab("x");
  const calls = {
    ...base,
    conversations: {
      ...base.conversations,
      list: async () => list,
      watch: (listener: Listener<ConversationSummary[]>) => open(false, [...list], listener),
    },
    watches: {
      ...base.watches,
      conversation: (conversationId: number, listener: Listener<WatchFrame>) => {
        fake.log.push(`watches.conversation([${conversationId}])`);
        return open<WatchFrame>(true, { seq: 0, ops: [{ op: "replace" }], value: view() }, listener);
      },
      unwatch: async (watchId: number) => {
        fake.log.push(`watches.unwatch([${watchId}])`);
        const w = ids.get(watchId);
        if (w) {
          w.stopped = true;
          watches.delete(w);
        }
      },
    },
  };
  return Object.assign(fake, {
    tab: () => calls,
    entries,
    openWatches: () => watches.size,
    async commit(text: string) {
      const e = { id: entries.length + 1, text };
      entries.push(e);
      const frame: WatchFrame = { seq: e.id, ops: [{ op: "append", entries: [record(e)] }] };
      await Promise.all(
        [...watches].filter((w) => w.conversation).map((w) => w.push(frame).catch(() => undefined)),
      );
    },
    async addConversation(title: string) {
      list.push({ id: list.length + 1, title, busy: false });
      await Promise.all(
        [...watches].filter((w) => !w.conversation).map((w) => w.push([...list]).catch(() => undefined)),
      );
    },
  });
}

export interface TestServer {
  readonly url: string;
  /** The space's check route (HTTP, bearer token): 200 or 401, as the real server's. */
  readonly checkUrl: string;
  /** Sockets accepted so far (a token refused by HTTP is never accepted). */
  accepted: number;
  /** Token refusals so far. */
  refused: number;
  /** Close every open socket as a crash would (no close frame: code 1006 at the tab). */
  dropAll(): void;
  /** Stop accepting connections (the next attempts fail) or accept them again. */
  setDown(down: boolean): void;
  close(): Promise<void>;
}

/**
 * A `ws` server on a free port serving `engine` to sockets whose subprotocol carries `token`.
 * `refuse`: how a wrong token is refused: by HTTP 401 during the handshake, or by accepting and
 * closing with code 4401 (what a browser can tell apart: it never sees the HTTP status).
 */
export async function startServer(
  engine: FakeEngine,
  options: { token: string; refuse?: "http" | "close" },
): Promise<TestServer> {
  let down = false;
  const sockets = new Set<WebSocket>();
  const tokenOf = (header: string | undefined) =>
    (header ?? "")
      .split(",")
      .map((p) => p.trim())
      .find((p) => p.startsWith("token."))
      ?.slice("token.".length);
  const http = createServer((request, response) => {
    const bearer = /^Bearer (\S+)$/.exec(request.headers.authorization ?? "")?.[1];
    if (down) response.writeHead(503).end();
    else if (request.url !== "/space/test/check") response.writeHead(404).end();
    else response.writeHead(bearer === options.token ? 200 : bearer ? 403 : 401).end();
  });
  const wss = new WebSocketServer({
    server: http,
    handleProtocols: (protocols) => (protocols.has(SOCKET_SUBPROTOCOL) ? SOCKET_SUBPROTOCOL : false),
    verifyClient: (info, done) => {
      if (down) return done(false, 503);
      const ok = tokenOf(info.req.headers["sec-websocket-protocol"]) === options.token;
      if (!ok && options.refuse !== "close") {
        server.refused++;
        return done(false, 401, "Unauthorized");
      }
      done(true);
    },
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", () => resolve()));
  const port = (http.address() as AddressInfo).port;
  const server: TestServer = {
    url: `ws://127.0.0.1:${port}/space/test/socket`,
    checkUrl: `http://127.0.0.1:${port}/space/test/check`,
    accepted: 0,
    refused: 0,
    dropAll() {
      for (const s of sockets) s.terminate();
    },
    setDown(value) {
      down = value;
    },
    close: () =>
      new Promise((resolve) => {
        for (const s of sockets) s.terminate();
        wss.close(() => http.close(() => resolve()));
        http.closeAllConnections();
      }),
  };
  wss.on("connection", (socket, request) => {
    if (tokenOf(request.headers["sec-websocket-protocol"]) !== options.token) {
      server.refused++;
      socket.close(CLOSE_UNAUTHORIZED, "unauthorized");
      return;
    }
    server.accepted++;
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    serveConnection({ transport: serverTransport(socket), engine });
  });
  return server;
}
