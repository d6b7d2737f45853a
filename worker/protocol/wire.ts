/**
 * The message format between a tab and the engine, and the transport that carries it. One format for
 * every transport: a MessagePort today (`portTransport`), a WebSocket tomorrow (a `Transport` whose
 * `send` is `socket.send(JSON.stringify(m))` and whose receiver gets `JSON.parse(event.data)`: a small
 * file, because nothing here depends on structured clone). Invariants:
 * - every message is plain JSON data: it survives `JSON.stringify`/`JSON.parse` unchanged in meaning
 *   (no functions, Maps, class instances, transferables; no meaning carried by `undefined`);
 * - a tab sends calls `{ id, method, args }` (ids unique per connection; an absent optional argument
 *   is left off the end) and acknowledgements `{ ack, seq }`; the engine sends one reply per call
 *   (`{ id, ok: true, value }`, `value: null` for a method that returns nothing, or
 *   `{ id, ok: false, error }`; `id` is null when the call was too malformed to name one) and pushes
 *   `{ push: "status", status }` and `{ push: "frame", watch, seq, data }`;
 * - a watch is addressed by the id of the call that opened it: its frames carry that id (they may
 *   arrive before the call's reply), and the call resolves with the same id (for `watches.unwatch`);
 * - a frame's `seq` counts from 1 per watch; the engine sends a watch's next frame only after the tab
 *   acknowledged the previous one (`{ ack: watch, seq }`), so delivery waits for the consumer;
 * - an error crosses as `{ name, message, code? }` and is rethrown in the tab as an Error with that
 *   `name` (`error.name === "ImportRefused"` checks keep working).
 * The engine checks every incoming message at its door (door.ts) before anything runs. A WebSocket
 * transport should also refuse a text frame longer than the door's `maxChars` before parsing it.
 */

import type { EngineStatus } from "./api.ts";

/** A call from the tab: `method` is a wire name such as `"conversations.create"`. */
export interface CallMessage {
  readonly id: number;
  readonly method: string;
  readonly args: readonly unknown[];
}

/**
 * The tab consumed frame `seq` of watch `ack` (the engine may send the next one); `failed`: its
 * consumer threw, which ends the watch (`listener_error`) as a failing listener does in the engine.
 */
export interface AckMessage {
  readonly ack: number;
  readonly seq: number;
  readonly failed?: true;
}

export type TabMessage = CallMessage | AckMessage;

/** An error as it crosses: the tab rethrows it as an Error with this `name`. */
export interface WireError {
  readonly name: string;
  readonly message: string;
  /** The engine's stable code (`HarnessError.code`, or the door's refusal: see door.ts). */
  readonly code?: string;
}

export type ReplyMessage =
  | { readonly id: number; readonly ok: true; readonly value: unknown }
  | { readonly id: number | null; readonly ok: false; readonly error: WireError };

export type PushMessage =
  | { readonly push: "status"; readonly status: EngineStatus }
  | { readonly push: "frame"; readonly watch: number; readonly seq: number; readonly data: unknown };

export type EngineMessage = ReplyMessage | PushMessage;

/**
 * One end of a connection. `send` never throws for a closed connection (the message is dropped);
 * `onMessage` sets the one receiver, and the messages that arrived before it was set are delivered
 * to it first, in order; `onClose` is told once when the other side is known to be gone (a
 * MessagePort may never tell: a SharedWorker cannot see a tab go away, see the tab lock).
 */
export interface Transport<Out> {
  send(message: Out): void;
  /** What arrives is unchecked (whatever the other side sent): the door checks it, the client guards it. */
  onMessage(receive: (message: unknown) => void): void;
  onClose(closed: () => void): void;
  close(): void;
}

/** What `portTransport` needs of a port: a MessagePort, a Worker, or a worker's own global scope. */
export interface PortLike {
  postMessage(message: unknown): void;
  addEventListener(type: "message", listener: (event: MessageEvent) => void): void;
  addEventListener(type: "close", listener: () => void): void;
  start?(): void;
  close?(): void;
}

/**
 * A transport over a MessagePort (or a Worker, or a worker's `self`). Messages travel by structured
 * clone, which carries the same plain JSON data as a WebSocket would; listening starts at once, and
 * what arrives before a receiver is set is held for it (`held` are messages the caller already read
 * from the port, delivered first).
 */
export function portTransport<Out>(port: PortLike, held: readonly unknown[] = []): Transport<Out> {
  const queue: unknown[] = [...held];
  let receive: ((message: unknown) => void) | undefined;
  let closed = false;
  let onClosed: (() => void) | undefined;
  port.addEventListener("message", (event) => {
    if (closed) return;
    if (receive) receive(event.data);
    else queue.push(event.data);
  });
  port.addEventListener("close", () => {
    if (closed) return;
    closed = true;
    onClosed?.();
  });
  port.start?.();
  return {
    send(message) {
      if (!closed) port.postMessage(message);
    },
    onMessage(r) {
      receive = r;
      for (const message of queue.splice(0)) r(message);
    },
    onClose(c) {
      onClosed = c;
    },
    close() {
      if (closed) return;
      closed = true;
      port.close?.();
    },
  };
}

/** An error from the other side, rethrown with the name (and code) it had there. */
export class EngineError extends Error {
  readonly code: string | undefined;
  constructor(error: WireError) {
    super(error.message);
    this.name = error.name;
    this.code = error.code;
  }
}

/** `error` as it crosses: its name, message and code (a thrown non-Error becomes an `Error`). */
export function wireError(error: unknown): WireError {
  if (error instanceof Error) {
    const code = "code" in error && typeof error.code === "string" ? error.code : undefined;
    return { name: error.name, message: error.message, ...(code !== undefined ? { code } : {}) };
  }
  return { name: "Error", message: String(error) };
}
