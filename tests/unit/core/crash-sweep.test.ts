/**
 * The core crash sweep, through the kit's `crashSweep`: every scenario runs once per transaction
 * boundary k = 1..K (K from its uncrashed run) in every crash mode, with the store dying at k; a
 * fresh engine then opens exactly what was committed and finishes. Each run must end with the
 * uncrashed run's outcomes, every task terminal, and no idempotency key charged (or mailed) twice.
 * Each sweep covers at least as many crash points as when it was written (coverage never shrinks
 * unnoticed, whichever tests a filtered run selects).
 */
import { afterAll, describe, expect, test } from "vitest";
import {
  type AnyTaskDefinition,
  defineTask,
  Harness,
  SESSION_DOCS,
  type TaskId,
  type TaskRecord,
} from "../../../worker/index.ts";
import {
  CRASH_MODES,
  CRASH_SWEEP_TEST_TIMEOUT_MS,
  type CrashScenario,
  crashSweep,
} from "../../../worker/testing.ts";
import { FakeMailer, FakePayments } from "./fixtures/fakes.ts";
import { checkoutTask, sendEmailTask } from "./fixtures/payments.ts";

interface Scenario<S> {
  name: string;
  services(): S;
  definitions(services: S): AnyTaskDefinition[];
  /** The client: start the work unless a committed root task exists already. */
  start(h: Harness, services: S): Promise<TaskId>;
  /** What a user can observe at the end. */
  observe(h: Harness, root: TaskRecord, services: S): Promise<unknown>;
  /** Effect invariants (keys applied once...). */
  check(services: S): void;
}

const outcome = (r: TaskRecord) => (r.state.status === "terminal" ? r.state.outcome : undefined);

async function rootOf(h: Harness, kind: string, create: () => Promise<TaskId>): Promise<TaskId> {
  const existing = await h.tasks({ kind });
  return existing[0]?.id ?? create();
}

function checkoutScenario(
  name: string,
  cards: string[],
  policy: "failFast" | "allSettled",
): Scenario<FakePayments> {
  return {
    name,
    services: () => new FakePayments({ declined: ["declined"], holdConfirmations: policy === "failFast" }),
    definitions: (p) => Object.values(checkoutTask(p)),
    start: (h, p) =>
      rootOf(h, "checkout", () =>
        h.createTask(
          checkoutTask(p).checkout,
          { ref: "c", cards, amount: 7, policy },
          { ownership: { kind: "conversation" } },
        ),
      ),
    observe: async (h, root) => ({
      outcome: outcome(root),
      children: (await h.tasks({ kind: "payment" })).map((t) => outcome(t)?.status),
    }),
    check: (p) => {
      for (const n of p.keysPerRef().values()) expect(n).toBe(1);
      if (policy === "failFast") for (const c of p.applied) expect(c.refunded).toBe(true);
    },
  };
}

const emailScenario: Scenario<FakeMailer> = {
  name: "SendEmail",
  services: () => new FakeMailer(),
  definitions: (m) => [sendEmailTask(m)],
  start: (h, m) =>
    rootOf(h, "send-email", () =>
      h.createTask(sendEmailTask(m), { to: "a@b.c", subject: "s" }, { ownership: { kind: "conversation" } }),
    ),
  observe: async (_h, root) => outcome(root)?.status,
  check: (m) => expect(m.sent.size).toBe(1),
};

