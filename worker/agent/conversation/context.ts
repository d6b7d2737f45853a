/**
 * The model context derived from entries (the specification's §2.1): the active range starts at the
 * newest head marker; within it the newest edit per target omits or replaces that entry's messages;
 * system entries set the prompt sections and the offered tools (an omitted one sets nothing: a head
 * rebaseline omits the retained ones it restates, spec §7.4); failed and aborted answers are left out; tool results move directly after their call, in call order; a call
 * left unanswered gets a synthetic error result; a result without its call is dropped.
 *
 * A run derives its context every round from a list that only grew: the derivation of the previous
 * list is kept (per list, keyed by its first entry) and extended by the new entries when that gives
 * exactly what a derivation from scratch would (the kept list is a prefix of the new one, entry for
 * entry, and neither it nor the new entries hold edits, head markers or system entries that would
 * change what came before); anything else derives from scratch. Callers get fresh arrays each time.
 * A kept derivation is extended in place (its arrays only grow, so a round appends its own entries
 * and messages instead of copying the whole transcript's): it is never handed out, and nothing is
 * changed until the extension is known to be exact.
 */
import type { AssistantMessage, Message, ToolResultMessage } from "@mariozechner/pi-ai";
import type { EntryEdit, EntryId, EntryRecord } from "../../core/types.ts";
import { ENTRY, modelMessages, type SystemRecord } from "../records.ts";

export interface DerivedContext {
  systemPrompt: string | undefined;
  messages: Message[];
  /** Tool names offered by the transcript's system entries, in order. */
  tools: string[];
  sections: Record<string, string | null>;
}

export const UNANSWERED_TOOL_CALL = "The tool call was not answered (the run was interrupted or cut).";

/**
 * The edits of each active range `activeRange` made (spec §2.1 steps 3-4): the scan runs over every
 * entry from the newest head marker's `head` through the tail, older markers and the newest marker
 * itself included, and the newest edit per target by transcript order wins. The range's entries
 * leave the older markers out (step 5), so their edits are kept here, beside the array.
 */
const scannedEdits = new WeakMap<readonly EntryRecord[], Map<EntryId, EntryEdit> | undefined>();

/**
 * Entries of the active range: the newest head marker, then the entries from its `head` on that
 * carry no head (spec §2.1 step 5); without a marker, every entry. The edits the range applies
 * (`newestEdits`) include those of the older markers its scan passed.
 */
export function activeRange(entries: readonly EntryRecord[]): EntryRecord[] {
  for (let i = entries.length - 1; i >= 0; i--) {
    const marker = entries[i]!;
    const head = marker.head;
    if (head === undefined) continue;
    const range = [marker];
    let edits: Map<EntryId, EntryEdit> | undefined;
    for (const e of entries) {
      if (e.id < head) continue;
      if (e.edits) {
        edits ??= new Map();
        for (const edit of e.edits) edits.set(edit.target, edit);
      }
      if (e !== marker && e.head === undefined) range.push(e);
    }
    scannedEdits.set(range, edits);
    return range;
  }
  return entries.slice();
}

/** Apply one pi.system entry's contribution to the replayed prompt sections and tool list. */
function applySystem(
  messages: readonly Message[],
  sections: Record<string, string | null>,
  tools: string[],
): void {
  for (const m of messages as unknown as SystemRecord[]) {
    if (m.role !== "system") continue;
    for (const [name, text] of Object.entries(m.sections ?? {})) {
      if (text === null) delete sections[name];
      else sections[name] = text;
    }
    for (const t of m.toolsRemoved ?? []) {
      const i = tools.indexOf(t);
      if (i >= 0) tools.splice(i, 1);
    }
    for (const t of m.toolsAdded ?? []) if (!tools.includes(t)) tools.push(t);
  }
}

