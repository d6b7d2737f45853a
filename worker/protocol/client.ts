/**
 * The tab's end of a connection: `connectEngine(transport)` gives an `EngineApi` whose every call
 * becomes one call message (wire.ts) and resolves with its reply, and whose watches keep their
 * listener here and acknowledge each frame once the listener's promise settled (so the engine's
 * pacing holds across the wire). Invariants:
 * - `hello` goes first: calls made before it wait until it is sent (the engine refuses them
 *   otherwise);
 * - trailing `undefined` arguments are dropped (an absent optional argument), so every call is plain
 *   JSON data; a listener (a function) never travels;
 * - a reply with an error rejects with `EngineError` carrying the engine's `name` and `code`;
 * - a frame for a watch this tab no longer listens to is acknowledged at once; `close()` (or the
 *   transport's close) rejects every pending call (Comlink never did: a call to a dead peer hung),
 *   and a call made after it is refused at once with the same `Disconnected` error.
 * Nothing here knows the method list: the API is a Proxy that turns `api.group.name(...)` into the
 * wire name `"group.name"`; the engine's door decides what exists. It loads no schema (the tab's
 * bundle stays small).
 */

import type { EngineApi, EngineStatus, Listener } from "./api.ts";
import { EngineError, type EngineMessage, type TabMessage, type Transport, type WireError } from "./wire.ts";

export interface EngineConnection {
  readonly api: EngineApi;
  /** `listener` gets each status the engine pushes (from an accepted hello on). */
  onStatus(listener: (status: EngineStatus) => void): void;
  /** Close the transport; pending calls reject with a `Disconnected` error. */
  close(): void;
}

interface Pending {
  resolve(value: unknown): void;
  reject(error: Error): void;
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null;

/** A guard for what the engine sends (the tab trusts its engine, but not a malformed message). */
function isEngineMessage(m: unknown): m is EngineMessage {
  if (!isRecord(m)) return false;
  if (m.push === "status") return isRecord(m.status);
  if (m.push === "frame") return typeof m.watch === "number" && typeof m.seq === "number";
  return (typeof m.id === "number" || m.id === null) && typeof m.ok === "boolean";
}

function isWireError(e: unknown): e is WireError {
  return isRecord(e) && typeof e.name === "string" && typeof e.message === "string";
}

export function connectEngine(transport: Transport<TabMessage>): EngineConnection {
  let nextId = 1;
  const pending = new Map<number, Pending>();
  const listeners = new Map<number, Listener<unknown>>();
  const statusListeners: ((status: EngineStatus) => void)[] = [];
  let helloSent: () => void = () => undefined;
  /** Resolves once the hello is sent: every other call waits for it. */
  const opened = new Promise<void>((resolve) => {
    helloSent = resolve;
  });
  let isOpen = false;
  /** Why the connection ended, once it did: later calls are refused with it. */
  let ended: string | undefined;

  transport.onMessage((message) => {
    if (!isEngineMessage(message)) return;
    if ("push" in message) {
      if (message.push === "status") {
        for (const l of statusListeners) l(message.status);
        return;
      }
      const { watch, seq, data } = message;
      const listener = listeners.get(watch);
      if (!listener) {
        transport.send({ ack: watch, seq });
        return;
      }
      let delivered: Promise<void> | void;
      try {
        delivered = listener(data);
      } catch {
        transport.send({ ack: watch, seq, failed: true });
        return;
      }
      Promise.resolve(delivered).then(
        () => transport.send({ ack: watch, seq }),
        () => transport.send({ ack: watch, seq, failed: true }),
      );
      return;
    }
    if (message.id === null) return;
    const call = pending.get(message.id);
    if (!call) return;
    pending.delete(message.id);
    if (message.ok) call.resolve(message.value);
    else {
      listeners.delete(message.id);
      call.reject(
        new EngineError(isWireError(message.error) ? message.error : { name: "Error", message: "?" }),
      );
    }
  });
  transport.onClose(() => fail("the engine's connection closed"));

  function fail(why: string): void {
    ended ??= why;
    for (const call of pending.values()) call.reject(new EngineError({ name: "Disconnected", message: why }));
    pending.clear();
    listeners.clear();
  }

  async function call(method: string, given: readonly unknown[]): Promise<unknown> {
    const args = [...given];
    const last = args.at(-1);
    const listener = typeof last === "function" ? args.pop() : undefined;
    while (args.length > 0 && args.at(-1) === undefined) args.pop();
    if (method !== "hello" && !isOpen) await opened;
    if (ended !== undefined) throw new EngineError({ name: "Disconnected", message: ended });
    const id = nextId++;
    const reply = new Promise<unknown>((resolve, reject) => pending.set(id, { resolve, reject }));
    // A watch: its frames carry this call's id and may come before the reply.
    if (typeof listener === "function") listeners.set(id, (value) => listener(value));
    transport.send({ id, method, args });
    if (method === "hello" && !isOpen) {
      isOpen = true;
      helloSent();
    }
    return reply;
  }

  /** `group.name(...)` for any name: the door refuses names it does not serve. */
  const group = (name: string) =>
    new Proxy(
      {},
      {
        get: (_, method) =>
          typeof method === "string" && method !== "then"
            ? (...args: unknown[]) => {
                if (name === "watches" && method === "unwatch") listeners.delete(Number(args[0]));
                return call(`${name}.${method}`, args);
              }
            : undefined,
      },
    );
  const groups = new Map<string, object>();
  const root = new Proxy(
    {},
    {
      get: (_, name) => {
        if (typeof name !== "string" || name === "then") return undefined;
        if (name === "hello") return (...args: unknown[]) => call("hello", args);
        let g = groups.get(name);
        if (!g) groups.set(name, (g = group(name)));
        return g;
      },
    },
  );
  return {
    // The one unchecked step of the tab: a Proxy has no static shape. The engine's door checks every
    // call it makes against EngineApi's schemas, and its replies are the engine's own values.
    api: root as EngineApi,
    onStatus(listener) {
      statusListeners.push(listener);
    },
    close() {
      fail("the connection was closed");
      transport.close();
    },
  };
}
