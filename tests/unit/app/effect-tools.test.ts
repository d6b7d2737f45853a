/**
 * The kill storm's effect tools (worker/debug/effects.ts): the endpoint stays on the worker's origin,
 * each call POSTs its key, mode and call id once, the replay policies are what the storm checks
 * against (`effect_once` unsafe, `effect_keyed` safe), and a server that fails is an error result.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { ToolDefinition } from "../../../worker/agent/tools/contract.ts";
import { replayPolicyOf } from "../../../worker/agent/tools/contract.ts";
import { effectEndpoint, effectToolsAt } from "../../../worker/debug/effects.ts";
import { MemoryFs } from "../../../worker/index.ts";
import { detachedToolApi } from "../../../worker/testing.ts";

const received: Array<{ key: string; mode: string; callId: string }> = [];
let origin = "";
let status = 200;
const server = createServer(async (req, res) => {
  let body = "";
  for await (const chunk of req) body += String(chunk);
  received.push(JSON.parse(body));
  res.writeHead(status, { "Content-Type": "text/plain" }).end(status === 200 ? "applied" : "no");
});

beforeAll(async () => {
  await new Promise<void>((ok) => server.listen(0, "127.0.0.1", () => ok()));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((ok) => server.close(() => ok())));

const toolsOf = () => {
  const tools = effectToolsAt("/effect", origin).tools ?? [];
  return new Map(tools.map((t) => [t.name, t as ToolDefinition]));
};
const api = (toolCallId: string) =>
  detachedToolApi({ fs: new MemoryFs(), output: () => undefined, toolCallId });

describe("effect tools", () => {
  test("the endpoint must be a path on the worker's origin", () => {
    expect(effectEndpoint("/effect", "http://127.0.0.1:9").href).toBe("http://127.0.0.1:9/effect");
    for (const bad of ["http://evil.example/x", "//evil.example/x", "effect", ""])
      expect(() => effectEndpoint(bad, "http://127.0.0.1:9")).toThrow(TypeError);
  });

  test("effect_once is unsafe and effect_keyed safe; each call posts its key once", async () => {
    const tools = toolsOf();
    expect(replayPolicyOf(tools.get("effect_once")!)).toBe("unsafe");
    expect(replayPolicyOf(tools.get("effect_keyed")!)).toBe("safe");
    received.length = 0;
    const once = await tools.get("effect_once")!.execute({ key: "k1" }, api("c1"));
    const keyed = await tools.get("effect_keyed")!.execute({ key: "k2" }, api("c2"));
    expect(once).toEqual({ content: [{ type: "text", text: "applied" }] });
    expect(keyed.isError).toBeUndefined();
    expect(received.map((r) => [r.key, r.mode, r.callId])).toEqual([
      ["k1", "once", "c1"],
      ["k2", "keyed", "c2"],
    ]);
  });

  test("a server that refuses is an error result, not a throw", async () => {
    status = 500;
    try {
      const result = await toolsOf().get("effect_once")!.execute({ key: "k3" }, api("c3"));
      expect(result.isError).toBe(true);
      expect(result.content[0]).toMatchObject({ text: expect.stringMatching(/answered 500/) });
    } finally {
      status = 200;
    }
  });
});
