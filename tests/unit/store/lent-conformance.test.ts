/**
 * The store conformance suite (tests/conformance/store-suite.ts) on the lent store (worker/store/lent/):
 * a `LentStore` client over a real MessageChannel to `serveLentStore`, which serves a memory store on
 * the other end, as a tab's lent worker serves the opfs store to the SharedWorker engine. A kill is
 * the client's (the crash simulation crosses the port: the server rolls back what is open); a reopen
 * reads the memory store's files once the server has closed it.
 */
import { describe, test } from "vitest";
import { type LentStore, openLentStore } from "../../../worker/store/lent/client.ts";
import { serveLentStore } from "../../../worker/store/lent/server.ts";
import { type MemoryImage, type MemoryStore, openStore } from "../../../worker/store/open.ts";
import { type StoreKit, schemaUpTo } from "../../conformance/kit.ts";
import { scenarios } from "../../conformance/store-suite.ts";

interface Served {
  memory: MemoryStore | undefined;
  done: Promise<void>;
}
const served = new WeakMap<LentStore, Served>();

async function lend(options: { image?: MemoryImage; targetVersion?: number }): Promise<LentStore> {
  const channel = new MessageChannel();
  const state: Served = { memory: undefined, done: Promise.resolve() };
  state.done = serveLentStore(channel.port2, {
    async open(name) {
      state.memory = await openStore({
        kind: "memory",
        name,
        ...(options.image ? { image: options.image } : {}),
      });
      return state.memory;
    },
  });
  const store = await openLentStore({ port: channel.port1, name: "lent" });
  served.set(store, state);
  await store.migrate(schemaUpTo(options.targetVersion));
  return store;
}

const lentKit: StoreKit<LentStore> = {
  label: "lent (memory behind a MessagePort)",
  fresh: (options = {}) => lend(options),
  kill: (store, reason) => store.kill(reason),
  async reopen(store) {
    if (!store.closed) store.kill("reopened");
    const state = served.get(store)!;
    await state.done;
    return lend({ image: state.memory!.image() });
  },
  storedVersion: async (store) =>
    Number((await store.read((sql) => sql.get("PRAGMA user_version")))?.["user_version"]),
  setStoredVersion: async (store, version) => {
    await store.commit((sql) => sql.run(`PRAGMA user_version = ${version}`));
  },
};

describe(`store conformance: ${lentKit.label}`, () => {
  for (const scenario of scenarios) {
    test(scenario.name, async () => {
      await scenario.run(lentKit, (line) => console.log(`[${lentKit.label}] ${line}`));
    });
  }
});
