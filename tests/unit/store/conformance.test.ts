/**
 * The store conformance suite (tests/conformance/store-suite.ts) on the memory store, one test per
 * scenario. The same scenarios run on the Durable Object store inside workerd (tests/server/).
 */
import { describe, test } from "vitest";
import { type MemoryStore, openStore } from "../../../worker/store/open.ts";
import { type StoreKit, schemaUpTo } from "../../conformance/kit.ts";
import { scenarios } from "../../conformance/store-suite.ts";

const memoryKit: StoreKit<MemoryStore> = {
  label: "memory",
  async fresh(options = {}) {
    const store = await openStore({ kind: "memory" });
    await store.migrate(schemaUpTo(options.targetVersion));
    return store;
  },
  kill: (store, reason) => store.kill(reason),
  async reopen(store) {
    // The files as the store left them: a killed store's uncommitted pages roll back at open.
    const image = store.image();
    if (!store.closed) store.kill("reopened");
    const reopened = await openStore({ kind: "memory", image });
    await reopened.migrate(schemaUpTo());
    return reopened;
  },
  storedVersion: async (store) =>
    Number((await store.read((sql) => sql.get("PRAGMA user_version")))?.["user_version"]),
  setStoredVersion: async (store, version) => {
    await store.commit((sql) => sql.run(`PRAGMA user_version = ${version}`));
  },
};

describe(`store conformance: ${memoryKit.label}`, () => {
  for (const scenario of scenarios) {
    test(scenario.name, async () => {
      await scenario.run(memoryKit, (line) => console.log(`[${memoryKit.label}] ${line}`));
    });
  }
});
