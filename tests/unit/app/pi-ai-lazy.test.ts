/**
 * pi-ai is loaded on demand (worker/agent/models/pi-ai.ts; issue 16 item 3): nothing of it is usable
 * before the load, a registration asked for earlier (the demo provider's) is in place before anyone
 * awaiting the load resumes (pi-ai-harness.test.ts: an open harness has it loaded). This file imports neither the test
 * kit nor pi-ai itself, so the module starts unloaded (vitest gives each test file its own modules).
 */
import { expect, test } from "vitest";
import { loadPiAi, type PiAi, piAi, whenPiAiLoads } from "../../../worker/agent/models/pi-ai.ts";
import { DEMO_API, registerDemoProvider } from "../../../worker/app/demo-model.ts";

test("pi-ai loads on demand; registrations asked for before the load precede every awaiter", async () => {
  expect(() => piAi()).toThrow(/not loaded yet/);
  const order: string[] = [];
  registerDemoProvider();
  whenPiAiLoads(() => order.push("registration"));
  const loading = loadPiAi().then((pi) => {
    order.push("awaiter");
    return pi;
  });
  expect(loadPiAi()).toBe(loadPiAi()); // one load, however many ask
  const pi: PiAi = await loading;
  expect(order).toEqual(["registration", "awaiter"]);
  expect(piAi()).toBe(pi);
  // The demo provider registered itself on the load, and streams through pi-ai's registry.
  expect(pi.getApiProvider(DEMO_API)).toBeDefined();
  // Once loaded, a later registration runs at once.
  whenPiAiLoads(() => order.push("late"));
  expect(order).toEqual(["registration", "awaiter", "late"]);
});
