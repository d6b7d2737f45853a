/**
 * The tab's server connection (worker/protocol/socket.ts: the code the app runs) against the real
 * server space in workerd (miniflare), through a small TCP relay on a fixed port so that the same
 * address reaches workerd after it is killed and started again on its folder. Shown here: a demo
 * run watched over the connection; workerd SIGKILLed mid-run; the connection reconnecting by
 * itself, saying hello again and re-opening its watch, whose first frame is the whole view; the run
 * finishing on the restarted server, every entry in the watched view once and in order, equal to
 * what the server stores; and a wrong token ending in `unauthorized` after one refusal.
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import { WebSocket } from "ws";
import {
  applyFrame,
  type ConversationView,
  type EntryRecord,
  type WatchFrame,
} from "../../worker/protocol/index.ts";
import {
  connectServer,
  probeServer,
  type ServerState,
  type SocketConstructor,
  spaceAddress,
} from "../../worker/protocol/socket.ts";
import { until } from "../../worker/testing/wait.ts";
import { type ServerWorker, startServerWorker } from "./miniflare.ts";
import { type Relay, startRelay } from "./relay.ts";

let server: ServerWorker;
let relay: Relay | undefined;
let relayPort = 0;

beforeAll(async () => {
  server = await startServerWorker({ entry: "space-entry.ts", objects: { SPACES: "TestSpace" } });
  relay = await startRelay(() => server.url());
  relayPort = relay.port;
}, 120_000);

afterAll(async () => {
  await relay?.close();
  await server?.stop();
});

const address = (space: string) => spaceAddress(`http://127.0.0.1:${relayPort}/space/${space}`);

test("workerd killed mid-run: the connection comes back by itself, re-opens its watch whole, and the run finishes with every entry once", async () => {
  const space = "remote-restart";
  const { socketUrl } = address(space);
  const states: ServerState[] = [];
  const connection = connectServer({
    url: socketUrl,
    token: server.token(space),
    tabId: "remote-tab",
    WebSocket: WebSocket as unknown as SocketConstructor,
    backoff: { initialMs: 50, maxMs: 500 },
    waitMs: 60_000,
    onState: (s) => states.push(s),
  });
  try {
    const { api } = connection;
    const conversation = await api.conversations.create("long");
    let view: ConversationView | undefined;
    const frames: WatchFrame[] = [];
    const appended: number[] = [];
    await api.watches.conversation(conversation, (frame: WatchFrame) => {
      frames.push(frame);
      if (frame.value === undefined)
        for (const op of frame.ops) if (op.op === "append") appended.push(...op.entries.map((e) => e.id));
      view = applyFrame(view, frame);
    });
    const kinds = () => (view?.entries ?? []).map((e: EntryRecord) => e.kind);
    await api.run.submit(conversation, { text: "run a long task", requestId: "long-1" });
    await until(() => kinds().includes("pi.assistant"), { what: "the run under way", timeoutMs: 30_000 });

    const before = await api.conversations.list();
    expect(before.find((c) => c.id === conversation)?.busy).toBe(true);
    // SIGKILL workerd mid-run and start it again on the same folder (the relay keeps the address).
    await server.restart();
    await until(() => states.some((s) => s.state === "reconnecting"), {
      what: "reconnecting",
      timeoutMs: 30_000,
    });
    // The reconnecting socket is a request to the space: it opens the engine, which recovers the run.
    await until(() => connection.state.state === "connected", { what: "reconnected", timeoutMs: 60_000 });

    const replaces = () => frames.filter((f) => f.value !== undefined).length;
    await until(() => replaces() === 2, { what: "the re-opened watch's whole view", timeoutMs: 30_000 });
    // The run finishes on the restarted server (its list says idle), and the view catches up.
    let busy = true;
    const poll = setInterval(() => {
      void api.conversations.list().then((list) => {
        busy = list.find((c) => c.id === conversation)?.busy !== false;
      });
    }, 200);
    try {
      await until(() => !busy, { what: "the run finished", timeoutMs: 120_000 });
    } finally {
      clearInterval(poll);
    }
    const stored = await api.watches.entries(conversation);
    await until(() => (view?.entries.length ?? 0) >= stored.length, {
      what: "the view caught up",
      timeoutMs: 30_000,
    });

    // Every entry once, in order, and exactly what the server stores.
    const ids = (view?.entries ?? []).map((e) => e.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids).toEqual(stored.map((e) => e.id));
    // Appended frames never repeat an entry either.
    expect(new Set(appended).size).toBe(appended.length);
    expect(states.filter((s) => s.state === "connected").length).toBeGreaterThanOrEqual(2);
  } finally {
    connection.close();
  }
}, 180_000);

test("a wrong token: one refusal, then unauthorized and no more attempts", async () => {
  const space = "remote-refused";
  const { socketUrl, checkUrl } = address(space);
  const states: ServerState[] = [];
  const wrong = `${space}.${"B".repeat(43)}`;
  const connection = connectServer({
    url: socketUrl,
    token: wrong,
    tabId: "refused-tab",
    WebSocket: WebSocket as unknown as SocketConstructor,
    backoff: { initialMs: 20, maxMs: 100 },
    probe: () => probeServer(checkUrl, wrong),
    onState: (s) => states.push(s),
  });
  try {
    await until(() => connection.state.state === "unauthorized", { what: "unauthorized", timeoutMs: 30_000 });
    expect(states.map((s) => s.state)).toEqual(["unauthorized"]);
    expect(await probeServer(checkUrl, wrong)).toBe("unauthorized");
    expect(await probeServer(checkUrl, server.token(space))).toBe("reachable");
    expect(JSON.stringify(states)).not.toContain(wrong);
  } finally {
    connection.close();
  }
}, 60_000);
