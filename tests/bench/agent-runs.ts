/**
 * The agent loop's runs in Node, shared by the agent bench (agent.bench.ts) and the server bench
 * (server.bench.ts) so their rows are the same measurement: the durable AgentHarness on a memory
 * store, and LangGraph.js's canonical agent graph with its in-memory checkpointer, each running the
 * loop of agent-scenario.ts (the same instant model's script and the same instant tool on both
 * sides), timed in wall and CPU time after a short pause (`settle`); and the same loop with no
 * durability at all, pi-agent-core's `runAgentLoop` over the same pi-ai provider, in memory.
 */
import { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { AIMessage, type BaseMessage, HumanMessage, ToolMessage } from "@langchain/core/messages";
import type { ChatResult } from "@langchain/core/outputs";
import { tool } from "@langchain/core/tools";
import { END, MemorySaver, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { ToolNode, toolsCondition } from "@langchain/langgraph/prebuilt";
import { type AgentMessage, type AgentTool, runAgentLoop } from "@mariozechner/pi-agent-core";
import type { Message } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { AgentHarness } from "../../worker/index.ts";
import { type StoreJob as Job, memoryStore, recordJobs } from "../../worker/testing.ts";
import { type DurableModel, durableTool, step } from "./agent-scenario.ts";
import type { NodeProfiler } from "./node-profile.ts";

/** LangGraph's model: the same script as `model()`, as a LangChain chat model. */
class InstantChatModel extends BaseChatModel {
  readonly toolRounds: number;
  constructor(toolRounds: number) {
    super({});
    this.toolRounds = toolRounds;
  }
  _llmType(): string {
    return "instant";
  }
  async _generate(messages: BaseMessage[]): Promise<ChatResult> {
    const results = messages.filter((m) => ToolMessage.isInstance(m)).length;
    const message =
      results >= this.toolRounds
        ? new AIMessage(`all ${results} steps done`)
        : new AIMessage({
            content: "",
            tool_calls: [
              { id: `call-${results + 1}`, name: "step", args: { n: results + 1 }, type: "tool_call" },
            ],
          });
    return { generations: [{ text: "", message }] };
  }
}

const langGraphTool = tool(async ({ n }: { n: number }) => step(n), {
  name: "step",
  description: "Do one step",
  schema: { type: "object", properties: { n: { type: "number" } }, required: ["n"] },
});

/** The canonical LangGraph agent: model node, ToolNode, tools-or-end; checkpoints in memory. */
function langGraphAgent(toolRounds: number) {
  const chat = new InstantChatModel(toolRounds);
  return new StateGraph(MessagesAnnotation)
    .addNode("agent", async (state) => ({ messages: [await chat.invoke(state.messages)] }))
    .addNode("tools", new ToolNode([langGraphTool]))
    .addEdge(START, "agent")
    .addConditionalEdges("agent", toolsCondition, ["tools", END])
    .addEdge("tools", "agent")
    .compile({ checkpointer: new MemorySaver() });
}

export interface Sample {
  ms: number;
  cpuMs: number;
  transactions: number;
  toolResults: number;
}

/**
 * A pause before each timed run, so a collection the previous run started (concurrent marking ends
 * in an event-loop task) finishes outside the timing: neither side pays for the other's garbage.
 * (A forced full collection instead measured both sides at up to twice their time: it also drops
 * compiled code.)
 */
export const settle = () => new Promise<void>((resolve) => setTimeout(resolve, 25));

export async function timed(
  work: () => Promise<{ transactions: number; toolResults: number }>,
): Promise<Sample> {
  await settle();
  const cpu = process.cpuUsage();
  const start = performance.now();
  const r = await work();
  const ms = performance.now() - start;
  const used = process.cpuUsage(cpu);
  return { ms, cpuMs: (used.user + used.system) / 1000, ...r };
}

/**
 * One durable run on a fresh memory store (the browser's engine: wa-sqlite, in memory), timed from
 * the submit to idle; `jobs` records the SQL of the opening and of the timed part, `profiler`
 * profiles the timed part.
 */
export async function durable(
  chat: DurableModel,
  options: { jobs?: { opening: Job[]; timed: Job[] }; profiler?: NodeProfiler } = {},
): Promise<Sample> {
  const { jobs, profiler } = options;
  const store = await memoryStore();
  const recorder = { into: jobs?.opening ?? [] };
  if (jobs) recordJobs(store, recorder);
  const h = await AgentHarness.open(store, {
    models: chat.models,
    defaultModel: chat.ref,
    tools: [durableTool],
  });
  const root = await h.root();
  await profiler?.start();
  const sample = await timed(async () => {
    if (jobs) recorder.into = jobs.timed;
    const before = store.stats.transactions;
    const settled = await (await root.submit({ type: "input", content: "go" })).wait();
    if (settled.status !== "done") throw new Error(`durable run ended ${JSON.stringify(settled)}`);
    await root.waitForIdle();
    return { transactions: store.stats.transactions - before, toolResults: 0 };
  });
  await profiler?.stop();
  // Checking the transcript is not part of the run.
  sample.toolResults = (await root.entries()).filter((e) => e.kind === "pi.tool-result").length;
  await h.close();
  return sample;
}

let threads = 0;
/** One LangGraph.js run of the same loop, a fresh graph and thread, timed around `invoke`. */
export async function langGraph(toolRounds: number): Promise<Sample> {
  const agent = langGraphAgent(toolRounds);
  return timed(async () => {
    const out = await agent.invoke(
      { messages: [new HumanMessage("go")] },
      { configurable: { thread_id: `t${++threads}` }, recursionLimit: 4 * toolRounds + 10 },
    );
    const last = out.messages.at(-1);
    if (!last || !AIMessage.isInstance(last) || (last.tool_calls?.length ?? 0) > 0)
      throw new Error("LangGraph run did not answer");
    return {
      transactions: 0,
      toolResults: out.messages.filter((m) => ToolMessage.isInstance(m)).length,
    };
  });
}

/** pi-agent-core's `step` tool: the same arguments' schema and the same text as `durableTool`. */
const piAgentTool: AgentTool<ReturnType<typeof stepParameters>> = {
  name: "step",
  label: "Step",
  description: "Do one step",
  parameters: stepParameters(),
  execute: async (_id, params) => ({ content: [{ type: "text", text: step(params.n) }], details: undefined }),
};
function stepParameters() {
  return Type.Object({ n: Type.Number() });
}

/**
 * One run of the same loop with no durability: pi-agent-core's `runAgentLoop` (the in-memory agent
 * loop of pi-ai's own family: it streams the request from the same registered provider, validates
 * each call's arguments against the tool's schema, runs the tool and appends the messages to an
 * array), timed around the loop. What a durable engine built on pi-ai adds its store to: the
 * least such a loop costs per round before anything is written.
 */
export async function piAgentLoop(chat: DurableModel): Promise<Sample> {
  return timed(async () => {
    const prompt: AgentMessage = { role: "user", content: "go", timestamp: Date.now() };
    const messages = await runAgentLoop(
      [prompt],
      { systemPrompt: "", messages: [], tools: [piAgentTool] },
      { model: chat.model, convertToLlm: (ms) => ms as Message[] },
      () => {},
    );
    const last = messages.at(-1);
    if (last?.role !== "assistant" || last.stopReason !== "stop")
      throw new Error("pi-agent-core run did not answer");
    return { transactions: 0, toolResults: messages.filter((m) => m.role === "toolResult").length };
  });
}
