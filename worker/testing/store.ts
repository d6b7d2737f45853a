/**
 * Memory stores for tests and benches: `memoryStore(image?)` opens one (optionally holding a
 * committed image) with the core's schema, as an engine's store has it; `recordJobs` records the SQL
 * of every job a store runs from then on, and how many rows each read.
 */
import { schema } from "../core/schema.ts";
import { type MemoryImage, type MemoryStore, openStore } from "../store/open.ts";
import type { Sql, SqlValue } from "../store/types.ts";

/**
 * A memory store migrated to the core's schema, or to its first `schemaVersion` migrations (what an
 * older build left: tests of upgrades). Rejects as a failed open does when the image is newer.
 */
export async function memoryStore(
  image?: MemoryImage,
  options: { schemaVersion?: number } = {},
): Promise<MemoryStore> {
  const store = await openStore({ kind: "memory", ...(image ? { image } : {}) });
  const { schemaVersion } = options;
  await store.migrate(
    schemaVersion === undefined
      ? schema
      : { ...schema, migrations: schema.migrations.slice(0, schemaVersion) },
  );
  return store;
}

/** The statements one store job (a transaction, or a read) ran, in order, and the rows they returned. */
export interface StoreJob {
  kind: "commit" | "read";
  statements: Array<{ sql: string; params: readonly SqlValue[] | undefined; rows: boolean }>;
  /** Rows the job's `all` and `get` calls returned (what a job read, for tests of O(live work)). */
  rowsRead: number;
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
        const job: StoreJob = { kind, statements: [], rowsRead: 0 };
        recorder.into.push(job);
        const note = (q: string, params: readonly SqlValue[] | undefined, rows: boolean) =>
          job.statements.push({ sql: q, params, rows });
        return work({
          run: (q, params) => {
            note(q, params, false);
            return sql.run(q, params);
          },
          all: async (q, params) => {
            note(q, params, true);
            const rows = await sql.all(q, params);
            job.rowsRead += rows.length;
            return rows;
          },
          get: async (q, params) => {
            note(q, params, true);
            const row = await sql.get(q, params);
            if (row) job.rowsRead++;
            return row;
          },
        });
      });
  }
}
