/**
 * The tool execution API (spec §7.3 `ToolExecutionApi`), one test per member with its rules: the
 * phase's registry snapshot and agent resolution, the harness's models, `diagnostic()` and
 * `details()` (the running slot, the result, the order of diagnostics, the last details), the task
 * operations (ownership of created tasks, reads, waits), the committed document reader, and that
 * each is refused once the call ended.
 */
import { fauxAssistantMessage, fauxToolCall } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { expect, test } from "vitest";
import { defineDoc } from "../../../worker/agent/records.ts";
import type { ToolAgentView, ToolApi, ToolRegistryView } from "../../../worker/agent/tools/contract.ts";
import { textResult } from "../../../worker/agent/tools/contract.ts";
import type { TaskDefinition } from "../../../worker/core/define.ts";
import {
  CommitRefused,
  DocumentSemanticsError,
  InvalidTransition,
  WaitCancelled,
} from "../../../worker/core/errors.ts";
import type { Json, TaskRecord } from "../../../worker/core/types.ts";
import {
  AgentHarness,
  createRegistry,
  defineExtension,
  defineTool,
  hook,
  type ToolResult,
} from "../../../worker/index.ts";
import type { Sql } from "../../../worker/store/types.ts";
import { deferred, fauxError, memoryStore, until } from "../../../worker/testing.ts";
import { complete, type Go, parked, single, untilAborted } from "../core/fixtures.ts";
import {
  callsThenAnswer,
  cleanups,
  diagnosticsOf,
  inboxOf,
  liveOf,
  messageOf,
  open,
  reopen,
  textOf,
  toolResults,
} from "./fixtures.ts";

/** A tool `name` whose execute is `body`; the api it got is kept for checks after the call. */
function probe(name: string, body: (api: ToolApi) => Promise<ToolResult>, extra: object = {}) {
  const seen: { api?: ToolApi } = {};
  const tool = defineTool({
    name,
    description: `the ${name} probe`,
    parameters: Type.Object({}),
    ...extra,
    async execute(_args, api) {
      seen.api = api;
      return body(api);
    },
  });
  return { tool, seen };
}

const calls = (...names: string[]) =>
  callsThenAnswer(...names.map((n, i) => fauxToolCall(n, {}, { id: `call-${i + 1}` })));

/** A task that runs until `gate` opens, then completes with its input. */
function gatedTask(name: string, gate: Promise<void>): TaskDefinition<Json, Go, Json> {
  return single(name, async (task, runtime) => {
    await gate;
    await runtime.commit(() => complete(task.input));
  });
}

test("registry is the call's phase snapshot: the installed extensions, their tools and the built-in tasks; an install while the call runs is not in it", async () => {
  const started = deferred();
  const gate = deferred();
  let after: { late: unknown; lateTool: boolean } | undefined;
  const { tool, seen } = probe("probe", async (api) => {
    started.resolve();
    await gate.promise;
    after = {
      late: api.registry.extension("late"),
      lateTool: api.registry.tools().some((t) => t.tool.name === "late-tool"),
    };
    return textResult("ok");
  });
  const extensions = createRegistry();
  extensions.install(defineExtension({ name: "probes", tools: [tool] }));
  const { h, root } = await open(calls("probe"), { extensions });
  // Phases have run (another conversation's run, selecting nothing), then an install before the
  // call's phase: the call's snapshot is its phase's, so it has this one.
  const warm = await h.createConversation({ ownership: { kind: "ownerless" }, agent: { extensions: [] } });
  expect((await (await warm.submit({ type: "input", content: "warm" })).wait()).status).toBe("done");
  extensions.install(defineExtension({ name: "early" }));
  const sub = await root.submit({ type: "input", content: "go" });
  await started.promise;
  const late = probe("late-tool", async () => textResult("late")).tool;
  extensions.install(defineExtension({ name: "late", tools: [late] }));
  expect(extensions.snapshot().extension("late")).toBeDefined();
  gate.resolve();
  expect((await sub.wait()).status).toBe("done");
  const registry = seen.api!.registry as ToolRegistryView;
  expect(registry.installed().map((e) => e.name)).toEqual(["probes", "early"]);
  expect(registry.extension("probes")?.name).toBe("probes");
  expect(registry.tools().map((t) => [t.extension, t.tool.name])).toEqual([["probes", "probe"]]);
  expect(["pi.generation", "pi.tool", "pi.compaction"].every((n) => registry.hasTask(n))).toBe(true);
  // Installed after the phase took its snapshot: not in it.
  expect(after).toEqual({ late: undefined, lateTool: false });
});

test("registry is taken afresh at each call's phase: a later call in the same conversation sees an extension installed while an earlier call ran, its tools and its tasks", async () => {
  // Break 28I: the named test's call was the root's only one, so a phase reusing the conversation's
  // previous phase snapshot (cached on the conversation and its pi.agent alone) passed; and no
  // installed extension brought a task, so hasTask/task knowing only the built-in ones passed.
  const gate = deferred();
  const started = deferred();
  const first = probe("first", async () => {
    started.resolve();
    await gate.promise;
    return textResult("first");
  });
  const second = probe("second", async () => textResult("second"));
  const job = gatedTask("app.job", Promise.resolve());
  const extensions = createRegistry();
  extensions.install(defineExtension({ name: "probes", tools: [first.tool, second.tool] }));
  const { root } = await open(calls("first", "second"), {
    extensions,
    settings: { toolExecution: "sequential" },
  });
  const sub = await root.submit({ type: "input", content: "go" });
  await started.promise;
  const mid = probe("mid-tool", async () => textResult("mid")).tool;
  extensions.install(defineExtension({ name: "mid", tools: [mid], tasks: [job] }));
  gate.resolve();
  expect((await sub.wait()).status).toBe("done");
  const before = first.seen.api!.registry as ToolRegistryView;
  const after = second.seen.api!.registry as ToolRegistryView;
  expect(before.extension("mid")).toBeUndefined();
  expect(before.hasTask("app.job")).toBe(false);
  expect(after.installed().map((e) => e.name)).toEqual(["probes", "mid"]);
  expect(after.tools().map((t) => [t.extension, t.tool.name])).toEqual([
    ["probes", "first"],
    ["probes", "second"],
    ["mid", "mid-tool"],
  ]);
  expect(after.hasTask("app.job")).toBe(true);
  expect(after.task("app.job")).toBe(job);
  expect(after.tasks()).toContain(job);
});

test("registry is the call phase's snapshot on the beforeTool route too: an extension installed while a beforeTool hook runs is not in it (sweep 42b)", async () => {
  // Sweep 42b, 156: the named tests' calls had no beforeTool hook, so their intent was committed
  // with the answer and they ran in the execute phase; a call phase that handed its execution a
  // snapshot taken after its beforeTool chain (not its own phase's) passed them.
  const inHook = deferred();
  const release = deferred();
  const { tool, seen } = probe("probe", async () => textResult("ok"));
  const gate = defineExtension({
    name: "gate",
    hooks: [
      hook("pi.tool", {
        beforeTool: async () => {
          inHook.resolve();
          await release.promise;
          return undefined;
        },
      }),
    ],
  });
  const extensions = createRegistry();
  extensions.install(defineExtension({ name: "probes", tools: [tool] }));
  extensions.install(gate);
  const { root } = await open(calls("probe"), { extensions });
  const sub = await root.submit({ type: "input", content: "go" });
  await inHook.promise;
  const late = probe("late-tool", async () => textResult("late")).tool;
  extensions.install(
    defineExtension({ name: "late", tools: [late], tasks: [gatedTask("app.late", Promise.resolve())] }),
  );
  release.resolve();
  expect((await sub.wait()).status).toBe("done");
  const registry = seen.api!.registry as ToolRegistryView;
  expect(registry.installed().map((e) => e.name)).toEqual(["probes", "gate"]);
  expect(registry.extension("late")).toBeUndefined();
  expect(registry.tools().map((t) => t.tool.name)).toEqual(["probe"]);
  expect(registry.hasTask("app.late")).toBe(false);
});

test("agent() is the calling conversation's agent as the call's phase resolved it, shaped like Conversation.agent(); a configure while the call runs does not change it; it rejects after the call ended", async () => {
  const started = deferred();
  const gate = deferred();
  const views: ToolAgentView[] = [];
  const { tool, seen } = probe("probe", async (api) => {
    views.push(await api.agent());
    started.resolve();
    await gate.promise;
    views.push(await api.agent());
    return textResult("ok");
  });
  const other = probe("other", async () => textResult("other")).tool;
  const extensions = createRegistry();
  extensions.install(defineExtension({ name: "probes", tools: [tool] }));
  extensions.install(defineExtension({ name: "others", tools: [other] }));
  const { root, faux } = await open(calls("probe"), {
    extensions,
    root: { agent: { extensions: ["probes"], instructions: "Be brief.", thinkingLevel: "low" } },
  });
  const before = await root.agent();
  const sub = await root.submit({ type: "input", content: "go" });
  await started.promise;
  await root.configure({ extensions: ["probes", "others"], instructions: "Changed.", thinkingLevel: "high" });
  gate.resolve();
  expect((await sub.wait()).status).toBe("done");
  const [first, second] = views;
  expect(first).toEqual(before);
  expect(first!.extensions).toEqual(["probes"]);
  expect([...first!.tools.keys()]).toEqual(["probe"]);
  expect(first!.model).toEqual(faux.ref);
  expect(first!.thinkingLevel).toBe("low");
  expect(first!.instructions).toBe("Be brief.");
  expect(first!.state).toEqual({ extensions: ["probes"], instructions: "Be brief.", thinkingLevel: "low" });
  // Fixed for the call: the change made while it ran is not in it, but the conversation has it.
  expect(second).toEqual(first);
  expect((await root.agent()).instructions).toBe("Changed.");
  await expect(seen.api!.agent()).rejects.toThrow(CommitRefused);
});

