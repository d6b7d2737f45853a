/**
 * The lent store's wire: the messages between the engine's `LentStore` (client.ts, in the
 * SharedWorker) and `serveLentStore` (server.ts, in the dedicated worker a tab lends), their limits,
 * and the checks every message passes on arrival. Both ends import it; it imports no schema library,
 * so the SharedWorker's first module on the way to a tab's hello (worker/browser/store-lenders.ts)
 * does not evaluate one.
 *
 * Invariants:
 * - every message is checked on arrival, both ways, by hand (`isRequest`, `isReply`) to the shapes
 *   written below as types: the test keeps them as TypeBox schemas and checks that these functions
 *   agree with them on generated messages of every kind (tests/unit/store/lent-wire.test.ts). The
 *   rules are a schema's: no key beyond the listed ones, an absent optional key and one set to
 *   undefined are alike, ids are integers >= 0, a string's length counts code points. One rule is
 *   stricter than a schema's: an object must be plain (a structured clone's, or prototype-less), where
 *   a schema takes any object that is not an array;
 * - a statement's text is numbered per port (`s`, below MAX_STATEMENTS; texts longer than
 *   MAX_CACHED_TEXT never are): a step carries its text, its number, or both (the text numbered so
 *   from now on), never neither;
 * - each commit's sequence number (below SEQ_MODULUS) travels with its COMMIT and is stored in the
 *   same transaction, so a client that lost its lender can tell whether that commit is stored;
 * - errors cross typed (`toWire`/`fromWire`): a Store* error comes back as the same class, any other
 *   as an Error with its name and message.
 */
import { type SqlValue, StoreClosed, StoreFailed, StoreOpenError } from "../types.ts";

/**
 * Each commit's sequence number is written in its own transaction as the database header's
 * `application_id` (page 1, which every commit rewrites anyway; nothing else here uses the field), so
 * a client that lost its lender can tell whether the commit it was waiting for is stored.
 */
export const SEQ_MODULUS = 2 ** 31;

/** Statement numbers per port: at most this many texts are kept (later ones cross as text each time). */
export const MAX_STATEMENTS = 2048;
/** Longer texts are never numbered (a statement with its values inlined is seldom run again). */
export const MAX_CACHED_TEXT = 8000;
/** A step's text, in code points. */
export const MAX_SQL_TEXT = 100_000;
/** A step's parameters. */
export const MAX_PARAMS = 10_000;
/** A job message's steps. */
export const MAX_STEPS = 100_000;
/** A store's name, in code points (at least 1). */
export const MAX_NAME = 64;
/** A migrate message's migrations. */
export const MAX_MIGRATIONS = 10_000;
/** A kill's reason, in code points. */
export const MAX_KILL_REASON = 1000;

// ---- the messages -------------------------------------------------------------------------------

/**
 * One statement of a job: its text (`sql`), its number (`s`, for a text this port numbered before),
 * or both (the text numbered `s` from now on); one of the two at least.
 */
export interface LentWireStep {
  sql?: string;
  s?: number;
  params?: SqlValue[];
  rows?: "all" | "get";
}
/** A step with its text: as the client builds it, and as the server runs it once the number is looked up. */
export type LentStep = LentWireStep & { sql: string };

export interface OpenRequest {
  t: "open";
  id: number;
  name: string;
}
export interface MigrateRequest {
  t: "migrate";
  id: number;
  migrations: string[];
  epoch: { read: string; bump: string };
}
export interface JobRequest {
  t: "job";
  id: number;
  job: number;
  begin?: "commit" | "read";
  steps: LentWireStep[];
  end?: "commit" | "rollback" | "done";
  /** With `end: "commit"`: the job's sequence number, stored in the same transaction (SEQ_MODULUS). */
  seq?: number;
  /**
   * A read's batch (`Sql.batch`): the reply carries `results`, the rows of every step that asks
   * for rows, in order, instead of the last one's `rows`. Not with `end`.
   */
  each?: true;
}
/** `fence`, `close`, and `memory` (the bytes of wasm memory the served store holds: the bench's `debug.memory`). */
export interface BareRequest {
  t: "fence" | "close" | "memory";
  id: number;
}
export interface KillRequest {
  t: "kill";
  id: number;
  reason: string;
}
export type LentRequest = OpenRequest | MigrateRequest | JobRequest | BareRequest | KillRequest;

