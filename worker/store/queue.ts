/**
 * The commit queue: the one FIFO every store kind serves its jobs on (the wa-sqlite line, line.ts;
 * the Durable Object store, server/do-store.ts; the engine's side of a lent store, lent.ts). Each
 * store says how one job runs (a transaction, a read, a migration); the queue owns the order, the
 * closing, the stats and the fault points. Invariants:
 * - one job at a time, in request order: a job starts only once the one before it settled;
 * - a job is settled by its runner, once; a runner that throws rejects that job alone and the next
 *   job runs (one job's failure never leaks into the next);
 * - once closing or closed, every new job is refused with StoreClosed; `close` lets every job
 *   admitted before it settle, then runs the store's own finish (release the connection) once;
 * - `kill` stops at once, as if the process died: every queued job rejects with StoreClosed; the job
 *   running ends as its runner decides (each store's statements refuse once `closed` is set);
 * - between two jobs the store may give the event loop a turn (`between`), so a store that never
 *   awaits I/O does not starve the ports;
 * - the fault points carry the number of the transaction they belong to (after-commit: the one just
 *   committed), the same numbering on every store kind, so the crash sweeps drive them all alike.
 * Schema-agnostic and platform-free: no SQL and no platform API here.
 */
import { errorMessage } from "./errors.ts";
import {
  type FaultHook,
  type FaultPoint,
  type Sql,
  StoreClosed,
  StoreFailed,
  type StoreStats,
} from "./types.ts";

/** A job on the queue: what it runs, and how its caller hears back. */
export interface QueuedJob<K extends string> {
  readonly kind: K;
  readonly work: (sql: Sql) => unknown;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

export interface CommitQueueOptions<K extends string> {
  /** The store's name, for the refusals' messages. */
  readonly name: string;
  /** Run one job and settle it (a throw rejects the job). */
  run(job: QueuedJob<K>): Promise<void> | void;
  /**
   * After `job` settled, with more jobs queued: a promise to wait for before the next one (a turn
   * of the event loop), or undefined to go on at once.
   */
  between?(job: QueuedJob<K>): Promise<void> | undefined;
}

export class CommitQueue<K extends string> {
  readonly stats: StoreStats = { transactions: 0, commits: 0, reads: 0 };
  readonly #name: string;
  readonly #run: CommitQueueOptions<K>["run"];
  readonly #between: CommitQueueOptions<K>["between"];
  #queue: Array<QueuedJob<K>> = [];
  #running = false;
  #closed = false;
  #closing: Promise<void> | undefined;
  #idle: Array<() => void> = [];
  #fault: FaultHook | undefined;

  constructor(options: CommitQueueOptions<K>) {
    this.#name = options.name;
    this.#run = options.run;
    this.#between = options.between;
  }

  /** Closed or killed: nothing more is served. */
  get closed(): boolean {
    return this.#closed;
  }

  /** `close` or `kill` was called: new jobs are refused. */
  get closing(): boolean {
    return this.#closing !== undefined || this.#closed;
  }

  /** Queue `work` as a job of `kind`; settles as its runner settles it. */
  enqueue<T>(kind: K, work: (sql: Sql) => Promise<T> | T): Promise<T> {
    if (this.closing) return Promise.reject(new StoreClosed(`store ${this.#name} is closed`));
    return new Promise<T>((resolve, reject) => {
      this.#queue.push({ kind, work, resolve: resolve as (value: unknown) => void, reject });
      if (!this.#running) {
        this.#running = true;
        queueMicrotask(() => void this.#drain());
      }
    });
  }

  setFaultHook(hook: FaultHook | undefined): void {
    this.#fault = hook;
  }

  /** Fire the fault hook at `point` (it may throw: the caller stops there). */
  point(point: FaultPoint): void {
    const fault = this.#fault;
    if (!fault) return;
    const transaction = point === "after-commit" ? this.stats.transactions : this.stats.transactions + 1;
    fault(point, { transaction });
  }

  /**
   * Fire before-begin for a commit job; when the hook throws, reject the job (StoreClosed once the
   * queue is closed, else a store failure) and answer false: nothing ran, the queue goes on.
   */
  begin(job: QueuedJob<K>): boolean {
    try {
      this.point("before-begin");
      return true;
    } catch (error) {
      const closed = error instanceof StoreClosed ? error : new StoreClosed("store closed");
      job.reject(this.#closed ? closed : storeFailure(error));
      return false;
    }
  }

  /**
   * A commit's transaction is stored: count it, fire after-commit, and resolve the job with `value`
   * (or reject it with the hook's error: the world stopped right after COMMIT, nobody hears back).
   */
  committed(job: QueuedJob<K>, value: unknown): void {
    this.stats.transactions++;
    this.stats.commits++;
    try {
      this.point("after-commit");
    } catch (error) {
      job.reject(error);
      return;
    }
    job.resolve(value);
  }

  /**
   * Serve a read job on `sql`: before-read, its work, then `end` (a store that must close the read
   * over there); a failure rejects it with `failed(error)`'s answer when given, else the error.
   */
  async read(
    job: QueuedJob<K>,
    sql: Sql,
    options: { end?(): Promise<unknown>; failed?(error: unknown): Promise<unknown> } = {},
  ): Promise<void> {
    try {
      this.point("before-read");
      const value = await job.work(sql);
      if (options.end) await options.end();
      this.stats.reads++;
      job.resolve(value);
    } catch (error) {
      job.reject(options.failed ? await options.failed(error) : error);
    }
  }

  /**
   * Refuse new jobs, let every admitted one settle, then run `finish` (release what the store holds)
   * and mark the queue closed. Called again, answers the same promise.
   */
  close(finish: () => Promise<void> | void = () => undefined): Promise<void> {
    this.#closing ??= (async () => {
      try {
        await this.#settled();
        await finish();
      } finally {
        this.#closed = true;
      }
    })();
    return this.#closing;
  }

