/**
 * What a tool call writes besides its task record: the pi.tool-result entry (exactly what the model
 * sees, harness diagnostics included), its slot in pi.live (pending -> running -> done, with the
 * durable partial output while running), and the bounds on its output (the tool's limits, limits.ts,
 * with a truncated diagnostic for what was dropped). Everything writes through the transaction given.
 */
import type { Tx } from "../../core/define.ts";
import type { DocPatch } from "../../core/doc-patch.ts";
import type { ConversationId, EntryId, EntryRecord, Json, TaskId, TaskRecord } from "../../core/types.ts";
import {
  addToolUsage,
  DOC,
  ENTRY,
  type LiveState,
  live,
  type ToolDiagnostic,
  type ToolSlot,
  writeDoc,
} from "../records.ts";
import { ThrottledWriter } from "../throttle.ts";
import { utf8Length } from "../workspace/fs.ts";
import type { ToolResult } from "./contract.ts";
import {
  DEFAULT_OUTPUT_LIMITS,
  type OutputLimits,
  outputWindow,
  type Retained,
  retainText,
  truncatedDiagnostic,
} from "./limits.ts";

/** A `pi.tool-result` entry: its model message and, in `data`, the call's diagnostics (spec §8.1). */
export type ToolResultEntry = EntryRecord & {
  readonly kind: typeof ENTRY.toolResult;
  readonly data: { readonly diagnostics: readonly ToolDiagnostic[] };
};

export function isToolResultEntry(entry: EntryRecord): entry is ToolResultEntry {
  const data = entry.data as { diagnostics?: unknown } | null | undefined;
  return entry.kind === ENTRY.toolResult && Array.isArray(data?.diagnostics);
}

/**
 * The result recovery wrote for a call a crash cut short that it could not run again (an unsafe
 * call): it may or may not have taken effect.
 */
export function isInterruptedResult(entry: EntryRecord): entry is ToolResultEntry {
  return (
    isToolResultEntry(entry) &&
    entry.data.diagnostics.some((d) => d.severity === "error" && d.code === "interrupted")
  );
}

export function harnessBlock(diagnostics: readonly ToolDiagnostic[]): string {
  return `<harness>\n${diagnostics.map((d) => `[${d.severity}] ${d.message}`).join("\n")}\n</harness>`;
}

/** Append a pi.tool-result entry: exactly what the model will see, diagnostics included. */
export function appendResult(
  tx: Tx,
  c: ConversationId,
  callId: string,
  name: string,
  result: ToolResult,
  diagnostics: ToolDiagnostic[],
  durationMs?: number,
): EntryRecord {
  const content = [...result.content];
  if (diagnostics.length > 0) content.push({ type: "text", text: harnessBlock(diagnostics) });
  const message = {
    role: "toolResult",
    toolCallId: callId,
    toolName: name,
    content,
    ...(result.details !== undefined ? { details: result.details } : {}),
    isError: result.isError === true,
    ...(durationMs !== undefined ? { durationMs } : {}),
    timestamp: tx.now(),
  };
  const entry = tx.appendEntry(c, {
    kind: ENTRY.toolResult,
    model: [message] as unknown as Json,
    data: { diagnostics, ...(result.usage ? { usage: result.usage } : {}) } as unknown as Json,
  });
  if (result.usage) addToolUsage(tx, c, name, result.usage);
  return entry;
}

/** A harness-written error result (tool_unavailable, invalid_arguments, blocked, interrupted, aborted, tool_error). */
export function toolResultEntry(
  tx: Tx,
  c: ConversationId,
  callId: string,
  name: string,
  message: string,
  code: string,
  partial?: string,
): EntryRecord {
  const content: ToolResult["content"] = partial ? [{ type: "text", text: partial }] : [];
  return appendResult(tx, c, callId, name, { content, isError: true }, [
    { severity: "error", code, message },
  ]);
}

export function updateSlot(
  tx: Tx,
  c: ConversationId,
  taskId: TaskId,
  patch: (slot: ToolSlot) => ToolSlot,
): void {
  const state = live(tx, c);
  if (!state.tools?.some((s) => s.taskId === taskId)) return;
  writeDoc<LiveState>(tx, c, DOC.live, {
    ...state,
    tools: state.tools.map((s) => (s.taskId === taskId ? patch(s) : s)),
  });
}

