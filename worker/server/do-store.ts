/**
 * The server home's store: the `Store` contract of store/types.ts on a Durable Object's own SQLite
 * (`ctx.storage.sql`). Invariants, the same as the wa-sqlite line's (store/line.ts):
 * - one commit line: commits and reads share one FIFO (the commit queue every store kind uses,
 *   store/queue.ts) and run one at a time; each commit callback
 *   is one transaction (grouping many engine commits into one is the core session's job, not the
 *   store's), and a callback that throws rolls its transaction back and rejects with its own error;
 * - schema-agnostic: the layer above hands `migrate` its numbered migrations;
 * - a commit's promise settles only after its transaction is durable: after the outer
 *   `transaction()` resolved AND `ctx.storage.sync()` resolved (the platform's "every write so far
 *   is on disk"); the caller, and so every observer the core publishes to, hears nothing before;
 * - the fault points fire in the line's order (before-begin, after-callback, before-commit,
 *   after-commit, before-read), so the crash sweeps drive this store as they drive memory. Only
 *   transactions that commit count (one whose callback threw rolls back);
 * - failures are typed: StoreClosed once closed or killed (a killed store's open transaction fails
 *   at its next statement and rolls back), StoreFailed when the platform could not run or confirm
 *   a transaction (the engine must reopen), StoreOpenError at open.
 *
 * Why `transaction(async)` and not `transactionSync`: the core's commit callback is async (the
 * session awaits each request's callback and a microtask for the scheduler's reservation), and
 * `transactionSync` takes a synchronous function only (handed an async one it returns the promise at
 * once and the writes after the first await land outside the transaction). In workerd (miniflare
 * 3.20250718.3) `transaction(async)` keeps the transaction open across awaits, microtasks and timers
 * alike, and rolls it back when the closure throws.
 * `sql.exec` refuses SQL `BEGIN`, `SAVEPOINT` and `COMMIT` ("To execute a transaction, please use
 * ... transaction()") and `PRAGMA user_version` (`SQLITE_AUTH`), so the schema version lives in a
 * table of its own (`store_schema`), written in the migrating transaction.
 * While a `transaction(async)` is open, workerd delivers no other event to the object (measured: a
 * request arriving 100 ms into a transaction that awaited a 300 ms timer was answered after it
 * ended; during a plain 300 ms sleep it was answered at once). So nothing outside the line ever sees
 * uncommitted rows, and a commit callback must not await slow foreign I/O (the core's do not).
 * Only one instance of a Durable Object runs at a time (the platform's guarantee), so this store
 * needs no owner epoch: the object is the lock.
 *
 * Values: `sql.exec` refuses bigint (converted here when it is a safe integer, refused otherwise),
 * returns blobs as ArrayBuffer (handed back as Uint8Array), and returns integers beyond 2^53 rounded
 * (the engine stores none: ids and timestamps are far below).
 */
import { classifyStoreError, errorMessage } from "../store/errors.ts";
import { type QueuedJob, QueuedStore, storeFailure } from "../store/queue.ts";
import {
  type Row,
  type Schema,
  type Sql,
  type SqlValue,
  type Store,
  StoreClosed,
  StoreOpenError,
} from "../store/types.ts";

/** What `sql.exec` takes and gives back (a structural slice of workerd's `SqlStorage`). */
export type DoSqlValue = number | string | null | ArrayBuffer | ArrayBufferView;

export interface DoSqlCursor extends Iterable<Record<string, DoSqlValue>> {
  toArray(): Array<Record<string, DoSqlValue>>;
}

export interface DoSqlStorage {
  exec(query: string, ...bindings: DoSqlValue[]): DoSqlCursor;
}

/** The part of a Durable Object's `ctx.storage` this store uses. */
export interface DoStorage {
  readonly sql: DoSqlStorage;
  transaction<T>(closure: () => Promise<T>): Promise<T>;
  sync(): Promise<void>;
}

export interface OpenDoStoreOptions {
  /** The object's `ctx.storage`. */
  storage: DoStorage;
  name?: string;
}

