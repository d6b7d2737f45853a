/**
 * `runtime.hooks.each` (spec §7.2) for tasks an extension defines: the handlers registered under the
 * task's name by the extensions its conversation selects, in extension order, resolved once per
 * phase; an ordinary throw is reported and the next handler runs; once the invocation is signalled
 * the error propagates. Each handler gets the asking task's HookApi.
 */
import { expect, test } from "vitest";
import {
  agentHooks,
  createRegistry,
  defineExtension,
  defineTask,
  type Extension,
  type HookApi,
  hook,
  type Json,
  type TaskRuntime,
} from "../../../worker/index.ts";
import { deferred } from "../../../worker/testing.ts";
import { abortedByHandler, done, outcome } from "../core/fixtures.ts";
import { echo, open } from "./fixtures.ts";

/** The hooks of the `app.review` task: one question, answered with a word. */
interface ReviewHooks {
  inspect(input: string, api: HookApi, ctx: { signal: AbortSignal }): string | Promise<string>;
}

type Review = { phase: "first" } | { phase: "second"; first: string[] };

const answering = (name: string, word: string, spy?: (api: HookApi) => void): Extension =>
  defineExtension({
    name,
    hooks: [
      hook("app.review", {
        inspect: (input: string, api: HookApi) => {
          spy?.(api);
          return `${word}:${input}`;
        },
      }),
      // A hook of another task under the same handler name is never asked by app.review.
      hook("other.task", { inspect: () => `${word}:other` }),
    ],
  });

test("an extension task asks its conversation's selected hooks in extension order; a throw is reported, the next runs; once per phase", async () => {
  const reports: unknown[] = [];
  const apis: HookApi[] = [];
  const answers: string[][] = [];
  let reinstall: () => Promise<void> = async () => undefined;
  const ask = async (runtime: TaskRuntime<Json, Review, Json, ReviewHooks>) => {
    const words: string[] = [];
    await agentHooks<ReviewHooks>(runtime).each("inspect", async (handler, api) => {
      words.push(await handler("diff", api, { signal: runtime.signal }));
    });
    return words;
  };
  const review = defineTask<Json, Review, Json, ReviewHooks>({
    name: "app.review",
    version: 1,
    initial: () => ({ phase: "first" }),
    phases: {
      first: async (_task, runtime) => {
        const before = await ask(runtime);
        // A reinstall and a new selection (pi.agent) while the phase runs: this phase keeps the hooks
        // it resolved from its snapshot and the pi.agent it read.
        await reinstall();
        const after = await ask(runtime);
        answers.push(before, after);
        await runtime.commit(() => ({ status: "running", checkpoint: { phase: "second", first: before } }));
      },
      second: async (_task, runtime) => {
        answers.push(await ask(runtime));
        await runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: null } }));
      },
    },
    abort: abortedByHandler as never,
  });
  const extensions = createRegistry();
  extensions.install(defineExtension({ name: "jobs", tasks: [review] }));
  extensions.install(answering("a", "a", (api) => apis.push(api)));
  extensions.install(
    defineExtension({
      name: "thrower",
      hooks: [
        hook("app.review", {
          inspect: () => {
            throw new Error("thrower broke");
          },
        }),
      ],
    }),
  );
  extensions.install(answering("b", "b"));
  extensions.install(answering("unselected", "u"));
  const { h, root } = await open(echo, { extensions, onReport: (e) => reports.push(e) });
  reinstall = async () => {
    extensions.install(answering("a", "a2"));
    await root.configure({ extensions: ["jobs", "a", "thrower", "b"] });
  };
  // Selected in an order other than the install order: the selection's order is the one asked.
  await root.configure({ extensions: ["jobs", "b", "thrower", "a"] });
  const id = await h.createTask(review, null, { ownership: { kind: "conversation" } });
  expect(outcome(await done(h, id))).toEqual({ status: "completed", result: null });
  expect(answers).toEqual([
    ["b:diff", "a:diff"],
    ["b:diff", "a:diff"],
    // The next phase resolves again: the replacement, in the new selection's order.
    ["a2:diff", "b:diff"],
  ]);
  expect(reports.map((e) => (e as Error).message)).toEqual([
    "thrower broke",
    "thrower broke",
    "thrower broke",
  ]);
  expect(apis[0]).toMatchObject({ taskId: id, conversationId: root.id });
  // A snapshot reads the committed document now: the selection changed during the first phase.
  expect(await apis[0]!.snapshot("pi.agent")).toEqual({ extensions: ["jobs", "a", "thrower", "b"] });
  expect(apis[0]!.models).toBe(h.services.models);
  // A DocumentReader reads any conversation's committed documents, not only the asking one's.
  const other = await h.createConversation({
    ownership: { kind: "ownerless" },
    agent: { instructions: "other" },
  });
  expect(await apis[0]!.snapshot("pi.agent", other.id)).toEqual({ instructions: "other" });
  expect(await apis[0]!.snapshot("app.absent", other.id)).toBeUndefined();
});

