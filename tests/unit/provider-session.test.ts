/**
 * pi.provider (spec §2.2): every conversation gets its own provider session id, a UUIDv7, in the
 * commit that creates it; the id's first 48 bits are the creation time in milliseconds.
 */
import { expect, test } from "vitest";
import { echo, open } from "./agent-fixtures.ts";

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

const sessionOf = async (h: Awaited<ReturnType<typeof open>>["h"], c: number) =>
  (await h.doc<{ sessionId: string }>(c, "pi.provider"))!.sessionId;

test("pi.provider's session id is a UUIDv7 carrying its creation time, distinct per conversation", async () => {
  const before = Date.now();
  const { h } = await open(echo);
  const other = await h.createConversation({ ownership: { kind: "ownerless" } });
  const after = Date.now();
  const ids = [await sessionOf(h, 1), await sessionOf(h, other.id)];
  for (const id of ids) {
    expect(id).toMatch(UUID_V7);
    const millis = Number.parseInt(id.replace(/-/g, "").slice(0, 12), 16);
    expect(millis).toBeGreaterThanOrEqual(before);
    expect(millis).toBeLessThanOrEqual(after);
  }
  expect(new Set(ids).size).toBe(2);
});
