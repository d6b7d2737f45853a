/**
 * A tool's output limits (spec §7.3): at most `maxBytes` UTF-8 bytes and `maxLines` lines are
 * retained, from the start (`head`, the default) or from the end (`tail`). Streamed output and the
 * text of an explicit result are bounded alike; what was dropped is counted and reported to the model
 * as one `truncated` warning. Invariants: a streamed text, however it was chunked, retains exactly
 * what `retainText` retains of the whole; head retention is `capHead`'s; a tail is an exact slice of
 * the text's last lines (trailing newline included), or the end of one over-long last line cut on a
 * character boundary.
 */
import type { ToolDiagnostic } from "../records.ts";
import { utf8Length } from "../workspace/fs.ts";
import { capHead, OUTPUT_LIMITS } from "./contract.ts";

export interface OutputLimits {
  readonly maxBytes: number;
  readonly maxLines: number;
  readonly retain: "head" | "tail";
}

export const DEFAULT_OUTPUT_LIMITS: OutputLimits = { ...OUTPUT_LIMITS, retain: "head" };

/** A tool's limits over the defaults (50 KiB, 2,000 lines, head). */
export function limitsOf(tool: { readonly outputLimits?: Partial<OutputLimits> } | undefined): OutputLimits {
  return { ...DEFAULT_OUTPUT_LIMITS, ...(tool?.outputLimits ?? {}) };
}

/** What bounding kept of a text, and what it dropped. */
export interface Retained {
  readonly text: string;
  readonly droppedBytes: number;
  readonly droppedLines: number;
}

/** Lines as the limits count them: a final newline does not start a line. */
function lineCount(text: string, newlines: number): number {
  return text === "" ? 0 : newlines + (text.endsWith("\n") ? 0 : 1);
}

function countNewlines(text: string): number {
  let n = 0;
  for (let i = text.indexOf("\n"); i !== -1; i = text.indexOf("\n", i + 1)) n++;
  return n;
}

/** The longest suffix of `text` of at most `maxBytes` UTF-8 bytes that does not split a character. */
function suffixWithinBytes(text: string, maxBytes: number): string {
  let bytes = 0;
  let i = text.length;
  while (i > 0) {
    const c = text.charCodeAt(i - 1);
    let width = 1;
    let units = 1;
    if (c >= 0xdc00 && c <= 0xdfff && i > 1) {
      const high = text.charCodeAt(i - 2);
      if (high >= 0xd800 && high <= 0xdbff) {
        width = 4;
        units = 2;
      } else width = 3;
    } else if (c >= 0x800) width = 3;
    else if (c >= 0x80) width = 2;
    if (bytes + width > maxBytes) break;
    bytes += width;
    i -= units;
  }
  return text.slice(i);
}

/** What `limits` retain of `text`. */
export function retainText(text: string, limits: OutputLimits): Retained {
  if (limits.retain === "head") {
    const cap = capHead(text, limits);
    return {
      text: cap.head,
      droppedBytes: cap.totalBytes - cap.shownBytes,
      droppedLines: cap.totalLines - cap.shownLines,
    };
  }
  const tail = new TailWindow(limits);
  tail.append(text);
  return tail.retained();
}

/**
 * A sliding window over streamed text that keeps its end within the limits: whole lines leave the
 * front as later text arrives, so an append costs its chunk plus what it pushes out.
 */
class TailWindow {
  #text = "";
  #bytes = 0;
  #newlines = 0;
  #droppedBytes = 0;
  #droppedLines = 0;

  constructor(readonly limits: OutputLimits) {}

  append(chunk: string): void {
    this.#text += chunk;
    this.#bytes += utf8Length(chunk);
    this.#newlines += countNewlines(chunk);
    this.#trim();
  }

  #trim(): void {
    const { maxBytes, maxLines } = this.limits;
    let start = 0;
    let lines = lineCount(this.#text, this.#newlines);
    // Drop whole lines from the front while over a limit and a later line remains.
    while (lines > maxLines || this.#bytes > maxBytes) {
      const end = this.#text.indexOf("\n", start);
      if (end === -1 || end === this.#text.length - 1) break;
      const dropped = this.#text.slice(start, end + 1);
      this.#bytes -= utf8Length(dropped);
      this.#newlines--;
      this.#droppedBytes += utf8Length(dropped);
      this.#droppedLines++;
      lines--;
      start = end + 1;
    }
    if (start > 0) this.#text = this.#text.slice(start);
    // One line left and still over the byte limit: keep its end.
    if (this.#bytes > maxBytes) {
      const kept = suffixWithinBytes(this.#text, maxBytes);
      const keptBytes = utf8Length(kept);
      this.#droppedBytes += this.#bytes - keptBytes;
      this.#bytes = keptBytes;
      this.#text = kept;
    }
  }

  retained(): Retained {
    return { text: this.#text, droppedBytes: this.#droppedBytes, droppedLines: this.#droppedLines };
  }
}

/** A head window: text is kept until the first chunk past a limit, which is cut once; the rest is counted. */
class HeadWindow {
  #text = "";
  #bytes = 0;
  #newlines = 0;
  #droppedBytes = 0;
  #droppedLines = 0;
  #full = false;

  constructor(readonly limits: OutputLimits) {}

  append(chunk: string): void {
    if (this.#full) {
      this.#droppedBytes += utf8Length(chunk);
      this.#droppedLines += countNewlines(chunk);
      return;
    }
    const bytes = this.#bytes + utf8Length(chunk);
    const newlines = this.#newlines + countNewlines(chunk);
    const text = this.#text + chunk;
    if (bytes <= this.limits.maxBytes && lineCount(text, newlines) <= this.limits.maxLines) {
      this.#text = text;
      this.#bytes = bytes;
      this.#newlines = newlines;
      return;
    }
    // The first chunk past a limit: cut once, count the rest as dropped from now on.
    const cap = capHead(text, this.limits);
    this.#full = true;
    this.#droppedBytes += cap.totalBytes - cap.shownBytes;
    this.#droppedLines += cap.totalLines - cap.shownLines;
    this.#text = cap.head;
  }

  retained(): Retained {
    return { text: this.#text, droppedBytes: this.#droppedBytes, droppedLines: this.#droppedLines };
  }
}

/** Streamed output bounded as it arrives, head or tail as the limits say. */
export function outputWindow(limits: OutputLimits): {
  append(chunk: string): void;
  retained(): Retained;
} {
  return limits.retain === "tail" ? new TailWindow(limits) : new HeadWindow(limits);
}

/** The `warn` diagnostic saying what bounding dropped, or undefined when nothing was. */
export function truncatedDiagnostic(
  dropped: { droppedBytes: number; droppedLines: number },
  limits: OutputLimits,
): ToolDiagnostic | undefined {
  if (dropped.droppedBytes === 0 && dropped.droppedLines === 0) return undefined;
  const counts = `${dropped.droppedLines} lines and ${dropped.droppedBytes} bytes`;
  const bounds = `(limits ${limits.maxLines} lines, ${formatBytes(limits.maxBytes)})`;
  const message =
    limits.retain === "tail"
      ? `output truncated to its end: ${counts} before it not shown ${bounds}`
      : `output truncated: ${counts} not shown ${bounds}`;
  return { severity: "warn", code: "truncated", message };
}

function formatBytes(bytes: number): string {
  return bytes % 1024 === 0 ? `${bytes / 1024} KiB` : `${bytes} bytes`;
}
