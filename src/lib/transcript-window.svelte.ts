/**
 * The transcript's window in the DOM (Chat.svelte): only the entries around what the scroller shows
 * are rendered, between two spacers that stand for the rest (lib/list-window.ts chooses them).
 *
 * Scroll anchoring: each update notes the first rendered entry on screen and its offset from the
 * scroller's top. At the next update, unless the scroll position changed in between (the reader
 * scrolled: then what they scrolled to is what counts), the scroller is moved so that entry is
 * exactly there again. So a new window, a measured height replacing an estimate above the reader,
 * or an entry above growing never moves what they see, and the scroll position stays "virtual top +
 * a constant": scrolled to 0 is the first entry. The browser's own anchoring is off on the scroller
 * (`overflow-anchor: none`) so the two never both adjust. With no rendered entry on screen (a jump:
 * Home, the scrollbar dragged, scrollTop set), the window is taken from the scroll position. Pinned
 * (following the stream), the window is the tail and Chat scrolls to the bottom.
 */
import { EMPTY_WINDOW, Heights, Layout, type ListWindow, sameWindow, windowFor } from "./list-window.ts";

/** An entry the reader sees, by id, and its top's offset from the scroller's top edge, px. */
interface Anchor {
  readonly id: number;
  readonly offset: number;
}

export interface TranscriptWindowOptions {
  /** The shown entries' ids, oldest first (entries are only ever appended). */
  readonly ids: () => readonly number[];
  /** Following the stream: the window is the newest entries. */
  readonly pinned: () => boolean;
  /** Rendered beyond the viewport on either side, px. */
  readonly overscan?: number;
  /** Lists of at most this many entries are rendered whole (find-in-page finds everything). */
  readonly wholeUpTo?: number;
}

export class TranscriptWindow {
  /** The entries rendered, `[start, end)` of `ids()`, and the spacers' heights. */
  range = $state.raw<ListWindow>(EMPTY_WINDOW);
  readonly #heights = new Heights();
  readonly #options: TranscriptWindowOptions;
  #scroller: HTMLElement | undefined;
  #list: HTMLElement | undefined;
  /** The entry the reader saw at the last update, to keep where it was. */
  #seen: Anchor | undefined;
  /** The scroll position the last update left (another one now: the reader scrolled). */
  #scrollTop = Number.NaN;
  #width = 0;

  constructor(options: TranscriptWindowOptions) {
    this.#options = options;
  }

  /** Use these elements (the scroller and the list of rendered entries); the returned function stops. */
  attach(scroller: HTMLElement, list: HTMLElement): () => void {
    this.#scroller = scroller;
    this.#list = list;
    const resized = new ResizeObserver(() => this.sync());
    resized.observe(scroller);
    resized.observe(list);
    return () => {
      resized.disconnect();
      if (this.#scroller === scroller) this.#scroller = undefined;
      if (this.#list === list) this.#list = undefined;
    };
  }

  /** Another conversation: nothing measured, nothing rendered. */
  reset(): void {
    this.#heights.clear();
    this.#seen = undefined;
    this.range = EMPTY_WINDOW;
  }

  /**
   * Bring the window up to date (after a scroll, a resize, new entries or a DOM update): put the
   * entry the reader saw back where it was (unless they scrolled since), measure the rendered
   * entries, note the entry on screen now, and choose the window for where the reader is.
   */
  sync(): void {
    const ids = this.#options.ids();
    const pinned = this.#options.pinned();
    const scroller = this.#scroller;
    const list = this.#list;
    if (!scroller || !list) return;
    const range = this.range;
    const rendered = list.children;
    const current = range.end <= ids.length && rendered.length === range.end - range.start;

    if (this.#seen && current && !pinned && scroller.scrollTop === this.#scrollTop)
      this.#restore(this.#seen, ids, scroller, rendered);
    this.#seen = undefined;
    this.#scrollTop = scroller.scrollTop;

    if (scroller.clientWidth !== this.#width) {
      this.#width = scroller.clientWidth;
      this.#heights.clear();
    }

    // Measure what is rendered (each entry up to the next one's top, so margins count once) and
    // note the first entry on screen.
    const view = scroller.getBoundingClientRect();
    const box = list.getBoundingClientRect();
    let anchor: Anchor | undefined;
    if (current) {
      let top = rendered[0]?.getBoundingClientRect().top ?? box.top;
      for (let k = 0; k < rendered.length; k++) {
        const bottom = k + 1 < rendered.length ? rendered[k + 1]!.getBoundingClientRect().top : box.bottom;
        const id = ids[range.start + k]!;
        this.#heights.set(id, bottom - top);
        if (!anchor && bottom > view.top && top < view.bottom) anchor = { id, offset: top - view.top };
        top = bottom;
      }
    }

    const layout = new Layout(ids, this.#heights);
    // The viewport's virtual top: from the entry on screen, or (a jump) from the scroll position.
    const index = anchor ? ids.indexOf(anchor.id) : -1;
    const top =
      anchor && index >= 0 ? layout.top(index) - anchor.offset : view.top - (box.top - range.before);
    const next = windowFor(layout, {
      top: pinned ? Number.POSITIVE_INFINITY : top,
      height: scroller.clientHeight,
      overscan: this.#options.overscan ?? 1200,
      wholeUpTo: this.#options.wholeUpTo ?? 120,
    });
    this.#seen = anchor;
    if (!sameWindow(next, range)) this.range = next;
  }

  /** Scroll so the entry `anchor.id` is `anchor.offset` px below the scroller's top again. */
  #restore(anchor: Anchor, ids: readonly number[], scroller: HTMLElement, rendered: HTMLCollection): void {
    const k = ids.indexOf(anchor.id) - this.range.start;
    const element = k >= 0 ? rendered[k] : undefined;
    if (!element) return;
    const moved = element.getBoundingClientRect().top - scroller.getBoundingClientRect().top - anchor.offset;
    if (Math.abs(moved) >= 0.5) scroller.scrollTop += moved;
  }
}
