/**
 * The lent worker's side of the `opfs-lent` store: a SharedWorker cannot open OPFS sync access
 * handles, so a tab lends it a dedicated worker (worker/entry/lent-store.ts) that opens the opfs store
 * (OPFSCoopSyncVFS) and serves it here to the engine's `LentStore` (client.ts) over a MessagePort;
 * the messages are wire.ts's.
 *
 * Invariants:
 * - every message is checked on arrival (wire.ts `isRequest`); what the server does not expect is
 *   refused with a typed error reply (`LentBadRequest`) and the next message is served;
 * - after any failed statement the server refuses to commit that transaction (it rolls back whole),
 *   so a failure the client buffered can never be committed past;
 * - a COMMIT's reply is sent only after COMMIT returned (synchronous = FULL here), with the commit's
 *   sequence number stored in the same transaction;
 * - the statement texts a client numbered are kept by number for its port only (a new lender starts
 *   with none); a step naming a number never sent here is refused;
 * - the server closes its store when its port closes (the engine is gone) or the client closes or
 *   kills it: a transaction in flight rolls back first, so the file's handle is released for the
 *   next lent worker.
 */
import type { SqliteLine } from "../line.ts";
import { type Row, type Sql, StoreClosed, StoreFailed } from "../types.ts";
import {
  isRequest,
  type JobRequest,
  LentBadRequest,
  type LentOpenParts,
  type LentPort,
  type LentReply,
  type LentStep,
  type LentWireStep,
  toWire,
} from "./wire.ts";

/** A job's message once its steps' texts are looked up (the server's door does it). */
type ServedRequest = Omit<JobRequest, "steps"> & { steps: LentStep[] };

/**
 * Give each step its text: a step with a number and a text numbers that text (`texts[s]`); one with a
 * number alone takes the text numbered so. Answers the first number never numbered here (nothing
 * looked up is then used), else undefined, every step now carrying its `sql`.
 */
function lookUpTexts(steps: LentWireStep[], texts: string[]): number | undefined {
  for (const step of steps) {
    if (step.s === undefined) continue;
    if (step.sql !== undefined) texts[step.s] = step.sql;
    else {
      const sql = texts[step.s];
      if (sql === undefined) return step.s;
      step.sql = sql;
    }
  }
  return undefined;
}

/** Thrown inside a job's callback when the client asked to roll back. */
const ROLLBACK = Symbol("rollback");

interface ServedJob {
  /** Messages of this job not yet taken by its callback. */
  readonly inbox: ServedRequest[];
  wake: (() => void) | undefined;
  /** A statement failed: the transaction may not commit. */
  failed: unknown;
  /** The job ended (or never began): later messages are refused. */
  over: boolean;
  /** The port closed or the client killed the store: the callback throws this. */
  abort: StoreClosed | undefined;
  /** The message whose reply is still owed (at most one: the client waits for each). */
  owed: ServedRequest | undefined;
}

export interface ServeLentOptions {
  /** Open the store this worker lends (the opfs kind in the browser; any kind in the tests). */
  open(name: string): Promise<SqliteLine>;
  /** The bytes of wasm memory the stores of this worker hold (answers `memory`; 0 without it). */
  memory?(): number;
  /** When this worker reached each step of the open, sent with the open's answer (the bench's parts). */
  parts?(): LentOpenParts;
}

/**
 * Serve one client on `port` until the port closes or the client closes the store. Resolves once the
 * store this served is closed (its file released).
 */
