/**
 * The commit line over one wa-sqlite connection. Invariants:
 * - one SQLite call at a time (the Asyncify/JSPI builds are not re-entrant): commits, reads and
 *   migrations share one FIFO, the commit queue every store kind uses (queue.ts);
 * - one commit callback, one transaction: BEGIN IMMEDIATE, the callback, COMMIT; a callback that
 *   throws rolls its whole transaction back and the line goes on. Grouping commits is the layer
 *   above's (core/session.ts: one callback of the store carries a whole group of the engine's);
 * - a commit's promise settles only after COMMIT returned; nothing is published before that;
 * - the line yields to the event loop between transactions, so a sync VFS never starves ports;
 * - schema-agnostic: the tables and the owner epoch's statements come from the `Schema` the layer
 *   above hands to `migrate`; the line itself names no table.
 */
import * as SQLite from "@journeyapps/wa-sqlite/src/sqlite-constants.js";
import type { DirectStatements } from "./direct.ts";
import { errorMessage } from "./errors.ts";
import { type QueuedJob, QueuedStore, storeFailure, yieldToEventLoop } from "./queue.ts";
import {
  type Row,
  type Schema,
  type Sql,
  type SqlValue,
  type Store,
  StoreClosed,
  StoreFailed,
  type StoreKind,
  StoreOpenError,
} from "./types.ts";

/** A commit runs in a transaction; a read outside any; a migration is its own transaction. */
type Job = QueuedJob<"commit" | "read" | "migrate">;

export interface LineOptions {
  kind: StoreKind;
  name: string;
  sqlite3: SQLiteAPI;
  db: number;
  /** The schema version found at open (`PRAGMA user_version`). */
  schemaVersion: number;
  /** Called once the connection is closed, to release the VFS and locks. */
  onClose?: () => Promise<void> | void;
  /** Statements through the C exports, for a synchronous build (see direct.ts). */
  direct?: DirectStatements;
  /**
   * For a store in WAL mode (the opfs kind): once no commit came for `afterMs`, copy the log into
   * the database file and empty it (`PRAGMA wal_checkpoint(TRUNCATE)`, a read job on the line), so
   * the file stands alone whenever the store is quiet and the next open has little log to replay.
   */
  idleCheckpoint?: { afterMs: number };
}

export class SqliteLine extends QueuedStore<Job["kind"]> implements Store {
  readonly kind: StoreKind;
  readonly name: string;
  schemaVersion: number;
  #sqlite3: SQLiteAPI;
  #db: number;
  #statements = new Map<string, { stmt: number; columns: string[] | undefined }>();
  #sql: Sql;
  #onClose: (() => Promise<void> | void) | undefined;
  /** What `migrate` was handed: the owner epoch's statements come from it. */
  #schema: Schema | undefined;
  #epoch: string | undefined;
  /** `fenceOnFirstCommit` was called: the next transaction bumps the epoch before its callbacks. */
  #fencePending = false;
  #direct: DirectStatements | undefined;
  /** The job being served now (settles once its runner is done), for `abandon`. */
  #serving: Promise<void> = Promise.resolve();
  /** `kill` was called before any `close`: the connection is still held, `abandon` releases it. */
  #killedOpen = false;
  #abandoned: Promise<void> | undefined;
  #idleCheckpoint: { afterMs: number } | undefined;
  #checkpointTimer: ReturnType<typeof setTimeout> | undefined;
  /** Checkpoints run when the line was quiet (for tests and the bench: how often it happened). */
  checkpoints = 0;

  constructor(options: LineOptions) {
    // Every SQLite call waits its turn on the queue: commits, reads and migrations alike.
    super(options.name);
    this.kind = options.kind;
    this.name = options.name;
    this.#sqlite3 = options.sqlite3;
    this.#db = options.db;
    this.schemaVersion = options.schemaVersion;
    this.#onClose = options.onClose;
    this.#direct = options.direct;
    this.#idleCheckpoint = options.idleCheckpoint;
    this.#sql = {
      run: async (sql, params) => {
        await this.#execute(sql, params, false);
      },
      all: (sql, params) => this.#execute(sql, params, true),
      get: async (sql, params) => (await this.#execute(sql, params, true))[0],
    };
  }

