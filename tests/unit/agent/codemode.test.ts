/**
 * The `codemode` tool: a model-written script runs in the QuickJS sandbox with the conversation's
 * other tools as async functions; every result it receives is the committed result of a nested call;
 * after a crash the script reruns, gets the journaled results in order and continues; a rerun that
 * takes another path, or a changed sandbox fingerprint, fails the call with `replay diverged`.
 * The scripts run in script workers (worker_threads) off the engine's thread, the path an engine that
 * can start workers takes; tool calls come back to the engine as messages and are journaled there.
 */
import { fauxToolCall } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import {
  createCodemodeTool,
  fingerprintDifference,
  fingerprintOf,
} from "../../../worker/agent/tools/builtin/codemode.ts";
import { textResult } from "../../../worker/agent/tools/contract.ts";
import { AgentHarness, defineTool, type ToolDefinition } from "../../../worker/index.ts";
import {
  CRASH_MODES,
  CRASH_SWEEP_TEST_TIMEOUT_MS,
  crashSweep,
  deferred,
  fauxAgentModel,
  toolCallsCutByCrash,
  useNodeScriptWorkers,
} from "../../../worker/testing.ts";
import { callsThenAnswer, cleanups, open, reopen, toolResults } from "./fixtures.ts";

/** `size({ name })`: a replay-safe tool that records each execution's call id. */
function sizeTool(executions: string[]) {
  return defineTool({
    name: "size",
    description: "The size of a named file",
    parameters: Type.Object({ name: Type.String(), nonce: Type.Optional(Type.Number()) }),
    replay: "safe",
    async execute(args, api) {
      executions.push(api.toolCallId);
      return textResult(`${args.name}: ${args.name.length * 10} bytes`, { size: args.name.length * 10 });
    },
  });
}

const THREE_CALLS = `
const a = await size({ name: "a", nonce: Math.random() });
const b = await size({ name: "bb", nonce: Date.now() });
const c = await size({ name: "ccc", nonce: Math.random() });
console.log("sizes", a.details.size, b.details.size, c.details.size);
return a.details.size + b.details.size + c.details.size;
`;

const runScript = (script: string, id = "cm1") =>
  callsThenAnswer(fauxToolCall("codemode", { script }, { id }));

const textOf = (e: { model?: unknown }) => JSON.stringify(e.model);
/** The tool result message of a pi.tool-result entry. */
const messageOf = (e: { model?: unknown }) =>
  (e.model as Array<{ isError: boolean; details?: { result?: unknown; calls?: number } }>)[0]!;
const resultOf = (e: { model?: unknown }) => messageOf(e).details?.result;

beforeAll(() => useNodeScriptWorkers());
afterAll(() => useNodeScriptWorkers({ enabled: false }));

