/**
 * The terms of a tab's WebSocket to a server space, which both ends import (the tab through
 * index.ts, the server in worker/server/ and worker/entry/server.ts): where the socket is, the
 * subprotocol the server speaks and how a token rides beside it (a browser's WebSocket cannot set
 * headers), the close code that asks the tab to reconnect, and the server's message limit. The
 * messages themselves are wire.ts's, one JSON text frame each.
 */

/** The protocol's WebSocket subprotocol: offered first, the only one the server echoes. */
export const SPACE_SUBPROTOCOL = "durable-harness.v1";

/** A token offered as a subprotocol: `token.<token>` (the space's token: worker/server/token.ts). */
export const TOKEN_SUBPROTOCOL_PREFIX = "token.";

/** What a tab offers as `new WebSocket(url, protocols)` for a space's token. */
export function spaceSocketProtocols(token: string): string[] {
  return [SPACE_SUBPROTOCOL, `${TOKEN_SUBPROTOCOL_PREFIX}${token}`];
}

/** A space's name: 1 to 64 of A-Z a-z 0-9 _ - (what its URL and its token carry). */
export const SPACE_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/** The path of space `space`'s socket on a server (`GET`, upgraded); `check` answers whether a token opens it. */
export function spacePath(space: string, route: "socket" | "check"): string {
  if (!SPACE_NAME.test(space)) throw new TypeError("a space's name: 1 to 64 of A-Z a-z 0-9 _ -");
  return `/space/${space}/${route}`;
}

/**
 * The close code with which a space asks a tab to reconnect: the instance that served its watches
 * is gone (it woke from hibernation, it died, or its store failed). The tab reconnects, says hello
 * and opens its watches again.
 */
export const RECONNECT_CLOSE = 4001;

/**
 * The largest message a server space takes: a million characters of JSON text (refused unparsed
 * above, `too-large`; workerd closes a socket whose message is over 1 MiB of UTF-8 with code 1009).
 */
export const SERVER_MAX_MESSAGE_CHARS = 1_000_000;

/**
 * The largest single value (an entry, a document, a task; UTF-8 bytes of its JSON) a move sends a
 * server space: a Durable Object's SQLite stores at most 2 MB in one row, so a larger one would fail
 * the space's adopt on every retry; what is above this is refused before the move starts.
 */
export const SERVER_MAX_VALUE_BYTES = 1_900_000;
