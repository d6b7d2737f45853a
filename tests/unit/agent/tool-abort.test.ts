/**
 * When a tool's onAbort hooks run (spec §8.4): only for an explicit abort of the call. A host close
 * and the unsafe recovery that follows it are not an abort; an abort while beforeTool still decides
 * runs onAbort once, before any execution. The abort handler settles with the snapshot its phase
 * took (default bounds once the tool is uninstalled), asks onAbort again after a restart, and writes
 * nothing into a slot that is gone.
 */
import { fauxToolCall } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { expect, test } from "vitest";
import { readDoc, writeDoc } from "../../../worker/agent/records.ts";
import {
  type AgentHooks,
  createRegistry,
  DOC,
  defineExtension,
  defineTool,
  type LiveState,
  type ToolResult,
  textResult,
} from "../../../worker/index.ts";
import { deferred, memoryStore, until } from "../../../worker/testing.ts";
import { settle } from "../core/fixtures.ts";
import {
  callsThenAnswer,
  diagnosticsOf,
  gatedTool,
  itemTool,
  liveOf,
  messageOf,
  open,
  reopen,
  textOf,
  toolResults,
} from "./fixtures.ts";

/** The onAbort hooks `open` takes. */
type OnAbortHooks = NonNullable<AgentHooks["onAbort"]>;

/**
 * A call of `tail` (it keeps the last two lines of its result) underway: it has stored a diagnostic
 * of its own ("progress") and works until aborted; `onAbort` are the run's hooks.
 */
async function tailCallUnderway(onAbort: OnAbortHooks) {
  const started = deferred();
  const tool = defineTool({
    name: "tail",
    description: "Works until aborted",
    parameters: Type.Object({}),
    outputLimits: { maxLines: 2, maxBytes: 4096, retain: "tail" },
    async execute(_args, api) {
      api.diagnostic({ severity: "info", code: "progress", message: "checkpoint" });
      started.resolve();
      await new Promise((_, reject) => api.signal.addEventListener("abort", () => reject(api.signal.reason)));
      return textResult("never");
    },
  });
  const opened = await open(callsThenAnswer(fauxToolCall("tail", {}, { id: "c1" })), {
    tools: [tool],
    settings: { outputIntervalMs: 1 },
    hooks: { onAbort },
  });
  const input = await opened.root.submit({ type: "input", content: "go" });
  await started.promise;
  await until(() => liveOf(opened.h).tools?.[0]?.diagnostics !== undefined, {
    what: "the diagnostic stored",
  });
  return { ...opened, input };
}

test("a host close and the unsafe recovery after it never run onAbort: the call ends interrupted, its task failed", async () => {
  const aborts: string[] = [];
  const hooks = { onAbort: [(call: { name: string }) => void aborts.push(call.name)] };
  const held = itemTool({ holdFirst: true, replay: "unsafe" });
  const respond = callsThenAnswer(fauxToolCall("apply", { item: "x" }, { id: "call-1" }));
  const { h, root, store, faux } = await open(respond, { tools: [held.tool], hooks });
  await root.submit({ type: "input", content: "go" });
  await held.started.promise;
  const image = store.image();
  await h.close();
  expect(aborts).toEqual([]);
  const h2 = await reopen(await memoryStore(image), {
    models: faux.models,
    defaultModel: faux.ref,
    tools: [itemTool({ replay: "unsafe" }).tool],
    hooks,
  });
  const root2 = await h2.root();
  await root2.waitForIdle();
  expect(aborts).toEqual([]);
  const [result] = await toolResults(root2);
  expect(diagnosticsOf(result!).map((d) => d.code)).toEqual(["interrupted"]);
  const [tool] = await h2.tasks({ kind: "pi.tool" });
  expect(tool?.state).toMatchObject({ status: "terminal", outcome: { status: "failed" } });
});

