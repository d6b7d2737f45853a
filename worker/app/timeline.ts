/**
 * A conversation's run as a picture (issue 31 part 5), and "Rerun this tool call" from it.
 *
 * The timeline: every task of a conversation and of the conversations its tasks own (a subagent's)
 * becomes a bar on a time axis (`startedAt` to `endedAt`; a live task ends at the engine's clock),
 * nested by ownership (a task's owner task, else the task that owns its conversation), with an
 * outcome (ok, error, aborted, interrupted, running, waiting), its tokens and cost where the entries
 * it appended carry usage, and why it ended or waits in words. A tool call waiting for a person (or
 * one whose wait its live slot still records) gets a bar of its own under the call. Invariants:
 * - a page reads only the tasks that overlap its range, at most its limit (the longest first), so a
 *   run of thousands of tasks never travels whole to a tab; `total` says how many overlap;
 * - a watch sends a page at once and again after each commit that changed a task of the watched
 *   conversations (or gave one of them a new owned conversation); pages are computed one at a time
 *   and the next waits for the tab's acknowledgement, so a slow tab gets the newest page, never a
 *   queue of old ones;
 * - everything is read from committed state (the store's FIFO and the published records).
 *
 * The rerun: one commit appends an answer entry holding a new call of the same tool with the same
 * arguments (the original call and its result stay in the history), marks the conversation's run
 * as this rerun's (`pi.live.run`, so inputs sent meanwhile queue, and Stop ends it), and creates an
 * `app.rerun` task. That task starts an ordinary `pi.tool` task for the call (so the tool's approval
 * policy, hooks and replay policy apply as for a model's call), waits for it, and ends the run at the
 * final boundary (queued inputs then start the next run). Refused before any write when the
 * conversation works or the call is not in its history.
 */
import type { AssistantMessage, ToolCall } from "@mariozechner/pi-ai";
import { endRun, finalBoundary } from "../agent/conversation/inbox.ts";
import type { AgentHarness } from "../agent/harness.ts";
import {
  DOC,
  ENTRY,
  type LiveState,
  live,
  modelMessages,
  type ToolSlot,
  writeDoc,
} from "../agent/records.ts";
import { abortPendingCalls } from "../agent/tools/round.ts";
import { defineTask, type TaskDefinition } from "../core/define.ts";
import { HarnessError, UnknownConversation, UnknownTask } from "../core/errors.ts";
import { entriesByTasks, entriesContaining, tasksOverlapping, tasksSpan } from "../core/queries.ts";
import type {
  ChangeSet,
  ConversationId,
  EntryId,
  EntryRecord,
  Json,
  TaskId,
  TaskRecord,
} from "../core/types.ts";
import type {
  BarKind,
  BarOutcome,
  RerunAnswer,
  TimelineBar,
  TimelineDetail,
  TimelinePage,
  TimelineRange,
} from "../protocol/index.ts";

/** A page's default and largest number of tasks. */
export const TIMELINE_LIMIT = 200;
export const MAX_TIMELINE_LIMIT = 500;
/** The most conversations one timeline follows (a run and its subagents, theirs, ...). */
const MAX_CONVERSATIONS = 1_000;
/** The most entries a page reads for its bars' usage and words (the longest bars' first). */
const MAX_PAGE_ENTRIES = 2_000;
/** The most entries a bar's detail shows. */
const MAX_DETAIL_ENTRIES = 200;

export const RERUN_TASK = "app.rerun";

export class RerunRefused extends HarnessError {
  override readonly name = "RerunRefused";
  constructor(code: "busy" | "not_a_call", message: string) {
    super(code, message);
  }
}

/**
 * The conversation and every conversation its tasks own, theirs too (breadth first, bounded), their
 * records read by the owner index when not in memory (`loadBelow`): O(the run), not O(store).
 * Rejects with UnknownConversation when there is none.
 */
export async function runConversations(
  h: AgentHarness,
  conversationId: ConversationId,
): Promise<ConversationId[]> {
  const below = await h.loadBelow(conversationId);
  if (!below) throw new UnknownConversation(conversationId);
  return below.slice(0, MAX_CONVERSATIONS).map((r) => r.id);
}

