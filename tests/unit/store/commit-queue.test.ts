/**
 * The commit queue (worker/store/queue.ts), the one FIFO every store kind serves its jobs on: jobs
 * run one at a time in request order and are never merged; one job's failure stays its own; close
 * lets what was admitted settle and refuses the rest; kill rejects what is queued; the fault points
 * carry the transaction's number. No store, no SQL: each runner here settles its job by hand, and
 * every step is held by a deferred, so nothing depends on timing.
 */
import { describe, expect, test } from "vitest";
import { CommitQueue, type QueuedJob } from "../../../worker/store/queue.ts";
import { type FaultPoint, type Sql, StoreClosed } from "../../../worker/store/types.ts";
import { type Deferred, deferred } from "../../../worker/testing.ts";

const sql: Sql = {
  run: async () => undefined,
  all: async () => [],
  get: async () => undefined,
};

type Kind = "commit" | "read";

/**
 * A queue whose runner logs each job's start and end and holds it until the test releases it (the
 * gate of its `work`'s value); a commit's work is its job: its value resolves the job.
 */
function heldQueue(options: { between?: (job: QueuedJob<Kind>) => Promise<void> | undefined } = {}) {
  const log: string[] = [];
  const gates = new Map<string, Deferred<void>>();
  const gate = (name: string) => {
    let g = gates.get(name);
    if (!g) gates.set(name, (g = deferred()));
    return g;
  };
  const queue: CommitQueue<Kind> = new CommitQueue<Kind>({
    name: "held",
    async run(job) {
      if (job.kind === "read") return queue.read(job, sql);
      let value: unknown;
      try {
        value = await job.work(sql);
      } catch (error) {
        job.reject(error);
        return;
      }
      queue.committed(job, value);
    },
    ...(options.between ? { between: options.between } : {}),
  });
  /** Queue a job named `name` that logs, waits for its gate, and answers its name (or throws). */
  const job = (name: string, how: { kind?: Kind; fail?: boolean } = {}) =>
    queue.enqueue(how.kind ?? "commit", async () => {
      log.push(`start ${name}`);
      await gate(name).promise;
      log.push(`end ${name}`);
      if (how.fail) throw new Error(`${name} failed`);
      return name;
    });
  const turn = () => new Promise<void>((r) => setImmediate(r));
  return { queue, log, gate, job, turn };
}

