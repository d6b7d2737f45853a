/**
 * Shared helpers of the core tests: single-phase task definitions, parked tasks, a store holding
 * live tasks, a wait for a task that fails a test instead of hanging it, and a check that the engine
 * still runs. (`deferred` and `until` are the kit's, in worker/testing.ts.)
 */
import { expect } from "vitest";
import {
  defineTask,
  Harness,
  type Json,
  type PhaseHandler,
  type TaskDefinition,
  type TaskId,
  type TaskOutcome,
  type TaskRecord,
  type TaskRuntime,
} from "../../../worker/index.ts";
import type { MemoryStore } from "../../../worker/store/open.ts";
import { memoryStore, until } from "../../../worker/testing.ts";

export type Go = { phase: "go" };

export const outcome = (r: TaskRecord | undefined): TaskOutcome | undefined =>
  r?.state.status === "terminal" ? r.state.outcome : undefined;

/** Rejects with the signal's reason once it aborts (a handler parked until abort or close). */
export function untilAborted(signal: AbortSignal): Promise<never> {
  return new Promise<never>((_, reject) => {
    if (signal.aborted) return reject(signal.reason);
    signal.addEventListener("abort", () => reject(signal.reason), { once: true });
  });
}

/** A few macrotask turns: enough for any drain a change could start to have run. */
export async function settle(turns = 20): Promise<void> {
  for (let i = 0; i < turns; i++) await new Promise((r) => setTimeout(r, 0));
}

/** waitForTask that fails the test instead of hanging it. */
export function done(h: Harness, id: TaskId, timeoutMs = 5000): Promise<TaskRecord> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([
    h.waitForTask(id).finally(() => clearTimeout(timer)),
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`task ${id} not terminal in ${timeoutMs} ms`)), timeoutMs);
    }),
  ]);
}

export const complete = (result: Json) => ({
  status: "terminal" as const,
  outcome: { status: "completed" as const, result },
});

export async function abortedByHandler(_task: unknown, runtime: TaskRuntime<Json, Go, Json>): Promise<void> {
  await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted", reason: "handler" } }));
}

/** A single-phase task. */
export function single(
  name: string,
  go: PhaseHandler<Json, Go, Go, Json, object>,
  options: { version?: number; abort?: TaskDefinition<Json, Go, Json>["abort"] } = {},
): TaskDefinition<Json, Go, Json> {
  return defineTask<Json, Go, Json>({
    name,
    version: options.version ?? 1,
    initial: () => ({ phase: "go" }),
    phases: { go },
    abort: options.abort ?? abortedByHandler,
  });
}

/** Parks until the invocation is signalled (abort mark or close): keeps a task stored and live. */
export const parked = (name: string, version = 1) =>
  single(name, async (_t, _r, signal) => untilAborted(signal), { version });

export const ping = single("ping", async (_t, runtime) => {
  await runtime.commit(() => complete("pong"));
});

/** How many live tasks `inspect()` shows running. */
export const running = (h: Harness): number =>
  h.inspect().tasks.filter((t) => t.state.kind === "running").length;

/** The live tasks `inspect()` shows blocked: id, kind and reason. */
export const blocked = (h: Harness) =>
  h
    .inspect()
    .tasks.flatMap((t) =>
      t.state.kind === "blocked" ? [{ id: t.record.id, kind: t.record.kind, reason: t.state.reason }] : [],
    );

/** The rest of the engine keeps running: a fresh task completes. */
export async function engineStillRuns(h: Harness): Promise<void> {
  const id = await h.createTask(ping, null, { ownership: { kind: "conversation" } });
  expect(outcome(await done(h, id))).toEqual({ status: "completed", result: "pong" });
}

/** A store holding live tasks of the given parked definitions (created, started, then closed). */
export async function storeWith(
  definitions: TaskDefinition<Json, Go, Json>[],
  inputs: Json[] = [],
): Promise<{ image: MemoryStore; ids: TaskId[] }> {
  const store = await memoryStore();
  const h = await Harness.open(store);
  const ids: TaskId[] = [];
  for (const [i, d] of definitions.entries())
    ids.push(await h.createTask(d, inputs[i] ?? null, { ownership: { kind: "conversation" } }));
  await until(() => running(h) === definitions.length, { what: "parked tasks running" });
  const image = await memoryStore(store.image());
  await h.close();
  return { image, ids };
}

export async function row(store: MemoryStore, id: TaskId) {
  return store.read((sql) =>
    sql.get("SELECT version, status, input, memos, state FROM tasks WHERE id = ?", [id]),
  );
}

export type Join = { phase: "go" } | { phase: "joined" };

/**
 * Waits (allSettled) on the task whose id is its input, then completes with `result` of that
 * task's outcome (its own name by default); `wake` becomes the `joined` phase's wake continuation.
 */
export function joiner(
  name: string,
  options: { result?: (waitedOn: TaskOutcome | undefined) => Json; wake?: () => never } = {},
): TaskDefinition<number, Join, Json> {
  const { result = () => name, wake } = options;
  return defineTask<number, Join, Json>({
    name,
    version: 1,
    initial: () => ({ phase: "go" }),
    phases: {
      go: async (task, runtime) => {
        await runtime.commit(() => ({
          status: "waiting",
          checkpoint: { phase: "joined" },
          on: [task.input as TaskId],
          policy: "allSettled",
        }));
      },
      joined: async (task, runtime) => {
        const [waitedOn] = await runtime.outcomes([task.input as TaskId]);
        await runtime.commit(() => complete(result(waitedOn)));
      },
    },
    abort: async (_t, runtime) =>
      void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
    ...(wake ? { wake: { joined: wake } } : {}),
  });
}

/**
 * Creates an owned `child` (a definition taking no input) and waits on it (allSettled), then
 * completes with its own name; aborted by its handler.
 */
export function waitsOnOwnedChild<S extends { phase: string }>(
  name: string,
  child: TaskDefinition<Json, S, Json>,
): TaskDefinition<Json, Join, Json> {
  return defineTask<Json, Join, Json>({
    name,
    version: 1,
    initial: () => ({ phase: "go" }),
    phases: {
      go: async (_t, runtime) => {
        await runtime.commit((tx) => {
          const c = tx.createTask(child, null, { ownership: { kind: "task", taskId: runtime.taskId } });
          return { status: "waiting", checkpoint: { phase: "joined" }, on: [c], policy: "allSettled" };
        });
      },
      joined: async (_t, runtime) => void (await runtime.commit(() => complete(name))),
    },
    abort: async (_t, runtime) =>
      void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
  });
}