export interface LentError {
  name: string;
  message: string;
  /** A Store* error (StoreClosed, StoreFailed, StoreOpenError), rebuilt typed on the client. */
  store: boolean;
  reason?: string;
  advice?: string;
}
export interface LentOk {
  id: number;
  ok: true;
  rows?: Array<Record<string, SqlValue>>;
  /** The answer to a job message marked `each`: one array of rows per step that asks for rows. */
  results?: Array<Array<Record<string, SqlValue>>>;
  /** Any integer. */
  schemaVersion?: number;
  /** An integer >= 0. */
  wasmBytes?: number;
  /** The answer to `open`: when the lent worker reached each step of it (`LentOpenParts`). */
  parts?: LentOpenParts;
}

/**
 * When the lent worker reached each step of its store's open, in ms since the epoch on its own clock
 * (`performance.timeOrigin + performance.now()`): the recovery bench shows them beside the engine's.
 */
export interface LentOpenParts {
  /** The worker's script ran its first line. */
  readonly scriptAt: number;
  /** The store's wasm compile began (a spare asks first whether another tab is open). */
  readonly compileAt?: number;
  /** The store's wasm was compiled (before the open asked, or inside it). */
  readonly wasmAt?: number;
  /** The engine's `open` arrived. */
  readonly askedAt?: number;
  /** The open's own wasm instance made (a new memory, SQLite's start). */
  readonly instanceAt?: number;
  /** The VFS made (its module here, the OPFS directory and its handles). */
  readonly vfsAt?: number;
  /** SQLite opened the database file. */
  readonly fileAt?: number;
  /** The database was open here (the pragmas set, its schema version read). */
  readonly openedAt?: number;
}
export interface LentRefusal {
  id: number;
  ok: false;
  error: LentError;
}
export type LentReply = LentOk | LentRefusal;

/** The part of a MessagePort both ends use (Node's MessagePort too, for the tests). */
export interface LentPort {
  postMessage(message: unknown): void;
  addEventListener(type: "message", listener: (event: { data: unknown }) => void): void;
  addEventListener(type: "close", listener: () => void): void;
  start?(): void;
  close(): void;
}

/** The server's refusal of a message it did not expect (what is wrong, not the message itself). */
export class LentBadRequest extends Error {
  override readonly name = "LentBadRequest";
}

// ---- the checks ---------------------------------------------------------------------------------

/**
 * A SQL value (a finite number, a string, null, a bigint, bytes). The rows of a reply and the
 * parameters of a job are the bulk of the wire: an interpreted schema check cost about 15 µs per row
 * (1.5 s for a read of 100,000 rows, against 10 ms by hand).
 */
function isSqlValue(v: unknown): boolean {
  return (
    v === null ||
    typeof v === "string" ||
    (typeof v === "number" && Number.isFinite(v)) ||
    typeof v === "bigint" ||
    v instanceof Uint8Array
  );
}

/** An object as a structured clone makes one (or one without a prototype): no array, no class instance. */
function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (typeof v !== "object" || v === null) return false;
  const prototype = Object.getPrototypeOf(v);
  return prototype === Object.prototype || prototype === null;
}

/** Every own key of `data` is one of `keys` (a schema's `additionalProperties: false`). */
function onlyKeys(data: Record<string, unknown>, keys: ReadonlySet<string>): boolean {
  for (const key of Object.keys(data)) if (!keys.has(key)) return false;
  return true;
}