test("agent() in a conversation other than the root is that conversation's agent: its own model over the harness default, its instructions and thinking level", async () => {
  // Break 29H: the named test called from the root with the harness's default model, so a view that
  // took the default model over the conversation's own (or the root's agent) passed it.
  const views: ToolAgentView[] = [];
  const { tool } = probe("probe", async (api) => {
    views.push(await api.agent());
    return textResult("ok");
  });
  const extensions = createRegistry();
  extensions.install(defineExtension({ name: "probes", tools: [tool] }));
  const { h, root, faux } = await open(calls("probe"), {
    extensions,
    defaultModel: { provider: "faux", modelId: "not-this-one" },
    root: { agent: { extensions: ["probes"], instructions: "The root's." } },
  });
  const other = await h.createConversation({
    ownership: { kind: "ownerless" },
    agent: { extensions: ["probes"], model: faux.ref, instructions: "The other's.", thinkingLevel: "medium" },
  });
  expect((await (await other.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
  const [view] = views;
  expect(view).toEqual(await other.agent());
  expect(view!.model).toEqual(faux.ref);
  expect(view!.instructions).toBe("The other's.");
  expect(view!.thinkingLevel).toBe("medium");
  expect(view!.state).toEqual({
    extensions: ["probes"],
    model: faux.ref,
    instructions: "The other's.",
    thinkingLevel: "medium",
  });
  expect((await root.agent()).instructions).toBe("The root's.");
});

test("agent() asked first after a configure made while the call runs is still the agent as the call's phase resolved it at its start; the next call's phase takes the change", async () => {
  // Draw 31b: the named tests asked agent() before the configure, so a view resolved from the live
  // conversation at the first ask (not the phase's resolution) passed them.
  const started = deferred();
  const gate = deferred();
  const views: ToolAgentView[] = [];
  const { tool } = probe("probe", async (api) => {
    started.resolve();
    await gate.promise;
    views.push(await api.agent());
    return textResult("ok");
  });
  const { tool: next } = probe("next", async (api) => {
    views.push(await api.agent());
    return textResult("next");
  });
  const extensions = createRegistry();
  extensions.install(defineExtension({ name: "probes", tools: [tool, next] }));
  const { root } = await open(calls("probe", "next"), {
    extensions,
    settings: { toolExecution: "sequential" },
    root: { agent: { extensions: ["probes"], instructions: "Be brief.", thinkingLevel: "low" } },
  });
  const before = await root.agent();
  const sub = await root.submit({ type: "input", content: "go" });
  await started.promise;
  await root.configure({ instructions: "Changed.", thinkingLevel: "high" });
  const after = await root.agent();
  gate.resolve();
  expect((await sub.wait()).status).toBe("done");
  const [first, second] = views;
  expect(first).toEqual(before);
  expect(first!.instructions).toBe("Be brief.");
  expect(first!.thinkingLevel).toBe("low");
  expect(second).toEqual(after);
  expect(second!.instructions).toBe("Changed.");
});
test("models is the harness's models: the resolver given to open, which knows the conversation's model", async () => {
  const { tool, seen } = probe("probe", async () => textResult("ok"));
  const { root, faux } = await open(calls("probe"), { tools: [tool] });
  expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
  expect(seen.api!.models).toBe(faux.models);
  expect(seen.api!.models.resolve(faux.ref)?.id).toBe(faux.ref.modelId);
  // Another harness in the same process hands its tools its own resolver, not the first one's
  // (break 30C: a resolver kept from the first api built passed the test run alone).
  const other = probe("probe", async () => textResult("ok"));
  const second = await open(calls("probe"), { tools: [other.tool] });
  expect((await (await second.root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
  expect(second.faux.models).not.toBe(faux.models);
  expect(other.seen.api!.models).toBe(second.faux.models);
});

test("models is the harness's models in a call of a conversation other than the root too (draw 35c)", async () => {
  // Draw 35c: the named test's call ran in the root; an api handing a conversation other than the
  // root a resolver of its own (a copy of the harness's) passed it.
  const { tool, seen } = probe("probe", async () => textResult("ok"));
  const { h, faux } = await open(calls("probe"), { tools: [tool] });
  const other = await h.createConversation({ ownership: { kind: "ownerless" } });
  expect((await (await other.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
  expect(seen.api!.models).toBe(faux.models);
  expect(seen.api!.models.resolve(faux.ref)?.id).toBe(faux.ref.modelId);
});

test("diagnostic() records a remark in the call's slot with the next progress commit and in the result: the api's first, then the result's, then the harness's; a warn is not an error; a bad one is a TypeError; it throws after the call ended", async () => {
  const started = deferred();
  const gate = deferred();
  let bad: unknown;
  const { tool, seen } = probe(
    "probe",
    async (api) => {
      api.diagnostic({ severity: "warn", message: "file changed on disk", code: "changed" });
      // Break 28I: a second remark (the buffer keeping only the last one passed with one).
      api.diagnostic({ severity: "info", message: "second remark" });
      try {
        api.diagnostic({ severity: "fatal", message: "no such severity" } as never);
      } catch (error) {
        bad = error;
      }
      started.resolve();
      await gate.promise;
      return {
        content: [{ type: "text", text: "one\ntwo\nthree\nfour\n" }],
        diagnostics: [{ severity: "info", message: "search capped at 100 matches" }],
      };
    },
    { outputLimits: { maxLines: 2 } },
  );
  const { h, root, faux } = await open(calls("probe"), { tools: [tool] });
  const sub = await root.submit({ type: "input", content: "go" });
  await started.promise;
  // The first remark's commit goes out at once; the second rides the next throttled one.
  await until(() => liveOf(h).tools?.[0]?.diagnostics?.length === 2);
  expect(liveOf(h).tools![0]!.diagnostics).toEqual([
    { severity: "warn", message: "file changed on disk", code: "changed" },
    { severity: "info", message: "second remark" },
  ]);
  expect(bad).toBeInstanceOf(TypeError);
  gate.resolve();
  expect((await sub.wait()).status).toBe("done");
  const [result] = await toolResults(root);
  const diagnostics = diagnosticsOf(result!);
  expect(diagnostics.map((d) => [d.severity, d.code])).toEqual([
    ["warn", "changed"],
    ["info", undefined],
    ["info", undefined],
    ["warn", "truncated"],
  ]);
  expect(diagnostics[1]!.message).toBe("second remark");
  const message = messageOf(result!) as { isError: boolean; content: Array<{ text: string }> };
  expect(message.isError).toBe(false);
  // The content ends with one harness block, a line per diagnostic, in that order; the model reads it.
  const block = message.content.at(-1)!.text;
  expect(block.split("\n")).toEqual([
    "<harness>",
    "[warn] file changed on disk",
    "[info] second remark",
    "[info] search capped at 100 matches",
    `[warn] ${diagnostics[3]!.message}`,
    "</harness>",
  ]);
  expect(faux.requests[1]!.messages.some((m) => m.role === "toolResult" && textOf(m).includes(block))).toBe(
    true,
  );
  // The slot is done and no longer carries them; after the call, diagnostic() throws.
  expect(liveOf(h).tools).toBeUndefined();
  expect(() => seen.api!.diagnostic({ severity: "info", message: "late" })).toThrow(CommitRefused);
});

test("diagnostic() throws once the call's invocation was signalled by an abort, and that late remark is not in the aborted result (draw 35c)", async () => {
  // Draw 35c: "throws after the call ended" was tried at a call that returned; a diagnostic() that
  // checked the invocation's end only, accepting a remark after the abort signal, passed every test.
  const reported = deferred();
  let late: unknown = "not thrown";
  const { tool } = probe("probe", async (api) => {
    api.diagnostic({ severity: "warn", message: "before the abort" });
    const aborted = new Promise((_, reject) =>
      api.signal.addEventListener(
        "abort",
        () => {
          try {
            api.diagnostic({ severity: "info", message: "after the abort" });
          } catch (error) {
            late = error;
          }
          reject(api.signal.reason);
        },
        { once: true },
      ),
    );
    reported.resolve();
    await aborted;
    return textResult("never");
  });
  const { h, root } = await open(calls("probe"), { tools: [tool] });
  const sub = await root.submit({ type: "input", content: "go" });
  await reported.promise;
  await until(() => liveOf(h).tools?.[0]?.diagnostics !== undefined);
  await root.abort();
  expect((await sub.wait()).status).toBe("unanswered");
  expect(late).toBeInstanceOf(CommitRefused);
  const [result] = await toolResults(root);
  expect(diagnosticsOf(result!).map((d) => [d.severity, d.code ?? d.message])).toEqual([
    ["warn", "before the abort"],
    ["error", "aborted"],
  ]);
});

test("diagnostic() records the remark as it was when called: a tool reusing one object for its next remark changes neither the slot's nor the result's first (draw 32b)", async () => {
  // Draw 32b: the named test passed a fresh object to each call; a buffer keeping the caller's
  // object, not a copy taken at the call, passed it, and a later change to the object rewrote
  // the remark already recorded.
  const started = deferred();
  const gate = deferred();
  const { tool } = probe("probe", async (api) => {
    const remark = { severity: "warn" as "warn" | "info", message: "first remark", code: "one" };
    api.diagnostic(remark);
    remark.severity = "info";
    remark.message = "second remark";
    remark.code = "two";
    api.diagnostic(remark);
    remark.message = "never recorded";
    started.resolve();
    await gate.promise;
    return textResult("ok");
  });
  const { h, root } = await open(calls("probe"), { tools: [tool] });
  const sub = await root.submit({ type: "input", content: "go" });
  await started.promise;
  const expected = [
    { severity: "warn", message: "first remark", code: "one" },
    { severity: "info", message: "second remark", code: "two" },
  ];
  await until(() => liveOf(h).tools?.[0]?.diagnostics?.length === 2);
  expect(liveOf(h).tools![0]!.diagnostics).toEqual(expected);
  gate.resolve();
  expect((await sub.wait()).status).toBe("done");
  const [result] = await toolResults(root);
  expect(diagnosticsOf(result!)).toEqual(expected);
  const message = messageOf(result!) as { content: Array<{ text: string }> };
  expect(message.content.at(-1)!.text.split("\n")).toEqual([
    "<harness>",
    "[warn] first remark",
    "[info] second remark",
    "</harness>",
  ]);
});

test("a tool that throws after diagnostic() keeps the api's remarks, in order, before the harness's tool_error", async () => {
  // Break 28I: the named test's tool returned; the thrown path dropping the api's diagnostics, or
  // putting the harness's error first, passed it.
  const { tool } = probe("probe", async (api) => {
    api.diagnostic({ severity: "warn", message: "first remark", code: "one" });
    api.diagnostic({ severity: "info", message: "second remark" });
    throw new Error("boom");
  });
  const { root } = await open(calls("probe"), { tools: [tool] });
  const sub = await root.submit({ type: "input", content: "go" });
  expect((await sub.wait()).status).toBe("done");
  const [result] = await toolResults(root);
  expect(diagnosticsOf(result!).map((d) => [d.severity, d.code ?? d.message])).toEqual([
    ["warn", "one"],
    ["info", "second remark"],
    ["error", "tool_error"],
  ]);
  const message = messageOf(result!) as { isError: boolean; content: Array<{ text: string }> };
  expect(message.isError).toBe(true);
  expect(message.content.at(-1)!.text.split("\n").slice(0, 3)).toEqual([
    "<harness>",
    "[warn] first remark",
    "[info] second remark",
  ]);
});

test("details() replaces the running details with a complete value and resolves once a commit stored it (the result's at the latest); a result without details gets the last value, an error result too; never in what the model reads; non-JSON and a call that ended are refused", async () => {
  const gate = deferred();
  const running: Json[] = [];
  const state: {
    pending?: Promise<void>;
    settled: boolean;
    superseded?: Promise<void>;
    supersededSettled: boolean;
    notJson?: unknown;
    notJsonDate?: unknown;
  } = { settled: false, supersededSettled: false };
  const ctx: { h?: Awaited<ReturnType<typeof open>>["h"] } = {};
  const slotDetails = () => liveOf(ctx.h!).tools?.find((s) => s.name === "probe")?.details ?? null;
  const { tool, seen } = probe("probe", async (api) => {
    // The first change after a quiet period is committed at once: resolved, it is in the slot.
    await api.details({ step: 1, files: ["a.txt"] });
    running.push(slotDetails());
    // The throttle (one commit a minute here) holds the next one back: the result's commit stores it.
    // A value replaced before any commit carried it resolves with the commit that coalesced it.
    state.superseded = api.details({ step: 1.5 }).then(() => {
      state.supersededSettled = true;
    });
    state.pending = api.details({ step: 2 }).then(() => {
      state.settled = true;
    });
    // A value structured cloning would take is still refused: details are strict JSON.
    state.notJsonDate = await api.details({ when: new Date(0) } as never).then(
      () => undefined,
      (error: unknown) => error,
    );
    state.notJson = await api.details({ bad: () => 1 } as never).then(
      () => undefined,
      (error: unknown) => error,
    );
    await gate.promise;
    return textResult("probed");
  });
  const boom = probe("boom", async (api) => {
    await api.details({ partial: true });
    throw new Error("boom failed");
  }).tool;
  // A result with details of its own keeps them: the last running value fills only a result without (break 29F).
  const own = probe("own", async (api) => {
    await api.details({ running: true });
    return textResult("owned", { final: true });
  }).tool;
  // Draw 35eD: own details that are falsy are still its own; a result read as "without details"
  // when its details were 0 took the last running value.
  const ownZero = probe("ownZero", async (api) => {
    await api.details({ running: true });
    return textResult("zero", 0);
  }).tool;
  const { h, root, faux } = await open(calls("probe", "boom", "own", "ownZero"), {
    tools: [tool, boom, own, ownZero],
    settings: { outputIntervalMs: 60_000 },
  });
  ctx.h = h;
  const sub = await root.submit({ type: "input", content: "go" });
  await until(() => state.notJson !== undefined);
  expect(running).toEqual([{ step: 1, files: ["a.txt"] }]);
  expect(state.notJson).toBeInstanceOf(Error);
  expect(state.notJsonDate).toBeInstanceOf(Error);
  // Not stored yet, so not resolved yet; and nothing went to the model while the call runs.
  expect(slotDetails()).toEqual({ step: 1, files: ["a.txt"] });
  expect(state.settled).toBe(false);
  expect(state.supersededSettled).toBe(false);
  expect(faux.requests).toHaveLength(1);
  gate.resolve();
  expect((await sub.wait()).status).toBe("done");
  await state.pending;
  await state.superseded;
  expect(state.settled).toBe(true);
  expect(state.supersededSettled).toBe(true);
  const results = await toolResults(root);
  const byName = (name: string) =>
    results.find((e) => (messageOf(e) as { toolName?: string }).toolName === name)!;
  const [probed, failed] = [byName("probe"), byName("boom")];
  const probedMessage = messageOf(probed!) as { details?: Json; content: Array<{ text: string }> };
  // The last value, replaced whole (not merged with the first).
  expect(probedMessage.details).toEqual({ step: 2 });
  expect(probedMessage.content.map((c) => c.text).join("")).not.toContain("step");
  expect(faux.requests[1]!.messages.map(textOf).join("")).not.toContain("step");
  const failedMessage = messageOf(failed!) as { details?: Json; isError: boolean };
  expect(failedMessage.isError).toBe(true);
  expect(diagnosticsOf(failed!).map((d) => d.code)).toEqual(["tool_error"]);
  expect(failedMessage.details).toEqual({ partial: true });
  expect((messageOf(byName("own")) as { details?: Json }).details).toEqual({ final: true });
  expect((messageOf(byName("ownZero")) as { details?: Json }).details).toBe(0);
  await expect(seen.api!.details({ late: true })).rejects.toThrow(CommitRefused);
});

test("createTask creates a task in the call's conversation with the ownership given: a child of the call holds the call's task completing until it ends; a conversation-owned one may be background; a conversationId or a background child is refused; it rejects after the call ended", async () => {
  const childGate = deferred();
  const work = gatedTask("test.work", childGate.promise);
  const refused: unknown[] = [];
  const created: number[] = [];
  const accepted: number[] = [];
  const { tool, seen } = probe("probe", async (api) => {
    created.push(await api.createTask(work, { n: 1 }, { ownership: { kind: "task", taskId: api.taskId } }));
    created.push(
      await api.createTask(work, { n: 2 }, { ownership: { kind: "conversation" }, background: true }),
    );
    for (const options of [
      { ownership: { kind: "conversation" }, conversationId: 999 },
      { ownership: { kind: "task", taskId: api.taskId }, background: true },
      {}, // ownership is never implied
    ])
      await api.createTask(work, { n: 0 }, options as never).then(
        (id) => accepted.push(id),
        (error) => refused.push(error),
      );
    return textResult("ok");
  });
  const { h, root } = await open(calls("probe"), { tools: [tool], tasks: [work] });
  const sub = await root.submit({ type: "input", content: "go" });
  // (draw 39d) Wait for all five attempts to settle, then assert: a background child made plain
  // instead of refused fails here, on an assertion, not on a wait that never ends.
  await until(() => created.length + accepted.length + refused.length === 5);
  expect(accepted).toEqual([]);
  expect(refused).toHaveLength(3);
  const [child, background] = (await Promise.all(created.map((id) => h.getTask(id)))) as TaskRecord[];
  const callTask = seen.api!.taskId;
  expect(child).toMatchObject({ conversationId: root.id, owner: callTask, background: false });
  expect(background).toMatchObject({ conversationId: root.id, background: true });
  expect(background!.owner).toBeUndefined();
  expect(refused.every((e) => e instanceof InvalidTransition)).toBe(true);
  // The call returned, but its task holds its outcome while the child it owns runs.
  await until(() => h.inspect().tasks.some((t) => t.record.id === callTask && t.state.kind === "completing"));
  expect(h.inspect().tasks.find((t) => t.record.id === callTask)!.state.kind).toBe("completing");
  await expect(seen.api!.createTask(work, { n: 3 }, { ownership: { kind: "conversation" } })).rejects.toThrow(
    CommitRefused,
  );
  childGate.resolve();
  expect((await sub.wait()).status).toBe("done");
  expect((await h.getTask(callTask))!.state.status).toBe("terminal");
  expect((await h.waitForTask(background!.id)).state.status).toBe("terminal");
});

test("createTask in a call of a conversation other than the root: its tasks live in the call's conversation, child and conversation-owned alike", async () => {
  // Reading 24a: the createTask test's call ran in the root, so a default to the root conversation
  // could not be told from "that task's conversation" (spec §7.3).
  const work = gatedTask("test.work", Promise.resolve());
  const created: number[] = [];
  const { tool, seen } = probe("probe", async (api) => {
    created.push(await api.createTask(work, { n: 1 }, { ownership: { kind: "task", taskId: api.taskId } }));
    created.push(
      await api.createTask(work, { n: 2 }, { ownership: { kind: "conversation" }, background: true }),
    );
    created.push(await api.createTask(work, { n: 3 }, { ownership: { kind: "conversation" } }));
    return textResult("ok");
  });
  const { h, root } = await open(calls("probe"), { tools: [tool], tasks: [work] });
  const other = await h.createConversation({ ownership: { kind: "ownerless" } });
  expect(other.id).not.toBe(root.id);
  expect((await (await other.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
  const records = await Promise.all(created.map((id) => h.waitForTask(id)));
  expect(records.map((r) => r.conversationId)).toEqual([other.id, other.id, other.id]);
  // Break 31A: and with the ownership given, the plain conversation-owned one too (a call that made it
  // its own child passed): the call's child, then two of the conversation's own.
  expect(records.map((r) => [r.owner, r.background])).toEqual([
    [seen.api!.taskId, false],
    [undefined, true],
    [undefined, false],
  ]);
});

test("createTask keeps a task ownership naming another task than the call's: a task owned by the call's child is that child's work, and the call's task holds completing until both end (draw 33b)", async () => {
  // Draw 33b: every createTask of the tests named the call's own task as owner; a tool api that made
  // every task-owned one the call's child (the taskId given not honoured) passed them all.
  const gate = deferred();
  const work = gatedTask("test.work", gate.promise);
  const created: number[] = [];
  const { tool, seen } = probe("probe", async (api) => {
    const child = await api.createTask(work, { n: 1 }, { ownership: { kind: "task", taskId: api.taskId } });
    created.push(child);
    created.push(await api.createTask(work, { n: 2 }, { ownership: { kind: "task", taskId: child } }));
    return textResult("ok");
  });
  const { h, root } = await open(calls("probe"), { tools: [tool], tasks: [work] });
  const sub = await root.submit({ type: "input", content: "go" });
  await until(() => created.length === 2, { what: "both tasks created" });
  const callTask = seen.api!.taskId;
  const [child, grandchild] = (await Promise.all(created.map((id) => h.getTask(id)))) as TaskRecord[];
  expect([child!.owner, grandchild!.owner]).toEqual([callTask, child!.id]);
  expect([child!.conversationId, grandchild!.conversationId]).toEqual([root.id, root.id]);
  await until(
    () => h.inspect().tasks.some((t) => t.record.id === callTask && t.state.kind === "completing"),
    {
      what: "the call's task holding",
    },
  );
  gate.resolve();
  expect((await sub.wait()).status).toBe("done");
  expect((await h.getTask(callTask))!.state.status).toBe("terminal");
});

test("getTask reads a task's committed record and waitForTask its terminal receipt; both reject after the call ended; a wait rejects when the call's invocation ends, and the abort-marked call creates nothing", async () => {
  const gate = deferred();
  const never = deferred();
  const work = gatedTask("test.work", gate.promise);
  const forever = gatedTask("test.forever", never.promise);
  const read: Array<TaskRecord | undefined> = [];
  let waitError: unknown;
  let markedCreate: unknown;
  const { tool, seen } = probe("probe", async (api) => {
    const child = await api.createTask(work, { n: 1 }, { ownership: { kind: "task", taskId: api.taskId } });
    read.push(await api.getTask(child), await api.getTask(987_654));
    gate.resolve();
    read.push(await api.waitForTask(child));
    return textResult("ok");
  });
  const { tool: stuck, seen: stuckSeen } = probe("stuck", async (api) => {
    const id = await api.createTask(forever, {}, { ownership: { kind: "conversation" }, background: true });
    try {
      await api.waitForTask(id);
    } catch (error) {
      waitError = error;
      // The call's task is abort-marked: its gates refuse new work too.
      markedCreate = await api
        .createTask(forever, {}, { ownership: { kind: "conversation" }, background: true })
        .catch((refused: unknown) => refused);
      throw error;
    }
    return textResult("never");
  });
  const { h, root } = await open(calls("probe", "stuck"), { tools: [tool, stuck], tasks: [work, forever] });
  const sub = await root.submit({ type: "input", content: "go" });
  await until(() => read.length === 3 && stuckSeen.api !== undefined);
  const [pending, unknown, receipt] = read;
  expect(pending!.state.status === "pending" || pending!.state.status === "running").toBe(true);
  // The committed record as the harness holds it (break 27E: a record with its abort mark flipped
  // passed): every field but the state, which may have moved on since.
  const { state: _s, ...committed } = (await h.getTask(receipt!.id))!;
  const { state: _p, ...read0 } = pending!;
  expect({ ...read0, startedAt: undefined, endedAt: undefined }).toEqual({
    ...committed,
    startedAt: undefined,
    endedAt: undefined,
  });
  expect(pending).toMatchObject({
    id: receipt!.id,
    kind: "test.work",
    input: { n: 1 },
    abortRequested: false,
  });
  expect(unknown).toBeUndefined();
  expect(receipt!.state).toEqual({ status: "terminal", outcome: { status: "completed", result: { n: 1 } } });
  await until(() => h.inspect().tasks.some((t) => t.record.kind === "test.forever"));
  await root.abort();
  expect((await sub.wait()).status).toBe("unanswered");
  expect(waitError).toBeInstanceOf(WaitCancelled);
  expect(markedCreate).toBeInstanceOf(CommitRefused);
  expect(h.inspect().tasks.filter((t) => t.record.kind === "test.forever")).toHaveLength(1);
  for (const api of [seen.api!, stuckSeen.api!]) {
    await expect(api.getTask(receipt!.id)).rejects.toThrow(CommitRefused);
    await expect(api.waitForTask(receipt!.id)).rejects.toThrow(CommitRefused);
  }
  never.resolve();
});

test("a tool's conversation handle: abort() leaves the background work there running; abort({ background: true }) marks and awaits it, and no background work of a conversation it does not reach (draw 34D)", async () => {
  // Draw 34D: every named `{ background: true }` abort went through the root's Conversation handle;
  // a tool's handle dropping the option (an ordinary abort) passed them all.
  const slowAbort = single("test.slow-bg", async (_t, _r, signal) => untilAborted(signal), {
    abort: async (_t, runtime) => {
      await new Promise((r) => setTimeout(r, 20));
      await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }));
    },
  });
  const ordinary = single("test.ordinary", async (_t, _r, signal) => untilAborted(signal));
  const seen: Record<string, unknown> = {};
  const { tool } = probe("aborter", async (api) => {
    const [conversation, below, work, elsewhere] = await api.commit((tx) => {
      const c = tx.createConversation({ kind: "task", taskId: api.taskId }).id;
      const options = { ownership: { kind: "conversation" as const }, conversationId: c };
      return [
        c,
        tx.createTask(slowAbort, null, { ...options, background: true }),
        tx.createTask(ordinary, null, options),
        tx.createTask(slowAbort, null, { ownership: { kind: "conversation" }, background: true }),
      ] as const;
    });
    const handle = api.conversation(conversation)!;
    await handle.abort();
    seen["after abort()"] = [(await api.getTask(work))!.state, (await api.getTask(below))!.abortRequested];
    await handle.abort({ background: true });
    seen["after abort({ background: true })"] = (await api.getTask(below))!.state;
    seen["elsewhere"] = await api.getTask(elsewhere);
    return textResult("ok");
  });
  const { h, root } = await open(calls("aborter"), { tools: [tool], tasks: [slowAbort, ordinary] });
  expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
  expect(seen["after abort()"]).toMatchObject([
    { status: "terminal", outcome: { status: "aborted" } },
    false,
  ]);
  expect(seen["after abort({ background: true })"]).toEqual({
    status: "terminal",
    outcome: { status: "aborted" },
  });
  const elsewhere = seen["elsewhere"] as TaskRecord;
  expect(elsewhere).toMatchObject({ abortRequested: false, state: { status: "running" } });
  expect(await h.abortTask(elsewhere.id)).toBe("marked");
  await until(() => h.inspect().tasks.length === 0, { what: "the root's background task aborted" });
});

test("a tool's conversation handle: abort() withdraws the queued steer and follow-up inputs of that conversation (unanswered, aborted) and keeps its queued write (draw 38, 17)", async () => {
  // Spec §5.4, §6: Conversation.abort() withdraws queued inputs but keeps writes. Draw 38-B: every
  // named withdrawal was a host's Conversation.abort(); a tool's handle that withdrew the steer
  // inputs only (its own copy of the withdrawal) passed them all.
  const gate = deferred();
  const shared: { other?: number } = {};
  const { tool } = probe("aborter", async (api) => {
    await api.conversation(shared.other!)!.abort();
    return textResult("aborted");
  });
  const root = callsThenAnswer(fauxToolCall("aborter", {}, { id: "call-1" }));
  const { h, root: rootConversation } = await open(
    async (req, n) => {
      if (!JSON.stringify(req.messages).includes('"hold"')) return root(req, n);
      await gate.promise;
      return fauxAssistantMessage("late");
    },
    { tools: [tool] },
  );
  const other = await h.createConversation({ ownership: { kind: "ownerless" } });
  shared.other = other.id;
  const first = await other.submit({ type: "input", content: "hold" });
  await until(() => other.busy, { what: "a run in the other conversation" });
  const steer = await other.submit({ type: "input", content: "steer", whenBusy: "steer" });
  const followUp = await other.submit({ type: "input", content: "follow" });
  const write = await other.submit({ type: "write", entry: { kind: "app.note", data: "kept" } });
  expect(inboxOf(h, other.id).items.map((i) => i.mode)).toEqual(["steer", "followUp", "write"]);
  let marked = false;
  h.subscribe((change) => {
    if (change.tasks.some((t) => t.conversationId === other.id && t.abortRequested)) marked = true;
  });
  const sub = await rootConversation.submit({ type: "input", content: "go" });
  await until(() => marked, { what: "the other conversation's run marked" });
  gate.resolve(); // the faux model is deaf to the signal: let the aborted request return
  expect((await sub.wait()).status).toBe("done");
  expect(await first.wait()).toMatchObject({ status: "unanswered", reason: "aborted" });
  expect(await steer.record()).toMatchObject({ status: "unanswered", reason: "aborted" });
  expect(await followUp.record()).toMatchObject({ status: "unanswered", reason: "aborted" });
  expect((await write.record()).status).toBe("queued");
  expect(inboxOf(h, other.id).items.map((i) => i.mode)).toEqual(["write"]);
});

test("a tool's conversation handle: abort({ background: true }) withdraws the queued inputs of every conversation it reaches, one owned by a finished task below it, and keeps that conversation's queued write (draw 39c)", async () => {
  // Spec §5.4, §6 (withdraw queued item: unanswered, aborted; the item leaves the inbox). Draw 39c:
  // the tool handle's abort withdrew only in its own conversation: every named test queued there.
  const gate = deferred();
  const worker = parked("tool-api.worker");
  const shared: { other?: number } = {};
  const { tool } = probe("aborter", async (api) => {
    await api.conversation(shared.other!)!.abort({ background: true });
    return textResult("aborted");
  });
  const root = callsThenAnswer(fauxToolCall("aborter", {}, { id: "call-1" }));
  const { h, root: rootConversation } = await open(
    async (req, n) => {
      if (!JSON.stringify(req.messages).includes('"work"')) return root(req, n);
      await gate.promise;
      return fauxAssistantMessage("late");
    },
    { tools: [tool], tasks: [worker] },
  );
  const other = await h.createConversation({ ownership: { kind: "ownerless" } });
  shared.other = other.id;
  const owner = await h.createTask(worker, null, {
    ownership: { kind: "conversation" },
    conversationId: other.id,
  });
  const child = await h.createConversation({ ownership: { kind: "task", taskId: owner } });
  // Its owner finished: traversal still reaches the conversation, and no cascade from the owner does
  // (a terminal owner never cascades), so the abort's own withdrawal is the only one.
  await h.abortTask(owner);
  expect((await h.waitForTask(owner)).state.status).toBe("terminal");
  const first = await child.submit({ type: "input", content: "work" });
  await until(() => child.busy, { what: "a run in the task-owned conversation" });
  const followUp = await child.submit({ type: "input", content: "queued input" });
  const write = await child.submit({ type: "write", entry: { kind: "app.note", data: "kept" } });
  const steer = await child.submit({ type: "input", content: "queued steer", whenBusy: "steer" });
  expect(inboxOf(h, child.id).items.map((i) => i.mode)).toEqual(["followUp", "write", "steer"]);
  let marked = false;
  h.subscribe((change) => {
    if (change.tasks.some((t) => t.conversationId === child.id && t.abortRequested)) marked = true;
  });
  const sub = await rootConversation.submit({ type: "input", content: "go" });
  await until(() => marked, { what: "the task-owned conversation's run marked" });
  gate.resolve(); // the faux model is deaf to the signal: let the aborted request return
  expect((await sub.wait()).status).toBe("done");
  expect(await first.wait()).toMatchObject({ status: "unanswered", reason: "aborted" });
  for (const queued of [followUp, steer]) {
    const record = await queued.record();
    expect(record).toMatchObject({ status: "unanswered", reason: "aborted" });
    expect(record).not.toHaveProperty("entry");
  }
  expect((await write.record()).status).toBe("queued");
  expect(inboxOf(h, child.id).items.map((i) => i.mode)).toEqual(["write"]);
});

test("a paused reopen below an abort-marked owner whose cascade never ran withdraws the queued input a failed run left in its owned conversation, keeps the queued write, before resume, also when another conversation it owns has no documents in memory", async () => {
  // Draw 39b, 19 (lead's follow-up): the conversation a failed run left a queue in has its documents
  // in memory after a reopen (its queued items are unsettled submissions), so a paused open's draft
  // of the reconciliation needed nothing more, and dropping reconcileAtOpen's fallback commit passed
  // every test. Here the owner also owns an idle conversation with nothing queued, whose documents the
  // reopen does not load: the cascade reads its inbox, the draft throws, and the fallback commit is
  // what withdraws the input before resume.
  const hold = deferred();
  const worker = parked("tool-api.reopen-owner");
  const { h, root, faux, store } = await open(
    async (req) => {
      const sent = JSON.stringify(req.messages);
      if (sent.includes('"fails"')) {
        await hold.promise;
        return fauxError("400 invalid request");
      }
      return fauxAssistantMessage("idle done");
    },
    { tasks: [worker] },
  );
  const owner = await h.createTask(worker, null, {
    ownership: { kind: "conversation" },
    conversationId: root.id,
  });
  const queuedIn = await h.createConversation({ ownership: { kind: "task", taskId: owner } });
  const idle = await h.createConversation({ ownership: { kind: "task", taskId: owner } });
  expect((await (await idle.submit({ type: "input", content: "idle" })).wait()).status).toBe("done");
  const first = await queuedIn.submit({ type: "input", content: "fails" });
  await until(() => queuedIn.busy, { what: "a run in the task-owned conversation" });
  const followUp = await queuedIn.submit({ type: "input", content: "queued input" });
  const write = await queuedIn.submit({ type: "write", entry: { kind: "app.note", data: "kept" } });
  hold.resolve();
  expect(await first.wait()).toMatchObject({ status: "unanswered", reason: "model_error" });
  await queuedIn.waitForIdle();
  expect(inboxOf(h, queuedIn.id).items.map((i) => i.id)).toEqual([followUp.id, write.id]);
  // The store as a crash right after the owner's marking commit leaves it: the cascade never ran.
  const crashed = await memoryStore(store.image());
  await h.close();
  await crashed.commit((sql) => sql.run("UPDATE tasks SET abort_requested = 1 WHERE id = ?", [owner]));
  const reopened = await AgentHarness.open(crashed, {
    models: faux.models,
    defaultModel: faux.ref,
    tasks: [worker],
    paused: true,
  });
  cleanups.push(() => reopened.close().catch(() => undefined));
  const stored = async (id: number) =>
    JSON.parse(
      String(
        (await crashed.read((sql) => sql.get("SELECT body FROM submissions WHERE id = ?", [id])))?.["body"],
      ),
    ) as { status: string; reason?: string };
  // Committed by the open itself, before anything is scheduled.
  expect(reopened.inspect().scheduling).toBe("paused");
  expect(await stored(followUp.id)).toMatchObject({ status: "unanswered", reason: "aborted" });
  expect((await stored(write.id)).status).toBe("queued");
  expect(await reopened.submissionRecord(followUp.id)).toMatchObject({
    status: "unanswered",
    reason: "aborted",
  });
  expect(inboxOf(reopened, queuedIn.id).items.map((i) => i.id)).toEqual([write.id]);
  const marked = await reopened.getTask(owner);
  expect(marked?.abortRequested).toBe(true);
  expect(marked?.state.status).not.toBe("terminal");
  // The idle conversation's documents are in memory only through the fallback commit's load (the
  // open reads those of conversations with live work or queued items): the state this test is for.
  expect(reopened.docsLoaded(idle.id)).toBe(true);
  reopened.resume();
  const ended = await reopened.waitForTask(owner);
  expect(ended.state).toMatchObject({ status: "terminal", outcome: { status: "aborted" } });
  expect((await reopened.submissionRecord(write.id))?.status).toBe("queued");
});

test("two calls wait on one task: the wait of the call aborted first rejects with WaitCancelled, and the other call still gets the terminal receipt", async () => {
  // Draw 32B: every named wait was the only one on its task; a cancelled wait that dropped every
  // wait on the task (not only its own) passed them, and the other call then waited forever.
  const gate = deferred();
  const work = gatedTask("test.work", gate.promise);
  const shared: { id?: number; keeper?: boolean; quitter?: boolean } = {};
  const receipts: TaskRecord[] = [];
  let quitError: unknown;
  const { tool: keeper } = probe("keeper", async (api) => {
    const id = await api.createTask(
      work,
      { n: 3 },
      { ownership: { kind: "conversation" }, background: true },
    );
    shared.id = id;
    shared.keeper = true;
    receipts.push(await api.waitForTask(id));
    return textResult("kept");
  });
  const { tool: quitter } = probe("quitter", async (api) => {
    await until(() => shared.id !== undefined);
    shared.quitter = true;
    try {
      await api.waitForTask(shared.id!);
    } catch (error) {
      quitError = error;
      throw error;
    }
    return textResult("never");
  });
  const { h, root } = await open(calls("keeper", "quitter"), { tools: [keeper, quitter], tasks: [work] });
  const sub = await root.submit({ type: "input", content: "go" });
  await until(() => Boolean(shared.keeper && shared.quitter));
  await new Promise((r) => setTimeout(r, 10)); // both waits are registered
  const quitterTask = liveOf(h).tools!.find((t) => t.name === "quitter")!.taskId!;
  expect(await h.abortTask(quitterTask)).toBe("marked");
  await until(() => quitError !== undefined);
  expect(quitError).toBeInstanceOf(WaitCancelled);
  gate.resolve();
  await until(() => receipts.length === 1, { what: "the keeper's receipt", timeoutMs: 2000 });
  expect(receipts[0]!.id).toBe(shared.id);
  expect(receipts[0]!.state).toEqual({
    status: "terminal",
    outcome: { status: "completed", result: { n: 3 } },
  });
  expect((await sub.wait()).status).toBe("done");
});

test("two calls wait for another conversation's idle through their handles: the call aborted first stops only its own wait, with WaitCancelled; the work there goes on and the other call's wait resolves when it ends (draw 37, 15)", async () => {
  // Spec §2.2: cancelling an idle wait aborts only that waiter. Draw 37-A: every named idle wait was a
  // host's (Harness or Conversation); a tool's conversation handle whose wait dropped the call's
  // signal (the aborted call kept waiting for the other conversation's idle) passed them all.
  const gate = deferred();
  const work = gatedTask("test.work", gate.promise);
  const shared: { other?: number; keeper?: boolean; quitter?: boolean; kept?: boolean } = {};
  let quitError: unknown;
  const { tool: keeper } = probe("keeper", async (api) => {
    shared.keeper = true;
    await api.conversation(shared.other!)!.waitForIdle();
    shared.kept = true;
    return textResult("kept");
  });
  const { tool: quitter } = probe("quitter", async (api) => {
    shared.quitter = true;
    try {
      await api.conversation(shared.other!)!.waitForIdle();
    } catch (error) {
      quitError = error;
      throw error;
    }
    return textResult("never");
  });
  const { h, root } = await open(calls("keeper", "quitter"), { tools: [keeper, quitter], tasks: [work] });
  const other = await h.createConversation({ ownership: { kind: "ownerless" } });
  shared.other = other.id;
  const id = await h.transaction((tx) =>
    tx.createTask(work, { n: 1 }, { ownership: { kind: "conversation" }, conversationId: other.id }),
  );
  const sub = await root.submit({ type: "input", content: "go" });
  await until(() => Boolean(shared.keeper && shared.quitter));
  await new Promise((r) => setTimeout(r, 10)); // both waits are registered
  const quitterTask = liveOf(h).tools!.find((t) => t.name === "quitter")!.taskId!;
  // abortTask joins the call, so it answers once the call's wait has ended.
  const marked = h.abortTask(quitterTask);
  await until(() => quitError !== undefined, { what: "the aborted call's wait ended", timeoutMs: 2000 });
  expect(await marked).toBe("marked");
  expect(quitError).toBeInstanceOf(WaitCancelled);
  expect(shared.kept).toBeUndefined();
  expect((await h.getTask(id))?.abortRequested).toBe(false);
  gate.resolve();
  await until(() => shared.kept === true, { what: "the keeper's wait resolved", timeoutMs: 2000 });
  expect((await h.getTask(id))?.state).toMatchObject({
    status: "terminal",
    outcome: { status: "completed" },
  });
  expect((await sub.wait()).status).toBe("done");
});

test("a tool's conversation handle waits for the idle of that conversation itself, whose owner still runs elsewhere: the wait resolves once the work there ended, never waiting for the owner (draw 38, 1)", async () => {
  // Spec §5.4: direct conversation operations start inside that conversation regardless of its
  // owner. Draw 38-B: every named direct idle wait was a host's Conversation.waitForIdle(); a tool's
  // handle whose wait started at the owner's conversation passed them all.
  const gate = deferred();
  const work = gatedTask("test.work", gate.promise);
  let owned: number | undefined;
  const owner = single("test.owner", async (_t, runtime, signal) => {
    await runtime.commit((tx) => {
      owned = tx.createConversation({ kind: "task", taskId: runtime.taskId }).id;
      return { status: "running", checkpoint: { phase: "go" } };
    });
    await untilAborted(signal);
  });
  const shared: { workId?: number; ownerId?: number } = {};
  const seen: Record<string, unknown> = {};
  const { tool } = probe("idler", async (api) => {
    await api.conversation(owned!)!.waitForIdle();
    const ownerRecord = (await api.getTask(shared.ownerId!))!;
    seen["owner"] = [ownerRecord.state.status, ownerRecord.abortRequested];
    seen["work"] = (await api.getTask(shared.workId!))!.state;
    return textResult("idle");
  });
  const { h, root } = await open(calls("idler"), { tools: [tool], tasks: [owner, work] });
  const elsewhere = await h.createConversation({ ownership: { kind: "ownerless" } });
  shared.ownerId = await h.transaction((tx) =>
    tx.createTask(owner, null, { ownership: { kind: "conversation" }, conversationId: elsewhere.id }),
  );
  await until(() => owned !== undefined, { what: "the owned conversation created" });
  shared.workId = await h.transaction((tx) =>
    tx.createTask(work, { n: 1 }, { ownership: { kind: "conversation" }, conversationId: owned! }),
  );
  const sub = await root.submit({ type: "input", content: "go" });
  gate.resolve();
  await until(() => seen["owner"] !== undefined, {
    what: "the handle's wait resolved",
    timeoutMs: 2000,
  }).catch(() => undefined);
  // Only now the owner ends: a wait that started at the owner's conversation resolves after this.
  expect(await h.abortTask(shared.ownerId)).toBe("marked");
  expect((await sub.wait()).status).toBe("done");
  expect(seen["work"]).toEqual({ status: "terminal", outcome: { status: "completed", result: { n: 1 } } });
  expect(seen["owner"]).toEqual(["running", false]);
});

test("getTask reads the committed record while a later commit is on its way to the store: an abort mark merged but not stored is not read until it is", async () => {
  // Draw 32B left this open: a getTask reading the commit line (the group merged in memory, its
  // COMMIT not returned) passed every test. The store here holds one commit after its statements
  // ran and before it returns, while the harness and the tool read the task.
  const gate = deferred();
  const work = gatedTask("test.work", gate.promise);
  const store = await memoryStore();
  const hold = { on: false, reached: deferred(), release: deferred() };
  const commit = store.commit.bind(store);
  store.commit = (<T>(job: (sql: Sql) => Promise<T> | T) =>
    commit(async (sql) => {
      const result = await job(sql);
      if (hold.on) {
        hold.on = false;
        hold.reached.resolve();
        await hold.release.promise;
      }
      return result;
    })) as typeof store.commit;
  const asked = deferred();
  const reads: Array<TaskRecord | undefined> = [];
  const shared: { id?: number } = {};
  const { tool } = probe("probe", async (api) => {
    shared.id = await api.createTask(
      work,
      { n: 5 },
      { ownership: { kind: "conversation" }, background: true },
    );
    await asked.promise;
    reads.push(await api.getTask(shared.id));
    return textResult("ok");
  });
  const { h, root } = await open(calls("probe"), { tools: [tool], tasks: [work], store });
  const sub = await root.submit({ type: "input", content: "go" });
  await until(() => shared.id !== undefined && h.inspect().tasks.some((t) => t.record.id === shared.id));
  hold.on = true;
  // abortTask resolves once the abort is done: the gated task ends it when its gate opens.
  const marking = h.abortTask(shared.id!);
  await hold.reached.promise;
  // The abort mark is merged on the line and its statements ran; its COMMIT has not returned.
  expect((await h.getTask(shared.id!))!.abortRequested).toBe(false);
  asked.resolve();
  await until(() => reads.length === 1, { what: "the tool's read" });
  expect(reads[0]!.abortRequested).toBe(false);
  hold.release.resolve();
  await until(
    () => h.inspect().tasks.find((t) => t.record.id === shared.id)?.record.abortRequested === true,
    {
      what: "the mark stored",
    },
  );
  expect((await h.getTask(shared.id!))!.abortRequested).toBe(true);
  gate.resolve();
  expect(await marking).toBe("marked");
  expect((await sub.wait()).status).toBe("done");
});

test("getTask and waitForTask read a task that ended before a restart: its stored terminal record, as the harness reads it", async () => {
  // Break 30N: every read of the getTask test was of a live task held in memory; after a reopen only
  // live tasks are there, so a getTask reading memory alone answered undefined for this one.
  const work = single("test.work", async (task, runtime) => {
    await runtime.commit(() => complete(task.input));
  });
  const ids: { task?: number } = {};
  const reads: Array<TaskRecord | undefined> = [];
  const { tool } = probe("probe", async (api) => {
    if (ids.task === undefined) {
      const id = await api.createTask(work, { n: 7 }, { ownership: { kind: "conversation" } });
      await api.waitForTask(id);
      ids.task = id;
    } else reads.push(await api.getTask(ids.task), await api.waitForTask(ids.task));
    return textResult("ok");
  });
  const { h, root, store, faux } = await open(calls("probe"), { tools: [tool], tasks: [work] });
  expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
  const ended = await h.getTask(ids.task!);
  expect(ended!.state).toEqual({ status: "terminal", outcome: { status: "completed", result: { n: 7 } } });
  const again = await reopen(store, {
    models: faux.models,
    defaultModel: faux.ref,
    tools: [tool],
    tasks: [work],
  });
  const other = await again.createConversation({ ownership: { kind: "ownerless" } });
  expect((await (await other.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
  expect(reads).toEqual([ended, ended]);
});

test("an entry a tool appends through api.commit records byTaskId = the call's tool task, live, as stored and after a reopen; a host commit's carries none (draw 38)", async () => {
  // Draw 38A: the named byTaskId tests append through runtime.commit, runtime.memo and a wake
  // continuation; a tool's api.commit written as a host commit (no task context) passed them all.
  const ids: { task?: number; returned?: unknown } = {};
  const { tool } = probe("writer", async (api) => {
    ids.task = api.taskId;
    ids.returned = await api.commit((tx) =>
      tx.appendEntry(api.conversationId, { kind: "app.note", data: "by the tool" }),
    );
    return textResult("ok");
  });
  const { h, root, store, faux } = await open(calls("writer"), { tools: [tool] });
  await h.transaction((tx) => tx.appendEntry(root.id, { kind: "app.note", data: "by the host" }));
  expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
  const toolTask = await h.getTask(ids.task!);
  expect(toolTask!.kind).toBe("pi.tool");
  const notes = (entries: readonly { kind: string; data?: unknown; byTaskId?: number }[]) =>
    entries.filter((e) => e.kind === "app.note").map((e) => [e.data, e.byTaskId]);
  expect(notes([ids.returned as never])).toEqual([["by the tool", ids.task]]);
  expect(notes(await h.entries(root.id))).toEqual([
    ["by the host", undefined],
    ["by the tool", ids.task],
  ]);
  const again = await reopen(store, { models: faux.models, defaultModel: faux.ref, tools: [tool] });
  expect(notes(await again.entries(root.id))).toEqual([
    ["by the host", undefined],
    ["by the tool", ids.task],
  ]);
});

test("ownership is never inferred in a tool's api.commit: a conversation created or forked there without naming its ownership is refused (InvalidTransition), and only the one named as the call's own is created (draw 38b)", async () => {
  // Draw 38b A: api.commit taking a missing ownership as the call's task passed every named test,
  // which refuse it in a task's own commit through the core runtime and in a host's commit only.
  const errors: unknown[] = [];
  const at = { id: 0 };
  const made: { task?: number; named?: number } = {};
  const { tool } = probe("maker", async (api) => {
    made.task = api.taskId;
    for (const attempt of [
      (tx: Parameters<Parameters<ToolApi["commit"]>[0]>[0]) => tx.createConversation(undefined as never),
      (tx: Parameters<Parameters<ToolApi["commit"]>[0]>[0]) =>
        tx.forkConversation(api.conversationId, at.id as never, {} as never),
    ]) {
      try {
        await api.commit((tx) => void attempt(tx));
      } catch (error) {
        errors.push(error);
      }
    }
    made.named = await api.commit((tx) => tx.createConversation({ kind: "task", taskId: api.taskId }).id);
    return textResult("ok");
  });
  const { h, root } = await open(calls("maker"), { tools: [tool] });
  at.id = await h.transaction((tx) => tx.appendEntry(root.id, { kind: "app.note", data: "fork here" }).id);
  expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
  expect(errors).toHaveLength(2);
  for (const error of errors) {
    expect(error).toBeInstanceOf(InvalidTransition);
    expect(String(error)).toMatch(/explicit ownership/);
  }
  expect(h.conversationsOwnedBy(made.task! as never)).toEqual([made.named]);
});

test("snapshot reads committed documents, by name or token, of its conversation or another; an absent one is undefined and is not created; it rejects after the call ended", async () => {
  const Note = defineDoc<{ text: string }>("app.note", { text: "" });
  const Absent = defineDoc<{ text: string }>("app.absent", { text: "" });
  const reads: unknown[] = [];
  const ctx: { other?: number } = {};
  const { tool, seen } = probe("probe", async (api) => {
    reads.push(
      await api.snapshot(Absent),
      await api.snapshot(Note),
      await api.snapshot("app.note", ctx.other),
    );
    await api.commit((tx) => tx.writeDoc(api.conversationId, "app.note", { text: "mine" }));
    reads.push(await api.snapshot(Note), await api.snapshot("pi.agent"));
    return textResult("ok");
  });
  const { h, root } = await open(calls("probe"), { tools: [tool], root: { agent: { instructions: "Hi." } } });
  const other = await h.createConversation({
    ownership: { kind: "ownerless" },
    init: (tx, id) => tx.writeDoc(id, "app.note", { text: "other's" }),
  });
  ctx.other = other.id;
  expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
  expect(reads).toEqual([
    undefined,
    undefined,
    { text: "other's" },
    { text: "mine" },
    { instructions: "Hi." },
  ]);
  // Reading the absent document created nothing.
  expect(await h.doc(root.id, "app.absent")).toBeUndefined();
  await expect(seen.api!.snapshot(Note)).rejects.toThrow(CommitRefused);
  // By name too, of its conversation or another (break 31A: a read by name left unbound passed).
  await expect(seen.api!.snapshot("app.note")).rejects.toThrow(CommitRefused);
  await expect(seen.api!.snapshot("app.note", other.id)).rejects.toThrow(CommitRefused);
});

test("snapshot through a token refuses a document whose stored history or fork is not the token's (DocumentSemanticsError), as the harness's snapshot does; by name it reads (sweep 42c)", async () => {
  // Sweep 42c, 45: typed access refused a disagreeing token in a transaction and in the harness's
  // snapshot; a tool's api.snapshot through the token read the value regardless (spec §3.1).
  const Latest = defineDoc<{ text: string }>("app.note", { text: "" });
  const Rewind = defineDoc<{ text: string }>({
    name: "app.note",
    history: "rewindable",
    fork: "asOf",
    initial: { text: "" },
  });
  const reads: unknown[] = [];
  const { tool } = probe("probe", async (api) => {
    reads.push(await api.snapshot(Latest), await api.snapshot("app.note"));
    reads.push(await api.snapshot(Rewind).catch((error: unknown) => error));
    return textResult("ok");
  });
  const { h, root } = await open(calls("probe"), { tools: [tool] });
  await h.transaction((tx) => Latest.write(tx, root.id, { text: "kept" }));
  await expect(h.snapshot(Rewind, root.id)).rejects.toThrow(DocumentSemanticsError);
  expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
  expect(reads.slice(0, 2)).toEqual([{ text: "kept" }, { text: "kept" }]);
  expect(reads[2]).toBeInstanceOf(DocumentSemanticsError);
});

test("snapshot reads another conversation's committed documents after a reopen, by name or token, though nothing in this process loaded them (draw 40b D)", async () => {
  // Draw 40b D: every named read of another conversation was of one created in the same process, its
  // documents in memory; a read by name that skipped loading them passed every test.
  const Note = defineDoc<{ text: string }>("app.note", { text: "" });
  const ctx: { other?: number } = {};
  const reads: unknown[] = [];
  const { tool } = probe("probe", async (api) => {
    for (const read of [() => api.snapshot("app.note", ctx.other), () => api.snapshot(Note, ctx.other)])
      reads.push(await read().catch((e: unknown) => `refused: ${String(e)}`));
    return textResult("ok");
  });
  const { h, store, faux } = await open(calls("probe"), { tools: [tool] });
  const other = await h.createConversation({
    ownership: { kind: "ownerless" },
    init: (tx, id) => tx.writeDoc(id, "app.note", { text: "other's" }),
  });
  ctx.other = other.id;
  const again = await reopen(store, { models: faux.models, defaultModel: faux.ref, tools: [tool] });
  const root = await again.root();
  expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
  expect(reads).toEqual([{ text: "other's" }, { text: "other's" }]);
});

test("snapshot rejects once the call's invocation is aborted, while a tool that ignores the signal still runs", async () => {
  // Draw 34d (D, 11): the named test reads after the call returned; a binding that ended only when
  // execute settled (not at the abort) passed it.
  const Note = defineDoc<{ text: string }>("app.note", { text: "" });
  const started = deferred();
  const gate = deferred();
  const reads: unknown[] = [];
  const { tool, seen } = probe("probe", async (api) => {
    reads.push(await api.snapshot(Note));
    started.resolve();
    await gate.promise; // the signal is ignored
    reads.push(api.signal.aborted);
    for (const read of [() => api.snapshot(Note), () => api.snapshot("app.note")])
      reads.push(
        await read().then(
          () => "read",
          (e: unknown) => (e instanceof CommitRefused ? e.reason : String(e)),
        ),
      );
    return textResult("late");
  });
  const { root } = await open(calls("probe"), { tools: [tool] });
  await root.commit((tx) => tx.writeDoc(root.id, "app.note", { text: "n" }));
  const sub = await root.submit({ type: "input", content: "go" });
  await started.promise;
  const aborting = root.abort();
  await until(() => seen.api?.signal.aborted === true);
  gate.resolve();
  await aborting;
  expect((await sub.wait()).status).toBe("unanswered");
  expect(reads).toEqual([{ text: "n" }, true, "invocation_ended", "invocation_ended"]);
});

test("snapshot through a token of a newer version migrates in memory only: the stored value keeps its version until a transaction reads it through the token (break 30A)", async () => {
  // Break 30A: the read-only migration was shown through Harness.snapshot only; a tool's snapshot
  // storing the migration it made (a transaction read for an older stored version) passed every test.
  const NotesV2 = defineDoc<{ entries: string[] }>({
    name: "app.notes",
    version: 2,
    initial: () => ({ entries: [] }),
    migrate: (value) => ({ entries: (value as { items: string[] }).items }),
  });
  const reads: unknown[] = [];
  const { tool } = probe("probe", async (api) => {
    reads.push(await api.snapshot(NotesV2));
    return textResult("ok");
  });
  const { h, root } = await open(calls("probe"), { tools: [tool] });
  await root.commit((tx) => tx.writeDoc(root.id, "app.notes", { items: ["a"] }, 1));
  expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
  expect(reads).toEqual([{ entries: ["a"] }]);
  expect(await h.docVersioned(root.id, "app.notes")).toEqual({ value: { items: ["a"] }, version: 1 });
  // The next transaction that reads it through the token stores the current version's base.
  await root.commit((tx) => void NotesV2.read(tx, root.id));
  expect(await h.docVersioned(root.id, "app.notes")).toEqual({ value: { entries: ["a"] }, version: 2 });
});

test("snapshot of a call in a conversation other than the root reads that conversation by default, the root only when named", async () => {
  // Reading 24a: the snapshot test's call ran in the root, so a default to the root was not told apart.
  const Note = defineDoc<{ text: string }>("app.note", { text: "" });
  const reads: unknown[] = [];
  const ids: { root?: number } = {};
  const { tool } = probe("probe", async (api) => {
    reads.push(await api.snapshot(Note), await api.snapshot("app.note"), await api.snapshot(Note, ids.root));
    return textResult("ok");
  });
  const { h, root } = await open(calls("probe"), { tools: [tool] });
  ids.root = root.id;
  await root.commit((tx) => tx.writeDoc(root.id, "app.note", { text: "root's" }));
  const other = await h.createConversation({
    ownership: { kind: "ownerless" },
    init: (tx, id) => tx.writeDoc(id, "app.note", { text: "other's" }),
  });
  expect((await (await other.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
  expect(reads).toEqual([{ text: "other's" }, { text: "other's" }, { text: "root's" }]);
});

test("an aborted call's result is built from its slot: the durable output, the last details, and the recorded diagnostics before the aborted one", async () => {
  const reported = deferred();
  const { tool } = probe("probe", async (api) => {
    api.output("partial line\n");
    api.diagnostic({ severity: "warn", message: "slow disk" });
    await api.details({ progress: 1 });
    // Break 31F: a second value, stored by a later progress commit, replaces the first in the slot
    // (a slot that kept its first details passed with one value).
    await api.details({ progress: 2 });
    const aborted = new Promise((_, reject) =>
      api.signal.addEventListener("abort", () => reject(api.signal.reason), { once: true }),
    );
    reported.resolve();
    await aborted;
    return textResult("never");
  });
  const { h, root } = await open(calls("probe"), { tools: [tool] });
  const sub = await root.submit({ type: "input", content: "go" });
  await reported.promise;
  await until(() => {
    const slot = liveOf(h).tools?.[0];
    return slot?.details !== undefined && slot.diagnostics !== undefined && slot.output !== undefined;
  });
  await root.abort();
  expect((await sub.wait()).status).toBe("unanswered");
  const [result] = await toolResults(root);
  const message = messageOf(result!) as {
    details?: Json;
    isError: boolean;
    content: Array<{ text: string }>;
  };
  expect(message.isError).toBe(true);
  expect(message.content[0]!.text).toBe("partial line\n");
  expect(message.details).toEqual({ progress: 2 });
  expect(diagnosticsOf(result!).map((d) => [d.severity, d.code ?? d.message])).toEqual([
    ["warn", "slow disk"],
    ["error", "aborted"],
  ]);
});

test("two calls of a parallel round aborted together: each result is built from its own slot", async () => {
  // Break 31A: the named tests abort one call, so results built from the round's first running slot
  // passed them.
  const reporting = (name: string) => async (api: ToolApi) => {
    api.output(`${name} line\n`);
    api.diagnostic({ severity: "warn", message: `${name} is slow` });
    await api.details({ of: name });
    await new Promise((_, reject) =>
      api.signal.addEventListener("abort", () => reject(api.signal.reason), { once: true }),
    );
    return textResult("never");
  };
  const left = probe("left", reporting("left"));
  const right = probe("right", reporting("right"));
  const { h, root } = await open(calls("left", "right"), { tools: [left.tool, right.tool] });
  const sub = await root.submit({ type: "input", content: "go" });
  await until(() => {
    const slots = liveOf(h).tools ?? [];
    return slots.length === 2 && slots.every((s) => s.details !== undefined && s.diagnostics !== undefined);
  });
  await root.abort();
  expect((await sub.wait()).status).toBe("unanswered");
  const results = await toolResults(root);
  expect(
    results.map((r) => {
      const m = messageOf(r) as { details?: Json; content: Array<{ text: string }> };
      return [m.content[0]!.text, m.details, diagnosticsOf(r).map((d) => d.code ?? d.message)];
    }),
  ).toEqual([
    ["left line\n", { of: "left" }, ["left is slow", "aborted"]],
    ["right line\n", { of: "right" }, ["right is slow", "aborted"]],
  ]);
});

test("aborted calls whose last details are falsy (0, false, null) keep them in their results", async () => {
  // Draw 34d (D, 2): every named test's details were objects, so a result that kept the slot's
  // details only when truthy passed them.
  const reporting = (last: Json) => async (api: ToolApi) => {
    await api.details({ first: true });
    await api.details(last);
    await new Promise((_, reject) =>
      api.signal.addEventListener("abort", () => reject(api.signal.reason), { once: true }),
    );
    return textResult("never");
  };
  const zero = probe("zero", reporting(0));
  const no = probe("no", reporting(false));
  const nil = probe("nil", reporting(null));
  const { h, root } = await open(calls("zero", "no", "nil"), { tools: [zero.tool, no.tool, nil.tool] });
  const sub = await root.submit({ type: "input", content: "go" });
  await until(() => {
    const slots = liveOf(h).tools ?? [];
    return (
      slots.length === 3 &&
      slots.every((s) => s.details === null || (s.details !== undefined && typeof s.details !== "object"))
    );
  });
  await root.abort();
  expect((await sub.wait()).status).toBe("unanswered");
  const results = await toolResults(root);
  expect(
    results.map((r) => {
      const m = messageOf(r) as { details?: Json };
      return ["details" in m, m.details];
    }),
  ).toEqual([
    [true, 0],
    [true, false],
    [true, null],
  ]);
});

test("an interrupted call's result is built from its slot too: the durable output, the last details, and the recorded diagnostics before the interrupted one", async () => {
  const reporting = async (api: ToolApi): Promise<ToolResult> => {
    api.output("partial line\n");
    api.diagnostic({ severity: "warn", message: "slow disk" });
    await api.details({ progress: 1 });
    await new Promise((_, reject) =>
      api.signal.addEventListener("abort", () => reject(api.signal.reason), { once: true }),
    );
    return textResult("never");
  };
  // An unsafe tool (the default): a restart does not run it again, it is interrupted.
  const { tool } = probe("probe", reporting);
  const { h, root, store, faux } = await open(calls("probe"), { tools: [tool] });
  await root.submit({ type: "input", content: "go" });
  await until(() => {
    const slot = liveOf(h).tools?.[0];
    return slot?.details !== undefined && slot.diagnostics !== undefined && slot.output !== undefined;
  });
  const again = await reopen(store, {
    models: faux.models,
    defaultModel: faux.ref,
    tools: [probe("probe", reporting).tool],
  });
  const root2 = await again.root();
  await root2.waitForIdle();
  const [result] = await toolResults(root2);
  const message = messageOf(result!) as {
    details?: Json;
    isError: boolean;
    content: Array<{ text: string }>;
  };
  expect(message.isError).toBe(true);
  expect(message.content[0]!.text).toBe("partial line\n");
  expect(message.details).toEqual({ progress: 1 });
  expect(diagnosticsOf(result!).map((d) => [d.severity, d.code ?? d.message])).toEqual([
    ["warn", "slow disk"],
    ["error", "interrupted"],
  ]);
});

test("an aborted call's details are the last value whole, replacing the one before: no field of the earlier object is merged in", async () => {
  // Draw 38c: every named test's successive details either never reached a harness-written result
  // or were not two objects, so a progress commit that merged the new object into the stored one passed.
  const reporting = async (api: ToolApi): Promise<ToolResult> => {
    await api.details({ first: true, shared: 1 });
    await api.details({ shared: 2, second: "yes" });
    await new Promise((_, reject) =>
      api.signal.addEventListener("abort", () => reject(api.signal.reason), { once: true }),
    );
    return textResult("never");
  };
  const { tool } = probe("replacer", reporting);
  const { h, root } = await open(calls("replacer"), { tools: [tool] });
  const sub = await root.submit({ type: "input", content: "go" });
  await until(() => (liveOf(h).tools?.[0]?.details as { second?: string } | undefined)?.second === "yes");
  expect(liveOf(h).tools?.[0]?.details).toEqual({ shared: 2, second: "yes" });
  await root.abort();
  expect((await sub.wait()).status).toBe("unanswered");
  const [result] = await toolResults(root);
  expect((messageOf(result!) as { details?: Json }).details).toEqual({ shared: 2, second: "yes" });
});

test("waitForTask's terminal receipt is any terminal outcome: a failed task's and an aborted task's records, as the harness reads them, not a rejection (draw 40c)", async () => {
  // Draw 40c (D, 12): every named wait was on a task that completed; a runtime wait rejecting a task
  // that ended failed or aborted passed them.
  const failing = single("test.failing", async (_t, runtime) => {
    await runtime.commit(() => ({
      status: "terminal",
      outcome: { status: "failed", error: { message: "no" } },
    }));
  });
  const aborting = single("test.aborting", async (_t, runtime) => {
    await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted", reason: "gave up" } }));
  });
  const receipts: unknown[] = [];
  const { tool } = probe("probe", async (api) => {
    for (const task of [failing, aborting]) {
      const id = await api.createTask(task, {}, { ownership: { kind: "task", taskId: api.taskId } });
      receipts.push(await api.waitForTask(id).catch((error: unknown) => ({ rejected: String(error) })));
    }
    return textResult("ok");
  });
  const { h, root } = await open(calls("probe"), { tools: [tool], tasks: [failing, aborting] });
  await (await root.submit({ type: "input", content: "go" })).wait();
  expect(receipts).toHaveLength(2);
  const [failed, aborted] = receipts as TaskRecord[];
  expect(failed!.state).toEqual({
    status: "terminal",
    outcome: { status: "failed", error: { message: "no" } },
  });
  expect(aborted!.state).toEqual({ status: "terminal", outcome: { status: "aborted", reason: "gave up" } });
  expect(failed).toEqual(await h.getTask(failed!.id));
  expect(aborted).toEqual(await h.getTask(aborted!.id));
});
