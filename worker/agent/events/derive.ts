/**
 * Agent events from committed changes (spec §9.4): `EventDeriver.derive` turns one published change
 * set, with the conversation's view before and after it, into that commit's batch, in the
 * specification's order. Everything but the turns is read from the two views and the change set;
 * the turns need one fact the views lack (which generation tasks already started or ended their
 * turn), which the deriver keeps from the task graph it was started with. Views hold documents as
 * stored, so `pi.agent` is read through its definition (`agentDoc`): a store written before its
 * version 2 shows `{ provider, modelId }` like any other; the deriver keeps the stored version of
 * the view it last saw for that. `snapshotOf` is the `snapshot` event of a view and its agent. Pure
 * apart from that memory; nothing here waits or writes.
 */
import type { ChangeSet, ConversationId, EntryRecord, Json, TaskId, TaskRecord } from "../../core/types.ts";
import type { ConversationView } from "../../core/view-ops.ts";
import {
  type AgentState,
  agentDoc,
  DOC,
  ENTRY,
  inboxOf,
  type LiveState,
  liveOf,
  modelMessages,
  type ToolSlot,
  toolResultOf,
  usageOf,
} from "../records.ts";
import { messageChanges, outputChange } from "./diff.ts";
import type { AgentEvent, InboxEventItem, SnapshotEvent } from "./types.ts";

const GENERATION = "pi.generation";

/** The task graph's view of a task, as much as the deriver needs. */
export interface LiveTaskInfo {
  readonly id: TaskId;
  readonly kind: string;
  readonly conversationId: ConversationId;
  readonly state: { readonly status: string };
}

const held = (status: string) => status === "completing" || status === "terminal";

/** The `snapshot` event of `view`; `agent` is its pi.agent as read through the definition. */
export function snapshotOf(view: ConversationView, agent: AgentState): SnapshotEvent {
  const live = liveOf(view.docs);
  const g = live.generation;
  return {
    type: "snapshot",
    entries: view.entries,
    ...(live.run ? { run: { inputs: live.run.inputs } } : {}),
    ...(g
      ? {
          generation: {
            attempt: g.attempt,
            ...(g.message ? { message: g.message } : {}),
            ...(g.retry ? { retry: g.retry } : {}),
            ...(g.deferred ? { deferred: g.deferred } : {}),
          },
        }
      : {}),
    tools: live.tools ?? [],
    compactions: live.compactions ?? [],
    inbox: inboxItems(view),
    agent,
    usage: usageOf(view.docs),
  };
}

const inboxItems = (view: ConversationView): InboxEventItem[] =>
  inboxOf(view.docs).items.map((i) => ({ id: i.id, mode: i.mode }));

/**
 * `pi.agent` of a view whose stored version is `version`: migrated to the current shape, `{}` when
 * absent. A version newer than this code knows is shown as stored (a listener must not throw).
 */
function agentOf(view: ConversationView, version: number | undefined): AgentState {
  const value = view.docs[DOC.agent];
  try {
    return agentDoc.view({ value, version });
  } catch {
    return value as AgentState;
  }
}

export class EventDeriver {
  /** Generation tasks of the conversation: `turn` while their turn runs, `ended` once it ended. */
  readonly #turns = new Map<TaskId, "turn" | "ended">();
  /** The stored definition version of `pi.agent` in the newest view derived (or attached to). */
  #agentVersion: number | undefined;

  /**
   * `live`: the live tasks when the stream attached (the task graph's nodes); `agentVersion`: the
   * stored version of the conversation's `pi.agent` then.
   */
  constructor(
    readonly conversationId: ConversationId,
    live: Iterable<LiveTaskInfo>,
    agentVersion: number | undefined,
  ) {
    this.#agentVersion = agentVersion;
    for (const t of live) {
      if (t.kind !== GENERATION || t.conversationId !== conversationId) continue;
      this.#turns.set(t.id, held(t.state.status) ? "ended" : "turn");
    }
  }

