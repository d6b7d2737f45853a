/**
 * The durable timer: a task waits until a time, and the scheduler wakes it. A phase commits
 * `timerWait(checkpoint, at)` (or any wait with `until`); the task stays `waiting` in storage with
 * its due time, holds no invocation and no promise, and the scheduler reserves it in the first drain
 * that finds the due time reached (and every task in `on`, if any, terminal), exactly like any other
 * satisfied wait: the reserving commit moves it `waiting -> running`, so it fires at most once per
 * wait, whatever number of engines, drains, tabs or timers look at it.
 *
 * The semantics, chosen and held by the tests (tests/unit/core/timers.test.ts):
 * - The due time is a wall-clock instant (epoch ms on the harness's `now`), stored with the wait. A
 *   duration would not survive a restart: the process that counted it is gone, and only the wall
 *   clock is shared by the next engine (or the next home of the conversation).
 * - On open, a timer already due fires in the first drain (the app was closed at its due time: it
 *   fires late, once). Recovery does not touch waiting tasks, so it is never lost either.
 * - A wall clock moved forward (a correction, a suspended laptop waking) makes every timer it passed
 *   due: each fires once, at the next drain, or at the latest `MAX_TIMER_DELAY_MS` later (the
 *   in-process alarm is re-armed at most that far ahead, because process timers run on a monotonic
 *   clock that does not see a wall-clock jump).
 * - A wall clock moved backward delays the timer by as much: it fires when the wall clock reads the
 *   due time again. A process timer that rings early (by the wall clock) only re-arms.
 * - An abort mark ends the wait at once (the abort handler runs; the timer never fires).
 * - The host is told the earliest due time (`onTimer`) whenever it changes, so a home whose process
 *   may be evicted (a Durable Object) arms a wake-up of its own; opening the harness then fires it.
 * Invariants: `until` is a non-negative safe integer; a timer is armed only while scheduling runs
 * (not paused, not stopping); the in-process alarm is cleared at close.
 */
import { InvalidTransition } from "./errors.ts";
import type { Checkpoint, Json, NextTaskState } from "./types.ts";

/** The furthest ahead the in-process alarm is set: how late a forward clock jump may be noticed. */
export const MAX_TIMER_DELAY_MS = 60_000;

/** The process timers the scheduler arms its alarm with (a test's fake clock gives its own). */
export interface TimerPort {
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const PROCESS_TIMERS: TimerPort = {
  setTimeout: (callback, ms) => setTimeout(callback, ms),
  clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

/** Wait until `until` (epoch ms): the next state a phase commits to sleep durably. */
export function timerWait<S extends Checkpoint, R = Json>(checkpoint: S, until: number): NextTaskState<S, R> {
  return { status: "waiting", checkpoint, on: [], policy: "allSettled", until };
}

/** Refuse a due time that is not an instant (checked in the committing transaction). */
export function validateUntil(until: unknown): asserts until is number | undefined {
  if (until === undefined) return;
  if (typeof until !== "number" || !Number.isSafeInteger(until) || until < 0)
    throw new InvalidTransition(
      `a timer's due time must be epoch milliseconds, not ${JSON.stringify(until)}`,
    );
}

/**
 * The scheduler's one in-process alarm, set for the earliest due timer it saw in its last drain
 * (capped at MAX_TIMER_DELAY_MS), which kicks a drain when it rings.
 */
export class TimerAlarm {
  #handle: unknown;
  #armedFor: number | undefined;
  #announced: number | undefined;

  constructor(
    readonly timers: TimerPort,
    readonly now: () => number,
    readonly ring: () => void,
    readonly onChange: ((at: number | undefined) => void) | undefined,
  ) {}

  /** Arm for `at` (undefined: no timer is waiting). */
  arm(at: number | undefined): void {
    if (at !== this.#announced) {
      this.#announced = at;
      this.onChange?.(at);
    }
    if (at === this.#armedFor && this.#handle !== undefined) return;
    this.clear();
    if (at === undefined) return;
    const delay = Math.min(Math.max(at - this.now(), 0), MAX_TIMER_DELAY_MS);
    this.#armedFor = at;
    this.#handle = this.timers.setTimeout(() => {
      this.#handle = undefined;
      this.#armedFor = undefined;
      this.ring();
    }, delay);
  }

  clear(): void {
    if (this.#handle !== undefined) this.timers.clearTimeout(this.#handle);
    this.#handle = undefined;
    this.#armedFor = undefined;
  }

  /** The earliest due time last announced. */
  get next(): number | undefined {
    return this.#announced;
  }
}