  /** Stop at once: closed, and every queued job rejects with StoreClosed(reason). */
  kill(reason: string): void {
    this.#closed = true;
    this.#closing ??= Promise.resolve();
    const error = new StoreClosed(reason);
    for (const job of this.#queue.splice(0)) job.reject(error);
  }

  /** Resolves once no job runs and none is queued. */
  #settled(): Promise<void> {
    if (!this.#running && this.#queue.length === 0) return Promise.resolve();
    return new Promise<void>((resolve) => this.#idle.push(resolve));
  }

  async #drain(): Promise<void> {
    try {
      while (this.#queue.length > 0 && !this.#closed) {
        const job = this.#queue.shift()!;
        try {
          await this.#run(job);
        } catch (error) {
          job.reject(error);
        }
        if (this.#queue.length > 0 && this.#between) {
          const pause = this.#between(job);
          if (pause) await pause;
        }
      }
    } finally {
      this.#running = false;
      if (this.#queue.length > 0 && !this.#closed) {
        this.#running = true;
        queueMicrotask(() => void this.#drain());
      } else {
        for (const resolve of this.#idle.splice(0)) resolve();
      }
    }
  }
}

/**
 * A store served on a commit queue: the queue's state as the `Store` contract shows it (closed, the
 * stats, the fault hook). A subclass says how one job runs, and may pause between two.
 */
export abstract class QueuedStore<K extends string> {
  protected readonly queue: CommitQueue<K>;

  constructor(name: string) {
    this.queue = new CommitQueue<K>({
      name,
      run: (job) => this.runJob(job),
      between: (job) => this.between(job),
    });
  }

  /** Run one job and settle it. */
  protected abstract runJob(job: QueuedJob<K>): Promise<void>;

  /** After `job`, with more queued: a turn to wait for, or undefined (the default) to go on. */
  protected between(_job: QueuedJob<K>): Promise<void> | undefined {
    return undefined;
  }

  get closed(): boolean {
    return this.queue.closed;
  }

  get stats(): StoreStats {
    return this.queue.stats;
  }

  setFaultHook(hook: FaultHook | undefined): void {
    this.queue.setFaultHook(hook);
  }
}

/** A store failure as the engine must take it: StoreClosed and StoreFailed as they are, anything else as StoreFailed. */
export function storeFailure(error: unknown): Error {
  if (error instanceof StoreClosed || error instanceof StoreFailed) return error;
  const failure = new StoreFailed(`transaction failed: ${errorMessage(error)}`);
  (failure as { cause?: unknown }).cause = error;
  return failure;
}

/** Give the event loop a turn: setImmediate in Node, a message-channel hop in workers. */
export const yieldToEventLoop: () => Promise<void> = (() => {
  const g = globalThis as { setImmediate?: (f: () => void) => void };
  if (typeof g.setImmediate === "function") {
    const si = g.setImmediate;
    return () => new Promise<void>((r) => si(r));
  }
  if (typeof MessageChannel !== "undefined") {
    const channel = new MessageChannel();
    const waiting: Array<() => void> = [];
    channel.port1.onmessage = () => waiting.shift()?.();
    return () =>
      new Promise<void>((r) => {
        waiting.push(r);
        channel.port2.postMessage(0);
      });
  }
  return () => new Promise<void>((r) => setTimeout(r, 0));
})();
