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
 * The largest row body (UTF-8 bytes of its JSON) a server space stores whole: a Durable Object's
 * SQLite stores at most 2 MB in one row. An entry or a submission over it keeps its long strings out
 * of line (worker/core/spill.ts, the space's `maxValueBytes`); a document or a task over it cannot
 * live there, so a move holding one is cancelled before it is sent (worker/app/moves.ts).
 */
export const SERVER_MAX_VALUE_BYTES = 1_900_000;

/**
 * The largest message a tab sends a server space in parts (`messageFrames`): room for an input's
 * attachments at the browser's limits (20 MB of files: an image's base64 is 4/3 of its bytes, and
 * JSON escapes text), far below a Durable Object's memory. The space joins the parts in memory, per
 * socket, and never stores them (worker/server/socket.ts).
 */
export const SERVER_MAX_PARTED_CHARS = 48 * 1024 * 1024;

/** The UTF-8 bytes a frame may take: under workerd's 1 MiB, with room to spare. */
const FRAME_BYTES = SERVER_MAX_MESSAGE_CHARS - 1024;

function utf8Bytes(text: string): number {
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) bytes += 1;
    else if (c < 0x800) bytes += 2;
    else bytes += 3; // a surrogate pair is 4 bytes for 2 units: counted as 6, on the safe side
  }
  return bytes;
}

/** A frame of one part: `{"part":{"call":id,"index":i,"count":n},"text":"<a slice of the message's JSON>"}`. */
export interface PartFrame {
  readonly part: { readonly call: number; readonly index: number; readonly count: number };
  readonly text: string;
}

/**
 * The text frames that carry `message` (the JSON text of call `call`) to a server space: the text
 * itself when it fits one frame (at most `SERVER_MAX_MESSAGE_CHARS` characters and under 1 MiB of
 * UTF-8), else parts of it, in order, each a `PartFrame` that fits; a slice never ends inside a
 * surrogate pair. The space joins them back into `message` (worker/server/socket.ts).
 */
export function messageFrames(message: string, call: number): string[] {
  if (message.length <= SERVER_MAX_MESSAGE_CHARS && utf8Bytes(message) <= FRAME_BYTES) return [message];
  const slices: string[] = [];
  let at = 0;
  let size = 900_000;
  while (at < message.length) {
    let end = Math.min(message.length, at + size);
    const last = message.charCodeAt(end - 1);
    if (end < message.length && last >= 0xd800 && last < 0xdc00) end--;
    const slice = message.slice(at, end);
    // Escaped inside a frame, the slice may grow (quotes, backslashes): shrink it until it fits.
    const frame = JSON.stringify({ part: { call, index: 0, count: 0 }, text: slice });
    if (
      (frame.length > SERVER_MAX_MESSAGE_CHARS - 64 || utf8Bytes(frame) > FRAME_BYTES - 64) &&
      size > 1024
    ) {
      size = Math.floor(size / 2);
      continue;
    }
    slices.push(slice);
    at = end;
  }
  return slices.map((text, index) => JSON.stringify({ part: { call, index, count: slices.length }, text }));
}
