/**
 * The durable timer (worker/core/timers.ts), on the kit's fake clock: a task waits until a
 * wall-clock time holding no invocation, the scheduler wakes it once at that time; across a close
 * and reopen it fires at the next open when due; a wall clock moved forward fires it once (within
 * the alarm's cap), one moved backward delays it by as much and never fires it early; an abort ends
 * the wait; a bad due time is refused in its commit; the host hears the earliest due time. Then a
 * crash sweep across the timer: every commit, every crash mode, it fires exactly once, never early.
 */
import { afterAll, describe, expect, test } from "vitest";
import {
  defineTask,
  Harness,
  InvalidTransition,
  MAX_TIMER_DELAY_MS,
  SESSION_DOCS,
  type TaskId,
  timerWait,
} from "../../../worker/index.ts";
import type { MemoryStore } from "../../../worker/store/open.ts";
import {
  CRASH_MODES,
  CRASH_SWEEP_TEST_TIMEOUT_MS,
  crashSweep,
  FakeClock,
  memoryStore,
  until,
} from "../../../worker/testing.ts";
import { done, outcome, settle } from "./fixtures.ts";

const T0 = Date.UTC(2026, 0, 5, 8, 0);
const HOUR = 3_600_000;

type AlarmState = { phase: "sleep" } | { phase: "fire" };
type Fired = { firedAt: number };

/** Sleeps until `input.at`, then records, in its final commit, when it fired (a session document). */
const alarmTask = defineTask<{ at: number }, AlarmState, Fired>({
  name: "alarm",
  version: 1,
  initial: () => ({ phase: "sleep" }),
  phases: {
    sleep: async (task, runtime) => {
      await runtime.commit(() => timerWait({ phase: "fire" }, task.input.at));
    },
    fire: async (task, runtime) => {
      await runtime.commit((tx) => {
        const fired = (tx.readDoc(SESSION_DOCS, "fired") as number[] | undefined) ?? [];
        tx.writeDoc(SESSION_DOCS, "fired", [...fired, task.id]);
        return { status: "terminal", outcome: { status: "completed", result: { firedAt: runtime.now() } } };
      });
    },
  },
  abort: async (_t, runtime) => {
    await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted", reason: "aborted" } }));
  },
});

function open(
  store: MemoryStore,
  clock: FakeClock,
  extra: { onTimer?: (at: number | undefined) => void } = {},
) {
  return Harness.open(store, { tasks: [alarmTask], now: clock.now, timers: clock, ...extra });
}

const firedAt = (r: Awaited<ReturnType<Harness["waitForTask"]>>) =>
  (outcome(r) as { result: Fired } | undefined)?.result.firedAt;

async function waitingOnTimer(h: Harness, id: TaskId): Promise<void> {
  await until(() => {
    const t = h.inspect().tasks.find((x) => x.record.id === id);
    return t?.state.kind === "waiting" && t.state.until !== undefined;
  });
}

