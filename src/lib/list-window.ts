/**
 * Windowing of a long transcript, the pure part: which entries are in the DOM and how tall the
 * spacers standing for the others are. Heights are measured per entry id; an entry never rendered
 * counts as the mean of the measured ones. Positions are "virtual": px from the first entry's top
 * with every entry at its known or estimated height.
 * Invariants: a window is a contiguous range `[start, end)`; `before` is the virtual position of
 * `start`, `after` the height of the entries from `end` on, so `before` + the window's heights +
 * `after` is the list's virtual height; a list of at most `wholeUpTo` entries is rendered whole.
 * Estimates are never trusted for what the reader sees: the view (lib/transcript-window.svelte.ts)
 * keeps an entry on screen where it was when measurements replace estimates above it.
 */

export interface ListWindow {
  /** The first entry rendered (an index into the list). */
  readonly start: number;
  /** One past the last entry rendered. */
  readonly end: number;
  /** Virtual height of the entries above the window (the top spacer), px. */
  readonly before: number;
  /** Virtual height of the entries below it (the bottom spacer), px. */
  readonly after: number;
}

export const EMPTY_WINDOW: ListWindow = { start: 0, end: 0, before: 0, after: 0 };

/** An entry's height before anything was measured. */
export const FIRST_GUESS = 80;

/** Measured entry heights by entry id, and their mean (the estimate for the others). */
export class Heights {
  readonly #known = new Map<number, number>();
  #sum = 0;
  #version = 0;

  /** Changes whenever a height (or the estimate) may have: a layout built before is stale. */
  get version(): number {
    return this.#version;
  }

  /** Record a measured height; true when it differs from the one known by more than half a pixel. */
  set(id: number, height: number): boolean {
    const old = this.#known.get(id);
    if (old !== undefined && Math.abs(old - height) <= 0.5) return false;
    this.#sum += height - (old ?? 0);
    this.#known.set(id, height);
    this.#version++;
    return true;
  }

  /** Forget every measurement (the width changed: every height may have). */
  clear(): void {
    this.#known.clear();
    this.#sum = 0;
    this.#version++;
  }

  estimate(): number {
    return this.#known.size > 0 ? this.#sum / this.#known.size : FIRST_GUESS;
  }

  of(id: number): number {
    return this.#known.get(id) ?? this.estimate();
  }

  /** The measured height of `id`, if any. */
  known(id: number): number | undefined {
    return this.#known.get(id);
  }
}

/** What a window is chosen from: entries' virtual tops (`Layout`, or the incremental `LiveLayout`). */
export interface VirtualLayout {
  readonly length: number;
  readonly total: number;
  top(i: number): number;
  indexAt(y: number): number;
}

/** The virtual layout of a list: each entry's top, and the whole height. */
export class Layout implements VirtualLayout {
  /** `tops[i]` is entry i's virtual top; `tops[n]` the list's height. */
  readonly #tops: Float64Array;

  constructor(ids: readonly number[], heights: Pick<Heights, "of">) {
    this.#tops = new Float64Array(ids.length + 1);
    for (let i = 0; i < ids.length; i++) this.#tops[i + 1] = this.#tops[i]! + heights.of(ids[i]!);
  }

  get length(): number {
    return this.#tops.length - 1;
  }

  get total(): number {
    return this.#tops[this.length]!;
  }

  /** Entry `i`'s virtual top (`i` = length: the list's height). */
  top(i: number): number {
    return this.#tops[Math.max(0, Math.min(i, this.length))]!;
  }

  /** The entry at virtual position `y` (clamped into the list); -1 for an empty list. */
  indexAt(y: number): number {
    return indexAt(this, y);
  }
}

/**
 * The entry of `layout` at virtual position `y`: the last one whose top is at or above it (0 above the
 * first entry, the last one below the list), -1 for an empty list. A binary search over the tops.
 */
export function indexAt(layout: Pick<VirtualLayout, "length" | "top">, y: number): number {
  if (layout.length === 0) return -1;
  let lo = 0;
  let hi = layout.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (layout.top(mid) <= y) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

export interface WindowOptions {
  /** Virtual position of the viewport's top; `Infinity` means the tail (the newest entries). */
  readonly top: number;
  /** The viewport's height, px. */
  readonly height: number;
  /** Rendered beyond the viewport on either side, px. */
  readonly overscan: number;
  /** Lists of at most this many entries are rendered whole. */
  readonly wholeUpTo: number;
}

/** The window covering the viewport at `top` and the overscan on either side. */
export function windowFor(layout: VirtualLayout, view: WindowOptions): ListWindow {
  const n = layout.length;
  if (n <= view.wholeUpTo) return { start: 0, end: n, before: 0, after: 0 };
  const top = Math.max(0, Math.min(view.top, layout.total - view.height));
  const start = layout.indexAt(top - view.overscan);
  const end = layout.indexAt(top + view.height + view.overscan) + 1;
  return { start, end, before: layout.top(start), after: layout.total - layout.top(end) };
}

/** Whether two windows render the same entries with the same spacers (to half a pixel). */
export function sameWindow(a: ListWindow, b: ListWindow): boolean {
  return (
    a.start === b.start &&
    a.end === b.end &&
    Math.abs(a.before - b.before) < 0.5 &&
    Math.abs(a.after - b.after) < 0.5
  );
}