describe("codemode", () => {
  test("a script calls tools as async functions, prints, and returns a value", async () => {
    const executions: string[] = [];
    const { root } = await open(runScript(THREE_CALLS), {
      tools: [sizeTool(executions), createCodemodeTool()],
    });
    await (await root.submit({ type: "input", content: "go" })).wait();
    const [result] = await toolResults(root);
    expect(textOf(result!)).toContain("sizes 10 20 30");
    expect(textOf(result!)).toContain("Result: 60");
    expect(messageOf(result!).details).toEqual({ result: 60, calls: 3 });
    expect(executions).toEqual(["cm1/#0", "cm1/#1", "cm1/#2"]);
  });

  test("the values a script receives are exactly the nested calls' committed results", async () => {
    const executions: string[] = [];
    const script = `return [await size({ name: "x" }), await size({ name: "yy" })];`;
    const { h, root } = await open(runScript(script), {
      tools: [sizeTool(executions), createCodemodeTool()],
    });
    await (await root.submit({ type: "input", content: "go" })).wait();
    const nested = (await h.tasks({ kind: "pi.tool" })).filter((t) => "nested" in (t.input as object));
    const committed = nested.map((t) => {
      const outcome = t.state.status === "terminal" ? t.state.outcome : undefined;
      const result = (
        outcome as { result?: { result?: { content: Array<{ text: string }>; details: unknown } } }
      )?.result?.result;
      return { text: result?.content.map((c) => c.text).join("\n"), details: result?.details };
    });
    const [entry] = await toolResults(root);
    expect(resultOf(entry!)).toEqual(committed);
  });

  test("the sandbox is deterministic: virtual clock from the recorded start, seeded random, UTC, no WeakRef", async () => {
    const script = `
      const t0 = Date.now(); const t1 = Date.now();
      return {
        step: t1 - t0,
        start: new Date(t0).getTime() > 0,
        offset: new Date().getTimezoneOffset(),
        hours: new Date(Date.UTC(2020, 0, 1, 5)).getHours(),
        local: new Date(2020, 0, 1, 5).toISOString(),
        random: [Math.random(), Math.random()].every((r) => r >= 0 && r < 1),
        weak: typeof WeakRef + typeof FinalizationRegistry,
        host: typeof fetch + typeof window + typeof document + typeof process + typeof require + typeof setTimeout,
      };`;
    const { root } = await open(runScript(script), { tools: [createCodemodeTool()] });
    await (await root.submit({ type: "input", content: "go" })).wait();
    const [entry] = await toolResults(root);
    expect(resultOf(entry!)).toEqual({
      step: 1,
      start: true,
      offset: 0,
      hours: 5,
      local: "2020-01-01T05:00:00.000Z",
      random: true,
      weak: "undefinedundefined",
      host: "undefined".repeat(6),
    });
  });

  test("a script that throws fails the call with its error", async () => {
    const { root } = await open(runScript(`console.log("before"); throw new TypeError("boom");`), {
      tools: [createCodemodeTool()],
    });
    await (await root.submit({ type: "input", content: "go" })).wait();
    const [entry] = await toolResults(root);
    expect(textOf(entry!)).toContain("before");
    expect(textOf(entry!)).toContain("Error: TypeError: boom");
    expect(messageOf(entry!).isError).toBe(true);
  });

  test("a crash sweep over a script with three nested calls always ends with the same result", {
    timeout: CRASH_SWEEP_TEST_TIMEOUT_MS,
  }, async () => {
    // One mode (the one with the most crash points) keeps the suite's time reasonable.
    for (const mode of CRASH_MODES.filter((m) => !m.groupCommit)) {
      await crashSweep(
        {
          name: "codemode with three nested calls",
          services: () => ({
            executions: [] as string[],
            cut: [] as string[],
            faux: fauxAgentModel(runScript(THREE_CALLS)),
          }),
          open: (store, s, engine) => {
            cleanups.push(async () => s.faux.unregister());
            return AgentHarness.open(store, {
              ...engine,
              models: s.faux.models,
              defaultModel: s.faux.ref,
              tools: [sizeTool(s.executions), createCodemodeTool()],
            });
          },
          afterCrash: async (committed, s) => {
            s.cut.push(...(await toolCallsCutByCrash(committed)));
          },
          finish: async (h) => {
            const root = await h.root();
            await (await root.submit({ type: "input", content: "go", requestId: "r" })).wait();
            const results = await toolResults(root);
            const nested = (await h.tasks({ kind: "pi.tool" })).filter(
              (t) => "nested" in (t.input as object),
            );
            return {
              results: results.map(resultOf),
              text: results.map(textOf).join(""),
              nested: nested.length,
            };
          },
        },
        {
          mode,
          atLeast: 24,
          baseline: ({ result }) => expect(result.results).toEqual([60]),
          check: ({ result, services, label }, baseline) => {
            expect(result.results, label).toEqual(baseline.result.results);
            expect(result.text, label).toContain("sizes 10 20 30");
            expect(result.nested, label).toBe(3);
            // Each nested call ran once; one the crash cut while it ran may have run once more.
            for (const id of ["cm1/#0", "cm1/#1", "cm1/#2"]) {
              const runs = services.executions.filter((e) => e === id).length;
              const cut = services.cut.includes(id);
              expect(runs === 1 || (cut && runs === 2), `${label}: ${id} ran ${runs} times`).toBe(true);
            }
          },
        },
      );
    }
  });
});