test("each asks the hooks of the phase's registry snapshot: a replacement installed after the phase began, before its first dispatch, reaches only the next phase (break 30F)", async () => {
  // Spec §7.1: the scheduler takes a registry snapshot per phase-handler invocation; a phase's hooks
  // resolve at its first dispatch "from that phase's snapshot and the committed pi.agent". Break 30F:
  // the engine read the registry as it was at the first dispatch, so an install between the phase's
  // start and that dispatch was asked at once (the named test installs only after its first ask).
  const extensions = createRegistry();
  const answers: string[][] = [];
  const ask = async (runtime: TaskRuntime<Json, Review, Json, ReviewHooks>) => {
    const words: string[] = [];
    await agentHooks<ReviewHooks>(runtime).each("inspect", async (handler, api) => {
      words.push(await handler("diff", api, { signal: runtime.signal }));
    });
    return words;
  };
  const review = defineTask<Json, Review, Json, ReviewHooks>({
    name: "app.review",
    version: 1,
    initial: () => ({ phase: "first" }),
    phases: {
      first: async (_task, runtime) => {
        extensions.install(answering("a", "a2"));
        answers.push(await ask(runtime));
        await runtime.commit(() => ({ status: "running", checkpoint: { phase: "second", first: [] } }));
      },
      second: async (_task, runtime) => {
        answers.push(await ask(runtime));
        await runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: null } }));
      },
    },
    abort: abortedByHandler as never,
  });
  extensions.install(defineExtension({ name: "jobs", tasks: [review] }));
  extensions.install(answering("a", "a"));
  const { h } = await open(echo, { extensions });
  const id = await h.createTask(review, null, { ownership: { kind: "conversation" } });
  expect(outcome(await done(h, id))).toEqual({ status: "completed", result: null });
  expect(answers).toEqual([["a:diff"], ["a2:diff"]]);
});

test("an abort handler asks the hooks of its own invocation's registry snapshot: a replacement installed after it began, before its first dispatch, is not asked (draw 32b)", async () => {
  // Draw 32b: an abort invocation that took no snapshot of its own (its hooks resolved from the
  // registry as it stood at its first dispatch) passed every named test; they ask hooks in run phases only.
  const extensions = createRegistry();
  const answers: string[][] = [];
  const ask = async (runtime: TaskRuntime<Json, { phase: "go" }, Json, ReviewHooks>) => {
    const words: string[] = [];
    await agentHooks<ReviewHooks>(runtime).each("inspect", async (handler, api) => {
      words.push(await handler("diff", api, { signal: runtime.signal }));
    });
    return words;
  };
  const started = deferred<void>();
  const review = defineTask<Json, { phase: "go" }, Json, ReviewHooks>({
    name: "app.review",
    version: 1,
    initial: () => ({ phase: "go" }),
    phases: {
      go: async (_task, runtime) => {
        started.resolve();
        await new Promise((resolve) => runtime.signal.addEventListener("abort", resolve, { once: true }));
      },
    },
    abort: async (_task, runtime) => {
      extensions.install(answering("a", "a2"));
      answers.push(await ask(runtime));
      await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted", reason: "asked" } }));
    },
  });
  extensions.install(defineExtension({ name: "jobs", tasks: [review] }));
  extensions.install(answering("a", "a"));
  const { h } = await open(echo, { extensions });
  const id = await h.createTask(review, null, { ownership: { kind: "conversation" } });
  await started.promise;
  expect(await h.abortTask(id)).toBe("marked");
  expect(outcome(await done(h, id))).toEqual({ status: "aborted", reason: "asked" });
  expect(answers).toEqual([["a:diff"]]);
});

