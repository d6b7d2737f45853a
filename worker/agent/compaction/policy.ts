/**
 * When a conversation compacts on its own (spec §8.3): the context's size before a request, the
 * threshold check that runs before each request (blocking or background), and whether a context
 * overflow is one a compaction can cure. Pure reads: nothing here writes.
 */
import type { AssistantMessage } from "@mariozechner/pi-ai";
import type { Tx } from "../../core/define.ts";
import type { ConversationId, EntryEdit, EntryId, EntryRecord } from "../../core/types.ts";
import { activeRange, contribution } from "../conversation/context.ts";
import { piAi } from "../models/pi-ai.ts";
import { agentDoc, ENTRY, live } from "../records.ts";
import type { AgentServices } from "../services.ts";
import { estimateMessageTokens, selectCut } from "./range.ts";

/**
 * The context's size before a request (spec §8.3), over the model context (§2.1: edits applied,
 * failed answers left out): the newest answer appended after the head marker that reported usage,
 * plus an estimate of what came after it, or an estimate of everything when no such answer exists.
 */
export function contextTokens(entries: readonly EntryRecord[]): number {
  // Walks back from the newest entry only as far as needed (it runs before every request): the
  // active range ends at the newest head marker's head, and older markers are not in it. An edit is
  // carried by a later entry than its target, so walking back meets it first: the first seen wins
  // (and within one entry the edit listed later is the newer, as the context reads it: walked back too).
  let tokens = 0;
  let start = 0;
  let marker = false;
  const edits = new Map<EntryId, EntryEdit>();
  for (let i = entries.length - 1; i >= 0; i--) {
    const e = entries[i]!;
    if (e.id < start) break;
    if (e.head !== undefined) {
      if (marker) continue;
      marker = true;
      start = e.head;
    }
    const own = e.edits;
    if (own)
      for (let k = own.length - 1; k >= 0; k--)
        if (!edits.has(own[k]!.target)) edits.set(own[k]!.target, own[k]!);
    if (e.kind === ENTRY.system) continue;
    const messages = contribution(e, edits);
    for (let j = messages.length - 1; j >= 0; j--) {
      const m = messages[j]!;
      // Only an answer appended after the marker reported usage on the context that follows it.
      if (!marker && m.role === "assistant" && m.usage && m.usage.totalTokens > 0)
        return tokens + m.usage.totalTokens;
      tokens += estimateMessageTokens(m);
    }
  }
  return tokens;
}

/**
 * Whether the request about to be prepared needs a compaction first (spec §8.3), with compaction
 * enabled, a model with a context window and something to compact: `blocking` above
 * contextWindow - reserveTokens (the request waits for it); `background` above that less
 * backgroundTokens when none is under way (the request does not wait). One estimate serves both.
 */
export function compactionNeeded(
  services: AgentServices,
  tx: Tx,
  c: ConversationId,
  entries: readonly EntryRecord[],
): "blocking" | "background" | undefined {
  const settings = services.settings().compaction;
  if (!settings.enabled) return undefined;
  const ref = agentDoc.read(tx, c).model ?? services.defaultModel;
  const model = ref ? services.models.resolve(ref) : undefined;
  if (!model || !(model.contextWindow > 0)) return undefined;
  const tokens = contextTokens(entries);
  const blockingAt = model.contextWindow - settings.reserveTokens;
  let need: "blocking" | "background" | undefined;
  if (tokens > blockingAt) need = "blocking";
  else if (
    settings.backgroundTokens > 0 &&
    tokens > blockingAt - settings.backgroundTokens &&
    (live(tx, c).compactions?.length ?? 0) === 0
  )
    need = "background";
  if (!need || selectCut(activeRange(entries), settings.keepRecentTokens) === undefined) return undefined;
  return need;
}

/** An answer pi-ai's `isContextOverflow` calls a context overflow, against its model's context window. */
export function isOverflow(services: AgentServices, message: AssistantMessage): boolean {
  const model = services.models.resolve({ provider: message.provider, modelId: message.model });
  return piAi().isContextOverflow(message, model?.contextWindow);
}

/** A context overflow that a compaction can cure: enabled, recognized, and something to compact. */
export function overflowCompactable(
  services: AgentServices,
  c: ConversationId,
  message: AssistantMessage,
): boolean {
  const settings = services.settings().compaction;
  if (!settings.enabled) return false;
  if (!isOverflow(services, message)) return false;
  const entries = services.entries.peek(c);
  return entries !== undefined && selectCut(activeRange(entries), settings.keepRecentTokens) !== undefined;
}
