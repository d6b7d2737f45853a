/**
 * The store interface the engine depends on. Everything durable goes through `Store.commit`, one
 * commit line per store: a FIFO where each commit callback is one SQLite transaction (BEGIN, the
 * callback, COMMIT; ROLLBACK when it throws), and a commit's promise resolves only after COMMIT
 * returned. Reads go through the same FIFO, because the wasm builds are not re-entrant. Grouping
 * many commits into one transaction is the layer above's (core/session.ts), not the store's.
 * The store is schema-agnostic: the layer above hands it a `Schema` (numbered migrations and where
 * the owner epoch lives), so no table name appears in store/. No platform API appears here either,
 * so `core/` can depend on this file alone.
 */

export type SqlValue = number | string | null | bigint | Uint8Array;
export type Row = Readonly<Record<string, SqlValue>>;

/** One statement that returns rows, for `allOf`. */
export interface Query {
  readonly sql: string;
  readonly params?: readonly SqlValue[];
}

/**
 * What a commit or read callback may do with the connection. Statements are prepared once and cached.
 * Calls are made one at a time: a callback awaits each before the next (the wasm builds are not
 * re-entrant); several statements that do not depend on each other's results go through `allOf`.
 */
export interface Sql {
  run(sql: string, params?: readonly SqlValue[]): Promise<void>;
  all(sql: string, params?: readonly SqlValue[]): Promise<Row[]>;
  get(sql: string, params?: readonly SqlValue[]): Promise<Row | undefined>;
  /**
   * Optional: the rows of each of `queries`, run in order, as one call. A store that crosses a
   * boundary per call (the lent store's reads: one round trip to its worker each) sends them
   * together; the others leave it out, and `allOf` runs the queries one after another.
   */
  batch?(queries: readonly Query[]): Promise<Row[][]>;
}

/**
 * The rows of each of `queries` (statements that do not depend on each other's results), in order:
 * in one call where `sql` offers `batch`, else one `all` after another. A failing query rejects with
 * its error either way.
 */
export async function allOf(sql: Sql, queries: readonly Query[]): Promise<Row[][]> {
  if (queries.length === 0) return [];
  if (sql.batch && queries.length > 1) return sql.batch(queries);
  const out: Row[][] = [];
  for (const q of queries) out.push(await sql.all(q.sql, q.params));
  return out;
}

export type StoreKind = "memory" | "idb" | "opfs" | "opfs-lent" | "durable-object";

/**
 * Named points on the commit path. A fault hook may throw at any of them to stop the world there
 * (the crash sweep), or just observe them.
 */
export type FaultPoint = "before-begin" | "after-callback" | "before-commit" | "after-commit" | "before-read";

export type FaultHook = (point: FaultPoint, info: { transaction: number }) => void;

export interface StoreStats {
  /** SQLite transactions that reached COMMIT. */
  transactions: number;
  /**
   * Commit callbacks that were committed: equal to `transactions`, since the store runs each callback
   * in a transaction of its own (how many engine commits one carried is the session's grouping).
   */
  commits: number;
  /** Reads served. */
  reads: number;
}

/**
 * What the layer above hands the store (`Store.migrate`): its tables, as numbered migrations, and the
 * two statements of the owner epoch, which the store runs inside its transactions (see line.ts).
 */
export interface Schema {
  /**
   * `migrations[i]` takes a store from `PRAGMA user_version` i to i + 1; every pending one runs in
   * one transaction. Never edit a shipped migration: append one.
   */
  readonly migrations: readonly string[];
  readonly epoch: {
    /** Selects the owner epoch: one row whose first column is its value, or no row before the first bump. */
    readonly read: string;
    /** Adds one to the owner epoch (creating it at 1). */
    readonly bump: string;
  };
}

export interface Store {
  readonly kind: StoreKind;
  readonly name: string;
  /** Schema version: the one found at open, then the schema's once `migrate` returned. */
  readonly schemaVersion: number;
  readonly stats: StoreStats;
  /**
   * Bring the store to `schema` (the pending migrations in one transaction; nothing when it is
   * there already) and keep it for the owner epoch. Called before the first commit. A store newer
   * than the schema, or a migration that fails, closes the store and rejects with a StoreOpenError
   * (reason "migration"), as a failed open does.
   */
  migrate(schema: Schema): Promise<void>;
  /**
   * Run `work` in a transaction of its own. Resolves with its value after COMMIT; rejects with its
   * error when it threw (the transaction rolled back: none of its writes stay).
   */
  commit<T>(work: (sql: Sql) => Promise<T> | T): Promise<T>;
  /** Run `work` outside any transaction, in line order (after every commit requested before it). */
  read<T>(work: (sql: Sql) => Promise<T> | T): Promise<T>;
  /** Install a fault hook (one at a time); returns a remover. */
  setFaultHook(hook: FaultHook | undefined): void;
  close(): Promise<void>;
  readonly closed: boolean;
}

/**
 * A store an engine owns: the contract plus the owner epoch's fence, which the owner arms before the
 * first commit (line.ts, lent.ts; docs/ARCHITECTURE.md, "The owner epoch").
 */
export interface OwnedStore extends Store {
  fenceOnFirstCommit(): void;
}

/** The store was closed, or died (the crash simulation): no further call is served. */
export class StoreClosed extends Error {
  override readonly name = "StoreClosed";
}

/** A transaction could not commit: the engine cannot know what is stored and must reopen. */
export class StoreFailed extends Error {
  override readonly name = "StoreFailed";
}

/** Opening failed: quota, corruption, a store locked by another engine. Carries what a user can do. */
export class StoreOpenError extends Error {
  override readonly name = "StoreOpenError";
  constructor(
    message: string,
    readonly reason: "quota" | "corrupt" | "locked" | "unsupported" | "migration" | "unknown",
    readonly advice: string,
  ) {
    super(message);
  }
}
