/**
 * The store conformance suite (tests/conformance/store-suite.ts) on the memory store, one test per
 * scenario. The same scenarios run on the Durable Object store inside workerd (tests/server/).
 */
import { describe, test } from "vitest";
import { type MemoryStore, openStore } from "../../../worker/store/open.ts";
import type { StoreKit } from "../../conformance/kit.ts";
import { scenarios } from "../../conformance/store-suite.ts";

const memoryKit: StoreKit<MemoryStore> = {
  label: "memory",
  fresh: (options = {}) =>
    openStore({
      kind: "memory",
      ...(options.targetVersion === undefined ? {} : { targetVersion: options.targetVersion }),
      ...(options.groupCommit === false ? { groupCommit: false } : {}),
    }),
  kill: (store, reason) => store.kill(reason),
  async reopen(store) {
    // The files as the store left them: a killed store's uncommitted pages roll back at open.
    const image = store.image();
    if (!store.closed) store.kill("reopened");
    return openStore({ kind: "memory", image });
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