describe("the durable timer", () => {
  test("a task waits until its time with no invocation, and the scheduler wakes it once then", async () => {
    const clock = new FakeClock(T0);
    const h = await open(await memoryStore(), clock);
    const id = await h.createTask(alarmTask, { at: T0 + HOUR }, { ownership: { kind: "conversation" } });
    await waitingOnTimer(h, id);
    const waiting = h.inspect().tasks.find((t) => t.record.id === id)!;
    expect(waiting.state).toEqual({ kind: "waiting", on: [], until: T0 + HOUR });
    expect(waiting.record.state).toMatchObject({ status: "waiting", until: T0 + HOUR });
    expect(h.nextTimer()).toBe(T0 + HOUR);
    clock.advance(HOUR - 1);
    await settle();
    expect((await h.getTask(id))!.state.status).toBe("waiting");
    clock.advance(1);
    const fired = await done(h, id);
    expect(firedAt(fired)).toBe(T0 + HOUR);
    expect(await h.doc(SESSION_DOCS, "fired")).toEqual([id]);
    expect(h.nextTimer()).toBeUndefined();
    expect(clock.pending).toBe(0);
    await h.close();
  });

  test("a task blocked on its timer is live: idle waits, the harness's and its conversation's, resolve only after it fires", async () => {
    const clock = new FakeClock(T0);
    const h = await open(await memoryStore(), clock);
    const id = await h.createTask(alarmTask, { at: T0 + HOUR }, { ownership: { kind: "conversation" } });
    await waitingOnTimer(h, id);
    // Nothing else is live: no invocation, no other task; only the deadline blocks it (spec §2.2).
    const idle: string[] = [];
    const harnessIdle = h.waitForIdle().then(() => void idle.push("harness"));
    const conversationIdle = h.waitForConversationIdle(1).then(() => void idle.push("conversation"));
    await settle();
    expect(idle).toEqual([]);
    clock.advance(HOUR);
    await Promise.all([harnessIdle, conversationIdle]);
    expect(outcome(await h.getTask(id))?.status).toBe("completed");
    await h.close();
  });

  test("closed at its due time, it fires once on the next open; not due yet, it keeps waiting", async () => {
    const clock = new FakeClock(T0);
    const store = await memoryStore();
    let h = await open(store, clock);
    const early = await h.createTask(alarmTask, { at: T0 + HOUR }, { ownership: { kind: "conversation" } });
    const late = await h.createTask(
      alarmTask,
      { at: T0 + 5 * HOUR },
      { ownership: { kind: "conversation" } },
    );
    await waitingOnTimer(h, early);
    await waitingOnTimer(h, late);
    await h.close();
    expect(clock.pending).toBe(0);
    // The app stays closed for two hours (no process timer runs), then opens again.
    clock.jump(2 * HOUR);
    const reopened = await memoryStore(store.image());
    h = await open(reopened, clock);
    expect(firedAt(await done(h, early))).toBe(T0 + 2 * HOUR);
    await waitingOnTimer(h, late);
    expect(h.nextTimer()).toBe(T0 + 5 * HOUR);
    clock.advance(3 * HOUR);
    expect(firedAt(await done(h, late))).toBe(T0 + 5 * HOUR);
    expect(await h.doc(SESSION_DOCS, "fired")).toEqual([early, late]);
    await h.close();
  });

  test("a wall clock moved forward past the due time fires it once, within the alarm's cap", async () => {
    const clock = new FakeClock(T0);
    const h = await open(await memoryStore(), clock);
    const id = await h.createTask(alarmTask, { at: T0 + 10 * HOUR }, { ownership: { kind: "conversation" } });
    await waitingOnTimer(h, id);
    await settle();
    // A correction moves the wall clock 12 hours ahead; the process timers do not see it.
    clock.jump(12 * HOUR);
    await settle();
    expect((await h.getTask(id))!.state.status).toBe("waiting");
    clock.advance(MAX_TIMER_DELAY_MS);
    expect(firedAt(await done(h, id))).toBe(T0 + 12 * HOUR + MAX_TIMER_DELAY_MS);
    // Time goes on; nothing fires again.
    clock.advance(24 * HOUR);
    await settle();
    expect(await h.doc(SESSION_DOCS, "fired")).toEqual([id]);
    await h.close();
  });

  test("a wall clock moved backward delays it by as much and never fires it early", async () => {
    const clock = new FakeClock(T0);
    const h = await open(await memoryStore(), clock);
    const id = await h.createTask(alarmTask, { at: T0 + 30_000 }, { ownership: { kind: "conversation" } });
    await waitingOnTimer(h, id);
    await settle();
    clock.jump(-HOUR);
    // The process alarm rings at its time (30 s later), finds the wall clock an hour short: re-arms.
    clock.advance(30_000);
    await settle();
    expect((await h.getTask(id))!.state.status).toBe("waiting");
    expect(h.nextTimer()).toBe(T0 + 30_000);
    clock.advance(HOUR - 1);
    await settle();
    expect((await h.getTask(id))!.state.status).toBe("waiting");
    clock.advance(1);
    expect(firedAt(await done(h, id))).toBe(T0 + 30_000);
    expect(await h.doc(SESSION_DOCS, "fired")).toEqual([id]);
    await h.close();
  });

  test("an abort ends the wait at once: the abort handler runs, the timer never fires", async () => {
    const clock = new FakeClock(T0);
    const h = await open(await memoryStore(), clock);
    const id = await h.createTask(alarmTask, { at: T0 + HOUR }, { ownership: { kind: "conversation" } });
    await waitingOnTimer(h, id);
    await h.abortTask(id);
    expect(outcome(await done(h, id))).toEqual({ status: "aborted", reason: "aborted" });
    clock.advance(2 * HOUR);
    await settle();
    expect(await h.doc(SESSION_DOCS, "fired")).toBeUndefined();
    expect(h.nextTimer()).toBeUndefined();
    await h.close();
  });

  test("a task waiting on its timer that a crash left marked for abort runs its abort handler at the reopen, before its time; the timer never fires (draw 35dB)", async () => {
    // Draw 35dB: every named restart was of a running task (or a pending one); the mark read back
    // for rows not waiting only (a waiting marked task keeping its wait, then running its phase)
    // passed them, and the live abort of a waiting task takes another path.
    const clock = new FakeClock(T0);
    const store = await memoryStore();
    const h = await open(store, clock);
    const id = await h.createTask(alarmTask, { at: T0 + HOUR }, { ownership: { kind: "conversation" } });
    await waitingOnTimer(h, id);
    const crashed = await memoryStore(store.image());
    await h.close();
    // The store as a crash right after the marking commit leaves it, before the abort invocation began.
    await crashed.commit((sql) => sql.run("UPDATE tasks SET abort_requested = 1 WHERE id = ?", [id]));
    const again = await open(crashed, clock);
    expect(outcome(await done(again, id))).toEqual({ status: "aborted", reason: "aborted" });
    clock.advance(2 * HOUR);
    await settle();
    expect(await again.doc(SESSION_DOCS, "fired")).toBeUndefined();
    expect(again.nextTimer()).toBeUndefined();
    await again.close();
  });

  test("the earliest due time is told to the host whenever it changes", async () => {
    const clock = new FakeClock(T0);
    const told: Array<number | undefined> = [];
    const h = await open(await memoryStore(), clock, { onTimer: (at) => told.push(at) });
    const late = await h.createTask(
      alarmTask,
      { at: T0 + 2 * HOUR },
      { ownership: { kind: "conversation" } },
    );
    await waitingOnTimer(h, late);
    await settle();
    const early = await h.createTask(alarmTask, { at: T0 + HOUR }, { ownership: { kind: "conversation" } });
    await waitingOnTimer(h, early);
    await settle();
    clock.advance(HOUR);
    await done(h, early);
    await settle();
    clock.advance(HOUR);
    await done(h, late);
    await settle();
    expect(told).toEqual([T0 + 2 * HOUR, T0 + HOUR, T0 + 2 * HOUR, undefined]);
    await h.close();
  });

  test("a due time that is not epoch milliseconds is refused in its commit", async () => {
    const clock = new FakeClock(T0);
    const caught: unknown[] = [];
    const bad = defineTask<{ at: unknown }, { phase: "go" }, string>({
      name: "bad-timer",
      version: 1,
      initial: () => ({ phase: "go" }),
      phases: {
        go: async (task, runtime) => {
          try {
            await runtime.commit(() => timerWait({ phase: "go" }, task.input.at as number));
          } catch (error) {
            caught.push(error);
            await runtime.commit(() => ({
              status: "terminal",
              outcome: { status: "completed", result: "refused" },
            }));
          }
        },
      },
      abort: async (_t, runtime) => {
        await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }));
      },
    });
    const h = await Harness.open(await memoryStore(), { tasks: [bad], now: clock.now, timers: clock });
    for (const at of [-1, 1.5, "soon", 2 ** 60]) {
      const id = await h.createTask(bad, { at }, { ownership: { kind: "conversation" } });
      expect(outcome(await done(h, id))).toEqual({ status: "completed", result: "refused" });
    }
    expect(caught).toHaveLength(4);
    for (const error of caught) expect(error).toBeInstanceOf(InvalidTransition);
    await h.close();
  });
});

