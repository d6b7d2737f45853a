/**
 * Usage and cost in words: totals of a `pi.usage` document (model spend plus tools' own spend) and
 * short token and money figures. Pure, so the tab's display is tested without a browser.
 */
import type { Usage, UsageState } from "../../worker/protocol.ts";

export interface UsageTotals {
  readonly input: number;
  readonly output: number;
  readonly cacheRead: number;
  readonly cacheWrite: number;
  readonly cost: number;
  /** Per provider/model and per tool, largest cost (then tokens) first. */
  readonly rows: readonly { readonly label: string; readonly tokens: number; readonly cost: number }[];
}

export function usageTotals(state: UsageState): UsageTotals {
  let input = 0;
  let output = 0;
  let cacheRead = 0;
  let cacheWrite = 0;
  let cost = 0;
  const rows: { label: string; tokens: number; cost: number }[] = [];
  const add = (label: string, u: Usage) => {
    input += u.input;
    output += u.output;
    cacheRead += u.cacheRead;
    cacheWrite += u.cacheWrite;
    cost += u.cost.total;
    rows.push({ label, tokens: u.input + u.output + u.cacheRead + u.cacheWrite, cost: u.cost.total });
  };
  for (const [model, u] of Object.entries(state.models)) add(model, u);
  for (const [tool, u] of Object.entries(state.tools)) add(`tool ${tool}`, u);
  rows.sort((a, b) => b.cost - a.cost || b.tokens - a.tokens);
  return { input, output, cacheRead, cacheWrite, cost, rows };
}

/** 950, 1.2k, 34k, 1.5M. */
export function formatTokens(n: number): string {
  if (n < 1000) return String(n);
  if (n < 10_000) return `${(n / 1000).toFixed(1).replace(/\.0$/, "")}k`;
  if (n < 1_000_000) return `${Math.round(n / 1000)}k`;
  return `${(n / 1_000_000).toFixed(1).replace(/\.0$/, "")}M`;
}

/** $0, <$0.01, $0.42, $12.30 (US dollars, as the model catalogue prices are). */
export function formatCost(dollars: number): string {
  if (dollars === 0) return "$0";
  if (dollars < 0.01) return "<$0.01";
  return `$${dollars.toFixed(2)}`;
}

/** One line: "12k in · 1.1k out · 4k cached · $0.02". */
export function usageLine(t: UsageTotals): string {
  const parts = [`${formatTokens(t.input)} in`, `${formatTokens(t.output)} out`];
  if (t.cacheRead + t.cacheWrite > 0) parts.push(`${formatTokens(t.cacheRead + t.cacheWrite)} cached`);
  parts.push(formatCost(t.cost));
  return parts.join(" · ");
}
