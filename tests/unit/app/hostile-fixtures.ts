/**
 * Fixtures for the hostile-input tests of issue 28 part 3: the engine service on the memory store with
 * the echo model, as a tab calls it, and the store's whole state (every table's rows and the count
 * of transactions) for "nothing written" comparisons.
 */
import { AgentHarness } from "../../../worker/agent/harness.ts";
import { builtinTools } from "../../../worker/agent/tools/builtin/index.ts";
import { MemoryFs } from "../../../worker/agent/workspace/memory-fs.ts";
import { HarnessEngine } from "../../../worker/app/engine-service.ts";
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
  const harness = await AgentHarness.open(store, {
    models: faux.models,
    defaultModel: faux.ref,
    ...(options.tools ? { tools: builtinTools, fs: new MemoryFs() } : {}),
  });
  const service = new HarnessEngine({ harness: async () => harness, build: "hostile", tabArrived: () => {} });
  const close = async () => {
    await harness.close();
    faux.unregister();
  };
  return { store, harness, service, tab: service.tab("hostile"), faux, close };
}
