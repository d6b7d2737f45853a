/**
 * Exercises on durable tasks, each stated by its describe block and answered by the tests named after
 * it: 1, a SendEmail task whose key survives a crash; 2, a replay-safe tool appending to a log; 3, a
 * failFast wait on three children (like the specification's Checkout example, spec §5.5); 4,
 * reservation before start; 6, a stalled watch consumer (spec §9.2). Exercise 5 (code mode's sources
 * of nondeterminism) is covered by code mode's own tests; exercise 7 (the ownership tree of parallel
 * subagents) is in tests/unit/agent/task-graph-watch.test.ts.
 */
import { fauxToolCall } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { describe, expect, test } from "vitest";
import { textResult } from "../../../worker/agent/tools/contract.ts";
import {
  AgentHarness,
  defineTask,
  defineTool,
  Harness,
  MemoryFs,
  type TaskRecord,
} from "../../../worker/index.ts";
import {
  CRASH_MODES,
  CRASH_SWEEP_TEST_TIMEOUT_MS,
  crashingStore,
  crashSweep,
  deferred,
  memoryStore,
  until,
} from "../../../worker/testing.ts";
import { callsThenAnswer, cleanups, open } from "../agent/fixtures.ts";
import { FakeMailer, FakePayments } from "./fixtures/fakes.ts";
import { checkoutTask, sendEmailTask } from "./fixtures/payments.ts";

const outcome = (r: TaskRecord) => (r.state.status === "terminal" ? r.state.outcome : undefined);

/** Exercise 1's wrong answer: the key is made inside `send`, so a rerun of send makes a new one. */
function keyInSendTask(mailer: FakeMailer) {
  return defineTask<{ to: string }, { phase: "send" }, string>({
    name: "send-email-late-key",
    version: 1,
    initial: () => ({ phase: "send" }),
    phases: {
      send: async (task, runtime) => {
        const id = await mailer.send(crypto.randomUUID(), task.input.to, "hi");
        await runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: id } }));
      },
    },
    abort: async (_t, runtime) =>
      void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
  });
}

/**
 * Run `create` on a store that dies at transaction `at`, reopen what was committed and finish: the
 * client starts the work again unless a committed task exists already.
 */
async function crashAndFinish(
  definitions: Parameters<typeof Harness.open>[1],
  create: (h: Harness) => Promise<number>,
  at: number,
  point: "after-commit" | "before-commit",
): Promise<{
  crashed: boolean;
  transactions: number;
  statusAtCrash?: string;
  phaseAtCrash?: string | undefined;
}> {
  const cs = await crashingStore({ at, point });
  let first: Harness | undefined;
  try {
    first = await Harness.open(cs.store, definitions);
    const id = await create(first);
    await Promise.race([first.waitForTask(id), cs.crashed]);
  } catch (error) {
    if (!cs.hasCrashed) throw error;
  }
  const transactions = cs.store.stats.transactions;
  await first?.close().catch(() => undefined);
  if (!cs.hasCrashed) return { crashed: false, transactions };
  const recovered = await cs.recover();
  const row = await recovered.read((sql) => sql.get("SELECT status, state FROM tasks ORDER BY id LIMIT 1"));
  const h = await Harness.open(recovered, definitions);
  const id = (await h.tasks())[0]?.id ?? (await create(h));
  expect(outcome(await h.waitForTask(id))?.status).toBe("completed");
  await h.close();
  return {
    crashed: true,
    transactions,
    ...(row
      ? {
          statusAtCrash: String(row["status"]),
          phaseAtCrash: (JSON.parse(String(row["state"])) as { checkpoint?: { phase?: string } }).checkpoint
            ?.phase,
        }
      : {}),
  };
}

describe("exercise 1: SendEmail with phases prepare and send and an abort handler", () => {
  test("exercise 1: the key is created in prepare, so a crash at any commit sends one email per key", {
    timeout: CRASH_SWEEP_TEST_TIMEOUT_MS,
  }, async () => {
    for (const mode of CRASH_MODES) {
      await crashSweep(
        {
          name: "exercise 1: SendEmail",
          services: () => new FakeMailer(),
          open: (store, mailer, engine) => Harness.open(store, { tasks: [sendEmailTask(mailer)], ...engine }),
          finish: async (h, mailer) => {
            const email = sendEmailTask(mailer);
            const id =
              (await h.tasks())[0]?.id ??
              (await h.createTask(
                email,
                { to: "a@example.com", subject: "hi" },
                { ownership: { kind: "conversation" } },
              ));
            return outcome(await h.waitForTask(id))?.status;
          },
        },
        {
          mode,
          baseline: (run) => expect(run.result).toBe("completed"),
          check: ({ result, services: mailer, label }) => {
            expect(result, label).toBe("completed");
            // The service may be called twice (the effect ran, its outcome commit was lost) ...
            expect(mailer.sends).toBeGreaterThanOrEqual(1);
            // ... but it deduplicates by the committed key: one email.
            expect(mailer.sent.size, `${mode.name}, ${label}`).toBe(1);
          },
        },
      );
    }
  });

  test("exercise 1: a key made inside send is not enough: losing send's outcome commit sends a second email", async () => {
    const mailer = new FakeMailer();
    const late = keyInSendTask(mailer);
    // Transaction 1 creates the task, 2 reserves it, 3 is send's outcome: lost before COMMIT.
    const run = await crashAndFinish(
      { tasks: [late] },
      (h) => h.createTask(late, { to: "a@example.com" }, { ownership: { kind: "conversation" } }),
      3,
      "before-commit",
    );
    expect(run).toMatchObject({ crashed: true, statusAtCrash: "running" });
    expect(mailer.sent.size).toBe(2);
  });

  test("exercise 1: the service must deduplicate by key: transient failures retried under one key send once", async () => {
    const mailer = new FakeMailer();
    const email = sendEmailTask(mailer);
    const h = await Harness.open(await memoryStore(), { tasks: [email] });
    mailer.failNext(2);
    const id = await h.createTask(
      email,
      { to: "a@example.com", subject: "hi" },
      { ownership: { kind: "conversation" } },
    );
    expect(outcome(await h.waitForTask(id))?.status).toBe("completed");
    expect(mailer.sent.size).toBe(1);
    await h.close();
  });
});

