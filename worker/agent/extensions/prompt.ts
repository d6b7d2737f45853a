/**
 * The system prompt from sections (spec §7.4): render the resolved agent's sections in order (then
 * the conversation's instructions; a section may be async, so a phase renders before its commit),
 * and plan the pi.system entries that take the transcript from the sections and tools it replays to
 * the desired ones. Invariants:
 * - nothing is planned when the desired sections (text and order) and tools equal the replayed ones;
 * - a change of values in the same order is one minimal patch (changed values, null removals);
 * - a change of order is two entries: the first removes every shown section, the second adds every
 *   desired section in order (replay appends a re-added section at the end);
 * - tool changes ride on the last planned entry, or have one of their own; replay keeps retained
 *   tools in place and appends additions, so when that would not give the desired order, the entry
 *   removes every offered tool and adds the desired ones in order;
 * - a head rebaseline (the active context starts at a head marker with no pi.system entry after it)
 *   takes precedence: one entry, written even when it restates the replayed values, whose message is
 *   a complete baseline (every desired section in order, every desired tool) and whose edits omit
 *   every retained pi.system entry; only when there is nothing to omit and nothing to state is
 *   nothing planned.
 */
import type { ConversationId, EntryEdit, EntryId } from "../../core/types.ts";
import type { DocumentReader } from "../env.ts";
import type { SystemRecord } from "../records.ts";
import type { PromptEnv, PromptSection, ResolvedAgent } from "./types.ts";

export interface RenderInput {
  readonly conversationId: ConversationId;
  readonly env: PromptEnv | undefined;
  readonly shown: Readonly<Record<string, string | null>>;
  readonly read: DocumentReader;
}

/** How the rendering of the desired sections goes wrong or is reported. */
export interface RenderOptions {
  readonly report: (error: unknown) => void;
  /** The preparing phase's signal: after it aborts, a section's error propagates (spec §7.4). */
  readonly signal: AbortSignal;
}

/** A tagged section's text: `<key>\n...\n</key>`. The agent's instructions are always tagged (spec §7.1). */
const tagged = (key: string, text: string) => `<${key}>\n${text}\n</${key}>`;

/**
 * The desired sections, in order, as stored (tagged unless a section says otherwise), each section
 * awaited in turn. A section that throws or rejects keeps the text shown before (if any) and is
 * reported, unless the phase was aborted (then the error propagates); one that gives undefined is
 * left out.
 */
export async function renderSections(
  agent: ResolvedAgent,
  input: RenderInput,
  instructions: string | undefined,
  options: RenderOptions,
): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const s of agent.sections) {
    let text: unknown;
    try {
      text = await s.render({ ...input, agent }, { signal: options.signal });
    } catch (error) {
      if (options.signal.aborted) throw error;
      text = failed(error);
    }
    place(out, s, text, input.shown, options.report);
  }
  if (instructions !== undefined) out["instructions"] = tagged("instructions", instructions);
  return out;
}

/**
 * `renderSections` for a commit, which cannot wait: undefined as soon as a section returns a
 * promise (the caller prepares in a phase of its own instead; that promise is dropped, its
 * rejection ignored). Nothing aborts such a commit, so every error is reported.
 */
export function renderSectionsNow(
  agent: ResolvedAgent,
  input: RenderInput,
  instructions: string | undefined,
  report: (error: unknown) => void,
): Record<string, string> | undefined {
  const out: Record<string, string> = {};
  for (const s of agent.sections) {
    let text: unknown;
    try {
      text = s.render({ ...input, agent }, { signal: neverAborted() });
    } catch (error) {
      text = failed(error);
    }
    if (text instanceof Promise) {
      text.catch(() => undefined);
      return undefined;
    }
    place(out, s, text, input.shown, report);
  }
  if (instructions !== undefined) out["instructions"] = tagged("instructions", instructions);
  return out;
}

/**
 * A signal that never aborts, made on first use: workerd refuses `new AbortController()` in a
 * module's global scope (the server engine loads this module there).
 */
let never: AbortSignal | undefined;
const neverAborted = () => (never ??= new AbortController().signal);

/** A section's failure, told apart from what it rendered. */
class Failed {
  constructor(readonly error: unknown) {}
}
const failed = (error: unknown) => new Failed(error);

