/**
 * The virtual layout of a long list kept up to date as heights are measured (lib/list-window.ts's
 * `Layout` is rebuilt whole, O(n), on every change; scrolling measures new entries every frame).
 * Two Fenwick trees over the positions hold the measured heights and how many are measured, so a
 * measurement costs O(log n), an entry's top O(log n) and the entry at a position O(log² n).
 * Invariant: after `note(i, h)` for every height `heights.set` changed, `top(i)` equals
 * `new Layout(ids, heights).top(i)` (an unmeasured entry counts as the mean of the measured ones).
 * `lead` entries not loaded yet (a paged transcript's older ones) come first, each at the estimate:
 * positions count them, so entry `ids[k]` is at position `lead + k`.
 */
import { type Heights, indexAt, type VirtualLayout } from "./list-window.ts";

export class LiveLayout implements VirtualLayout {
  readonly #heights: Pick<Heights, "known" | "estimate">;
  /** The measured height at each position, NaN where none is. */
  readonly #own: Float64Array;
  /** Fenwick trees (1-based): measured heights' sums and counts. */
  readonly #sum: Float64Array;
  readonly #count: Float64Array;

  constructor(
    ids: readonly number[],
    heights: Pick<Heights, "known" | "estimate">,
    options: { readonly lead?: number } = {},
  ) {
    this.#heights = heights;
    const lead = Math.max(0, options.lead ?? 0);
    const n = lead + ids.length;
    this.#own = new Float64Array(n).fill(Number.NaN);
    this.#sum = new Float64Array(n + 1);
    this.#count = new Float64Array(n + 1);
    for (let i = lead; i < n; i++) {
      const h = heights.known(ids[i - lead]!);
      if (h === undefined) continue;
      this.#own[i] = h;
      this.#sum[i + 1] = h;
      this.#count[i + 1] = 1;
    }
    // Linear-time Fenwick construction: push each node's value into its parent.
    for (let i = 1; i <= n; i++) {
      const parent = i + (i & -i);
      if (parent <= n) {
        this.#sum[parent] = this.#sum[parent]! + this.#sum[i]!;
        this.#count[parent] = this.#count[parent]! + this.#count[i]!;
      }
    }
  }

  get length(): number {
    return this.#own.length;
  }

  get total(): number {
    return this.top(this.length);
  }

  /** Entry `index` was measured at `height` px. */
  note(index: number, height: number): void {
    if (index < 0 || index >= this.length) return;
    const old = this.#own[index]!;
    const measured = !Number.isNaN(old);
    this.#own[index] = height;
    const dSum = height - (measured ? old : 0);
    const dCount = measured ? 0 : 1;
    for (let i = index + 1; i <= this.length; i += i & -i) {
      this.#sum[i] = this.#sum[i]! + dSum;
      this.#count[i] = this.#count[i]! + dCount;
    }
  }

  /** Entry `i`'s virtual top (`i` = length: the list's height). */
  top(i: number): number {
    let k = Math.max(0, Math.min(i, this.length));
    const entries = k;
    let sum = 0;
    let count = 0;
    for (; k > 0; k -= k & -k) {
      sum += this.#sum[k]!;
      count += this.#count[k]!;
    }
    return sum + (entries - count) * this.#heights.estimate();
  }

  /** The entry at virtual position `y` (clamped into the list); -1 for an empty list. */
  indexAt(y: number): number {
    return indexAt(this, y);
  }
}