/**
 * Bring a running call's slot up to its output so far as document patches: the text added since the
 * last write (or the whole text when the cut shortened it) and the changed drop counts. A progress
 * commit thus stores what the tool printed since the previous one, not everything it printed.
 */
function patchSlotOutput(
  tx: Tx,
  c: ConversationId,
  taskId: TaskId,
  output: string,
  droppedBytes: number,
  droppedLines: number,
): void {
  const tools = live(tx, c).tools ?? [];
  const index = tools.findIndex((s) => s.taskId === taskId);
  const slot = tools[index];
  if (!slot) return;
  const stored = slot.output ?? "";
  const patches: DocPatch[] = [];
  if (!output.startsWith(stored)) patches.push({ path: ["tools", index, "output"], set: output });
  else if (output.length > stored.length || slot.output === undefined)
    patches.push({ path: ["tools", index, "output"], append: output.slice(stored.length) });
  if (droppedBytes && slot.droppedBytes !== droppedBytes)
    patches.push({ path: ["tools", index, "droppedBytes"], set: droppedBytes });
  if (droppedLines && slot.droppedLines !== droppedLines)
    patches.push({ path: ["tools", index, "droppedLines"], set: droppedLines });
  if (patches.length > 0) tx.patchDoc(c, DOC.live, patches);
}

export function slotDone(tx: Tx, c: ConversationId, taskId: TaskId, entry?: EntryId): void {
  updateSlot(tx, c, taskId, ({ output: _o, droppedBytes: _b, droppedLines: _l, details: _d, ...s }) => ({
    ...s,
    status: "done",
    ...(entry !== undefined ? { entry } : {}),
  }));
}

/** Scheduler-written outcome (faulted, orphaned) of a tool task: its slot is done without an entry. */
export function cleanUpFailedTool(tx: Tx, task: TaskRecord): void {
  slotDone(tx, task.conversationId, task.id);
}

/**
 * Bound every text part of a result by the tool's limits; returns the diagnostics for what was
 * dropped (one per cut part).
 */
export function boundResult(
  result: ToolResult,
  limits: OutputLimits = DEFAULT_OUTPUT_LIMITS,
): { result: ToolResult; diagnostics: ToolDiagnostic[] } {
  const diagnostics: ToolDiagnostic[] = [];
  const content = result.content.map((part) => {
    if (part.type !== "text") return part;
    const kept = retainText(part.text, limits);
    const diagnostic = truncatedDiagnostic(kept, limits);
    if (!diagnostic) return part;
    diagnostics.push(diagnostic);
    return { ...part, text: kept.text };
  });
  return { result: { ...result, content }, diagnostics };
}

export interface OutputBufferOptions {
  readonly conversationId: ConversationId;
  readonly taskId: TaskId;
  readonly limits: OutputLimits;
  /** Progress pacing (spec §7.3): least time between commits, and bytes per second. */
  readonly intervalMs: number;
  readonly bytesPerSecond: number;
}

/** Keeps a tool's output within its limits and commits it to its slot, throttled. */
export class OutputBuffer {
  readonly #window: ReturnType<typeof outputWindow>;
  readonly #writer: ThrottledWriter;
  /** The output the last progress commit wrote: the next one writes only what changed since. */
  #written = "";

  constructor(commit: (change: (tx: Tx) => undefined) => Promise<unknown>, options: OutputBufferOptions) {
    this.#window = outputWindow(options.limits);
    const { conversationId, taskId } = options;
    this.#writer = new ThrottledWriter({
      intervalMs: options.intervalMs,
      bytesPerSecond: options.bytesPerSecond,
      write: () => {
        const { text: output, droppedBytes, droppedLines } = this.#window.retained();
        const bytes = utf8Length(
          output.startsWith(this.#written) ? output.slice(this.#written.length) : output,
        );
        this.#written = output;
        const done = commit((tx) => {
          patchSlotOutput(tx, conversationId, taskId, output, droppedBytes, droppedLines);
          return undefined;
        });
        return { bytes, done };
      },
    });
  }

  /** The retained output so far, and what the limits dropped. */
  get retained(): Retained {
    return this.#window.retained();
  }

  get text(): string {
    return this.#window.retained().text;
  }

  append(chunk: string): void {
    if (this.#writer.stopped) throw new Error("output() after the call ended");
    this.#window.append(chunk);
    this.#writer.mark();
  }

  stop(): Promise<void> {
    return this.#writer.stop();
  }
}