describe("the commit queue", () => {
  test("runs jobs one at a time in request order, each started only after the one before settled", async () => {
    const { log, gate, job, turn } = heldQueue();
    const results = [job("a"), job("b", { kind: "read" }), job("c")];
    await turn();
    expect(log).toEqual(["start a"]);
    // Released out of order: c and b wait for their turn all the same.
    gate("c").resolve();
    gate("b").resolve();
    await turn();
    expect(log).toEqual(["start a"]);
    gate("a").resolve();
    expect(await Promise.all(results)).toEqual(["a", "b", "c"]);
    expect(log).toEqual(["start a", "end a", "start b", "end b", "start c", "end c"]);
  });

  test("groups nothing: jobs requested together are run one by one, and `between` is asked only while more are queued", async () => {
    const between: string[] = [];
    const ran: Kind[] = [];
    const queue: CommitQueue<Kind> = new CommitQueue<Kind>({
      name: "grouping",
      run(job) {
        ran.push(job.kind);
        if (job.kind === "read") return queue.read(job, sql);
        queue.committed(job, job.work(sql));
      },
      between(job) {
        between.push(job.kind);
        return undefined;
      },
    });
    const all = [
      queue.enqueue("commit", () => 1),
      queue.enqueue("commit", () => 2),
      queue.enqueue("read", () => 3),
      queue.enqueue("commit", () => 4),
    ];
    expect(await Promise.all(all)).toEqual([1, 2, 3, 4]);
    expect(ran).toEqual(["commit", "commit", "read", "commit"]);
    // After each job but the last: nothing was queued behind the last one.
    expect(between).toEqual(["commit", "commit", "read"]);
    expect(queue.stats).toEqual({ transactions: 3, commits: 3, reads: 1 });
  });

  test("a pause from `between` holds the next job until it resolves", async () => {
    const pause = deferred();
    const { log, gate, job, turn } = heldQueue({ between: () => pause.promise });
    gate("a").resolve();
    gate("b").resolve();
    const results = [job("a"), job("b")];
    await results[0];
    await turn();
    expect(log).toEqual(["start a", "end a"]);
    pause.resolve();
    expect(await results[1]).toBe("b");
  });

  test("one job's failure does not leak into the next: its work or its runner may throw, the next job runs and answers its own value", async () => {
    const { queue, gate, job } = heldQueue();
    for (const name of ["a", "b", "c", "d"]) gate(name).resolve();
    const a = job("a", { fail: true });
    const b = job("b");
    const c = job("c", { kind: "read", fail: true });
    const d = job("d", { kind: "read" });
    await expect(a).rejects.toThrow("a failed");
    expect(await b).toBe("b");
    await expect(c).rejects.toThrow("c failed");
    expect(await d).toBe("d");
    // Only what settled counts.
    expect(queue.stats).toEqual({ transactions: 1, commits: 1, reads: 1 });

    // A runner that throws (rather than settle its job) rejects that job alone.
    let calls = 0;
    const throwing = new CommitQueue<Kind>({
      name: "throwing",
      run(queued) {
        if (++calls === 1) throw new Error("the runner broke");
        queued.resolve(queued.work(sql));
      },
    });
    const first = throwing.enqueue("commit", () => "first");
    const second = throwing.enqueue("commit", () => "second");
    await expect(first).rejects.toThrow("the runner broke");
    expect(await second).toBe("second");
  });

  test("close while jobs are queued: they run and settle first, later ones are refused, then the store's finish runs once", async () => {
    const { queue, log, gate, job, turn } = heldQueue();
    const a = job("a");
    const b = job("b");
    const finished: string[] = [];
    const closed = queue.close(() => {
      finished.push(`finish after ${log.length} steps`);
    });
    expect(queue.closing).toBe(true);
    expect(queue.closed).toBe(false);
    await expect(job("late")).rejects.toBeInstanceOf(StoreClosed);
    // A read asked while closing is refused as a commit is (draw 41, 20: a queue that refused reads
    // only once closed, serving one behind the admitted jobs, passed every store test).
    const lateRead = queue
      .enqueue("read", () => "served")
      .then(
        (value) => value,
        (error) => (error instanceof StoreClosed ? "refused" : error),
      );
    // A second close answers the same promise, and its finish is not run.
    expect(queue.close(() => void finished.push("second finish"))).toBe(closed);
    await turn();
    expect(finished).toEqual([]);
    gate("a").resolve();
    gate("b").resolve();
    expect(await a).toBe("a");
    expect(await b).toBe("b");
    expect(await lateRead).toBe("refused");
    await closed;
    expect(finished).toEqual(["finish after 4 steps"]);
    expect(queue.closed).toBe(true);
    expect(log).toEqual(["start a", "end a", "start b", "end b"]);
    await expect(queue.enqueue("read", () => 1)).rejects.toBeInstanceOf(StoreClosed);
  });

  test("close of an idle queue finishes at once; a finish that throws still leaves it closed", async () => {
    const { queue } = heldQueue();
    await expect(
      queue.close(() => {
        throw new Error("could not release");
      }),
    ).rejects.toThrow("could not release");
    expect(queue.closed).toBe(true);
  });

  test("kill while jobs are queued: they reject with StoreClosed and the reason, the running one ends as its runner decides", async () => {
    const { queue, log, gate, job, turn } = heldQueue();
    const a = job("a");
    const b = job("b");
    const c = job("c", { kind: "read" });
    await turn();
    queue.kill("the process died");
    expect(queue.closed).toBe(true);
    await expect(b).rejects.toThrow(new StoreClosed("the process died"));
    await expect(c).rejects.toBeInstanceOf(StoreClosed);
    gate("a").resolve();
    expect(await a).toBe("a");
    expect(log).toEqual(["start a", "end a"]);
    // A close after a kill has nothing left to wait for.
    await queue.close();
    await expect(job("d")).rejects.toBeInstanceOf(StoreClosed);
  });

  test("close while a job runs, then kill: close settles once the running job ends", async () => {
    const { queue, gate, job, turn } = heldQueue();
    const a = job("a");
    const b = job("b");
    await turn();
    const closed = queue.close();
    queue.kill("died while closing");
    await expect(b).rejects.toBeInstanceOf(StoreClosed);
    let done = false;
    void closed.then(() => {
      done = true;
    });
    await turn();
    expect(done).toBe(false);
    gate("a").resolve();
    await a;
    await closed;
    expect(done).toBe(true);
  });

  test("fault points carry the number of the transaction they belong to; a throw after COMMIT rejects the job but counts the transaction", async () => {
    const seen: Array<[FaultPoint, number]> = [];
    const queue: CommitQueue<Kind> = new CommitQueue<Kind>({
      name: "points",
      run(job) {
        if (job.kind === "read") return queue.read(job, sql);
        queue.point("before-begin");
        const value = job.work(sql);
        queue.point("before-commit");
        queue.committed(job, value);
      },
    });
    queue.setFaultHook((point, { transaction }) => {
      seen.push([point, transaction]);
      if (point === "after-commit" && transaction === 2) throw new Error("stopped after COMMIT");
    });
    expect(await queue.enqueue("commit", () => "one")).toBe("one");
    await expect(queue.enqueue("commit", () => "two")).rejects.toThrow("stopped after COMMIT");
    expect(await queue.enqueue("read", () => "read")).toBe("read");
    expect(seen).toEqual([
      ["before-begin", 1],
      ["before-commit", 1],
      ["after-commit", 1],
      ["before-begin", 2],
      ["before-commit", 2],
      ["after-commit", 2],
      ["before-read", 3],
    ]);
    expect(queue.stats).toEqual({ transactions: 2, commits: 2, reads: 1 });
    queue.setFaultHook(undefined);
    expect(await queue.enqueue("commit", () => "three")).toBe("three");
  });
});
