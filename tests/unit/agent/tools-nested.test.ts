/**
 * Nested tool calls: `api.executeTool` makes a pi.tool task owned by the caller, keyed by position,
 * so a replay-safe caller that reruns after a crash gets the nested calls it already made back
 * instead of starting them again.
 */
import { fauxAssistantMessage, fauxToolCall, registerFauxProvider } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { afterAll, expect, test } from "vitest";
import { AgentHarness, createModelResolver, defineTool, type TaskRecord } from "../../../worker/index.ts";
import {
  CRASH_MODES,
  CRASH_SWEEP_TEST_TIMEOUT_MS,
  crashingStore,
  crashSweep,
  memoryStore,
} from "../../../worker/testing.ts";

const faux = registerFauxProvider({ provider: "faux-nested", models: [{ id: "n-1" }] });
afterAll(() => faux.unregister());
const model = faux.getModel();

function tools(log: string[]) {
  const echo = defineTool({
    name: "echo",
    description: "echo text",
    parameters: Type.Object({ text: Type.String() }),
    replay: "safe",
    execute: async (args) => {
      log.push(args.text);
      return { content: [{ type: "text", text: `echo:${args.text}` }] };
    },
  });
  const batch = defineTool({
    name: "batch",
    description: "calls echo twice",
    parameters: Type.Object({}),
    replay: "safe",
    execute: async (_args, api) => {
      const a = await api.executeTool("echo", { text: "one" });
      const b = await api.executeTool("echo", { text: "two" });
      const text = [...a.content, ...b.content].map((c) => (c.type === "text" ? c.text : "")).join(",");
      return { content: [{ type: "text", text }] };
    },
  });
  return [echo, batch];
}

function respond() {
  faux.setResponses(
    Array.from(
      { length: 40 },
      () => (context: { messages: Array<{ role: string }> }) =>
        context.messages.at(-1)?.role === "toolResult"
          ? fauxAssistantMessage("batched")
          : fauxAssistantMessage([fauxToolCall("batch", {}, { id: "b1" })], { stopReason: "toolUse" }),
    ) as never,
  );
}

async function run(crashAt: number) {
  respond();
  const log: string[] = [];
  const options = {
    models: createModelResolver({ extra: [model] }),
    defaultModel: { provider: model.provider, modelId: model.id },
    tools: tools(log),
  };
  const cs = await crashingStore({ at: crashAt });
  let h: AgentHarness | undefined;
  try {
    h = await AgentHarness.open(cs.store, { ...options, groupCommit: false });
    const sub = await (await h.root()).submit({ type: "input", content: "go", requestId: "r" });
    await Promise.race([sub.wait(), cs.crashed]);
  } catch (error) {
    if (!cs.hasCrashed) throw error;
  }
  if (cs.hasCrashed) {
    await h?.close().catch(() => undefined);
    h = await AgentHarness.open(await cs.recover(), options);
    const sub = await (await h.root()).submit({ type: "input", content: "go", requestId: "r" });
    await sub.wait();
  }
  const tasks = await h!.tasks({ kind: "pi.tool" });
  const nested = tasks.filter((t) => "nested" in (t.input as object));
  const caller = tasks.find((t) => !("nested" in (t.input as object))) as TaskRecord;
  const result = (await (await h!.root()).entries()).find((e) => e.kind === "pi.tool-result");
  await h!.close();
  return { crashed: cs.hasCrashed, transactions: cs.store.stats.transactions, nested, caller, result, log };
}

test("nested calls are owned by the caller and return their results", async () => {
  const r = await run(Number.POSITIVE_INFINITY);
  expect(r.nested.map((t) => t.owner)).toEqual([r.caller.id, r.caller.id]);
  expect(JSON.stringify(r.result?.model)).toContain("echo:one,echo:two");
  expect(r.log).toEqual(["one", "two"]);
});

