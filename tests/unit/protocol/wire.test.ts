/**
 * The message format end to end: the tab's client (worker/protocol/client.ts) and the engine's door
 * (door.ts) over a real MessageChannel (the browser's transport) and over a transport that sends
 * every message as JSON text (what a WebSocket carries: proof the format needs nothing more). The
 * same script runs on both: hello first (calls made before it wait), status pushes, values, typed
 * errors rethrown with their name, a watch's frames paced by the tab's acknowledgements, a failing
 * consumer ending the watch, unwatch, and a closed connection rejecting what is pending.
 */
import { MessageChannel } from "node:worker_threads";
import { afterEach, describe, expect, test } from "vitest";
import { connectEngine } from "../../../worker/protocol/client.ts";
import { serveConnection } from "../../../worker/protocol/door.ts";
import { type EngineStatus, PROTOCOL_VERSION, type WatchFrame } from "../../../worker/protocol/index.ts";
import {
  EngineError,
  type EngineMessage,
  type PortLike,
  portTransport,
  type TabMessage,
  type Transport,
} from "../../../worker/protocol/wire.ts";
import { fakeEngine, jsonPair } from "./fixtures.ts";

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

/** A Node MessagePort as the browser's (`addEventListener` delivers a MessageEvent). */
function nodePort(port: import("node:worker_threads").MessagePort): PortLike {
  return {
    postMessage: (m) => port.postMessage(m),
    addEventListener: (type: "message" | "close", listener: (event: MessageEvent) => void) =>
      port.addEventListener(type, (event) => listener(event as MessageEvent)),
    start: () => port.start(),
    close: () => port.close(),
  };
}

function messageChannel(): [Transport<TabMessage>, Transport<EngineMessage>] {
  const channel = new MessageChannel();
  cleanups.push(() => {
    channel.port1.close();
    channel.port2.close();
  });
  return [
    portTransport<TabMessage>(nodePort(channel.port1)),
    portTransport<EngineMessage>(nodePort(channel.port2)),
  ];
}

const tick = (ms = 20) => new Promise((r) => setTimeout(r, ms));

function deferred() {
  let resolve: () => void = () => undefined;
  let reject: (e: Error) => void = () => undefined;
  const promise = new Promise<void>((ok, fail) => {
    resolve = ok;
    reject = fail;
  });
  return { promise, resolve, reject };
}

describe.each([
  ["a MessageChannel", messageChannel],
  ["a JSON-text transport (a WebSocket's frames)", jsonPair],
])("over %s", (_, transports) => {
  test("calls, status pushes, typed errors", async () => {
    const [tabSide, engineSide] = transports();
    const engine = fakeEngine();
    serveConnection({ transport: engineSide, engine });
    const { api, onStatus } = connectEngine(tabSide);
    const statuses: EngineStatus[] = [];
    onStatus((s) => statuses.push(s));

    // Made before the hello: it waits, and is answered after it.
    const created = api.conversations.create("first");
    const hello = await api.hello({ tabId: "t1", protocol: PROTOCOL_VERSION });
    expect(hello).toMatchObject({ protocol: PROTOCOL_VERSION, build: "fake" });
    expect(await created).toBe(7);
    expect(engine.log.slice(0, 2)).toEqual([
      `hello([{"tabId":"t1","protocol":${PROTOCOL_VERSION}}])`,
      'conversations.create(["first"])',
    ]);
    // An absent optional argument travels as no argument.
    expect(await api.conversations.create(undefined)).toBe(7);
    expect(engine.log.at(-1)).toBe("conversations.create([])");

    await tick();
    expect(statuses).toEqual([{ phase: "starting", detail: "fake" }]);
    engine.setStatus({ phase: "handing-over", detail: "x" });
    await tick();
    expect(statuses.at(-1)).toEqual({ phase: "handing-over", detail: "x" });

    expect(await api.conversations.list()).toEqual([{ id: 1, title: "Main", busy: false }]);
    expect(await api.run.submit(1, { text: "hi", mode: "steer" })).toBe(3);
    expect(engine.log.at(-1)).toBe('run.submit([1,{"text":"hi","mode":"steer"}])');

    const error = await api.conversations.fork(99, 1).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EngineError);
    expect(error).toMatchObject({ name: "UnknownConversation", code: "unknown_conversation" });
    const refused = await api.conversations.fork(Number.NaN, 1).catch((e: unknown) => e);
    expect(refused).toMatchObject({ name: "BadRequest" });
  });

  test("a watch's frames wait for the tab's consumer; a failing consumer ends it; unwatch", async () => {
    const [tabSide, engineSide] = transports();
    const engine = fakeEngine();
    serveConnection({ transport: engineSide, engine });
    const { api } = connectEngine(tabSide);
    await api.hello({ tabId: "t1", protocol: PROTOCOL_VERSION });

    const frames: WatchFrame[] = [];
    let hold: ReturnType<typeof deferred> | undefined;
    const watchId = await api.watches.conversation(1, async (frame) => {
      frames.push(frame);
      await hold?.promise;
    });
    expect(frames).toEqual([{ seq: 0, ops: [] }]);
    const watch = engine.watches.at(-1)!;

    // The engine's listener resolves only once the tab's consumer finished with the frame.
    hold = deferred();
    let delivered = false;
    const pushed = watch.push({ seq: 1, ops: [] }).then(() => {
      delivered = true;
    });
    await tick();
    expect(frames).toHaveLength(2);
    expect(delivered).toBe(false);
    hold.resolve();
    await pushed;
    expect(delivered).toBe(true);

    // A consumer that throws: the engine's listener rejects (its watch ends, listener_error).
    hold = deferred();
    const failed = watch.push({ seq: 2, ops: [] }).catch((e: unknown) => e);
    await tick();
    hold.reject(new Error("the view broke"));
    expect(await failed).toBeInstanceOf(Error);

    // Unwatch ends the engine's watch (by the engine's own id) and nothing more is delivered.
    hold = undefined;
    await api.watches.unwatch(watchId);
    expect(engine.log.at(-1)).toBe(`watches.unwatch([${watch.id}])`);
    await watch.push({ seq: 3, ops: [] });
    expect(frames).toHaveLength(3);
  });

  test("closing the connection rejects what is pending", async () => {
    const [tabSide, engineSide] = transports();
    const engine = fakeEngine();
    serveConnection({ transport: engineSide, engine });
    const connection = connectEngine(tabSide);
    await connection.api.hello({ tabId: "t1", protocol: PROTOCOL_VERSION });
    // A watch whose first frame is never acknowledged keeps its call open.
    const never = new Promise<void>(() => undefined);
    const open = connection.api.watches.taskGraph(() => never).catch((e: unknown) => e);
    await tick();
    connection.close();
    expect(await open).toMatchObject({ name: "Disconnected" });
    // A call made after the close is refused at once (it would wait forever for a reply).
    expect(await connection.api.conversations.list().catch((e: unknown) => e)).toMatchObject({
      name: "Disconnected",
    });
  });
});
