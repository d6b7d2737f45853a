/**
 * Usage roll-ups (spec §8.6, §12): sums of `pi.usage` documents, per provider/model and per tool.
 * Each conversation's spend is in its own pi.usage only (a tool that runs an owned conversation
 * reports none of the child's spend), so a sum over distinct conversations counts everything once:
 * a subagent's tokens appear under the child, and in its parent's roll-up only as the children's share.
 */
import type { ConversationId, ConversationRecord } from "../core/types.ts";
import { addUsage, type UsageState } from "./records.ts";

/** The sum of usage documents, per provider/model and per tool. */
export function sumUsage(states: Iterable<UsageState | undefined>): UsageState {
  const total: UsageState = { models: {}, tools: {} };
  for (const u of states) {
    if (!u) continue;
    for (const [m, usage] of Object.entries(u.models ?? {}))
      total.models[m] = total.models[m] ? addUsage(total.models[m], usage) : usage;
    for (const [t, usage] of Object.entries(u.tools ?? {}))
      total.tools[t] = total.tools[t] ? addUsage(total.tools[t], usage) : usage;
  }
  return total;
}

/** One conversation's spend, and that of the conversations its tasks own (subagents), each once. */
export interface UsageRollup {
  /** The conversation's own pi.usage: its model requests and its tools' own spend. */
  readonly own: UsageState;
  /** The conversations owned by its tasks, and by theirs, transitively (ids ascending). */
  readonly children: readonly ConversationId[];
  /** Their spend added up: the children's share. */
  readonly childrenUsage: UsageState;
  /** own + childrenUsage. */
  readonly total: UsageState;
}

/** The conversations owned, transitively, through tasks of `id`. */
export function ownedBelow(records: readonly ConversationRecord[], id: ConversationId): ConversationId[] {
  const below = new Set<ConversationId>();
  const frontier = [id];
  while (frontier.length > 0) {
    const c = frontier.pop()!;
    for (const r of records)
      if (r.owner?.conversationId === c && !below.has(r.id) && r.id !== id) {
        below.add(r.id);
        frontier.push(r.id);
      }
  }
  return [...below].sort((a, b) => a - b);
}

export function usageRollup(
  records: readonly ConversationRecord[],
  usageOf: (id: ConversationId) => UsageState | undefined,
  id: ConversationId,
): UsageRollup {
  const own = sumUsage([usageOf(id)]);
  const children = ownedBelow(records, id);
  const childrenUsage = sumUsage(children.map(usageOf));
  return { own, children, childrenUsage, total: sumUsage([own, childrenUsage]) };
}