test("a replay-safe caller rerun after a crash gets its nested calls back", {
  timeout: CRASH_SWEEP_TEST_TIMEOUT_MS,
}, async () => {
  const options = (log: string[]) => ({
    models: createModelResolver({ extra: [model] }),
    defaultModel: { provider: model.provider, modelId: model.id },
    tools: tools(log),
  });
  await crashSweep(
    {
      name: "a batch tool calling echo twice",
      services: () => {
        respond();
        return [] as string[];
      },
      open: (store, log, engine) => AgentHarness.open(store, { ...options(log), ...engine }),
      finish: async (h) => {
        await (await (await h.root()).submit({ type: "input", content: "go", requestId: "r" })).wait();
        const nested = (await h.tasks({ kind: "pi.tool" })).filter((t) => "nested" in (t.input as object));
        const result = (await (await h.root()).entries()).find((e) => e.kind === "pi.tool-result");
        return { nested: nested.length, result: JSON.stringify(result?.model) };
      },
    },
    {
      mode: CRASH_MODES.find((m) => !m.groupCommit)!,
      // The sweep this test ran before the kit's: more than 5 crash points.
      atLeast: 6,
      check: ({ result, label }) => {
        // Never more than the two nested tasks, whatever the crash point: reruns reattach by position.
        expect(result.nested, label).toBe(2);
        expect(result.result, label).toContain("echo:one,echo:two");
      },
    },
  );
});

test("a nested call whose tool throws ends failed with a tool_error result; the caller gets that error result and goes on", async () => {
  const boom = defineTool({
    name: "boom",
    description: "throws",
    parameters: Type.Object({}),
    execute: async () => {
      throw new Error("kaboom");
    },
  });
  const caller = defineTool({
    name: "batch",
    description: "calls boom",
    parameters: Type.Object({}),
    execute: async (_args, api) => {
      const r = await api.executeTool("boom", {});
      const text = r.content.map((c) => (c.type === "text" ? c.text : "")).join(",");
      return { content: [{ type: "text", text: `caller saw ${r.isError === true}: ${text}` }] };
    },
  });
  respond();
  const h = await AgentHarness.open(await memoryStore(), {
    models: createModelResolver({ extra: [model] }),
    defaultModel: { provider: model.provider, modelId: model.id },
    tools: [boom, caller],
  });
  await (await (await h.root()).submit({ type: "input", content: "go", requestId: "r" })).wait();
  const tasks = await h.tasks({ kind: "pi.tool" });
  const nested = tasks.find((t) => "nested" in (t.input as object))!;
  const outer = tasks.find((t) => !("nested" in (t.input as object)))!;
  expect(nested.state.status).toBe("terminal");
  const outcome = (nested.state as { outcome: { status: string; result?: { result?: ToolResultLike } } })
    .outcome;
  expect(outcome.status).toBe("failed");
  expect(outcome.result?.result?.isError).toBe(true);
  expect(outcome.result?.result?.diagnostics?.map((d) => d.code)).toContain("tool_error");
  expect((outer.state as { outcome: { status: string } }).outcome.status).toBe("completed");
  const result = (await (await h.root()).entries()).find((e) => e.kind === "pi.tool-result");
  expect(JSON.stringify(result?.model)).toContain("caller saw true");
  expect(JSON.stringify(result?.model)).toContain("Error: kaboom");
  await h.close();
});

test("a nested call's tool is resolved when its task runs: taken out of the agent's tools after an earlier nested call, the next gets tool_unavailable and never runs", async () => {
  // Draw 32b: every tool_unavailable case was a model's call; a nested call resolving its tool
  // among every installed one (the filter not applied) passed every test.
  const log: string[] = [];
  let root: Awaited<ReturnType<AgentHarness["root"]>> | undefined;
  const echo = defineTool({
    name: "echo",
    description: "echo text",
    parameters: Type.Object({ text: Type.String() }),
    execute: async (args) => {
      log.push(args.text);
      return { content: [{ type: "text", text: `echo:${args.text}` }] };
    },
  });
  const caller = defineTool({
    name: "batch",
    description: "calls echo, filters it out, calls it again",
    parameters: Type.Object({}),
    execute: async (_args, api) => {
      const a = await api.executeTool("echo", { text: "one" });
      await root!.configure({ tools: ["batch"] });
      const b = await api.executeTool("echo", { text: "two" });
      const text = [...a.content, ...b.content].map((c) => (c.type === "text" ? c.text : "")).join(",");
      return { content: [{ type: "text", text: `${b.isError === true}: ${text}` }] };
    },
  });
  respond();
  const h = await AgentHarness.open(await memoryStore(), {
    models: createModelResolver({ extra: [model] }),
    defaultModel: { provider: model.provider, modelId: model.id },
    tools: [echo, caller],
  });
  root = await h.root();
  await (await root.submit({ type: "input", content: "go", requestId: "r" })).wait();
  expect(log).toEqual(["one"]);
  const result = (await root.entries()).find((e) => e.kind === "pi.tool-result");
  expect(JSON.stringify(result?.model)).toContain(
    "true: echo:one,tool_unavailable: tool echo is not available",
  );
  await h.close();
});

