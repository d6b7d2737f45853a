/**
 * Windowing of a long transcript: which of its entries are in the DOM. Only the entries around what
 * the scroller shows are rendered; spacers above and below stand for the rest, sized from the heights
 * measured so far (by entry id) and, for entries never rendered, the average measured height.
 * Invariants: a window is a contiguous range `[start, end)` of the list; `before` + the rendered
 * entries' heights + `after` is the list's estimated height; a list shorter than the viewport is
 * rendered whole. Pure: the chat view (Chat.svelte) measures and scrolls.
 */

export interface ListWindow {
  /** The first entry rendered (an index into the list). */
  readonly start: number;
  /** One past the last entry rendered. */
  readonly end: number;
  /** Estimated height of the entries above the window (the top spacer), px. */
  readonly before: number;
  /** Estimated height of the entries below it (the bottom spacer), px. */
  readonly after: number;
}

export const EMPTY_WINDOW: ListWindow = { start: 0, end: 0, before: 0, after: 0 };

/** An entry's height before it was ever measured, when nothing has been measured yet. */
const FIRST_GUESS = 80;

/** Measured entry heights by entry id, and their mean (the guess for the others). */
export class Heights {
  readonly #known = new Map<number, number>();
  #sum = 0;

  /** Record a measured height; true when it differs from the one known by more than a pixel. */
  set(id: number, height: number): boolean {
    const old = this.#known.get(id);
    if (old !== undefined && Math.abs(old - height) <= 1) return false;
    this.#sum += height - (old ?? 0);
    this.#known.set(id, height);
    return true;
  }

  estimate(): number {
    return this.#known.size > 0 ? this.#sum / this.#known.size : FIRST_GUESS;
  }

  of(id: number): number {
    return this.#known.get(id) ?? this.estimate();
  }
}

/**
 * The window covering `[top, top + height]` of the list (px from the list's start) with `overscan`
 * px more on either side; `top` past the end (e.g. `Infinity`) means the tail: the newest entries.
 */
export function windowFor(
  ids: readonly number[],
  heights: Pick<Heights, "of">,
  view: { top: number; height: number; overscan: number },
): ListWindow {
  const sizes = ids.map((id) => heights.of(id));
  const total = sizes.reduce((a, b) => a + b, 0);
  const top = Math.max(0, Math.min(view.top, total - view.height));
  const from = top - view.overscan;
  const to = top + view.height + view.overscan;
  let start = 0;
  let before = 0;
  while (start < sizes.length - 1 && before + sizes[start]! <= from) before += sizes[start++]!;
  let end = start;
  let covered = before;
  while (end < sizes.length && covered < to) covered += sizes[end++]!;
  return { start, end, before, after: total - covered };
}

/** Whether two windows render the same entries with the same spacers (to the pixel). */
export function sameWindow(a: ListWindow, b: ListWindow): boolean {
  return (
    a.start === b.start &&
    a.end === b.end &&
    Math.round(a.before) === Math.round(b.before) &&
    Math.round(a.after) === Math.round(b.after)
  );
}
