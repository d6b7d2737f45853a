/**
 * What a tool call writes besides its task record: the pi.tool-result entry (exactly what the model
 * sees, harness diagnostics included), its slot in pi.live (pending -> running -> done, with the
 * durable partial output while running), and the bounds on its output (the tool's limits, limits.ts,
 * with a truncated diagnostic for what was dropped). Everything writes through the transaction given.
 */
import type { Tx } from "../../core/define.ts";
import type { DocPatch } from "../../core/doc-patch.ts";
import { assertJson, sealBuilt } from "../../core/persist.ts";
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

/**
 * A `pi.tool-result` entry: its model message and, in `data`, the call's diagnostics (spec §8.1),
 * the spend of a tool that used a model of its own, and, for a call that waited for a person, when
 * it waited and the decision (the trace export shows the wait from it: worker/app/trace.ts).
 */
export type ToolResultEntry = EntryRecord & {
  readonly kind: typeof ENTRY.toolResult;
  readonly data: {
    readonly diagnostics: readonly ToolDiagnostic[];
    readonly approval?: ToolApprovalRecord;
  };
};

/** A decided approval wait as its result keeps it: from `waitedSince` to `decidedAt`, and the decision. */
export interface ToolApprovalRecord {
  readonly waitedSince: number;
  readonly decidedAt: number;
  readonly decision: "approve" | "deny";
}

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
  // A call that waited for a person keeps when it waited and what was decided (not the reason: the
  // person's words are in the result the model reads), so its wait outlives the pi.live slot.
  const waited = live(tx, c).tools?.find((s) => s.callId === callId)?.approval;
  const approval = waited?.decision
    ? { waitedSince: waited.since, decidedAt: waited.decision.at, decision: waited.decision.decision }
    : undefined;
  const entry = tx.appendEntry(c, {
    kind: ENTRY.toolResult,
    model: [message] as unknown as Json,
    data: {
      diagnostics,
      ...(result.usage ? { usage: result.usage } : {}),
      ...(approval ? { approval } : {}),
    } as unknown as Json,
  });
  if (result.usage) addToolUsage(tx, c, name, result.usage);
  return entry;
}

/**
 * A harness-written error result (tool_unavailable, invalid_arguments, blocked, interrupted, aborted,
 * tool_error): its content is the durable partial output, its details the last reported ones, and
 * its diagnostics those the call recorded, then the harness's error (spec §7.3).
 */