describe("a crash sweep across the timer", () => {
  const lines: string[] = [];
  afterAll(() => {
    for (const line of lines) console.log(line);
  });
  for (const mode of CRASH_MODES) {
    test(
      `every commit, ${mode.name}: it fires exactly once, never before its time`,
      async () => {
        const report = await crashSweep(
          {
            name: "durable timer",
            services: () => ({ clock: new FakeClock(T0) }),
            open: (store, { clock }, options) =>
              Harness.open(store, { tasks: [alarmTask], now: clock.now, timers: clock, ...options }),
            finish: async (h, { clock }) => {
              const existing = await h.tasks({ kind: "alarm" });
              const id =
                existing[0]?.id ??
                (await h.createTask(alarmTask, { at: T0 + HOUR }, { ownership: { kind: "conversation" } }));
              await h.waitUntil(() => {
                const t = h.inspect().tasks.find((x) => x.record.id === id);
                return t === undefined || (t.state.kind === "waiting" && t.state.until !== undefined);
              });
              // Whether it waits (an hour to go) or the crash came after it fired: let the hour pass.
              if (clock.now() < T0 + HOUR) clock.advance(HOUR);
              const fired = await h.waitForTask(id);
              return { firedAt: firedAt(fired), fired: await h.doc(SESSION_DOCS, "fired") };
            },
          },
          {
            mode,
            atLeast: 4,
            log: (line) => lines.push(line),
            baseline: (run) => expect(run.result).toEqual({ firedAt: T0 + HOUR, fired: [1] }),
            check: (run) => {
              expect(run.result.fired, run.label).toEqual([1]);
              expect(run.result.firedAt, run.label).toBeGreaterThanOrEqual(T0 + HOUR);
            },
          },
        );
        expect(report.points).toBe(report.transactions);
      },
      CRASH_SWEEP_TEST_TIMEOUT_MS,
    );
  }
});
