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
 * - text that is not JSON (`malformed`);
 * - a call sent in parts (`{"part":{"call","index","count"},"text"}` frames, server-socket.ts
 *   `messageFrames`: what a tab sends when a call is longer than one frame) whose parts do not come
 *   as one unbroken run 0..count-1 of one call (`bad-parts`: a part missing, repeated, out of order,
 *   of another call or count, or any other frame between two parts), or whose joined text is over
 *   `maxPartedChars` (`too-large`). Parts are held in memory for this socket only, never stored: a
 *   refused or unfinished run is dropped (at the refusal, at the next frame that breaks it, or when
 *   the socket closes), and a finished run is parsed and checked as one message.
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
  /** The longest call a socket may send in parts (its joined JSON text; default: none in parts). */
  readonly maxPartedChars?: number;
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
const PART = /^\{"part":\{"call":(\d{1,15}),"index":(\d{1,9}),"count":(\d{1,9})\},"text":/;

/** A call arriving in parts on one socket. */
interface Run {
  readonly call: number;
  readonly count: number;
  readonly texts: string[];
  chars: number;
}
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
  let run: Run | undefined;
  const refuseRun = (
    call: number,
    why: string,
    code: "bad-parts" | "too-large" | "rate-limited" = "bad-parts",
  ) => {
    run = undefined;
    send({ id: call, ok: false, error: wireError(new BadRequest(code, why)) });
  };
  /** A part frame: joined into its run; the whole message once the run is complete. */
  const part = (data: string, head: RegExpExecArray): string | undefined => {
    const call = Number(head[1]);
    const index = Number(head[2]);
    const count = Number(head[3]);
    let text: unknown;
    try {
      text = (JSON.parse(data) as { text?: unknown }).text;
    } catch {
      refuseRun(call, "a part of the message is not JSON");
      return undefined;
    }
    const max = options.maxPartedChars ?? 0;
    if (typeof text !== "string" || text.length === 0 || count < 2 || index >= count)
      return void refuseRun(call, `part ${index} of ${count} is not a part of a message`);
    if (index === 0) {
      if (run) refuseRun(run.call, `the message stopped at part ${run.texts.length} of ${run.count}`);
      run = { call, count, texts: [], chars: 0 };
    } else if (!run || run.call !== call || run.count !== count || run.texts.length !== index) {
      if (run && run.call !== call)
        refuseRun(run.call, `the message stopped at part ${run.texts.length} of ${run.count}`);
      const expected = run && run.call === call ? `part ${run.texts.length} of ${run.count}` : "part 0";
      return void refuseRun(call, `part ${index} of ${count} came where ${expected} was due`);
    }
    run.chars += text.length;
    if (run.chars > max)
      return void refuseRun(call, `the message is larger than ${max} characters`, "too-large");
    run.texts.push(text);
    if (run.texts.length < count) return undefined;
    const whole = run.texts.join("");
    run = undefined;
    if (CALL_ID.exec(whole.slice(0, 24))?.[1] !== String(call))
      return void refuseRun(call, "the parts joined are not the call they were sent for");
    return whole;
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
      const head = ack ? null : PART.exec(data.slice(0, 96));
      if (!head && run)
        refuseRun(run.call, `the message stopped at part ${run.texts.length} of ${run.count}`);
      if (!ack && !calls.take()) {
        const why = `more than ${options.rate.ratePerSecond} calls a second (${options.rate.burst} at once): slow down`;
        if (head) refuseRun(Number(head[1]), why, "rate-limited");
        else refuse(data, new BadRequest("rate-limited", why));
        return;
      }
      const text = head ? part(data, head) : data;
      if (text === undefined) return;
      let message: unknown;
      try {
        message = JSON.parse(text);
      } catch {
        refuse(text, new BadRequest("malformed", "the message is not JSON"));
        return;
      }
      take(message);
    },
    closed() {
      run = undefined;
      if (closed && !onClosed) return;
      closed = true;
      const c = onClosed;
      onClosed = undefined;
      c?.();
    },
  };
}
