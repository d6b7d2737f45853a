/**
 * `usage.days` and `traces.export` through the engine's door over a real harness (the tab's path,
 * worker/protocol/door.ts then worker/app/engine-service.ts): a malformed query is refused at the
 * door as `BadRequest` (`bad-args`) and nothing runs; a query whose zone or days the engine cannot
 * use reaches the tab as a typed `UsageQueryInvalid` with its code; a good one is answered; a trace
 * of a conversation that does not exist is a typed `UnknownConversation`.
 */
import { expect, test } from "vitest";
import { HarnessEngine } from "../../../worker/app/engine-service.ts";
import { serveConnection } from "../../../worker/protocol/door.ts";
import { type EngineMessage, PROTOCOL_VERSION, type ReplyMessage } from "../../../worker/protocol/index.ts";
import { echo, open } from "../agent/fixtures.ts";
import { rawPair } from "../protocol/fixtures.ts";

async function door() {
  const { h, root } = await open(echo);
  const [tab, side] = rawPair();
  serveConnection({ transport: side, engine: new HarnessEngine({ harness: async () => h, build: "test" }) });
  const waiting: ((r: ReplyMessage) => void)[] = [];
  tab.onMessage((m) => {
    const message = m as EngineMessage;
    if ("ok" in message) waiting.shift()?.(message);
  });
  let id = 0;
  const call = (method: string, ...args: unknown[]) =>
    new Promise<ReplyMessage>((resolve) => {
      waiting.push(resolve);
      tab.send({ id: ++id, method, args });
    });
  expect((await call("hello", { tabId: "tab-1", protocol: PROTOCOL_VERSION })).ok).toBe(true);
  return { h, root, call };
}

const refusal = (reply: ReplyMessage) =>
  reply.ok ? undefined : { name: reply.error.name, code: reply.error.code };

test("usage.days: a malformed query is refused at the door, a bad zone or range by the engine with its code, a good one answered", async () => {
  const { call } = await door();
  const good = { timeZone: "Europe/Berlin", from: "2026-03-01", to: "2026-03-31" };
  for (const bad of [
    [{ ...good, from: "2026-3-1" }],
    [{ ...good, extra: true }],
    [{ from: good.from, to: good.to }],
    [{ ...good, timeZone: 7 }],
    [],
  ])
    expect(refusal(await call("usage.days", ...bad))).toEqual({ name: "BadRequest", code: "bad-args" });
  expect(refusal(await call("usage.days", { ...good, timeZone: "Nowhere/Special" }))).toEqual({
    name: "UsageQueryInvalid",
    code: "bad_time_zone",
  });
  expect(refusal(await call("usage.days", { ...good, from: "2026-04-01" }))).toEqual({
    name: "UsageQueryInvalid",
    code: "bad_range",
  });
  const answer = await call("usage.days", good);
  expect(answer.ok && answer.value).toEqual({ ...good, rows: [] });
});

test("traces.export: a conversation's trace as a file; an unknown conversation is refused, typed", async () => {
  const { root, call } = await door();
  const exported = await call("traces.export", root.id);
  expect(exported.ok && (exported.value as { fileName: string }).fileName).toBe(
    `trace-conversation-${root.id}.otlp.json`,
  );
  expect(refusal(await call("traces.export", 999))).toEqual({
    name: "UnknownConversation",
    code: "unknown_conversation",
  });
  expect(refusal(await call("traces.export", "1"))).toEqual({ name: "BadRequest", code: "bad-args" });
});