test("a nested call with invalid arguments gets an invalid_arguments result and its tool never runs (draw 35d)", async () => {
  // Draw 35d: every invalid_arguments case was a model's call; a nested call run with its arguments
  // unvalidated (the tool ran without the text its schema requires) passed every test.
  const log: unknown[] = [];
  const echo = defineTool({
    name: "echo",
    description: "echo text",
    parameters: Type.Object({ text: Type.String() }),
    execute: async (args) => {
      log.push(args.text);
      return { content: [{ type: "text", text: `echo:${args.text}` }] };
    },
  });
  const caller = defineTool({
    name: "batch",
    description: "calls echo with a bad argument, then a good one",
    parameters: Type.Object({}),
    execute: async (_args, api) => {
      const a = await api.executeTool("echo", { wrong: 1 });
      const b = await api.executeTool("echo", { text: "two" });
      const text = [...a.content, ...b.content].map((c) => (c.type === "text" ? c.text : "")).join(",");
      return { content: [{ type: "text", text: `${a.isError === true}|${text}` }] };
    },
  });
  respond();
  const h = await AgentHarness.open(await memoryStore(), {
    models: createModelResolver({ extra: [model] }),
    defaultModel: { provider: model.provider, modelId: model.id },
    tools: [echo, caller],
  });
  const root = await h.root();
  await (await root.submit({ type: "input", content: "go", requestId: "r" })).wait();
  expect(log).toEqual(["two"]);
  const result = (await root.entries()).find((e) => e.kind === "pi.tool-result");
  expect(JSON.stringify(result?.model)).toContain("true|invalid_arguments");
  const nested = (await h.tasks({ kind: "pi.tool" })).filter((t) => "nested" in (t.input as object));
  expect(nested).toHaveLength(2);
  await h.close();
});

test("a nested call's result carries its diagnostics as a call's does: the api's first, then the result's (draw 32b)", async () => {
  // Draw 32b: every diagnostics test was a model's call; a nested result keeping only the result's
  // own diagnostics (the api's dropped) passed every test.
  let seen: unknown;
  const inner = defineTool({
    name: "inner",
    description: "remarks, then answers",
    parameters: Type.Object({}),
    execute: async (_args, api) => {
      api.diagnostic({ severity: "warn", message: "from the api", code: "api" });
      api.diagnostic({ severity: "info", message: "second from the api" });
      return {
        content: [{ type: "text", text: "ok" }],
        diagnostics: [{ severity: "info", message: "from the result" }],
      };
    },
  });
  const caller = defineTool({
    name: "batch",
    description: "calls inner",
    parameters: Type.Object({}),
    execute: async (_args, api) => {
      const r = await api.executeTool("inner", {});
      seen = { isError: r.isError === true, diagnostics: r.diagnostics };
      return { content: [{ type: "text", text: "done" }] };
    },
  });
  respond();
  const h = await AgentHarness.open(await memoryStore(), {
    models: createModelResolver({ extra: [model] }),
    defaultModel: { provider: model.provider, modelId: model.id },
    tools: [inner, caller],
  });
  await (await (await h.root()).submit({ type: "input", content: "go", requestId: "r" })).wait();
  expect(seen).toEqual({
    isError: false,
    diagnostics: [
      { severity: "warn", message: "from the api", code: "api" },
      { severity: "info", message: "second from the api" },
      { severity: "info", message: "from the result" },
    ],
  });
  await h.close();
});

type ToolResultLike = { isError?: boolean; diagnostics?: Array<{ code: string }> };
