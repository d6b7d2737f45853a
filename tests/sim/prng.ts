/**
 * The simulator's seeded PRNG (mulberry32: 32 bits of state, fast, and the same sequence on every
 * platform). Everything the simulator draws comes from one of these, so a seed fixes a run.
 */
export class Prng {
  #s: number;
  constructor(seed: number) {
    this.#s = seed >>> 0;
  }
  /** A float in [0, 1). */
  next(): number {
    this.#s = (this.#s + 0x6d2b79f5) >>> 0;
    let t = this.#s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  /** An integer in [lo, hi]. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)]!;
  }
  /** A child stream, independent of how many draws this one makes later. */
  fork(salt: number): Prng {
    return new Prng(Math.imul(this.int(0, 0xffffffff) ^ salt, 0x9e3779b1));
  }
}