/** Usage as an assistant message or a tool's result carries it (pi-ai's `Usage`), read defensively. */
function usageOfMessage(
  value: unknown,
): { input: number; output: number; total: number; cost: number } | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  const u = value as { input?: unknown; output?: unknown; totalTokens?: unknown; cost?: { total?: unknown } };
  const n = (x: unknown) => (typeof x === "number" && Number.isFinite(x) ? x : 0);
  const input = n(u.input);
  const output = n(u.output);
  return { input, output, total: n(u.totalTokens) || input + output, cost: n(u.cost?.total) };
}

const BLOCKED: Record<string, string> = {
  missing_task: "no task of this kind is registered in this build",
  task_too_old: "its record is newer than this build's task definition",
  migration_failed: "its record could not be migrated to this build",
  corrupt_record: "its stored record is damaged",
};

/** "the write tool", or "the tool" when its name is not known. */
const toolPhrase = (name: string | undefined) => (name ? `the ${name} tool` : "the tool");

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

/** What the bars of a page need besides the tasks: entries by task, live slots, owners, blocked reasons. */
interface BarContext {
  readonly now: number;
  readonly entries: ReadonlyMap<TaskId, readonly EntryRecord[]>;
  readonly slots: ReadonlyMap<TaskId, ToolSlot>;
  /** A conversation's owner task (a subagent's conversation). */
  readonly owners: ReadonlyMap<ConversationId, TaskId>;
  readonly blocked: ReadonlyMap<TaskId, string>;
  /** The kinds of tasks other bars wait on (for "waiting for 2 tools"). */
  readonly kindOf: (id: TaskId) => string | undefined;
}

function toolNameOf(task: TaskRecord, ctx: BarContext): string | undefined {
  const input = task.input as { nested?: { name?: string } } | null;
  if (input && typeof input === "object" && input.nested?.name) return input.nested.name;
  for (const e of ctx.entries.get(task.id) ?? []) {
    const m = modelMessages(e)[0];
    if (m?.role === "toolResult") return m.toolName;
  }
  return ctx.slots.get(task.id)?.name;
}

function kindOf(task: TaskRecord, tool: string | undefined): BarKind {
  switch (task.kind) {
    case "pi.generation":
      return "generation";
    case "pi.tool":
      return tool === "subagent" ? "subagent" : "tool";
    case "pi.subagent":
      return "subagent";
    case "pi.compaction":
      return "compaction";
    default:
      return "other";
  }
}

function labelOf(kind: BarKind, task: TaskRecord, tool: string | undefined): string {
  switch (kind) {
    case "generation":
      return "answer";
    case "tool":
      return tool ? `${tool} tool` : "tool call";
    case "subagent":
      return "subagent";
    case "compaction":
      return "compaction";
    default:
      return task.kind === RERUN_TASK ? "rerun of a tool call" : task.kind;
  }
}

/** Words for what a wait on `on` is for. */
function waitWords(on: readonly TaskId[], ctx: BarContext): string {
  const kinds = on.map((id) => ctx.kindOf(id));
  if (kinds.length > 0 && kinds.every((k) => k === "pi.tool"))
    return `waiting for ${plural(on.length, "tool call")}`;
  if (kinds.length > 0 && kinds.every((k) => k === "pi.compaction"))
    return "waiting for the conversation to be compacted";
  if (kinds.length > 0 && kinds.every((k) => k === "pi.subagent"))
    return `waiting for ${plural(on.length, "subagent")}`;
  return `waiting for ${plural(on.length, "other task")}`;
}

const GENERATION_PHASE: Record<string, string> = {
  prepare: "preparing the request",
  request: "answering",
  poll: "waiting for the model's deferred answer",
  retry: "waiting to try the model again",
  offline: "waiting for the network",
  tools: "waiting for its tool calls",
};