const isId = (v: unknown): v is number => typeof v === "number" && Number.isInteger(v) && v >= 0;

/** Code points of `s` (a surrogate pair is one; a lone surrogate is one), as a schema's string length counts. */
function codePoints(s: string): number {
  let count = s.length;
  for (let i = 0; i < s.length - 1; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        count--;
        i++;
      }
    }
  }
  return count;
}

/** A string of at most `max` code points (counted only when its UTF-16 length is over). */
function isStringUpTo(v: unknown, max: number): v is string {
  return typeof v === "string" && (v.length <= max || codePoints(v) <= max);
}

/** `rows` of a reply: an array of plain objects whose every value is a SQL value. */
function isRows(rows: unknown): boolean {
  if (!Array.isArray(rows)) return false;
  for (const row of rows) {
    if (!isPlainObject(row)) return false;
    for (const key of Object.keys(row)) if (!isSqlValue(row[key])) return false;
  }
  return true;
}

const STEP_KEYS = new Set(["sql", "s", "params", "rows"]);

/** `steps` of a job (`LentWireStep`, the limits included). */
function isSteps(steps: unknown): boolean {
  if (!Array.isArray(steps) || steps.length > MAX_STEPS) return false;
  for (const step of steps) {
    if (!isPlainObject(step) || !onlyKeys(step, STEP_KEYS)) return false;
    const { sql, s, params, rows } = step;
    if (sql === undefined && s === undefined) return false;
    if (sql !== undefined && (!isStringUpTo(sql, MAX_SQL_TEXT) || sql.length < 1)) return false;
    if (s !== undefined && (!isId(s) || s >= MAX_STATEMENTS)) return false;
    if (rows !== undefined && rows !== "all" && rows !== "get") return false;
    if (params !== undefined) {
      if (!Array.isArray(params) || params.length > MAX_PARAMS) return false;
      for (const value of params) if (!isSqlValue(value)) return false;
    }
  }
  return true;
}

const JOB_KEYS = new Set(["t", "id", "job", "begin", "steps", "end", "seq", "each"]);

/** A job's message: every commit sends at least one. */
function isJobRequest(data: Record<string, unknown>): boolean {
  if (!onlyKeys(data, JOB_KEYS)) return false;
  const { id, job, begin, end, seq, each } = data;
  return (
    isId(id) &&
    isId(job) &&
    (each === undefined || each === true) &&
    (begin === undefined || begin === "commit" || begin === "read") &&
    (end === undefined || end === "commit" || end === "rollback" || end === "done") &&
    (seq === undefined || (isId(seq) && seq < SEQ_MODULUS)) &&
    isSteps(data.steps)
  );
}

const BARE_KEYS = new Set(["t", "id"]);
const OPEN_KEYS = new Set(["t", "id", "name"]);
const MIGRATE_KEYS = new Set(["t", "id", "migrations", "epoch"]);
const EPOCH_KEYS = new Set(["read", "bump"]);
const KILL_KEYS = new Set(["t", "id", "reason"]);

function isMigrateRequest(data: Record<string, unknown>): boolean {
  if (!onlyKeys(data, MIGRATE_KEYS) || !isId(data.id)) return false;
  const { migrations, epoch } = data;
  if (!Array.isArray(migrations) || migrations.length > MAX_MIGRATIONS) return false;
  for (const migration of migrations) if (typeof migration !== "string") return false;
  return (
    isPlainObject(epoch) &&
    onlyKeys(epoch, EPOCH_KEYS) &&
    typeof epoch.read === "string" &&
    typeof epoch.bump === "string"
  );
}

