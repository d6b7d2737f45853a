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
 * Tool calls are under the same approval policies as the browser's (tool-policies.ts: read-only
 * built-ins run freely, a write, code or a network call asks first): the space's app-wide choices in
 * its own settings conversation, a conversation's in its pi.agent (so they move with it). A waiting
 * call is the tool task's `approval` phase, durable in the object's store; a tab on the space
 * decides it over its socket (`approvals.decide`). `approval: { defaults: "allow" }` runs every tool
 * freely unless a stored policy says otherwise (test and bench spaces that do not test approval).
 * MCP servers (mcp/store.ts) are the space's own, added by a tab over its socket (the `mcp` group,
 * `spaceEngine`) and kept with their cached tool lists in the space's store, installed before the
 * harness resumes its tasks; their bearer tokens are the server's secrets (`mcpToken`: the
 * entry reads `MCP_<NAME>_TOKEN` from its environment), never a browser's, never stored, and
 * redacted from whatever the harness writes.
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
import { SERVER_MAX_VALUE_BYTES } from "../protocol/server-socket.ts";
import type { MakeSpaceEngine, SpaceEngine, SpaceEnv, SpacePorts } from "../server/space.ts";
import type { Store } from "../store/types.ts";
import { demoModel, registerDemoProvider } from "./demo-model.ts";
import { HarnessEngine } from "./engine-service.ts";
import {
  installStoredMcpServers,
  type McpStoreOptions,
  mcpApi,
  mcpTokenVariable,
  storedMcpServers,
} from "./mcp/store.ts";
import { SCHEDULE_DOCUMENTS, scheduleTask } from "./schedules.ts";
import { harnessSecrets, MIN_SECRET } from "./secrets.ts";
import { rerunTask } from "./timeline.ts";
import { type ApprovalMode, approvalSettings } from "./tool-policies.ts";

export interface SpaceAgentOptions {
  /** More task definitions to register (tests). */
  readonly tasks?: readonly AnyTaskDefinition[];
  /**
   * Offer `codemode`: only when the interpreter was handed its compiled module
   * (sandbox/interpreter.ts `setInterpreterModule`; the server's entry does).
   */
  readonly codemode?: boolean;
  /** Tool approval's defaults (tool-policies.ts): `ask` (the product's, the default) or `allow`. */
  readonly approval?: ApprovalMode;
  /** The token of MCP server `name` from the server's own secrets (`mcpTokenFromEnv`); default: none. */
  readonly mcpToken?: (name: string) => string | undefined;
  /** More for the MCP client (tests: limits). */
  readonly mcp?: Omit<McpStoreOptions, "secretToken">;
  /** More models, callable without a key (tests: a scripted model that takes images). */
  readonly models?: readonly Model<Api>[];
}

/** The settings a space's agent starts from (none but approval's, added over them). */
const NO_SETTINGS = {};

/** The token of MCP server `name` among the server's secrets: `MCP_<NAME>_TOKEN` (dashes as underscores). */
export function mcpTokenFromEnv(env: SpaceEnv, name: string): string | undefined {
  const value = env[mcpTokenVariable(name)];
  return typeof value === "string" && value !== "" ? value : undefined;
}

/** What the space's MCP servers use: the tokens from the server's secrets only. */
function spaceMcpOptions(options: SpaceAgentOptions): McpStoreOptions {
  return { ...options.mcp, secretToken: options.mcpToken ?? (() => undefined) };
}

/**
 * The engine service a space serves on its sockets: the portable one (engine-service.ts) and the
 * `mcp` group on the space's own store, with the same MCP options as its harness.
 */
export function spaceEngine(options: SpaceAgentOptions = {}): MakeSpaceEngine {
  return (made): SpaceEngine =>
    Object.assign(new HarnessEngine(made), { mcp: mcpApi(made.harness, spaceMcpOptions(options)) });
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
  const mcp = spaceMcpOptions(options);
  const stored = harnessSecrets(() => opened);
  const harness = await AgentHarness.open(store, {
    extensions,
    settings: approvalSettings(
      () => NO_SETTINGS,
      () => opened,
      options.approval ?? { defaults: "ask" },
    ),
    tasks: [scheduleTask(() => opened!), rerunTask(() => opened!), ...(options.tasks ?? [])],
    documents: SCHEDULE_DOCUMENTS,
    models: createModelResolver({
      extra: [demoModel as unknown as Model<Api>, ...(options.models ?? [])],
      keyless: [demoModel.provider, ...(options.models ?? []).map((m) => m.provider)],
    }),
    defaultModel: { provider: demoModel.provider, modelId: demoModel.id },
    fs: workspace,
    env: workspaceEnv(workspace),
    apiKey: ports.apiKey,
    // The stored keys, and the server's tokens of the MCP servers it calls: none may reach an entry.
    secrets: () => [
      ...stored(),
      ...(opened ? storedMcpServers(opened).flatMap((s) => mcp.secretToken?.(s.name) ?? []) : []).filter(
        (token) => token.length >= MIN_SECRET,
      ),
    ],
    wakeAt: ports.wakeAt,
    // A Durable Object's SQLite row holds at most 2 MB: an entry or a submission over this keeps its
    // long strings (an attached image, a PDF's text) out of line (worker/core/spill.ts).
    maxValueBytes: SERVER_MAX_VALUE_BYTES,
    ...(ports.onTimer ? { onTimer: ports.onTimer } : {}),
    onReport: ports.onReport,
    onFatal: ports.onFatal,
    // Resumed below, once a schedule that fires at open can reach the harness it submits to.
    paused: true,
  });
  opened = harness;
  // The MCP servers' cached tools before any recovered task runs (a call cut by a crash finds its tool).
  await installStoredMcpServers(harness, mcp);
  harness.resume();
  // The space's first conversation is the root: created on the first open (spec §2.2, lazily).
  await harness.root();
  return harness;
}
