/**
 * An open harness has pi-ai loaded (worker/agent/models/pi-ai.ts): agent tasks resolve catalogue
 * models and validate tool calls synchronously, so `AgentHarness.open` loads it before anything can
 * run. This file imports neither the test kit nor pi-ai, so the module starts unloaded.
 */
import { expect, test } from "vitest";
import { piAi } from "../../../worker/agent/models/pi-ai.ts";
import { AgentHarness, openStore } from "../../../worker/index.ts";

test("AgentHarness.open loads pi-ai: the catalogue resolves synchronously once it returns", async () => {
  expect(() => piAi()).toThrow(/not loaded yet/);
  const h = await AgentHarness.open(await openStore({ kind: "memory" }));
  try {
    expect(piAi().getProviders().length).toBeGreaterThan(0);
    const ref = { provider: "anthropic", modelId: piAi().getModels("anthropic")[0]!.id };
    expect(h.models.list().some((m) => m.provider === ref.provider && m.id === ref.modelId)).toBe(true);
  } finally {
    await h.close();
  }
});
