/**
 * The engine's side of the `opfs-lent` store: a `LentStore` keeps the `Store` contract (types.ts)
 * while every SQL statement runs in the dedicated worker a tab lends the SharedWorker
 * (`serveLentStore`, server.ts), over a MessagePort; the messages are wire.ts's.
 *
 * Invariants:
 * - one job at a time, in request order (the commit queue every store kind uses, queue.ts): a
 *   commit's callback runs in the caller's worker only after the previous job settled, so nothing it
 *   reads is stale;
 * - statements without rows (`run`) are buffered and travel with the next statement that returns
 *   rows or with the end of the job, so a commit whose callback only writes costs one round trip.
 *   A failing statement therefore surfaces at the next `all`/`get` or at the end of the callback
 *   (the server refuses to commit past it);
 * - a commit's promise resolves only after the server's COMMIT returned; a reply lost with the port
 *   (the lending tab closed) rejects with StoreClosed unless `relend` gives a new lender, and the
 *   engine recovers from what the store holds, as after a crash: an unacknowledged commit may or may
 *   not be stored, an acknowledged one always is;
 * - every reply is checked on arrival (wire.ts `isReply`); one that is not a reply is ignored;
 * - a statement's text crosses once per port: the client numbers each text it sends (up to
 *   MAX_STATEMENTS of them, each up to MAX_CACHED_TEXT long), the first step sends the number with
 *   the text, later ones the number alone. A new lender starts with no numbers (the client forgets
 *   its own at the handover), and what a handover sends again is numbered anew;
 * - the fault points, the stats and StoreClosed/StoreFailed/StoreOpenError keep their meaning: they
 *   are the client's (a hook is a function, it cannot cross a port); errors cross typed.
 */
import { type QueuedJob, QueuedStore, storeFailure } from "../queue.ts";
import {
  type Row,
  type Schema,
  type Sql,
  type SqlValue,
  type Store,
  StoreClosed,
  StoreFailed,
  StoreOpenError,
} from "../types.ts";
import {
  fromWire,
  isReply,
  type JobRequest,
  type LentOk,
  type LentOpenParts,
  type LentPort,
  type LentReply,
  type LentRequest,
  type LentStep,
  type LentWireStep,
  MAX_CACHED_TEXT,
  MAX_STATEMENTS,
  SEQ_MODULUS,
} from "./wire.ts";

/** The stored sequence number (wire.ts SEQ_MODULUS). */
const READ_SEQ = "PRAGMA application_id";

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

type ClientJob = QueuedJob<"commit" | "read">;

/** A job's message as the client keeps it: each step with its text (numbered only when posted). */
type ClientJobMessage = Omit<JobRequest, "id" | "steps"> & { steps: LentStep[] };
type Outgoing = DistributiveOmit<Exclude<LentRequest, JobRequest>, "id"> | ClientJobMessage;
type Ok = LentOk;

/** A message of the job in flight, kept until the job settles: what a new lender is sent again. */
interface Logged {
  readonly message: ClientJobMessage;
  /** The reply it got (rows, or the error), once it came. */
  reply: LentReply | undefined;
  settle(reply: LentReply): void;
  fail(error: Error): void;
}

export interface LentStoreOptions {
  /** The port to the lent worker (which runs `serveLentStore`). */
  port: LentPort;
  /** The store's name (the opfs file `stores/<name>.db` over there). */
  name: string;
  /**
   * A port to another lent worker, when this one is lost (its tab closed): the store opens there and
   * the job in flight goes on (see `LentStore`). Without it a lost lender kills the store.
   */
  relend?: (reason: string) => Promise<LentPort>;
  /**
   * Told when the lent worker answered the first open, with when it reached each step of it (the
   * engine's timeline stamps them).
   */
  opened?: (parts: LentOpenParts | undefined) => void;
}

/** Open the store a lent worker serves on `options.port`. Rejects with the server's typed error. */
export async function openLentStore(options: LentStoreOptions): Promise<LentStore> {
  const store = new LentStore(options);
  try {
    await store.open();
  } catch (error) {
    store.kill("the lent store did not open");
    throw error instanceof StoreClosed
      ? new StoreOpenError(error.message, "unknown", "Reload the page.")
      : error;
  }
  return store;
}

