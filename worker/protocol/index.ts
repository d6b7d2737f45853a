/**
 * What a tab imports of the engine: the API's types (api.ts), the engine's types that travel with it
 * (types.ts), the message format's types (wire.ts), a small set of pure readers (readers.ts), and the
 * constants both sides agree on (the protocol version, the store's default name, the lock names).
 * No engine internals as run-time values, and never the schemas or the door (engine-only). The tab's
 * end of a connection is client.ts; a transport over a MessagePort is `portTransport` in wire.ts;
 * the terms of a WebSocket to a server space (its path, subprotocols, reconnect code) server-socket.ts.
 */

export * from "./api.ts";
export * from "./attachments.ts";
export * from "./browser.ts";
export * from "./readers.ts";
export * from "./server-socket.ts";
export type * from "./types.ts";
export type {
  AckMessage,
  CallMessage,
  EngineMessage,
  PushMessage,
  ReplyMessage,
  TabMessage,
  WireError,
} from "./wire.ts";
