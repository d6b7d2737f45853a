/**
 * `runtime.hooks.each` for every task (spec §7.2), the source the agent harness gives the core:
 * a task's handlers are the hook registrations for its name (`hook(name, handlers)`) of the
 * extensions its conversation selects, in extension order, resolved from the registry snapshot and
 * the committed pi.agent when a phase first dispatches (the core asks once per phase; the snapshot is
 * the one taken as the phase started, spec §7.1); each handler
 * gets the asking task's `HookApi`. This is how extension-defined tasks ask hooks; the built-in
 * tasks resolve theirs through the same selection (`AgentServices.hooks`).
 */
import type { HookRunner, TaskHookSource, TaskRuntime } from "../../core/define.ts";
import type { AgentServices } from "../services.ts";
import { type HookApi, hookApi } from "./hooks.ts";
import type { RegistrySnapshot } from "./registry.ts";
import { selectExtensions } from "./resolve.ts";

export function taskHookSource(services: () => AgentServices): TaskHookSource {
  return {
    // Taken as each phase starts: its hooks come from it, whatever is installed by their first dispatch.
    snapshot: () => services().registry(),
    handlers(task, snapshot) {
      const s = services();
      const base = s.settings().extensions;
      const registry = (snapshot as RegistrySnapshot | undefined) ?? s.registry();
      const selected = selectExtensions(registry, s.readAgent(task.conversationId), base ? { base } : {});
      return selected.flatMap((e) =>
        (e.hooks ?? []).filter((r) => r.task === task.kind).map((r) => r.handlers),
      );
    },
    api: (runtime: TaskRuntime) => hookApi(runtime, services()),
  };
}

/** `runtime.hooks` as the agent harness fills it: each handler is invoked with the task's HookApi. */
export interface AgentHookRunner<H extends object> {
  each<K extends keyof H & string>(
    name: K,
    invoke: (handler: NonNullable<H[K]>, api: HookApi) => unknown,
  ): Promise<void>;
}

/** The task's hooks, typed for an agent harness (whose source hands every handler a HookApi). */
export function agentHooks<H extends object>(runtime: { readonly hooks: HookRunner }): AgentHookRunner<H> {
  return runtime.hooks as unknown as AgentHookRunner<H>;
}