  /** The conversation's agent in the newest view derived (or the one attached to). */
  agent(view: ConversationView): AgentState {
    return agentOf(view, this.#agentVersion);
  }

  derive(change: ChangeSet, before: ConversationView, after: ConversationView): AgentEvent[] {
    const c = this.conversationId;
    for (const d of change.docs)
      if (d.conversationId === c && d.name === DOC.agent) this.#agentVersion = d.version;
    const tasks = change.tasks.filter((t) => t.conversationId === c);
    const was = liveOf(before.docs);
    const now = liveOf(after.docs);
    const { toolStarts, toolUpdates } = slotEvents(was, now, tasks, after.entries);
    const { messageStart, messageUpdate } = partialEvents(was, now);
    // A partial that this commit cleared ends with the first answer.
    const partialEnded =
      was.generation?.message !== undefined && (messageStart !== undefined || !now.generation?.message);
    const entries = entryEvents(
      change.entries.filter((e) => e.conversationId === c),
      partialEnded,
    );
    const { compactionEnds, compactionStarts } = compactionEvents(was, now);
    const { turnEnds, turnStarts } = this.#turnEvents(tasks);
    const { runEnds, runStarts } = runEvents(was, now);
    const submissions: AgentEvent[] = change.submissions
      .filter((s) => s.conversationId === c)
      .sort((a, b) => a.id - b.id)
      .map((record) => ({ type: "submission", record }));
    return [
      ...toolStarts,
      ...(messageStart ? [messageStart] : []),
      ...(messageUpdate ? [messageUpdate] : []),
      ...toolUpdates,
      ...retryEvents(was, now),
      ...entries.events,
      ...toolEndsWithoutResult(was, now, entries.toolsEnded),
      ...compactionEnds,
      ...failedEvents(tasks),
      ...turnEnds,
      ...runEnds,
      ...submissions,
      ...this.#docEvents(change, after),
      ...compactionStarts,
      ...runStarts,
      ...turnStarts,
    ];
  }

  /** A generation task's first sight starts its turn; reaching `completing` or `terminal` ends it. */
  #turnEvents(tasks: readonly TaskRecord[]): { turnEnds: AgentEvent[]; turnStarts: AgentEvent[] } {
    const turnEnds: AgentEvent[] = [];
    const turnStarts: AgentEvent[] = [];
    for (const t of tasks) {
      if (t.kind !== GENERATION) continue;
      const turn = this.#turns.get(t.id);
      const status = t.state.status;
      if (turn === undefined && !held(status)) {
        this.#turns.set(t.id, "turn");
        turnStarts.push({ type: "turn_start" });
      } else if (turn === "turn" && held(status)) {
        turnEnds.push({ type: "turn_end" });
      }
      if (status === "terminal") this.#turns.delete(t.id);
      else if (held(status)) this.#turns.set(t.id, "ended");
    }
    return { turnEnds, turnStarts };
  }

  /** The documents the commit touched that listeners follow: the inbox, the agent, the usage. */
  #docEvents(change: ChangeSet, after: ConversationView): AgentEvent[] {
    const docs: AgentEvent[] = [];
    const c = this.conversationId;
    const touched = new Set(change.docs.filter((d) => d.conversationId === c).map((d) => d.name));
    if (touched.has(DOC.inbox)) docs.push({ type: "inbox_update", items: inboxItems(after) });
    if (touched.has(DOC.agent)) docs.push({ type: "agent_changed", agent: this.agent(after) });
    if (touched.has(DOC.usage)) docs.push({ type: "usage_changed", usage: usageOf(after.docs) });
    return docs;
  }
}

/** A slot that started running starts its tool's execution; one that kept running may update it. */
function slotEvents(
  was: LiveState,
  now: LiveState,
  tasks: readonly TaskRecord[],
  entries: readonly EntryRecord[],
): { toolStarts: AgentEvent[]; toolUpdates: AgentEvent[] } {
  const toolStarts: AgentEvent[] = [];
  const toolUpdates: AgentEvent[] = [];
  const wasSlots = new Map((was.tools ?? []).map((s) => [s.callId, s]));
  for (const slot of now.tools ?? []) {
    const prev = wasSlots.get(slot.callId);
    if (
      slot.status === "running" &&
      (!prev || prev.status === "pending" || prev.status === "awaiting_approval")
    ) {
      toolStarts.push({
        type: "tool_execution_start",
        toolCallId: slot.callId,
        toolName: slot.name,
        args: argumentsOf(slot, tasks, entries),
      });
    } else if (prev && prev.status !== "done" && slot.status !== "done") {
      const update = slotUpdate(prev, slot);
      if (update) toolUpdates.push(update);
    }
  }
  return { toolStarts, toolUpdates };
}