test("an abort while beforeTool decides runs onAbort once, with an empty result, and never executes the tool", async () => {
  let builds = 0;
  const aborts: Array<{ name: string; text: string }> = [];
  const given: Array<{ content: unknown; isError: unknown }> = [];
  const inBeforeTool = deferred();
  const release = deferred();
  const gate = gatedTool("hold");
  let executed = false;
  void gate.started.promise.then(() => {
    executed = true;
  });
  const { root } = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "c1" })), {
    tools: [gate.tool],
    // Counts environment builds: a call aborted before execution builds none (spec §8.4).
    env: () => {
      builds++;
      return undefined;
    },
    hooks: {
      beforeTool: [
        async () => {
          inBeforeTool.resolve();
          await release.promise;
          return undefined;
        },
      ],
      onAbort: [
        (call, result) => {
          given.push({ content: result.content, isError: (result as { isError?: unknown }).isError });
          aborts.push({
            name: call.name,
            text: result.content.map((b) => ("text" in b ? b.text : "")).join(""),
          });
        },
      ],
    },
  });
  const input = await root.submit({ type: "input", content: "go" });
  await inBeforeTool.promise;
  const aborting = root.abort();
  await settle();
  release.resolve();
  await aborting;
  expect(await input.wait()).toEqual({ status: "unanswered", reason: "aborted" });
  expect(aborts).toEqual([{ name: "hold", text: "" }]);
  // Reading 23e: the upstream scenario's hook sees an empty error result (no content block at all).
  expect(given).toEqual([{ content: [], isError: true }]);
  expect(executed).toBe(false);
  expect(builds).toBe(0);
  const [result] = await toolResults(root);
  expect(diagnosticsOf(result!).map((d) => d.code)).toContain("aborted");
});

test("onAbort's replacement content is bounded by the tool's own limits, with the harness diagnostics last", async () => {
  // The call's own diagnostic: the harness's (aborted, truncated) come after it.
  const { h, root, input } = await tailCallUnderway([() => textResult("one\ntwo\nthree\nfour")]);
  await root.abort();
  expect((await input.wait()).status).toBe("unanswered");
  const [result] = await toolResults(root);
  expect(diagnosticsOf(result!).map((d) => d.code)).toEqual(["progress", "aborted", "truncated"]);
  // The kept tail is the first block, whole; the truncation note follows it.
  const content = messageOf(result!).content;
  expect(content[0]).toEqual({ type: "text", text: "three\nfour" });
  expect(textOf(messageOf(result!))).not.toContain("one\ntwo");
  // Reading 23e: the model reads the cut, and the call ends aborted (the upstream scenario's last checks).
  expect(textOf(messageOf(result!))).toContain("output truncated to its end");
  const [task] = await h.tasks({ kind: "pi.tool" });
  expect(task?.state).toMatchObject({ status: "terminal", outcome: { status: "aborted" } });
});

test("onAbort's replacement keeps the diagnostics the chain hands on, the harness's truncation after them: the upstream shape, a hook spreading its result over an abort of the call alone", async () => {
  // Break 30B: the named test's hook returns a fresh result (no diagnostics), so a harness that
  // dropped the chain's own diagnostics for the call's recorded ones passed it. The upstream scenario
  // spreads the given result and aborts the tool task alone (the run goes on to its answer).
  const { h, root, input } = await tailCallUnderway([
    (_call, result) => ({
      ...result,
      content: [{ type: "text", text: "one\ntwo\nthree\nfour" }],
      diagnostics: [
        ...(result.diagnostics ?? []),
        { severity: "info", code: "policy", message: "cancelled by policy" },
      ],
    }),
  ]);
  const toolTask = liveOf(h).tools![0]!.taskId!;
  await h.abortTask(toolTask);
  // The call alone was aborted: the run goes on and the model answers.
  expect((await input.wait()).status).toBe("done");
  const [result] = await toolResults(root);
  expect(diagnosticsOf(result!).map((d) => d.code)).toEqual(["progress", "aborted", "policy", "truncated"]);
  expect(messageOf(result!).content[0]).toEqual({ type: "text", text: "three\nfour" });
  expect(textOf(messageOf(result!))).toContain("output truncated to its end");
  expect((await h.getTask(toolTask))?.state).toMatchObject({
    status: "terminal",
    outcome: { status: "aborted" },
  });
});

