/**
 * The tab's connection to a server space (worker/protocol/socket.ts) over a real WebSocket: the `ws`
 * package's server in Node serving the door over a live test engine (socket-fixtures.ts), and `ws`'s
 * client constructor standing in for the browser's. What it shows: calls and watches over the
 * socket with the token in the subprotocol; a dropped socket reconnected, its watches re-opened and
 * their consumers given the whole view first, with no frame twice and none missed; calls that wait
 * for the reconnect (bounded) or fail with `Disconnected`; a back-off that grows to its cap with
 * jitter and starts over after a connection; a refused token (close code or HTTP 401) stopping the
 * attempts with `unauthorized`; the one-off check; frames the transport refuses to read.
 */
import { afterEach, describe, expect, test } from "vitest";
import { WebSocket } from "ws";
import { acrossDrops } from "../../../src/lib/across-drops.ts";
import {
  applyFrame,
  type ConversationSummary,
  type ConversationView,
  type WatchFrame,
} from "../../../worker/protocol/index.ts";
import { messageFrames } from "../../../worker/protocol/server-socket.ts";
import {
  backoffDelay,
  checkServer,
  connectServer,
  probeServer,
  type ServerConnection,
  type ServerState,
  type SocketConstructor,
  socketTransport,
  spaceAddress,
} from "../../../worker/protocol/socket.ts";
import { until } from "../../../worker/testing/wait.ts";
import { liveEngine, startServer, type TestServer } from "./socket-fixtures.ts";

const Socket = WebSocket as unknown as SocketConstructor;
const TOKEN = "s3cret-token-value";
const FAST = { initialMs: 10, maxMs: 80 };

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function server(options: { refuse?: "http" | "close" } = {}) {
  const engine = liveEngine();
  const s = await startServer(engine, { token: TOKEN, ...options });
  cleanups.push(() => s.close());
  return { engine, server: s };
}

function connect(s: TestServer, options: { token?: string; waitMs?: number; random?: () => number } = {}) {
  const states: ServerState[] = [];
  const connection = connectServer({
    url: s.url,
    token: options.token ?? TOKEN,
    tabId: "tab-1",
    WebSocket: Socket,
    backoff: FAST,
    random: options.random ?? (() => 0.5),
    ...(options.waitMs !== undefined ? { waitMs: options.waitMs } : {}),
    onState: (state) => states.push(state),
  });
  cleanups.push(() => connection.close());
  return { connection, states };
}

const connected = (c: ServerConnection) => until(() => c.state.state === "connected", { what: "connected" });

/** A consumer of a conversation watch: its view, and every frame it was given, in order. */
function viewer() {
  const frames: WatchFrame[] = [];
  let view: ConversationView | undefined;
  return {
    frames,
    listener: (frame: WatchFrame) => {
      frames.push(frame);
      view = applyFrame(view, frame);
    },
    texts: () => (view?.entries ?? []).map((e) => (e.data as { text: string }).text),
  };
}