test("a hook's error after the task was signalled propagates from each, unreported", async () => {
  const reports: unknown[] = [];
  let propagated: unknown;
  const review = defineTask<Json, { phase: "go" }, Json, ReviewHooks>({
    name: "app.review",
    version: 1,
    initial: () => ({ phase: "go" }),
    phases: {
      go: async (_task, runtime) => {
        try {
          await agentHooks<ReviewHooks>(runtime).each("inspect", (handler, api) =>
            handler("diff", api, { signal: runtime.signal }),
          );
        } catch (error) {
          propagated = error;
          throw error;
        }
      },
    },
    abort: abortedByHandler as never,
  });
  const extensions = createRegistry();
  extensions.install(defineExtension({ name: "jobs", tasks: [review] }));
  let abort: (id: number) => void = () => undefined;
  extensions.install(
    defineExtension({
      name: "slow",
      hooks: [
        hook("app.review", {
          inspect: async (_input: string, api: HookApi, ctx: { signal: AbortSignal }) => {
            abort(api.taskId);
            await new Promise((resolve) => ctx.signal.addEventListener("abort", resolve, { once: true }));
            throw new Error("stopped while asked");
          },
        }),
      ],
    }),
  );
  // Break 30K: an error held until every handler was asked passed; the next handler is never asked.
  const askedAfter: number[] = [];
  extensions.install(answering("after", "after", (api) => void askedAfter.push(api.taskId)));
  const { h } = await open(echo, { extensions, onReport: (e) => reports.push(e) });
  abort = (id) => void h.abortTask(id as never);
  const id = await h.createTask(review, null, { ownership: { kind: "conversation" } });
  expect(outcome(await done(h, id))?.status).toBe("aborted");
  expect((propagated as Error).message).toBe("stopped while asked");
  expect(reports).toEqual([]);
  expect(askedAfter).toEqual([]);
});

test("with no selection of its own, an extension task asks the hooks of settings.extensions' base, in its order; { remove } edits that base", async () => {
  // Break 28G: the base was asserted through the tools a request offers only; a task's hooks are
  // selected by their own path.
  const review = defineTask<Json, { phase: "go" }, Json, ReviewHooks>({
    name: "app.review",
    version: 1,
    initial: () => ({ phase: "go" }),
    phases: {
      go: async (_task, runtime) => {
        const words: string[] = [];
        await agentHooks<ReviewHooks>(runtime).each("inspect", async (handler, api) => {
          words.push(await handler("diff", api, { signal: runtime.signal }));
        });
        await runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: words } }));
      },
    },
    abort: abortedByHandler as never,
  });
  const extensions = createRegistry();
  extensions.install(defineExtension({ name: "jobs", tasks: [review] }));
  extensions.install(answering("a", "a"));
  extensions.install(answering("b", "b"));
  extensions.install(answering("unselected", "u"));
  // The base through a settings getter, read at each resolution (draw 36b-A: the hook source keeping
  // the base of its first reading passed every test: the base never changed).
  let base = ["jobs", "b", "a"];
  const { h, root } = await open(echo, {
    extensions,
    settings: {
      get extensions() {
        return base;
      },
    },
  });
  const run = async () =>
    outcome(await done(h, await h.createTask(review, null, { ownership: { kind: "conversation" } })));
  expect(await run()).toEqual({ status: "completed", result: ["b:diff", "a:diff"] });
  await root.configure({ extensions: { remove: ["b"] } });
  expect(await run()).toEqual({ status: "completed", result: ["a:diff"] });
  // The host's base changes, with no commit: the next task's phase asks the new base, still edited.
  base = ["jobs", "a", "unselected", "b"];
  expect(await run()).toEqual({ status: "completed", result: ["a:diff", "u:diff"] });
});

