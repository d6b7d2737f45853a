/**
 * A fake clock for the durable timers (worker/core/timers.ts): a wall clock (`now`, what a harness
 * stamps commits with and compares due times to) and process timers on a separate monotonic clock,
 * as on a real machine. `advance(ms)` lets time pass: both clocks move and every process timer due
 * on the monotonic clock rings, in order. `jump(ms)` changes only the wall clock (a clock correction,
 * forward or backward): no process timer notices it. Pass `clock.now` as a harness's `now` and the
 * clock itself as its `timers`.
 * Invariant: a timer rings at most once, never before its monotonic time.
 */
import type { TimerPort } from "../core/timers.ts";

export class FakeClock implements TimerPort {
  #wall: number;
  #mono = 0;
  #next = 1;
  #timers = new Map<number, { at: number; callback: () => void }>();

  constructor(wallStart: number) {
    this.#wall = wallStart;
  }

  readonly now = (): number => this.#wall;

  setTimeout(callback: () => void, ms: number): unknown {
    const id = this.#next++;
    this.#timers.set(id, { at: this.#mono + Math.max(0, ms), callback });
    return id;
  }

  clearTimeout(handle: unknown): void {
    this.#timers.delete(handle as number);
  }

  /** Process timers armed and not rung yet. */
  get pending(): number {
    return this.#timers.size;
  }

  /** Let `ms` pass on both clocks, ringing each process timer due, in time order. */
  advance(ms: number): void {
    const end = this.#mono + ms;
    for (;;) {
      let first: [number, { at: number; callback: () => void }] | undefined;
      for (const entry of this.#timers)
        if (entry[1].at <= end && (!first || entry[1].at < first[1].at)) first = entry;
      if (!first) break;
      this.#wall += first[1].at - this.#mono;
      this.#mono = first[1].at;
      this.#timers.delete(first[0]);
      first[1].callback();
    }
    this.#wall += end - this.#mono;
    this.#mono = end;
  }

  /** Move the wall clock only (a correction): process timers do not see it. */
  jump(ms: number): void {
    this.#wall += ms;
  }
}
