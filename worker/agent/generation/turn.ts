/**
 * The parts of a model turn that live outside the `pi.generation` phases: its checkpoint types, the
 * commit bodies shared by several phases (fail the run, defer, convert a leftover partial, prepare a
 * request, hand the run on), a tool round's results, and the scheduler's cleanup for a failed
 * generation. Everything here writes only through the transaction it is given.
 */
import type { TaskRuntime, Tx } from "../../core/define.ts";
import { sealBuilt } from "../../core/persist.ts";
import type {
  ConversationId,
  EntryId,
  EntryRecord,
  Json,
  NextTaskState,
  RunningTask,
  TaskId,
  TaskRecord,
} from "../../core/types.ts";
import { deriveSystem, replayedSystem } from "../conversation/context.ts";
import { endRun, type InboxPolicy, settleInputs } from "../conversation/inbox.ts";
import { documentReader, type ExecutionEnv } from "../env.ts";
import { planSystem, type RenderInput, renderSections, renderSectionsNow } from "../extensions/prompt.ts";
import type { DeferredHandle } from "../models/resolver.ts";
import {
  type AgentState,
  agentDoc,
  appendAssistant,
  DOC,
  ENTRY,
  type LiveState,
  live,
  type ModelRef,
  type SystemRecord,
  type ThinkingLevel,
  type ToolSlot,
  writeDoc,
} from "../records.ts";
import type { AgentServices, StreamSettings, ToolRoundResult } from "../services.ts";
import type { ToolTaskResult } from "../tools/task/types.ts";

/**
 * `attempt` counts a turn's requests (1 for the first); `uncounted` says how many of them failed on
 * the network while the platform was offline: those do not count against the retry budget.
 */
export type GenerationCheckpoint =
  | {
      phase: "prepare";
      attempt: number;
      uncounted?: number;
      /** This run already compacted once (threshold or overflow): it never compacts again. */
      compacted?: true;
      /** The compaction it waited for, and the overflow error that started it. */
      compaction?: TaskId;
      overflow?: string;
    }
  | {
      phase: "request";
      attempt: number;
      model: ModelRef;
      thinkingLevel: ThinkingLevel;
      cutoff: EntryId;
      /** The provider options of this attempt (settings.stream when it was prepared, but headers). */
      stream?: Omit<StreamSettings, "headers">;
      compacted?: true;
      uncounted?: number;
    }
  | { phase: "retry"; attempt: number; until: number; compacted?: true; uncounted?: number }
  /** Waiting for the network (since `since`): the failed attempt `attempt` is not counted. */
  | { phase: "offline"; attempt: number; since: number; compacted?: true; uncounted?: number }
  | {
      phase: "poll";
      attempt: number;
      model: ModelRef;
      cutoff: EntryId;
      handle: DeferredHandle;
      pollAt: number;
      /** Carried from the request (spec §8.3): an overflow the poll returns is not compacted again. */
      compacted?: true;
      uncounted?: number;
    }
  /** `pending`: calls of a sequential round not started yet (their tasks are made one at a time). */
  | { phase: "tools"; assistant: EntryId; tools: TaskId[]; pending?: string[] };

export type GenerationResult = { entryId: EntryId } | null;
export type GenerationRuntime = TaskRuntime<Json, GenerationCheckpoint, GenerationResult>;
/** A generation in phase `P`, as that phase's handler sees it. */
export type GenerationTask<P extends GenerationCheckpoint["phase"]> = RunningTask<
  Json,
  Extract<GenerationCheckpoint, { phase: P }>,
  GenerationResult
>;

/** Fail the run: settle its inputs unanswered, clear the run, end the task `failed`. */
export function failRun(tx: Tx, c: ConversationId, taskId: TaskId, reason: string, detail?: string) {
  const run = live(tx, c).run;
  if (run?.taskId === taskId) {
    settleInputs(tx, run.inputs, {
      status: "unanswered",
      reason,
      ...(detail !== undefined ? { detail } : {}),
    });
    endRun(tx, c);
  }
  return {
    status: "terminal" as const,
    outcome: {
      status: "failed" as const,
      // The spec's failed outcome: the error's words as the message, the settlement reason as detail.
      error: { message: detail ?? reason, detail: { reason } },
    },
  };
}

/** Move to `poll` for a deferred response: the handle and the next poll time are durable. */
export function deferTo(
  tx: Tx,
  taskId: TaskId,
  c: ConversationId,
  cp: { attempt: number; model: ModelRef; cutoff: EntryId; compacted?: true; uncounted?: number },
  handle: DeferredHandle,
  now: number,
  /** A still-deferred poll's floor: the previous pollAt + 1 (spec A.9: max(now + delay, previous + 1)). */
  floor = Number.NEGATIVE_INFINITY,
): NextTaskState<GenerationCheckpoint, GenerationResult> {
  const pollAt = Math.max(now + Math.max(0, handle.pollAfterMs ?? DEFAULT_POLL_MS), floor);
  const state = live(tx, c);
  const { message: _m, ...generation } = state.generation ?? { taskId, attempt: cp.attempt };
  writeDoc<LiveState>(tx, c, DOC.live, {
    ...state,
    generation: { ...generation, deferred: { pollAt } },
  });
  return {
    status: "running",
    checkpoint: {
      phase: "poll",
      attempt: cp.attempt,
      model: cp.model,
      cutoff: cp.cutoff,
      handle: { ...handle },
      pollAt,
      ...(cp.compacted ? { compacted: true as const } : {}),
      ...(cp.uncounted ? { uncounted: cp.uncounted } : {}),
    },
  };
}

