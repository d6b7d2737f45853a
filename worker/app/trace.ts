/**
 * A conversation's run as OpenTelemetry spans, in the OTLP JSON encoding of an
 * `ExportTraceServiceRequest` (resourceSpans -> scopeSpans -> spans), so a person can open it in the
 * tracing tools they already use. One span per task of the conversation and of the conversations
 * its tasks own (subagents): a generation (`chat <model>`, kind CLIENT), a tool call
 * (`execute_tool <name>`), a compaction, any other task by its kind; beneath a tool call that had
 * to wait for a person, its approval wait (kept with the call's result once decided, in its pi.live
 * slot while it waits); each conversation is an `invoke_agent` span, a
 * subagent's beneath the tool call that runs it. GenAI semantic-convention attributes where they
 * fit (gen_ai.operation.name, gen_ai.request.model, gen_ai.usage.input_tokens, ...), app.* ones
 * for the rest. Invariants:
 * - ids are stable: the trace id is derived from the conversation (its id and creation time), a
 *   span id from the trace id and the task's (or conversation's) id, so exporting twice gives the
 *   same ids; trace ids are 32 lowercase hex digits, span ids 16, never all zeros;
 * - times are Unix nanoseconds as decimal strings (the encoding's int64 rule); a task still live
 *   ends at the export's time, with status UNSET; an ended one is OK or ERROR by its outcome (a
 *   generation whose answer ended in an error, a tool call whose result is an error: ERROR);
 * - no message content, no arguments, no free error text (only codes and outcome kinds), and the
 *   finished text is cleared of every saved secret (keys, the server token, MCP tokens) anyway.
 * Pure apart from `conversationTrace`, which reads the committed records through the harness.
 */
import type { AssistantMessage } from "@mariozechner/pi-ai";
import type { AgentHarness } from "../agent/harness.ts";
import { DOC, ENTRY, type LiveState, modelMessages, type ToolSlot } from "../agent/records.ts";
import { isToolResultEntry } from "../agent/tools/results.ts";
import { ownedBelow } from "../agent/usage.ts";
import { UnknownConversation } from "../core/errors.ts";
import type { ConversationId, ConversationRecord, EntryRecord, TaskId, TaskRecord } from "../core/types.ts";
import { redactSecrets } from "./secrets.ts";

/** OTLP's AnyValue in JSON: one of these members. */
export type OtlpValue =
  | { readonly stringValue: string }
  | { readonly intValue: string }
  | { readonly doubleValue: number }
  | { readonly boolValue: boolean }
  | { readonly arrayValue: { readonly values: readonly OtlpValue[] } };

export interface OtlpAttribute {
  readonly key: string;
  readonly value: OtlpValue;
}

/** Span kinds as the encoding numbers them. */
export const SPAN_KIND = { internal: 1, client: 3 } as const;
/** Status codes as the encoding numbers them. */
export const STATUS = { unset: 0, ok: 1, error: 2 } as const;

export interface OtlpSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId?: string;
  readonly name: string;
  readonly kind: number;
  readonly startTimeUnixNano: string;
  readonly endTimeUnixNano: string;
  readonly attributes: readonly OtlpAttribute[];
  readonly status: { readonly code: number; readonly message?: string };
}

/** The `ExportTraceServiceRequest` of one conversation's run. */
export interface OtlpTrace {
  readonly resourceSpans: readonly {
    readonly resource: { readonly attributes: readonly OtlpAttribute[] };
    readonly scopeSpans: readonly {
      readonly scope: { readonly name: string; readonly version: string };
      readonly spans: readonly OtlpSpan[];
    }[];
  }[];
}

/** What a trace is made of: the committed records of a conversation and those its tasks own. */
export interface TraceInput {
  /** The conversation exported. */
  readonly conversation: ConversationRecord;
  /** It and the conversations its tasks own, transitively (subagents). */
  readonly conversations: readonly ConversationRecord[];
  /** Their tasks, terminal ones included. */
  readonly tasks: readonly TaskRecord[];
  /** Their own entries (a task's are those with its `byTaskId`). */
  readonly entries: readonly EntryRecord[];
  /** Their `pi.live` documents (a tool call's approval wait is kept in its slot). */
  readonly live: ReadonlyMap<ConversationId, LiveState>;
  /** The export's time, ms: a live task's span ends here. */
  readonly now: number;
}