test("an extension task in a conversation other than the root asks that conversation's selected hooks, not the root's", async () => {
  // Break 29E: the named tests ran their task in the root only; the selection read from the root
  // passed them.
  const review = defineTask<Json, { phase: "go" }, Json, ReviewHooks>({
    name: "app.review",
    version: 1,
    initial: () => ({ phase: "go" }),
    phases: {
      go: async (_task, runtime) => {
        const words: string[] = [];
        await agentHooks<ReviewHooks>(runtime).each("inspect", async (handler, api) => {
          words.push(await handler("diff", api, { signal: runtime.signal }));
        });
        await runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: words } }));
      },
    },
    abort: abortedByHandler as never,
  });
  const extensions = createRegistry();
  extensions.install(defineExtension({ name: "jobs", tasks: [review] }));
  extensions.install(answering("a", "a"));
  extensions.install(answering("b", "b"));
  const { h, root } = await open(echo, { extensions });
  await root.configure({ extensions: ["jobs", "a"] });
  const other = await h.createConversation({
    ownership: { kind: "ownerless" },
    agent: { extensions: ["jobs", "b"] },
  });
  const run = async (conversationId: typeof root.id) =>
    outcome(
      await done(
        h,
        await h.createTask(review, null, { ownership: { kind: "conversation" }, conversationId }),
      ),
    );
  expect(await run(other.id)).toEqual({ status: "completed", result: ["b:diff"] });
  expect(await run(root.id)).toEqual({ status: "completed", result: ["a:diff"] });
});

test("each asks every registration an extension makes for the task, in registration order; a throw is reported as the very error thrown; a phase entered again under the same name resolves again (draw 34D)", async () => {
  // Draw 34D: every named extension registered one hook for the task, reports were read by message,
  // and each phase had a name of its own; taking one registration per extension, reporting a copy of
  // the error, and keying the phase's hooks by its name each passed them.
  class HookFailure extends Error {}
  const thrown: Error[] = [];
  type Loop = { phase: "loop"; round: number };
  let reinstall: () => void = () => undefined;
  const review = defineTask<Json, Loop, Json, ReviewHooks>({
    name: "app.review",
    version: 1,
    initial: () => ({ phase: "loop", round: 0 }),
    phases: {
      loop: async (task, runtime) => {
        const words: string[] = [];
        await agentHooks<ReviewHooks>(runtime).each("inspect", async (handler, api) => {
          words.push(await handler("diff", api, { signal: runtime.signal }));
        });
        const round = task.state.checkpoint.round;
        answers.push(words);
        if (round === 0) reinstall();
        await runtime.commit(() =>
          round === 0
            ? { status: "running", checkpoint: { phase: "loop", round: 1 } }
            : { status: "terminal", outcome: { status: "completed", result: null } },
        );
      },
    },
    abort: abortedByHandler as never,
  });
  const answers: string[][] = [];
  const pair = (a: string, b: string): Extension =>
    defineExtension({
      name: "pair",
      hooks: [
        hook("app.review", { inspect: (input: string) => `${a}:${input}` }),
        hook("app.review", {
          inspect: () => {
            const error = new HookFailure(`${a} broke`);
            thrown.push(error);
            throw error;
          },
        }),
        hook("app.review", { inspect: (input: string) => `${b}:${input}` }),
      ],
    });
  const extensions = createRegistry();
  extensions.install(defineExtension({ name: "jobs", tasks: [review] }));
  extensions.install(pair("p1", "p2"));
  extensions.install(answering("last", "z"));
  reinstall = () => extensions.install(pair("q1", "q2"));
  const reports: unknown[] = [];
  const { h } = await open(echo, { extensions, onReport: (e) => reports.push(e) });
  const id = await h.createTask(review, null, { ownership: { kind: "conversation" } });
  expect(outcome(await done(h, id))).toEqual({ status: "completed", result: null });
  expect(answers).toEqual([
    ["p1:diff", "p2:diff", "z:diff"],
    ["q1:diff", "q2:diff", "z:diff"],
  ]);
  expect(thrown).toHaveLength(2);
  expect(reports).toHaveLength(2);
  for (const [i, error] of thrown.entries()) {
    expect(reports[i]).toBe(error);
    expect(reports[i]).toBeInstanceOf(HookFailure);
  }
});