  protected runJob(job: Job): Promise<void> {
    const running =
      job.kind === "commit"
        ? this.#runCommit(job)
        : job.kind === "read"
          ? this.queue.read(job, this.#sql)
          : this.#runMigration(job);
    this.#serving = running.catch(() => undefined);
    return running;
  }

  /** Between transactions the event loop gets a turn, so a sync VFS never starves the ports. */
  protected override between(): Promise<void> {
    return yieldToEventLoop();
  }

  /**
   * Bring the store to `schema`: the pending migrations and the new `user_version` in one
   * transaction, on the line (after whatever was queued before). A store already there costs
   * nothing: its version was read at open. A store newer than the schema, or a migration that
   * fails, closes the line and rejects with a StoreOpenError, as a failed open does.
   */
  async migrate(schema: Schema): Promise<void> {
    const { migrations } = schema;
    const found = this.schemaVersion;
    try {
      if (found > migrations.length) {
        throw new StoreOpenError(
          `store ${this.name} has schema version ${found}, newer than this build's ${migrations.length}`,
          "migration",
          "Reload the page to get the newest version of the app.",
        );
      }
      if (found < migrations.length) {
        await this.queue.enqueue("migrate", async () => {
          // Read again on the line: a migration handed over twice at once runs once.
          const at = Number(
            (await this.#execute("PRAGMA user_version", undefined, true))[0]?.["user_version"],
          );
          if (at >= migrations.length) return;
          await this.execScript("BEGIN IMMEDIATE");
          try {
            for (let v = at; v < migrations.length; v++) await this.execScript(migrations[v]!);
            await this.execScript(`PRAGMA user_version = ${migrations.length}`);
            await this.execScript("COMMIT");
          } catch (error) {
            await this.execScript("ROLLBACK").catch(() => undefined);
            throw new StoreOpenError(
              `migrating store ${this.name} from schema ${found} failed: ${errorMessage(error)}`,
              "migration",
              "Export your data from an older version of the app, or reset the store.",
            );
          }
        });
      }
    } catch (error) {
      await this.close().catch(() => undefined);
      throw error;
    }
    this.#schema = schema;
    this.schemaVersion = migrations.length;
  }

  commit<T>(work: (sql: Sql) => Promise<T> | T): Promise<T> {
    return this.queue.enqueue("commit", work);
  }

  read<T>(work: (sql: Sql) => Promise<T> | T): Promise<T> {
    return this.queue.enqueue("read", work);
  }

  /**
   * Take ownership: bump the store's owner epoch and check it in every transaction from now on, so
   * a previous owner that still runs (a stolen lock does not stop its holder) can never write again.
   */
  async fence(): Promise<number> {
    const epoch = await this.commit((sql) => this.#bumpEpoch(sql));
    this.#epoch = epoch;
    return Number(epoch);
  }

  /**
   * The same fence without a commit of its own: the next transaction bumps the owner epoch right
   * after BEGIN, before any callback writes, and every later one checks it. Until then this line has
   * written nothing, so there is nothing of its own to protect; if that transaction fails, the bump
   * rolls back with it and the one after carries it. Safe only where no other connection can commit
   * between this line's first read and its first commit (docs/ARCHITECTURE.md, "The owner epoch").
   */
  fenceOnFirstCommit(): void {
    if (this.#epoch === undefined) this.#fencePending = true;
  }

  /** The owner epoch this line holds and checks, once fenced. */
  get epoch(): number | undefined {
    return this.#epoch === undefined ? undefined : Number(this.#epoch);
  }

  /** Run multi-statement SQL directly (pragmas at open, migrations), outside the FIFO. */
  async execScript(sql: string): Promise<void> {
    await this.#sqlite3.exec(this.#db, sql);
  }

  /**
   * Run SQL text once, inside whatever job is being served and not cached as a statement: for text
   * that differs each time, which `Sql.run` would prepare and keep (the lent store's per-commit
   * `PRAGMA application_id = n`). On a synchronous build one call of the C exports (direct.ts), not
   * the API's exec, whose statement iterator, string copy and promise per call cost more than the
   * statement on the lent store's commit path.
   */
  async execOnce(sql: string): Promise<void> {
    if (this.queue.closed) throw new StoreClosed(`store ${this.name} is closed`);
    if (this.#direct) this.#direct.exec(sql);
    else await this.#sqlite3.exec(this.#db, sql);
  }

  /** (Re)arm the idle checkpoint after a commit. */
  #armCheckpoint(): void {
    if (!this.#idleCheckpoint) return;
    if (this.#checkpointTimer !== undefined) clearTimeout(this.#checkpointTimer);
    this.#checkpointTimer = setTimeout(() => {
      this.#checkpointTimer = undefined;
      if (this.queue.closing || this.queue.closed) return;
      this.read((sql) => sql.run("PRAGMA wal_checkpoint(TRUNCATE)")).then(
        () => void this.checkpoints++,
        // A checkpoint that cannot run now (the line closing, a failing disk) leaves the log as it
        // is: SQLite replays it at the next open, and the next quiet spell tries again.
        () => undefined,
      );
    }, this.#idleCheckpoint.afterMs);
  }

  close(): Promise<void> {
    if (this.#checkpointTimer !== undefined) clearTimeout(this.#checkpointTimer);
    // Everything already admitted settles first; then the connection is released.
    return this.queue.close(async () => {
      for (const { stmt } of this.#statements.values()) await this.#sqlite3.finalize(stmt);
      this.#statements.clear();
      this.#direct?.dispose();
      await this.#sqlite3.close(this.#db);
      await this.#onClose?.();
    });
  }

  /** Stop serving at once, as if the process died: pending and future calls reject. */
  kill(reason = "store died"): void {
    if (this.#checkpointTimer !== undefined) clearTimeout(this.#checkpointTimer);
    if (!this.queue.closing) this.#killedOpen = true;
    this.queue.kill(reason);
  }

  /**
   * After `kill`, release the connection and its VFS (file handles, locks) as the death of the
   * process would, for a context that outlives the killed line and opens the same store again (the
   * conformance kit of the browser stores, tests/e2e/fixtures/store-conformance/). Waits for the job
   * being served to end (its statements already refuse), then closes the connection: SQLite rolls
   * back the transaction left open, so nothing uncommitted is stored. Rejects (StoreFailed) on a
   * line still open (that one closes with `close`); nothing to do on a line `close` released.
   */
  abandon(): Promise<void> {
    if (!this.queue.closed)
      return Promise.reject(new StoreFailed(`store ${this.name} is open: abandon() is for a killed line`));
    if (!this.#killedOpen) return Promise.resolve();
    this.#abandoned ??= (async () => {
      await this.#serving;
      for (const { stmt } of this.#statements.values()) await this.#sqlite3.finalize(stmt);
      this.#statements.clear();
      this.#direct?.dispose();
      await this.#sqlite3.close(this.#db);
      await this.#onClose?.();
    })();
    return this.#abandoned;
  }

  /** Migrations: a transaction of their own, outside the fault points, the stats and the epoch. */
  async #runMigration(job: Job): Promise<void> {
    try {
      job.resolve(await job.work(this.#sql));
    } catch (error) {
      job.reject(error);
    }
  }

  /** One commit callback in one transaction. */
  async #runCommit(job: Job): Promise<void> {
    let fencedAt: string | undefined;
    let begun = false;
    if (!this.queue.begin(job)) return;
    try {
      await this.#execute("BEGIN IMMEDIATE", undefined, false);
      begun = true;
      if (this.#fencePending) {
        // Set only once COMMIT returns: a transaction that fails takes its bump with it.
        fencedAt = await this.#bumpEpoch(this.#sql);
      } else if (this.#epoch !== undefined) {
        if ((await this.#readEpoch(this.#sql)) !== this.#epoch) {
          await this.#execute("ROLLBACK", undefined, false);
          const reason = "another engine has taken over this store; this one stops writing";
          this.kill(reason);
          throw new StoreClosed(reason);
        }
      }
    } catch (error) {
      // The callback did not run: fail it (the line stays alive unless it was killed).
      if (begun && !this.closed) await this.#execute("ROLLBACK", undefined, false).catch(() => undefined);
      const closed = error instanceof StoreClosed ? error : new StoreClosed("store closed");
      job.reject(this.closed ? closed : storeFailure(error));
      return;
    }
    let value: unknown;
    try {
      value = await job.work(this.#sql);
    } catch (error) {
      // Its own failure: none of its writes stay, the line goes on.
      if (!this.closed) await this.#execute("ROLLBACK", undefined, false).catch(() => undefined);
      job.reject(error);
      return;
    }
    try {
      this.queue.point("after-callback");
      this.queue.point("before-commit");
      await this.#execute("COMMIT", undefined, false);
    } catch (error) {
      try {
        if (!this.closed) await this.#execute("ROLLBACK", undefined, false);
      } catch {
        // Already rolled back by SQLite.
      }
      job.reject(this.closed ? new StoreClosed("store died before COMMIT") : storeFailure(error));
      return;
    }
    if (fencedAt !== undefined) {
      this.#epoch = fencedAt;
      this.#fencePending = false;
    }
    this.queue.committed(job, value);
    this.#armCheckpoint();
  }

  #epochStatements(): Schema["epoch"] {
    if (!this.#schema) throw new StoreFailed(`store ${this.name} has no schema: migrate() it before fencing`);
    return this.#schema.epoch;
  }

  /** The owner epoch as stored (inside the caller's transaction); undefined before the first bump. */
  async #readEpoch(sql: Sql): Promise<string | undefined> {
    const row = await sql.get(this.#epochStatements().read);
    const value = row === undefined ? undefined : Object.values(row)[0];
    return value === undefined || value === null ? undefined : String(value);
  }

  /** Bump the store's owner epoch (inside the caller's transaction); resolves with the new value. */
  async #bumpEpoch(sql: Sql): Promise<string> {
    await sql.run(this.#epochStatements().bump);
    return String(await this.#readEpoch(sql));
  }

  async #execute(sql: string, params: readonly SqlValue[] | undefined, wantRows: boolean): Promise<Row[]> {
    if (this.queue.closed) throw new StoreClosed(`store ${this.name} is closed`);
    const sqlite3 = this.#sqlite3;
    let cached = this.#statements.get(sql);
    if (!cached) {
      let stmt = 0;
      for await (const s of sqlite3.statements(this.#db, sql, { unscoped: true })) {
        stmt = s;
        break;
      }
      if (!stmt) throw new Error(`empty statement: ${sql}`);
      cached = { stmt, columns: undefined };
      this.#statements.set(sql, cached);
    }
    const { stmt } = cached;
    if (this.#direct) {
      const entry = cached;
      return this.#direct.run(stmt, params, () => (entry.columns ??= sqlite3.column_names(stmt)), wantRows);
    }
    const bound = params !== undefined && params.length > 0;
    // Binding needs a reset statement. Without parameters the reset is left to sqlite3_step, which
    // resets a statement that finished (every run steps to DONE or fails) by itself: one wasm call
    // fewer for BEGIN, SAVEPOINT, RELEASE and COMMIT, the bulk of a grouped transaction's statements.
    if (bound) {
      try {
        await sqlite3.reset(stmt);
      } catch {
        // reset reports the previous step's error again; that error was already thrown to its caller.
      }
      sqlite3.bind_collection(stmt, params as SqlValue[]);
    }
    const rows: Row[] = [];
    try {
      while ((await sqlite3.step(stmt)) === SQLite.SQLITE_ROW) {
        if (!wantRows) continue;
        const columns = (cached.columns ??= sqlite3.column_names(stmt));
        const values = sqlite3.row(stmt);
        const row: Record<string, SqlValue> = {};
        for (let i = 0; i < columns.length; i++) row[columns[i]!] = (values[i] ?? null) as SqlValue;
        rows.push(row);
      }
    } finally {
      if (bound) sqlite3.clear_bindings(stmt);
    }
    return rows;
  }
}