/** A fan-out tree: a parent creates three children that each create two grandchildren. */
type TreeState = { phase: "spawn" } | { phase: "gather"; children: TaskId[] };
function treeDefinition(log: string[]) {
  const tree = defineTask<{ depth: number; label: string }, TreeState, string[]>({
    name: "tree",
    version: 1,
    initial: () => ({ phase: "spawn" }),
    phases: {
      spawn: async (task, runtime) => {
        await runtime.commit((tx) => {
          if (task.input.depth === 0)
            return { status: "terminal", outcome: { status: "completed", result: [task.input.label] } };
          const width = task.input.depth === 2 ? 3 : 2;
          const children = Array.from({ length: width }, (_, i) =>
            tx.createTask(
              tree,
              { depth: task.input.depth - 1, label: `${task.input.label}.${i}` },
              { ownership: { kind: "task", taskId: runtime.taskId } },
            ),
          );
          return {
            status: "waiting",
            checkpoint: { phase: "gather", children },
            on: children,
            policy: "allSettled",
          };
        });
      },
      gather: async (task, runtime) => {
        const results = (await runtime.outcomes(task.state.checkpoint.children)).flatMap((o) =>
          o.status === "completed" ? (o.result as string[]) : [],
        );
        log.push(task.input.label);
        await runtime.commit(() => ({
          status: "terminal",
          outcome: { status: "completed", result: results },
        }));
      },
    },
    abort: async (_t, runtime) => {
      await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }));
    },
  });
  return tree;
}
const treeScenario: Scenario<string[]> = {
  name: "fan-out tree (1 + 3 + 6 tasks)",
  services: () => [],
  definitions: (log) => [treeDefinition(log)],
  start: (h, log) =>
    rootOf(h, "tree", () =>
      h.createTask(treeDefinition(log), { depth: 2, label: "r" }, { ownership: { kind: "conversation" } }),
    ),
  observe: async (h, root) => ({
    root: outcome(root),
    all: (await h.tasks()).map((t) => outcome(t)?.status),
  }),
  check: () => undefined,
};

/** A chain of single-phase tasks, each creating the next. */
type ChainState = { phase: "step" };
function chainDefinition() {
  const chain = defineTask<{ n: number; of: number }, ChainState, number>({
    name: "chain",
    version: 1,
    initial: () => ({ phase: "step" }),
    phases: {
      step: async (task, runtime) => {
        await runtime.commit((tx) => {
          if (task.input.n < task.input.of) {
            tx.createTask(
              chain,
              { n: task.input.n + 1, of: task.input.of },
              { ownership: { kind: "conversation" } },
            );
          }
          return { status: "terminal", outcome: { status: "completed", result: task.input.n } };
        });
      },
    },
    abort: async (_t, runtime) => {
      await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }));
    },
  });
  return chain;
}
const chainScenario: Scenario<null> = {
  name: "chain of 20 tasks",
  services: () => null,
  definitions: () => [chainDefinition()],
  start: (h) =>
    rootOf(h, "chain", () =>
      h.createTask(chainDefinition(), { n: 1, of: 20 }, { ownership: { kind: "conversation" } }),
    ),
  observe: async (h) => {
    // The chain is done when its last link is terminal.
    for (;;) {
      const links = await h.tasks({ kind: "chain" });
      const last = links.at(-1)!;
      if (links.length === 20 && outcome(last)) return links.map((t) => outcome(t));
      await h.waitForTask(last.id);
    }
  },
  check: () => undefined,
};

/**
 * The document model's commits (spec §3.2): a task writes a session document, a task document and a
 * conversation document, then retires and recreates the conversation document (a new incarnation),
 * then ends, which retires its task document. Every crash point must leave the same documents and
 * incarnations.
 */