describe("a server connection over a real WebSocket", () => {
  test("calls and watches; the token rides in the subprotocol, never in the URL", async () => {
    const { engine, server: s } = await server();
    expect(s.url).not.toContain(TOKEN);
    const { connection } = connect(s);
    expect(await connection.api.conversations.list()).toEqual([{ id: 1, title: "Main", busy: false }]);
    expect(engine.log[0]).toMatch(/^hello\(\[\{"tabId":"tab-1","protocol":\d+\}\]\)$/);
    expect(s.accepted).toBe(1);

    const v = viewer();
    await connection.api.watches.conversation(1, v.listener);
    await engine.commit("a");
    await until(() => v.texts().length === 1, { what: "the commit's frame" });
    expect(v.texts()).toEqual(["a"]);
  });

  test("after the server drops the socket it reconnects, re-opens the watches, and shows nothing twice", async () => {
    const { engine, server: s } = await server();
    const { connection, states } = connect(s);
    const v = viewer();
    const lists: ConversationSummary[][] = [];
    const watchId = await connection.api.watches.conversation(1, v.listener);
    await connection.api.conversations.watch((list: ConversationSummary[]) => {
      lists.push(list);
    });
    await engine.commit("a");
    await engine.commit("b");
    await until(() => v.texts().length === 2, { what: "two entries" });

    // The server goes away (no close frame) and stays away while a commit happens there.
    s.setDown(true);
    s.dropAll();
    await until(() => states.some((st) => st.state === "reconnecting"), { what: "reconnecting" });
    await engine.commit("c");
    await engine.addConversation("Second");
    expect(v.texts()).toEqual(["a", "b"]);

    s.setDown(false);
    await until(() => v.texts().length === 3 && lists.at(-1)?.length === 2, {
      what: "the re-opened watches",
    });
    await engine.commit("d");
    await until(() => v.texts().length === 4, { what: "the next commit" });

    // Nothing missed, nothing twice: the re-opened watch started with the whole view.
    expect(v.texts()).toEqual(["a", "b", "c", "d"]);
    const kinds = v.frames.map((f) =>
      f.value ? `replace:${f.value.entries.length}` : `append:${f.ops.length}`,
    );
    expect(kinds).toEqual(["replace:0", "append:1", "append:1", "replace:3", "append:1"]);
    expect(lists.map((l) => l.map((c) => c.title))).toEqual([["Main"], ["Main", "Second"]]);
    expect(engine.log.filter((l) => l.startsWith("watches.conversation"))).toHaveLength(2);
    expect(engine.log.filter((l) => l.startsWith("hello"))).toHaveLength(2);
    expect(s.accepted).toBe(2);
    expect(states.at(-1)).toEqual({ state: "connected", build: "fake" });

    // The consumer's watch id outlives the socket: unwatching it ends the re-opened watch.
    await connection.api.watches.unwatch(watchId);
    await until(() => engine.openWatches() === 1, { what: "the conversation watch ended" });
    await engine.commit("e");
    await connection.api.conversations.list();
    expect(v.texts()).toEqual(["a", "b", "c", "d"]);
  });

  test("a frame of the dropped socket is never delivered after the reconnect", async () => {
    const { engine, server: s } = await server();
    const { connection } = connect(s);
    const v = viewer();
    let hold: (() => void) | undefined;
    await connection.api.watches.conversation(1, async (frame: WatchFrame) => {
      v.listener(frame);
      if (frame.value === undefined && hold === undefined)
        await new Promise<void>((resolve) => {
          hold = resolve;
        });
    });
    // The consumer holds frame "a"; "b" waits in the engine for its acknowledgement.
    void engine.commit("a");
    void engine.commit("b");
    await until(() => hold !== undefined, { what: "the held frame" });
    s.dropAll();
    await until(() => v.frames.length === 3, { what: "the re-opened watch's view" });
    hold?.();
    await engine.commit("c");
    await until(() => v.texts().length === 3, { what: "the next commit" });
    expect(v.texts()).toEqual(["a", "b", "c"]);
    expect(v.frames.filter((f) => f.value === undefined)).toHaveLength(2);
  });

  test("a call made while disconnected waits for the reconnect; past its bound it fails with Disconnected", async () => {
    const { server: s } = await server();
    const { connection } = connect(s, { waitMs: 5000 });
    await connected(connection);
    s.setDown(true);
    s.dropAll();
    await until(() => connection.state.state === "reconnecting", { what: "reconnecting" });
    const waiting = connection.api.conversations.list();
    s.setDown(false);
    expect(await waiting).toHaveLength(1);

    const { server: other } = await server();
    const short = connect(other, { waitMs: 30 });
    await connected(short.connection);
    other.setDown(true);
    other.dropAll();
    await until(() => short.connection.state.state === "reconnecting", { what: "reconnecting" });
    const error = await short.connection.api.conversations.list().catch((e: unknown) => e);
    expect(error).toMatchObject({ name: "Disconnected" });
  });

  test("a submit in flight when the socket drops fails Disconnected; carried across the drop it is made again with its requestId, once answered", async () => {
    const { engine, server: s } = await server();
    const { connection } = connect(s, { waitMs: 5000 });
    await connected(connection);
    // The server crashes after it took the first submit (its answer never leaves) and comes back.
    const run = engine.tab("x").run as { submit: (...a: unknown[]) => Promise<unknown> };
    const submit = run.submit;
    let drops = 0;
    run.submit = async (...args) => {
      const answer = await submit(...args);
      if (drops++ === 0) s.dropAll();
      else if (drops === 2) s.dropAll();
      return answer;
    };
    const raw = await connection.api.run
      .submit(1, { text: "hi", requestId: "raw-1" })
      .catch((e: unknown) => e);
    expect(raw).toMatchObject({ name: "Disconnected" });
    await connected(connection);

    const carried = await acrossDrops(
      (requestId) => connection.api.run.submit(1, { text: "what is it?", requestId }),
      { pauseMs: 5, requestId: "req-1" },
    );
    expect(carried).toBe(3);
    const submits = engine.log.filter((l) => l.startsWith("run.submit"));
    expect(submits).toEqual([
      'run.submit([1,{"text":"hi","requestId":"raw-1"}])',
      'run.submit([1,{"text":"what is it?","requestId":"req-1"}])',
      'run.submit([1,{"text":"what is it?","requestId":"req-1"}])',
    ]);
  });

  test("the back-off doubles with jitter up to its cap, and starts over after a connection", async () => {
    expect(
      [1, 2, 3, 4, 5, 6].map((n) => backoffDelay(n, { initialMs: 250, maxMs: 10_000 }, () => 0)),
    ).toEqual([125, 250, 500, 1000, 2000, 4000]);
    expect(backoffDelay(12, { initialMs: 250, maxMs: 10_000 }, () => 0.999_999)).toBe(10_000);
    expect(backoffDelay(1, { initialMs: 250, maxMs: 10_000 }, () => 0.5)).toBe(188);

    const { server: s } = await server();
    const { connection, states } = connect(s);
    await connected(connection);
    s.setDown(true);
    s.dropAll();
    const delays = () => states.flatMap((st) => (st.state === "reconnecting" ? [st.delayMs] : []));
    await until(() => delays().length >= 6, { what: "six attempts" });
    expect(delays().slice(0, 6)).toEqual([8, 15, 30, 60, 60, 60]);
    s.setDown(false);
    await until(() => connection.state.state === "connected", { what: "back" });
    const before = delays().length;
    s.dropAll();
    await until(() => delays().length > before, { what: "the next drop" });
    expect(delays()[before]).toBe(8);
  });

  test.each([
    ["a close code 4401", "close" as const],
    ["an HTTP 401 during the handshake", "http" as const],
  ])("a refused token (%s) stops reconnecting and says unauthorized", async (_, refuse) => {
    const { engine, server: s } = await server({ refuse });
    const { connection, states } = connect(s, { token: "wrong-token" });
    await until(() => connection.state.state === "unauthorized", { what: "unauthorized" });
    const error = await connection.api.conversations.list().catch((e: unknown) => e);
    expect(error).toMatchObject({ name: "Unauthorized" });
    // Long enough for several attempts, had it kept trying.
    await new Promise((r) => setTimeout(r, 300));
    expect(s.refused).toBe(1);
    expect(states.map((st) => st.state)).toEqual(["unauthorized"]);
    expect(engine.log).toEqual([]);
    expect(JSON.stringify(states) + String(error)).not.toContain("wrong-token");
  });

  test("in a browser, which never sees the handshake's status, the probe tells a refused token apart", async () => {
    const { engine, server: s } = await server({ refuse: "http" });
    // As a browser's WebSocket: a refused handshake is an error event with nothing in it, then 1006.
    class BrowserLike extends WebSocket {
      constructor(url: string, protocols: string[]) {
        super(url, protocols);
        this.on("unexpected-response", (_request, response) => {
          response.destroy();
          this.emit("close", 1006, Buffer.from(""));
        });
      }
    }
    const probes: string[] = [];
    const states: ServerState[] = [];
    const connection = connectServer({
      url: s.url,
      token: "wrong-token",
      tabId: "tab-1",
      WebSocket: BrowserLike as unknown as SocketConstructor,
      backoff: FAST,
      probe: async () => {
        const found = await probeServer(s.checkUrl, "wrong-token");
        probes.push(found);
        return found;
      },
      onState: (state) => states.push(state),
    });
    cleanups.push(() => connection.close());
    await until(() => connection.state.state === "unauthorized", { what: "unauthorized" });
    expect(probes).toEqual(["unauthorized"]);
    expect(states.map((st) => st.state)).toEqual(["unauthorized"]);
    expect(engine.log).toEqual([]);
    // The same probe says a server that is down cannot be reached, and one that admits is reachable.
    expect(await probeServer(s.checkUrl, TOKEN)).toBe("reachable");
    await s.close();
    expect(await probeServer(s.checkUrl, TOKEN)).toBe("unreachable");
  });

  test("a space's address from a server's address and a token, or from a space's own address", () => {
    expect(spaceAddress("http://127.0.0.1:8787", "home.abc")).toEqual({
      socketUrl: "ws://127.0.0.1:8787/space/home/socket",
      checkUrl: "http://127.0.0.1:8787/space/home/check",
      space: "home",
    });
    expect(spaceAddress("https://agents.example.org/base/space/work/", "other.abc")).toEqual({
      socketUrl: "wss://agents.example.org/base/space/work/socket",
      checkUrl: "https://agents.example.org/base/space/work/check",
      space: "work",
    });
    expect(spaceAddress("wss://h/space/x/socket").socketUrl).toBe("wss://h/space/x/socket");
    expect(() => spaceAddress("http://h", "no-space-token")).toThrow(/names no space/);
    expect(() => spaceAddress("ftp://h/space/x")).toThrow(/starts with http/);
    expect(() => spaceAddress("not a url")).toThrow(/not a URL/);
  });

  test("a one-off check says ok, unauthorized or unreachable", async () => {
    const { server: s } = await server();
    const check = (url: string, token: string) =>
      checkServer({ url, token, tabId: "t", WebSocket: Socket, timeoutMs: 2000 });
    expect(await check(s.url, TOKEN)).toEqual({ ok: true, build: "fake" });
    expect(await check(s.url, "nope")).toMatchObject({ ok: false, problem: "unauthorized" });
    const closed = await server();
    const url = closed.server.url;
    await closed.server.close();
    expect(await check(url, TOKEN)).toMatchObject({ ok: false, problem: "unreachable" });
  });

  test("the transport reads only JSON text frames, and a closed connection refuses calls", async () => {
    const { engine, server: s } = await server();
    const socket = new WebSocket(s.url, ["durable-harness.v1", `token.${TOKEN}`]);
    const transport = socketTransport<unknown>(socket as never);
    const got: unknown[] = [];
    transport.onMessage((m) => got.push(m));
    await new Promise((r) => socket.once("open", r));
    // A binary frame and text that is not JSON are dropped; the door answers the JSON one.
    socket.emit("message", Buffer.from("{}"), true);
    socket.emit("message", "not json", false);
    transport.send({ id: 1, method: "hello", args: [{ tabId: "raw", protocol: 1 }] });
    await until(() => got.length === 1, { what: "the hello's reply" });
    expect(got[0]).toMatchObject({ id: 1, ok: true });
    transport.close();
    transport.send({ id: 2, method: "conversations.list", args: [] });
    await new Promise((r) => setTimeout(r, 50));
    expect(engine.log.filter((l) => l.startsWith("conversations.list"))).toEqual([]);
  });
});

test("a call longer than a server's frame is sent in parts back to back; a short one and an ack as one frame each", () => {
  const frames: string[] = [];
  const socket = {
    readyState: 1,
    send: (data: string) => frames.push(data),
    close: () => undefined,
    addEventListener: () => undefined,
  };
  const transport = socketTransport<unknown>(socket);
  const long = { id: 4, method: "run.submit", args: [2, { text: "ü".repeat(1_500_000) }] };
  transport.send(long);
  expect(frames.length).toBeGreaterThan(1);
  expect(frames).toEqual(messageFrames(JSON.stringify(long), 4));
  const parts = frames.map((f) => JSON.parse(f) as { part: { index: number; count: number }; text: string });
  expect(parts.map((p) => p.part.index)).toEqual(parts.map((_, i) => i));
  expect(JSON.parse(parts.map((p) => p.text).join(""))).toEqual(long);
  frames.length = 0;
  transport.send({ id: 5, method: "conversations.list", args: [] });
  transport.send({ ack: 1, seq: 1 });
  expect(frames).toEqual([
    JSON.stringify({ id: 5, method: "conversations.list", args: [] }),
    JSON.stringify({ ack: 1, seq: 1 }),
  ]);
});