describe("exercise 2: a replay-safe tool that appends a line to a log file", () => {
  /** A `log` tool marked safe that appends a line; `keyed` makes the append idempotent by call id. */
  function appendTool(fs: MemoryFs, keyed: boolean) {
    const started = deferred();
    const release = deferred();
    let runs = 0;
    const tool = defineTool({
      name: "log",
      description: "Append a line to log.txt",
      parameters: Type.Object({ line: Type.String() }),
      replay: "safe",
      async execute(args, api) {
        runs++;
        const text = (await fs.exists("log.txt")) ? await fs.read("log.txt") : "";
        const line = keyed ? `${api.toolCallId} ${args.line}\n` : `${args.line}\n`;
        if (!keyed || !text.includes(`${api.toolCallId} `)) await fs.write("log.txt", text + line);
        if (runs === 1) {
          started.resolve();
          // The effect happened; the process "dies" before the result is committed.
          await new Promise<void>((resolve, reject) => {
            void release.promise.then(() => resolve());
            api.signal.addEventListener("abort", () => reject(api.signal.reason), { once: true });
          });
        }
        return textResult("appended");
      },
    });
    return { tool, started };
  }

  async function crashMidAppend(keyed: boolean): Promise<string> {
    const fs = new MemoryFs();
    const { tool, started } = appendTool(fs, keyed);
    const respond = callsThenAnswer(fauxToolCall("log", { line: "hello" }, { id: "call-1" }));
    const { h, store, faux } = await open(respond, { tools: [tool], fs });
    const root = await h.root();
    await root.submit({ type: "input", content: "log it" });
    await started.promise;
    const image = await memoryStore(store.image());
    await h.close();
    const again = await AgentHarness.open(image, {
      models: faux.models,
      defaultModel: faux.ref,
      tools: [tool],
      fs,
    });
    cleanups.push(() => again.close().catch(() => undefined));
    await (await again.root()).waitForIdle();
    return fs.read("log.txt");
  }

  test("exercise 2: it is not safe as written: recovery re-executes it and the line is appended twice", async () => {
    expect(await crashMidAppend(false)).toBe("hello\nhello\n");
  });

  test("exercise 2: keyed by its call id it becomes safe: recovery finds its line and appends nothing", async () => {
    expect(await crashMidAppend(true)).toBe("call-1 hello\n");
  });
});

describe("exercise 3: a parent waits failFast on A, B, C; B fails while A is mid-effect", () => {
  test("exercise 3: the others are marked, their abort handlers run before the parent resumes, which reads [aborted, failed, aborted]", async () => {
    const payments = new FakePayments({ declined: ["declined"], holdConfirmations: true });
    const { checkout, payment } = checkoutTask(payments);
    const h = await Harness.open(await memoryStore(), { tasks: [checkout, payment] });
    const id = await h.createTask(
      checkout,
      {
        ref: "p",
        cards: ["ok", "declined", "ok"],
        amount: 1,
        policy: "failFast",
      },
      { ownership: { kind: "conversation" } },
    );
    const done = await h.waitForTask(id);
    expect((outcome(done) as unknown as { result: { outcomes: string[] } }).result.outcomes).toEqual([
      "aborted",
      "failed",
      "aborted",
    ]);
    const children = await h.tasks({ kind: "payment" });
    // Marks: the failed child was not marked; the two others were.
    expect(children.map((c) => c.abortRequested)).toEqual([true, false, true]);
    // A and C were mid-effect (charged, waiting on confirmation): each refunded in its own abort
    // handler, and both refunds come before the parent's resumed phase.
    const log = payments.log;
    const resumed = log.indexOf("resume:p");
    expect(log.filter((l) => l.startsWith("refund:")).sort()).toEqual(["refund:p-p0", "refund:p-p2"]);
    for (const refund of ["refund:p-p0", "refund:p-p2"]) expect(log.indexOf(refund)).toBeLessThan(resumed);
    expect(log.indexOf("charge:p-p0")).toBeLessThan(log.indexOf("refund:p-p0"));
    await h.close();
  });
});

