/**
 * Hot reload (spec §7.5, issue 14 item 3): replacing an extension never interrupts work already
 * started. A running tool call keeps the implementation it resolved until its execution ends and the
 * next call uses the new one; a phase keeps the hooks it resolved at its start, and the next phase
 * sees the replacement; a replaced extension keeps its install position.
 */
import { fauxAssistantMessage, fauxToolCall } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { expect, test } from "vitest";
import {
  createRegistry,
  defineExtension,
  defineTool,
  hook,
  section,
  textResult,
} from "../../../worker/index.ts";
import { deferred, type FauxResponder } from "../../../worker/testing.ts";
import {
  callsThenAnswer,
  echo,
  heldFirstCallTool,
  messageOf,
  open,
  textOf,
  toolResults,
} from "../agent/fixtures.ts";

/** Every user message gets one call of `work`, then an answer. */
const callWorkEachTurn: FauxResponder = (req, n) => {
  const lastMessage = req.messages[req.messages.length - 1]!;
  return lastMessage.role === "user"
    ? fauxAssistantMessage([fauxToolCall("work", {}, { id: `call-${n}` })], { stopReason: "toolUse" })
    : fauxAssistantMessage("done");
};

test("a tool replaced while one of its calls runs: that call finishes on the old code, the next call uses the new", async () => {
  const started = deferred();
  const release = deferred();
  let v1Signal: AbortSignal | undefined;
  const v1 = defineTool({
    name: "work",
    description: "version 1",
    parameters: Type.Object({}),
    async execute(_args, api) {
      v1Signal = api.signal;
      started.resolve();
      await release.promise;
      return textResult("v1 result");
    },
  });
  const v2 = defineTool({
    name: "work",
    description: "version 2",
    parameters: Type.Object({}),
    execute: async () => textResult("v2 result"),
  });
  const extensions = createRegistry();
  extensions.install(defineExtension({ name: "first" }));
  extensions.install(defineExtension({ name: "worker", tools: [v1] }));
  extensions.install(defineExtension({ name: "last" }));
  const { root } = await open(callWorkEachTurn, { extensions });
  const one = await root.submit({ type: "input", content: "one" });
  await started.promise;
  extensions.install(defineExtension({ name: "worker", tools: [v2] }));
  // The replacement keeps its install position.
  expect(
    extensions
      .snapshot()
      .installed()
      .map((e) => e.name),
  ).toEqual(["first", "worker", "last"]);
  // Spec §7.5: replacement never signals or interrupts the running call (reading 24a).
  await Promise.resolve();
  expect(v1Signal!.aborted).toBe(false);
  release.resolve();
  expect(await one.wait()).toMatchObject({ status: "done" });
  await (await root.submit({ type: "input", content: "two" })).wait();
  expect((await toolResults(root)).map((e) => textOf(messageOf(e)))).toEqual(["v1 result", "v2 result"]);
});

test("a tool replaced while the first call of a sequential round runs: that call finishes on the old code, the round's next call runs the new", async () => {
  // Break 31A: the named test's next call is in a new run; tools pinned for a whole round (by its
  // answer) passed it.
  const started = deferred();
  const release = deferred();
  const work = (text: string, gate?: Promise<void>) =>
    defineTool({
      name: "work",
      description: text,
      parameters: Type.Object({}),
      executionMode: "sequential",
      async execute() {
        if (gate) {
          started.resolve();
          await gate;
        }
        return textResult(text);
      },
    });
  const extensions = createRegistry();
  extensions.install(defineExtension({ name: "worker", tools: [work("old code", release.promise)] }));
  const { root } = await open(
    callsThenAnswer(fauxToolCall("work", {}, { id: "c1" }), fauxToolCall("work", {}, { id: "c2" })),
    { extensions },
  );
  const one = await root.submit({ type: "input", content: "one" });
  await started.promise;
  extensions.install(defineExtension({ name: "worker", tools: [work("new code")] }));
  release.resolve();
  expect(await one.wait()).toMatchObject({ status: "done" });
  expect((await toolResults(root)).map((e) => textOf(messageOf(e)))).toEqual(["old code", "new code"]);
});