type DocsState = { phase: "write" | "swap" | "end" };
function docsDefinition() {
  return defineTask<null, DocsState, string>({
    name: "docs",
    version: 1,
    initial: () => ({ phase: "write" }),
    phases: {
      write: async (task, runtime) => {
        await runtime.commit((tx) => {
          tx.writeDoc(SESSION_DOCS, "runs", { n: 1 });
          tx.writeDoc({ kind: "task", taskId: task.id }, "scratch", { step: 1 });
          tx.writeDoc(task.conversationId, "log", { items: ["a"] });
          return { status: "running", checkpoint: { phase: "swap" } };
        });
      },
      swap: async (task, runtime) => {
        await runtime.commit((tx) => {
          tx.retireDoc(task.conversationId, "log");
          tx.writeDoc(task.conversationId, "log", { items: ["b"] });
          tx.writeDoc({ kind: "task", taskId: task.id }, "scratch", { step: 2 });
          return { status: "running", checkpoint: { phase: "end" } };
        });
      },
      end: async (_task, runtime) => {
        await runtime.commit(() => ({
          status: "terminal",
          outcome: { status: "completed", result: "done" },
        }));
      },
    },
    abort: async (_t, runtime) => {
      await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }));
    },
  });
}
const docsScenario: Scenario<null> = {
  name: "documents: session, task and conversation incarnations",
  services: () => null,
  definitions: () => [docsDefinition()],
  start: (h) =>
    rootOf(h, "docs", () => h.createTask(docsDefinition(), null, { ownership: { kind: "conversation" } })),
  observe: async (h, root) => {
    const session = await h.docRecord(SESSION_DOCS, "runs");
    const log = await h.docRecord(root.conversationId, "log");
    const seen = {
      outcome: outcome(root),
      runs: await h.doc(SESSION_DOCS, "runs"),
      log: await h.doc(root.conversationId, "log"),
      // The fourth incarnation: after the session's, the task's and the first log (retired).
      logIncarnation: log && session ? log.id - session.id : undefined,
      scratch: await h.doc({ kind: "task", taskId: root.id }, "scratch"),
      scratchRecord: await h.docRecord({ kind: "task", taskId: root.id }, "scratch"),
    };
    expect(seen).toEqual({
      outcome: { status: "completed", result: "done" },
      runs: { n: 1 },
      log: { items: ["b"] },
      logIncarnation: 3,
      scratch: undefined,
      scratchRecord: undefined,
    });
    return seen;
  },
  check: () => undefined,
};

/** A scenario as the kit sweeps it: each run gets fresh services and definitions closing over them. */
function swept<S>(
  scenario: Scenario<S>,
): CrashScenario<Harness, { services: S; definitions: AnyTaskDefinition[] }, unknown> {
  return {
    name: scenario.name,
    services: () => {
      const services = scenario.services();
      return { services, definitions: scenario.definitions(services) };
    },
    open: (store, run, engine) => Harness.open(store, { tasks: run.definitions, ...engine }),
    finish: async (h, run) => {
      const root = await scenario.start(h, run.services);
      return scenario.observe(h, await h.waitForTask(root), run.services);
    },
  };
}

const scenarios: Scenario<never>[] = [
  emailScenario,
  checkoutScenario("checkout failFast, 4 payments", ["ok", "declined", "ok", "ok"], "failFast"),
  checkoutScenario("checkout allSettled, 4 payments", ["ok", "declined", "ok", "ok"], "allSettled"),
  checkoutScenario(
    "checkout failFast, 8 payments",
    ["ok", "ok", "ok", "declined", "ok", "ok", "ok", "ok"],
    "failFast",
  ),
  checkoutScenario(
    "checkout allSettled, 8 payments",
    ["ok", "ok", "ok", "declined", "ok", "ok", "ok", "ok"],
    "allSettled",
  ),
  treeScenario,
  chainScenario,
  docsScenario,
] as Scenario<never>[];

/** Crash points each sweep covered when it was written, by mode: the floor it must not fall below. */
const FLOOR: Record<string, [number, number, number]> = {
  SendEmail: [4, 5, 4],
  "checkout failFast, 4 payments": [7, 19, 7],
  "checkout allSettled, 4 payments": [7, 18, 7],
  "checkout failFast, 8 payments": [7, 31, 7],
  "checkout allSettled, 8 payments": [7, 30, 7],
  "fan-out tree (1 + 3 + 6 tasks)": [7, 21, 7],
  "chain of 20 tasks": [22, 42, 22],
  "documents: session, task and conversation incarnations": [5, 6, 5],
};

let covered = 0;

describe("crash sweep", () => {
  for (const [m, mode] of CRASH_MODES.entries()) {
    for (const scenario of scenarios) {
      test(`${scenario.name} (${mode.name})`, { timeout: CRASH_SWEEP_TEST_TIMEOUT_MS }, async () => {
        const report = await crashSweep(swept(scenario), {
          mode,
          baseline: (run) => scenario.check(run.services.services),
          check: (run, baseline) => {
            expect(run.result, `${scenario.name}: ${run.label}`).toEqual(baseline.result);
            scenario.check(run.services.services);
          },
          atLeast: FLOOR[scenario.name]![m]!,
        });
        covered += report.points;
      });
    }
  }
});

afterAll(() => {
  console.log(`crash sweep: ${covered} crash points covered`);
});
