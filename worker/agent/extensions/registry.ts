/**
 * The extension registry (spec §7.1): app-owned, process-local, never persisted; it may outlive a
 * harness. `install` adds an extension, or replaces the installed one of the same name in place
 * (its position kept), in one publication; `uninstall` removes it. Invariants:
 * - every publication is a new immutable snapshot; an install that would leave the registry invalid
 *   throws `ExtensionInvalid` and publishes nothing (the snapshot unchanged, nobody notified);
 * - within one extension tool names and section keys are unique; section keys match
 *   ^[a-z][a-z0-9_-]*$ and `instructions` is reserved; task names are unique across the built-in
 *   tasks and every installed extension;
 * - publication calls no extension code; subscribers are called synchronously after it.
 */
import type { AnyTaskDefinition } from "../../core/define.ts";
import { HarnessError } from "../../core/errors.ts";
import type { ToolDefinition } from "../tools/contract.ts";
import { BUILTIN_TASKS } from "./hooks.ts";
import type { Extension, PromptSection } from "./types.ts";

/** An install the registry refuses: what is wrong, in `code` and the message. */
export class ExtensionInvalid extends HarnessError {
  override readonly name = "ExtensionInvalid";
  constructor(
    code:
      | "invalid_name"
      | "duplicate_tool"
      | "duplicate_section"
      | "invalid_section_key"
      | "reserved_section_key"
      | "task_collision",
    message: string,
  ) {
    super(code, message);
  }
}

/** A registry a harness cannot bind (spec §2.2): its snapshot lacks a built-in task. */
export class RegistryInvalid extends HarnessError {
  override readonly name = "RegistryInvalid";
  constructor(message: string) {
    super("registry_invalid", message);
  }
}

export interface RegistrySnapshot {
  /** Installed extensions, in install order. */
  installed(): readonly Extension[];
  extension(name: string): Extension | undefined;
  /** Every installed tool with its extension, in install order (names may repeat). */
  tools(): readonly { readonly extension: string; readonly tool: ToolDefinition }[];
  sections(): readonly { readonly extension: string; readonly section: PromptSection }[];
  /** The installed extensions' task definitions (the built-in ones are the harness's own). */
  tasks(): readonly AnyTaskDefinition[];
  task(name: string): AnyTaskDefinition | undefined;
  /** Whether `name` is a task the registry answers for: a built-in or an installed extension's. */
  hasTask(name: string): boolean;
}

export interface RegistryReader {
  snapshot(): RegistrySnapshot;
  /** Called synchronously after every publication; returns the unsubscribe. */
  subscribe(listener: () => void): () => void;
}

export interface ExtensionRegistry extends RegistryReader {
  /** Install, or replace the installed extension of the same name in place; publishes at once. */
  install(extension: Extension): void;
  /** Remove the installed extension of that name (an object stands for its name). */
  uninstall(extension: string | { readonly name: string }): void;
}

const SECTION_KEY = /^[a-z][a-z0-9_-]*$/;

/**
 * Tasks the harness registers beside the built-in tasks of spec §8: the subagent tool's
 * (`SUBAGENT_TASK` of tools/builtin/subagent.ts, not imported: its imports lead back here). No
 * extension defines or replaces them either.
 */
const HARNESS_TASKS = ["pi.subagent"] as const;

function snapshotOf(list: readonly Extension[]): RegistrySnapshot {
  const installed = Object.freeze([...list]);
  const tasks = new Map<string, AnyTaskDefinition>();
  for (const e of installed) for (const t of e.tasks ?? []) tasks.set(t.name, t);
  const builtin = new Set<string>(BUILTIN_TASKS);
  return Object.freeze({
    installed: () => installed,
    extension: (name: string) => installed.find((e) => e.name === name),
    tools: () => installed.flatMap((e) => (e.tools ?? []).map((tool) => ({ extension: e.name, tool }))),
    sections: () =>
      installed.flatMap((e) => (e.sections ?? []).map((section) => ({ extension: e.name, section }))),
    tasks: () => [...tasks.values()],
    task: (name: string) => tasks.get(name),
    hasTask: (name: string) => builtin.has(name) || tasks.has(name),
  });
}

/** Throws ExtensionInvalid when the registry holding `list` would be invalid. */
function validate(list: readonly Extension[]): void {
  const taskOwner = new Map<string, string>(
    [...BUILTIN_TASKS, ...HARNESS_TASKS].map((t) => [t, "the built-in tasks"]),
  );
  for (const e of list) {
    if (typeof e.name !== "string" || e.name === "")
      throw new ExtensionInvalid("invalid_name", "an extension needs a name");
    const tools = new Set<string>();
    for (const t of e.tools ?? []) {
      if (tools.has(t.name))
        throw new ExtensionInvalid("duplicate_tool", `extension ${e.name} has two tools named ${t.name}`);
      tools.add(t.name);
    }
    const keys = new Set<string>();
    for (const s of e.sections ?? []) {
      if (!SECTION_KEY.test(s.key))
        throw new ExtensionInvalid(
          "invalid_section_key",
          `extension ${e.name}: section key ${JSON.stringify(s.key)} must match ${SECTION_KEY.source}`,
        );
      if (s.key === "instructions")
        throw new ExtensionInvalid(
          "reserved_section_key",
          `extension ${e.name}: section key instructions is reserved`,
        );
      if (keys.has(s.key))
        throw new ExtensionInvalid(
          "duplicate_section",
          `extension ${e.name} has two sections keyed ${s.key}`,
        );
      keys.add(s.key);
    }
    for (const t of e.tasks ?? []) {
      const owner = taskOwner.get(t.name);
      if (owner !== undefined)
        throw new ExtensionInvalid(
          "task_collision",
          `task ${t.name} of ${e.name} is already defined by ${owner}`,
        );
      taskOwner.set(t.name, `extension ${e.name}`);
    }
  }
}

export function createRegistry(): ExtensionRegistry {
  let list: readonly Extension[] = [];
  let current = snapshotOf(list);
  const listeners = new Set<() => void>();
  const publish = (next: readonly Extension[]) => {
    list = next;
    current = snapshotOf(next);
    for (const l of [...listeners]) l();
  };
  return {
    snapshot: () => current,
    subscribe(listener) {
      // Each call is a subscription of its own: its unsubscribe ends that one only.
      const subscription = () => listener();
      listeners.add(subscription);
      return () => {
        listeners.delete(subscription);
      };
    },
    install(extension) {
      const at = list.findIndex((e) => e.name === extension.name);
      const next = at >= 0 ? list.map((e, i) => (i === at ? extension : e)) : [...list, extension];
      validate(next);
      publish(next);
    },
    uninstall(extension) {
      const name = typeof extension === "string" ? extension : extension.name;
      if (!list.some((e) => e.name === name)) return;
      publish(list.filter((e) => e.name !== name));
    },
  };
}
