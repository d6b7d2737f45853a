/**
 * The code mode bench, figures side by side in one run (reported, never enforced; the process exits 0
 * unless it crashes):
 * - QuickJS cold start (the first script of the process: loading and compiling the module, a fresh
 *   runtime, `return 1`) and a warm call (the same script once the module is loaded; median);
 * - a script making N nested calls (default 100) through `codemode`, against the same tool called N
 *   times directly by the model (N tool rounds): the time per call on each side;
 * - replay: the run cut at its last call (the store copied while that call runs, as a crash leaves
 *   it), reopened and finished (the script reruns on N-1 journaled results), against the original run
 *   to the same point.
 * The model is pi-ai's faux provider (instant) and the store a memory store.
 * Env: BENCH_CALLS (default 100), BENCH_ROUNDS (measured repetitions, default 5), BENCH_SCRIPT_WORKERS
 * (1: scripts run in Node script workers, off the engine's thread, as in an engine that can start
 * workers; the cold start then includes starting the worker, which in Node loads the sandbox's
 * TypeScript through tsx; default: in the engine's thread).
 */
import { fauxAssistantMessage, fauxToolCall } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { createCodemodeTool } from "../../worker/agent/tools/builtin/codemode.ts";
import { textResult } from "../../worker/agent/tools/contract.ts";
import { AgentHarness, defineTool, type MemoryStore, type ToolDefinition } from "../../worker/index.ts";
import { runScript } from "../../worker/sandbox/run.ts";
import {
  deferred,
  type FauxAgentModel,
  fauxAgentModel,
  memoryStore,
  useNodeScriptWorkers,
} from "../../worker/testing.ts";

const env = (name: string, fallback: number): number => Number(process.env[name] ?? fallback);
const CALLS = env("BENCH_CALLS", 100);
const ROUNDS = env("BENCH_ROUNDS", 5);
const WORKERS = env("BENCH_SCRIPT_WORKERS", 0) === 1;

const median = (xs: number[]): number => {
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};
const fmt = (n: number, digits = 2) => n.toFixed(digits);

const host = {
  start: 0,
  seed: 1,
  functions: [],
  call: async () => ({ isError: false as const, value: null }),
  print: () => undefined,
};

const step = defineTool({
  name: "step",
  description: "Do one step",
  parameters: Type.Object({ n: Type.Number() }),
  replay: "safe",
  execute: async (args) => textResult(`step ${args.n} done`, { n: args.n }),
});

const SCRIPT = `let sum = 0; for (let i = 1; i <= ${CALLS}; i++) sum += (await step({ n: i })).details.n; return sum;`;

/** The model asks for one codemode call running SCRIPT, then answers. */
function codemodeModel(): FauxAgentModel {
  return fauxAgentModel(
    (req) =>
      req.messages.some((m) => m.role === "toolResult")
        ? fauxAssistantMessage("done")
        : fauxAssistantMessage([fauxToolCall("codemode", { script: SCRIPT }, { id: "cm" })], {
            stopReason: "toolUse",
          }),
    { record: false },
  );
}

/** The model calls `step` once per round, CALLS times, then answers. */
function directModel(): FauxAgentModel {
  return fauxAgentModel(
    (req) => {
      const results = req.messages.filter((m) => m.role === "toolResult").length;
      if (results >= CALLS) return fauxAssistantMessage("done");
      return fauxAssistantMessage([fauxToolCall("step", { n: results + 1 }, { id: `c${results + 1}` })], {
        stopReason: "toolUse",
      });
    },
    { record: false },
  );
}

async function runOnce(faux: FauxAgentModel, tools: ToolDefinition[]) {
  const store = await memoryStore();
  const h = await AgentHarness.open(store, { models: faux.models, defaultModel: faux.ref, tools });
  const started = performance.now();
  await (await (await h.root()).submit({ type: "input", content: "go" })).wait();
  const ms = performance.now() - started;
  await h.close();
  return ms;
}

