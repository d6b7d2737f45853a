/**
 * The conformance kit (tests/conformance/kit.ts) for the Durable Object store, inside workerd: one
 * object, one database. `fresh` empties it (`deleteAll`, which on a SQLite-backed object drops every
 * table) and opens a store on it; `kill` stops a store as the object's death would; `reopen` opens a
 * new store on the same storage, which holds exactly what the dead one committed, because a killed
 * store refuses every statement from then on (an open transaction fails at its next statement and
 * rolls back). A real restart of the object (SIGKILL of workerd) is exercised from Node, in
 * tests/server/restart.test.ts.
 */
import {
  type DoStorage,
  type DoStore,
  openDoStore,
  setStoredVersion,
  storedVersion,
} from "../../../worker/server/do-store.ts";
import { type StoreKit, schemaUpTo } from "../../conformance/kit.ts";

/** What `fresh` needs beyond the store's slice of `ctx.storage`. */
export interface KitStorage extends DoStorage {
  deleteAll(): Promise<void>;
}

export function doKit(storage: KitStorage): StoreKit<DoStore> {
  return {
    label: "durable-object",
    async fresh(options = {}) {
      await storage.deleteAll();
      const store = await openDoStore({ storage, name: "conformance" });
      await store.migrate(schemaUpTo(options.targetVersion));
      return store;
    },
    kill: (store, reason) => store.kill(reason),
    async reopen(store) {
      if (!store.closed) store.kill("reopened");
      const reopened = await openDoStore({ storage, name: "conformance" });
      await reopened.migrate(schemaUpTo());
      return reopened;
    },
    storedVersion: async (store) => store.read(() => storedVersion(storage.sql)),
    setStoredVersion: async (store, version) => {
      await store.commit(() => setStoredVersion(storage.sql, version));
    },
  };
}