/**
 * The conversation's appended entries, in append order: a tool result ends its tool's execution, a
 * message entry starts and ends its message (only ends it when it closes the partial that was open),
 * anything else is `entry_appended`. Also the calls whose result entry came in this commit.
 */
function entryEvents(
  entries: readonly EntryRecord[],
  partialOpen: boolean,
): { events: AgentEvent[]; toolsEnded: ReadonlySet<string> } {
  let open = partialOpen;
  const toolsEnded = new Set<string>();
  const events: AgentEvent[] = [];
  for (const entry of entries) {
    const result = entry.kind === ENTRY.toolResult ? toolResultOf(entry) : undefined;
    if (result) {
      toolsEnded.add(result.toolCallId);
      events.push({
        type: "tool_execution_end",
        toolCallId: result.toolCallId,
        toolName: result.toolName,
        entry,
      });
    }
    const messages = modelMessages(entry);
    if (messages.length === 0) {
      events.push({ type: "entry_appended", entry });
    } else if (open && entry.kind === ENTRY.assistant) {
      open = false;
      events.push({ type: "message_end", entry });
    } else {
      events.push({ type: "message_start", message: messages[0]! }, { type: "message_end", entry });
    }
  }
  return { events, toolsEnded };
}

/** Slots that ended (or vanished with their run) without a result entry in this commit. */
function toolEndsWithoutResult(was: LiveState, now: LiveState, ended: ReadonlySet<string>): AgentEvent[] {
  const toolEnds: AgentEvent[] = [];
  const nowSlots = new Map((now.tools ?? []).map((s) => [s.callId, s]));
  for (const prev of was.tools ?? []) {
    if (prev.status === "done" || ended.has(prev.callId)) continue;
    const slot = nowSlots.get(prev.callId);
    if (!slot || slot.status === "done")
      toolEnds.push({ type: "tool_execution_end", toolCallId: prev.callId, toolName: prev.name });
  }
  return toolEnds;
}

function compactionEvents(
  was: LiveState,
  now: LiveState,
): { compactionEnds: AgentEvent[]; compactionStarts: AgentEvent[] } {
  const nowCompactions = new Set((now.compactions ?? []).map((s) => s.taskId));
  const wasCompactions = new Set((was.compactions ?? []).map((s) => s.taskId));
  return {
    compactionEnds: (was.compactions ?? [])
      .filter((s) => !nowCompactions.has(s.taskId))
      .map((s) => ({ type: "compaction_end", taskId: s.taskId, reason: s.reason })),
    compactionStarts: (now.compactions ?? [])
      .filter((s) => !wasCompactions.has(s.taskId))
      .map((s) => ({ type: "compaction_start", taskId: s.taskId, reason: s.reason, blocking: s.blocking })),
  };
}

/** `task_failed` for each of the conversation's tasks that settled faulted or orphaned. */
function failedEvents(tasks: readonly TaskRecord[]): AgentEvent[] {
  const failed: AgentEvent[] = [];
  for (const t of tasks) {
    const failure = failureOf(t);
    if (failure !== undefined)
      failed.push({ type: "task_failed", taskId: t.id, kind: t.kind, message: failure });
  }
  return failed;
}

/** A run ends when its pi.live run is gone or replaced by its successor's; the new one starts. */
function runEvents(was: LiveState, now: LiveState): { runEnds: AgentEvent[]; runStarts: AgentEvent[] } {
  const runEnds: AgentEvent[] = [];
  const runStarts: AgentEvent[] = [];
  const successor = was.run && now.run && was.run.inputs[0] !== now.run.inputs[0];
  if (was.run && (!now.run || successor)) runEnds.push({ type: "run_end", inputs: was.run.inputs });
  if (now.run && (!was.run || successor)) runStarts.push({ type: "run_start", inputs: now.run.inputs });
  return { runEnds, runStarts };
}