/** Put a section's rendered text (or what a failure keeps) into `out`. */
function place(
  out: Record<string, string>,
  s: PromptSection,
  text: unknown,
  shown: Readonly<Record<string, string | null>>,
  report: (error: unknown) => void,
): void {
  if (!(text instanceof Failed) && text !== undefined && typeof text !== "string")
    text = failed(new TypeError(`section ${s.key} rendered ${typeof text}, not text`));
  if (text instanceof Failed) {
    report(text.error);
    const before = shown[s.key];
    if (typeof before === "string") out[s.key] = before;
    return;
  }
  if (typeof text !== "string") return; // undefined: the section is left out
  out[s.key] = s.tag === false ? text : tagged(s.key, text);
}

type Planned = Pick<SystemRecord, "sections" | "toolsAdded" | "toolsRemoved">;

/** One planned pi.system entry: its message (without role and timestamp) and its context edits. */
export interface PlannedSystem {
  readonly message: Planned;
  readonly edits?: EntryEdit[];
}

/** The offered tools: what the transcript replays and what the agent desires, in order. */
export interface PlannedTools {
  readonly shown: readonly string[];
  readonly desired: readonly string[];
}

export interface PlanOptions {
  /**
   * The retained pi.system entries to omit when the active context starts at a head marker with no
   * pi.system entry after it (`headRebaseline`); undefined plans ordinary deltas.
   */
  readonly rebaseline?: readonly EntryId[] | undefined;
}

/** The pi.system entries that bring `shown` to `desired`. */
export function planSystem(
  shown: Readonly<Record<string, string | null>>,
  desired: Readonly<Record<string, string>>,
  tools: PlannedTools,
  options: PlanOptions = {},
): PlannedSystem[] {
  if (options.rebaseline) return planRebaseline(desired, tools.desired, options.rebaseline);
  let added = tools.desired.filter((t) => !tools.shown.includes(t));
  let removed = tools.shown.filter((t) => !tools.desired.includes(t));
  // Replay keeps retained tools in place and appends additions: when that is not the desired
  // order, remove every offered tool and add the desired ones in order.
  const replayed = [...tools.shown.filter((t) => tools.desired.includes(t)), ...added];
  if (replayed.join("\n") !== tools.desired.join("\n")) {
    removed = [...tools.shown];
    added = [...tools.desired];
  }
  const shownKeys = Object.keys(shown).filter((k) => shown[k] !== null);
  const desiredKeys = Object.keys(desired);
  const patched = [
    ...shownKeys.filter((k) => k in desired),
    ...desiredKeys.filter((k) => !shownKeys.includes(k)),
  ];
  const planned: Planned[] = [];
  if (patched.join("\n") === desiredKeys.join("\n")) {
    const delta: Record<string, string | null> = {};
    for (const k of desiredKeys) if (shown[k] !== desired[k]) delta[k] = desired[k]!;
    for (const k of shownKeys) if (!(k in desired)) delta[k] = null;
    if (Object.keys(delta).length > 0) planned.push({ sections: delta });
  } else {
    planned.push({ sections: Object.fromEntries(shownKeys.map((k) => [k, null])) });
    planned.push({ sections: { ...desired } });
  }
  if (added.length > 0 || removed.length > 0) {
    if (planned.length === 0) planned.push({ sections: {} });
    const last = planned[planned.length - 1]!;
    if (added.length) last.toolsAdded = [...added];
    if (removed.length) last.toolsRemoved = [...removed];
  }
  return planned.map((message) => ({ message }));
}

/** The head rebaseline: one complete baseline omitting the retained pi.system entries. */
function planRebaseline(
  desired: Readonly<Record<string, string>>,
  tools: readonly string[],
  omit: readonly EntryId[],
): PlannedSystem[] {
  // Nothing retained and nothing to state: an empty baseline would change nothing the model sees.
  if (omit.length === 0 && Object.keys(desired).length === 0 && tools.length === 0) return [];
  const message: Planned = { sections: { ...desired } };
  if (tools.length > 0) message.toolsAdded = [...tools];
  if (omit.length === 0) return [{ message }];
  return [{ message, edits: omit.map((target) => ({ target, action: "omit" as const })) }];
}
