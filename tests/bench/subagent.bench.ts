/**
 * The subagent bench (issue 13): a parent that delegates to 10 subagents at once (one round of 10
 * `subagent` calls), each child running 5 tool rounds and answering, against the same 50 tool rounds
 * run in one conversation; both on the memory store with an instant model (pi-ai's faux provider)
 * and the same instant tool. Printed like the agent bench: wall and cpu medians, tool rounds per
 * second, and store transactions per tool round (all the run's transactions over its 50 rounds:
 * the delegated run also pays for 10 conversations, their inputs and answers). Group commit should
 * make the concurrent run faster, not slower (a bar reported, never enforced).
 * Env: BENCH_ROUNDS (measured runs of each, default 7), BENCH_WARMUP (default 5).
 */
import { fauxAssistantMessage, fauxToolCall, type Message } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { AgentHarness, createSubagentTool, defineTool, textResult } from "../../worker/index.ts";
import { type FauxAgentModel, fauxAgentModel, memoryStore } from "../../worker/testing.ts";

const env = (name: string, fallback: number): number => Number(process.env[name] ?? fallback);
const ROUNDS = env("BENCH_ROUNDS", 7);
const WARMUP = env("BENCH_WARMUP", 5);
const CHILDREN = 10;
const CHILD_ROUNDS = 5;
const TOOL_ROUNDS = CHILDREN * CHILD_ROUNDS;

const stepTool = defineTool({
  name: "step",
  description: "one step",
  parameters: Type.Object({ n: Type.Number() }),
  replay: "safe",
  execute: async (args) => textResult(`step ${args.n} done`),
});

const firstUser = (messages: Message[]) => {
  const m = messages.find((x) => x.role === "user");
  return m?.role === "user" && typeof m.content === "string" ? m.content : "";
};

/** One conversation: `rounds` tool rounds, then an answer. */
function steps(messages: Message[], rounds: number, prefix: string) {
  const results = messages.filter((m) => m.role === "toolResult").length;
  if (results >= rounds) return fauxAssistantMessage(`all ${results} steps done`);
  return fauxAssistantMessage(
    [fauxToolCall("step", { n: results + 1 }, { id: `${prefix}-${results + 1}` })],
    {
      stopReason: "toolUse",
    },
  );
}

/** Children (first input "child k") step CHILD_ROUNDS times; the parent delegates to CHILDREN at once; "solo" steps 50 times. */
function model(): FauxAgentModel {
  return fauxAgentModel(
    (req) => {
      const first = firstUser(req.messages);
      if (first.startsWith("child ")) return steps(req.messages, CHILD_ROUNDS, first.replace(" ", "-"));
      if (first === "solo") return steps(req.messages, TOOL_ROUNDS, "solo");
      if (req.messages.some((m) => m.role === "toolResult")) return fauxAssistantMessage("all delegated");
      return fauxAssistantMessage(
        Array.from({ length: CHILDREN }, (_, k) =>
          fauxToolCall("subagent", { task: `child ${k + 1}` }, { id: `sub-${k + 1}` }),
        ),
        { stopReason: "toolUse" },
      );
    },
    { record: false },
  );
}

interface Sample {
  ms: number;
  cpuMs: number;
  transactions: number;
  toolRounds: number;
}

const settle = () => new Promise<void>((resolve) => setTimeout(resolve, 25));

async function run(faux: FauxAgentModel, input: "solo" | "delegate"): Promise<Sample> {
  const store = await memoryStore();
  const h = await AgentHarness.open(store, {
    models: faux.models,
    defaultModel: faux.ref,
    tools: [createSubagentTool(), stepTool],
  });
  const root = await h.root();
  await settle();
  const cpu = process.cpuUsage();
  const start = performance.now();
  const before = store.stats.transactions;
  const settled = await (await root.submit({ type: "input", content: input })).wait();
  await h.waitForIdle();
  const ms = performance.now() - start;
  const used = process.cpuUsage(cpu);
  const transactions = store.stats.transactions - before;
  if (settled.status !== "done") throw new Error(`${input} run ended ${JSON.stringify(settled)}`);
  // Counting the step results (in every conversation) is not part of the run.
  let toolRounds = 0;
  for (const c of h.conversationRecords())
    toolRounds += (await h.entries(c.id)).filter(
      (e) => e.kind === "pi.tool-result" && JSON.stringify(e.model).includes('"toolName":"step"'),
    ).length;
  await h.close();
  if (toolRounds !== TOOL_ROUNDS) throw new Error(`${input}: ${toolRounds} step rounds, not ${TOOL_ROUNDS}`);
  return { ms, cpuMs: (used.user + used.system) / 1000, transactions, toolRounds };
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};
const fmt = (n: number, digits = 0) =>
  n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });

async function main(): Promise<void> {
  const started = performance.now();
  const faux = model();
  const solos: Sample[] = [];
  const delegated: Sample[] = [];
  for (let i = 0; i < WARMUP + ROUNDS; i++) {
    const s = await run(faux, "solo");
    const d = await run(faux, "delegate");
    if (i >= WARMUP) {
      solos.push(s);
      delegated.push(d);
    }
  }
  faux.unregister();
  const m = (xs: Sample[], f: (s: Sample) => number) => median(xs.map(f));
  const row = (label: string, xs: Sample[]) => {
    const ms = m(xs, (s) => s.ms);
    return [
      label,
      `${fmt(ms, 1)} ms`,
      `${fmt(
        m(xs, (s) => s.cpuMs),
        1,
      )} ms`,
      fmt(TOOL_ROUNDS / (ms / 1000)),
      fmt(m(xs, (s) => s.transactions)),
      fmt(m(xs, (s) => s.transactions) / TOOL_ROUNDS, 2),
    ];
  };
  const ratio = median(delegated.map((d, i) => d.ms / solos[i]!.ms));
  const rows: string[][] = [
    ["measurement", "wall (median)", "cpu (median)", "tool rounds/s", "transactions", "tx/tool round"],
    row(`one conversation, ${TOOL_ROUNDS} rounds`, solos),
    row(`${CHILDREN} subagents x ${CHILD_ROUNDS} rounds, concurrent`, delegated),
    ["ratio subagents / one conversation (wall, per run)", `${fmt(ratio, 2)}x`, "", "", "", ""],
  ];
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  const line = (r: string[]) =>
    r.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join("  ");
  console.log(
    `\nsubagent bench: ${TOOL_ROUNDS} tool rounds, instant model, memory store, Node ${process.version}; medians of ${ROUNDS} interleaved runs after ${WARMUP} warm-up runs`,
  );
  console.log(line(rows[0]!));
  console.log(widths.map((w) => "-".repeat(w)).join("  "));
  for (const r of rows.slice(1)) console.log(line(r));
  console.log(
    `bar: the concurrent subagents at most as slow as one conversation (<= 1x): ${ratio <= 1 ? "PASS" : "FAIL"} (reported, never an error)`,
  );
  console.log(`subagent bench took ${fmt((performance.now() - started) / 1000, 1)} s`);
}

await main();
