/**
 * What a tool call writes besides its task record: the pi.tool-result entry (exactly what the model
 * sees, harness diagnostics included), its slot in pi.live (pending -> running -> done, with the
 * durable partial output while running), and the bounds on its output (50 KiB / 2,000 lines, with
 * a truncated diagnostic for what was dropped). Everything writes through the transaction given.
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
import { capHead, OUTPUT_LIMITS, type ToolResult } from "./contract.ts";

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

/** Bound every text part of a result; returns the diagnostics for what was dropped. */
export function boundResult(result: ToolResult): { result: ToolResult; diagnostics: ToolDiagnostic[] } {
  const diagnostics: ToolDiagnostic[] = [];
  const content = result.content.map((part) => {
    if (part.type !== "text") return part;
    const cap = capHead(part.text);
    if (!cap.truncated) return part;
    diagnostics.push({
      severity: "warn",
      code: "truncated",
      message: `output truncated: ${cap.totalLines - cap.shownLines} lines and ${cap.totalBytes - cap.shownBytes} bytes not shown (limits ${OUTPUT_LIMITS.maxLines} lines, ${OUTPUT_LIMITS.maxBytes / 1024} KiB)`,
    });
    return { ...part, text: cap.head };
  });
  return { result: { ...result, content }, diagnostics };
}

/** Keeps the head of a tool's output within the caps and commits it to its slot, throttled. */
export class OutputBuffer {
  text = "";
  /** UTF-8 bytes and newlines in `text`, kept as chunks arrive: an append costs its chunk, not the text. */
  #bytes = 0;
  #newlines = 0;
  #droppedBytes = 0;
  #droppedLines = 0;
  #full = false;
  readonly #writer: ThrottledWriter;

  constructor(
    commit: (change: (tx: Tx) => undefined) => Promise<unknown>,
    conversationId: ConversationId,
    taskId: TaskId,
    intervalMs: number,
  ) {
    this.#writer = new ThrottledWriter(intervalMs, () => {
      const output = this.text;
      const droppedBytes = this.#droppedBytes;
      const droppedLines = this.#droppedLines;
      return commit((tx) => {
        patchSlotOutput(tx, conversationId, taskId, output, droppedBytes, droppedLines);
        return undefined;
      });
    });
  }

  append(chunk: string): void {
    if (this.#writer.stopped) throw new Error("output() after the call ended");
    if (this.#full) {
      this.#droppedBytes += utf8Length(chunk);
      this.#droppedLines += countNewlines(chunk);
    } else {
      const bytes = this.#bytes + utf8Length(chunk);
      const newlines = this.#newlines + countNewlines(chunk);
      const text = this.text + chunk;
      // Lines as capHead counts them: a final newline does not start a line.
      const lines = text === "" ? 0 : newlines + (text.endsWith("\n") ? 0 : 1);
      if (bytes <= OUTPUT_LIMITS.maxBytes && lines <= OUTPUT_LIMITS.maxLines) {
        this.text = text;
        this.#bytes = bytes;
        this.#newlines = newlines;
      } else {
        // The first chunk past a limit: cut once, count the rest as dropped from now on.
        const cap = capHead(text);
        this.#full = true;
        this.#droppedBytes += cap.totalBytes - cap.shownBytes;
        this.#droppedLines += cap.totalLines - cap.shownLines;
        this.text = cap.head;
      }
    }
    this.#writer.mark();
  }

  stop(): Promise<void> {
    return this.#writer.stop();
  }
}

function countNewlines(text: string): number {
  let n = 0;
  for (let i = text.indexOf("\n"); i !== -1; i = text.indexOf("\n", i + 1)) n++;
  return n;
}
