/**
 * Running a prepared statement on a synchronous wa-sqlite build (no Asyncify, no JSPI, a VFS that
 * never returns a promise) through the module's C exports. wa-sqlite's API wraps every call for the
 * async builds: a promise per step and reset, cwrap argument conversion, a map lookup per call and a
 * fresh malloc'd copy per bound string; for the memory store that was more than the SQL itself.
 *
 * Same results as the API: integers read as numbers (the engine stores none beyond 2^53), text as
 * strings, blobs as copies, NULL as null; a failing step throws an Error carrying SQLite's message
 * and result code. Strings are bound from one reusable buffer with SQLITE_TRANSIENT (SQLite copies).
 */
import type { Row, SqlValue } from "./types.ts";

const SQLITE_ROW = 100;
const SQLITE_DONE = 101;
const SQLITE_INTEGER = 1;
const SQLITE_FLOAT = 2;
const SQLITE_TEXT = 3;
const SQLITE_BLOB = 4;
/** sqlite3_destructor_type SQLITE_TRANSIENT: SQLite copies the bytes before bind returns. */
const SQLITE_TRANSIENT = -1;

/** The exports of the sync build this file uses. */
export interface SyncModule {
  HEAPU8: Uint8Array;
  _sqlite3_malloc(n: number): number;
  _sqlite3_free(p: number): void;
  _sqlite3_reset(stmt: number): number;
  _sqlite3_clear_bindings(stmt: number): number;
  _sqlite3_step(stmt: number): number;
  _sqlite3_bind_null(stmt: number, i: number): number;
  _sqlite3_bind_int(stmt: number, i: number, v: number): number;
  _sqlite3_bind_double(stmt: number, i: number, v: number): number;
  _sqlite3_bind_text(stmt: number, i: number, p: number, n: number, destructor: number): number;
  _sqlite3_bind_blob(stmt: number, i: number, p: number, n: number, destructor: number): number;
  _sqlite3_column_count(stmt: number): number;
  _sqlite3_column_type(stmt: number, i: number): number;
  _sqlite3_column_double(stmt: number, i: number): number;
  _sqlite3_column_text(stmt: number, i: number): number;
  _sqlite3_column_blob(stmt: number, i: number): number;
  _sqlite3_column_bytes(stmt: number, i: number): number;
  _sqlite3_errmsg(db: number): number;
  _sqlite3_exec(db: number, sql: number, callback: number, arg: number, errmsg: number): number;
}

/** True when `module` has every export this file calls (the sync build does). */
export function isSyncModule(module: unknown): module is SyncModule {
  const m = module as Record<string, unknown> | undefined;
  return (
    !!m &&
    m["HEAPU8"] instanceof Uint8Array &&
    typeof m["_sqlite3_step"] === "function" &&
    typeof m["_sqlite3_bind_text"] === "function" &&
    typeof m["_sqlite3_column_text"] === "function" &&
    typeof m["_sqlite3_errmsg"] === "function" &&
    typeof m["_sqlite3_exec"] === "function"
  );
}

export class DirectStatements {
  readonly #m: SyncModule;
  readonly #db: number;
  readonly #encoder = new TextEncoder();
  readonly #decoder = new TextDecoder();
  #buffer = 0;
  #bufferSize = 0;

  constructor(module: SyncModule, db: number) {
    this.#m = module;
    this.#db = db;
  }

