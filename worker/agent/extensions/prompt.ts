/**
 * The system prompt from sections (spec §7.4): render the resolved agent's sections in order (then
 * the conversation's instructions; a section may be async, so a phase renders before its commit),
 * and plan the pi.system entries that take the transcript from the sections and tools it replays to
 * the desired ones. Invariants:
 * - nothing is planned when the desired sections (text and order) and tools equal the replayed ones;
 * - a change of values in the same order is one minimal patch (changed values, null removals);
 * - a change of order is two entries: the first removes every shown section, the second adds every
 *   desired section in order (replay appends a re-added section at the end);
 * - tool changes ride on the last planned entry, or have one of their own.
 */
import type { ConversationId, Json } from "../../core/types.ts";
import type { SystemRecord } from "../records.ts";
import type { PromptEnv, PromptSection, ResolvedAgent } from "./types.ts";

export interface RenderInput {
  readonly conversationId: ConversationId;
  readonly env: PromptEnv | undefined;
  readonly shown: Readonly<Record<string, string | null>>;
  read(name: string): Json | undefined;
}

/** How the rendering of the desired sections goes wrong or is reported. */
export interface RenderOptions {
  readonly report: (error: unknown) => void;
  /** The preparing phase's signal: after it aborts, a section's error propagates (spec §7.4). */
  readonly signal: AbortSignal;
}

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
  if (instructions) out["instructions"] = instructions;
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
      text = s.render({ ...input, agent }, { signal: NEVER_ABORTED });
    } catch (error) {
      text = failed(error);
    }
    if (text instanceof Promise) {
      text.catch(() => undefined);
      return undefined;
    }
    place(out, s, text, input.shown, report);
  }
  if (instructions) out["instructions"] = instructions;
  return out;
}

const NEVER_ABORTED = new AbortController().signal;

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
  out[s.key] = s.tag === false ? text : `<${s.key}>\n${text}\n</${s.key}>`;
}

type Planned = Pick<SystemRecord, "sections" | "toolsAdded" | "toolsRemoved">;

/** The system messages (without role and timestamp) that bring `shown` to `desired`. */
export function planSystem(
  shown: Readonly<Record<string, string | null>>,
  desired: Readonly<Record<string, string>>,
  tools: { readonly added: readonly string[]; readonly removed: readonly string[] },
): Planned[] {
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
  if (tools.added.length > 0 || tools.removed.length > 0) {
    if (planned.length === 0) planned.push({ sections: {} });
    const last = planned[planned.length - 1]!;
    if (tools.added.length) last.toolsAdded = [...tools.added];
    if (tools.removed.length) last.toolsRemoved = [...tools.removed];
  }
  return planned;
}