/** A live task's outcome and words. */
function liveState(
  task: TaskRecord,
  tool: string | undefined,
  ctx: BarContext,
): { outcome: BarOutcome; why: string } {
  const s = task.state;
  const blocked = ctx.blocked.get(task.id);
  if (blocked) return { outcome: "waiting", why: `blocked: ${blocked}` };
  if (s.status === "pending")
    return s.interrupted
      ? { outcome: "interrupted", why: "interrupted by a restart; it goes on when the engine runs it again" }
      : { outcome: "waiting", why: "about to start" };
  if (s.status === "completing") return { outcome: "running", why: "finishing" };
  if (s.status === "terminal") return { outcome: "ok", why: "ended" };
  const phase = s.checkpoint.phase;
  if (s.status === "waiting") {
    if (s.on.length > 0) return { outcome: "waiting", why: waitWords(s.on, ctx) };
    if (s.until !== undefined)
      return { outcome: "waiting", why: `waiting until ${new Date(s.until).toISOString()}` };
  }
  if (task.kind === "pi.tool" && phase === "approval")
    return { outcome: "waiting", why: `waiting for your approval to run ${toolPhrase(tool)}` };
  if (task.kind === "pi.generation") {
    const waiting = phase === "retry" || phase === "offline" || phase === "poll";
    return { outcome: waiting ? "waiting" : "running", why: GENERATION_PHASE[phase] ?? `running (${phase})` };
  }
  if (task.kind === "pi.tool") return { outcome: "running", why: `running ${toolPhrase(tool)}` };
  return { outcome: "running", why: `running (${phase})` };
}

/**
 * The words of a tool result's error: the code of its last error diagnostic, and for a tool that
 * threw (`tool_error`, whose diagnostic only says so) the result's text, which holds what it threw;
 * else the diagnostic's words.
 */
function resultError(entry: EntryRecord): { code?: string; message: string } {
  const data = entry.data as
    | { diagnostics?: { severity?: string; code?: string; message?: string }[] }
    | undefined;
  const error = [...(data?.diagnostics ?? [])].reverse().find((d) => d.severity === "error");
  const m = modelMessages(entry)[0];
  const text =
    m?.role === "toolResult"
      ? m.content
          .flatMap((c) => (c.type === "text" ? [c.text] : []))
          .join(" ")
          .replace(/<harness>[\s\S]*?<\/harness>/g, "")
          .trim()
      : "";
  const code = error?.code ? { code: error.code } : {};
  if (error?.message && (error.code !== "tool_error" || !text)) return { ...code, message: error.message };
  return { ...code, message: text || error?.message || "the tool reported an error" };
}

const SHORT = 300;
const cut = (text: string) => (text.length > SHORT ? `${text.slice(0, SHORT - 1)}…` : text);

/** A terminal task's outcome and words, from its outcome and the entries it appended. */
function endedState(
  task: TaskRecord,
  tool: string | undefined,
  ctx: BarContext,
): { outcome: BarOutcome; why: string } {
  if (task.state.status !== "terminal") return liveState(task, tool, ctx);
  const o = task.state.outcome;
  const entries = ctx.entries.get(task.id) ?? [];
  // A tool call's result decides first, whatever its task's status: it holds what went wrong.
  const result = task.kind === "pi.tool" ? entries.find((e) => e.kind === ENTRY.toolResult) : undefined;
  const m = result ? modelMessages(result)[0] : undefined;
  if (result && m?.role === "toolResult" && m.isError) {
    const { code, message } = resultError(result);
    if (code === "interrupted") return { outcome: "interrupted", why: cut(message) };
    if (code === "aborted" || o.status === "aborted")
      return { outcome: "aborted", why: `stopped: ${cut(message)}` };
    if (code === "denied") return { outcome: "error", why: `you denied it: ${cut(message)}` };
    return { outcome: "error", why: `${toolPhrase(tool)} failed: ${cut(message)}` };
  }
  if (o.status === "failed" || o.status === "faulted")
    return { outcome: "error", why: `failed: ${cut(o.error.message)}` };
  if (o.status === "orphaned")
    return { outcome: "error", why: `could not run: ${BLOCKED[o.reason] ?? o.reason}` };
  if (o.status === "aborted")
    return { outcome: "aborted", why: `stopped${o.reason ? `: ${cut(o.reason)}` : ""}` };
  if (task.kind === "pi.tool") {
    const ms = m?.role === "toolResult" ? (m as { durationMs?: number }).durationMs : undefined;
    return { outcome: "ok", why: `done${ms !== undefined ? ` in ${(ms / 1000).toFixed(1)} s` : ""}` };
  }
  if (task.kind === "pi.generation") {
    const answer = entries.findLast((e) => e.kind === ENTRY.assistant);
    const m = answer ? (modelMessages(answer)[0] as AssistantMessage | undefined) : undefined;
    if (m?.role === "assistant") {
      if (m.stopReason === "error")
        return { outcome: "error", why: `the model failed: ${cut(m.errorMessage ?? "an error")}` };
      if (m.stopReason === "aborted")
        return { outcome: "aborted", why: "stopped before the answer was complete" };
      if (m.stopReason === "length") return { outcome: "ok", why: "stopped at the answer's length limit" };
      const calls = m.content.filter((c) => c.type === "toolCall").length;
      if (calls > 0) return { outcome: "ok", why: `answered with ${plural(calls, "tool call")}` };
      return { outcome: "ok", why: "answered" };
    }
  }
  return { outcome: "ok", why: "done" };
}