type Job = QueuedJob<"commit" | "read">;

/** The table holding the schema version (`PRAGMA user_version` is refused by `sql.exec`). */
const VERSION_TABLE = "store_schema";

/** Reads in a row without any I/O before the line gives the event loop a turn. */
const READS_BETWEEN_YIELDS = 32;

const yieldToEventLoop = () => new Promise<void>((r) => setTimeout(r, 0));

export class DoStore extends QueuedStore<Job["kind"]> implements Store {
  readonly kind = "durable-object" as const;
  readonly name: string;
  schemaVersion = 0;
  #storage: DoStorage;
  #sql: Sql;
  #readsInARow = 0;

  constructor(options: { storage: DoStorage; name: string }) {
    super(options.name);
    this.#storage = options.storage;
    this.name = options.name;
    this.#sql = {
      run: async (sql, params) => {
        this.#execute(sql, params, false);
      },
      all: async (sql, params) => this.#execute(sql, params, true),
      get: async (sql, params) => this.#execute(sql, params, true)[0],
    };
  }

  protected runJob(job: Job): Promise<void> {
    return job.kind === "read" ? this.queue.read(job, this.#sql) : this.#runCommit(job);
  }

  /** A read does no I/O: after a run of them, let the object's other events in. */
  protected override between(job: Job): Promise<void> | undefined {
    if (job.kind !== "read") this.#readsInARow = 0;
    else if (++this.#readsInARow >= READS_BETWEEN_YIELDS) {
      this.#readsInARow = 0;
      return yieldToEventLoop();
    }
    return undefined;
  }

  commit<T>(work: (sql: Sql) => Promise<T> | T): Promise<T> {
    return this.queue.enqueue("commit", work);
  }

  read<T>(work: (sql: Sql) => Promise<T> | T): Promise<T> {
    return this.queue.enqueue("read", work);
  }

  /**
   * Let everything already admitted settle, then refuse the rest. The database stays: it is the
   * object's, and outlives this view of it.
   */
  close(): Promise<void> {
    return this.queue.close();
  }

  /**
   * Stop serving at once, as if the object died: queued and future calls reject with StoreClosed,
   * and a callback still running fails at its next statement, so its transaction rolls back.
   */
  kill(reason = "store died"): void {
    this.queue.kill(reason);
  }

  /**
   * Bring the store to `schema`: its pending migrations in one transaction (nothing when it is there
   * already). A store newer than the schema, or a migration that fails, closes the store and rejects
   * with a StoreOpenError (reason "migration"). The owner epoch's statements are not needed here:
   * only one instance of a Durable Object runs at a time, so the object is the lock.
   */
  async migrate(schema: Schema): Promise<void> {
    const { migrations } = schema;
    const sql = this.#storage.sql;
    try {
      const found = await this.read(() => storedVersion(sql));
      if (found > migrations.length) {
        throw new StoreOpenError(
          `store ${this.name} has schema version ${found}, newer than this build's ${migrations.length}`,
          "migration",
          "Deploy the newest version of the server.",
        );
      }
      if (found < migrations.length) {
        try {
          await this.#storage.transaction(async () => {
            // Read again inside the transaction: a schema handed over twice at once migrates once.
            const at = storedVersion(sql);
            for (let v = at; v < migrations.length; v++) sql.exec(migrations[v]!);
            setStoredVersion(sql, migrations.length);
          });
          await this.#storage.sync();
        } catch (error) {
          throw new StoreOpenError(
            `migrating store ${this.name} from schema ${found} failed: ${errorMessage(error)}`,
            "migration",
            "Export the space's data with an older version of the server, or reset the space.",
          );
        }
      }
    } catch (error) {
      this.kill("migration failed");
      throw error;
    }
    this.schemaVersion = migrations.length;
  }

  /** One commit callback, one transaction: durable (synced) before its promise settles. */
  async #runCommit(job: Job): Promise<void> {
    // A throw at before-begin fails this commit only (nothing ran); the line stays alive.
    if (!this.queue.begin(job)) return;
    let value: unknown;
    let thrown: { error: unknown } | undefined;
    try {
      await this.#storage.transaction(async () => {
        try {
          value = await job.work(this.#sql);
        } catch (error) {
          // The callback's own error: roll back and reject with it as it is.
          thrown = { error };
          throw error;
        }
        // Killed meanwhile: a dead object commits nothing more.
        if (this.closed) throw new StoreClosed("store died before COMMIT");
        // Throwing here (the crash sweep's "before-commit") rolls the transaction back.
        this.queue.point("after-callback");
        this.queue.point("before-commit");
      });
    } catch (error) {
      if (thrown) job.reject(this.closed ? new StoreClosed("store died before COMMIT") : thrown.error);
      else job.reject(this.closed ? new StoreClosed("store died before COMMIT") : storeFailure(error));
      return;
    }
    try {
      // transaction() resolves before the write is flushed (measured in workerd: about 1 ms per
      // transaction, 2.4 ms with sync); the contract is "settles once durable".
      await this.#storage.sync();
    } catch (error) {
      job.reject(
        this.closed ? new StoreClosed("store died before its commit was confirmed") : storeFailure(error),
      );
      return;
    }
    this.queue.committed(job, value);
  }

  #execute(sql: string, params: readonly SqlValue[] | undefined, wantRows: boolean): Row[] {
    if (this.closed) throw new StoreClosed(`store ${this.name} is closed`);
    const cursor = this.#storage.sql.exec(sql, ...(params ?? []).map(toDoValue));
    const rows: Row[] = [];
    for (const raw of cursor) {
      if (!wantRows) continue;
      const row: Record<string, SqlValue> = {};
      for (const [column, value] of Object.entries(raw)) row[column] = fromDoValue(value);
      rows.push(row);
    }
    return rows;
  }
}

