/**
 * What an extension is (spec §7.1): a named bundle of tools, prompt sections, hooks, wrappers of
 * tools and sections, and task definitions. Conversations select extensions by name in pi.agent;
 * the registry holds the code. Extensions, their tools and task definitions are immutable values;
 * a wrapper returns a new object and never mutates its input.
 */
import type { AnyTaskDefinition } from "../../core/define.ts";
import type { ConversationId } from "../../core/types.ts";
import type { DocumentReader, ExecutionEnv } from "../env.ts";
import type { AgentState, ModelRef } from "../records.ts";
import type { ToolDefinition } from "../tools/contract.ts";
import type { AgentHooks, HookRegistration } from "./hooks.ts";

/**
 * The environment a section renders in (spec §7.4 `PromptInput.env`): what the conversation's tools
 * reach, built for each preparation (see env.ts). The spec's `ExecutionEnv` also has a shell and a
 * working directory, which the browser does not.
 */
export type PromptEnv = ExecutionEnv;

/**
 * What a section's renderer reads (spec §7.4 `PromptInput`): the conversation, its resolved agent,
 * the environment, the sections shown so far, and committed documents (`read`: env.ts).
 */
export interface PromptInput {
  readonly conversationId: ConversationId;
  readonly agent: ResolvedAgent;
  /** The environment of this preparation (undefined when the harness has none). */
  readonly env: PromptEnv | undefined;
  /** The sections in effect after replaying the active transcript (stored text, tagged). */
  readonly shown: Readonly<Record<string, string | null>>;
  /** Committed documents: `read(name)` of this conversation, `read.snapshot`, `read.snapshotAsOf`. */
  readonly read: DocumentReader;
}

/** The render call's context: the preparing phase's signal. */
export interface RenderContext {
  readonly signal: AbortSignal;
}

/**
 * One part of the system prompt. `render` may be synchronous or async (spec §7.4); undefined omits
 * the section; a throw or a rejection keeps the text shown before and is reported. Tagged (the
 * default) wraps the text as `<key>\n...\n</key>`. Renderers must be deterministic: any change of
 * the rendered text appends a system delta.
 */
export interface PromptSection {
  readonly key: string;
  render(input: PromptInput, ctx: RenderContext): string | undefined | Promise<string | undefined>;
  readonly tag?: boolean;
}

export type Wrap =
  | { readonly tool: string; wrap(tool: ToolDefinition): ToolDefinition }
  | { readonly section: string; wrap(section: PromptSection): PromptSection };

export interface Extension {
  readonly name: string;
  readonly tools?: readonly ToolDefinition[];
  readonly sections?: readonly PromptSection[];
  readonly hooks?: readonly HookRegistration[];
  /** Applied where the extension is selected, in order, to whichever tool or section won. */
  readonly wraps?: readonly Wrap[];
  /** Resolved by name for every task, whichever conversations select the extension. */
  readonly tasks?: readonly AnyTaskDefinition[];
}

/** What a conversation resolves to from a registry snapshot and its stored pi.agent. */
export interface ResolvedAgent {
  /** The selected extensions' names, in order. */
  readonly extensions: readonly string[];
  /** The tools after overrides, wrappers and the conversation's filter, in order. */
  readonly tools: ReadonlyMap<string, ToolDefinition>;
  /** The prompt sections after overrides and wrappers, in order (instructions not included). */
  readonly sections: readonly PromptSection[];
  /** The built-in tasks' hooks of the selected extensions, in extension order. */
  readonly hooks: AgentHooks;
}

/** A conversation's agent as resolved (`Conversation.agent()`, a tool's `api.agent()`; spec §2.2 `Agent`). */
export interface ResolvedAgentView extends ResolvedAgent {
  /** The stored pi.agent it was resolved from. */
  readonly state: AgentState;
  /** The model a request would use (pi.agent's, else the harness's default; absent: none). */
  readonly model?: ModelRef;
  readonly thinkingLevel: NonNullable<AgentState["thinkingLevel"]>;
  /** pi.agent's instructions, rendered after every extension section (also the last of `sections`). */
  readonly instructions?: string;
}

/** How a conversation selects extensions (pi.agent `extensions`). */
export type ExtensionSelection = NonNullable<AgentState["extensions"]>;

/** How a conversation filters the selected tools (pi.agent `tools`). */
export type ToolFilter = NonNullable<AgentState["tools"]>;