test("onAbort's replacement that hands on diagnostics of its own without the aborted one: the harness's aborted and truncation diagnostics come after them, last (draw 38 D)", async () => {
  // Draw 38 D: every hook of the named tests hands on the aborted diagnostic (a fresh result keeps the
  // recorded list, a spread keeps it), so a harness that put its re-added aborted diagnostic before
  // the hook's own passed them.
  const { h, root, input } = await tailCallUnderway([
    (_call, result) => ({
      ...result,
      content: [{ type: "text", text: "one\ntwo\nthree\nfour" }],
      // The hook's own list, in place of the one it was given.
      diagnostics: [{ severity: "info", code: "policy", message: "cancelled by policy" }],
    }),
  ]);
  const toolTask = liveOf(h).tools![0]!.taskId!;
  await h.abortTask(toolTask);
  expect((await input.wait()).status).toBe("done");
  const [result] = await toolResults(root);
  expect(diagnosticsOf(result!).map((d) => d.code)).toEqual(["policy", "aborted", "truncated"]);
  expect(messageOf(result!).content[0]).toEqual({ type: "text", text: "three\nfour" });
  expect((await h.getTask(toolTask))?.state).toMatchObject({
    status: "terminal",
    outcome: { status: "aborted" },
  });
});

test("onAbort's replacement of two text blocks has each bounded by the tool's own limits, not the first alone (draw 39b D)", async () => {
  // Draw 39b D: every named replacement had one text block, so a harness bounding only the first
  // text block of a hook's content passed them.
  const { root, input } = await tailCallUnderway([
    () => ({
      content: [
        { type: "text", text: "one\ntwo\nthree\nfour" },
        { type: "text", text: "five\nsix\nseven\neight" },
      ],
      isError: true,
    }),
  ]);
  await root.abort();
  expect((await input.wait()).status).toBe("unanswered");
  const [result] = await toolResults(root);
  expect(diagnosticsOf(result!).map((d) => d.code)).toEqual([
    "progress",
    "aborted",
    "truncated",
    "truncated",
  ]);
  const content = messageOf(result!).content;
  expect(content.slice(0, 2)).toEqual([
    { type: "text", text: "three\nfour" },
    { type: "text", text: "seven\neight" },
  ]);
  expect(textOf(messageOf(result!))).not.toContain("five\nsix");
});

