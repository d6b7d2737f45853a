/**
 * A requestId call carried across a dropped connection (src/lib/across-drops.ts): the composer's
 * submit, the retry and the rerun repeat with the same requestId while the call fails `Disconnected`,
 * and only then; the engine's dedupe by requestId makes the repeat the same submission. The socket
 * test (tests/unit/protocol/socket.test.ts) drops a real WebSocket under a submit.
 */
import { expect, test } from "vitest";
import { acrossDrops, isDisconnected } from "../../../src/lib/across-drops.ts";

const dropped = () => Object.assign(new Error("the engine's connection closed"), { name: "Disconnected" });

test("a call that fails Disconnected is made again with the same requestId until it is answered", async () => {
  const seen: string[] = [];
  const answer = await acrossDrops(
    async (requestId) => {
      seen.push(requestId);
      if (seen.length < 3) throw dropped();
      return `submission for ${requestId}`;
    },
    { pauseMs: 1 },
  );
  expect(seen).toHaveLength(3);
  expect(new Set(seen).size).toBe(1);
  expect(seen[0]).toMatch(/^[0-9a-f-]{36}$/);
  expect(answer).toBe(`submission for ${seen[0]}`);
});

test("any other failure reaches the caller at once, not repeated", async () => {
  let calls = 0;
  const busy = Object.assign(new Error("the conversation is busy"), { name: "ConversationBusy" });
  const error = await acrossDrops(
    async () => {
      calls++;
      throw busy;
    },
    { pauseMs: 1 },
  ).catch((e: unknown) => e);
  expect(error).toBe(busy);
  expect(calls).toBe(1);
});

test("at most `attempts` calls in all: the last Disconnected reaches the caller as it came", async () => {
  const ids: string[] = [];
  const last = dropped();
  const error = await acrossDrops(
    async (requestId) => {
      ids.push(requestId);
      throw ids.length === 2 ? last : dropped();
    },
    { attempts: 2, pauseMs: 1, requestId: "req-7" },
  ).catch((e: unknown) => e);
  expect(error).toBe(last);
  expect(ids).toEqual(["req-7", "req-7"]);
});

test("Disconnected is told by the error's name, whatever its class", () => {
  expect(isDisconnected(dropped())).toBe(true);
  expect(isDisconnected({ name: "Disconnected", message: "x" })).toBe(true);
  expect(isDisconnected(new Error("Disconnected"))).toBe(false);
  expect(isDisconnected(undefined)).toBe(false);
  expect(isDisconnected("Disconnected")).toBe(false);
});
