/**
 * The agent the app's engine runs: the offline demo model (registered, listed first and the default),
 * pi-ai's catalogue, the built-in tools on the OPFS workspace, and API keys from the store's settings
 * (the agent's default). The test tasks (`test.ticker`, `test.noop`) are registered in every engine,
 * not only in test pages' engines: a store a test page used must still open and finish its tasks.
 * The user tools kept in the store are installed before the engine resumes its tasks, so a call of
 * one that a reload interrupted finds its tool again. The network state is the worker's (network.ts),
 * probed at the worker script's own URL: a run that failed offline waits until that answers. The
 * default extension selection leaves out the user tools that arrived by import (opt-in:
 * `userToolSettings`).
 */
import type { Api, Model } from "@mariozechner/pi-ai";
import { workspaceEnv } from "../agent/env.ts";
import { createRegistry } from "../agent/extensions/registry.ts";
import { installStoredUserTools, userToolSettings } from "../agent/extensions/user-tools-store.ts";
import { AgentHarness } from "../agent/harness.ts";
import { demoModel, registerDemoProvider } from "../agent/models/demo-provider.ts";
import { createModelResolver } from "../agent/models/resolver.ts";
import { builtinToolsExtension } from "../agent/tools/builtin/index.ts";
import { errorMessage } from "../core/errors.ts";
import type { SqliteLine } from "../store/line.ts";
import { applyStoredDemoSpeed } from "./app-settings.ts";
import { browserNetwork } from "./network.ts";
import { OpfsFs } from "./opfs-fs.ts";
import { noopTask, tickerTask } from "./ticker.ts";

export async function openAppHarness(
  store: SqliteLine,
  onFatal: (error: Error) => void,
): Promise<AgentHarness> {
  registerDemoProvider();
  const extensions = createRegistry();
  extensions.install(builtinToolsExtension);
  let opened: AgentHarness | undefined;
  const workspace = new OpfsFs();
  const harness = await AgentHarness.open(store, {
    extensions,
    settings: userToolSettings(() => opened),
    tasks: [tickerTask, noopTask],
    models: createModelResolver({ extra: [demoModel as unknown as Model<Api>] }),
    defaultModel: { provider: demoModel.provider, modelId: demoModel.id },
    // The workspace is every conversation's environment: passed explicitly (no env, no environment).
    fs: workspace,
    env: workspaceEnv(workspace),
    network: browserNetwork({ probeUrl: self.location.href }),
    onReport: (error) => console.warn("engine:", errorMessage(error)),
    onFatal,
    paused: true,
  });
  await installStoredUserTools(harness);
  opened = harness;
  harness.resume();
  applyStoredDemoSpeed(harness);
  return harness;
}
