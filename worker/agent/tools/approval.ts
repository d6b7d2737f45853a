/**
 * Tool approval: whether a call runs freely, waits for a person, or never runs, and the decision a
 * person takes on a waiting call. The waiting itself is the tool task's `approval` phase
 * (task/approval.ts); this module holds what the harness and the app share:
 * - `policyOf`: a call's policy. No `approval` settings: `allow` (the specification's harness runs
 *   every call). Otherwise the conversation's pi.agent `toolPolicies[name]`, else the settings'
 *   `tools[name]`, else `allow` for a `readOnly` tool and the settings' `fallback` (default `ask`).
 * - `argumentsInWords`: the call's arguments as short lines a person can judge (bounded), stored with
 *   the waiting call, so every tab shows the same words.
 * - `decideApproval`: a person's decision, inside one transaction. Invariants: the first decision on
 *   a waiting call is the only one (a later one gets `already_decided`, saying which); the same
 *   request id again gets the same answer and writes nothing (idempotent); a call that is not
 *   waiting (it ended, was aborted, never asked) gets `not_waiting` and nothing is written; "always
 *   allow this tool here" writes `allow` into the conversation's pi.agent in the same commit.
 */
import type { Tx } from "../../core/define.ts";
import type { ConversationId, TaskId } from "../../core/types.ts";
import {
  type AgentState,
  type ApprovalDecisionRecord,
  agentDoc,
  DOC,
  type LiveState,
  live,
  type ToolPolicy,
  writeDoc,
} from "../records.ts";
import type { ResolvedSettings } from "../services.ts";
import type { ToolDefinition } from "./contract.ts";

export const TOOL_POLICIES: readonly ToolPolicy[] = ["allow", "ask", "never"];

/**
 * Whether a live task only waits for a person's decision (a `pi.tool` call in its `approval`
 * phase): nothing of it runs until a decision is committed, and a host that wakes itself by timer
 * while work is live (the server space's heartbeat) need not wake for it. Pending in that phase
 * (recovered) counts too: running it again only enters the same wait.
 */
export function waitsForPerson(task: {
  readonly kind: string;
  readonly state: { readonly status: string; readonly phase?: string };
}): boolean {
  return (
    task.kind === "pi.tool" &&
    (task.state.status === "running" || task.state.status === "pending") &&
    task.state.phase === "approval"
  );
}
/** A denial's reason is cut to this many characters. */
export const MAX_DENY_REASON = 2000;

/** The policy a call of `tool` runs under in a conversation whose pi.agent is `agent`. */
export function policyOf(
  settings: Pick<ResolvedSettings, "approval">,
  agent: AgentState,
  tool: Pick<ToolDefinition, "name" | "readOnly">,
): ToolPolicy {
  const approval = settings.approval;
  if (!approval) return "allow";
  const own = agent.toolPolicies?.[tool.name];
  if (own && TOOL_POLICIES.includes(own)) return own;
  const set = approval.tools?.[tool.name];
  if (set) return set;
  return tool.readOnly ? "allow" : (approval.fallback ?? "ask");
}

const MAX_LINES = 12;
const MAX_LINE = 300;

/** The call's arguments as `key: value` lines (long values cut with an ellipsis, at most 12 lines). */
export function argumentsInWords(args: unknown): string[] {
  const cut = (text: string) => (text.length > MAX_LINE ? `${text.slice(0, MAX_LINE - 1)}…` : text);
  const show = (value: unknown) => (typeof value === "string" ? value : (JSON.stringify(value) ?? ""));
  let lines: string[];
  if (args && typeof args === "object" && !Array.isArray(args)) {
    const pairs = Object.entries(args as Record<string, unknown>);
    lines = pairs.length === 0 ? ["(no arguments)"] : pairs.map(([k, v]) => cut(`${k}: ${show(v)}`));
  } else lines = [cut(show(args))];
  if (lines.length > MAX_LINES) {
    const more = lines.length - MAX_LINES + 1;
    lines = [...lines.slice(0, MAX_LINES - 1), `… and ${more} more`];
  }
  // Multi-line values (a file's content) show their first lines only.
  return lines.map((line) => {
    const rows = line.split("\n");
    return rows.length > 4 ? `${rows.slice(0, 4).join("\n")}\n… (${rows.length - 4} more lines)` : line;
  });
}

/** What a person decides on a waiting call. */
export interface ApprovalRequest {
  readonly taskId: TaskId;
  readonly decision: "approve" | "deny";
  /** With a denial: said to the model. */
  readonly reason?: string;
  /** With an approval: from now on this conversation runs this tool freely. */
  readonly always?: boolean;
  /** Names this decision: sending it again is answered the same and writes nothing. */
  readonly requestId: string;
}

/**
 * `decided`: this request decided the call (now, or when it was first sent). `already_decided`:
 * another decision came first; it says which. `not_waiting`: the call does not wait for approval
 * (it ended, was aborted, or never asked); nothing was written.
 */
export type ApprovalAnswer =
  | { readonly status: "decided"; readonly decision: "approve" | "deny" }
  | { readonly status: "already_decided"; readonly decision: "approve" | "deny"; readonly at: number }
  | { readonly status: "not_waiting" };

/** A person's decision on a waiting call, in `tx` (see the header for the invariants). */
export function decideApproval(tx: Tx, c: ConversationId, request: ApprovalRequest): ApprovalAnswer {
  const state = live(tx, c);
  const slot = state.tools?.find((s) => s.taskId === request.taskId);
  const taken = slot?.approval?.decision;
  if (taken) {
    if (taken.requestId === request.requestId) return { status: "decided", decision: taken.decision };
    return { status: "already_decided", decision: taken.decision, at: taken.at };
  }
  if (!slot?.approval || slot.status !== "awaiting_approval") return { status: "not_waiting" };
  const task = tx.getTask(request.taskId);
  if (!task || task.state.status === "terminal" || task.abortRequested) return { status: "not_waiting" };
  const reason = request.decision === "deny" ? request.reason?.trim().slice(0, MAX_DENY_REASON) : undefined;
  const decision: ApprovalDecisionRecord = {
    decision: request.decision,
    ...(reason ? { reason } : {}),
    requestId: request.requestId,
    at: tx.now(),
  };
  writeDoc<LiveState>(tx, c, DOC.live, {
    ...state,
    tools: (state.tools ?? []).map((s) =>
      s === slot ? { ...s, approval: { ...slot.approval!, decision } } : s,
    ),
  });
  if (request.decision === "approve" && request.always) {
    const agent = agentDoc.read(tx, c);
    agentDoc.write(tx, c, {
      ...agent,
      toolPolicies: { ...(agent.toolPolicies ?? {}), [slot.name]: "allow" },
    });
  }
  return { status: "decided", decision: request.decision };
}

/** The error result's text for a denied call: the model reads it (with the person's reason). */
export function deniedMessage(name: string, reason: string | undefined): string {
  const base = `the person using this app denied this call of ${name}`;
  return reason ? `${base}; their reason: ${reason}` : `${base}; they gave no reason`;
}
