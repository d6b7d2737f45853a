/**
 * Fixtures of the agent-event tests: a model whose stream the test drives one partial at a time
 * (each partial its own commit), a consumer that applies events the way a UI would and fails on any
 * event that does not fit what it holds (an update of no message, a second message started over an
 * unfinished one, a tool update before its start), and a compact rendering of events for expected lists.
 */
import {
  type AssistantMessage,
  type AssistantMessageEventStream,
  createAssistantMessageEventStream,
  fauxAssistantMessage,
} from "@mariozechner/pi-ai";
import type { AgentEvent, AgentEventStream, EntryRecord, SnapshotEvent } from "../../../worker/index.ts";
import { applyFrame } from "../../../worker/protocol/index.ts";
import { deferred } from "../../../worker/testing.ts";

type Block = AssistantMessage["content"][number];

/**
 * A stream function (`AgentHarnessOptions.stream`) answering each request through the test: `next()`
 * waits for the next request, then the test sends partials and the final message.
 */
export function scriptedModel(
  options: { auto?: (systemPrompt: string | undefined) => AssistantMessage | undefined } = {},
) {
  const waiting: Array<(s: AssistantMessageEventStream) => void> = [];
  const queued: AssistantMessageEventStream[] = [];
  const stream = (_model: unknown, context: { systemPrompt?: string }) => {
    const s = createAssistantMessageEventStream();
    const auto = options.auto?.(context.systemPrompt);
    if (auto) {
      queueMicrotask(() => {
        s.push({ type: "done", reason: "stop", message: auto });
        s.end();
      });
      return s;
    }
    const w = waiting.shift();
    if (w) w(s);
    else queued.push(s);
    return s;
  };
  const next = async () => {
    const s = queued.shift() ?? (await new Promise<AssistantMessageEventStream>((r) => waiting.push(r)));
    return {
      partial(content: Block[]) {
        const partial = fauxAssistantMessage(structuredClone(content), { timestamp: 1 });
        s.push({ type: "text_delta", contentIndex: 0, delta: "", partial });
      },
      done(content: Block[], stopReason: "stop" | "toolUse" = "stop") {
        s.push({
          type: "done",
          reason: stopReason,
          message: fauxAssistantMessage(structuredClone(content), { stopReason, timestamp: 1 }),
        });
        s.end();
      },
    };
  };
  return { stream, next };
}

/** Collects a stream's batches (started at once). */
export function collect(stream: AgentEventStream): { batches: AgentEvent[][]; seen: Promise<void> } {
  const batches: AgentEvent[][] = [];
  const first = deferred();
  stream.start((events) => {
    batches.push([...events]);
    first.resolve();
  });
  return { batches, seen: first.promise };
}

const textOf = (b: Block): string =>
  b.type === "text" ? b.text : b.type === "thinking" ? b.thinking : JSON.stringify(b.arguments);

/** One event as a line: its type and the facts a reader checks. */
export function render(e: AgentEvent): string {
  switch (e.type) {
    case "message_start": {
      const m = e.message;
      const content =
        typeof m.content === "string"
          ? m.content
          : m.content.map((b) => ("type" in b ? `${b.type}:${textOf(b as Block)}` : "")).join("|");
      return `message_start ${m.role} ${content}`;
    }
    case "message_update":
      return `message_update ${e.changes
        .map((c) =>
          c.type === "text_delta" || c.type === "thinking_delta"
            ? `${c.type}@${c.contentIndex}:${c.delta}`
            : c.type === "toolcall_delta"
              ? `toolcall_delta@${c.contentIndex}${JSON.stringify(c.path)}:${c.delta}`
              : "block" in c
                ? `${c.type}@${c.contentIndex}:${textOf(c.block)}`
                : "message",
        )
        .join(",")}`;
    case "message_end":
    case "entry_appended":
      return `${e.type} ${e.entry.kind}`;
    case "tool_execution_start":
      return `tool_execution_start ${e.toolName} ${JSON.stringify(e.args)}`;
    case "tool_execution_update":
      return `tool_execution_update ${e.toolName} ${JSON.stringify(e.output)}${e.details !== undefined ? ` details=${JSON.stringify(e.details)}` : ""}`;
    case "tool_execution_end":
      return `tool_execution_end ${e.toolName}${e.entry ? ` ${e.entry.kind}` : ""}`;
    case "submission":
      return `submission ${e.record.type} ${e.record.status}`;
    case "run_start":
    case "run_end":
      return `${e.type} ${e.inputs.length}`;
    case "inbox_update":
      return `inbox_update ${e.items.map((i) => i.mode).join(",")}`;
    case "compaction_start":
      return `compaction_start ${e.reason}${e.blocking ? " blocking" : ""}`;
    case "compaction_end":
      return `compaction_end ${e.reason}`;
    case "task_failed":
      return `task_failed ${e.kind}`;
    default:
      return e.type;
  }
}