test("a call running when its tool is replaced keeps the old definition through its result: the new version's tighter output limits do not cut it", async () => {
  const started = deferred();
  const release = deferred();
  const long = Array.from({ length: 20 }, (_, i) => `line ${i}`).join("\n");
  const v1 = defineTool({
    name: "work",
    description: "version 1",
    parameters: Type.Object({}),
    async execute() {
      started.resolve();
      await release.promise;
      return textResult(long);
    },
  });
  const v2 = defineTool({
    name: "work",
    description: "version 2",
    parameters: Type.Object({}),
    outputLimits: { maxLines: 2, maxBytes: 20 },
    execute: async () => textResult(long),
  });
  const extensions = createRegistry();
  extensions.install(defineExtension({ name: "worker", tools: [v1] }));
  const { root } = await open(callWorkEachTurn, { extensions });
  const one = await root.submit({ type: "input", content: "one" });
  await started.promise;
  extensions.install(defineExtension({ name: "worker", tools: [v2] }));
  release.resolve();
  expect(await one.wait()).toMatchObject({ status: "done" });
  await (await root.submit({ type: "input", content: "two" })).wait();
  const [first, second] = (await toolResults(root)).map((e) => textOf(messageOf(e)));
  expect(first).toBe(long);
  // The next call runs the new version, bounded by its limits.
  expect(second).toMatch(/^line 0\nline 1</);
  expect(second).not.toContain("line 19");
});

test("a tool call keeps the afterTool hooks its phase resolved: a replacement installed while it runs reaches only the next call", async () => {
  // Draw 28d (spec §7.1: a phase's handlers and hooks use the snapshot taken at its start): the
  // named tests replaced generation hooks and the tool itself, never a tool hook during a call.
  const { tool: work, started, release } = heldFirstCallTool();
  const tagger = (name: string) =>
    defineExtension({
      name: "tagger",
      hooks: [
        hook("pi.tool", { afterTool: (call) => textResult(`${textOf(call.result as never)} ${name}`) }),
      ],
    });
  const extensions = createRegistry();
  extensions.install(defineExtension({ name: "worker", tools: [work] }));
  extensions.install(tagger("old"));
  const { root } = await open(callWorkEachTurn, { extensions });
  const one = await root.submit({ type: "input", content: "one" });
  await started.promise;
  extensions.install(tagger("new"));
  release.resolve();
  expect(await one.wait()).toMatchObject({ status: "done" });
  await (await root.submit({ type: "input", content: "two" })).wait();
  expect((await toolResults(root)).map((e) => textOf(messageOf(e)))).toEqual(["ran old", "ran new"]);
});

test("a tool task started after a replacement runs the new code, even for a call the old declaration was offered in", async () => {
  // Reading 24a (spec §7.5: "new phase invocations and tool tasks use the new extension
  // immediately"; §7.1: the tool task resolves the implementation at its own phase): the named test's
  // next call was in a new run, prepared after the replacement.
  const inRequest = deferred();
  const answer = deferred();
  const respond: FauxResponder = async (req, n) => {
    if (n === 1) {
      inRequest.resolve();
      await answer.promise;
    }
    return callWorkEachTurn(req, n);
  };
  const work = (text: string) =>
    defineTool({
      name: "work",
      description: text,
      parameters: Type.Object({}),
      execute: async () => textResult(text),
    });
  const extensions = createRegistry();
  extensions.install(defineExtension({ name: "worker", tools: [work("old code")] }));
  const { root, faux } = await open(respond, { extensions });
  const one = await root.submit({ type: "input", content: "one" });
  await inRequest.promise;
  // The request in flight offered the old declaration; the call's tool task starts after this.
  extensions.install(defineExtension({ name: "worker", tools: [work("new code")] }));
  answer.resolve();
  expect(await one.wait()).toMatchObject({ status: "done" });
  expect(faux.requests[0]!.declarations.map((d) => d.description)).toEqual(["old code"]);
  expect((await toolResults(root)).map((e) => textOf(messageOf(e)))).toEqual(["new code"]);
});

