/**
 * The agent a server space runs (worker/server/space.ts opens it on the object's store): the offline
 * demo model (registered, the default, keyless), pi-ai's catalogue with keys from the server's own
 * secrets (never a browser's), and the built-in tools on an in-memory workspace (`codemode` only
 * when asked: its interpreter must have been handed its compiled WebAssembly module).
 * It lives in the app's room because the demo model does (the server's room may not import the app).
 *
 * What differs from the browser's agent (app-agent.ts), and why:
 * - the workspace is in memory (MemoryFs): files a tool writes are gone when the object is evicted
 *   or restarted (a SQLite-backed workspace on the object's storage is a next step);
 * - `codemode` runs its scripts in the object's own thread (workerd has no Worker constructor):
 *   workerd refuses to compile WebAssembly at run time, so the interpreter gets its module compiled
 *   from the upload (worker/entry/server.ts); a script holds the object for at most one slice;
 * - no user tools and no stored keys: keys come from `ports.apiKey` (the environment's secrets);
 * - the network is always online (a server has no offline state to wait for).
 * Schedules (schedules.ts) run here as in the browser: their durable timers are told to the space
 * (`ports.onTimer`), which arms the object's alarm for the earliest, so they fire with no tab open.
 */
import type { Api, Model } from "@mariozechner/pi-ai";
import { workspaceEnv } from "../agent/env.ts";
import { defineExtension } from "../agent/extensions/define.ts";
import { createRegistry } from "../agent/extensions/registry.ts";
import { AgentHarness } from "../agent/harness.ts";
import { createModelResolver } from "../agent/models/resolver.ts";
import { builtinTools } from "../agent/tools/builtin/index.ts";
import { MemoryFs } from "../agent/workspace/memory-fs.ts";
import type { AnyTaskDefinition } from "../core/define.ts";
import type { SpacePorts } from "../server/space.ts";
import type { Store } from "../store/types.ts";
import { demoModel, registerDemoProvider } from "./demo-model.ts";
import { SCHEDULE_DOCUMENTS, scheduleTask } from "./schedules.ts";
import { rerunTask } from "./timeline.ts";

export interface SpaceAgentOptions {
  /** More task definitions to register (tests). */
  readonly tasks?: readonly AnyTaskDefinition[];
  /**
   * Offer `codemode`: only when the interpreter was handed its compiled module
   * (sandbox/interpreter.ts `setInterpreterModule`; the server's entry does).
   */
  readonly codemode?: boolean;
}

export async function openSpaceHarness(
  store: Store,
  ports: SpacePorts,
  options: SpaceAgentOptions = {},
): Promise<AgentHarness> {
  registerDemoProvider();
  const extensions = createRegistry();
  const tools = options.codemode ? builtinTools : builtinTools.filter((tool) => tool.name !== "codemode");
  extensions.install(defineExtension({ name: "workspace-tools", tools }));
  const workspace = new MemoryFs();
  let opened: AgentHarness | undefined;
  const harness = await AgentHarness.open(store, {
    extensions,
    tasks: [scheduleTask(() => opened!), rerunTask(() => opened!), ...(options.tasks ?? [])],
    documents: SCHEDULE_DOCUMENTS,
    models: createModelResolver({
      extra: [demoModel as unknown as Model<Api>],
      keyless: [demoModel.provider],
    }),
    defaultModel: { provider: demoModel.provider, modelId: demoModel.id },
    fs: workspace,
    env: workspaceEnv(workspace),
    apiKey: ports.apiKey,
    wakeAt: ports.wakeAt,
    ...(ports.onTimer ? { onTimer: ports.onTimer } : {}),
    onReport: ports.onReport,
    onFatal: ports.onFatal,
    // Resumed below, once a schedule that fires at open can reach the harness it submits to.
    paused: true,
  });
  opened = harness;
  harness.resume();
  // The space's first conversation is the root: created on the first open (spec §2.2, lazily).
  await harness.root();
  return harness;
}
