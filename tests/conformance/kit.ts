/**
 * What the conformance suite needs of a store implementation: fresh stores, a crash (kill) and a
 * reopen on exactly what was committed, and the stored schema version. One kit per implementation
 * (memory in Node: tests/unit/store/conformance.test.ts; the Durable Object store in workerd:
 * tests/server/worker/do-kit.ts). Invariant every kit keeps: at most one of its stores is open at a
 * time, because a Durable Object has one database; `fresh` and `reopen` are only called once the
 * previous store is closed or killed (`reopen` kills it itself).
 */
import { schema } from "../../worker/core/schema.ts";
import type { Schema, Store } from "../../worker/store/types.ts";

/** The core's schema, its first `version` migrations only when given (upgrade tests). */
export function schemaUpTo(version?: number): Schema {
  return version === undefined ? schema : { ...schema, migrations: schema.migrations.slice(0, version) };
}

export interface StoreKit<S extends Store = Store> {
  /** The implementation's name, for messages. */
  readonly label: string;
  /**
   * A fresh, empty store, handed the core's schema up to `targetVersion` (default: all of it), as a
   * harness's open hands it over.
   */
  fresh(options?: { targetVersion?: number }): Promise<S>;
  /**
   * Stop `store` at once, as if its process died: queued and later calls reject with StoreClosed,
   * and nothing it has not committed yet is ever stored.
   */
  kill(store: S, reason: string): void;
  /**
   * A new store on exactly what `store` committed (killing `store` first if it is still open), handed
   * the core's whole schema; rejects (StoreOpenError) when the stored schema is newer.
   */
  reopen(store: S): Promise<S>;
  /** The schema version as stored (outside the commit line). */
  storedVersion(store: S): Promise<number>;
  /** Make the stored schema version `version`, as a newer build would have left it. */
  setStoredVersion(store: S, version: number): Promise<void>;
}
