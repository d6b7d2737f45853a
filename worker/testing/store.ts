/**
 * Memory stores for tests and benches: `memoryStore(image?)` opens one (optionally holding a
 * committed image), `recordJobs` records the SQL of every job a store runs from then on.
 */
import { type MemoryImage, type MemoryStore, openStore } from "../store/open.ts";
import type { Sql, SqlValue } from "../store/types.ts";

export function memoryStore(image?: MemoryImage): Promise<MemoryStore> {
  return openStore({ kind: "memory", ...(image ? { image } : {}) });
}

/** The statements one store job (a transaction, or a read) ran, in order. */
export interface StoreJob {
  kind: "commit" | "read";
  statements: Array<{ sql: string; params: readonly SqlValue[] | undefined; rows: boolean }>;
}

/**
 * Record every job `store` runs from now on, in the order they run, into `recorder.into` (swap the
 * array to split a run into parts). For benches replaying a run's SQL and tests measuring its writes.
 */
export function recordJobs(store: MemoryStore, recorder: { into: StoreJob[] }): void {
  for (const kind of ["commit", "read"] as const) {
    const original = store[kind].bind(store);
    store[kind] = <T>(work: (sql: Sql) => Promise<T> | T) =>
      original((sql) => {
        const job: StoreJob = { kind, statements: [] };
        recorder.into.push(job);
        const note = (q: string, params: readonly SqlValue[] | undefined, rows: boolean) =>
          job.statements.push({ sql: q, params, rows });
        return work({
          run: (q, params) => {
            note(q, params, false);
            return sql.run(q, params);
          },
          all: (q, params) => {
            note(q, params, true);
            return sql.all(q, params);
          },
          get: (q, params) => {
            note(q, params, true);
            return sql.get(q, params);
          },
        });
      });
  }
}
