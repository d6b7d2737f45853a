/**
 * The store conformance suite (tests/conformance/store-suite.ts) on the Durable Object store, inside
 * workerd: each scenario runs in its own object (its own SQLite database) and is its own test here.
 * The same scenarios run on the memory store in the unit suite (tests/unit/store/conformance.test.ts).
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import { scenarios } from "../conformance/store-suite.ts";
import { type ServerWorker, startServerWorker } from "./miniflare.ts";

let server: ServerWorker;

beforeAll(async () => {
  server = await startServerWorker();
});

afterAll(async () => {
  await server?.stop();
});

test("the worker serves exactly the suite's scenarios", async () => {
  expect(await server.call<string[]>("/scenarios")).toEqual(scenarios.map((s) => s.name));
});

for (const scenario of scenarios) {
  test(scenario.name, async () => {
    const result = await server.call<{ ok: boolean; error?: string; log: string[]; ms: number }>(
      `/scenario?name=${encodeURIComponent(scenario.name)}`,
      { method: "POST" },
    );
    for (const line of result.log) console.log(`[durable-object] ${line}`);
    if (!result.ok) throw new Error(`in workerd: ${result.error}`);
  });
}