/** Only what the transcript's system entries replay (prompt sections, offered tools): no messages. */
export function deriveSystem(entries: readonly EntryRecord[]): Pick<DerivedContext, "sections" | "tools"> {
  const d = derive(entries);
  return { sections: { ...d.sections }, tools: d.tools.slice() };
}

/**
 * The retained pi.system entries a head rebaseline omits (spec §7.4), in order, when the next
 * preparation must write one: the active context starts at a head marker and no pi.system entry was
 * appended after that marker. Undefined otherwise (no head, or a baseline already follows it).
 */
export function headRebaseline(entries: readonly EntryRecord[]): EntryId[] | undefined {
  return rebaselineOf(derive(entries));
}

/**
 * What a preparation compares the desired prompt with (spec §7.4), from one derivation: the
 * sections and tools the transcript replays (copies, as `deriveSystem` gives them) and its
 * `headRebaseline`. A preparation runs every round; it derived the same list three times.
 */
export function replayedSystem(entries: readonly EntryRecord[]): Pick<
  DerivedContext,
  "sections" | "tools"
> & {
  rebaseline: EntryId[] | undefined;
} {
  const d = derive(entries);
  return { sections: { ...d.sections }, tools: d.tools.slice(), rebaseline: rebaselineOf(d) };
}

function rebaselineOf(d: Derived): EntryId[] | undefined {
  const marker = d.head;
  if (marker === undefined) return undefined;
  const systems = d.entries.filter((e) => e.kind === ENTRY.system);
  if (systems.some((e) => e.id > marker.id)) return undefined;
  return systems.map((e) => e.id);
}

/**
 * The newest edit per target that applies to `range`: for a range `activeRange` made, the edits its
 * scan passed (older markers' included); for any other list, its entries' edits in list order (a later
 * edit wins).
 */
function newestEdits(range: readonly EntryRecord[]): Map<EntryId, EntryEdit> | undefined {
  if (scannedEdits.has(range)) return scannedEdits.get(range);
  let edits: Map<EntryId, EntryEdit> | undefined;
  for (const entry of range) {
    if (!entry.edits) continue;
    edits ??= new Map();
    for (const edit of entry.edits) edits.set(edit.target, edit);
  }
  return edits;
}

/**
 * A conversation's context as `Conversation.context()` gives it (spec §2.2): the head marker, the
 * context entries (the marker, then the range's non-head entries), each entry's contribution (its
 * model messages after edits, without failed or aborted answers, before results are moved to their
 * calls and unanswered calls get results) and the messages a request sends. A pi.system entry
 * contributes its system record; `messages` leaves those out (pi-ai 0.73.1 has no system role), and
 * the prompt and tools they replay are `systemPrompt`, `sections` and `tools`.
 */
export interface ContextView extends DerivedContext {
  head: EntryRecord | undefined;
  entries: EntryRecord[];
  contributions: Message[][];
}

/**
 * An entry's contribution: its model messages after the range's edits and rule 9 (spec §2.1). The
 * entry's own list (frozen with the entry) when nothing of it is left out: most entries, every round.
 */
export function contribution(entry: EntryRecord, edits: Map<EntryId, EntryEdit> | undefined): Message[] {
  const edit = edits?.get(entry.id);
  if (edit?.action === "omit") return [];
  const own = edit?.action === "replace" ? (edit.messages as unknown as Message[]) : modelMessages(entry);
  if (entry.kind === ENTRY.system) return own;
  for (const m of own)
    if (m.role === "assistant" && unsent(m)) return own.filter((n) => !(n.role === "assistant" && unsent(n)));
  return own;
}

/**
 * Each entry's contribution within `range` (an active range: the edits are the newest in it), in
 * the range's order: what compaction's range selection reads (spec §8.7).
 */
export function rangeContributions(range: readonly EntryRecord[]): Message[][] {
  const edits = newestEdits(range);
  return range.map((entry) => contribution(entry, edits));
}