/** What a handover to a new lender cost, for the bench and the tests. */
export interface Relent {
  readonly reason: string;
  /** From noticing the loss to the job in flight going on over the new port, in ms. */
  readonly pauseMs: number;
  /** The commit in flight was found stored (its reply was lost) rather than sent again. */
  readonly foundStored: boolean;
  /** Messages of the job in flight sent again. */
  readonly replayed: number;
}

/**
 * The engine's handle on a lent store. When the lender is lost and `relend` gives another port, the
 * store is opened over there (the same file: the dead worker's handles went with it, and its open
 * transaction rolled back from the journal), the owner epoch moves again, and the job in flight goes
 * on: a commit whose COMMIT was sent is looked up by its sequence number (stored: it resolves as it
 * was; not stored: sent again); any other job's messages are sent again in order, each reply checked
 * against the one its callback already saw (a difference fails the store: it must not guess).
 * Everything queued meanwhile waits; the callbacks never notice beyond the pause.
 */
export class LentStore extends QueuedStore<ClientJob["kind"]> implements Store {
  readonly kind = "opfs-lent" as const;
  readonly name: string;
  schemaVersion = 0;
  /** Each handover to a new lender, in order. */
  readonly relent: Relent[] = [];
  /**
   * Messages sent whose answer was awaited: each is a round trip to the lent worker (a test counts
   * them; messages sent without awaiting an answer, such as a read's end, are not).
   */
  roundTrips = 0;
  #port: LentPort;
  readonly #relendPort: LentStoreOptions["relend"];
  #opened: ((parts: LentOpenParts | undefined) => void) | undefined;
  /** Bumped with each port: events of an old port are ignored. */
  #generation = 0;
  readonly #pending = new Map<number, { resolve(r: LentReply): void; reject(e: Error): void }>();
  #nextId = 0;
  #nextJob = 0;
  #explicitClose = false;
  readonly #lost: Array<(reason: string) => void> = [];
  #schema: Schema | undefined;
  #fenced = false;
  /** The last acknowledged commit's sequence number (as stored). */
  #committedSeq = 0;
  /** The job in flight: its messages so far, and its sequence number when it commits. */
  #log: Logged[] = [];
  #jobSeq: number | undefined;
  /** While a new lender is being opened: posts wait here. */
  #relending: Promise<void> | undefined;
  /** Set at once when a handover starts (before `#relending` exists). */
  #handingOver = false;
  /** The statement texts the current port numbered (see the wire's invariants). */
  readonly #statementIds = new Map<string, number>();
  #nextStatement = 0;

  constructor(options: LentStoreOptions) {
    // The jobs, one at a time in request order: each job's callback runs here, its SQL over there.
    super(options.name);
    this.name = options.name;
    this.#relendPort = options.relend;
    this.#opened = options.opened;
    this.#port = options.port;
    this.#attach(options.port);
  }

  protected async runJob(job: ClientJob): Promise<void> {
    this.#log = [];
    this.#jobSeq = job.kind === "commit" ? (this.#committedSeq + 1) % SEQ_MODULUS : undefined;
    try {
      await this.#run(job);
    } finally {
      this.#log = [];
    }
  }