const DEFAULT_POLL_MS = 5000;

/** A committed partial answer becomes an aborted pi.assistant entry (and its spend is counted). */
export function convertLeftoverPartial(tx: Tx, c: ConversationId): void {
  const state = live(tx, c);
  const message = state.generation?.message;
  if (!message) return;
  appendAssistant(tx, c, {
    ...message,
    stopReason: "aborted",
    errorMessage: message.errorMessage ?? "interrupted",
  });
  const { message: _m, ...generation } = state.generation!;
  writeDoc<LiveState>(tx, c, DOC.live, { ...state, generation });
}

/** Scheduler-written outcome (faulted, orphaned) of a generation that owns the run. */
export function cleanUpFailedGeneration(tx: Tx, task: TaskRecord): void {
  const c = task.conversationId;
  const run = live(tx, c).run;
  if (run?.taskId !== task.id) return;
  convertLeftoverPartial(tx, c);
  const outcome =
    task.state.status === "terminal" || task.state.status === "completing" ? task.state.outcome : undefined;
  const reason = outcome?.status === "orphaned" ? String(outcome.reason) : "faulted";
  const detail = outcome?.status === "faulted" ? outcome.error.message : undefined;
  settleInputs(tx, run.inputs, { status: "unanswered", reason, ...(detail !== undefined ? { detail } : {}) });
  endRun(tx, c);
}

/**
 * Run every hook in order (spec §7.2): one that throws is reported and the next runs, unless the
 * phase was aborted, when the error propagates.
 */
export async function runHooks<T>(
  list: readonly T[] | undefined,
  each: (hook: T) => Promise<void> | void,
  guard: { readonly report: (error: unknown) => void; readonly signal: AbortSignal },
): Promise<void> {
  for (const hook of list ?? []) {
    try {
      await each(hook);
    } catch (error) {
      if (guard.signal.aborted) throw error;
      guard.report(error);
    }
  }
}

type Prepared =
  | { status: "ready"; checkpoint: Extract<GenerationCheckpoint, { phase: "request" }> }
  | { status: "failed"; detail: string }
  /** The sections must be rendered outside the commit (one is async, or pi.agent changed since). */
  | { status: "render" };

/** Sections rendered before the preparing commit, and the pi.agent they were rendered for. */
export interface RenderedPrompt {
  readonly agent: AgentState;
  readonly sections: Readonly<Record<string, string>>;
}

/**
 * What a section's renderer reads in conversation `c` whose active transcript is `entries`; `shown`
 * (the sections it replays) is derived when a renderer first reads it, from `replayed` when given
 * (a copy: a renderer cannot change what the preparation compares with).
 */
function renderInput(
  services: AgentServices,
  c: ConversationId,
  entries: readonly EntryRecord[],
  env: ExecutionEnv | undefined,
  replayed?: Readonly<Record<string, string | null>>,
): RenderInput {
  let shown: Record<string, string | null> | undefined;
  return {
    conversationId: c,
    env,
    get shown() {
      shown ??= replayed ? { ...replayed } : deriveSystem(entries).sections;
      return shown;
    },
    read: documentReader(services.core, c),
  };
}

/**
 * Render the conversation's sections off the line (spec §7.4: a section may be async), for the
 * committed pi.agent; `prepareRequest` takes the result when pi.agent is still the same then. The
 * environment is built once for the renderers (when there are any); a builder's throw is reported
 * and they render with none.
 */
export async function renderPrompt(
  services: AgentServices,
  c: ConversationId,
  entries: readonly EntryRecord[],
  signal: AbortSignal,
): Promise<RenderedPrompt> {
  const agent = services.readAgent(c);
  const resolved = services.agent(c, agent);
  let env: ExecutionEnv | undefined;
  if (resolved.sections.length > 0) {
    try {
      env = await services.env(c, signal);
    } catch (error) {
      if (signal.aborted) throw error;
      services.report(error);
    }
  }
  const sections = await renderSections(
    resolved,
    renderInput(services, c, entries, env),
    agent.instructions,
    { report: services.report, signal },
  );
  return { agent, sections };
}

/**
 * The work of `prepare`, inside a commit: resolve the agent, append a pi.system entry when the
 * prompt sections or the offered tools differ from what the transcript replays, and pin the model,
 * thinking level and cutoff of the request. The sections are `rendered` (by `renderPrompt`, before
 * the commit) when given; without, they render here, unless one is async. Also used by the commit
 * that creates a generation, so a turn needs no separate prepare commit when its conversation's
 * entries are at hand and its sections render synchronously.
 */
