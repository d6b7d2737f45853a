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
 *
 * A kept entry (one holding the focus, an edit box say) stays rendered wherever the reader scrolls:
 * outside the window it is rendered after or before the window's entries (in list order, so its
 * element never moves and keeps the focus) and placed out of the flow at its virtual position
 * (`keptTop`, px from the list's top); it is then neither measured nor an anchor.
 */
import { EMPTY_WINDOW, Heights, type ListWindow, sameWindow, windowFor } from "./list-window.ts";
import { LiveLayout } from "./live-layout.ts";

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
  /** The id of an entry to keep rendered (it holds the focus), if any. */
  readonly kept?: () => number | undefined;
}

export class TranscriptWindow {
  /** The entries rendered, `[start, end)` of `ids()`, and the spacers' heights. */
  range = $state.raw<ListWindow>(EMPTY_WINDOW);
  /**
   * The kept entry when it is outside the range: its index in `ids()` and its virtual top relative
   * to the range's first entry, px (negative above it).
   */
  kept = $state.raw<{ index: number; top: number } | undefined>(undefined);
  readonly #heights = new Heights();
  readonly #options: TranscriptWindowOptions;
  #scroller: HTMLElement | undefined;
  #list: HTMLElement | undefined;
  /** The entry the reader saw at the last update, to keep where it was. */
  #seen: Anchor | undefined;
  /** The scroll position the last update left (another one now: the reader scrolled). */
  #scrollTop = Number.NaN;
  #width = 0;
  /**
   * The layout of `ids` as of heights' `version`: kept across updates, each measurement noted into it
   * (O(log n)); built again when the ids changed (new entries) or heights changed behind it.
   */
  #layout: { ids: readonly number[]; version: number; layout: LiveLayout } | undefined;

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
    this.#layout = undefined;
    this.#seen = undefined;
    this.range = EMPTY_WINDOW;
    this.kept = undefined;
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
    const kept = this.kept;
    // The window's entries: the list's children but the kept entry outside the window.
    const children = [...list.children];
    const keptElement =
      kept === undefined ? undefined : kept.index < range.start ? children.shift() : children.pop();
    const rendered = children;
    const current =
      range.end <= ids.length &&
      rendered.length === range.end - range.start &&
      (kept === undefined || keptElement !== undefined);

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
    let index = -1;
    const live =
      this.#layout?.ids === ids && this.#layout.version === this.#heights.version ? this.#layout : undefined;
    if (current) {
      let top = rendered[0]?.getBoundingClientRect().top ?? box.top;
      for (let k = 0; k < rendered.length; k++) {
        const bottom = k + 1 < rendered.length ? rendered[k + 1]!.getBoundingClientRect().top : box.bottom;
        const id = ids[range.start + k]!;
        if (this.#heights.set(id, bottom - top)) live?.layout.note(range.start + k, bottom - top);
        if (!anchor && bottom > view.top && top < view.bottom) {
          anchor = { id, offset: top - view.top };
          index = range.start + k;
        }
        top = bottom;
      }
    }

    if (live) live.version = this.#heights.version;
    const layout = this.#layoutOf(ids);
    // The viewport's virtual top: from the entry on screen, or (a jump) from the scroll position.
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
    const keptId = this.#options.kept?.();
    const keptIndex = keptId === undefined ? -1 : ids.lastIndexOf(keptId);
    const outside = keptIndex >= 0 && (keptIndex < next.start || keptIndex >= next.end);
    const place = outside ? { index: keptIndex, top: layout.top(keptIndex) - next.before } : undefined;
    if (place?.index !== this.kept?.index || Math.abs((place?.top ?? 0) - (this.kept?.top ?? 0)) >= 0.5)
      this.kept = place;
  }

  /** The virtual layout of `ids` with the heights known now (built again only when either changed). */
  #layoutOf(ids: readonly number[]): LiveLayout {
    const version = this.#heights.version;
    const kept = this.#layout;
    if (kept && kept.ids === ids && kept.version === version) return kept.layout;
    const layout = new LiveLayout(ids, this.#heights);
    this.#layout = { ids, version, layout };
    return layout;
  }

  /** Scroll so the entry `anchor.id` is `anchor.offset` px below the scroller's top again. */
  #restore(
    anchor: Anchor,
    ids: readonly number[],
    scroller: HTMLElement,
    rendered: readonly Element[],
  ): void {
    const k = ids.indexOf(anchor.id) - this.range.start;
    const element = k >= 0 ? rendered[k] : undefined;
    if (!element) return;
    const moved = element.getBoundingClientRect().top - scroller.getBoundingClientRect().top - anchor.offset;
    if (Math.abs(moved) >= 0.5) scroller.scrollTop += moved;
  }
}
