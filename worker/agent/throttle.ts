/**
 * Throttled progress commits (a streaming answer's partial, a tool's output). The first change after
 * a quiet period is written at once; each write then delays the next by at least `intervalMs` and,
 * with `bytesPerSecond`, by the size it wrote at that rate (spec §7.3 DEFAULT), so a large write buys
 * a proportionally longer pause. Changes in between coalesce, and at most one commit is in flight.
 * `stop()` waits for the one in flight, so nothing stale lands after the outcome that follows.
 * The pace is measured on the monotonic clock (`performance.now`), the one the timer that ends it runs
 * on: paced by the wall clock, two writes were once 180 ms apart against 200, and a clock correction
 * would shorten or stretch a pause by the size of the jump.
 */

/** What one write did: the bytes it stored (for size pacing) and its commit. */
export interface ThrottledWrite {
  readonly bytes: number;
  readonly done: Promise<unknown>;
}

export interface ThrottleOptions {
  /** Least time between two writes (ms). */
  readonly intervalMs: number;
  /** Pace writes by their size as well: a write of n bytes delays the next by n / bytesPerSecond s. */
  readonly bytesPerSecond?: number;
  /**
   * Write the newest state; failures are ignored (the next change or the outcome wins). A bare
   * promise counts as a write of no bytes.
   */
  readonly write: () => ThrottledWrite | Promise<unknown>;
}

export class ThrottledWriter {
  #dirty = false;
  #inFlight: Promise<unknown> | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;
  /** The earliest time the next write may start (`performance.now()`). */
  #nextAt = 0;
  #stopped = false;
  readonly #options: ThrottleOptions;

  constructor(options: ThrottleOptions) {
    this.#options = options;
  }

  get stopped(): boolean {
    return this.#stopped;
  }

  /** Something changed: write it now when the writer is idle, else as soon as the pace allows. */
  mark(): void {
    if (this.#stopped) return;
    this.#dirty = true;
    if (this.#inFlight || this.#timer) return;
    const wait = this.#nextAt - performance.now();
    if (wait <= 0) {
      this.#flush();
      return;
    }
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#flush();
    }, wait);
  }

  #flush(): void {
    if (!this.#dirty || this.#stopped) return;
    this.#dirty = false;
    const started = performance.now();
    const { bytes, done } = asWrite(this.#options.write());
    const rate = this.#options.bytesPerSecond;
    const sizeMs = rate !== undefined && rate > 0 ? (bytes * 1000) / rate : 0;
    this.#nextAt = started + Math.max(this.#options.intervalMs, sizeMs);
    this.#inFlight = done
      .catch(() => undefined)
      .finally(() => {
        this.#inFlight = undefined;
        if (this.#dirty) this.mark();
      });
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    while (this.#inFlight) await this.#inFlight;
  }
}

function asWrite(result: ThrottledWrite | Promise<unknown>): ThrottledWrite {
  return result instanceof Promise ? { bytes: 0, done: result } : result;
}
