/**
 * The system prompt from sections (spec §7.4): render the resolved agent's sections in order (then
 * the conversation's instructions), and plan the pi.system entries that take the transcript from the
 * sections and tools it replays to the desired ones. Invariants:
 * - nothing is planned when the desired sections (text and order) and tools equal the replayed ones;
 * - a change of values in the same order is one minimal patch (changed values, null removals);
 * - a change of order is two entries: the first removes every shown section, the second adds every
 *   desired section in order (replay appends a re-added section at the end);
 * - tool changes ride on the last planned entry, or have one of their own.
 */
import type { ConversationId, Json } from "../../core/types.ts";
import type { SystemRecord } from "../records.ts";
import type { ResolvedAgent } from "./types.ts";

export interface RenderInput {
  readonly conversationId: ConversationId;
  readonly shown: Readonly<Record<string, string | null>>;
  read(name: string): Json | undefined;
}

/**
 * The desired sections, in order, as stored (tagged unless a section says otherwise). A section that
 * throws keeps the text shown before (if any) and is reported; one that returns undefined is left out.
 */
export function renderSections(
  agent: ResolvedAgent,
  input: RenderInput,
  instructions: string | undefined,
  report: (error: unknown) => void,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const s of agent.sections) {
    try {
      const text: unknown = s.render({ ...input, agent });
      if (text instanceof Promise) {
        text.catch(() => undefined);
        throw new TypeError(`section ${s.key} returned a promise: sections render synchronously`);
      }
      if (text === undefined) continue;
      if (typeof text !== "string") throw new TypeError(`section ${s.key} rendered ${typeof text}, not text`);
      out[s.key] = s.tag === false ? text : `<${s.key}>\n${text}\n</${s.key}>`;
    } catch (error) {
      report(error);
      const before = input.shown[s.key];
      if (typeof before === "string") out[s.key] = before;
    }
  }
  if (instructions) out["instructions"] = instructions;
  return out;
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