/** The bars of `tasks` (and the approval waits their live slots record), parents before children where known. */
export function barsOf(tasks: readonly TaskRecord[], ctx: BarContext): TimelineBar[] {
  const bars: TimelineBar[] = [];
  const shown = new Set(tasks.map((t) => t.id));
  for (const task of tasks) {
    const tool = task.kind === "pi.tool" ? toolNameOf(task, ctx) : undefined;
    const kind = kindOf(task, tool);
    const start = task.startedAt ?? task.endedAt ?? ctx.now;
    const terminal = task.state.status === "terminal";
    const { outcome, why } = endedState(task, tool, ctx);
    const ownerTask = task.owner ?? ctx.owners.get(task.conversationId);
    let usage: TimelineBar["usage"];
    for (const e of ctx.entries.get(task.id) ?? []) {
      const m = modelMessages(e)[0];
      const u =
        m?.role === "assistant"
          ? usageOfMessage(m.usage)
          : usageOfMessage((e.data as { usage?: unknown } | undefined)?.usage);
      if (!u || (u.total === 0 && u.cost === 0)) continue;
      usage = usage
        ? {
            input: usage.input + u.input,
            output: usage.output + u.output,
            total: usage.total + u.total,
            cost: usage.cost + u.cost,
          }
        : u;
    }
    const input = task.input as { assistant?: EntryId; callId?: string } | null;
    const call =
      task.kind === "pi.tool" &&
      input &&
      typeof input.assistant === "number" &&
      typeof input.callId === "string"
        ? { entryId: input.assistant, callId: input.callId }
        : undefined;
    bars.push({
      id: `t${task.id}`,
      taskId: task.id,
      ...(ownerTask !== undefined && shown.has(ownerTask) ? { parent: `t${ownerTask}` } : {}),
      conversationId: task.conversationId,
      kind,
      taskKind: task.kind,
      label: labelOf(kind, task, tool),
      outcome,
      start,
      ...(terminal ? { end: Math.max(start, task.endedAt ?? start) } : {}),
      ...(usage ? { usage } : {}),
      why,
      ...(call ? { call } : {}),
    });
    const approval = ctx.slots.get(task.id)?.approval;
    if (approval) {
      const decision = approval.decision;
      bars.push({
        id: `a${task.id}`,
        taskId: task.id,
        parent: `t${task.id}`,
        conversationId: task.conversationId,
        kind: "approval",
        taskKind: task.kind,
        label: decision
          ? decision.decision === "approve"
            ? "approved"
            : "denied"
          : "waiting for your approval",
        outcome: decision ? (decision.decision === "approve" ? "ok" : "error") : "waiting",
        start: approval.since,
        ...(decision ? { end: Math.max(approval.since, decision.at) } : {}),
        why: decision
          ? decision.decision === "approve"
            ? "you approved the call"
            : `you denied the call${decision.reason ? `: ${cut(decision.reason)}` : ""}`
          : `waiting for your approval to run ${toolPhrase(tool)}: ${approval.summary.join(", ").slice(0, SHORT)}`,
      });
    }
  }
  return bars;
}

