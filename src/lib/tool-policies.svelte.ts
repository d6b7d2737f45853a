/**
 * The settings' tool approval section: every tool with the policy that applies in the open
 * conversation, and the person's choices app-wide and for this conversation (`approvals.policies`,
 * `approvals.setPolicy`: one commit each). A choice of "default" clears it.
 */
import {
  type EngineApi,
  errorMessage,
  type ToolPolicy,
  type ToolPolicyView,
} from "../../worker/protocol/index.ts";

export type ToolPoliciesApi = Pick<EngineApi, "approvals">;
export type PolicyChoice = ToolPolicy | "default";

export const POLICY_WORDS: Record<ToolPolicy, string> = {
  allow: "Run freely",
  ask: "Ask first",
  never: "Never",
};

export class ToolPoliciesState {
  tools = $state.raw<ToolPolicyView[]>([]);
  error = $state("");

  constructor(
    private readonly api: ToolPoliciesApi,
    private readonly conversationId: number,
  ) {}

  async load(): Promise<void> {
    try {
      this.tools = await this.api.approvals.policies(this.conversationId);
      this.error = "";
    } catch (e) {
      this.error = errorMessage(e);
    }
  }

  /** Set a tool's policy app-wide (`scope: "app"`) or for this conversation only. */
  async choose(tool: string, choice: PolicyChoice, scope: "app" | "conversation"): Promise<void> {
    try {
      const policy = choice === "default" ? null : choice;
      if (scope === "app") await this.api.approvals.setPolicy(tool, policy);
      else await this.api.approvals.setPolicy(tool, policy, this.conversationId);
      await this.load();
    } catch (e) {
      this.error = errorMessage(e);
    }
  }
}
