/**
 * Agent resolution (spec §7.1): what a conversation's stored pi.agent selects from one registry
 * snapshot. A pure function of the two (wrappers are pure); a wrapper that throws or renames its
 * target drops that target for this resolution, reported through `report`.
 * - extensions: the base (settings.extensions when given, else every installed one in install
 *   order) unless the conversation names its own; an array is exactly those, in its order;
 *   `{ add, remove }` edits the base; duplicates keep their first position; names not installed are
 *   skipped;
 * - tools and sections: the selected extensions' in extension order, a later one of the same name
 *   replacing an earlier one in place; then every selected extension's wrappers in order; then the
 *   conversation's tool filter;
 * - hooks: the selected extensions' registrations, in extension order.
 * Being pure, a resolution is kept and handed out again for the same three (`resolveAgentCached`).
 */
import { isCheckedJson } from "../../core/persist.ts";
import type { AgentState, ModelRef } from "../records.ts";
import type { ToolDefinition } from "../tools/contract.ts";
import { composeHooks } from "./hooks.ts";
import type { RegistrySnapshot } from "./registry.ts";
import type { Extension, PromptSection, ResolvedAgent, ResolvedAgentView } from "./types.ts";

/** How a resolution reads the host's settings. */
export interface ResolveOptions {
  /** The default selection's base (settings.extensions); absent: every installed extension. */
  readonly base?: readonly string[];
}

export function selectExtensions(
  snapshot: RegistrySnapshot,
  agent: AgentState,
  options: ResolveOptions = {},
): Extension[] {
  const selection = agent.extensions;
  let names: string[];
  if (Array.isArray(selection)) names = [...selection];
  else {
    const base = options.base ?? snapshot.installed().map((e) => e.name);
    const add = (selection as { add?: string[] } | undefined)?.add ?? [];
    const remove = new Set((selection as { remove?: string[] } | undefined)?.remove ?? []);
    names = [...base, ...add].filter((n) => !remove.has(n));
  }
  const seen = new Set<string>();
  const out: Extension[] = [];
  for (const name of names) {
    if (seen.has(name)) continue;
    seen.add(name);
    const e = snapshot.extension(name);
    if (e) out.push(e);
  }
  return out;
}

/** Apply `wrap` to the target; a throw or a renamed result drops the target (reported). */
function applyWrap<T extends { readonly name?: string; readonly key?: string }>(
  target: T,
  id: string,
  wrap: (t: T) => T,
  label: string,
  report: (error: unknown) => void,
): T | undefined {
  try {
    const wrapped = wrap(target);
    const wrappedId = (wrapped as { name?: string; key?: string } | undefined)?.[
      "name" in target ? "name" : "key"
    ];
    if (wrappedId !== id)
      throw new Error(`a wrapper of ${label} ${id} returned one named ${String(wrappedId)}`);
    return wrapped;
  } catch (error) {
    report(error);
    return undefined;
  }
}

export function resolveAgent(
  snapshot: RegistrySnapshot,
  agent: AgentState,
  report: (error: unknown) => void,
  options: ResolveOptions = {},
): ResolvedAgent {
  const selected = selectExtensions(snapshot, agent, options);
  let tools = new Map<string, ToolDefinition>();
  const sections = new Map<string, PromptSection>();
  for (const e of selected) {
    for (const t of e.tools ?? []) tools.set(t.name, t);
    for (const s of e.sections ?? []) sections.set(s.key, s);
  }
  for (const e of selected) {
    for (const w of e.wraps ?? []) {
      if ("tool" in w) {
        const target = tools.get(w.tool);
        if (!target) continue;
        const wrapped = applyWrap(target, w.tool, (t) => w.wrap(t), "tool", report);
        if (wrapped) tools.set(w.tool, wrapped);
        else tools.delete(w.tool);
      } else {
        const target = sections.get(w.section);
        if (!target) continue;
        const wrapped = applyWrap(target, w.section, (s) => w.wrap(s), "section", report);
        if (wrapped) sections.set(w.section, wrapped);
        else sections.delete(w.section);
      }
    }
  }
  const filter = agent.tools;
  if (Array.isArray(filter)) {
    const kept = new Map<string, ToolDefinition>();
    for (const name of filter) {
      const t = tools.get(name);
      if (t && !kept.has(name)) kept.set(name, t);
    }
    tools = kept;
  } else if (filter) {
    for (const name of filter.remove) tools.delete(name);
  }
  return Object.freeze({
    extensions: selected.map((e) => e.name),
    tools,
    sections: [...sections.values()],
    hooks: composeHooks(selected.flatMap((e) => e.hooks ?? [])),
  });
}

