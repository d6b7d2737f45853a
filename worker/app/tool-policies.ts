/**
 * The app's tool approval policies (the agent's mechanism is worker/agent/tools/approval.ts): the
 * person's policy per tool, kept in the settings conversation's `app.toolPolicies`, and per
 * conversation in its pi.agent `toolPolicies` ("Always allow this tool here" writes there too).
 * `approvalSettings` turns them into the harness's `approval` settings, read at each use and cached
 * on the stored document. Defaults (`defaults: "ask"`): read-only tools run freely, any other asks
 * first. Test pages that do not ask for approval (`defaults: "allow"`) run every tool freely unless a
 * stored policy says otherwise. Invariants: only a tool name and one of `allow`, `ask`, `never` is
 * ever stored (anything else is refused with a TypeError before a write); a policy change is one commit.
 */
import type { AgentHarness } from "../agent/harness.ts";
import { SETTINGS_CONVERSATION } from "../agent/models/keys.ts";
import { agentDoc, type ToolPolicy } from "../agent/records.ts";
import type { AgentSettings } from "../agent/services.ts";
import { policyOf, TOOL_POLICIES } from "../agent/tools/approval.ts";
import type { ConversationId, Json } from "../core/types.ts";
import type { ToolPolicyView } from "../protocol/index.ts";

export const TOOL_POLICIES_DOC = "app.toolPolicies";

type Stored = { tools: Record<string, ToolPolicy> };

export interface ApprovalMode {
  /** `ask`: the product's defaults; `allow`: every tool runs freely unless a stored policy says otherwise. */
  readonly defaults: "ask" | "allow";
}

function stored(h: AgentHarness): Record<string, ToolPolicy> {
  const value = h.docNow(SETTINGS_CONVERSATION, TOOL_POLICIES_DOC) as Stored | undefined;
  return value?.tools ?? {};
}

/** `base` with the `approval` settings of the stored policies added (cached on the stored document). */
export function approvalSettings(
  base: () => AgentSettings,
  harness: () => AgentHarness | undefined,
  mode: ApprovalMode,
): () => AgentSettings {
  let kept: { base: AgentSettings; tools: Record<string, ToolPolicy>; settings: AgentSettings } | undefined;
  return () => {
    const h = harness();
    const b = base();
    if (!h) return b;
    const tools = stored(h);
    if (kept?.base !== b || kept.tools !== tools)
      kept = {
        base: b,
        tools,
        settings: { ...b, approval: { tools, fallback: mode.defaults === "ask" ? "ask" : "allow" } },
      };
    return kept.settings;
  };
}

function checkPolicy(tool: unknown, policy: unknown): asserts policy is ToolPolicy | null {
  if (typeof tool !== "string" || !/^[a-zA-Z0-9_-]{1,64}$/.test(tool))
    throw new TypeError("a tool policy needs a tool's name");
  if (policy !== null && !TOOL_POLICIES.includes(policy as ToolPolicy))
    throw new TypeError('a tool policy is "allow", "ask" or "never" (or null for the default)');
}

/**
 * Set (or with null, clear) one tool's policy: app-wide, or for one conversation (its pi.agent).
 * One commit.
 */
export async function setToolPolicy(
  h: AgentHarness,
  tool: string,
  policy: ToolPolicy | null,
  conversationId?: ConversationId,
): Promise<void> {
  checkPolicy(tool, policy);
  if (conversationId !== undefined) await h.requireLoadedConversation(conversationId);
  await h.transaction((tx) => {
    if (conversationId === undefined) {
      const now = (tx.readDoc(SETTINGS_CONVERSATION, TOOL_POLICIES_DOC) as Stored | undefined)?.tools ?? {};
      const { [tool]: _, ...rest } = now;
      const tools = policy === null ? rest : { ...rest, [tool]: policy };
      tx.writeDoc(SETTINGS_CONVERSATION, TOOL_POLICIES_DOC, { tools } as unknown as Json);
      return;
    }
    const agent = agentDoc.read(tx, conversationId);
    const { [tool]: _, ...rest } = agent.toolPolicies ?? {};
    const toolPolicies = policy === null ? rest : { ...rest, [tool]: policy };
    const { toolPolicies: _old, ...others } = agent;
    agentDoc.write(tx, conversationId, {
      ...others,
      ...(Object.keys(toolPolicies).length > 0 ? { toolPolicies } : {}),
    });
  });
}

/** Every installed tool with its default, app-wide and (given a conversation) own policy, and the one that applies. */
export async function toolPolicyViews(
  h: AgentHarness,
  conversationId?: ConversationId,
): Promise<ToolPolicyView[]> {
  const agent =
    conversationId === undefined
      ? {}
      : await (await h.requireLoadedConversation(conversationId)).agentState();
  const settings = h.services.settings();
  const tools = [...h.services.tools(conversationId).values()];
  const app = stored(h);
  return tools.map((tool) => {
    const own = agent.toolPolicies?.[tool.name];
    const set = app[tool.name];
    return {
      name: tool.name,
      ...(tool.label ? { label: tool.label } : {}),
      readOnly: tool.readOnly === true,
      default: settings.approval
        ? policyOf({ approval: { ...settings.approval, tools: {} } }, {}, tool)
        : "allow",
      ...(set ? { app: set } : {}),
      ...(own ? { conversation: own } : {}),
      effective: policyOf(settings, agent, tool),
    };
  });
}