test("a tool's slot updates apply only while its slot exists: output after the slot went is not stored, and its aborted result has no partial output", async () => {
  const more = deferred();
  const tool = defineTool({
    name: "talk",
    description: "Prints, then works until aborted",
    parameters: Type.Object({}),
    async execute(_args, api) {
      api.output("first\n");
      api.diagnostic({ severity: "info", message: "early remark" });
      await api.details({ step: 1 });
      await more.promise;
      api.output("second\n");
      api.diagnostic({ severity: "info", message: "late remark" });
      void api.details({ step: 2 }).catch(() => undefined);
      await new Promise((_, reject) => api.signal.addEventListener("abort", () => reject(api.signal.reason)));
      return textResult("never");
    },
  });
  const { h, root } = await open(callsThenAnswer(fauxToolCall("talk", {}, { id: "c1" })), {
    tools: [tool],
    settings: { outputIntervalMs: 1 },
  });
  const input = await root.submit({ type: "input", content: "go" });
  await until(() => liveOf(h).tools?.[0]?.output === "first\n", { what: "first output stored" });
  await until(() => liveOf(h).tools?.[0]?.diagnostics?.length === 1, { what: "first remark stored" });
  expect(liveOf(h).tools?.[0]?.details).toEqual({ step: 1 });
  // The slot goes (an application rewrites pi.live): the call's later updates have nowhere to land.
  await h.transaction((tx) => {
    const { tools: _t, ...rest } = readDoc<LiveState>(tx, 1, DOC.live, {});
    writeDoc<LiveState>(tx, 1, DOC.live, rest);
  });
  // Break 31F: every pi.live committed from here on, the tool's own aborted commit included, has no
  // tools (a terminal write that made an empty list where the slot had gone passed, since the
  // generation's abort removes tools after it).
  const committedLive: LiveState[] = [];
  h.subscribe((change) => {
    const doc = change.docs.find((d) => d.conversationId === 1 && d.name === DOC.live);
    if (doc) committedLive.push(doc.value as LiveState);
  });
  more.resolve();
  await new Promise((r) => setTimeout(r, 50));
  await settle();
  expect(liveOf(h).tools).toBeUndefined();
  await root.abort();
  expect(await input.wait()).toEqual({ status: "unanswered", reason: "aborted" });
  const [result] = await toolResults(root);
  expect(diagnosticsOf(result!).map((d) => d.code)).toContain("aborted");
  expect(textOf(messageOf(result!))).not.toMatch(/first|second/);
  // Details and diagnostics are empty too (spec §8.2), those recorded before the slot went and
  // after it (reading 23d: only the output was read): the harness's own aborted diagnostic alone.
  expect(diagnosticsOf(result!).map((d) => d.message)).not.toContain("early remark");
  expect(diagnosticsOf(result!).map((d) => d.code)).toEqual(["aborted"]);
  expect((messageOf(result!) as { details?: unknown }).details).toBeUndefined();
  expect(textOf(messageOf(result!))).not.toMatch(/remark/);
  expect(committedLive.length).toBeGreaterThan(0);
  expect(committedLive.filter((live) => "tools" in live)).toEqual([]);
});

test("when one slot of a round goes, that call's later updates land nowhere: the round's other slot keeps only its own output, and no slot comes back (draw 32b)", async () => {
  // Draw 32b: the named test removes the round's only slot. A slot lookup that fell back to the
  // first slot when the call's own was gone (so the gone call's output landed in its neighbour's)
  // passed every named test.
  const more = deferred();
  const talk = defineTool({
    name: "talk",
    description: "Prints, then prints again once let go, then works until aborted",
    parameters: Type.Object({}),
    async execute(_args, api) {
      api.output("first\n");
      await more.promise;
      api.output("second\n");
      api.diagnostic({ severity: "info", message: "late remark" });
      await new Promise((_, reject) => api.signal.addEventListener("abort", () => reject(api.signal.reason)));
      return textResult("never");
    },
  });
  const quiet = defineTool({
    name: "quiet",
    description: "Prints once, then works until aborted",
    parameters: Type.Object({}),
    async execute(_args, api) {
      api.output("quiet\n");
      await new Promise((_, reject) => api.signal.addEventListener("abort", () => reject(api.signal.reason)));
      return textResult("never");
    },
  });
  const { h, root } = await open(
    callsThenAnswer(fauxToolCall("talk", {}, { id: "c1" }), fauxToolCall("quiet", {}, { id: "c2" })),
    { tools: [talk, quiet], settings: { outputIntervalMs: 1 } },
  );
  const input = await root.submit({ type: "input", content: "go" });
  const slot = (callId: string) => liveOf(h).tools?.find((s) => s.callId === callId);
  await until(() => slot("c1")?.output === "first\n" && slot("c2")?.output === "quiet\n", {
    what: "both outputs stored",
  });
  // The first call's slot goes (an application rewrites pi.live); the second's stays.
  await h.transaction((tx) => {
    const state = readDoc<LiveState>(tx, 1, DOC.live, {});
    writeDoc<LiveState>(tx, 1, DOC.live, { ...state, tools: state.tools!.filter((s) => s.callId !== "c1") });
  });
  const kept = slot("c2")!;
  const committedTools: unknown[] = [];
  h.subscribe((change) => {
    const doc = change.docs.find((d) => d.conversationId === 1 && d.name === DOC.live);
    if (doc) committedTools.push((doc.value as LiveState).tools);
  });
  more.resolve();
  await new Promise((r) => setTimeout(r, 50));
  await settle();
  expect(liveOf(h).tools).toEqual([kept]);
  expect(committedTools.every((t) => t === undefined || JSON.stringify(t) === JSON.stringify([kept]))).toBe(
    true,
  );
  await root.abort();
  expect(await input.wait()).toEqual({ status: "unanswered", reason: "aborted" });
});

