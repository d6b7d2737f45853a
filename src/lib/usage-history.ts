/**
 * Usage over time for the tab: which days to ask the engine for (the last N days, ending today in
 * the person's time zone), and its answer (`usage.days`: rows per day and model) laid out as what
 * the chart draws (one series per model, a value for every day, zero on a day without spend,
 * stacked) and as the table that says the same figures in words. Pure: tested without a browser.
 */
import type { UsageDayRow, UsageDays } from "../../worker/protocol/index.ts";
import { formatCost, formatTokens } from "./usage.ts";

/** The ranges a person picks from, in days. */
export const USAGE_RANGES = [7, 30, 90, 365] as const;
export type UsageRange = (typeof USAGE_RANGES)[number];

const DAY_MS = 86_400_000;

/** The tab's IANA time zone ("UTC" when the browser names none). */
export function localTimeZone(): string {
  return Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
}

/** Today (`YYYY-MM-DD`) in `timeZone` at `now`. */
export function today(timeZone: string, now = Date.now()): string {
  const parts: Record<string, string> = {};
  const format = new Intl.DateTimeFormat("en-US", {
    timeZone,
    year: "numeric",
    month: "2-digit",
    day: "2-digit",
    calendar: "gregory",
    numberingSystem: "latn",
  });
  for (const p of format.formatToParts(now)) parts[p.type] = p.value;
  return `${parts["year"]}-${parts["month"]}-${parts["day"]}`;
}

const utc = (day: string) => Date.parse(`${day}T00:00:00Z`);
const dayOf = (ms: number) => new Date(ms).toISOString().slice(0, 10);

/** The `count` days ending on `last`, as a query's from and to. */
export function lastDays(last: string, count: number): { from: string; to: string } {
  return { from: dayOf(utc(last) - (count - 1) * DAY_MS), to: last };
}

/** Every day from `from` to `to`, both included. */
export function dayList(from: string, to: string): string[] {
  const out: string[] = [];
  for (let at = utc(from); at <= utc(to); at += DAY_MS) out.push(dayOf(at));
  return out;
}

const tokensOf = (r: UsageDayRow) => r.input + r.output + r.cacheRead + r.cacheWrite;

/** One model's figures, a value per day of the range. */
export interface UsageSeries {
  readonly model: string;
  readonly tokens: readonly number[];
  readonly cost: readonly number[];
}

export interface UsageChartData {
  readonly days: readonly string[];
  /** The costliest model first (then the most tokens). */
  readonly series: readonly UsageSeries[];
  readonly totalTokens: number;
  readonly totalCost: number;
}

export function chartData(answer: UsageDays): UsageChartData {
  const days = dayList(answer.from, answer.to);
  const index = new Map(days.map((d, i) => [d, i]));
  const byModel = new Map<string, { tokens: number[]; cost: number[] }>();
  for (const r of answer.rows) {
    const i = index.get(r.day);
    if (i === undefined) continue;
    let s = byModel.get(r.model);
    if (!s) byModel.set(r.model, (s = { tokens: days.map(() => 0), cost: days.map(() => 0) }));
    s.tokens[i]! += tokensOf(r);
    s.cost[i]! += r.cost;
  }
  const sum = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0);
  const series = [...byModel.entries()]
    .map(([model, s]) => ({ model, ...s }))
    .sort(
      (a, b) => sum(b.cost) - sum(a.cost) || sum(b.tokens) - sum(a.tokens) || (a.model < b.model ? -1 : 1),
    );
  return {
    days,
    series,
    totalTokens: sum(series.map((s) => sum(s.tokens))),
    totalCost: sum(series.map((s) => sum(s.cost))),
  };
}

/** Each series' values with those before it added (the top of its bar in a stacked chart). */
export function stacked(values: readonly (readonly number[])[]): number[][] {
  const out: number[][] = [];
  for (const [i, v] of values.entries()) out.push(v.map((x, j) => x + (i > 0 ? out[i - 1]![j]! : 0)));
  return out;
}

/** A table row: a day and model with spend, in words. */
export interface UsageTableRow {
  readonly day: string;
  readonly model: string;
  readonly input: string;
  readonly output: string;
  readonly cache: string;
  readonly cost: string;
}

/** The days with spend, newest first, a row per model; the same figures as the chart. */
export function tableRows(answer: UsageDays): UsageTableRow[] {
  return [...answer.rows]
    .sort((a, b) => (a.day === b.day ? (a.model < b.model ? -1 : 1) : a.day < b.day ? 1 : -1))
    .map((r) => ({
      day: r.day,
      model: r.model,
      input: formatTokens(r.input),
      output: formatTokens(r.output),
      cache: formatTokens(r.cacheRead + r.cacheWrite),
      cost: formatCost(r.cost),
    }));
}

/** "1.2k tokens · $0.42 in the last 30 days" (or that there was no spend). */
export function rangeSummary(data: UsageChartData, range: number): string {
  if (data.totalTokens === 0 && data.totalCost === 0) return `No usage in the last ${range} days.`;
  return `${formatTokens(data.totalTokens)} tokens · ${formatCost(data.totalCost)} in the last ${range} days`;
}