/** The context of a page's or a detail's bars: their entries, the live slots, owners, blocked reasons. */
async function contextFor(
  h: AgentHarness,
  conversations: readonly ConversationId[],
  tasks: readonly TaskRecord[],
  now: number,
): Promise<BarContext> {
  const ids = tasks.map((t) => t.id);
  const entries = new Map<TaskId, EntryRecord[]>();
  // Only the tasks whose entries say something: answers (usage, stop reason) and tool calls (result).
  const reading = tasks.filter(
    (t) => t.kind === "pi.generation" || t.kind === "pi.tool" || t.kind === "pi.compaction",
  );
  const found = await entriesByTasks(h.store, {
    conversations,
    tasks: reading.map((t) => t.id),
    limit: MAX_PAGE_ENTRIES,
  });
  for (const e of found) {
    if (e.byTaskId === undefined) continue;
    const list = entries.get(e.byTaskId) ?? [];
    list.push(e);
    entries.set(e.byTaskId, list);
  }
  const slots = new Map<TaskId, ToolSlot>();
  const withTools = new Set(tasks.filter((t) => t.kind === "pi.tool").map((t) => t.conversationId));
  for (const c of withTools) {
    const state = await h.doc<Json>(c, DOC.live).catch(() => undefined);
    for (const slot of (state as unknown as LiveState | undefined)?.tools ?? [])
      if (slot.taskId !== undefined && ids.includes(slot.taskId)) slots.set(slot.taskId, slot);
  }
  const owners = new Map<ConversationId, TaskId>();
  for (const c of conversations) {
    const owner = h.conversationRecord(c)?.owner;
    if (owner) owners.set(c, owner.taskId);
  }
  const blocked = new Map<TaskId, string>();
  if (tasks.some((t) => t.state.status !== "terminal")) {
    for (const t of h.inspect().tasks)
      if (t.state.kind === "blocked")
        blocked.set(
          t.record.id,
          `${BLOCKED[t.state.reason] ?? t.state.reason}${t.state.error ? ` (${t.state.error})` : ""}`,
        );
  }
  const graph = h.taskGraph();
  const byId = new Map(tasks.map((t) => [t.id, t.kind]));
  return {
    now,
    entries,
    slots,
    owners,
    blocked,
    kindOf: (id) => byId.get(id) ?? graph.tasks[String(id)]?.kind,
  };
}

/** The range a page covers: absent ends follow the run's first start and now. */
function resolveRange(range: TimelineRange, span: { start?: number }, now: number) {
  const to = range.to ?? now + 1;
  const from = Math.min(range.from ?? span.start ?? now, to);
  const limit = Math.max(1, Math.min(MAX_TIMELINE_LIMIT, Math.floor(range.limit ?? TIMELINE_LIMIT)));
  return { from, to, limit };
}

/** One page of `conversationId`'s timeline (see the module's header). */
export async function timelinePage(
  h: AgentHarness,
  conversationId: ConversationId,
  range: TimelineRange,
): Promise<TimelinePage & { readonly conversations: readonly ConversationId[] }> {
  const now = h.now();
  const conversations = await runConversations(h, conversationId);
  const span = await tasksSpan(h.store, { conversations, now });
  const { from, to, limit } = resolveRange(range, span, now);
  const { tasks, total } = await tasksOverlapping(h.store, { conversations, from, to, now, limit });
  // Oldest first, so a parent (which starts first) comes before what it owns.
  const ordered = [...tasks].sort(
    (a, b) => (a.startedAt ?? a.endedAt ?? now) - (b.startedAt ?? b.endedAt ?? now) || a.id - b.id,
  );
  const bars = barsOf(ordered, await contextFor(h, conversations, ordered, now));
  return {
    conversationId,
    from,
    to,
    now,
    span: {
      ...(span.start !== undefined ? { start: span.start, end: span.end ?? span.start } : {}),
      tasks: span.count,
    },
    bars,
    total,
    conversations,
  };
}

/** The public page (without the conversations a watch follows). */
export async function publicPage(
  h: AgentHarness,
  conversationId: ConversationId,
  range: TimelineRange,
): Promise<TimelinePage> {
  const { conversations: _c, ...page } = await timelinePage(h, conversationId, range);
  return page;
}