/**
 * What a compaction summarizes (spec §8.7): the head marker, if any, then the non-marker entries of
 * `range` (an active range) before `firstKept`, and their messages: their contributions under every
 * edit in the whole range (an edit after the cut still applies), ordered by rules 7 and 8, system
 * entries left out.
 */
export function summarizedPart(
  range: readonly EntryRecord[],
  firstKept: EntryId,
): { entries: EntryRecord[]; messages: Message[] } {
  const all = rangeContributions(range);
  const entries: EntryRecord[] = [];
  const flat: Message[] = [];
  range.forEach((entry, i) => {
    if (entry.head === undefined && entry.id >= firstKept) return;
    entries.push(entry);
    if (entry.kind !== ENTRY.system) flat.push(...all[i]!);
  });
  return { entries, messages: pairResults(flat) };
}

/**
 * An answer future requests leave out (spec §2.1 rule 9): one that failed or was aborted, or a
 * deferred one (a `deferred` stop reason, or a placeholder still carrying its deferred handle: pi-ai
 * 0.73.1 has no such stop reason; our model seam marks it with `deferred`).
 */
function unsent(m: AssistantMessage): boolean {
  const stop = m.stopReason as string;
  return (
    stop === "error" ||
    stop === "aborted" ||
    stop === "deferred" ||
    (m as { deferred?: unknown }).deferred !== undefined
  );
}

/**
 * A derivation kept for extending: its source list and what it derived, never handed out. `extend`
 * appends to its arrays (never changing what they hold) and moves `lastAssistant` and `tail`.
 */
interface Derived {
  /** A copy of the list it derives, grown with it. */
  readonly source: EntryRecord[];
  readonly head: EntryRecord | undefined;
  readonly entries: EntryRecord[];
  readonly contributions: Message[][];
  /** Every non-system contribution, in order (what pairResults reads). */
  readonly flat: Message[];
  /** Where the last assistant message of `flat` is (0 without one): results pair from there on. */
  lastAssistant: number;
  /** pairResults of `flat` before `lastAssistant`: final, whatever is appended. */
  readonly settled: Message[];
  /** pairResults of `flat` from `lastAssistant` on: the messages after `settled`. */
  tail: readonly Message[];
  readonly sections: Readonly<Record<string, string | null>>;
  readonly tools: readonly string[];
  readonly systemPrompt: string | undefined;
  /** Whether the range holds an edit (an appended entry could then not be derived alone). */
  readonly edited: boolean;
}

/** The newest derivation per list, by the list's first entry. */
const kept = new WeakMap<EntryRecord, Derived>();

function lastAssistantIn(flat: readonly Message[], from: number): number {
  for (let i = flat.length - 1; i >= from; i--) if (flat[i]!.role === "assistant") return i;
  return from;
}

function deriveFromScratch(all: readonly EntryRecord[]): Derived {
  const sections: Record<string, string | null> = {};
  const tools: string[] = [];
  const entries = activeRange(all);
  const edits = newestEdits(entries);
  const contributions = entries.map((entry) => contribution(entry, edits));
  const flat: Message[] = [];
  entries.forEach((entry, i) => {
    if (entry.kind === ENTRY.system) applySystem(contributions[i]!, sections, tools);
    else flat.push(...contributions[i]!);
  });
  const head = entries[0]?.head !== undefined ? entries[0] : undefined;
  const text = Object.values(sections).filter((s): s is string => typeof s === "string" && s.length > 0);
  const lastAssistant = lastAssistantIn(flat, 0);
  const settled = pairResults(flat.slice(0, lastAssistant));
  return {
    source: all.slice(),
    head,
    entries,
    contributions,
    flat,
    lastAssistant,
    settled,
    tail: pairResults(flat.slice(lastAssistant)),
    sections,
    tools,
    systemPrompt: text.length > 0 ? text.join("\n\n") : undefined,
    edited: edits !== undefined,
  };
}

/**
 * `before` extended in place by the entries `all` adds to its source, or undefined (and `before`
 * unchanged) when that is not exact.
 */
