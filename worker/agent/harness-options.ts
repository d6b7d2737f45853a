/**
 * What `AgentHarness.open` takes (spec §2.2 `HarnessOptions`): the core's options plus the agent's
 * models, extensions, workspace, settings, hooks, keys and network. Types only, and the name of the
 * extension the `tools` and `hooks` options become.
 */
import type { HarnessOptions } from "../core/harness.ts";
import type { Json } from "../core/types.ts";
import type { EnvBuilder } from "./env.ts";
import type { ExtensionRegistry } from "./extensions/registry.ts";
import type { ModelResolver } from "./models/resolver.ts";
import type { NetworkState } from "./network.ts";
import type { DocToken, ModelRef } from "./records.ts";
import type { AgentHooks, AgentSettings, StreamFn } from "./services.ts";
import type { ToolDefinition } from "./tools/contract.ts";
import type { WorkspaceFs } from "./workspace/fs.ts";

/** The name of the extension that holds the tools and hooks given as harness options. */
export const OPTIONS_EXTENSION = "harness-options";

/** The core's options but `root`: the root conversation is created lazily by `root()` (spec §2.2). */
export interface AgentHarnessOptions extends Omit<HarnessOptions, "root"> {
  models?: ModelResolver;
  /** The model of conversations whose pi.agent names none. */
  defaultModel?: ModelRef;
  /**
   * The app's extension registry (spec §7.1), bound by `open`: conversations resolve their tools,
   * prompt sections and hooks from it, and the scheduler its extensions' task definitions. Default:
   * a registry of the harness's own.
   */
  extensions?: ExtensionRegistry;
  /**
   * Shorthand for an extension named `harness-options` (installed, or replaced, in the registry by
   * the constructor) holding these tools and hooks; the hooks are read at each resolution.
   */
  tools?: readonly ToolDefinition[];
  /**
   * The workspace: the app's files (default: in memory). It is no conversation's environment unless
   * the `env` builder gives it (`env: workspaceEnv(fs)`).
   */
  fs?: WorkspaceFs;
  /**
   * Builds a conversation's environment (spec §2.2 `HarnessOptions.env`) at each use: once per tool
   * execution (`api.env`; a throw is the call's error result) and once per preparation that renders
   * prompt sections (`input.env`; a throw is reported, the sections render without). Never called
   * inside a commit. Without it there is no environment (spec §2.2): the file tools' calls are
   * ordinary errors and sections render with `env` undefined.
   */
  env?: EnvBuilder;
  settings?: AgentSettings | (() => AgentSettings);
  hooks?: AgentHooks | (() => AgentHooks);
  /** pi-ai's streamSimple unless replaced (tests, instrumentation). */
  stream?: StreamFn;
  /**
   * Where requests get their keys (read at request time, never stored by a request). By default,
   * the keys kept in the store's settings (`models.setKey`).
   */
  apiKey?: (provider: string) => string | undefined;
  /**
   * Every secret an answer must never carry into an entry, besides the request's own key (which is
   * always redacted): a provider may quote back any header or token it was sent. By default, every
   * key kept in the store's settings. Read when an answer arrives.
   */
  secrets?: () => readonly string[];
  /**
   * The platform's network state (network.ts): a request that failed on the network while it says
   * offline waits for the network instead of spending the retry budget. Default: always online.
   */
  network?: NetworkState;
  /**
   * Told each time a task is about to wait for a durable deadline (epoch ms on the harness's clock):
   * a generation's or a compaction's retry backoff, a deferred response's poll time. The wait itself
   * is an in-process timer, gone when the process is; a host whose process may be evicted while
   * idle arms a wake-up of its own at that time (the server's Durable Object alarm), and opening
   * the harness again resumes the waiting task, which waits out what is left. A browser ignores it
   * (a tab reopens the engine). Called off the commit line, possibly for a time already past; a
   * throw is reported.
   */
  wakeAt?: (at: number) => void;
  /**
   * Custom conversation documents whose semantics are not the default (history "latest", fork
   * "current"; spec §3.1, §3.7), for incarnations created without their token: a write by name
   * (`writeDoc`) creates one with the rules given here, or latest-only with fork "current" for a
   * name not listed. Typed access through a token needs none of this: the write that creates its
   * incarnation takes the token's `history` and `fork` (spec §3.3: ordinary definitions are not
   * registered). From then on the record decides (spec §3.2): a rewindable one keeps its history and
   * its fork rule applies even when a later process lists no definition for it (an extension no
   * longer installed) or one that declares otherwise; typed access through a token that declares
   * otherwise is refused (DocumentSemanticsError).
   */
  documents?: ReadonlyArray<
    Pick<DocToken<Json>, "name" | "fork"> & { readonly history?: "latest" | "rewindable" }
  >;
}