/** One bar opened: its task's bar and the entries it appended. */
export async function timelineDetail(
  h: AgentHarness,
  conversationId: ConversationId,
  taskId: TaskId,
): Promise<TimelineDetail> {
  const conversations = await runConversations(h, conversationId);
  const task = await h.getTask(taskId);
  if (!task || !conversations.includes(task.conversationId)) throw new UnknownTask(taskId);
  const now = h.now();
  const ctx = await contextFor(h, conversations, [task], now);
  const bar = barsOf([task], ctx)[0]!;
  const entries = await entriesByTasks(h.store, {
    conversations: [task.conversationId],
    tasks: [taskId],
    limit: MAX_DETAIL_ENTRIES,
  });
  // A tool call's own answer entry first: the call it ran.
  const call = bar.call ? await h.entry(bar.call.entryId) : undefined;
  return { bar, entries: call && !entries.some((e) => e.id === call.id) ? [call, ...entries] : entries };
}

/** Whether a change set touches the tasks a watch follows. */
function touches(change: ChangeSet, conversations: ReadonlySet<ConversationId>): boolean {
  return (
    change.tasks.some((t) => conversations.has(t.conversationId)) ||
    change.conversations.some((r) => r.owner !== undefined && conversations.has(r.owner.conversationId)) ||
    (change.deletedConversations ?? []).some((c) => conversations.has(c))
  );
}

/** A live timeline (see the module's header): `stop` ends it; `closed` resolves once it ended. */
export interface TimelineWatch {
  stop(): void;
  readonly pending: number;
  readonly closed: Promise<void>;
}

/**
 * Watch one range of `conversationId`'s timeline: the first page is delivered before this resolves,
 * then one after each commit that touched it (computed one at a time, each after the listener's
 * promise). A failure to read a page (the conversation deleted, the harness closed) ends the watch.
 */
export async function watchTimeline(
  h: AgentHarness,
  conversationId: ConversationId,
  range: TimelineRange,
  listener: (page: TimelinePage) => Promise<void> | void,
): Promise<TimelineWatch> {
  const first = await timelinePage(h, conversationId, range);
  let following = new Set(first.conversations);
  let dirty = false;
  let busy = false;
  let stopped = false;
  let ended!: () => void;
  const closed = new Promise<void>((resolve) => (ended = resolve));
  const stop = () => {
    if (stopped) return;
    stopped = true;
    unsubscribe();
    unclose();
    ended();
  };
  const pump = async () => {
    if (busy) return;
    busy = true;
    try {
      while (dirty && !stopped) {
        dirty = false;
        const { conversations, ...page } = await timelinePage(h, conversationId, range);
        following = new Set(conversations);
        if (!stopped) await listener(page);
      }
    } catch {
      stop();
    } finally {
      busy = false;
    }
  };
  const unsubscribe = h.subscribe((change) => {
    if (stopped || !touches(change, following)) return;
    dirty = true;
    void pump();
  });
  const unclose = h.subscribeClose(stop);
  const { conversations: _c, ...page } = first;
  busy = true;
  try {
    await listener(page);
  } finally {
    busy = false;
  }
  if (dirty) void pump();
  return {
    stop,
    get pending() {
      return dirty ? 1 : 0;
    },
    closed,
  };
}

// --- Rerun this tool call -------------------------------------------------------------------------

type RerunInput = { entryId: EntryId; callId: string };
type RerunState = { phase: "start" } | { phase: "settle"; tool: TaskId };

/** The `app.rerun` task: run the rerun's tool call as a `pi.tool` task it owns, then end the run. */
export function rerunTask(agent: () => AgentHarness): TaskDefinition<RerunInput, RerunState, Json> {
  return defineTask<RerunInput, RerunState, Json>({
    name: RERUN_TASK,
    version: 1,
    initial: () => ({ phase: "start" }),
    phases: {
      start: async (task, runtime) => {
        await runtime.commit((tx) => {
          const c = task.conversationId;
          const tool = tx.createTask(
            agent().builtin.tool as TaskDefinition<never, never, never>,
            { assistant: task.input.entryId, callId: task.input.callId } as never,
            { ownership: { kind: "task", taskId: task.id } },
          );
          const state = live(tx, c);
          writeDoc<LiveState>(tx, c, DOC.live, {
            ...state,
            tools: (state.tools ?? []).map((s) =>
              s.callId === task.input.callId ? { ...s, taskId: tool } : s,
            ),
          });
          return {
            status: "waiting",
            checkpoint: { phase: "settle", tool },
            on: [tool],
            policy: "allSettled",
          };
        });
      },
      settle: async (task, runtime) => {
        const [outcome] = await runtime.outcomes([task.state.checkpoint.tool]);
        await runtime.commit((tx) => {
          finalBoundary(tx, agent().builtin.inbox, task.conversationId);
          return {
            status: "terminal",
            outcome: {
              status: "completed",
              result: { tool: task.state.checkpoint.tool, status: outcome?.status ?? "unknown" },
            },
          };
        });
      },
    },
    abort: async (task, runtime) => {
      await runtime.commit((tx) => {
        // A call that never got its task is answered `aborted`, so the history answers every call.
        abortPendingCalls(tx, task.conversationId);
        endRun(tx, task.conversationId);
        return { status: "terminal", outcome: { status: "aborted", reason: "stopped" } };
      });
    },
  });
}

