/**
 * What the conformance suite needs of a store implementation: fresh stores, a crash (kill) and a
 * reopen on exactly what was committed, and the stored schema version. One kit per implementation
 * (memory in Node: tests/unit/store/conformance.test.ts; the Durable Object store in workerd:
 * tests/server/worker/do-kit.ts). Invariant every kit keeps: at most one of its stores is open at a
 * time, because a Durable Object has one database; `fresh` and `reopen` are only called once the
 * previous store is closed or killed (`reopen` kills it itself).
 */
import type { Store } from "../../worker/store/types.ts";

export interface StoreKit<S extends Store = Store> {
  /** The implementation's name, for messages. */
  readonly label: string;
  /**
   * A fresh, empty store, migrated up to `targetVersion` (default: the newest schema), grouping
   * concurrent commits into one transaction unless `groupCommit` is false.
   */
  fresh(options?: { targetVersion?: number; groupCommit?: boolean }): Promise<S>;
  /**
   * Stop `store` at once, as if its process died: queued and later calls reject with StoreClosed,
   * and nothing it has not committed yet is ever stored.
   */
  kill(store: S, reason: string): void;
  /** A new store on exactly what `store` committed (killing `store` first if it is still open). */
  reopen(store: S): Promise<S>;
  /** The schema version as stored (outside the commit line). */
  storedVersion(store: S): Promise<number>;
  /** Make the stored schema version `version`, as a newer build would have left it. */
  setStoredVersion(store: S, version: number): Promise<void>;
}