test("a phase keeps the hooks it resolved at its start; the next phase uses the replacement", async () => {
  const inRequest = deferred();
  const answer = deferred();
  let held = true;
  const respond: FauxResponder = async (req, n) => {
    if (held && n === 1) {
      inRequest.resolve();
      await answer.promise;
    }
    return echo(req, n);
  };
  const seen: string[] = [];
  const observer = (name: string) =>
    defineExtension({
      name: "observer",
      hooks: [hook("pi.generation", { afterResponse: (m) => void seen.push(`${name}:${textOf(m)}`) })],
    });
  const extensions = createRegistry();
  extensions.install(observer("old"));
  const { root } = await open(respond, { extensions });
  const one = await root.submit({ type: "input", content: "one" });
  await inRequest.promise;
  // The request phase already started with the old hooks: it keeps them until it settles.
  extensions.install(observer("new"));
  held = false;
  answer.resolve();
  await one.wait();
  await (await root.submit({ type: "input", content: "two" })).wait();
  expect(seen).toEqual(["old:echo: one", "new:echo: two"]);
});

test("uninstalling an extension mid-run: the running phase keeps its tool, the next preparation drops its tool and its section with one system delta; nothing is rewritten", async () => {
  const started = deferred();
  const release = deferred();
  const work = defineTool({
    name: "work",
    description: "held",
    parameters: Type.Object({}),
    async execute() {
      started.resolve();
      await release.promise;
      return textResult("worked");
    },
  });
  const extensions = createRegistry();
  extensions.install(
    defineExtension({
      name: "worker",
      tools: [work],
      sections: [section("worker-notes", () => "Use work.")],
    }),
  );
  const { h, root, faux } = await open(callWorkEachTurn, { extensions });
  const one = await root.submit({ type: "input", content: "one" });
  await started.promise;
  const before = (await root.entries()).filter((e) => e.kind === "pi.system");
  const agentBefore = h.docNow(root.id, "pi.agent");
  extensions.uninstall("worker");
  release.resolve();
  expect(await one.wait()).toMatchObject({ status: "done" });
  expect((await toolResults(root)).map((e) => textOf(messageOf(e)))).toEqual(["worked"]);
  // The request after the round was prepared without the tool and the section: one delta removed both.
  expect(faux.requests.map((r) => r.tools)).toEqual([["work"], []]);
  expect(faux.requests[0]!.systemPrompt).toContain("Use work.");
  expect(faux.requests[1]!.systemPrompt ?? "").not.toContain("Use work.");
  const systems = (await root.entries()).filter((e) => e.kind === "pi.system");
  const messages = systems.map(
    (e) => (e.model as unknown as Array<{ toolsRemoved?: string[]; sections?: Record<string, unknown> }>)[0]!,
  );
  expect(messages.map((m) => m.toolsRemoved)).toEqual([undefined, ["work"]]);
  expect(messages[1]!.sections).toEqual({ "worker-notes": null });
  // Nothing is rewritten: the baseline entry stays as it was, and pi.agent is untouched.
  expect(systems[0]).toEqual(before[0]);
  expect(before).toHaveLength(1);
  expect(h.docNow(root.id, "pi.agent")).toEqual(agentBefore);
  // Installed again, with a new declaration: the next preparation adds it back in one delta, and the
  // request declares the tool as it is now.
  const again = defineTool({
    name: "work",
    description: "installed again",
    parameters: Type.Object({}),
    execute: async () => textResult("worked again"),
  });
  extensions.install(defineExtension({ name: "worker", tools: [again] }));
  expect(await (await root.submit({ type: "input", content: "two" })).wait()).toMatchObject({
    status: "done",
  });
  const added = (await root.entries())
    .filter((e) => e.kind === "pi.system")
    .map((e) => (e.model as unknown as Array<{ toolsAdded?: string[]; toolsRemoved?: string[] }>)[0]!);
  expect(added.slice(2).map((m) => [m.toolsAdded, m.toolsRemoved])).toEqual([[["work"], undefined]]);
  expect(faux.requests.at(-2)!.declarations.map((d) => [d.name, d.description])).toEqual([
    ["work", "installed again"],
  ]);
});