/** The new call's id: from the request id, so the same request finds the same call. */
function rerunCallId(requestId: string): string {
  return `rerun_${requestId.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, 50)}`;
}

/** The zero usage of an answer no model gave. */
const NO_USAGE = {
  input: 0,
  output: 0,
  cacheRead: 0,
  cacheWrite: 0,
  totalTokens: 0,
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
};

/** "Rerun this tool call" (see the module's header and api.ts `TimelineApi.rerunTool`). */
export async function rerunToolCall(
  h: AgentHarness,
  conversationId: ConversationId,
  request: { entryId: EntryId; callId: string; requestId: string },
): Promise<RerunAnswer> {
  await h.requireLoadedConversation(conversationId);
  const callId = rerunCallId(request.requestId);
  // The same request again: the call it made.
  const made = (await entriesContaining(h.store, callId, { kinds: [ENTRY.assistant], limit: 5 })).find(
    (e) => e.conversationId === conversationId,
  );
  if (made) {
    const task = (await h.tasks({ kind: RERUN_TASK })).find(
      (t) => (t.input as RerunInput).entryId === made.id && t.conversationId === conversationId,
    );
    if (task) return { taskId: task.id, entryId: made.id, callId };
  }
  const original = await h.entry(request.entryId);
  const message = original ? (modelMessages(original)[0] as AssistantMessage | undefined) : undefined;
  const call =
    original?.conversationId === conversationId &&
    original.kind === ENTRY.assistant &&
    message?.role === "assistant"
      ? message.content.find((c): c is ToolCall => c.type === "toolCall" && c.id === request.callId)
      : undefined;
  if (!original || !message || !call)
    throw new RerunRefused(
      "not_a_call",
      `conversation ${conversationId} has no tool call ${request.callId} in entry ${request.entryId}`,
    );
  const definition = h.registry.get(RERUN_TASK) as TaskDefinition<RerunInput, RerunState, Json> | undefined;
  if (!definition) throw new RerunRefused("not_a_call", "this engine cannot rerun tool calls");
  return h.transaction((tx) => {
    const state = live(tx, conversationId);
    if (state.run !== undefined || (state.tools ?? []).some((s) => s.status !== "done"))
      throw new RerunRefused(
        "busy",
        "the conversation is working: stop it or let it finish, then rerun the call",
      );
    const answer: AssistantMessage = {
      role: "assistant",
      content: [{ type: "toolCall", id: callId, name: call.name, arguments: call.arguments }],
      api: message.api,
      provider: message.provider,
      model: message.model,
      usage: NO_USAGE,
      stopReason: "toolUse",
      timestamp: tx.now(),
    };
    const entry = tx.appendEntry(conversationId, {
      kind: ENTRY.assistant,
      model: [answer] as unknown as Json,
      data: { rerunOf: { entryId: original.id, callId: call.id } },
    });
    const taskId = tx.createTask(
      definition,
      { entryId: entry.id, callId },
      { ownership: { kind: "conversation" }, conversationId },
    );
    writeDoc<LiveState>(tx, conversationId, DOC.live, {
      ...state,
      run: { taskId, inputs: [] },
      tools: [{ callId, name: call.name, status: "pending" }],
    });
    return { taskId, entryId: entry.id, callId };
  });
}
