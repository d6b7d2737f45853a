/**
 * Async prompt sections and their environment (spec §7.4, §7.1 PromptInput): a section may render
 * asynchronously, with the preparation's `env` (our workspace file system); it renders before the
 * preparing commit, which takes its text only when pi.agent is still what it rendered for; a
 * rejection keeps the text shown before and is reported; after the phase is aborted, a section's
 * error propagates instead of being reported.
 */
import { expect, test } from "vitest";
import {
  createRegistry,
  defineDoc,
  defineExtension,
  type EnvTarget,
  type Extension,
  MemoryFs,
  section,
  workspaceEnv,
} from "../../../worker/index.ts";
import { deferred } from "../../../worker/testing.ts";
import { echo, open } from "./fixtures.ts";

async function setup(list: Extension[], fs = new MemoryFs()) {
  const extensions = createRegistry();
  for (const e of list) extensions.install(e);
  const reported: string[] = [];
  const s = await open(echo, {
    extensions,
    fs,
    env: workspaceEnv(fs), // the workspace as every conversation's environment (none without a builder)
    onReport: (e) => void reported.push((e as Error).message),
  });
  const ask = async (content: string) => (await s.root.submit({ type: "input", content })).wait();
  return { ...s, reported, ask };
}

test("an async section renders with the env (the workspace) and its text reaches the request", async () => {
  const fs = new MemoryFs();
  await fs.write("AGENTS.md", "Use tabs.");
  const { ask, faux } = await setup(
    [
      defineExtension({
        name: "context-files",
        sections: [
          section("agents-md", async ({ env }) =>
            env && (await env.fs.exists("AGENTS.md")) ? await env.fs.read("AGENTS.md") : undefined,
          ),
        ],
      }),
    ],
    fs,
  );
  await ask("one");
  await fs.write("AGENTS.md", "Use spaces.");
  await ask("two");
  expect(faux.requests.map((r) => r.systemPrompt)).toEqual([
    "<agents-md>\nUse tabs.\n</agents-md>",
    "<agents-md>\nUse spaces.\n</agents-md>",
  ]);
});

test("a section that rejects keeps the text shown before and is reported; the request is still sent", async () => {
  let broken = false;
  const { ask, faux, reported } = await setup([
    defineExtension({
      name: "a",
      sections: [
        section("clock", async () => {
          await Promise.resolve();
          if (broken) throw new Error("clock broke");
          return "noon";
        }),
      ],
    }),
  ]);
  await ask("one");
  broken = true;
  expect(await ask("two")).toMatchObject({ status: "done" });
  expect(reported).toEqual(["clock broke"]);
  expect(faux.requests.map((r) => r.systemPrompt)).toEqual([
    "<clock>\nnoon\n</clock>",
    "<clock>\nnoon\n</clock>",
  ]);
});

test("a section's own abort error (its fetch timing out), with the phase not aborted, is an ordinary failure: reported, the shown text kept, the request sent", async () => {
  let failing: "timeout" | "abort" | undefined;
  const { ask, faux, reported } = await setup([
    defineExtension({
      name: "a",
      sections: [
        section("weather", async () => {
          if (failing === "timeout") await fetchTimingOut();
          // Its own controller aborted with no reason: an "AbortError", told from the phase's by the phase's signal only.
          if (failing === "abort") await fetchAbortedByItself();
          return "sunny";
        }),
      ],
    }),
  ]);
  await ask("one");
  failing = "timeout";
  expect(await ask("two")).toMatchObject({ status: "done" });
  expect(reported).toHaveLength(1);
  expect(reported[0]).toMatch(/timed out/);
  failing = "abort";
  expect(await ask("three")).toMatchObject({ status: "done" });
  expect(reported).toHaveLength(2);
  expect(faux.requests.map((r) => r.systemPrompt)).toEqual([
    "<weather>\nsunny\n</weather>",
    "<weather>\nsunny\n</weather>",
    "<weather>\nsunny\n</weather>",
  ]);
});

/** What a fetch whose own controller was aborted throws: an "AbortError" of a signal not the phase's. */
async function fetchAbortedByItself(): Promise<never> {
  const own = new AbortController();
  own.abort();
  own.signal.throwIfAborted();
  throw new Error("unreachable");
}

/** What a fetch with its own timeout throws: an abort of a signal of its own, not the phase's. */
async function fetchTimingOut(): Promise<never> {
  const own = new AbortController();
  own.abort(new DOMException("The operation timed out.", "TimeoutError"));
  own.signal.throwIfAborted();
  throw new Error("unreachable");
}

/**
 * Extension "a" with one section, "notes" (text "n"), whose first render inside a published run is
 * held until `release` (the preparing phase's render: a creating commit's attempt runs before the
 * run is published). `bind` gives it the engine whose `pi.live` it reads.
 */
function heldNotes() {
  const entered = deferred<void>();
  const release = deferred<void>();
  let engine: { docNow(c: number, name: string): unknown } | undefined;
  let held = false;
  const extension = defineExtension({
    name: "a",
    sections: [
      section("notes", async ({ conversationId }) => {
        const live = engine?.docNow(conversationId, "pi.live") as { run?: unknown } | undefined;
        if (live?.run && !held) {
          held = true;
          entered.resolve();
          await release.promise;
        }
        return "n";
      }),
    ],
  });
  const bind = (h: { docNow(c: number, name: string): unknown }) => {
    engine = h;
  };
  return { entered, release, extension, bind };
}