test("does not re-bound retained output when an unchanged result outlives the tool's limits", async () => {
  const started = deferred();
  const work = (outputLimits?: { maxBytes: number }) =>
    defineTool({
      name: "work",
      description: "Prints a line durably, then works until aborted",
      parameters: Type.Object({}),
      ...(outputLimits ? { outputLimits } : {}),
      async execute(_args, api) {
        api.output("durable\n");
        started.resolve();
        await new Promise((_, reject) =>
          api.signal.addEventListener("abort", () => reject(api.signal.reason)),
        );
        return textResult("never");
      },
    });
  const extensions = createRegistry();
  extensions.install(defineExtension({ name: "tooling", tools: [work()] }));
  const { h, root } = await open(callsThenAnswer(fauxToolCall("work", {}, { id: "c1" })), {
    extensions,
    settings: { outputIntervalMs: 1 },
    // One hook returns nothing, the next the very result it was given (break 28H: a chain handing
    // each hook a copy turned that into a replacement, bounded again, and the first hook alone
    // passed): both leave the result unchanged.
    hooks: { onAbort: [() => undefined, (_call, result) => result] },
  });
  const input = await root.submit({ type: "input", content: "go" });
  await started.promise;
  await until(() => liveOf(h).tools?.[0]?.output === "durable\n", { what: "the output stored" });
  // The tool is replaced mid-call by one whose limits would cut that output to one byte.
  extensions.install(defineExtension({ name: "tooling", tools: [work({ maxBytes: 1 })] }));
  const [task] = await h.tasks({ kind: "pi.tool" });
  expect(await h.abortTask(task!.id)).toBe("marked");
  expect((await input.wait()).status).toBe("done");
  const [result] = await toolResults(root);
  expect(messageOf(result!).content).toContainEqual({ type: "text", text: "durable\n" });
  expect(diagnosticsOf(result!).map((d) => d.code)).toEqual(["aborted"]);
});