describe("codemode replay divergence", () => {
  async function crashedAtHold(
    script: string,
    globals: Record<string, unknown>,
    extraTools: ToolDefinition[] = [],
  ) {
    const executions: string[] = [];
    const hold = safeHold();
    const codemode = createCodemodeTool({ globals: () => globals as never });
    const setup = await open(runScript(script), {
      tools: [sizeTool(executions), hold.tool, codemode, ...extraTools],
    });
    void setup.root.submit({ type: "input", content: "go", requestId: "r" });
    await hold.started.promise;
    return { ...setup, executions };
  }

  async function replay(
    setup: Awaited<ReturnType<typeof crashedAtHold>>,
    globals: Record<string, unknown>,
    tools: ToolDefinition[],
  ) {
    const h = await reopen(setup.store, {
      models: setup.faux.models,
      defaultModel: setup.faux.ref,
      tools: [...tools, createCodemodeTool({ globals: () => globals as never })],
    });
    const root = await h.root();
    await (await root.submit({ type: "input", content: "go", requestId: "r" })).wait();
    const [entry] = await toolResults(root);
    return entry!;
  }

  /** A replay-safe tool that holds until released (the first run never is: it "crashes" there). */
  function safeHold() {
    const started = deferred();
    const tool = defineTool({
      name: "hold",
      description: "Wait",
      parameters: Type.Object({}),
      replay: "safe",
      async execute(_args, api) {
        started.resolve();
        await new Promise((_resolve, reject) =>
          api.signal.addEventListener("abort", () => reject(api.signal.reason), { once: true }),
        );
        return textResult("held");
      },
    });
    return { tool, started };
  }
  const release = () =>
    defineTool({
      name: "hold",
      description: "Wait",
      parameters: Type.Object({}),
      replay: "safe",
      execute: async () => textResult("released"),
    });

  test("a script reading a non-journaled value that changed takes another call: replay diverged", async () => {
    const script = `await size({ name: mode }); await hold({}); return 1;`;
    const setup = await crashedAtHold(script, { mode: "a" });
    const entry = await replay(setup, { mode: "b" }, [sizeTool([]), release()]);
    expect(messageOf(entry).isError).toBe(true);
    expect(textOf(entry)).toContain(
      'replay diverged: call 0 was size({\\"name\\":\\"a\\"}) in the first run, size({\\"name\\":\\"b\\"}) now',
    );
  });

  test("a rerun that returns before a call the first run made: replay diverged", async () => {
    const script = `await size({ name: "a" }); if (more) await hold({}); return 1;`;
    const setup = await crashedAtHold(script, { more: true });
    const entry = await replay(setup, { more: false }, [sizeTool([]), release()]);
    expect(textOf(entry)).toContain("replay diverged: the first run made call 1 (hold({}))");
  });

  test("the same path on replay continues from the journal", async () => {
    const script = `const a = await size({ name: "a" }); await hold({}); return a.details.size;`;
    const setup = await crashedAtHold(script, {});
    const executions: string[] = [];
    const entry = await replay(setup, {}, [sizeTool(executions), release()]);
    expect(resultOf(entry)).toBe(10);
    // The first call's result came from the journal.
    expect(executions).toEqual([]);
  });

  test("a changed tool set fails the replay with the first difference", async () => {
    const script = `await size({ name: "a" }); await hold({}); return 1;`;
    const setup = await crashedAtHold(script, {});
    const extra = defineTool({
      name: "extra",
      description: "new",
      parameters: Type.Object({}),
      execute: async () => textResult("x"),
    });
    const entry = await replay(setup, {}, [sizeTool([]), release(), extra]);
    expect(textOf(entry)).toContain("replay diverged: the tool set changed: extra was added");
  });

  test("a changed engine variant or prelude is a fingerprint difference named first", () => {
    const now = fingerprintOf([sizeTool([])]);
    expect(fingerprintDifference(now, fingerprintOf([sizeTool([])]))).toBeUndefined();
    expect(fingerprintDifference({ ...now, engine: "quickjs@other", tools: {} }, now)).toBe(
      `the sandbox interpreter changed from quickjs@other to ${now.engine}`,
    );
    expect(fingerprintDifference({ ...now, prelude: now.prelude - 1 }, now)).toBe(
      `the sandbox prelude changed from version ${now.prelude - 1} to ${now.prelude}`,
    );
  });
});