export function serveLentStore(port: LentPort, options: ServeLentOptions): Promise<void> {
  let line: SqliteLine | undefined;
  let opening = false;
  const jobs = new Map<number, ServedJob>();
  /** The statement texts this client numbered, by number. */
  const texts: string[] = [];
  let finished: () => void = () => undefined;
  const done = new Promise<void>((resolve) => {
    finished = resolve;
  });
  let ending = false;
  const reply = (message: LentReply) => {
    try {
      port.postMessage(message);
    } catch {
      // The port is gone: nobody waits.
    }
  };
  const fail = (id: number, error: unknown) => reply({ id, ok: false, error: toWire(error) });

  /** Stop every job (their transactions roll back), close the store, release everything. */
  const end = async (reason: string) => {
    if (ending) return;
    ending = true;
    for (const job of jobs.values()) {
      job.abort = new StoreClosed(reason);
      job.wake?.();
    }
    try {
      await line?.close();
    } catch {
      // Closing is best effort: the worker ends anyway.
    }
    finished();
  };

  const runJob = (first: ServedRequest, store: SqliteLine) => {
    const job: ServedJob = {
      inbox: [first],
      wake: undefined,
      failed: undefined,
      over: false,
      abort: undefined,
      owed: undefined,
    };
    jobs.set(first.job, job);
    const next = async (): Promise<ServedRequest> => {
      for (;;) {
        if (job.abort) throw job.abort;
        const message = job.inbox.shift();
        if (message) return message;
        await new Promise<void>((resolve) => {
          job.wake = resolve;
        });
        job.wake = undefined;
      }
    };
    const work = async (sql: Sql): Promise<Row[] | undefined> => {
      for (;;) {
        const message = await next();
        job.owed = message;
        let rows: Row[] | undefined;
        // A read's batch answers every step's rows (`each`); a message ending the job never asks.
        const results: Row[][] | undefined = message.each && !message.end ? [] : undefined;
        if (job.failed === undefined) {
          try {
            for (const step of message.steps) {
              if (step.rows === "all") rows = await sql.all(step.sql, step.params);
              else if (step.rows === "get") {
                const row = await sql.get(step.sql, step.params);
                rows = row ? [row] : [];
              } else {
                rows = undefined;
                await sql.run(step.sql, step.params);
              }
              if (results && rows) results.push(rows);
            }
          } catch (error) {
            job.failed = error;
          }
        }
        if (message.end === "rollback") throw ROLLBACK;
        if (message.end) {
          if (job.failed !== undefined) throw job.failed;
          if (message.end === "commit" && message.seq !== undefined)
            await store.execOnce(`PRAGMA application_id = ${message.seq | 0}`);
          return rows;
        }
        job.owed = undefined;
        if (job.failed !== undefined) fail(message.id, job.failed);
        else if (results) reply({ id: message.id, ok: true, results });
        else reply({ id: message.id, ok: true, ...(rows ? { rows } : {}) });
      }
    };
    const run = first.begin === "read" ? store.read(work) : store.commit(work);
    run.then(
      (rows) => {
        job.over = true;
        jobs.delete(first.job);
        if (job.owed) reply({ id: job.owed.id, ok: true, ...(rows ? { rows } : {}) });
      },
      (error: unknown) => {
        job.over = true;
        jobs.delete(first.job);
        // Whatever is owed (the message being served, or the first one when BEGIN failed).
        const owed = job.owed ?? job.inbox.shift();
        if (!owed) return;
        if (error === ROLLBACK) reply({ id: owed.id, ok: true });
        else fail(owed.id, error);
        for (const left of job.inbox.splice(0)) fail(left.id, new StoreFailed("the transaction is over"));
      },
    );
  };

  const handle = async (data: unknown) => {
    if (!isRequest(data)) {
      const id = (data as { id?: unknown } | null)?.id;
      if (typeof id === "number" && Number.isInteger(id))
        fail(id, new LentBadRequest("the lent store refused a message it does not expect"));
      return;
    }
    const request = data;
    if (ending) {
      if (request.t !== "kill") fail(request.id, new StoreClosed("the lent store is closed"));
      return;
    }
    if (request.t === "open") {
      if (line || opening) {
        fail(request.id, new LentBadRequest("this worker lends one store, opened already"));
        return;
      }
      opening = true;
      try {
        line = await options.open(request.name);
        const parts = options.parts?.();
        reply({ id: request.id, ok: true, schemaVersion: line.schemaVersion, ...(parts ? { parts } : {}) });
      } catch (error) {
        opening = false;
        fail(request.id, error);
      }
      return;
    }
    if (!line) {
      fail(request.id, new LentBadRequest("no store is open here yet"));
      return;
    }
    switch (request.t) {
      case "migrate":
        try {
          await line.migrate({ migrations: request.migrations, epoch: request.epoch });
          reply({ id: request.id, ok: true, schemaVersion: line.schemaVersion });
        } catch (error) {
          fail(request.id, error);
        }
        return;
      case "fence":
        line.fenceOnFirstCommit();
        reply({ id: request.id, ok: true });
        return;
      case "job": {
        // The steps' texts, looked up now: numbers are defined in the order messages arrive.
        const unknown = lookUpTexts(request.steps, texts);
        if (unknown !== undefined) {
          fail(request.id, new LentBadRequest(`statement ${unknown} was never sent to this worker`));
          return;
        }
        const served = request as ServedRequest;
        const job = jobs.get(served.job);
        if (served.begin) {
          if (job) fail(served.id, new LentBadRequest(`transaction ${served.job} began already`));
          else runJob(served, line);
        } else if (!job || job.over) fail(served.id, new StoreFailed("the transaction is over"));
        else {
          job.inbox.push(served);
          job.wake?.();
        }
        return;
      }
      case "memory":
        reply({ id: request.id, ok: true, wasmBytes: options.memory?.() ?? 0 });
        return;
      case "close":
        await end("the lent store was closed");
        reply({ id: request.id, ok: true });
        port.close();
        return;
      case "kill":
        await end(request.reason);
        reply({ id: request.id, ok: true });
        port.close();
        return;
    }
  };
  // Messages are handled in arrival order: each waits for the previous one's synchronous part only
  // (a job's messages are queued to its callback; an open or a migrate is awaited by the client).
  port.addEventListener("message", (event) => void handle(event.data));
  port.addEventListener("close", () => void end("the engine using the lent store is gone"));
  port.start?.();
  return done;
}