test("does not re-bound retained output when the tool was uninstalled: an unchanged result keeps its execution's wider bounds, not the defaults, with an onAbort chain and without one (draw 41c)", async () => {
  // 2,500 lines: within the tool's own 5,000, past the default 2,000.
  const text = Array.from({ length: 2500 }, (_, i) => `line ${i + 1}\n`).join("");
  const abortUninstalled = async (
    onAbort: Array<(call: unknown, result: ToolResult) => ToolResult | undefined>,
  ) => {
    const started = deferred();
    const wide = defineTool({
      name: "wide",
      description: "Prints 2,500 lines durably, then works until aborted",
      parameters: Type.Object({}),
      outputLimits: { maxLines: 5000 },
      async execute(_args, api) {
        api.output(text);
        started.resolve();
        await new Promise((_, reject) =>
          api.signal.addEventListener("abort", () => reject(api.signal.reason)),
        );
        return textResult("never");
      },
    });
    const extensions = createRegistry();
    extensions.install(defineExtension({ name: "tooling", tools: [wide] }));
    const { h, root } = await open(callsThenAnswer(fauxToolCall("wide", {}, { id: "c1" })), {
      extensions,
      settings: { outputIntervalMs: 1 },
      ...(onAbort.length > 0 ? { hooks: { onAbort } } : {}),
    });
    const input = await root.submit({ type: "input", content: "go" });
    await started.promise;
    await until(() => liveOf(h).tools?.[0]?.output === text, { what: "the output stored" });
    // The tool no longer resolves: a replacement would get the default bounds, the retained output not.
    extensions.uninstall("tooling");
    const [task] = await h.tasks({ kind: "pi.tool" });
    expect(await h.abortTask(task!.id)).toBe("marked");
    expect((await input.wait()).status).toBe("done");
    const [result] = await toolResults(root);
    expect(diagnosticsOf(result!).map((d) => d.code)).toEqual(["aborted"]);
    return messageOf(result!).content as Array<{ type: string; text?: string }>;
  };
  // The chain leaves the result unchanged (one hook returns nothing, the next what it was given),
  // and a conversation with no onAbort hook at all: the retained output whole, then the harness's
  // diagnostics block alone.
  for (const onAbort of [[() => undefined, (_call: unknown, result: ToolResult) => result], []]) {
    const content = await abortUninstalled(onAbort);
    expect(content[0]).toEqual({ type: "text", text });
    expect(content.slice(1).map((b) => b.text)).toEqual([
      "<harness>\n[error] the tool call was aborted\n</harness>",
    ]);
  }
});

test("settles an abort even when the tool was uninstalled, using default content bounds", async () => {
  const { started, tool: bounded } = boundedUntilAborted();
  const extensions = createRegistry();
  extensions.install(defineExtension({ name: "tooling", tools: [bounded] }));
  const { h, root } = await open(callsThenAnswer(fauxToolCall("bounded", {}, { id: "c1" })), {
    extensions,
    // Four lines past the tool's two, and more than the default 2,000 (break 26B).
    hooks: { onAbort: [() => textResult(`one\ntwo\nthree\nfour\n${"more\n".repeat(2100)}`)] },
  });
  await root.submit({ type: "input", content: "go" });
  await started.promise;
  extensions.uninstall("tooling");
  const [task] = await h.tasks({ kind: "pi.tool" });
  expect(await h.abortTask(task!.id)).toBe("marked");
  expect((await h.waitForTask(task!.id)).state).toMatchObject({
    status: "terminal",
    outcome: { status: "aborted" },
  });
  const [result] = await toolResults(root);
  // The replacement is stored under the default bounds, not the uninstalled tool's two lines.
  const text = textOf(messageOf(result!));
  expect(text.startsWith("one\ntwo\nthree\nfour")).toBe(true);
  // ... and cut at the default 2,000 lines: default bounds, not none.
  expect(text.slice(0, text.indexOf("<harness>")).split("\n")).toHaveLength(2000);
  expect(diagnosticsOf(result!).map((d) => d.code)).toEqual(["aborted", "truncated"]);
  expect(diagnosticsOf(result!)[1]!.message).toContain("limits 2000 lines, 50 KiB");
});

test("settles an abort with default content bounds when the tool, still installed, no longer resolves for the conversation (its pi.agent tools leave it out) (break 31G)", async () => {
  // Break 31G: the named test uninstalls the tool; bounds read from every installed tool (not the
  // phase's resolution for the conversation) passed it, and bounded this replacement by the two
  // lines of a tool the conversation no longer offers.
  const { started, tool: bounded } = boundedUntilAborted();
  const extensions = createRegistry();
  extensions.install(defineExtension({ name: "tooling", tools: [bounded] }));
  const { h, root } = await open(callsThenAnswer(fauxToolCall("bounded", {}, { id: "c1" })), {
    extensions,
    hooks: { onAbort: [() => textResult("one\ntwo\nthree\nfour")] },
  });
  await root.submit({ type: "input", content: "go" });
  await started.promise;
  await root.configure({ tools: { remove: ["bounded"] } });
  expect([...(await root.agent()).tools.keys()]).not.toContain("bounded");
  const [task] = await h.tasks({ kind: "pi.tool" });
  expect(await h.abortTask(task!.id)).toBe("marked");
  expect((await h.waitForTask(task!.id)).state).toMatchObject({ outcome: { status: "aborted" } });
  const [result] = await toolResults(root);
  // The four lines fit the defaults: kept whole, with no truncation.
  expect(textOf(messageOf(result!)).startsWith("one\ntwo\nthree\nfour")).toBe(true);
  expect(diagnosticsOf(result!).map((d) => d.code)).toEqual(["aborted"]);
});

