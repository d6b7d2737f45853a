/**
 * The agent the app's engine runs: the offline demo model (registered, listed first and the default),
 * pi-ai's catalogue, the built-in tools on the OPFS workspace, and API keys from the store's settings
 * (the agent's default). Task definitions of the caller's (`tasks`: the debug entry's test tasks,
 * only in test pages' engines) are registered besides the agent's own, and its extensions
 * (`extensions`: the kill storm's effect tools, only in test pages that ask) installed after the
 * built-in tools.
 * The user tools kept in the store are installed before the engine resumes its tasks, so a call of
 * one that a reload interrupted finds its tool again; so are the MCP servers' cached tool lists
 * (mcp/store.ts). The network state is the worker's (network.ts),
 * probed at the worker script's own URL: a run that failed offline waits until that answers. The
 * default extension selection leaves out the user tools that arrived by import (opt-in:
 * `userToolSettings`). Tool calls are under the person's approval policies (`approvalSettings`).
 * Schedules (schedules.ts) are a task of the app's: registered here, resumed with everything else.
 */
import type { Api, Model } from "@mariozechner/pi-ai";
import { workspaceEnv } from "../agent/env.ts";
import { createRegistry } from "../agent/extensions/registry.ts";
import type { Extension } from "../agent/extensions/types.ts";
import { AgentHarness } from "../agent/harness.ts";
import { createModelResolver } from "../agent/models/resolver.ts";
import type { NetworkState } from "../agent/network.ts";
import { builtinToolsExtension } from "../agent/tools/builtin/index.ts";
import type { WorkspaceFs } from "../agent/workspace/fs.ts";
import { browserNetwork } from "../browser/network.ts";
import { OpfsFs } from "../browser/opfs-fs.ts";
import type { AnyTaskDefinition } from "../core/define.ts";
import { errorMessage } from "../core/errors.ts";
import type { Store } from "../store/types.ts";
import { demoModel, registerDemoProvider } from "./demo-model.ts";
import { installStoredMcpServers } from "./mcp/store.ts";
import { SCHEDULE_DOCUMENTS, scheduleTask } from "./schedules.ts";
import { harnessSecrets } from "./secrets.ts";
import { applyStoredDemoSpeed } from "./settings.ts";
import { rerunTask } from "./timeline.ts";
import { type ApprovalMode, approvalSettings } from "./tool-policies.ts";
import { installStoredUserTools, userToolSettings } from "./user-tools/store.ts";

export interface AppHarnessOptions {
  /** Called once when the store fails for good (the engine stops). */
  readonly onFatal: (error: Error) => void;
  /** More task definitions to register (the test pages' `test.ticker` and `test.noop`). */
  readonly tasks?: readonly AnyTaskDefinition[];
  /** More extensions to install after the built-in tools (a test page's effect tools). */
  readonly extensions?: readonly Extension[];
  /**
   * Tool approval's defaults (tool-policies.ts): the product's (`ask`, the default), or every tool
   * free unless a stored policy says otherwise (`allow`: test pages that do not test approval).
   */
  readonly approval?: ApprovalMode;
  /** The workspace (default: the origin's OPFS, `OpfsFs`); tests in Node pass a memory one. */
  readonly workspace?: WorkspaceFs;
  /** The network state (default: the worker's, probed at its own script's URL). */
  readonly network?: NetworkState;
  /** The engine's clock (default Date.now): a test page's moved one (worker/entry/boot.ts). */
  readonly now?: () => number;
}

export async function openAppHarness(store: Store, options: AppHarnessOptions): Promise<AgentHarness> {
  const { onFatal } = options;
  registerDemoProvider();
  const extensions = createRegistry();
  extensions.install(builtinToolsExtension);
  for (const extension of options.extensions ?? []) extensions.install(extension);
  let opened: AgentHarness | undefined;
  const workspace = options.workspace ?? new OpfsFs();
  const harness = await AgentHarness.open(store, {
    extensions,
    settings: approvalSettings(
      userToolSettings(() => opened),
      () => opened,
      options.approval ?? { defaults: "ask" },
    ),
    tasks: [scheduleTask(() => opened!), rerunTask(() => opened!), ...(options.tasks ?? [])],
    documents: SCHEDULE_DOCUMENTS,
    models: createModelResolver({
      extra: [demoModel as unknown as Model<Api>],
      keyless: [demoModel.provider],
    }),
    defaultModel: { provider: demoModel.provider, modelId: demoModel.id },
    // The workspace is every conversation's environment: passed explicitly (no env, no environment).
    fs: workspace,
    env: workspaceEnv(workspace),
    network: options.network ?? browserNetwork({ probeUrl: self.location.href }),
    // Every saved key and the saved server token: none may reach an entry, whoever quotes it back.
    secrets: harnessSecrets(() => opened),
    onReport: (error) => console.warn("engine:", errorMessage(error)),
    onFatal,
    // Before any recovered task runs (and in the open's own turn, so recovery and the first
    // reservation need no pause between them: docs/ARCHITECTURE.md, "The recovery path"): the stored
    // user tools, so a call of one that a reload interrupted finds its tool again; the app's "Main"
    // conversation, the root, created on the first open (spec §2.2, lazily); the demo's speed.
    prepare: async (h) => {
      await installStoredUserTools(h);
      await installStoredMcpServers(h);
      await h.root();
      opened = h;
      applyStoredDemoSpeed(h);
    },
    ...(options.now ? { now: options.now } : {}),
  });
  return harness;
}
