/**
 * The settings the app edits: which providers a browser can use, checking a saved key with a tiny
 * request (ok, missing, rejected, unreachable: in words, never with the key), the names of providers
 * with keys, a conversation's thinking level and instructions (checked where they enter), and the
 * demo model's speed kept in the store.
 */
import { fauxAssistantMessage } from "@mariozechner/pi-ai";
import { expect, test } from "vitest";
import { providerProblem } from "../../../worker/agent/models/key-check.ts";
import { modelChoices, NOT_FROM_A_BROWSER } from "../../../worker/agent/models/keys.ts";
import { createModelResolver } from "../../../worker/agent/models/resolver.ts";
import { defaultStream } from "../../../worker/agent/services.ts";
import { DEFAULT_DEMO_SPEED, getDemoSpeed, setDemoSpeed } from "../../../worker/app/demo-model.ts";
import {
  applyStoredDemoSpeed,
  checkAgentChange,
  DEMO_SPEEDS,
  storedDemoSpeed,
  writeDemoSpeed,
} from "../../../worker/app/settings.ts";
import type { AgentSettingsChange, DemoSpeedName } from "../../../worker/protocol/index.ts";
import { memoryStore } from "../../../worker/testing.ts";
import { echo, open } from "../agent/fixtures.ts";

const KEY = "sk-test-0123456789abcdefXYZ";

test("the model list leaves out providers a browser cannot use with a key, and says which models reason", () => {
  const choices = modelChoices(createModelResolver());
  const providers = new Set(choices.map((m) => m.provider));
  for (const p of Object.keys(NOT_FROM_A_BROWSER)) expect(providers.has(p)).toBe(false);
  for (const p of ["anthropic", "openai", "google", "openrouter"]) expect(providers.has(p)).toBe(true);
  expect(choices.some((m) => m.reasoning)).toBe(true);
  expect(choices.some((m) => !m.reasoning)).toBe(true);
});

test("provider failures are sorted into missing, rejected, network and other", () => {
  expect(providerProblem("No API key for provider: openai")).toBe("missing");
  expect(providerProblem('401 {"error":{"message":"Incorrect API key provided"}}')).toBe("rejected");
  expect(providerProblem("invalid x-api-key")).toBe("rejected");
  expect(providerProblem("Connection error.")).toBe("network");
  expect(providerProblem("TypeError: Failed to fetch")).toBe("network");
  expect(providerProblem("400 context too long")).toBe("other");
  expect(providerProblem(undefined)).toBe("other");
});

test("testing a key: missing without one, ok when the provider answers, and the request carries the key", async () => {
  const seen: Array<string | undefined> = [];
  const { h, faux } = await open(echo, {
    stream: (model, context, options) => {
      seen.push(options.apiKey);
      return defaultStream(model, context, options);
    },
  });
  const provider = faux.ref.provider;
  const missing = await h.models.testKey(provider);
  expect(missing).toMatchObject({ ok: false, problem: "missing" });
  expect(seen).toEqual([]);
  await h.models.setKey(provider, KEY);
  expect(h.models.providersWithKeys()).toEqual([provider]);
  expect(await h.models.testKey(provider)).toEqual({ ok: true, model: faux.model.name });
  expect(seen).toEqual([KEY]);
  await h.models.setKey(provider, null);
  expect(h.models.providersWithKeys()).toEqual([]);
});

test("a rejected key is said in words and the key the provider echoed back is scrubbed", async () => {
  const { h, faux } = await open(() =>
    fauxAssistantMessage([], {
      stopReason: "error",
      errorMessage: `401 Unauthorized: invalid api key ${KEY}`,
    }),
  );
  await h.models.setKey(faux.ref.provider, KEY);
  const check = await h.models.testKey(faux.ref.provider);
  expect(check).toMatchObject({ ok: false, problem: "rejected" });
  expect(check.ok ? "" : check.message).toContain("rejected the API key");
  expect(JSON.stringify(check)).not.toContain(KEY);
  expect(JSON.stringify(check)).toContain("[redacted]");
});

test("an unreachable provider is a network problem, not a thrown error", async () => {
  const { h, faux } = await open(echo, {
    stream: () => {
      throw new TypeError("Failed to fetch");
    },
  });
  await h.models.setKey(faux.ref.provider, KEY);
  const check = await h.models.testKey(faux.ref.provider);
  expect(check).toMatchObject({ ok: false, problem: "network" });
  expect(check.ok ? "" : check.message).toContain("could not be reached");
});

test("an unknown provider has no key and no model: the check says so", async () => {
  const { h } = await open(echo);
  await h.models.setKey("nobody", KEY);
  const check = await h.models.testKey("nobody");
  expect(check).toMatchObject({ ok: false, problem: "other" });
  expect(JSON.stringify(check)).not.toContain(KEY);
});

test("agent-settings changes are checked where they enter; empty instructions mean the default", () => {
  expect(checkAgentChange({ thinkingLevel: "high", instructions: "Be brief." })).toEqual({
    thinkingLevel: "high",
    instructions: "Be brief.",
  });
  expect(checkAgentChange({ instructions: "   " })).toEqual({ instructions: null });
  expect(checkAgentChange({ thinkingLevel: null })).toEqual({ thinkingLevel: null });
  expect(() => checkAgentChange({ thinkingLevel: "extreme" } as unknown as AgentSettingsChange)).toThrow(
    /thinking level must be one of/,
  );
  expect(() =>
    checkAgentChange({ model: { provider: "x", id: "y" } } as unknown as AgentSettingsChange),
  ).toThrow(/unknown setting "model"/);
  expect(() => checkAgentChange({ instructions: "x".repeat(20_001) })).toThrow(/at most 20000 characters/);
  expect(() => checkAgentChange(null as unknown as AgentSettingsChange)).toThrow(TypeError);
});

test("the demo speed is kept in the store and applied again when the engine opens", async () => {
  const { h, store } = await open(echo);
  try {
    expect(storedDemoSpeed(h)).toBe("normal");
    await writeDemoSpeed(h, "instant");
    expect(getDemoSpeed()).toEqual(DEMO_SPEEDS.instant);
    await expect(writeDemoSpeed(h, "warp" as DemoSpeedName)).rejects.toThrow(
      /one of slow, normal, fast, instant/,
    );
    await writeDemoSpeed(h, "slow");
    const image = store.image();
    setDemoSpeed(DEFAULT_DEMO_SPEED);
    const again = await open(echo, { store: await memoryStore(image) });
    expect(storedDemoSpeed(again.h)).toBe("slow");
    applyStoredDemoSpeed(again.h);
    expect(getDemoSpeed()).toEqual(DEMO_SPEEDS.slow);
  } finally {
    setDemoSpeed(DEFAULT_DEMO_SPEED);
  }
});
