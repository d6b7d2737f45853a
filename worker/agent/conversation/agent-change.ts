/**
 * A change of a conversation's stored agent (spec §2.2 `AgentChange`, `configure`): a given field
 * replaces the stored one, `null` clears it, `undefined` leaves it. Extensions and tools may be
 * named by their objects, which stand for their names: pi.agent stores names only, never code, so an
 * old object of an extension that was installed again still selects it. Pure: no commit here.
 */

import type { Extension } from "../extensions/types.ts";
import type { AgentState, ModelRef, ThinkingLevel } from "../records.ts";
import type { ToolDefinition } from "../tools/contract.ts";

/** An extension by its name or by its object (which stands for its name). */
export type ExtensionHandle = string | Extension;
/** A tool by its name or by its object (which stands for its name). */
export type ToolHandle = string | ToolDefinition;

export interface AgentChange {
  readonly model?: ModelRef | null;
  readonly thinkingLevel?: ThinkingLevel | null;
  readonly extensions?:
    | readonly ExtensionHandle[]
    | { readonly add?: readonly ExtensionHandle[]; readonly remove?: readonly ExtensionHandle[] }
    | null;
  readonly tools?: readonly ToolHandle[] | { readonly remove: readonly ToolHandle[] } | null;
  readonly instructions?: string | null;
}

const nameOf = (handle: ExtensionHandle | ToolHandle): string =>
  typeof handle === "string" ? handle : handle.name;
const names = (handles: readonly (ExtensionHandle | ToolHandle)[]): string[] => handles.map(nameOf);

/** What `change` stores for each field it gives: names for objects, copies of arrays and objects. */
function stored(key: string, value: unknown): unknown {
  if (key === "extensions") {
    if (Array.isArray(value)) return names(value);
    const edit = value as { add?: readonly ExtensionHandle[]; remove?: readonly ExtensionHandle[] };
    return {
      ...(edit.add !== undefined ? { add: names(edit.add) } : {}),
      ...(edit.remove !== undefined ? { remove: names(edit.remove) } : {}),
    };
  }
  if (key === "tools") {
    if (Array.isArray(value)) return names(value);
    return { remove: names((value as { remove: readonly ToolHandle[] }).remove) };
  }
  return structuredClone(value);
}

/** `current` with `change` applied: a given field replaces, `null` clears, `undefined` leaves. */
export function applyAgentChange(current: AgentState, change: AgentChange): AgentState {
  const next: Record<string, unknown> = { ...current };
  for (const [key, value] of Object.entries(change)) {
    if (value === undefined) continue;
    if (value === null) delete next[key];
    else next[key] = stored(key, value);
  }
  return next as AgentState;
}
