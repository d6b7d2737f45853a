/** Usage and cost in words (src/lib/usage.ts): totals of a pi.usage document and short figures. */
import { describe, expect, test } from "vitest";
import { formatCost, formatTokens, rollupSummary, usageLine, usageTotals } from "../../../src/lib/usage.ts";
import type { Usage, UsageRollup, UsageState } from "../../../worker/protocol/index.ts";

const spend = (input: number, output: number, cost: number, cacheRead = 0): Usage => ({
  input,
  output,
  cacheRead,
  cacheWrite: 0,
  totalTokens: input + output + cacheRead,
  cost: { input: cost / 2, output: cost / 2, cacheRead: 0, cacheWrite: 0, total: cost },
});

describe("usageTotals", () => {
  test("models and tools' own spend add up; rows list each, the costliest first", () => {
    const t = usageTotals({
      models: { "openai/gpt-x": spend(1000, 200, 0.05, 300), "demo/demo-1": spend(10, 5, 0) },
      tools: { subagent: spend(500, 100, 0.2) },
    });
    expect([t.input, t.output, t.cacheRead, t.cacheWrite]).toEqual([1510, 305, 300, 0]);
    expect(t.cost).toBeCloseTo(0.25);
    expect(t.rows.map((r) => r.label)).toEqual(["tool subagent", "openai/gpt-x", "demo/demo-1"]);
    expect(t.rows[1]).toEqual({ label: "openai/gpt-x", tokens: 1500, cost: 0.05 });
  });

  test("a model that spent nothing yet (a failed attempt's zeros) has no row: no usage line shows", () => {
    const t = usageTotals({ models: { "groq/llama": spend(0, 0, 0) }, tools: { read: spend(0, 0, 0) } });
    expect(t.rows).toEqual([]);
    const some = usageTotals({
      models: { "groq/llama": spend(0, 0, 0), "demo/demo-1": spend(10, 5, 0) },
      tools: {},
    });
    expect(some.rows.map((r) => r.label)).toEqual(["demo/demo-1"]);
  });

  test("an empty document has no rows and zero totals", () => {
    const t = usageTotals({ models: {}, tools: {} });
    expect(t.rows).toEqual([]);
    expect(usageLine(t)).toBe("0 in · 0 out · $0");
  });
});

describe("figures", () => {
  test("tokens read short: 950, 1.2k, 10k, 34k, 1.5M", () => {
    expect([950, 1200, 1000, 10_400, 34_400, 1_500_000, 2_000_000].map(formatTokens)).toEqual([
      "950",
      "1.2k",
      "1k",
      "10k",
      "34k",
      "1.5M",
      "2M",
    ]);
  });

  test("cost in dollars: $0, <$0.01, cents", () => {
    expect([0, 0.004, 0.42, 12.3].map(formatCost)).toEqual(["$0", "<$0.01", "$0.42", "$12.30"]);
  });

  test("the line names cache only when some was used", () => {
    const line = usageLine(usageTotals({ models: { m: spend(12_000, 1100, 0.02, 4000) }, tools: {} }));
    expect(line).toBe("12k in · 1.1k out · 4k cached · $0.02");
  });
});

describe("rollupSummary", () => {
  const own: UsageState = { models: { "openai/gpt-x": spend(1000, 200, 0.05) }, tools: {} };
  const child: UsageState = { models: { "openai/gpt-x": spend(3000, 800, 0.1) }, tools: {} };
  const rollup = (children: number[], childrenUsage: UsageState): UsageRollup => ({
    own,
    children,
    childrenUsage,
    total: { models: {}, tools: {} },
  });

  test("without subagents: this conversation's line only", () => {
    expect(rollupSummary(usageTotals(own), undefined)).toEqual({ own: "1k in · 200 out · $0.05" });
    expect(rollupSummary(usageTotals(own), rollup([], { models: {}, tools: {} }))).toEqual({
      own: "1k in · 200 out · $0.05",
    });
  });

  test("with subagents: their share added to the live figures of this conversation", () => {
    // The live document has grown since the roll-up was read: the live figures count.
    const live: UsageState = { models: { "openai/gpt-x": spend(2000, 400, 0.07) }, tools: {} };
    expect(rollupSummary(usageTotals(live), rollup([4, 5], child))).toEqual({
      own: "2k in · 400 out · $0.07",
      withSubagents: "5k in · 1.2k out · $0.17",
    });
  });
});