  /** Bind (after a reset when there is anything to bind), step to the end, return the rows. */
  run(
    stmt: number,
    params: readonly SqlValue[] | undefined,
    columns: () => string[],
    wantRows: boolean,
  ): Row[] {
    const m = this.#m;
    const bound = params !== undefined && params.length > 0;
    if (bound) {
      m._sqlite3_reset(stmt); // reports the previous step's error again; that one was already thrown
      for (let i = 0; i < params.length; i++) this.#check(this.#bind(stmt, i + 1, params[i]));
    }
    const rows: Row[] = [];
    try {
      for (;;) {
        const rc = m._sqlite3_step(stmt);
        if (rc === SQLITE_DONE) break;
        if (rc !== SQLITE_ROW) {
          const error = this.#error(rc);
          m._sqlite3_reset(stmt);
          throw error;
        }
        if (wantRows) rows.push(this.#row(stmt, columns()));
      }
    } finally {
      if (bound) m._sqlite3_clear_bindings(stmt);
    }
    return rows;
  }

  /**
   * Run SQL text once, not prepared for again (sqlite3_exec: every statement of it, rows dropped), from
   * the reused buffer: for text that changes each time (the lent store's per-commit sequence number).
   */
  exec(sql: string): void {
    const m = this.#m;
    const capacity = sql.length * 3 + 1;
    const p = this.#scratch(capacity);
    const { written } = this.#encoder.encodeInto(sql, m.HEAPU8.subarray(p, p + capacity - 1));
    m.HEAPU8[p + written] = 0;
    this.#check(m._sqlite3_exec(this.#db, p, 0, 0, 0));
  }

  /** Release the string buffer (the connection is closing). */
  dispose(): void {
    if (this.#buffer) this.#m._sqlite3_free(this.#buffer);
    this.#buffer = 0;
    this.#bufferSize = 0;
  }

  #bind(stmt: number, i: number, value: SqlValue | undefined): number {
    const m = this.#m;
    if (value === null || value === undefined) return m._sqlite3_bind_null(stmt, i);
    switch (typeof value) {
      case "number":
        return value === (value | 0)
          ? m._sqlite3_bind_int(stmt, i, value)
          : m._sqlite3_bind_double(stmt, i, value);
      case "string": {
        const capacity = value.length * 3 + 1;
        const p = this.#scratch(capacity);
        const { written } = this.#encoder.encodeInto(value, m.HEAPU8.subarray(p, p + capacity));
        return m._sqlite3_bind_text(stmt, i, p, written, SQLITE_TRANSIENT);
      }
      case "bigint":
        if (value > BigInt(Number.MAX_SAFE_INTEGER) || value < BigInt(Number.MIN_SAFE_INTEGER))
          throw new RangeError(`integer ${value} does not fit a double exactly`);
        return m._sqlite3_bind_double(stmt, i, Number(value));
      default: {
        const bytes = value as Uint8Array;
        const p = this.#scratch(Math.max(1, bytes.byteLength));
        m.HEAPU8.set(bytes, p);
        return m._sqlite3_bind_blob(stmt, i, p, bytes.byteLength, SQLITE_TRANSIENT);
      }
    }
  }

  #scratch(size: number): number {
    if (size > this.#bufferSize) {
      if (this.#buffer) this.#m._sqlite3_free(this.#buffer);
      const grown = Math.max(size, this.#bufferSize * 2, 4096);
      this.#buffer = this.#m._sqlite3_malloc(grown);
      if (!this.#buffer) throw new Error("out of memory binding a statement parameter");
      this.#bufferSize = grown;
    }
    return this.#buffer;
  }

  #row(stmt: number, columns: string[]): Row {
    const m = this.#m;
    const row: Record<string, SqlValue> = {};
    for (let i = 0; i < columns.length; i++) {
      let value: SqlValue;
      switch (m._sqlite3_column_type(stmt, i)) {
        case SQLITE_INTEGER:
        case SQLITE_FLOAT:
          value = m._sqlite3_column_double(stmt, i);
          break;
        case SQLITE_TEXT: {
          const p = m._sqlite3_column_text(stmt, i);
          const n = m._sqlite3_column_bytes(stmt, i);
          value = this.#decoder.decode(m.HEAPU8.subarray(p, p + n));
          break;
        }
        case SQLITE_BLOB: {
          const p = m._sqlite3_column_blob(stmt, i);
          const n = m._sqlite3_column_bytes(stmt, i);
          value = m.HEAPU8.slice(p, p + n);
          break;
        }
        default:
          value = null;
      }
      row[columns[i]!] = value;
    }
    return row;
  }

  #check(rc: number): void {
    if (rc !== 0) throw this.#error(rc);
  }

  #error(rc: number): Error {
    const m = this.#m;
    const p = m._sqlite3_errmsg(this.#db);
    let end = p;
    while (m.HEAPU8[end] !== 0) end++;
    const error = new Error(this.#decoder.decode(m.HEAPU8.subarray(p, end))) as Error & { code: number };
    error.code = rc;
    return error;
  }
}
