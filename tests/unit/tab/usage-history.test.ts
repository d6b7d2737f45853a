/**
 * Usage over time in the tab (src/lib/usage-history.ts): the days asked for (the last N, ending
 * today in the person's zone), and the engine's rows laid out for the chart (a value per day and
 * model, zero where nothing was spent, stacked) and for the table (the same figures in words).
 */
import { describe, expect, test } from "vitest";
import {
  chartData,
  dayList,
  lastDays,
  rangeSummary,
  stacked,
  tableRows,
  today,
} from "../../../src/lib/usage-history.ts";
import type { UsageDays } from "../../../worker/protocol/index.ts";

const row = (day: string, model: string, input: number, output: number, cost: number) => ({
  day,
  model,
  input,
  output,
  cacheRead: 0,
  cacheWrite: 0,
  cost,
  requests: 1,
});

const answer: UsageDays = {
  timeZone: "Europe/Berlin",
  from: "2026-03-28",
  to: "2026-03-31",
  rows: [
    row("2026-03-28", "groq/llama", 100, 20, 0.01),
    row("2026-03-29", "groq/llama", 1000, 200, 0.1),
    row("2026-03-29", "openai/gpt", 10, 2, 0.5),
    row("2026-03-31", "openai/gpt", 1, 1, 0.25),
  ],
};

describe("the days asked for", () => {
  test("the last N days end today in the person's zone, across a month's end", () => {
    // 23:30 UTC on March 31 is already April 1 in Berlin, still March 31 in New York.
    const now = Date.parse("2026-03-31T23:30:00Z");
    expect(today("Europe/Berlin", now)).toBe("2026-04-01");
    expect(today("America/New_York", now)).toBe("2026-03-31");
    expect(lastDays("2026-04-01", 7)).toEqual({ from: "2026-03-26", to: "2026-04-01" });
    expect(lastDays("2026-04-01", 1)).toEqual({ from: "2026-04-01", to: "2026-04-01" });
    expect(dayList("2026-03-29", "2026-03-31")).toEqual(["2026-03-29", "2026-03-30", "2026-03-31"]);
  });
});

describe("the chart's data and the table", () => {
  test("a value for every day per model (zero on a quiet day), the costliest model first, stacked", () => {
    const data = chartData(answer);
    expect(data.days).toEqual(["2026-03-28", "2026-03-29", "2026-03-30", "2026-03-31"]);
    expect(data.series.map((s) => s.model)).toEqual(["openai/gpt", "groq/llama"]);
    expect(data.series[0]).toEqual({ model: "openai/gpt", tokens: [0, 12, 0, 2], cost: [0, 0.5, 0, 0.25] });
    expect(data.series[1]!.tokens).toEqual([120, 1200, 0, 0]);
    expect(data.totalTokens).toBe(1334);
    expect(data.totalCost).toBeCloseTo(0.86, 10);
    expect(stacked(data.series.map((s) => s.tokens))).toEqual([
      [0, 12, 0, 2],
      [120, 1212, 0, 2],
    ]);
    expect(rangeSummary(data, 30)).toBe("1.3k tokens · $0.86 in the last 30 days");
    expect(rangeSummary(chartData({ ...answer, rows: [] }), 7)).toBe("No usage in the last 7 days.");
  });

  test("the table says the same figures, newest day first, a row per model", () => {
    expect(tableRows(answer)).toEqual([
      { day: "2026-03-31", model: "openai/gpt", input: "1", output: "1", cache: "0", cost: "$0.25" },
      { day: "2026-03-29", model: "groq/llama", input: "1k", output: "200", cache: "0", cost: "$0.10" },
      { day: "2026-03-29", model: "openai/gpt", input: "10", output: "2", cache: "0", cost: "$0.50" },
      { day: "2026-03-28", model: "groq/llama", input: "100", output: "20", cache: "0", cost: "$0.01" },
    ]);
  });
});