test("settles a child conversation's abort with default content bounds when its own pi.agent tools leave the tool out, though the root still offers it (draw 34d)", async () => {
  // Draw 34d: the named tests' calls ran in the root; bounds resolved for the root conversation, not
  // the call's, passed them and bounded this replacement by the two lines of a tool the child no
  // longer offers.
  const { started, tool: bounded } = boundedUntilAborted();
  const extensions = createRegistry();
  extensions.install(defineExtension({ name: "tooling", tools: [bounded] }));
  const { h, root } = await open(callsThenAnswer(fauxToolCall("bounded", {}, { id: "c1" })), {
    extensions,
    hooks: { onAbort: [() => textResult("one\ntwo\nthree\nfour")] },
  });
  const child = await h.createConversation({ ownership: { kind: "ownerless" } });
  await child.submit({ type: "input", content: "go" });
  await started.promise;
  await child.configure({ tools: { remove: ["bounded"] } });
  expect([...(await child.agent()).tools.keys()]).not.toContain("bounded");
  expect([...(await root.agent()).tools.keys()]).toContain("bounded");
  const [task] = await h.tasks({ kind: "pi.tool" });
  expect(task!.conversationId).toBe(child.id);
  expect(await h.abortTask(task!.id)).toBe("marked");
  expect((await h.waitForTask(task!.id)).state).toMatchObject({ outcome: { status: "aborted" } });
  const [result] = await toolResults(child);
  expect(textOf(messageOf(result!)).startsWith("one\ntwo\nthree\nfour")).toBe(true);
  expect(diagnosticsOf(result!).map((d) => d.code)).toEqual(["aborted"]);
});

