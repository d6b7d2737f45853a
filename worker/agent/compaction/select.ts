/**
 * The `select` phase (spec §8.7): capture the committed context, choose the cut, let the
 * `beforeCompact` hooks decline the compaction or supply its summary, and in one commit end the task
 * (no model, nothing to compact, declined, or the hook's summary placed) or pin the summary request.
 * Without a usable model no hook is asked: the task fails `no_model` first.
 * The hooks run off the commit line, before that commit; the first decision wins, and a hook that
 * throws is reported and skipped (unless the invocation was cancelled, which ends the phase).
 */
import type { EntryId, EntryRecord } from "../../core/types.ts";
import { activeRange, summarizedPart } from "../conversation/context.ts";
import { type HookApi, hookApi } from "../extensions/hooks.ts";
import { type AgentState, agentDoc, type ModelRef } from "../records.ts";
import type { BeforeCompactDecision, ResolvedSettings } from "../services.ts";
import { selectCut } from "./range.ts";
import { clearStatus } from "./start.ts";
import { placeSummary } from "./summary.ts";
import {
  type CompactionDeps,
  type CompactionNext,
  type CompactionRuntime,
  type CompactionTask,
  completed,
  failed,
  type SummaryRequest,
} from "./types.ts";

export async function select(
  deps: CompactionDeps,
  task: CompactionTask,
  runtime: CompactionRuntime,
  signal: AbortSignal,
): Promise<void> {
  const settings = deps.services.settings();
  const range = activeRange(await deps.services.entries.get(task.conversationId));
  const firstKept = selectCut(range, settings.compaction.keepRecentTokens);
  // No model ends the task before anything else (spec §8.7): no hook is asked for a compaction that
  // cannot run. The commit below checks again on the line.
  const decision =
    firstKept === undefined || !hasUsableModel(deps, task)
      ? undefined
      : await askHooks(deps, task, { range, firstKept }, hookApi(runtime, deps.services), signal);
  await runtime.commit((tx) => {
    const agent = agentDoc.read(tx, task.conversationId);
    const ref = agent.model ?? deps.services.defaultModel;
    const model = ref ? deps.services.models.resolve(ref) : undefined;
    if (!ref || !model) {
      clearStatus(tx, task);
      return failed({
        message: ref ? `unknown model ${ref.provider}/${ref.modelId}` : "no model is configured",
        detail: { reason: "no_model" },
      });
    }
    if (firstKept === undefined || (decision && "decline" in decision)) {
      clearStatus(tx, task);
      return completed({});
    }
    if (decision) return placeSummary(deps, tx, task, { summary: decision.summary, firstKept });
    return pinRequest(settings, { agent, ref, maxTokens: model.maxTokens }, { range, firstKept });
  });
}

/** Whether the conversation's committed agent names a model (its own or the host's) that resolves. */
function hasUsableModel({ services }: CompactionDeps, task: CompactionTask): boolean {
  const ref = services.readAgent(task.conversationId).model ?? services.defaultModel;
  return ref !== undefined && services.models.resolve(ref) !== undefined;
}

/** The first `beforeCompact` decision, or undefined when no hook decided. */
async function askHooks(
  { services }: CompactionDeps,
  task: CompactionTask,
  cut: { readonly range: readonly EntryRecord[]; readonly firstKept: EntryId },
  api: HookApi,
  signal: AbortSignal,
): Promise<BeforeCompactDecision | undefined> {
  const hooks = services.hooks(task.conversationId).beforeCompact ?? [];
  if (hooks.length === 0) return undefined;
  const { entries, messages } = summarizedPart(cut.range, cut.firstKept);
  const input = {
    reason: task.input.reason,
    entries,
    messages,
    firstKept: cut.firstKept,
    ...(task.input.instructions !== undefined ? { instructions: task.input.instructions } : {}),
  };
  for (const hook of hooks) {
    try {
      const decision = await hook(input, api, { signal });
      if (decision === undefined) continue;
      checkDecision(decision);
      return decision;
    } catch (error) {
      if (signal.aborted) throw error;
      services.report(error);
    }
  }
  return undefined;
}

function checkDecision(decision: BeforeCompactDecision): void {
  if ("decline" in decision && decision.decline === true) return;
  if ("summary" in decision && typeof decision.summary === "string" && decision.summary.trim() !== "") return;
  throw new TypeError("beforeCompact must return { decline: true }, { summary: <text> } or nothing");
}

/** The `summarize` checkpoint: the request pinned as the model and settings are now. */
function pinRequest(
  settings: ResolvedSettings,
  model: {
    readonly agent: AgentState;
    readonly ref: ModelRef;
    readonly maxTokens: number;
  },
  cut: { readonly range: readonly EntryRecord[]; readonly firstKept: EntryId },
): CompactionNext {
  const { headers: _h, ...stream } = settings.stream;
  const cap = Math.floor(0.8 * settings.compaction.reserveTokens);
  const request: SummaryRequest = {
    attempt: 1,
    model: { provider: model.ref.provider, modelId: model.ref.modelId },
    thinkingLevel: model.agent.thinkingLevel ?? "off",
    ...(Object.keys(stream).length > 0 ? { stream: structuredClone(stream) } : {}),
    maxTokens: model.maxTokens > 0 ? Math.min(cap, model.maxTokens) : cap,
    tail: cut.range.at(-1)?.id ?? cut.firstKept,
    firstKept: cut.firstKept,
  };
  return { status: "running", checkpoint: { phase: "summarize", ...request } };
}
