/**
 * A space that finds sockets it did not accept (it woke from hibernation, or the instance before it
 * died: their watches are gone) closes them with the reconnect code, at construction and when one
 * of them speaks; a space made without an engine service refuses a socket (501). No store is opened
 * for any of this.
 */
import { expect, test } from "vitest";
import { RECONNECT_CLOSE, Space, type SpaceSocket, type SpaceState } from "../../../worker/server/space.ts";

function socket(): SpaceSocket & { closes: number[] } {
  const closes: number[] = [];
  return {
    closes,
    send: () => undefined,
    close: (code) => void closes.push(code ?? 0),
    serializeAttachment: () => undefined,
    deserializeAttachment: () => ({ tabId: "t", watches: [] }),
  };
}

function state(sockets: SpaceSocket[]): SpaceState {
  const refuse = () => {
    throw new Error("no store may be opened here");
  };
  return {
    storage: { sql: { exec: refuse }, transactionSync: refuse, setAlarm: refuse, getAlarm: refuse } as never,
    acceptWebSocket: refuse,
    getWebSockets: () => sockets,
  };
}

const open = async () => {
  throw new Error("no harness may be opened here");
};

test("sockets left by an earlier instance are closed with the reconnect code", () => {
  const left = [socket(), socket()];
  const space = new Space(state(left), {}, open);
  expect(left.map((s) => s.closes)).toEqual([[RECONNECT_CLOSE], [RECONNECT_CLOSE]]);
  // One that speaks anyway (its close crossed the message) is told again.
  space.webSocketMessage(left[0]!, '{"id":1,"method":"conversations.list","args":[]}');
  expect(left[0]!.closes).toEqual([RECONNECT_CLOSE, RECONNECT_CLOSE]);
  // Its close is answered, and nothing else happens.
  space.webSocketClose(left[1]!, 4001, "", true);
  expect(left[1]!.closes).toEqual([RECONNECT_CLOSE, 4001]);
});

test("a space without an engine service refuses a socket", async () => {
  const space = new Space(state([]), {}, open);
  const response = await space.fetch(
    new Request("http://x/space/a/socket", { headers: { upgrade: "websocket" } }),
  );
  expect(response.status).toBe(501);
  expect(await response.json()).toMatchObject({ code: "no-sockets" });
  const plain = await space.fetch(new Request("http://x/space/a/socket"));
  expect(plain.status).toBe(426);
});