describe("exercise 4: the scheduler reserves tasks in a commit before starting them", () => {
  test("exercise 4: a handler starts only after the commit that moved its task to running is stored", async () => {
    const store = await memoryStore();
    const seen: string[] = [];
    const probe = defineTask<null, { phase: "go" }, null>({
      name: "reserved-probe",
      version: 1,
      initial: () => ({ phase: "go" }),
      phases: {
        go: async (task, runtime) => {
          const row = await store.read((sql) => sql.get("SELECT status FROM tasks WHERE id = ?", [task.id]));
          seen.push(String(row?.["status"]));
          await runtime.commit(() => ({
            status: "terminal",
            outcome: { status: "completed", result: null },
          }));
        },
      },
      abort: async (_t, runtime) =>
        void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
    });
    const h = await Harness.open(store, { tasks: [probe] });
    await h.waitForTask(await h.createTask(probe, null, { ownership: { kind: "conversation" } }));
    expect(seen).toEqual(["running"]);
    await h.close();
  });

  test("exercise 4: several eligible tasks are each reserved once, in stored commits, and their handlers run off the line: one that blocks holds up none of the others", async () => {
    const store = await memoryStore();
    const gate = deferred();
    const seen: [number, string][] = [];
    const probe = defineTask<{ hold: boolean }, { phase: "go" }, null>({
      name: "reserved-many",
      version: 1,
      initial: () => ({ phase: "go" }),
      phases: {
        go: async (task, runtime) => {
          const row = await store.read((sql) => sql.get("SELECT status FROM tasks WHERE id = ?", [task.id]));
          seen.push([task.id, String(row?.["status"])]);
          if (task.input.hold) await gate.promise;
          await runtime.commit(() => ({
            status: "terminal",
            outcome: { status: "completed", result: null },
          }));
        },
      },
      abort: async (_t, runtime) =>
        void (await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }))),
    });
    const h = await Harness.open(store, { tasks: [probe] });
    // Created in one commit: all three eligible at the same scheduling pass.
    const [held, ...others] = await h.transaction((tx) =>
      [true, false, false].map((hold) =>
        tx.createTask(probe, { hold }, { ownership: { kind: "conversation" } }),
      ),
    );
    for (const id of others) expect((await h.waitForTask(id!)).state.status).toBe("terminal");
    expect((await h.getTask(held!))?.state.status).toBe("running");
    gate.resolve();
    await h.waitForTask(held!);
    expect(seen.map(([id]) => id).sort()).toEqual([held, ...others].sort());
    expect(seen.every(([, status]) => status === "running")).toBe(true);
    await h.close();
  });

  test("exercise 4: a crash right after the reservation is recovered: the task goes back to pending and runs to completion once", async () => {
    const mailer = new FakeMailer();
    const email = sendEmailTask(mailer);
    // Transaction 1 creates the task, transaction 2 reserves it: the store dies right after it.
    const run = await crashAndFinish(
      { tasks: [email] },
      (h) =>
        h.createTask(email, { to: "a@example.com", subject: "hi" }, { ownership: { kind: "conversation" } }),
      2,
      "after-commit",
    );
    // What the crash left: the task reserved (running), its handler's first commit not stored.
    expect(run).toMatchObject({ crashed: true, statusAtCrash: "running", phaseAtCrash: "prepare" });
    expect(mailer.sent.size).toBe(1);
  });
});

describe("exercise 6: a watch consumer stalls for a while as 500 commits happen", () => {
  test("exercise 6: it receives at most 100 frames, the first replacing the backlog, ending at the newest view", async () => {
    const { root } = await open(() => {
      throw new Error("no requests in this test");
    });
    const watch = await root.watch();
    const stall = deferred();
    const frames: Array<{ ops: string[]; notes: number }> = [];
    let first = true;
    watch.start(async (frame) => {
      if (first) {
        first = false;
        await stall.promise;
        return;
      }
      frames.push({
        ops: frame.ops.map((o) => o.op),
        notes: frame.value.entries.filter((e) => e.kind === "note").length,
      });
    });
    for (let i = 0; i < 500; i++) await root.submit({ type: "write", entry: { kind: "note", data: { i } } });
    expect(watch.pending).toBeLessThanOrEqual(100);
    stall.resolve();
    await until(() => frames.length > 0 && frames[frames.length - 1]!.notes === 500);
    expect(frames.length).toBeLessThanOrEqual(100);
    // The backlog past 100 frames was replaced by one frame holding the whole view.
    expect(frames[0]!.ops).toEqual(["replace"]);
    expect(watch.collapsed).toBeGreaterThan(0);
    expect((await root.viewState()).entries.filter((e) => e.kind === "note")).toHaveLength(500);
    await watch.stop();
  });
});