test("uninstalling one of two extensions between runs: the next preparation's one system delta removes all its tools and sections and nothing of the other's", async () => {
  // Break 28B: the mid-run test above has one extension with one tool and one section, so a delta
  // removing only the first of several parts, or removing and re-adding every tool, passed it.
  const tool = (name: string) =>
    defineTool({
      name,
      description: name,
      parameters: Type.Object({}),
      execute: async () => textResult(name),
    });
  const extensions = createRegistry();
  extensions.install(
    defineExtension({
      name: "keeper",
      tools: [tool("keep")],
      sections: [section("keeper-notes", () => "Keep this.")],
    }),
  );
  extensions.install(
    defineExtension({
      name: "worker",
      tools: [tool("work"), tool("assist")],
      sections: [section("worker-notes", () => "Use work."), section("worker-more", () => "Use assist.")],
    }),
  );
  const { root, faux } = await open(echo, { extensions });
  expect(await (await root.submit({ type: "input", content: "one" })).wait()).toMatchObject({
    status: "done",
  });
  extensions.uninstall("worker");
  expect(await (await root.submit({ type: "input", content: "two" })).wait()).toMatchObject({
    status: "done",
  });
  expect(faux.requests.map((r) => r.tools)).toEqual([["keep", "work", "assist"], ["keep"]]);
  expect(faux.requests[1]!.systemPrompt).toContain("Keep this.");
  expect(faux.requests[1]!.systemPrompt).not.toContain("Use work.");
  expect(faux.requests[1]!.systemPrompt).not.toContain("Use assist.");
  const systems = (await root.entries())
    .filter((e) => e.kind === "pi.system")
    .map(
      (e) =>
        (
          e.model as unknown as Array<{
            toolsAdded?: string[];
            toolsRemoved?: string[];
            sections?: Record<string, unknown>;
          }>
        )[0]!,
    );
  expect(systems).toHaveLength(2);
  expect([systems[1]!.toolsAdded, systems[1]!.toolsRemoved]).toEqual([undefined, ["work", "assist"]]);
  expect(systems[1]!.sections).toEqual({ "worker-notes": null, "worker-more": null });
});

test("a run sees a replacement from its next phase on: the request after the tool round asks the new hooks", async () => {
  const inRequest = deferred();
  const answer = deferred();
  const respond: FauxResponder = async (req, n) => {
    if (n === 1) {
      inRequest.resolve();
      await answer.promise;
    }
    return callWorkEachTurn(req, n);
  };
  const work = defineTool({
    name: "work",
    description: "work",
    parameters: Type.Object({}),
    execute: async () => textResult("worked"),
  });
  const seen: string[] = [];
  const observer = (name: string) =>
    defineExtension({
      name: "observer",
      tools: [work],
      hooks: [
        hook("pi.generation", {
          afterResponse: (m) => void seen.push(`${name}:${m.stopReason}`),
        }),
      ],
    });
  const extensions = createRegistry();
  extensions.install(observer("old"));
  const { root } = await open(respond, { extensions });
  const one = await root.submit({ type: "input", content: "one" });
  await inRequest.promise;
  extensions.install(observer("new"));
  answer.resolve();
  expect(await one.wait()).toMatchObject({ status: "done" });
  // One run: its first request kept the old hooks, the request after the tool round asked the new ones.
  expect(seen).toEqual(["old:toolUse", "new:stop"]);
});

