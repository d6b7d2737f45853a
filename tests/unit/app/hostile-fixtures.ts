/**
 * Fixtures for the hostile-input tests of issue 28 part 3: the engine service on the memory store with
 * the echo model, as a tab calls it, the store's whole state (every table's rows and the count
 * of transactions) for "nothing written" comparisons, and a model that reads only the last message.
 */
import {
  type Api,
  type AssistantMessage,
  type Context,
  createAssistantMessageEventStream,
  type Model,
  registerApiProvider,
  unregisterApiProviders,
} from "@mariozechner/pi-ai";
import { AgentHarness } from "../../../worker/agent/harness.ts";
import { builtinTools } from "../../../worker/agent/tools/builtin/index.ts";
import { MemoryFs } from "../../../worker/agent/workspace/memory-fs.ts";
import { HarnessEngine } from "../../../worker/app/engine-service.ts";
import { harnessSecrets } from "../../../worker/app/secrets.ts";
import type { Store } from "../../../worker/store/types.ts";
import { type FauxResponder, fauxAgentModel, memoryStore } from "../../../worker/testing.ts";
import { echo } from "../agent/fixtures.ts";

export interface StoreState {
  readonly transactions: number;
  readonly tables: Record<string, unknown[]>;
}

/** Every row of every table, and the count of transactions. */
export async function storeState(store: Store): Promise<StoreState> {
  const tables: Record<string, unknown[]> = {};
  await store.read(async (sql) => {
    const names = await sql.all("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name");
    for (const { name } of names) tables[String(name)] = await sql.all(`SELECT * FROM "${String(name)}"`);
  });
  return { transactions: store.stats.transactions, tables };
}

/**
 * The engine service over a fresh memory store; `close()` closes the harness and the faux model.
 * `tools: true` gives it the built-in tools on an in-memory workspace (codemode among them).
 */
export async function hostileEngine(
  respond: FauxResponder = echo,
  options: { record?: boolean; tools?: boolean } = {},
) {
  const faux = fauxAgentModel(respond, options.record === false ? { record: false } : {});
  const store = await memoryStore();
  let opened: AgentHarness | undefined;
  const harness = await AgentHarness.open(store, {
    // As the app's engines: no saved key nor the saved token reaches an entry (app-agent.ts).
    secrets: harnessSecrets(() => opened),
    models: faux.models,
    defaultModel: faux.ref,
    ...(options.tools ? { tools: builtinTools, fs: new MemoryFs() } : {}),
  });
  opened = harness;
  const service = new HarnessEngine({ harness: async () => harness, build: "hostile", tabArrived: () => {} });
  const close = async () => {
    await harness.close();
    faux.unregister();
  };
  return { store, harness, service, tab: service.tab("hostile"), faux, close };
}

/**
 * A model that answers each request with "answer to <the last message's text>", reading nothing
 * else, after `gate` for its first request. pi-ai's faux provider estimates each answer's usage by
 * serializing the whole request, so with it a run of N answers costs the test O(N²) by itself;
 * this one shows the engine's own cost (a real provider's request carries the conversation too).
 */
export function lastMessageModel(gate: Promise<void>): { model: Model<Api>; unregister(): void } {
  const source = `last-message-${++lastMessageModels}`;
  const api = source as Api;
  const model: Model<Api> = {
    id: "last-message-1",
    name: "last message",
    api,
    provider: source,
    baseUrl: "test:",
    reasoning: false,
    input: ["text"],
    cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
    contextWindow: Number.MAX_SAFE_INTEGER,
    maxTokens: 1000,
  };
  let calls = 0;
  const stream = (m: Model<Api>, context: Context) => {
    const out = createAssistantMessageEventStream();
    const last = context.messages.at(-1)?.content ?? "";
    const said = typeof last === "string" ? last : last.map((c) => ("text" in c ? c.text : "")).join("");
    const first = ++calls === 1;
    void (async () => {
      if (first) await gate;
      const message: AssistantMessage = {
        role: "assistant",
        api: m.api,
        provider: m.provider,
        model: m.id,
        timestamp: Date.now(),
        content: [{ type: "text", text: `answer to ${said}` }],
        usage: {
          input: 1,
          output: 1,
          cacheRead: 0,
          cacheWrite: 0,
          totalTokens: 2,
          cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
        },
        stopReason: "stop",
      };
      out.push({ type: "done", reason: "stop", message });
      out.end(message);
    })();
    return out;
  };
  registerApiProvider({ api, stream, streamSimple: stream }, source);
  return { model, unregister: () => unregisterApiProviders(source) };
}
let lastMessageModels = 0;