  #attach(port: LentPort): void {
    const generation = ++this.#generation;
    // A new lender knows no statement numbers: texts cross again, numbered anew.
    this.#statementIds.clear();
    this.#nextStatement = 0;
    port.addEventListener("message", (event) => {
      if (generation === this.#generation) this.#onReply(event.data);
    });
    port.addEventListener("close", () => {
      if (generation === this.#generation) this.lenderGone("the worker lending this store is gone");
    });
    port.start?.();
  }

  /** Open over the current port: the store, its sequence number. */
  async open(): Promise<void> {
    const opened = await this.#send({ t: "open", name: this.name });
    this.#opened?.(opened.parts);
    this.#opened = undefined;
    this.schemaVersion = opened.schemaVersion ?? 0;
    if (this.#schema) {
      await this.#send({
        t: "migrate",
        migrations: [...this.#schema.migrations],
        epoch: { read: this.#schema.epoch.read, bump: this.#schema.epoch.bump },
      });
      this.schemaVersion = this.#schema.migrations.length;
    }
    if (this.#fenced) await this.#send({ t: "fence" });
    this.#committedSeq = await this.#readSeq();
  }

  async #readSeq(): Promise<number> {
    const reply = await this.#send({
      t: "job",
      job: ++this.#nextJob,
      begin: "read",
      steps: [{ sql: READ_SEQ, rows: "get" }],
      end: "done",
    });
    const value = reply.rows?.[0] ? Object.values(reply.rows[0])[0] : 0;
    return Number(value ?? 0);
  }

  /** Hear when the store ends (closed, killed, or lost for good with no new lender): once, with the reason. */
  onEnd(listener: (reason: string) => void): void {
    this.#lost.push(listener);
  }

  /** Post `request` on the current port (an id added); resolves with the reply, ok or not. */
  #post(request: Outgoing): Promise<LentReply> {
    if (this.closed) return Promise.reject(new StoreClosed(`store ${this.name} is closed`));
    const id = ++this.#nextId;
    return new Promise((resolve, reject) => {
      let wire: LentRequest;
      let settle: (reply: LentReply) => void = resolve;
      if (request.t === "job") {
        const numbered: string[] = [];
        wire = this.#wireJob(request, id, numbered);
        // Refused at the door, the message numbered nothing over there: those texts cross again.
        if (numbered.length > 0)
          settle = (reply) => {
            if (!reply.ok && reply.error.name === "LentBadRequest") this.#forget(numbered);
            resolve(reply);
          };
      } else wire = { ...request, id };
      this.#pending.set(id, { resolve: settle, reject });
      try {
        this.#port.postMessage(wire);
      } catch (error) {
        this.#pending.delete(id);
        reject(error instanceof Error ? error : new Error(String(error)));
      }
    });
  }

  /** Post and require an ok reply (its error rebuilt typed otherwise). */
  async #send(request: Outgoing): Promise<Ok> {
    this.roundTrips++;
    const reply = await this.#post(request);
    if (!reply.ok) throw fromWire(reply.error);
    return reply;
  }

  /** A message of the job in flight: logged, held while a new lender opens. */
  async sendJob(message: ClientJobMessage): Promise<Ok> {
    while (this.#relending) await this.#relending;
    this.roundTrips++;
    const reply = await new Promise<LentReply>((resolve, reject) => {
      const entry: Logged = { message, reply: undefined, settle: resolve, fail: reject };
      this.#log.push(entry);
      this.#post(message).then(
        (r) => {
          entry.reply = r;
          resolve(r);
        },
        // A lost port leaves the entry to the handover (it settles it), unless the store is dead.
        (error: Error) => {
          if (!this.#handingOver) reject(error);
        },
      );
    });
    if (!reply.ok) throw fromWire(reply.error);
    return reply;
  }

  /**
   * A job's message as it crosses the current port: its id, each step's text numbered (the number
   * alone once this port has it). Built when posted, not when the callback queued the step: a
   * message held through a handover, or sent again after one, goes out numbered for the new port.
   */
  #wireJob(message: ClientJobMessage, id: number, numbered: string[]): JobRequest {
    const steps: LentWireStep[] = new Array(message.steps.length);
    for (let i = 0; i < steps.length; i++) {
      const { sql, params, rows } = message.steps[i]!;
      const step: LentWireStep = {};
      const s = this.#statementIds.get(sql);
      if (s !== undefined) step.s = s;
      else {
        step.sql = sql;
        if (this.#nextStatement < MAX_STATEMENTS && sql.length <= MAX_CACHED_TEXT) {
          step.s = this.#nextStatement++;
          this.#statementIds.set(sql, step.s);
          numbered.push(sql);
        }
      }
      if (params) step.params = params;
      if (rows) step.rows = rows;
      steps[i] = step;
    }
    const wire: JobRequest = { t: "job", id, job: message.job, steps };
    if (message.begin) wire.begin = message.begin;
    if (message.end) wire.end = message.end;
    if (message.seq !== undefined) wire.seq = message.seq;
    if (message.each) wire.each = true;
    return wire;
  }

  /** Forget the numbers of `texts` (a later step sends each text again, under a new number). */
  #forget(texts: string[]): void {
    for (const sql of texts) this.#statementIds.delete(sql);
  }

  /** Post with no answer awaited (a read's end, the fence): nothing depends on it but order. */
  sendQuietly(request: Outgoing): void {
    void this.#post(request).catch(() => undefined);
  }

  #onReply(data: unknown): void {
    if (!isReply(data)) return; // Not ours: nothing waits for it.
    const waiting = this.#pending.get(data.id);
    if (!waiting) return;
    this.#pending.delete(data.id);
    waiting.resolve(data);
  }

  async migrate(schema: Schema): Promise<void> {
    try {
      const reply = await this.#send({
        t: "migrate",
        migrations: [...schema.migrations],
        epoch: { read: schema.epoch.read, bump: schema.epoch.bump },
      });
      this.#schema = schema;
      this.schemaVersion = reply.schemaVersion ?? schema.migrations.length;
    } catch (error) {
      await this.close().catch(() => undefined);
      throw error;
    }
  }

  /** The bytes of wasm memory the store holds over there, in the lent worker (for the benches). */
  async wasmMemoryBytes(): Promise<number> {
    const reply = await this.#send({ t: "memory" });
    return reply.wasmBytes ?? 0;
  }

  /** The owner epoch moves in the next transaction over there (line.ts `fenceOnFirstCommit`), and again at each new lender. */
  fenceOnFirstCommit(): void {
    this.#fenced = true;
    this.sendQuietly({ t: "fence" });
  }

  commit<T>(work: (sql: Sql) => Promise<T> | T): Promise<T> {
    return this.queue.enqueue("commit", work);
  }

  read<T>(work: (sql: Sql) => Promise<T> | T): Promise<T> {
    return this.queue.enqueue("read", work);
  }

  close(): Promise<void> {
    if (!this.queue.closing) this.#explicitClose = true;
    // Every job admitted settles first (and a handover in progress ends); then the worker closes.
    return this.queue.close(async () => {
      while (this.#relending) await this.#relending;
      if (this.closed) return;
      try {
        await this.#send({ t: "close" });
      } catch {
        // Lost already: nothing is open over there.
      }
      this.#failPending(new StoreClosed(`store ${this.name} is closed`));
      this.#port.close();
      for (const listener of this.#lost.splice(0)) listener("closed");
    });
  }

  /** Stop serving at once (the crash simulation); the server rolls back what is open and closes. */
  kill(reason = "store died"): void {
    if (this.closed) return;
    try {
      this.#port.postMessage({ t: "kill", id: ++this.#nextId, reason });
    } catch {
      // Gone already.
    }
    this.#die(reason);
  }

  /**
   * The lender is gone (its port closed, or its tab's lock was granted): hand the store to a new
   * lender when `relend` gives one, else every call rejects with StoreClosed.
   */
  lenderGone(reason: string): void {
    if (this.closed || this.#handingOver) return;
    if (!this.#relendPort || this.#explicitClose) {
      this.#die(reason);
      return;
    }
    const started = performance.now();
    const relendPort = this.#relendPort;
    this.#handingOver = true;
    this.#relending = (async () => {
      this.#generation++; // the old port's late events are ignored from now on
      // Replies the old port owes never come: the job in flight's are settled below; the rest
      // (a read's end, the fence) were answers nobody waits for.
      const stale = [...this.#pending.values()];
      this.#pending.clear();
      for (const waiting of stale) waiting.reject(new StoreClosed(reason));
      try {
        this.#port.close();
      } catch {
        // Closed already.
      }
      this.#port = await relendPort(reason);
      this.#attach(this.#port);
      const stored = this.#committedSeq;
      await this.open();
      const log = this.#log;
      const last = log.at(-1);
      let foundStored = false;
      if (last && last.reply === undefined && last.message.end === "commit") {
        // Its COMMIT went out: stored or not, the sequence number says.
        if (this.#committedSeq === last.message.seq) foundStored = true;
        else if (this.#committedSeq !== stored)
          throw new StoreFailed("the lent store holds commits this engine did not make");
      }
      if (foundStored) last!.settle({ id: 0, ok: true });
      else
        for (const entry of log) {
          const reply = await this.#post(entry.message);
          if (entry.reply === undefined) entry.settle(reply);
          else if (!sameReply(entry.reply, reply))
            throw new StoreFailed(
              "the job in flight read differently from the new lender; the engine must reopen",
            );
        }
      this.relent.push({
        reason,
        pauseMs: performance.now() - started,
        foundStored,
        replayed: foundStored ? 0 : log.length,
      });
    })().then(
      () => {
        this.#relending = undefined;
        this.#handingOver = false;
      },
      (error: unknown) => {
        this.#relending = undefined;
        this.#handingOver = false;
        this.#die(
          `${reason}; no new lender took it (${error instanceof Error ? error.message : String(error)})`,
        );
      },
    );
  }

  /** Dead for good: every call rejects with StoreClosed. */
  #die(reason: string): void {
    if (this.closed) return;
    this.queue.kill(reason);
    const error = new StoreClosed(reason);
    this.#failPending(error);
    for (const entry of this.#log.splice(0)) if (entry.reply === undefined) entry.fail(error);
    try {
      this.#port.close();
    } catch {
      // Closed already.
    }
    for (const listener of this.#lost.splice(0)) listener(reason);
  }

  #failPending(error: Error): void {
    const pending = [...this.#pending.values()];
    this.#pending.clear();
    for (const waiting of pending) waiting.reject(error);
  }

  /** A read job: its statements cross as `RemoteTransaction` sends them (a batch as one message). */
  async #read(job: ClientJob): Promise<void> {
    const tx = new RemoteTransaction(this, ++this.#nextJob, "read", undefined);
    await this.queue.read(job, tx.sql, {
      end: () => tx.end("done"),
      failed: async (error) => {
        await tx.end("rollback").catch(() => undefined);
        return this.closed && !(error instanceof StoreClosed) ? new StoreClosed("store closed") : error;
      },
    });
  }

  async #run(job: ClientJob): Promise<void> {
    if (job.kind === "read") return this.#read(job);
    const tx = new RemoteTransaction(this, ++this.#nextJob, job.kind, this.#jobSeq);
    const closed = (error: unknown, message: string) =>
      this.closed && !(error instanceof StoreClosed) ? new StoreClosed(message) : error;
    if (!this.queue.begin(job)) return;
    let value: unknown;
    try {
      value = await job.work(tx.sql);
    } catch (error) {
      // Its own failure: none of its writes stay.
      if (!this.closed) await tx.end("rollback").catch(() => undefined);
      job.reject(closed(error, "store closed"));
      return;
    }
    try {
      this.queue.point("after-callback");
      this.queue.point("before-commit");
    } catch (error) {
      if (!this.closed) await tx.end("rollback").catch(() => undefined);
      job.reject(this.closed ? new StoreClosed("store died before COMMIT") : storeFailure(error));
      return;
    }
    try {
      if (await tx.end("commit")) this.#committedSeq = this.#jobSeq!;
    } catch (error) {
      // A statement's own error (buffered) passes as it is, as line.ts passes a callback's; a
      // failure of the store is typed.
      job.reject(closed(error, "store died before COMMIT"));
      return;
    }
    this.queue.committed(job, value);
  }
}

/**
 * One job's statements as they cross: `run` buffered, `all`/`get` and the end sent with the buffer.
 * A read also offers `batch` (`Sql.batch`: statements that do not depend on each other's results):
 * one round trip for all of them, marked `each` and answered with every one's rows.
 */
class RemoteTransaction {
  readonly sql: Sql;
  #steps: LentStep[] = [];
  #begun = false;
  #ended = false;

  constructor(
    readonly store: LentStore,
    readonly job: number,
    readonly kind: "commit" | "read",
    readonly seq: number | undefined,
  ) {
    this.sql = {
      run: async (sql, params) => {
        this.#open();
        this.#steps.push(step(sql, params));
      },
      all: async (sql, params) => (await this.#flush([step(sql, params, "all")], false)).rows ?? [],
      get: async (sql, params) => (await this.#flush([step(sql, params, "get")], false)).rows?.[0],
    };
    if (kind === "read") {
      this.sql.batch = async (queries) => {
        const reply = await this.#flush(
          queries.map((q) => step(q.sql, q.params, "all")),
          true,
        );
        const results = reply.results ?? [];
        if (results.length !== queries.length)
          throw new StoreFailed("the lent store answered a batch with a different number of results");
        return results;
      };
    }
  }

  #open(): void {
    if (this.store.closed) throw new StoreClosed(`store ${this.store.name} is closed`);
    if (this.#ended) throw new StoreFailed(`this ${this.kind === "read" ? "read" : "transaction"} is over`);
  }

  async #flush(last: LentStep[], each: boolean): Promise<Ok> {
    this.#open();
    this.#steps.push(...last);
    const message = this.#message();
    if (each) message.each = true;
    return this.store.sendJob(message);
  }

  #message(end?: "commit" | "rollback" | "done"): ClientJobMessage {
    const message: ClientJobMessage = { t: "job", job: this.job, steps: this.#steps };
    this.#steps = [];
    if (!this.#begun) message.begin = this.kind;
    this.#begun = true;
    if (end) message.end = end;
    if (end === "commit" && this.seq !== undefined) message.seq = this.seq;
    return message;
  }

  /**
   * Finish the job over there: commit (resolves after COMMIT), roll back, or end a read. True when a
   * COMMIT was sent and acknowledged (its sequence number is now the stored one).
   */
  async end(how: "commit" | "rollback" | "done"): Promise<boolean> {
    if (this.#ended) return false;
    this.#ended = true;
    // Nothing was sent: nothing is open over there (a commit of no statement commits nothing).
    if (!this.#begun && (how === "rollback" || this.#steps.length === 0)) return false;
    if (how === "rollback") this.#steps = [];
    const message = this.#message(how);
    // A read with nothing buffered needs no answer: the next job queues behind it over there.
    if (how === "done" && message.steps.length === 0) {
      this.store.sendQuietly(message);
      return false;
    }
    await this.store.sendJob(message);
    return how === "commit";
  }
}

function step(sql: string, params: readonly SqlValue[] | undefined, rows?: "all" | "get"): LentStep {
  // Copied now: the message is posted later, and a caller may reuse its array.
  const copy =
    params && params.length > 0 ? params.map((p) => (p instanceof Uint8Array ? p.slice() : p)) : undefined;
  return { sql, ...(copy ? { params: copy } : {}), ...(rows ? { rows } : {}) };
}

/** Two replies to the same message carry the same outcome and rows. */
function sameReply(a: LentReply, b: LentReply): boolean {
  if (a.ok !== b.ok) return false;
  if (!a.ok || !b.ok) return !a.ok && !b.ok && a.error.message === b.error.message;
  const ea = a.results ?? [];
  const eb = b.results ?? [];
  if (ea.length !== eb.length || ea.some((rows, i) => !sameRows(rows, eb[i]!))) return false;
  return sameRows(a.rows ?? [], b.rows ?? []);
}

function sameRows(ra: readonly Row[], rb: readonly Row[]): boolean {
  if (ra.length !== rb.length) return false;
  for (let i = 0; i < ra.length; i++) {
    const x = ra[i]!;
    const y = rb[i]!;
    const keys = Object.keys(x);
    if (keys.length !== Object.keys(y).length) return false;
    for (const key of keys) if (!sameValue(x[key], y[key])) return false;
  }
  return true;
}

function sameValue(a: SqlValue | undefined, b: SqlValue | undefined): boolean {
  if (a instanceof Uint8Array && b instanceof Uint8Array)
    return a.length === b.length && a.every((v, i) => v === b[i]);
  return a === b;
}
