/**
 * The simulator's world clock and randomness. `installVirtualWorld(seed)` replaces, for the length
 * of one run, `setTimeout`/`clearTimeout`/`setInterval`/`clearInterval`, `Date.now` (and `new Date()`
 * without arguments), `performance.now` and `Math.random` on `globalThis` with virtual ones: timers
 * wait in a queue ordered by (deadline, creation), and time moves only when the simulator calls
 * `advance()`, which jumps to the earliest deadline and runs every timer due then. Randomness is the
 * run's seeded PRNG. `setImmediate` and microtasks stay real: the store's line and the sandbox yield
 * through them, and in one thread with no I/O their order is fixed, so a run is a pure function of
 * its seed, however fast or loaded the machine is.
 * Invariants: virtual time never goes back; a cleared timer never fires; `uninstall()` restores
 * exactly what was there, and timers left queued are dropped with the world.
 */
import { Prng } from "./prng.ts";

interface Timer {
  readonly id: number;
  at: number;
  readonly seq: number;
  readonly run: () => void;
  readonly every?: number;
}

/** Virtual epoch: 2026-01-01T00:00:00Z, so timestamps look like real ones. */
export const VIRTUAL_EPOCH = Date.UTC(2026, 0, 1);

export class VirtualWorld {
  now = VIRTUAL_EPOCH;
  #timers = new Map<number, Timer>();
  #seq = 0;
  #restore: Array<() => void> = [];
  readonly random: Prng;

  constructor(seed: number) {
    this.random = new Prng(seed ^ 0x5eed);
  }

  get pending(): number {
    return this.#timers.size;
  }

  /** How many one-shot timers (`setTimeout`) the last `advance` ran; repeating ones are not counted. */
  lastOnceFired = 0;

  /** True when a one-shot timer is queued: something that fires once, not only a repeating poll. */
  hasOnce(): boolean {
    for (const t of this.#timers.values()) if (t.every === undefined) return true;
    return false;
  }

  /** The earliest deadline queued (undefined: none). */
  nextDeadline(): number | undefined {
    let best: Timer | undefined;
    for (const t of this.#timers.values())
      if (!best || t.at < best.at || (t.at === best.at && t.seq < best.seq)) best = t;
    return best?.at;
  }

  /** Jump to the earliest deadline (never back) and run every timer due then, in creation order. */
  advance(): boolean {
    this.lastOnceFired = 0;
    const at = this.nextDeadline();
    if (at === undefined) return false;
    this.now = Math.max(this.now, at);
    const due = [...this.#timers.values()]
      .filter((t) => t.at <= this.now)
      .sort((a, b) => a.at - b.at || a.seq - b.seq);
    for (const t of due) {
      if (!this.#timers.has(t.id)) continue;
      if (t.every !== undefined) t.at = this.now + Math.max(1, t.every);
      else {
        this.#timers.delete(t.id);
        this.lastOnceFired++;
      }
      t.run();
    }
    return true;
  }

  /** Move time forward by `ms` without running timers that fall due (the next `advance` runs them). */
  elapse(ms: number): void {
    this.now += Math.max(0, ms);
  }

  install(): void {
    const g = globalThis as unknown as Record<string, unknown>;
    const save = (name: string, value: unknown) => {
      const old = g[name];
      g[name] = value;
      this.#restore.push(() => {
        g[name] = old;
      });
    };
    const add = (run: () => void, ms: unknown, every: boolean): number => {
      const delay = Math.max(0, Number(ms) || 0);
      const id = ++this.#seq;
      this.#timers.set(id, { id, at: this.now + delay, seq: id, run, ...(every ? { every: delay } : {}) });
      return id;
    };
    const clear = (id: unknown) => {
      if (typeof id === "number") this.#timers.delete(id);
    };
    save("setTimeout", (f: (...a: unknown[]) => void, ms?: number, ...args: unknown[]) =>
      add(() => f(...args), ms, false),
    );
    save("setInterval", (f: (...a: unknown[]) => void, ms?: number, ...args: unknown[]) =>
      add(() => f(...args), ms, true),
    );
    save("clearTimeout", clear);
    save("clearInterval", clear);
    const RealDate = Date;
    const world = this;
    const VirtualDate = function (this: unknown, ...args: unknown[]) {
      if (!new.target) return new RealDate(world.now).toString();
      return args.length === 0
        ? new RealDate(world.now)
        : new (RealDate as unknown as new (...a: unknown[]) => Date)(...args);
    } as unknown as DateConstructor;
    Object.setPrototypeOf(VirtualDate, RealDate);
    (VirtualDate as unknown as { prototype: Date }).prototype = RealDate.prototype;
    VirtualDate.now = () => world.now;
    save("Date", VirtualDate);
    // The monotonic clock too: the engine paces progress commits by `performance.now` against a
    // (virtual) timer, and reads it for a script's CPU time; left real, how long a step took on this
    // machine decided whether a write waited for a timer, so a loaded machine changed the trace.
    const perf = globalThis.performance as unknown as Record<string, unknown>;
    const own = Object.getOwnPropertyDescriptor(perf, "now");
    Object.defineProperty(perf, "now", {
      value: () => this.now - VIRTUAL_EPOCH,
      configurable: true,
      writable: true,
    });
    this.#restore.push(() => {
      if (own) Object.defineProperty(perf, "now", own);
      else delete perf.now;
    });
    const math = Math as unknown as { random: () => number };
    const realRandom = math.random;
    math.random = () => this.random.next();
    this.#restore.push(() => {
      math.random = realRandom;
    });
  }

  uninstall(): void {
    for (const r of this.#restore.splice(0).reverse()) r();
    this.#timers.clear();
  }
}

/** One real turn of the event loop (microtasks flushed, then the check phase). */
export const realTurn: () => Promise<void> = (() => {
  const si = (globalThis as { setImmediate?: (f: () => void) => void }).setImmediate!;
  return () => new Promise<void>((r) => si(r));
})();

const realSetTimeout = globalThis.setTimeout;

/** Wait `ms` of real time (for real I/O the engine may be waiting on, such as a WebAssembly compile). */
export const realSleep = (ms: number): Promise<void> => new Promise((r) => realSetTimeout(r, ms));