function extend(before: Derived, all: readonly EntryRecord[]): Derived | undefined {
  const source = before.source;
  if (before.edited || all.length < source.length) return undefined;
  for (let i = source.length - 1; i >= 0; i--) if (all[i] !== source[i]) return undefined;
  if (all.length === source.length) return before;
  const headId = before.head?.head;
  const added: EntryRecord[] = [];
  for (let i = source.length; i < all.length; i++) {
    const entry = all[i]!;
    if (entry.head !== undefined || entry.edits || entry.kind === ENTRY.system) return undefined;
    // activeRange keeps, after a head marker, the entries from its head on.
    if (headId === undefined || entry.id >= headId) added.push(entry);
  }
  // Everything that can throw is done before `before` changes.
  const contributions = added.map((entry) => contribution(entry, undefined));
  const { flat } = before;
  const from = flat.length;
  for (const c of contributions) for (const m of c) flat.push(m);
  const lastAssistant = lastAssistantIn(flat, before.lastAssistant);
  if (lastAssistant !== before.lastAssistant)
    for (const m of pairResults(flat.slice(before.lastAssistant, lastAssistant))) before.settled.push(m);
  if (lastAssistant !== before.lastAssistant || flat.length !== from)
    before.tail = pairResults(flat.slice(lastAssistant));
  before.lastAssistant = lastAssistant;
  for (let i = source.length; i < all.length; i++) before.source.push(all[i]!);
  for (const entry of added) before.entries.push(entry);
  for (const c of contributions) before.contributions.push(c);
  return before;
}

/** The messages a request sends: a fresh array. */
const messagesOf = (d: Derived): Message[] => d.settled.concat(d.tail);

function derive(all: readonly EntryRecord[]): Derived {
  const first = all[0];
  const before = first && kept.get(first);
  const derived = (before && extend(before, all)) ?? deriveFromScratch(all);
  if (first) kept.set(first, derived);
  return derived;
}

export function contextView(all: readonly EntryRecord[]): ContextView {
  const d = derive(all);
  return {
    head: d.head,
    entries: d.entries.slice(),
    contributions: d.contributions.map((c) => c.slice()),
    systemPrompt: d.systemPrompt,
    messages: messagesOf(d),
    tools: d.tools.slice(),
    sections: { ...d.sections },
  };
}

export function deriveContext(entries: readonly EntryRecord[]): DerivedContext {
  const d = derive(entries);
  return {
    systemPrompt: d.systemPrompt,
    messages: messagesOf(d),
    tools: d.tools.slice(),
    sections: { ...d.sections },
  };
}

/** Rules 7 and 8: each call's result right after its assistant, in call order; a missing one synthesized, an orphan dropped. */
function pairResults(flat: readonly Message[]): Message[] {
  const messages: Message[] = [];
  const consumed = new Set<number>();
  for (let i = 0; i < flat.length; i++) {
    const m = flat[i]!;
    if (m.role === "toolResult") continue; // placed with its call, or dropped as an orphan
    messages.push(m);
    if (m.role !== "assistant") continue;
    let next = i + 1;
    while (next < flat.length && flat[next]!.role !== "assistant") next++;
    for (const call of (m as AssistantMessage).content) {
      if (call.type !== "toolCall") continue;
      let found: ToolResultMessage | undefined;
      for (let j = i + 1; j < next; j++) {
        const r = flat[j]!;
        if (r.role === "toolResult" && r.toolCallId === call.id && !consumed.has(j)) {
          consumed.add(j);
          found = r;
          break;
        }
      }
      messages.push(
        found ?? {
          role: "toolResult",
          toolCallId: call.id,
          toolName: call.name,
          content: [{ type: "text", text: UNANSWERED_TOOL_CALL }],
          isError: true,
          timestamp: m.timestamp,
        },
      );
    }
  }
  return messages;
}
