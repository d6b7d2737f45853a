/**
 * Throttled progress commits (a streaming answer's partial, a tool's output): the first change after
 * a quiet period is written at once, later ones at most every `intervalMs`, changes in between
 * coalesce, and at most one commit is in flight. `stop()` waits for the one in flight, so nothing
 * stale lands after the outcome that follows.
 */
export class ThrottledWriter {
  #dirty = false;
  #inFlight: Promise<unknown> | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #last = 0;
  #stopped = false;

  constructor(
    readonly intervalMs: number,
    /** Write the newest state; failures are ignored (the next change or the outcome wins). */
    readonly write: () => Promise<unknown>,
  ) {}

  get stopped(): boolean {
    return this.#stopped;
  }

  /** Something changed: write it soon. */
  mark(): void {
    if (this.#stopped) return;
    this.#dirty = true;
    if (this.#inFlight || this.#timer) return;
    const wait = Math.max(0, this.#last + this.intervalMs - Date.now());
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#flush();
    }, wait);
  }

  #flush(): void {
    if (!this.#dirty || this.#stopped) return;
    this.#dirty = false;
    this.#last = Date.now();
    this.#inFlight = this.write()
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