export function toolResultEntry(
  tx: Tx,
  c: ConversationId,
  callId: string,
  name: string,
  message: string,
  code: string,
  partial: SlotPartial = {},
): EntryRecord {
  const content: ToolResult["content"] = partial.output ? [{ type: "text", text: partial.output }] : [];
  const result: ToolResult = {
    content,
    isError: true,
    ...(partial.details !== undefined ? { details: partial.details } : {}),
  };
  return appendResult(tx, c, callId, name, result, [
    ...(partial.diagnostics ?? []),
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
  // Built here: the list, and the patched slot (each patch returns a fresh literal over the committed
  // slot), are sealed without a walk; their members are checked as they are sealed.
  writeDoc<LiveState>(
    tx,
    c,
    DOC.live,
    sealBuilt({
      ...state,
      tools: sealBuilt(state.tools.map((s) => (s.taskId === taskId ? sealBuilt(patch(s)) : s))),
    }),
  );
}

/** What a running call reported so far: its retained output, and `api.details()` / `api.diagnostic()`. */
interface SlotProgress {
  readonly output: string;
  readonly droppedBytes: number;
  readonly droppedLines: number;
  /** Absent: no `details()` yet. */
  readonly details?: { readonly value: Json } | undefined;
  readonly diagnostics: readonly ToolDiagnostic[];
}

/**
 * Bring a running call's slot up to its progress so far as document patches: the text added since
 * the last write (or the whole text when the cut shortened it), the changed drop counts, and the
 * details and diagnostics when they changed. A progress commit thus stores what the tool printed
 * since the previous one, not everything it printed.
 */
function patchSlot(tx: Tx, c: ConversationId, taskId: TaskId, progress: SlotProgress): void {
  const { output, droppedBytes, droppedLines } = progress;
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
  if (progress.details && JSON.stringify(slot.details) !== JSON.stringify(progress.details.value))
    patches.push({ path: ["tools", index, "details"], set: progress.details.value });
  if (progress.diagnostics.length !== (slot.diagnostics?.length ?? 0))
    patches.push({ path: ["tools", index, "diagnostics"], set: [...progress.diagnostics] as Json });
  if (patches.length > 0) tx.patchDoc(c, DOC.live, patches);
}

/** What a call reported durably in its slot (output, details, diagnostics): an interrupted or aborted result carries it. */
export interface SlotPartial {
  readonly output?: string;
  readonly details?: Json;
  readonly diagnostics?: readonly ToolDiagnostic[];
}

export function slotDone(tx: Tx, c: ConversationId, taskId: TaskId, entry?: EntryId): void {
  updateSlot(
    tx,
    c,
    taskId,
    ({ output: _o, droppedBytes: _b, droppedLines: _l, details: _d, diagnostics: _g, ...s }) => ({
      ...s,
      status: "done",
      ...(entry !== undefined ? { entry } : {}),
    }),
  );
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

/** The severities a diagnostic may have (spec §7.3 ToolDiagnostic). */
const SEVERITIES = new Set(["info", "warn", "error"]);

/** `value` as a ToolDiagnostic (a copy), or a TypeError saying what is wrong with it. */
export function checkDiagnostic(value: unknown): ToolDiagnostic {
  const d = value as Partial<ToolDiagnostic> | null;
  if (!d || typeof d !== "object" || Array.isArray(d)) throw new TypeError("a diagnostic must be an object");
  if (!SEVERITIES.has(d.severity as string))
    throw new TypeError(
      `a diagnostic's severity must be info, warn or error, not ${JSON.stringify(d.severity)}`,
    );
  if (typeof d.message !== "string") throw new TypeError("a diagnostic's message must be text");
  if (d.code !== undefined && typeof d.code !== "string")
    throw new TypeError("a diagnostic's code must be text");
  return {
    severity: d.severity as ToolDiagnostic["severity"],
    message: d.message,
    ...(d.code !== undefined ? { code: d.code } : {}),
  };
}

/**
 * What a running call reports (spec §7.3): its output kept within its limits, its details
 * (`details()`: a complete JSON value replacing the last) and its diagnostics (`diagnostic()`),
 * committed to its slot, throttled. A `details()` promise settles once a commit carrying that value
 * (or a later one) is stored; the terminal commit settles those still pending (`settle`). Nothing
 * is accepted once the writer stopped.
 */
/** What a buffer that was never written to retains. */
const NOTHING_RETAINED: Retained = Object.freeze({ text: "", droppedBytes: 0, droppedLines: 0 });

export class OutputBuffer {
  /** Made at the first output: most calls stream none, and a window costs a few private fields. */
  #window: ReturnType<typeof outputWindow> | undefined;
  readonly #limits: OutputLimits;
  readonly #writer: ThrottledWriter;
  /** The output the last progress commit wrote: the next one writes only what changed since. */
  #written = "";
  #details: { value: Json } | undefined;
  readonly #diagnostics: ToolDiagnostic[] = [];
  /** `details()` calls whose value no stored commit carries yet. */
  #waiting: Array<{ resolve: () => void; reject: (error: unknown) => void }> = [];

  constructor(commit: (change: (tx: Tx) => undefined) => Promise<unknown>, options: OutputBufferOptions) {
    this.#limits = options.limits;
    const { conversationId, taskId } = options;
    this.#writer = new ThrottledWriter({
      intervalMs: options.intervalMs,
      bytesPerSecond: options.bytesPerSecond,
      write: () => {
        const { text: output, droppedBytes, droppedLines } = this.retained;
        const details = this.#details;
        const diagnostics = [...this.#diagnostics];
        const bytes =
          utf8Length(output.startsWith(this.#written) ? output.slice(this.#written.length) : output) +
          (details ? utf8Length(JSON.stringify(details.value)) : 0);
        this.#written = output;
        const carried = this.#waiting.splice(0);
        const done = commit((tx) => {
          patchSlot(tx, conversationId, taskId, { output, droppedBytes, droppedLines, details, diagnostics });
          return undefined;
        });
        done.then(
          () => {
            for (const w of carried) w.resolve();
          },
          // Not stored: a later commit (the next progress one, or the terminal one) carries it.
          () => this.#waiting.unshift(...carried),
        );
        return { bytes, done };
      },
    });
  }

  /** Replace the running details; resolves once a stored commit carries them (or a later value). */
  setDetails(value: Json): Promise<void> {
    if (this.#writer.stopped) throw new Error("details() after the call ended");
    assertJson(value);
    this.#details = { value: structuredClone(value) };
    const settled = new Promise<void>((resolve, reject) => this.#waiting.push({ resolve, reject }));
    // A tool need not await it: an abandoned call's rejection is not an unhandled one.
    settled.catch(() => undefined);
    this.#writer.mark();
    return settled;
  }

  /** Record a diagnostic in the slot with the next progress commit. */
  diagnostic(value: ToolDiagnostic): void {
    if (this.#writer.stopped) throw new Error("diagnostic() after the call ended");
    this.#diagnostics.push(checkDiagnostic(value));
    this.#writer.mark();
  }

  /** The last `details()` value, if any. */
  get details(): { readonly value: Json } | undefined {
    return this.#details;
  }

  /** The diagnostics recorded so far, in order. */
  get diagnostics(): readonly ToolDiagnostic[] {
    return this.#diagnostics;
  }

  /**
   * The call settled: pending `details()` promises resolve when its terminal commit was stored
   * (`error` undefined), else reject with `error`.
   */
  settle(error?: unknown): void {
    for (const w of this.#waiting.splice(0)) {
      if (error === undefined) w.resolve();
      else w.reject(error);
    }
  }

  /** The retained output so far, and what the limits dropped. */
  get retained(): Retained {
    return this.#window ? this.#window.retained() : NOTHING_RETAINED;
  }

  get text(): string {
    return this.retained.text;
  }

  append(chunk: string): void {
    if (this.#writer.stopped) throw new Error("output() after the call ended");
    this.#window ??= outputWindow(this.#limits);
    this.#window.append(chunk);
    this.#writer.mark();
  }

  stop(): Promise<void> {
    return this.#writer.stop();
  }
}