export function prepareRequest(
  services: AgentServices,
  tx: Tx,
  c: ConversationId,
  taskId: TaskId | undefined,
  attempt: number,
  entries: readonly EntryRecord[],
  rendered?: RenderedPrompt,
): Prepared {
  const agent = agentDoc.read(tx, c);
  const ref = agent.model ?? services.defaultModel;
  if (!ref || !services.models.resolve(ref)) {
    return {
      status: "failed",
      detail: ref ? `unknown model ${ref.provider}/${ref.modelId}` : "no model is configured",
    };
  }
  // Headers are left out: they often carry credentials, so they are read at request time, never stored.
  const { headers: _headers, ...stream } = services.settings().stream;
  const replayed = replayedSystem(entries);
  const resolved = services.agent(c, agent);
  const desired = [...resolved.tools.keys()];
  let sections: Readonly<Record<string, string>> | undefined;
  if (!rendered) {
    // A built environment is made off the commit line: sections that need one render in `prepare`.
    if (!(services.envBuilder && resolved.sections.length > 0))
      sections = renderSectionsNow(
        resolved,
        renderInput(services, c, entries, undefined, replayed.sections), // no builder: no environment (spec §2.2)
        agent.instructions,
        services.report,
      );
  } else if (JSON.stringify(rendered.agent) === JSON.stringify(agent)) sections = rendered.sections;
  if (!sections) return { status: "render" };
  const plan = planSystem(
    replayed.sections,
    sections,
    { shown: replayed.tools, desired },
    { rebaseline: replayed.rebaseline },
  );
  for (const { message, edits } of plan) {
    const system: SystemRecord = { role: "system", content: "", ...message, timestamp: tx.now() };
    tx.appendEntry(c, {
      kind: ENTRY.system,
      model: [system] as unknown as Json,
      ...(edits ? { edits } : {}),
    });
  }
  if (taskId !== undefined) {
    const state = live(tx, c);
    writeDoc<LiveState>(tx, c, DOC.live, { ...state, generation: { taskId, attempt } });
  }
  // Built here of strings, numbers and a copy of the stream settings: sealed by its members (the
  // copy is walked), so the task's state does not walk it again.
  return {
    status: "ready",
    checkpoint: sealBuilt({
      phase: "request",
      attempt,
      model: sealBuilt({ provider: ref.provider, modelId: ref.modelId }),
      thinkingLevel: agent.thinkingLevel ?? "off",
      cutoff: tx.lastEntryId(),
      ...(Object.keys(stream).length > 0 ? { stream: structuredClone(stream) } : {}),
    }),
  };
}

/**
 * Each slot's result as the round's hooks see it, in call order. `getTask` gives a tool task's
 * record; a missing one counts as a failed call (`missing: "failed"`), or means the round is not
 * finished and the answer is undefined (`missing: "unfinished"`).
 */
export function roundResults(
  slots: readonly ToolSlot[],
  getTask: (id: TaskId) => TaskRecord | undefined,
  options: { missing: "failed" | "unfinished" },
): ToolRoundResult[] | undefined {
  const results: ToolRoundResult[] = [];
  for (const slot of slots) {
    const record = slot.taskId !== undefined ? getTask(slot.taskId) : undefined;
    if (slot.taskId !== undefined && !record && options.missing === "unfinished") return undefined;
    const outcome = record?.state.status === "terminal" ? record.state.outcome : undefined;
    const result =
      outcome && "result" in outcome ? (outcome.result as ToolTaskResult | undefined) : undefined;
    const entryId = result?.entryId ?? slot.entry;
    results.push({
      callId: slot.callId,
      name: slot.name,
      ...(entryId !== undefined ? { entryId } : {}),
      isError: outcome?.status !== "completed" || result?.isError === true,
      terminate: result?.control?.terminate === true,
      ...(typeof result?.control?.handoff === "string" ? { handoff: result.control.handoff } : {}),
      ...(result?.control?.addTools?.length ? { addTools: result.control.addTools } : {}),
    });
  }
  return results;
}

export function clearPartial(tx: Tx, c: ConversationId): void {
  const state = live(tx, c);
  if (!state.generation) return;
  const { generation: _g, ...rest } = state;
  writeDoc<LiveState>(tx, c, DOC.live, rest);
}

/**
 * The next generation takes over the run (same inputs, plus steers placed at this boundary). The
 * ended generation's slot goes; the next one's stays when its start named it already (a generation
 * created with its request prepared is named in `pi.live` by the commit that creates it).
 */
export function handRunTo(tx: Tx, c: ConversationId, policy: InboxPolicy, inputs: number[]): void {
  const next = policy.startGeneration(tx, c);
  const { generation, tools: _t, ...rest } = live(tx, c);
  const named = generation?.taskId === next ? { generation } : {};
  writeDoc<LiveState>(
    tx,
    c,
    DOC.live,
    sealBuilt({ ...rest, ...named, run: sealBuilt({ taskId: next, inputs: sealBuilt([...inputs]) }) }),
  );
}

/** A document's committed value, read outside a commit. */
export function committed<T>(services: AgentServices, c: ConversationId, name: string, fallback: T): T {
  return (services.core.docNow(c, name) as T | undefined) ?? fallback;
}
