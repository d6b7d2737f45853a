/**
 * An engine like the app's for the user-tools tests: the built-in tools, the demo model (fast), the
 * stored user tools installed before it resumes, and the app's default selection base (imported
 * tools opt-in, `userToolSettings`). `appEngines()` registers the suite's hooks.
 */
import type { Api, Model } from "@mariozechner/pi-ai";
import { afterAll, afterEach, beforeAll, expect } from "vitest";
import { createRegistry, type ExtensionRegistry } from "../../../worker/agent/extensions/registry.ts";
import { AgentHarness } from "../../../worker/agent/harness.ts";
import { createModelResolver } from "../../../worker/agent/models/resolver.ts";
import { builtinToolsExtension } from "../../../worker/agent/tools/builtin/index.ts";
import { MemoryFs } from "../../../worker/agent/workspace/memory-fs.ts";
import {
  type DemoSpeed,
  demoModel,
  registerDemoProvider,
  setDemoSpeed,
} from "../../../worker/app/demo-model.ts";
import { installStoredUserTools, userToolSettings } from "../../../worker/app/user-tools/store.ts";
import { memoryStore } from "../../../worker/testing.ts";

export const GREET = {
  name: "greet",
  description: "Greets someone by name",
  parameters: { type: "object", properties: { name: { type: "string" } }, required: ["name"] },
  body: 'async (args, tools) => "Hello, " + args.name + "!"',
};

export const DOCS = ["pi.agent"] as const;

export type AppEngine = {
  h: AgentHarness;
  store: Awaited<ReturnType<typeof memoryStore>>;
  extensions: ExtensionRegistry;
};
export type OpenApp = (options?: {
  store?: Awaited<ReturnType<typeof memoryStore>>;
  extensions?: ExtensionRegistry;
}) => Promise<AppEngine>;

/**
 * Register the suite's hooks (fast demo speed, engines closed after each test); returns `openApp`
 * and `closeLater` (what else to close after the test).
 */
export function appEngines(): { openApp: OpenApp; closeLater: (close: () => Promise<void>) => void } {
  let previousSpeed: DemoSpeed;
  beforeAll(() => {
    registerDemoProvider();
    previousSpeed = setDemoSpeed({ charsPerChunk: 4096, chunkDelayMs: 0 });
  });
  afterAll(() => {
    setDemoSpeed(previousSpeed);
  });
  const closers: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const close of closers.splice(0)) await close().catch(() => undefined);
  });
  const openApp: OpenApp = async (options = {}) => {
    const store = options.store ?? (await memoryStore());
    const extensions = options.extensions ?? createRegistry();
    if (!extensions.snapshot().extension(builtinToolsExtension.name))
      extensions.install(builtinToolsExtension);
    let opened: AgentHarness | undefined;
    const h = await AgentHarness.open(store, {
      extensions,
      settings: userToolSettings(() => opened),
      models: createModelResolver({ extra: [demoModel as unknown as Model<Api>] }),
      defaultModel: { provider: demoModel.provider, modelId: demoModel.id },
      fs: new MemoryFs(),
      paused: true,
    });
    await installStoredUserTools(h);
    opened = h;
    h.resume();
    closers.push(() => h.close());
    return { h, store, extensions };
  };
  return { openApp, closeLater: (close) => closers.push(close) };
}

/** The text of the conversation's last answer. */
export async function lastAnswer(h: AgentHarness, conversationId: number): Promise<string> {
  const answer = (await h.requireConversation(conversationId).entries())
    .filter((e) => e.kind === "pi.assistant")
    .at(-1);
  return JSON.stringify(answer?.model ?? null);
}

export async function ask(h: AgentHarness, conversationId: number, text: string): Promise<string> {
  const sub = await h.requireConversation(conversationId).submit({ type: "input", content: text });
  expect(await sub.wait()).toMatchObject({ status: "done" });
  return lastAnswer(h, conversationId);
}