test("each reports a hook's throw of any value, not only an Error: a string, a plain object and undefined are reported and the next hook runs (sweep 42b)", async () => {
  // Sweep 42b, 66: the named test's hook threw an Error; each rethrowing any other thrown value
  // (the task faulting on a string) passed it.
  const reports: unknown[] = [];
  const thrown: unknown[] = ["a string", { code: 7 }, undefined];
  let words: string[] = [];
  const review = defineTask<Json, Review, Json, ReviewHooks>({
    name: "app.review",
    version: 1,
    initial: () => ({ phase: "first" }),
    phases: {
      first: async (_task, runtime) => {
        await agentHooks<ReviewHooks>(runtime).each("inspect", async (handler, api) => {
          words.push(await handler("diff", api, { signal: runtime.signal }));
        });
        await runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: words } }));
      },
      second: async () => undefined,
    },
    abort: abortedByHandler as never,
  });
  const extensions = createRegistry();
  extensions.install(defineExtension({ name: "jobs", tasks: [review] }));
  const names = ["jobs"];
  thrown.forEach((value, i) => {
    extensions.install(
      defineExtension({
        name: `thrower${i}`,
        hooks: [
          hook("app.review", {
            inspect: () => {
              throw value;
            },
          }),
        ],
      }),
    );
    extensions.install(answering(`after${i}`, `w${i}`));
    names.push(`thrower${i}`, `after${i}`);
  });
  const { h, root } = await open(echo, { extensions, onReport: (e) => reports.push(e) });
  await root.configure({ extensions: names });
  words = [];
  const id = await h.createTask(review, null, { ownership: { kind: "conversation" } });
  expect(outcome(await done(h, id))).toEqual({
    status: "completed",
    result: ["w0:diff", "w1:diff", "w2:diff"],
  });
  expect(reports).toEqual(thrown);
  await h.close();
});

test("each asks only the handlers registered under its name: a name every object inherits (toString) asks none (sweep 42b)", async () => {
  const asked: unknown[] = [];
  const review = defineTask<Json, Review, Json, ReviewHooks>({
    name: "app.review",
    version: 1,
    initial: () => ({ phase: "first" }),
    phases: {
      first: async (_task, runtime) => {
        for (const name of ["toString", "constructor", "hasOwnProperty"])
          await agentHooks<ReviewHooks>(runtime).each(name as never, async (handler) => {
            asked.push([name, typeof handler]);
          });
        await runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: null } }));
      },
      second: async () => undefined,
    },
    abort: abortedByHandler as never,
  });
  const extensions = createRegistry();
  extensions.install(defineExtension({ name: "jobs", tasks: [review] }));
  extensions.install(answering("a", "a"));
  const { h, root } = await open(echo, { extensions });
  await root.configure({ extensions: ["jobs", "a"] });
  const id = await h.createTask(review, null, { ownership: { kind: "conversation" } });
  expect(outcome(await done(h, id))).toEqual({ status: "completed", result: null });
  expect(asked).toEqual([]);
  await h.close();
});