test("replays the hook after close before settlement, retaining the abort mark and application note", async () => {
  const asked: string[] = [];
  const firstAsk = deferred();
  let executions = 0;
  let closingChainRan = 0;
  const reports: unknown[] = [];
  // The hook reads the call and an application's note, a document committed before the abort.
  const NOTES = "test.abort-notes";
  const note = async (
    call: { arguments: unknown },
    api: { taskId: number; doc(name: string): Promise<unknown> },
  ) => {
    const notes = ((await api.doc(NOTES)) as { notes?: Record<string, string> } | undefined)?.notes ?? {};
    return `${notes[String(api.taskId)] ?? "no note"} for ${JSON.stringify(call.arguments)}`;
  };
  const started = deferred();
  const worker = defineTool({
    name: "worker",
    description: "Works until aborted",
    parameters: Type.Object({ job: Type.String() }),
    async execute(_args, api) {
      executions++;
      started.resolve();
      await new Promise((_, reject) => api.signal.addEventListener("abort", () => reject(api.signal.reason)));
      return textResult("never");
    },
  });
  const respond = callsThenAnswer(fauxToolCall("worker", { job: "j1" }, { id: "c1" }));
  const { h, root, store, faux } = await open(respond, {
    tools: [worker],
    onReport: (e) => void reports.push(e),
    hooks: {
      onAbort: [
        async (call, _result, api, { signal }) => {
          asked.push(await note(call, api));
          firstAsk.resolve();
          // The first engine closes while the hook decides: its signal aborts, and the hook throws
          // with its reason (reading 23e: the hook never saw a close before, the engine just stopped).
          await new Promise((_, reject) => signal.addEventListener("abort", () => reject(signal.reason)));
          return textResult(await note(call, api));
        },
        // Draw 34d: the close's abort error ends the chain; a chain that swallowed it (reporting
        // nothing) went on to this hook in the closing engine, and every assertion below passed.
        async () => {
          closingChainRan++;
          return undefined;
        },
      ],
    },
  });
  const input = await root.submit({ type: "input", content: "go", requestId: "r" });
  await started.promise;
  const [task] = await h.tasks({ kind: "pi.tool" });
  await h.transaction((tx) => {
    writeDoc(tx, 1, NOTES, { notes: { [String(task!.id)]: "User requested cancellation" } });
  });
  void h.abortTask(task!.id).catch(() => undefined);
  await firstAsk.promise;
  await h.close();
  // Close settles nothing: the hook's throw is not reported as a hook failure, nor does the chain go on.
  expect(reports).toEqual([]);
  expect(closingChainRan).toBe(0);
  const h2 = await reopen(store, {
    models: faux.models,
    defaultModel: faux.ref,
    tools: [worker],
    onReport: (e) => void reports.push(e),
    hooks: {
      onAbort: [
        async (call, _result, api) => {
          asked.push(await note(call, api));
          return textResult(await note(call, api));
        },
      ],
    },
  });
  const record = await h2.waitForTask(task!.id);
  expect(record.abortRequested).toBe(true);
  expect(record.state).toMatchObject({ status: "terminal", outcome: { status: "aborted" } });
  expect(asked).toEqual([
    'User requested cancellation for {"job":"j1"}',
    'User requested cancellation for {"job":"j1"}',
  ]);
  expect(executions).toBe(1);
  const root2 = await h2.root();
  const results = await toolResults(root2);
  expect(results).toHaveLength(1);
  expect(textOf(messageOf(results[0]!))).toContain('User requested cancellation for {"job":"j1"}');
  const again = await root2.submit({ type: "input", content: "go", requestId: "r" });
  expect(again.id).toBe(input.id);
  expect((await again.wait()).status).toBe("done");
  expect(reports).toEqual([]);
});

test("a tool that reads api.signal only after its call was aborted sees it aborted: the signal is made on first read, and still aborts", async () => {
  const started = deferred();
  const release = deferred();
  const seen: unknown[] = [];
  const late = defineTool({
    name: "late",
    description: "looks at its signal only at the end",
    parameters: Type.Object({}),
    execute: async (_args, api) => {
      started.resolve();
      await release.promise;
      seen.push(api.signal.aborted);
      throw api.signal.reason;
    },
  });
  const { h, root } = await open(callsThenAnswer(fauxToolCall("late", {}, { id: "c1" })), { tools: [late] });
  await root.submit({ type: "input", content: "go" });
  await started.promise;
  const aborting = root.abort();
  // The cascade marks the call's task; the drain that wrote the mark signals its invocation.
  let marked = false;
  while (!marked) {
    marked = (await h.tasks({ kind: "pi.tool" }))[0]?.abortRequested === true;
    await settle(1);
  }
  await settle();
  release.resolve();
  await aborting;
  expect(seen).toEqual([true]);
  const [result] = await toolResults(root);
  expect(diagnosticsOf(result!).map((d) => d.code)).toContain("aborted");
});

/** A tool bounded to two head lines that works until its call is aborted; `started` once it runs. */
function boundedUntilAborted() {
  const started = deferred();
  const tool = defineTool({
    name: "bounded",
    description: "Works until aborted; keeps two lines",
    parameters: Type.Object({}),
    outputLimits: { maxLines: 2, retain: "head" },
    async execute(_args, api) {
      started.resolve();
      await new Promise((_, reject) => api.signal.addEventListener("abort", () => reject(api.signal.reason)));
      return textResult("never");
    },
  });
  return { started, tool };
}
