/**
 * Comparing transcripts across runs (a crash sweep's runs, a replay against its original): an entry
 * reduced to what a user could compare, without ids, timestamps, durations, usage estimates,
 * provider response ids or when an approval wait began and was decided (a tool result's
 * `data.approval`), which legitimately differ from run to run.
 */
import type { EntryRecord } from "../core/types.ts";

const VOLATILE = new Set(["timestamp", "durationMs", "usage", "responseId", "waitedSince", "decidedAt"]);

function strip(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(strip);
  if (value && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) if (!VOLATILE.has(k)) out[k] = strip(v);
    return out;
  }
  return value;
}

/** The entry's kind, model messages and data, with the run-dependent fields removed. */
export function comparableEntry(e: EntryRecord): unknown {
  return { kind: e.kind, model: strip(e.model), data: strip(e.data) };
}
