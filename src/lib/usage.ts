/**
 * Usage and cost in words: totals of a `pi.usage` document (model spend plus tools' own spend),
 * a conversation's line with its subagents' share, and short token and money figures. Pure, so the tab's display is tested without a browser.
 */
import type { Usage, UsageRollup, UsageState } from "../../worker/protocol/index.ts";

export interface UsageTotals {
  readonly input: number;
  readonly output: number;
  readonly cacheRead: number;
  readonly cacheWrite: number;
  readonly cost: number;
  /** Per provider/model and per tool that spent anything, largest cost (then tokens) first. */
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
    // A failed attempt records a row of zeros: it is no spend, and no usage line shows for it.
    if (u.input + u.output + u.cacheRead + u.cacheWrite === 0 && u.cost.total === 0) return;
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

/** Two sets of totals added up (their rows side by side, the costliest first). */
export function addTotals(a: UsageTotals, b: UsageTotals): UsageTotals {
  return {
    input: a.input + b.input,
    output: a.output + b.output,
    cacheRead: a.cacheRead + b.cacheRead,
    cacheWrite: a.cacheWrite + b.cacheWrite,
    cost: a.cost + b.cost,
    rows: [...a.rows, ...b.rows].sort((x, y) => y.cost - x.cost || y.tokens - x.tokens),
  };
}

/** What the composer's usage line says: this conversation's figures, and with its subagents' share. */
export interface RollupSummary {
  readonly own: string;
  /** Only once the conversation has run subagents (its tasks own conversations). */
  readonly withSubagents?: string;
}

/**
 * The usage line of a conversation from its own totals (live, from its pi.usage document) and the
 * engine's roll-up (`conversationUsage`): with subagents, their share is added to the live figures
 * (the roll-up's own part may be older than the document). Without subagents, just its own line.
 */
export function rollupSummary(own: UsageTotals, rollup: UsageRollup | undefined): RollupSummary {
  const line = usageLine(own);
  if (!rollup || rollup.children.length === 0) return { own: line };
  return { own: line, withSubagents: usageLine(addTotals(own, usageTotals(rollup.childrenUsage))) };
}