const str = (key: string, value: string): OtlpAttribute => ({ key, value: { stringValue: value } });
const int = (key: string, value: number): OtlpAttribute => ({
  key,
  value: { intValue: String(Math.trunc(value)) },
});
const dbl = (key: string, value: number): OtlpAttribute => ({ key, value: { doubleValue: value } });

/** Unix nanoseconds of a time in ms, as a decimal string (exact for any integer ms). */
export function nanos(ms: number): string {
  return (BigInt(Math.max(0, Math.round(ms))) * 1_000_000n).toString();
}

async function sha256Hex(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** `hex` cut to `digits`, never all zeros (the encoding's "invalid id"). */
function idOf(hex: string, digits: number): string {
  const id = hex.slice(0, digits);
  return /^0+$/.test(id) ? `${"0".repeat(digits - 1)}1` : id;
}

export async function traceIdOf(conversation: ConversationRecord): Promise<string> {
  return idOf(await sha256Hex(`durable-agent trace ${conversation.id} ${conversation.createdAt}`), 32);
}

export async function spanIdOf(
  traceId: string,
  what: `task ${number}` | `conversation ${number}` | `approval ${number}`,
) {
  return idOf(await sha256Hex(`${traceId} ${what}`), 16);
}

const assistantOf = (e: EntryRecord): AssistantMessage | undefined => {
  const m = modelMessages(e)[0];
  return m?.role === "assistant" ? m : undefined;
};

/** A task's span without its ids: its name, kind, attributes, status and times. */
interface SpanBody {
  readonly name: string;
  readonly kind: number;
  readonly attributes: OtlpAttribute[];
  readonly status: { code: number; message?: string };
  readonly start: number;
  readonly end: number;
}

/** The status an ended task's outcome gives (live: UNSET). */
function outcomeStatus(task: TaskRecord): { code: number; message?: string } {
  const s = task.state;
  if (s.status !== "terminal" && s.status !== "completing") return { code: STATUS.unset };
  const outcome = s.outcome.status;
  return outcome === "completed" ? { code: STATUS.ok } : { code: STATUS.error, message: outcome };
}

function taskTimes(task: TaskRecord, now: number): { start: number; end: number } {
  const ended = task.state.status === "terminal" ? (task.endedAt ?? now) : now;
  const start = task.startedAt ?? ended;
  return { start, end: Math.max(start, ended) };
}

function generationSpan(task: TaskRecord, own: readonly EntryRecord[], now: number): SpanBody {
  const answers = own.map(assistantOf).filter((m): m is AssistantMessage => m !== undefined);
  const last = answers.at(-1);
  const sum = (f: (m: AssistantMessage) => number) => answers.reduce((n, m) => n + f(m), 0);
  const attributes: OtlpAttribute[] = [str("gen_ai.operation.name", "chat")];
  if (last) {
    attributes.push(
      str("gen_ai.provider.name", last.provider),
      str("gen_ai.request.model", last.model),
      str("gen_ai.response.model", last.model),
      int(
        "gen_ai.usage.input_tokens",
        sum((m) => m.usage?.input ?? 0),
      ),
      int(
        "gen_ai.usage.output_tokens",
        sum((m) => m.usage?.output ?? 0),
      ),
      int(
        "app.usage.cache_read_tokens",
        sum((m) => m.usage?.cacheRead ?? 0),
      ),
      int(
        "app.usage.cache_write_tokens",
        sum((m) => m.usage?.cacheWrite ?? 0),
      ),
      dbl(
        "app.usage.cost_usd",
        sum((m) => m.usage?.cost?.total ?? 0),
      ),
      {
        key: "gen_ai.response.finish_reasons",
        value: { arrayValue: { values: [{ stringValue: last.stopReason }] } },
      },
      int("app.attempts", answers.length),
    );
  }
  let status = outcomeStatus(task);
  // The task ended, but its answer was an error (a failed request that stood for the answer).
  if (status.code === STATUS.ok && (last?.stopReason === "error" || last?.stopReason === "aborted"))
    status = { code: STATUS.error, message: last.stopReason === "error" ? "model_error" : "aborted" };
  return {
    name: last ? `chat ${last.model}` : "chat",
    kind: SPAN_KIND.client,
    attributes,
    status,
    ...taskTimes(task, now),
  };
}

function toolSpan(
  task: TaskRecord,
  own: readonly EntryRecord[],
  slot: ToolSlot | undefined,
  now: number,
): SpanBody {
  const result = own.find(isToolResultEntry);
  const message = result ? modelMessages(result)[0] : undefined;
  const name = message?.role === "toolResult" ? message.toolName : slot?.name;
  const callId = message?.role === "toolResult" ? message.toolCallId : slot?.callId;
  const attributes: OtlpAttribute[] = [str("gen_ai.operation.name", "execute_tool")];
  if (name) attributes.push(str("gen_ai.tool.name", name));
  if (callId) attributes.push(str("gen_ai.tool.call.id", callId));
  let status = outcomeStatus(task);
  if (result && message?.role === "toolResult" && message.isError) {
    const code = result.data.diagnostics.findLast((d) => d.severity === "error")?.code;
    status = { code: STATUS.error, message: code ?? "tool_error" };
    attributes.push(str("error.type", code ?? "tool_error"));
  }
  return {
    name: name ? `execute_tool ${name}` : "execute_tool",
    kind: SPAN_KIND.internal,
    attributes,
    status,
    ...taskTimes(task, now),
  };
}

function otherSpan(task: TaskRecord, now: number): SpanBody {
  const name = task.kind === "pi.compaction" ? "compaction" : task.kind;
  return {
    name,
    kind: SPAN_KIND.internal,
    attributes: [],
    status: outcomeStatus(task),
    ...taskTimes(task, now),
  };
}

/** The OTLP JSON of a conversation's run (see the module's header for what it holds). */
export async function otlpTrace(input: TraceInput): Promise<OtlpTrace> {
  const { now } = input;
  const traceId = await traceIdOf(input.conversation);
  const inSet = new Set(input.conversations.map((c) => c.id));
  const tasks = input.tasks.filter((t) => inSet.has(t.conversationId));
  const taskIds = new Set(tasks.map((t) => t.id));
  const byTask = new Map<TaskId, EntryRecord[]>();
  for (const e of input.entries)
    if (e.byTaskId !== undefined) {
      const list = byTask.get(e.byTaskId) ?? [];
      list.push(e);
      byTask.set(e.byTaskId, list);
    }
  const slots = new Map<TaskId, ToolSlot>();
  for (const live of input.live.values())
    for (const slot of live.tools ?? []) if (slot.taskId !== undefined) slots.set(slot.taskId, slot);

  const spans: OtlpSpan[] = [];
  /** Which conversation each task's span (and its approval wait) belongs to. */
  const conversationOfSpan = new Map<string, ConversationId>();
  const taskSpanId = (id: TaskId) => spanIdOf(traceId, `task ${id}`);
  const convSpanId = (id: ConversationId) => spanIdOf(traceId, `conversation ${id}`);
  const common = (task: TaskRecord) => [
    int("app.task.id", task.id),
    str("app.task.kind", task.kind),
    str(
      "app.task.status",
      task.state.status === "terminal" || task.state.status === "completing"
        ? task.state.outcome.status
        : task.state.status,
    ),
    int("app.conversation.id", task.conversationId),
  ];
  for (const task of tasks) {
    const own = byTask.get(task.id) ?? [];
    const body =
      task.kind === "pi.generation"
        ? generationSpan(task, own, now)
        : task.kind === "pi.tool"
          ? toolSpan(task, own, slots.get(task.id), now)
          : otherSpan(task, now);
    const parent =
      task.owner !== undefined && taskIds.has(task.owner)
        ? await taskSpanId(task.owner)
        : await convSpanId(task.conversationId);
    const spanId = await taskSpanId(task.id);
    spans.push({
      traceId,
      spanId,
      parentSpanId: parent,
      name: body.name,
      kind: body.kind,
      startTimeUnixNano: nanos(body.start),
      endTimeUnixNano: nanos(body.end),
      attributes: [...body.attributes, ...common(task)],
      status: body.status.message ? body.status : { code: body.status.code },
    });
    conversationOfSpan.set(spanId, task.conversationId);
    // A decided wait is kept with the call's result; one still waiting is in its pi.live slot.
    const kept = own.find(isToolResultEntry)?.data.approval;
    const slot = slots.get(task.id)?.approval;
    const approval = kept
      ? { since: kept.waitedSince, decision: { decision: kept.decision, at: kept.decidedAt } }
      : slot
        ? { since: slot.since, decision: slot.decision }
        : undefined;
    if (task.kind === "pi.tool" && approval) {
      const decided = approval.decision;
      const end = Math.max(
        approval.since,
        decided?.at ?? (task.state.status === "terminal" ? body.end : now),
      );
      spans.push({
        traceId,
        spanId: await spanIdOf(traceId, `approval ${task.id}`),
        parentSpanId: spanId,
        name: "approval wait",
        kind: SPAN_KIND.internal,
        startTimeUnixNano: nanos(approval.since),
        endTimeUnixNano: nanos(end),
        attributes: [
          str(
            "app.approval.decision",
            decided?.decision ?? (task.state.status === "terminal" ? "none" : "waiting"),
          ),
          int("app.task.id", task.id),
        ],
        status: decided
          ? decided.decision === "approve"
            ? { code: STATUS.ok }
            : { code: STATUS.error, message: "denied" }
          : { code: STATUS.unset },
      });
    }
  }

  // A span per conversation, covering its tasks: the exported one at the root, a subagent's
  // beneath the tool call (its owner task) that runs it.
  for (const c of input.conversations) {
    const mine = spans.filter((s) => conversationOfSpan.get(s.spanId) === c.id);
    // Nanoseconds exceed a double's exact integers: compared as bigints.
    let start = BigInt(nanos(c.createdAt));
    let end = start;
    for (const [i, s] of mine.entries()) {
      const a = BigInt(s.startTimeUnixNano);
      const b = BigInt(s.endTimeUnixNano);
      if (i === 0 || a < start) start = a;
      if (i === 0 || b > end) end = b;
    }
    const live = tasks.some((t) => t.conversationId === c.id && t.state.status !== "terminal");
    const owner = c.id === input.conversation.id ? undefined : c.owner;
    spans.push({
      traceId,
      spanId: await convSpanId(c.id),
      ...(owner && taskIds.has(owner.taskId) ? { parentSpanId: await taskSpanId(owner.taskId) } : {}),
      name: c.id === input.conversation.id ? "invoke_agent conversation" : "invoke_agent subagent",
      kind: SPAN_KIND.internal,
      startTimeUnixNano: start.toString(),
      endTimeUnixNano: (end < start ? start : end).toString(),
      attributes: [
        str("gen_ai.operation.name", "invoke_agent"),
        str("gen_ai.conversation.id", String(c.id)),
        int("app.conversation.id", c.id),
      ],
      status: { code: live ? STATUS.unset : STATUS.ok },
    });
  }
  spans.sort((a, b) => {
    const d = BigInt(a.startTimeUnixNano) - BigInt(b.startTimeUnixNano);
    return d < 0n ? -1 : d > 0n ? 1 : a.spanId < b.spanId ? -1 : 1;
  });
  return {
    resourceSpans: [
      {
        resource: { attributes: [str("service.name", "durable-agent-harness")] },
        scopeSpans: [{ scope: { name: "durable-agent-harness/trace-export", version: "1" }, spans }],
      },
    ],
  };
}

/** The file a trace downloads as. */
export interface TraceFile {
  readonly fileName: string;
  readonly text: string;
}

/**
 * A conversation's run as an OTLP JSON file, read from the harness's committed records; `secrets`
 * (the saved ones) are cleared from the text, whatever put them there.
 */
export async function conversationTrace(
  h: AgentHarness,
  conversationId: ConversationId,
  options: { secrets: readonly string[]; now?: number },
): Promise<TraceFile> {
  // The conversation and those below it, read by the owner index when not in memory: O(its run).
  const conversations = await h.loadBelow(conversationId);
  const conversation = conversations?.[0];
  if (!conversations || !conversation) throw new UnknownConversation(conversationId);
  const ids = [conversationId, ...ownedBelow(conversations, conversationId)];
  const set = new Set(ids);
  const tasks = (await h.tasks()).filter((t) => set.has(t.conversationId));
  const entries: EntryRecord[] = [];
  const live = new Map<ConversationId, LiveState>();
  for (const id of ids) {
    entries.push(
      ...(await h.entries(id)).filter((e) => e.kind === ENTRY.assistant || e.kind === ENTRY.toolResult),
    );
    const doc = (await h.doc(id, DOC.live)) as unknown as LiveState | undefined;
    if (doc) live.set(id, doc);
  }
  const trace = await otlpTrace({
    conversation,
    conversations,
    tasks,
    entries,
    live,
    now: options.now ?? Date.now(),
  });
  return {
    fileName: `trace-conversation-${conversationId}.otlp.json`,
    text: redactSecrets(JSON.stringify(trace, null, 2), options.secrets),
  };
}