/**
 * Open a store on a Durable Object's storage. It knows no schema until the layer above hands it one
 * (`migrate`, the first thing a harness's open does); `schemaVersion` is the stored one until then.
 */
export async function openDoStore(options: OpenDoStoreOptions): Promise<DoStore> {
  const name = options.name ?? "space";
  const store = new DoStore({ storage: options.storage, name });
  try {
    store.schemaVersion = await store.read(() => storedVersion(options.storage.sql));
    return store;
  } catch (error) {
    store.kill("open failed");
    throw await classifyStoreError(error, { store: name, stage: "open", storageFull: async () => false });
  }
}

/** The schema version stored by `migrate` (0: a database this store never migrated). */
export function storedVersion(sql: DoSqlStorage): number {
  const table = sql
    .exec("SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?", VERSION_TABLE)
    .toArray();
  if (table.length === 0) return 0;
  const row = sql.exec(`SELECT version FROM ${VERSION_TABLE} WHERE id = 1`).toArray()[0];
  return Number(row?.["version"] ?? 0);
}

/** Set the stored schema version by hand (tests of a store newer than the build). */
export function setStoredVersion(sql: DoSqlStorage, version: number): void {
  sql.exec(
    `CREATE TABLE IF NOT EXISTS ${VERSION_TABLE} (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL)`,
  );
  sql.exec(
    `INSERT INTO ${VERSION_TABLE} (id, version) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET version = excluded.version`,
    version,
  );
}

function toDoValue(value: SqlValue): DoSqlValue {
  if (typeof value !== "bigint") return value;
  if (value > BigInt(Number.MAX_SAFE_INTEGER) || value < BigInt(Number.MIN_SAFE_INTEGER))
    throw new RangeError(`${value} is beyond what a Durable Object's SQL binds exactly (2^53)`);
  return Number(value);
}

function fromDoValue(value: DoSqlValue): SqlValue {
  if (value instanceof ArrayBuffer) return new Uint8Array(value);
  if (ArrayBuffer.isView(value))
    return new Uint8Array(value.buffer, value.byteOffset, value.byteLength).slice();
  return value;
}
