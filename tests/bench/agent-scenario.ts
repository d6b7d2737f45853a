/**
 * The agent loop the benches time, shared so its figures compare across hosts: the agent bench runs
 * it in Node (agent.bench.ts: the durable harness on a memory store, beside LangGraph.js) and the
 * server bench runs the same loop inside a Durable Object in workerd (server/bench-entry.ts, through
 * server.bench.ts). One run: each round the model calls the one tool `step`, instant, with a little
 * text; once `toolRounds` results are in, it answers. The model is a pi-ai provider answering at
 * once from the request's messages (a `start` and a `done` event, a fixed usage), so nothing but the
 * engine is timed. Nothing here may need Node: it is bundled into the workerd worker too.
 */
import {
  type Api,
  type AssistantMessage,
  type Context,
  createAssistantMessageEventStream,
  fauxAssistantMessage,
  fauxToolCall,
  type Model,
  registerApiProvider,
  unregisterApiProviders,
} from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { createModelResolver, type ModelResolver } from "../../worker/agent/models/resolver.ts";
import { defineTool, textResult } from "../../worker/agent/tools/contract.ts";

/** The tool both sides run: instant, a little text. */
export const step = (n: number) => `step ${n} done`;

/** The answer both models give: a tool call per round until `toolRounds` results are in, then text. */
export function answer(results: number, toolRounds: number): AssistantMessage {
  if (results >= toolRounds) return fauxAssistantMessage(`all ${results} steps done`);
  return fauxAssistantMessage([fauxToolCall("step", { n: results + 1 }, { id: `call-${results + 1}` })], {
    stopReason: "toolUse",
  });
}

/** What the durable harness needs to know its model by. */
export interface DurableModel {
  readonly models: ModelResolver;
  /** The same model as pi-ai's `Model`, for a loop that takes it directly (pi-agent-core's). */
  readonly model: Model<Api>;
  readonly ref: { provider: string; modelId: string };
  unregister(): void;
}

const USAGE = {
  input: 10,
  output: 5,
  cacheRead: 0,
  cacheWrite: 0,
  totalTokens: 15,
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
};

let registrations = 0;
/** The durable side's model: a pi-ai provider answering at once from the request's messages. */
export function instantModel(toolRounds: number): DurableModel {
  const api = `bench-instant-${++registrations}`;
  const instant: Model<Api> = {
    id: "instant",
    name: "instant",
    api,
    provider: "bench",
    baseUrl: "http://localhost:0",
    reasoning: false,
    input: ["text"],
    cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
    contextWindow: 128_000,
    maxTokens: 16_384,
  };
  const stream = (m: Model<Api>, context: Context) => {
    const out = createAssistantMessageEventStream();
    queueMicrotask(() => {
      const results = context.messages.filter((msg) => msg.role === "toolResult").length;
      const message: AssistantMessage = {
        ...answer(results, toolRounds),
        api: m.api,
        provider: m.provider,
        model: m.id,
        usage: USAGE,
      };
      out.push({ type: "start", partial: { ...message, content: [] } });
      out.push({ type: "done", reason: message.stopReason as "stop" | "toolUse", message });
      out.end(message);
    });
    return out;
  };
  registerApiProvider({ api, stream, streamSimple: stream }, api);
  return {
    models: createModelResolver({ extra: [instant] }),
    model: instant,
    ref: { provider: instant.provider, modelId: instant.id },
    unregister: () => unregisterApiProviders(api),
  };
}

/** The durable harness's `step` tool. */
export const durableTool = defineTool({
  name: "step",
  description: "Do one step",
  parameters: Type.Object({ n: Type.Number() }),
  execute: async (args) => textResult(step(args.n)),
});
