/**
 * A tab as the server tests play it: a WebSocket client (the `ws` package) that speaks the
 * protocol's messages (worker/protocol/wire.ts) to a space, sends calls, acknowledges every watch
 * frame it gets, and keeps what it received. Opening fails with the front door's answer (status
 * and JSON body) when the upgrade is refused.
 */
import WebSocket from "ws";
import { PROTOCOL_VERSION } from "../../worker/protocol/index.ts";
import { messageFrames } from "../../worker/protocol/server-socket.ts";

export interface Reply {
  readonly id: number | null;
  readonly ok: boolean;
  readonly value?: unknown;
  readonly error?: { name: string; message: string; code?: string };
}

export class Refused extends Error {
  constructor(
    readonly status: number,
    readonly body: { error?: string; code?: string } | undefined,
  ) {
    super(`the upgrade was refused: ${status} ${JSON.stringify(body)}`);
  }
}

export class SocketTab {
  readonly replies: Reply[] = [];
  readonly frames = new Map<number, unknown[]>();
  readonly statuses: unknown[] = [];
  readonly #waiting = new Map<number, (reply: Reply) => void>();
  readonly #watchers = new Set<() => void>();
  #nextId = 1;
  closed: { code: number; reason: string } | undefined;

  private constructor(readonly ws: WebSocket) {
    ws.on("message", (data, binary) => {
      if (binary) throw new Error("the engine sent a binary frame");
      const message = JSON.parse(data.toString()) as Record<string, unknown>;
      if (message["push"] === "frame") {
        const watch = message["watch"] as number;
        const list = this.frames.get(watch) ?? [];
        list.push(message["data"]);
        this.frames.set(watch, list);
        ws.send(JSON.stringify({ ack: watch, seq: message["seq"] }));
      } else if (message["push"] === "status") this.statuses.push(message["status"]);
      else {
        const reply = message as unknown as Reply;
        this.replies.push(reply);
        if (reply.id !== null) this.#waiting.get(reply.id)?.(reply);
        if (reply.id !== null) this.#waiting.delete(reply.id);
      }
      for (const w of this.#watchers) w();
    });
    ws.on("close", (code, reason) => {
      this.closed = { code, reason: reason.toString() };
      for (const w of this.#watchers) w();
    });
  }

  /** Open a socket to `url` offering `protocols` (or with `headers`); fails with the refusal. */
  static open(
    url: URL | string,
    options: { protocols?: string[]; headers?: Record<string, string> } = {},
  ): Promise<SocketTab> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, options.protocols ?? [], { headers: options.headers ?? {} });
      ws.once("open", () => resolve(new SocketTab(ws)));
      ws.once("unexpected-response", (_request, response) => {
        let text = "";
        response.on("data", (chunk: Buffer) => {
          text += chunk.toString();
        });
        response.on("end", () =>
          reject(new Refused(response.statusCode ?? 0, text ? JSON.parse(text) : undefined)),
        );
      });
      ws.once("error", reject);
    });
  }

  /** Send a call; resolves with its reply (ok or not). */
  call(method: string, ...args: unknown[]): Promise<Reply> {
    const id = this.#nextId++;
    const reply = new Promise<Reply>((resolve) => this.#waiting.set(id, resolve));
    this.ws.send(JSON.stringify({ id, method, args }));
    return reply;
  }

  /** Send a call as the tab's socket transport does: in parts when it is longer than one frame. */
  callParted(method: string, ...args: unknown[]): Promise<Reply> {
    const id = this.#nextId++;
    const reply = new Promise<Reply>((resolve) => this.#waiting.set(id, resolve));
    for (const frame of messageFrames(JSON.stringify({ id, method, args }), id)) this.ws.send(frame);
    return reply;
  }

  /** A call that must succeed: its value. */
  async value<T>(method: string, ...args: unknown[]): Promise<T> {
    const reply = await this.call(method, ...args);
    if (!reply.ok) throw new Error(`${method} failed: ${JSON.stringify(reply.error)}`);
    return reply.value as T;
  }

  async hello(tabId: string): Promise<{ protocol: number; build: string; status: { phase: string } }> {
    return this.value("hello", { tabId, protocol: PROTOCOL_VERSION });
  }

  /** Send raw text or bytes (no reply awaited). */
  send(data: string | Buffer): void {
    this.ws.send(data);
  }

  /** Resolves once `done()` holds (checked at every message and at the close). */
  until(done: () => boolean, what: string, ms = 20_000): Promise<void> {
    if (done()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#watchers.delete(check);
        reject(new Error(`not within ${ms} ms: ${what}`));
      }, ms);
      const check = () => {
        if (!done()) return;
        clearTimeout(timer);
        this.#watchers.delete(check);
        resolve();
      };
      this.#watchers.add(check);
    });
  }

  close(): Promise<void> {
    if (this.closed) return Promise.resolve();
    const closed = this.until(() => this.closed !== undefined, "the socket closing");
    this.ws.close(1000);
    return closed;
  }
}
