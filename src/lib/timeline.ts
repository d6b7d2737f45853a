/**
 * The timeline view's pure parts (components/Timeline.svelte): a page of bars laid out as rows
 * (nested by ownership, depth first, each parent before what it owns, siblings by start), each
 * row's place on the axis in percent of the range, the axis's ticks, and the words a bar is named
 * by (its label, outcome, duration, tokens and cost: never colour alone). Invariants: every bar of
 * the page is in exactly one row (a bar whose parent is not on the page is a root); a row's left
 * and width stay within 0-100; a live bar ends at the page's `now`.
 */
import {
  type BarOutcome,
  type EntryRecord,
  modelMessages,
  type TimelineBar,
  type TimelinePage,
} from "../../worker/protocol/index.ts";

export interface TimelineRow {
  readonly bar: TimelineBar;
  readonly depth: number;
  /** Percent of the range from its start. */
  readonly left: number;
  /** Percent of the range (0 for an instant; the view gives it a minimum width). */
  readonly width: number;
}

const clamp = (x: number) => Math.max(0, Math.min(100, x));

/** The page's bars as rows: depth first by ownership, siblings by start. */
export function layoutRows(page: Pick<TimelinePage, "bars" | "from" | "to" | "now">): TimelineRow[] {
  const span = Math.max(1, page.to - page.from);
  const ids = new Set(page.bars.map((b) => b.id));
  const children = new Map<string | undefined, TimelineBar[]>();
  for (const bar of page.bars) {
    const parent = bar.parent !== undefined && ids.has(bar.parent) ? bar.parent : undefined;
    const list = children.get(parent) ?? [];
    list.push(bar);
    children.set(parent, list);
  }
  for (const list of children.values()) list.sort((a, b) => a.start - b.start || a.taskId - b.taskId);
  const rows: TimelineRow[] = [];
  const seen = new Set<string>();
  const visit = (bar: TimelineBar, depth: number) => {
    if (seen.has(bar.id)) return;
    seen.add(bar.id);
    const end = bar.end ?? page.now;
    const left = clamp(((bar.start - page.from) / span) * 100);
    const right = clamp(((end - page.from) / span) * 100);
    rows.push({ bar, depth, left, width: Math.max(0, right - left) });
    for (const child of children.get(bar.id) ?? []) visit(child, depth + 1);
  };
  for (const root of children.get(undefined) ?? []) visit(root, 0);
  return rows;
}

/** What an outcome is called (beside its colour and its symbol). */
export const OUTCOME_WORDS: Record<BarOutcome, string> = {
  ok: "ok",
  error: "error",
  aborted: "stopped",
  interrupted: "interrupted",
  running: "running",
  waiting: "waiting",
};

/** A symbol per outcome, so the picture does not rely on colour alone. */
export const OUTCOME_SYMBOL: Record<BarOutcome, string> = {
  ok: "✓",
  error: "✕",
  aborted: "■",
  interrupted: "!",
  running: "▶",
  waiting: "…",
};

/** "850 ms", "4.2 s", "3 min 5 s", "2 h 4 min". */
export function duration(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.round(ms))} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.round(ms / 1000);
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

/** "1,234 tokens · $0.0031" (no cost part when the cost is 0). */
export function usageWords(usage: TimelineBar["usage"]): string | undefined {
  if (!usage) return undefined;
  const tokens = `${usage.total.toLocaleString("en-US")} tokens (${usage.input.toLocaleString("en-US")} in, ${usage.output.toLocaleString("en-US")} out)`;
  return usage.cost > 0
    ? `${tokens} · $${usage.cost < 0.01 ? usage.cost.toFixed(4) : usage.cost.toFixed(2)}`
    : tokens;
}

/** A bar's accessible name: what it is, its outcome, how long, its usage. */
export function barName(bar: TimelineBar, now: number): string {
  const took = duration((bar.end ?? now) - bar.start);
  const usage = usageWords(bar.usage);
  return `${bar.label}: ${OUTCOME_WORDS[bar.outcome]}, ${bar.end === undefined ? `for ${took} so far` : took}${usage ? `, ${usage}` : ""}`;
}

/** About `count` round ticks across `[from, to)`, as offsets from `from` with their words. */
export function ticks(from: number, to: number, count = 4): { left: number; words: string }[] {
  const span = Math.max(1, to - from);
  const steps = [
    1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000,
    600_000, 1_800_000, 3_600_000, 7_200_000, 21_600_000, 43_200_000, 86_400_000,
  ];
  const step = steps.find((s) => span / s <= count) ?? Math.ceil(span / count);
  const out: { left: number; words: string }[] = [];
  for (let t = 0; t <= span; t += step)
    out.push({ left: (t / span) * 100, words: t === 0 ? "0" : `+${duration(t)}` });
  return out;
}

/** A narrower range around `center` (half as long), or a wider one (twice), within `[min, max]`. */
export function zoom(
  range: { from: number; to: number },
  factor: number,
  bounds: { min: number; max: number },
  center = (range.from + range.to) / 2,
): { from: number; to: number } {
  const length = Math.max(50, (range.to - range.from) * factor);
  let from = center - length / 2;
  let to = center + length / 2;
  if (from < bounds.min) {
    to += bounds.min - from;
    from = bounds.min;
  }
  if (to > bounds.max) {
    from = Math.max(bounds.min, from - (to - bounds.max));
    to = bounds.max;
  }
  return { from: Math.floor(from), to: Math.ceil(to) };
}

/** One line for an entry in a bar's detail: who said what (cut short), or which tool returned what. */
export function entryLine(entry: EntryRecord): { who: string; text: string } {
  const m = modelMessages(entry)[0];
  const short = (t: string) => (t.length > 240 ? `${t.slice(0, 239)}…` : t);
  if (!m) return { who: entry.kind, text: "" };
  if (m.role === "user") {
    const text =
      typeof m.content === "string"
        ? m.content
        : m.content.flatMap((c) => (c.type === "text" ? [c.text] : [])).join(" ");
    return { who: "You", text: short(text) };
  }
  if (m.role === "assistant") {
    const parts = m.content.flatMap((c) =>
      c.type === "text"
        ? [c.text]
        : c.type === "toolCall"
          ? [`calls ${c.name} ${JSON.stringify(c.arguments)}`]
          : [],
    );
    return {
      who: m.stopReason === "error" ? "The model (failed)" : "The model",
      text: short(parts.join(" · ") || (m.errorMessage ?? "")),
    };
  }
  const text = m.content
    .flatMap((c) => (c.type === "text" ? [c.text] : []))
    .join(" ")
    .replace(/<harness>[\s\S]*?<\/harness>/g, "")
    .trim();
  return { who: `${m.toolName} tool${m.isError ? " (error)" : ""}`, text: short(text) };
}