test("a compaction phase keeps the hooks it resolved at its start: a replacement installed while it reads its entries reaches only the next compaction", async () => {
  // Break draw 31 (section-7:40): the compaction task resolving its hooks from the live registry, not
  // from the view taken at its phase's start, passed every test; no test replaced an extension while
  // a compaction phase was under way. Its first read (the entries, from the store once the idle
  // conversation's cache was dropped) is held here, and the replacement lands inside it.
  const decide = (label: string) =>
    defineExtension({
      name: "summarizer",
      hooks: [hook("pi.compaction", { beforeCompact: () => ({ summary: `summary by ${label}` }) })],
    });
  const extensions = createRegistry();
  extensions.install(decide("v1"));
  const { h, root } = await open(echo, {
    extensions,
    settings: { compaction: { keepRecentTokens: 1 }, contextRetentionMs: 0 },
  });
  for (const q of ["one", "two", "three"]) await (await root.submit({ type: "input", content: q })).wait();
  const reading = deferred();
  const release = deferred();
  let gate = true;
  const stored = h.storedEntries.bind(h);
  h.storedEntries = async (...args: Parameters<typeof h.storedEntries>) => {
    if (gate) {
      gate = false;
      reading.resolve();
      await release.promise;
    }
    return stored(...args);
  };
  const first = await root.compact();
  await reading.promise;
  extensions.install(decide("v2"));
  release.resolve();
  await h.waitForTask(first);
  const summaries = async () =>
    (await root.entries())
      .filter((e) => e.kind === "pi.compaction")
      .map((e) => /<summary>\n(.*)\n<\/summary>/.exec(textOf(messageOf(e)))?.[1]);
  expect(await summaries()).toEqual(["summary by v1"]);
  await (await root.submit({ type: "input", content: "four" })).wait();
  await h.waitForTask(await root.compact());
  expect(await summaries()).toEqual(["summary by v1", "summary by v2"]);
});

test("a tool replaced while its call's beforeTool hook runs: that call still executes the implementation its phase resolved, the next call the new (sweep 42b)", async () => {
  // Sweep 42b, 159: every named test replaced the tool once its execute() ran; a call that took the
  // registry's tool anew after its beforeTool chain (at the intent commit) passed them. Spec §7.3:
  // one phase handler resolves, validates, runs beforeTool, records intent and executes.
  const inHook = deferred();
  const release = deferred();
  let hooked = 0;
  const v1 = defineTool({
    name: "work",
    description: "version 1",
    parameters: Type.Object({}),
    execute: async () => textResult("v1 result"),
  });
  const v2 = defineTool({
    name: "work",
    description: "version 2",
    parameters: Type.Object({}),
    execute: async () => textResult("v2 result"),
  });
  const gate = defineExtension({
    name: "gate",
    hooks: [
      hook("pi.tool", {
        beforeTool: async () => {
          if (hooked++ > 0) return undefined;
          inHook.resolve();
          await release.promise;
          return undefined;
        },
      }),
    ],
  });
  const extensions = createRegistry();
  extensions.install(defineExtension({ name: "worker", tools: [v1] }));
  extensions.install(gate);
  const { root } = await open(callWorkEachTurn, { extensions });
  const one = await root.submit({ type: "input", content: "one" });
  await inHook.promise;
  extensions.install(defineExtension({ name: "worker", tools: [v2] }));
  release.resolve();
  expect(await one.wait()).toMatchObject({ status: "done" });
  await (await root.submit({ type: "input", content: "two" })).wait();
  expect((await toolResults(root)).map((e) => textOf(messageOf(e)))).toEqual(["v1 result", "v2 result"]);
});
