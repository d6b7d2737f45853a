/**
 * How the chat words a tool call: its status from the live slot and the committed result (the
 * harness's diagnostic codes become words, never the raw `<harness>` block), its arguments
 * pretty-printed, and the result's text without the harness block. Pure functions of protocol data.
 */
import type { ToolSlot } from "../../worker/protocol/index.ts";

export type ToolStatus =
  | "queued"
  | "awaiting approval"
  | "running"
  | "done"
  | "failed"
  | "interrupted"
  | "aborted"
  | "blocked"
  | "refused"
  | "denied"
  | "moved";

/** What a call's card shows of its state: the status and, while it runs, its live output. */
export type CallState = (callId: string) => { status: ToolStatus; output?: string | undefined };

export interface Diagnostic {
  readonly severity: string;
  readonly message: string;
  readonly code?: string;
}

/** The diagnostics a pi.tool-result entry's data carries (an empty list when it has none). */
export function diagnosticsOf(data: unknown): Diagnostic[] {
  if (typeof data !== "object" || data === null) return [];
  const list = (data as { diagnostics?: unknown }).diagnostics;
  if (!Array.isArray(list)) return [];
  return list.filter(
    (d): d is Diagnostic =>
      typeof d === "object" && d !== null && typeof (d as Diagnostic).message === "string",
  );
}

const BY_CODE: Record<string, ToolStatus> = {
  aborted: "aborted",
  interrupted: "interrupted",
  blocked: "blocked",
  invalid_arguments: "refused",
  tool_unavailable: "refused",
  denied: "denied",
  not_allowed: "refused",
};

/**
 * The status of a call: from its committed result when there is one, else from its live slot; a
 * call with neither once the run has ended (its message was cut off) never ran: interrupted; in a
 * conversation that moved to another home (`moved`), it went on there: moved.
 */
export function toolStatus(
  result: { isError: boolean; diagnostics: readonly Diagnostic[] } | undefined,
  slot: Pick<ToolSlot, "status"> | undefined,
  options: { runLive: boolean; moved?: boolean } = { runLive: true },
): ToolStatus {
  if (result) {
    for (const d of result.diagnostics) {
      const status = d.code ? BY_CODE[d.code] : undefined;
      if (status) return status;
    }
    return result.isError ? "failed" : "done";
  }
  if (slot === undefined && options.moved) return "moved";
  if (slot === undefined && !options.runLive) return "interrupted";
  // A slot marked done is still running until its result entry commits.
  if (slot?.status === "awaiting_approval") return "awaiting approval";
  return slot === undefined || slot.status === "pending" ? "queued" : "running";
}

const HARNESS = /\n?<harness>\n[\s\S]*?\n<\/harness>\s*$/;

/** A result's text without the harness's trailing diagnostics block (shown as words instead). */
export function withoutHarness(text: string): string {
  return text.replace(HARNESS, "");
}

/**
 * Arguments as name/value pairs for display: a string value as it is (its line breaks real, not
 * `\n`), anything else as indented JSON. Arguments that are not an object show as one JSON value.
 */
export function formatArgs(args: unknown): { name: string; value: string }[] {
  if (args === undefined) return [];
  if (typeof args !== "object" || args === null || Array.isArray(args))
    return [{ name: "arguments", value: JSON.stringify(args, null, 2) ?? String(args) }];
  return Object.entries(args).map(([name, v]) => ({
    name,
    value: typeof v === "string" ? v : (JSON.stringify(v, null, 2) ?? String(v)),
  }));
}
