/**
 * The store conformance suite (tests/conformance/store-suite.ts) on the memory store, one test per
 * scenario, twice: with its rollback journal, and with the opfs kind's setup (exclusive locking, a
 * write-ahead log, the idle checkpoint: a reopen replays the log the killed store left). The same
 * scenarios run on the Durable Object store inside workerd (tests/server/) and on idb and opfs in
 * Chromium (tests/e2e/store-conformance.test.ts).
 */
import { describe, test } from "vitest";
import { type MemoryStore, openStore } from "../../../worker/store/open.ts";
import { type StoreKit, schemaUpTo } from "../../conformance/kit.ts";
import { scenarios } from "../../conformance/store-suite.ts";

const memoryKit = (journal: "persist" | "wal"): StoreKit<MemoryStore> => ({
  label: journal === "wal" ? "memory (WAL, as the opfs kind)" : "memory",
  async fresh(options = {}) {
    const store = await openStore({ kind: "memory", journal });
    await store.migrate(schemaUpTo(options.targetVersion));
    return store;
  },
  kill: (store, reason) => store.kill(reason),
  async reopen(store) {
    // The files as the store left them: a killed store's uncommitted pages roll back at open (or
    // its log's frames without a commit frame are left out).
    const image = store.image();
    if (!store.closed) store.kill("reopened");
    const reopened = await openStore({ kind: "memory", image, journal });
    await reopened.migrate(schemaUpTo());
    return reopened;
  },
  storedVersion: async (store) =>
    Number((await store.read((sql) => sql.get("PRAGMA user_version")))?.["user_version"]),
  setStoredVersion: async (store, version) => {
    await store.commit((sql) => sql.run(`PRAGMA user_version = ${version}`));
  },
});

for (const kit of [memoryKit("persist"), memoryKit("wal")]) {
  describe(`store conformance: ${kit.label}`, () => {
    for (const scenario of scenarios) {
      test(scenario.name, async () => {
        await scenario.run(kit, (line) => console.log(`[${kit.label}] ${line}`));
      });
    }
  });
}