/** A first partial of an attempt starts a message; a later one of the same attempt updates it. */
function partialEvents(
  was: LiveState,
  now: LiveState,
): { messageStart?: AgentEvent; messageUpdate?: AgentEvent } {
  const message = now.generation?.message;
  if (!message) return {};
  const prev = was.generation;
  const sameAttempt =
    prev?.message !== undefined &&
    prev.taskId === now.generation!.taskId &&
    prev.attempt === now.generation!.attempt;
  if (!sameAttempt) return { messageStart: { type: "message_start", message } };
  const changes = messageChanges(prev.message!, message);
  return changes ? { messageUpdate: { type: "message_update", usage: message.usage, changes } } : {};
}

function retryEvents(was: LiveState, now: LiveState): AgentEvent[] {
  const out: AgentEvent[] = [];
  const a = was.generation;
  const b = now.generation;
  if (a?.retry && !(b?.retry && b.attempt === a.attempt && b.taskId === a.taskId))
    out.push({ type: "auto_retry_end", attempt: a.attempt });
  if (b?.retry && !(a?.retry && a.attempt === b.attempt && a.taskId === b.taskId))
    out.push({ type: "auto_retry_start", attempt: b.attempt, at: b.retry.at, errorMessage: b.retry.error });
  if (b?.deferred && a?.deferred?.pollAt !== b.deferred.pollAt)
    out.push({ type: "deferred_poll", pollAt: b.deferred.pollAt });
  return out;
}

/** Output, details and diagnostics of a slot that kept running (or waiting); removed ones send `null` and `[]` (spec §9.4). */
function slotUpdate(prev: ToolSlot, slot: ToolSlot): AgentEvent | undefined {
  const trimmed = (slot.droppedBytes ?? 0) - (prev.droppedBytes ?? 0);
  const output = outputChange(prev.output, slot.output, trimmed);
  const detailsChanged = JSON.stringify(prev.details) !== JSON.stringify(slot.details);
  const diagnosticsChanged =
    JSON.stringify(prev.diagnostics ?? []) !== JSON.stringify(slot.diagnostics ?? []);
  if (!output && !detailsChanged && !diagnosticsChanged) return undefined;
  return {
    type: "tool_execution_update",
    toolCallId: slot.callId,
    toolName: slot.name,
    ...(output ? { output } : {}),
    ...(detailsChanged ? { details: slot.details ?? null } : {}),
    ...(diagnosticsChanged ? { diagnostics: slot.diagnostics ?? [] } : {}),
  };
}

/** A running call's arguments: its task's intent checkpoint, else the call in its answer. */
function argumentsOf(
  slot: ToolSlot,
  tasks: readonly TaskRecord[],
  entries: readonly EntryRecord[],
): Readonly<Record<string, Json>> {
  const task = tasks.find((t) => t.id === slot.taskId);
  const state = task?.state as { checkpoint?: { phase?: string; arguments?: Json } } | undefined;
  const intent = state?.checkpoint?.phase === "execute" ? state.checkpoint.arguments : undefined;
  if (intent && typeof intent === "object" && !Array.isArray(intent)) return intent;
  for (let i = entries.length - 1; i >= 0; i--) {
    for (const m of modelMessages(entries[i]!)) {
      if (m.role !== "assistant") continue;
      const call = m.content.find((b) => b.type === "toolCall" && b.id === slot.callId);
      if (call?.type === "toolCall") return call.arguments as Record<string, Json>;
    }
  }
  return {};
}

/** The message of a task that settled faulted or orphaned, else undefined. */
function failureOf(t: TaskRecord): string | undefined {
  if (t.state.status !== "terminal") return undefined;
  const o = t.state.outcome;
  if (o.status === "faulted") return o.error.message;
  if (o.status === "orphaned") return `orphaned: ${String(o.reason)}`;
  return undefined;
}