/** The codemode run cut while its last call runs: the time to that point, and the store left. */
async function runToLastCall(): Promise<{ ms: number; image: MemoryStore }> {
  const faux = codemodeModel();
  const started = deferred();
  let n = 0;
  const holding = defineTool({
    ...step,
    execute: async (args, api) => {
      if (++n < CALLS) return textResult(`step ${args.n} done`, { n: args.n });
      started.resolve();
      await new Promise((_r, reject) =>
        api.signal.addEventListener("abort", () => reject(api.signal.reason)),
      );
      return textResult("never");
    },
  });
  const store = await memoryStore();
  const h = await AgentHarness.open(store, {
    models: faux.models,
    defaultModel: faux.ref,
    tools: [holding, createCodemodeTool()],
  });
  const t0 = performance.now();
  void (await h.root()).submit({ type: "input", content: "go", requestId: "r" });
  await started.promise;
  const ms = performance.now() - t0;
  const image = await memoryStore(store.image());
  await h.close().catch(() => undefined);
  faux.unregister();
  return { ms, image };
}

/** Reopen the cut store and finish: the script reruns on the journal, then its last call. */
async function replayFrom(image: MemoryStore): Promise<number> {
  const faux = codemodeModel();
  const t0 = performance.now();
  const h = await AgentHarness.open(image, {
    models: faux.models,
    defaultModel: faux.ref,
    tools: [step, createCodemodeTool()],
  });
  const root = await h.root();
  // The same request id: the submission is the one already stored, which the recovered run answers.
  await (await root.submit({ type: "input", content: "go", requestId: "r" })).wait();
  const ms = performance.now() - t0;
  await h.close();
  faux.unregister();
  return ms;
}

async function main(): Promise<void> {
  if (WORKERS) useNodeScriptWorkers();
  const t0 = performance.now();
  await runScript("return 1", host);
  const cold = performance.now() - t0;
  const warm: number[] = [];
  for (let i = 0; i < 20; i++) {
    const t = performance.now();
    await runScript("return 1", host);
    warm.push(performance.now() - t);
  }

  const viaScript: number[] = [];
  const direct: number[] = [];
  // One warm-up run of each side, then interleaved measured runs.
  for (let i = 0; i <= ROUNDS; i++) {
    const cm = codemodeModel();
    const a = await runOnce(cm, [step, createCodemodeTool()]);
    cm.unregister();
    const dm = directModel();
    const b = await runOnce(dm, [step]);
    dm.unregister();
    if (i > 0) {
      viaScript.push(a);
      direct.push(b);
    }
  }

  const original: number[] = [];
  const replayed: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const cut = await runToLastCall();
    original.push(cut.ms);
    replayed.push(await replayFrom(cut.image));
  }

  const rows: string[][] = [
    ["measure", "median", "per call", "note"],
    ["QuickJS cold start (first script)", `${fmt(cold, 1)} ms`, "", "module load + runtime + `return 1`"],
    ["QuickJS warm call", `${fmt(median(warm))} ms`, "", "fresh runtime + prelude + `return 1`"],
    [
      `codemode: ${CALLS} nested calls (whole run)`,
      `${fmt(median(viaScript), 1)} ms`,
      `${fmt(median(viaScript) / CALLS)} ms`,
      "one model request, one script",
    ],
    [
      `model calls the tool ${CALLS} times`,
      `${fmt(median(direct), 1)} ms`,
      `${fmt(median(direct) / CALLS)} ms`,
      `${CALLS} tool rounds (a request each)`,
    ],
    ["original run to its last call", `${fmt(median(original), 1)} ms`, "", ""],
    [
      "replay after a crash at the last call",
      `${fmt(median(replayed), 1)} ms`,
      "",
      `${fmt(median(replayed) / median(original))}x the original (open + rerun on ${CALLS - 1} journaled results + last call + answer)`,
    ],
  ];
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  const line = (r: string[]) => r.map((cell, c) => cell.padEnd(widths[c]!)).join("  ");
  const where = WORKERS ? "scripts in script workers" : "scripts in the engine's thread";
  console.log(
    `\ncodemode bench: Node ${process.version}, ${where}; medians of ${ROUNDS} runs (warm calls: 20)`,
  );
  console.log(line(rows[0]!));
  console.log(widths.map((w) => "-".repeat(w)).join("  "));
  for (const row of rows.slice(1)) console.log(line(row));
}

await main();