interface OpenTool {
  name: string;
  output: string;
}

/**
 * A consumer that holds what events say: the active entries, the in-flight message and the running
 * tools. `apply` throws on an event that does not fit; `problems()` lists what is left unfinished.
 */
export class EventConsumer {
  entries: readonly EntryRecord[] = [];
  message: AssistantMessage | undefined;
  tools = new Map<string, OpenTool>();
  /** The texts each partial-started message had when its entry ended it. */
  readonly ended: Array<{ partial: string; entry: string }> = [];
  snapshots = 0;

  constructor(snapshot: SnapshotEvent) {
    this.#snapshot(snapshot);
  }

  #snapshot(s: SnapshotEvent): void {
    this.snapshots++;
    this.entries = s.entries;
    this.message = s.generation?.message && structuredClone(s.generation.message);
    this.tools = new Map(
      s.tools
        .filter((t) => t.status === "running")
        .map((t) => [t.callId, { name: t.name, output: t.output ?? "" }]),
    );
  }

  #append(entry: EntryRecord): void {
    this.entries = applyFrame(
      { conversation: { id: 1 } as never, entries: this.entries, docs: {} },
      {
        seq: 0,
        ops: [
          entry.head !== undefined ? { op: "head", entries: [entry] } : { op: "append", entries: [entry] },
        ],
      },
    )!.entries;
  }

  apply(events: readonly AgentEvent[]): void {
    for (let i = 0; i < events.length; i++) {
      const e = events[i]!;
      const next = events[i + 1];
      switch (e.type) {
        case "snapshot":
          if (events.length !== 1) throw new Error("a snapshot comes alone");
          this.#snapshot(e);
          break;
        case "message_start":
          if (next?.type === "message_end") {
            this.#append(next.entry);
            i++;
            break;
          }
          if (this.message) throw new Error("a message started over one that did not end");
          if (e.message.role !== "assistant") throw new Error("a partial that is not an answer");
          this.message = structuredClone(e.message);
          break;
        case "message_update": {
          const m = this.message;
          if (!m) throw new Error("an update with no message in flight");
          for (const c of e.changes) {
            if (c.type === "message") this.message = structuredClone(c.message);
            else if (c.type === "text_delta") (m.content[c.contentIndex] as { text: string }).text += c.delta;
            else if (c.type === "thinking_delta")
              (m.content[c.contentIndex] as { thinking: string }).thinking += c.delta;
            else if (c.type === "toolcall_delta") {
              let at = (m.content[c.contentIndex] as { arguments: Record<string | number, unknown> })
                .arguments;
              for (const key of c.path.slice(0, -1)) at = at[key] as Record<string | number, unknown>;
              const last = c.path.at(-1)!;
              at[last] = `${at[last] as string}${c.delta}`;
            } else if ("block" in c) m.content[c.contentIndex] = structuredClone(c.block);
          }
          m.usage = e.usage;
          break;
        }
        case "message_end": {
          if (!this.message) throw new Error("an end with no message in flight");
          const entryMessage = (e.entry.model as unknown as AssistantMessage[])[0]!;
          this.ended.push({
            partial: this.message.content.map(textOf).join("|"),
            entry: entryMessage.content.map(textOf).join("|"),
          });
          this.message = undefined;
          this.#append(e.entry);
          break;
        }
        case "entry_appended":
          this.#append(e.entry);
          break;
        case "tool_execution_start":
          if (this.tools.has(e.toolCallId)) throw new Error(`tool ${e.toolCallId} started twice`);
          this.tools.set(e.toolCallId, { name: e.toolName, output: "" });
          break;
        case "tool_execution_update": {
          const t = this.tools.get(e.toolCallId);
          if (!t) throw new Error(`an update of tool ${e.toolCallId}, which is not running`);
          const o = e.output;
          if (o && "set" in o) t.output = o.set;
          else if (o) t.output = t.output.slice(o.trimStart ?? 0) + (o.append ?? "");
          break;
        }
        case "tool_execution_end":
          this.tools.delete(e.toolCallId);
          break;
        default:
          break;
      }
    }
  }

  /** What is unfinished once the conversation is idle. */
  problems(): string[] {
    const out: string[] = [];
    if (this.message) out.push("a message in flight");
    for (const [id] of this.tools) out.push(`tool ${id} still running`);
    for (const { partial, entry } of this.ended)
      if (!entry.startsWith(partial.replace(/\|$/, ""))) out.push(`partial ${partial} ended by ${entry}`);
    return out;
  }
}