test("pi.agent changed while an async section rendered: the preparation renders again for the new agent", async () => {
  const { entered, release, extension, bind } = heldNotes();
  const { h, root, faux } = await setup([extension]);
  bind(h);
  const submission = await root.submit({ type: "input", content: "one" });
  await entered.promise;
  await root.configure({ instructions: "Be brief." });
  release.resolve();
  expect(await submission.wait()).toMatchObject({ status: "done" });
  expect(faux.requests[0]!.systemPrompt).toBe(
    "<notes>\nn\n</notes>\n\n<instructions>\nBe brief.\n</instructions>",
  );
});

test("a section's error after the preparing phase was aborted propagates: not reported, the run ends aborted", async () => {
  const entered = deferred<void>();
  const { root, reported, faux } = await setup([
    defineExtension({
      name: "a",
      sections: [
        section("slow", async (_input, ctx) => {
          entered.resolve();
          await new Promise((resolve) => ctx.signal.addEventListener("abort", resolve, { once: true }));
          throw new Error("render stopped");
        }),
      ],
    }),
  ]);
  const submission = await root.submit({ type: "input", content: "one" });
  await entered.promise;
  await root.abort();
  // The run ends aborted (reading 24a: only "unanswered" was read, which a fault gives too).
  expect(await submission.wait()).toMatchObject({ status: "unanswered", reason: "aborted" });
  expect(reported).toEqual([]);
  expect(faux.requests).toHaveLength(0);
});

test("the selection changed while an async section rendered: the preparation renders again, with the newly selected extension's section (draw 34D)", async () => {
  // Draw 34D: the named test changes only the instructions; taking the render whenever the
  // instructions were unchanged (a new selection ignored) passed it.
  const { entered, release, extension, bind } = heldNotes();
  const { h, root, faux } = await setup([
    extension,
    defineExtension({ name: "b", sections: [section("extra", () => "e")] }),
  ]);
  bind(h);
  await root.configure({ extensions: ["a"] });
  const submission = await root.submit({ type: "input", content: "one" });
  await entered.promise;
  await root.configure({ extensions: ["a", "b"] });
  release.resolve();
  expect(await submission.wait()).toMatchObject({ status: "done" });
  expect(faux.requests[0]!.systemPrompt).toBe("<notes>\nn\n</notes>\n\n<extra>\ne\n</extra>");
});

test("an env builder's error after the preparing phase was aborted propagates: not reported, the run ends aborted (draw 34D)", async () => {
  // Draw 34D: the named test's section fails after the abort; a builder's failure after it was
  // reported (the sections rendering with none) and passed every test.
  const entered = deferred<void>();
  const extensions = createRegistry();
  extensions.install(defineExtension({ name: "a", sections: [section("notes", () => "n")] }));
  const reported: unknown[] = [];
  const { root, faux } = await open(echo, {
    extensions,
    env: async (_target, { signal }) => {
      entered.resolve();
      await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
      throw new Error("builder stopped");
    },
    onReport: (e) => void reported.push(e),
  });
  const submission = await root.submit({ type: "input", content: "one" });
  await entered.promise;
  await root.abort();
  expect(await submission.wait()).toMatchObject({ status: "unanswered", reason: "aborted" });
  expect(reported).toEqual([]);
  expect(faux.requests).toHaveLength(0);
});

test("a section's input.read is the spec's DocumentReader: read.snapshot of its own or another conversation, read.snapshotAsOf at an entry, read(name); the env builder's target.read is the same (draw 41b, 4)", async () => {
  // Draw 41b (D, 4): PromptInput had only `read(name)` of its own conversation, where spec §7.4 gives a
  // DocumentReader (`snapshot`, `snapshotAsOf`, of any conversation); the env target likewise (§2.2).
  const Note = defineDoc<{ text: string }>({
    name: "app.note",
    history: "rewindable",
    fork: "asOf",
    initial: { text: "" },
  });
  const seen: unknown[] = [];
  const targets: unknown[] = [];
  let otherId = 0;
  let at = 0;
  const extensions = createRegistry();
  extensions.install(
    defineExtension({
      name: "reads",
      sections: [
        section("reads", async (input) => {
          if (at === 0) return undefined;
          seen.push({
            own: await input.read.snapshot("app.note"),
            other: await input.read.snapshot("app.note", otherId),
            absent: await input.read.snapshot("app.absent", otherId),
            asOf: await input.read.snapshotAsOf("app.note", at),
            asOfNamed: await input.read.snapshotAsOf("app.note", at, input.conversationId),
            read: input.read("app.note"),
          });
          return "read";
        }),
      ],
    }),
  );
  const fs = new MemoryFs();
  const s = await open(echo, {
    extensions,
    fs,
    env: async (target: EnvTarget) => {
      if (at !== 0)
        targets.push({
          other: await target.read.snapshot("app.note", otherId),
          own: target.read("app.note"),
        });
      return { fs };
    },
  });
  const other = await s.h.createConversation({ ownership: { kind: "ownerless" } });
  otherId = other.id;
  await other.commit((tx) => Note.write(tx, other.id, { text: "other's" }));
  await s.root.commit((tx) => Note.write(tx, s.root.id, { text: "first" }));
  await (await s.root.submit({ type: "input", content: "one" })).wait();
  at = (await s.root.entries()).at(-1)!.id;
  await s.root.commit((tx) => Note.write(tx, s.root.id, { text: "second" }));
  await (await s.root.submit({ type: "input", content: "two" })).wait();
  expect(seen).toEqual([
    {
      own: { text: "second" },
      other: { text: "other's" },
      absent: undefined,
      asOf: { text: "first" },
      asOfNamed: { text: "first" },
      read: { text: "second" },
    },
  ]);
  expect(targets).toEqual([{ other: { text: "other's" }, own: { text: "second" } }]);
  // Reading created nothing: the other conversation has no app.absent.
  expect(await s.h.snapshot(defineDoc({ name: "app.absent", initial: {} }), other.id)).toBeUndefined();
});