/** A request the server serves (`LentRequest`); anything else is refused at its door. */
export function isRequest(data: unknown): data is LentRequest {
  if (!isPlainObject(data)) return false;
  switch (data.t) {
    case "job":
      return isJobRequest(data);
    case "open":
      return (
        onlyKeys(data, OPEN_KEYS) &&
        isId(data.id) &&
        isStringUpTo(data.name, MAX_NAME) &&
        data.name.length >= 1
      );
    case "migrate":
      return isMigrateRequest(data);
    case "fence":
    case "close":
    case "memory":
      return onlyKeys(data, BARE_KEYS) && isId(data.id);
    case "kill":
      return onlyKeys(data, KILL_KEYS) && isId(data.id) && isStringUpTo(data.reason, MAX_KILL_REASON);
    default:
      return false;
  }
}

const OK_KEYS = new Set(["id", "ok", "rows", "results", "schemaVersion", "wasmBytes", "parts"]);
const PART_KEYS = new Set([
  "scriptAt",
  "compileAt",
  "wasmAt",
  "askedAt",
  "instanceAt",
  "vfsAt",
  "fileAt",
  "openedAt",
]);

/** Open parts: only the known steps, each a finite time, `scriptAt` there. */
function isOpenParts(p: unknown): boolean {
  return (
    isPlainObject(p) &&
    onlyKeys(p, PART_KEYS) &&
    Object.values(p).every((v) => typeof v === "number" && Number.isFinite(v)) &&
    typeof p.scriptAt === "number"
  );
}
const REFUSAL_KEYS = new Set(["id", "ok", "error"]);
const ERROR_KEYS = new Set(["name", "message", "store", "reason", "advice"]);

const isOptionalString = (v: unknown): boolean => v === undefined || typeof v === "string";

function isLentError(e: unknown): boolean {
  return (
    isPlainObject(e) &&
    onlyKeys(e, ERROR_KEYS) &&
    typeof e.name === "string" &&
    typeof e.message === "string" &&
    typeof e.store === "boolean" &&
    isOptionalString(e.reason) &&
    isOptionalString(e.advice)
  );
}

/**
 * A reply the client takes (`LentReply`): an ok one (every commit's acknowledgement, every read's
 * rows, a batch's results) or an error one.
 */
export function isReply(data: unknown): data is LentReply {
  if (!isPlainObject(data)) return false;
  if (data.ok === false) return onlyKeys(data, REFUSAL_KEYS) && isId(data.id) && isLentError(data.error);
  if (data.ok !== true || !onlyKeys(data, OK_KEYS)) return false;
  const { id, rows, results, schemaVersion, wasmBytes, parts } = data;
  return (
    isId(id) &&
    (parts === undefined || isOpenParts(parts)) &&
    (schemaVersion === undefined || (typeof schemaVersion === "number" && Number.isInteger(schemaVersion))) &&
    (wasmBytes === undefined || isId(wasmBytes)) &&
    (rows === undefined || isRows(rows)) &&
    (results === undefined || (Array.isArray(results) && results.every(isRows)))
  );
}

// ---- errors across ------------------------------------------------------------------------------

const STORE_OPEN_REASONS = new Set(["quota", "corrupt", "locked", "unsupported", "migration", "unknown"]);

/** An error as it crosses (the server's side). */
export function toWire(error: unknown): LentError {
  const e = error instanceof Error ? error : new Error(String(error));
  const store = e instanceof StoreClosed || e instanceof StoreFailed || e instanceof StoreOpenError;
  return {
    name: e.name,
    message: e.message,
    store,
    ...(e instanceof StoreOpenError ? { reason: e.reason, advice: e.advice } : {}),
  };
}

/** An error as it crossed, typed again (the client's side). */
export function fromWire(e: LentError): Error {
  if (e.store) {
    if (e.name === "StoreClosed") return new StoreClosed(e.message);
    if (e.name === "StoreOpenError" && e.reason && STORE_OPEN_REASONS.has(e.reason))
      return new StoreOpenError(e.message, e.reason as StoreOpenError["reason"], e.advice ?? "");
    return new StoreFailed(e.message);
  }
  const error = new Error(e.message);
  error.name = e.name;
  return error;
}
