/**
 * What the bench suites print with: tables with aligned columns, medians and percentiles, numbers,
 * and the machine's load averages (on a shared machine figures move with the load, so every table
 * taken there says what the load was).
 */
import { execFileSync } from "node:child_process";

/** The machine's load averages (`uptime`), to print beside timings taken on a shared machine. */
export function machineLoad(): string {
  try {
    return execFileSync("uptime", { encoding: "utf8" })
      .trim()
      .replace(/^.*load averages?:\s*/, "");
  } catch {
    return "unknown";
  }
}

/** Print `rows` (the first one the header) with aligned columns: the first left, the rest right. */
export function table(rows: string[][]): void {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? "").length)));
  const line = (row: string[]) =>
    row.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ");
  console.log(line(rows[0]!));
  console.log(widths.map((w) => "-".repeat(w)).join("  "));
  for (const row of rows.slice(1)) console.log(line(row));
}

export const median = (values: readonly number[]): number => percentile(values, 50);

/** The `p`th percentile (nearest rank; the median of an even count is the mean of the middle two). */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  if (p === 50) {
    const mid = sorted.length >> 1;
    return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
  }
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

export const fmt = (n: number, digits = 0): string =>
  n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
