/**
 * What a compaction summarizes (spec §8.7), as pure functions of the active range: a token
 * estimate, the cut that keeps about `keepRecentTokens` of the newest entries, and the text the
 * summarizer reads.
 */
import type { AssistantMessage, Message } from "@mariozechner/pi-ai";
import type { EntryId, EntryRecord } from "../../core/types.ts";
import { rangeContributions } from "../conversation/context.ts";
import { ENTRY } from "../records.ts";

/** The summarizer's system prompt (also how the demo model tells a summary request apart). */
export const SUMMARY_SYSTEM_PROMPT =
  "You summarize conversations between a user and a coding assistant so the assistant can continue the work with only the summary. Keep decisions, facts, file names, open tasks and the user's preferences; drop chatter.";

/** Tool results are cut to this many characters in the text sent to the summarizer. */
const TOOL_RESULT_CHARS = 2000;

/** A rough token count (about four characters a token), the same for every message kind. */
export function estimateMessageTokens(message: Message): number {
  let chars = 0;
  const content = message.content as unknown;
  if (typeof content === "string") chars = content.length;
  else
    for (const block of content as Array<Record<string, unknown>>) {
      if (typeof block["text"] === "string") chars += block["text"].length;
      else if (typeof block["thinking"] === "string") chars += block["thinking"].length;
      else if (block["type"] === "toolCall") chars += JSON.stringify(block["arguments"] ?? {}).length + 16;
      else chars += 1000; // an image
    }
  return Math.ceil(chars / 4);
}

/**
 * Where to cut the active range so that about `keepRecentTokens` stay (spec §8.7), read from each
 * entry's contribution (its messages after the range's edits, without failed answers): walking the
 * non-marker entries from the newest, the first entry where the sum reaches the budget; the cut is
 * the first candidate (an entry whose messages begin with a user or assistant message, not a user
 * entry between a call and its result) at or after it, else the newest candidate. Undefined when
 * there is nothing to compact.
 */
export function selectCut(range: readonly EntryRecord[], keepRecentTokens: number): EntryId | undefined {
  // Each entry's contribution (after the range's edits, without failed answers), not its raw messages.
  const all = rangeContributions(range);
  const contributed = new Map(range.map((e, i) => [e, all[i]!]));
  const contributionOf = (e: EntryRecord): Message[] => contributed.get(e) ?? [];
  const entries = range.filter((e) => e.head === undefined);
  const candidates = new Set<EntryId>();
  for (const e of entries) {
    const first = e.kind === ENTRY.system ? undefined : contributionOf(e)[0];
    if (first?.role === "assistant" || first?.role === "user") candidates.add(e.id);
  }
  // A user entry followed by a result of the preceding assistant's call is not a cut point.
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i]!;
    if (!candidates.has(e.id) || contributionOf(e)[0]?.role !== "user") continue;
    const before = entries
      .slice(0, i)
      .reverse()
      .find((p) => contributionOf(p)[0]?.role === "assistant");
    const calls = new Set(
      (before ? (contributionOf(before)[0] as AssistantMessage).content : [])
        .filter((b) => b.type === "toolCall")
        .map((b) => b.id),
    );
    for (const later of entries.slice(i + 1)) {
      const m = contributionOf(later)[0];
      if (m?.role === "assistant") break;
      if (m?.role === "toolResult" && calls.has(m.toolCallId)) candidates.delete(e.id);
    }
  }
  let sum = 0;
  let reached = -1;
  for (let i = entries.length - 1; i >= 0; i--) {
    for (const m of contributionOf(entries[i]!)) sum += estimateMessageTokens(m);
    if (sum >= keepRecentTokens) {
      reached = i;
      break;
    }
  }
  if (reached < 0) return undefined;
  const after = entries.slice(reached).find((e) => candidates.has(e.id));
  const cut = after ?? [...entries].reverse().find((e) => candidates.has(e.id));
  if (!cut) return undefined;
  const summarized = entries.filter((e) => e.id < cut.id);
  if (!summarized.some((e) => e.kind !== ENTRY.system && contributionOf(e).length > 0)) return undefined;
  return cut.id;
}

/** The summarizer's view of messages: `[User]: ...` lines, tool results cut short, no system text. */
export function serializeForSummary(messages: readonly Message[]): string {
  const lines: string[] = [];
  for (const m of messages) {
    if (m.role === "user") {
      const text =
        typeof m.content === "string"
          ? m.content
          : m.content.map((b) => ("text" in b ? b.text : "[image]")).join("\n");
      lines.push(`[User]: ${text}`);
    } else if (m.role === "assistant") {
      for (const b of m.content) {
        if (b.type === "thinking") lines.push(`[Assistant thinking]: ${b.thinking}`);
        else if (b.type === "text") lines.push(`[Assistant]: ${b.text}`);
      }
      const calls = m.content.filter((b) => b.type === "toolCall");
      if (calls.length > 0) {
        const described = calls.map(
          (c) =>
            `${c.name}(${Object.entries(c.arguments ?? {})
              .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
              .join(", ")})`,
        );
        lines.push(`[Assistant tool calls]: ${described.join("; ")}`);
      }
    } else {
      const text = m.content.map((b) => ("text" in b ? b.text : "[image]")).join("\n");
      lines.push(
        `[Tool result]: ${text.length > TOOL_RESULT_CHARS ? `${text.slice(0, TOOL_RESULT_CHARS)}...` : text}`,
      );
    }
  }
  return lines.join("\n\n");
}
