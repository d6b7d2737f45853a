/**
 * The protocol's transport over a server WebSocket (workerd's, accepted with the Hibernation API:
 * what arrives comes through the object's `webSocketMessage`, so the space hands each frame to
 * `receive`). It is the outer check of the door (worker/protocol/door.ts checks every message it
 * parses); before anything is parsed it refuses, with a reply `{ id, ok: false, error }` whose
 * `error` is a `BadRequest` with a typed `code`:
 * - a binary frame (`malformed`: the protocol is JSON text);
 * - a text frame longer than the door's `maxChars` (`too-large`), never parsed;
 * - a call beyond the socket's rate (`rate-limited`): a token bucket per socket (`ratePerSecond`
 *   refilled, `burst` at most); nothing of it runs. Acknowledgements of frames (short messages
 *   `{"ack":N,"seq":N}`) are not counted: they answer frames the engine sent, one each, and cost a
 *   lookup; counting them would stall a busy watch;
 * - text that is not JSON (`malformed`).
 * A refusal's `id` is the call's when the frame starts as the tab's calls do (`{"id":N,`), so the
 * tab's call fails with the code instead of waiting; otherwise null. The connection goes on.
 * Invariants: `send` never throws (a closed socket drops the message); `onClose` is told once, when
 * the space hears the socket close (or error).
 */
import { BadRequest, type DoorLimits } from "../protocol/door.ts";
import { type EngineMessage, type Transport, wireError } from "../protocol/wire.ts";

/** The part of a workerd WebSocket the transport uses. */
export interface ServerSocket {
  send(message: string): void;
  close(code?: number, reason?: string): void;
}

export interface RateLimit {
  /** Calls per second a socket may make, on average. */
  readonly ratePerSecond: number;
  /** Calls a socket may make at once (the bucket's size). */
  readonly burst: number;
}

/** 50 calls a second, 200 at once: far above a person's tab, far below a flood. */
export const DEFAULT_RATE: RateLimit = { ratePerSecond: 50, burst: 200 };

export interface SocketTransportOptions {
  readonly limits: DoorLimits;
  readonly rate: RateLimit;
  /** The clock (milliseconds), for the bucket. */
  readonly now?: () => number;
}

/** A socket's transport, and the entry points the space calls for its events. */
export interface SocketConnection {
  readonly transport: Transport<EngineMessage>;
  /** A frame arrived (`webSocketMessage`). */
  receive(data: string | ArrayBuffer): void;
  /** The socket closed or failed (`webSocketClose`, `webSocketError`). */
  closed(): void;
}

const ACK = /^\{"ack":\d{1,15},"seq":\d{1,15}(,"failed":true)?\}$/;
const CALL_ID = /^\{"id":(\d{1,15}),/;

/** A token bucket: `take()` answers whether one more call fits now. */
function bucket(rate: RateLimit, now: () => number): { take(): boolean } {
  let tokens = rate.burst;
  let at = now();
  return {
    take() {
      const t = now();
      tokens = Math.min(rate.burst, tokens + ((t - at) / 1000) * rate.ratePerSecond);
      at = t;
      if (tokens < 1) return false;
      tokens -= 1;
      return true;
    },
  };
}

export function socketTransport(ws: ServerSocket, options: SocketTransportOptions): SocketConnection {
  const calls = bucket(options.rate, options.now ?? (() => Date.now()));
  const queue: unknown[] = [];
  let deliver: ((message: unknown) => void) | undefined;
  let closed = false;
  let onClosed: (() => void) | undefined;
  const send = (message: EngineMessage) => {
    if (closed) return;
    try {
      ws.send(JSON.stringify(message));
    } catch {
      // The socket is gone: its close event follows.
    }
  };
  const refuse = (text: string | undefined, error: BadRequest) => {
    const id = text === undefined ? undefined : CALL_ID.exec(text.slice(0, 24))?.[1];
    send({ id: id === undefined ? null : Number(id), ok: false, error: wireError(error) });
  };
  const take = (message: unknown) => {
    if (deliver) deliver(message);
    else queue.push(message);
  };
  return {
    transport: {
      send,
      onMessage(r) {
        deliver = r;
        for (const m of queue.splice(0)) r(m);
      },
      onClose(c) {
        onClosed = c;
      },
      close() {
        if (closed) return;
        closed = true;
        try {
          ws.close(1000, "closed by the engine");
        } catch {
          // Already closed.
        }
      },
    },
    receive(data) {
      if (closed) return;
      if (typeof data !== "string") {
        refuse(undefined, new BadRequest("malformed", "binary frames are not served: send JSON text"));
        return;
      }
      if (data.length > options.limits.maxChars) {
        const why = `the message is larger than ${options.limits.maxChars} characters`;
        refuse(data, new BadRequest("too-large", why));
        return;
      }
      const ack = data.length <= 64 && ACK.test(data);
      if (!ack && !calls.take()) {
        const why = `more than ${options.rate.ratePerSecond} calls a second (${options.rate.burst} at once): slow down`;
        refuse(data, new BadRequest("rate-limited", why));
        return;
      }
      let message: unknown;
      try {
        message = JSON.parse(data);
      } catch {
        refuse(data, new BadRequest("malformed", "the message is not JSON"));
        return;
      }
      take(message);
    },
    closed() {
      if (closed && !onClosed) return;
      closed = true;
      const c = onClosed;
      onClosed = undefined;
      c?.();
    },
  };
}