/** Resolutions kept per registry snapshot, by pi.agent and base (see `resolveAgentCached`). */
const resolutions = new WeakMap<RegistrySnapshot, Map<string, ResolvedAgent>>();
/** Distinct (pi.agent, base) pairs kept per snapshot before the oldest ones are dropped. */
const RESOLUTIONS_KEPT = 64;

/** The text of each checked (deeply frozen) pi.agent value: its identity stands for its text. */
const agentTexts = new WeakMap<AgentState, string>();

/**
 * The cache key of a resolution: the pi.agent value's text and the base. A committed pi.agent is
 * checked JSON, frozen all the way down, so its text is computed once per value, not at every
 * phase of every task; any other value is serialized each time, as it may have changed.
 */
function keyOf(agent: AgentState, base: readonly string[] | undefined): string {
  let text = agentTexts.get(agent);
  if (text === undefined) {
    text = JSON.stringify(agent);
    if (isCheckedJson(agent)) agentTexts.set(agent, text);
  }
  return base === undefined ? `${text}\n` : `${text}\n${JSON.stringify(base)}`;
}

/**
 * `resolveAgent`, kept: a resolution is a pure function of the snapshot, the pi.agent value and the
 * base, and every phase of every task resolves its conversation's agent again. One that reported a
 * problem (a throwing wrapper) is not kept, so each resolution reports it as before.
 */
export function resolveAgentCached(
  snapshot: RegistrySnapshot,
  agent: AgentState,
  report: (error: unknown) => void,
  options: ResolveOptions = {},
): ResolvedAgent {
  const key = keyOf(agent, options.base);
  let kept = resolutions.get(snapshot);
  const hit = kept?.get(key);
  if (hit) return hit;
  let reported = false;
  const resolved = resolveAgent(
    snapshot,
    agent,
    (error) => {
      reported = true;
      report(error);
    },
    options,
  );
  if (!reported) {
    if (!kept) resolutions.set(snapshot, (kept = new Map()));
    if (kept.size >= RESOLUTIONS_KEPT) kept.delete(kept.keys().next().value!);
    kept.set(key, resolved);
  }
  return resolved;
}

/** The instructions as a section: one shared `render` reading its own `text`, so two views of the same agent are equal. */
interface InstructionsSection extends PromptSection {
  readonly text: string;
}

function renderInstructions(this: InstructionsSection): string {
  return this.text;
}

function instructionsSection(text: string): InstructionsSection {
  return { key: "instructions", tag: true, text, render: renderInstructions };
}

/**
 * The public view of a resolution (spec §2.2 `Agent`): with the stored pi.agent it came from, the
 * model a request would use (its own, else `defaultModel`), the thinking level ("off" unless set)
 * and the instructions. Its `sections` are the extension sections, then an `instructions` section
 * when instructions are set (the spec's "Extension sections, then `instructions` when set"; it
 * renders them tagged, as the prompt does).
 */
export function agentView(
  resolved: ResolvedAgent,
  state: AgentState,
  defaultModel: ModelRef | undefined,
): ResolvedAgentView {
  const model = state.model ?? defaultModel;
  const instructions = state.instructions;
  return {
    ...resolved,
    ...(instructions !== undefined
      ? { sections: [...resolved.sections, instructionsSection(instructions)] }
      : {}),
    state,
    ...(model ? { model } : {}),
    thinkingLevel: state.thinkingLevel ?? "off",
    ...(state.instructions !== undefined ? { instructions: state.instructions } : {}),
  };
}
