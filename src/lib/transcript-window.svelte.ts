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
 *
 * A paged transcript (the engine's watch carries the newest entries: lib/conversation.svelte.ts)
 * has `older()` entries before `ids()` not loaded yet: they count in the layout at the estimated
 * height (the top spacer stands for them) and are never rendered; positions (`range`, `kept.index`)
 * count them, so a page loaded in front leaves the rendered entries at their positions. When the
 * window comes within PREFETCH entries of them, `loadOlder(n)` asks for the `n` it needs.
 */
import { EMPTY_WINDOW, Heights, type ListWindow, sameWindow, windowFor } from "./list-window.ts";
import { LiveLayout } from "./live-layout.ts";

/** Ask for older entries once the window comes this close to them (entries). */
export const PREFETCH = 100;

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
  /** Entries before `ids()` not loaded yet (a paged transcript); absent: none. */
  readonly older?: () => number;
  /** Load at least `count` of the older entries (called again while the window still wants them). */
  readonly loadOlder?: (count: number) => void;
}

export class TranscriptWindow {
  /**
   * The entries rendered, `[start, end)` of the list's positions (`older()` unloaded ones, then
   * `ids()`), and the spacers' heights.
   */
  range = $state.raw<ListWindow>(EMPTY_WINDOW);
  /**
   * The kept entry when it is outside the range: its id, its position, and its virtual top relative
   * to the range's first entry, px (negative above it).
   */
  kept = $state.raw<{ id: number; index: number; top: number } | undefined>(undefined);
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
  #layout: { ids: readonly number[]; older: number; version: number; layout: LiveLayout } | undefined;

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

  /**
   * The entries to render, in list order, from `shown` (the entries of `ids()`): the window's, and
   * the kept entry (outside the window) before or after them.
   */
  rows<T extends { readonly id: number }>(shown: readonly T[]): T[] {
    const older = this.#options.older?.() ?? 0;
    const slice = shown.slice(Math.max(0, this.range.start - older), Math.max(0, this.range.end - older));
    const kept = this.kept;
    const entry = kept && shown[kept.index - older];
    if (!kept || entry?.id !== kept.id) return slice;
    return kept.index < this.range.start ? [entry, ...slice] : [...slice, entry];
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
    const older = this.#options.older?.() ?? 0;
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
    // The position of `ids[0]`: the rendered entries are `ids` from `range.start - older` on.
    const first = range.start - older;
    const current =
      first >= 0 &&
      range.end - older <= ids.length &&
      rendered.length === range.end - range.start &&
      (kept === undefined || keptElement !== undefined);

    if (this.#seen && current && !pinned && scroller.scrollTop === this.#scrollTop)
      this.#restore(this.#seen, ids, first, scroller, rendered);
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
      this.#layout?.ids === ids &&
      this.#layout.older === older &&
      this.#layout.version === this.#heights.version
        ? this.#layout
        : undefined;
    if (current) {
      let top = rendered[0]?.getBoundingClientRect().top ?? box.top;
      for (let k = 0; k < rendered.length; k++) {
        const bottom = k + 1 < rendered.length ? rendered[k + 1]!.getBoundingClientRect().top : box.bottom;
        const id = ids[first + k]!;
        if (this.#heights.set(id, bottom - top)) live?.layout.note(range.start + k, bottom - top);
        if (!anchor && bottom > view.top && top < view.bottom) {
          anchor = { id, offset: top - view.top };
          index = range.start + k;
        }
        top = bottom;
      }
    }

    if (live) live.version = this.#heights.version;
    const layout = this.#layoutOf(ids, older);
    // The viewport's virtual top: from the entry on screen, or (a jump) from the scroll position.
    const top =
      anchor && index >= 0 ? layout.top(index) - anchor.offset : view.top - (box.top - range.before);
    const wanted = windowFor(layout, {
      top: pinned ? Number.POSITIVE_INFINITY : top,
      height: scroller.clientHeight,
      overscan: this.#options.overscan ?? 1200,
      wholeUpTo: this.#options.wholeUpTo ?? 120,
    });
    // Never the unloaded entries: the top spacer stands for them until their page is here.
    const next = older > 0 ? clampTo(layout, wanted, older) : wanted;
    if (older > 0 && wanted.start < older + PREFETCH)
      this.#options.loadOlder?.(older - wanted.start + PREFETCH);
    this.#seen = anchor;
    if (!sameWindow(next, range)) this.range = next;
    const keptId = this.#options.kept?.();
    const keptAt = keptId === undefined ? -1 : ids.lastIndexOf(keptId);
    const keptIndex = keptAt < 0 ? -1 : older + keptAt;
    const outside = keptIndex >= 0 && (keptIndex < next.start || keptIndex >= next.end);
    const place =
      outside && keptId !== undefined
        ? { id: keptId, index: keptIndex, top: layout.top(keptIndex) - next.before }
        : undefined;
    if (
      place?.index !== this.kept?.index ||
      place?.id !== this.kept?.id ||
      Math.abs((place?.top ?? 0) - (this.kept?.top ?? 0)) >= 0.5
    )
      this.kept = place;
  }

  /**
   * The virtual layout of `older` unloaded entries and `ids` with the heights known now (built again
   * only when any of them changed).
   */
  #layoutOf(ids: readonly number[], older: number): LiveLayout {
    const version = this.#heights.version;
    const kept = this.#layout;
    if (kept && kept.ids === ids && kept.older === older && kept.version === version) return kept.layout;
    const layout = new LiveLayout(ids, this.#heights, { lead: older });
    this.#layout = { ids, older, version, layout };
    return layout;
  }

  /** Scroll so the entry `anchor.id` is `anchor.offset` px below the scroller's top again. */
  #restore(
    anchor: Anchor,
    ids: readonly number[],
    first: number,
    scroller: HTMLElement,
    rendered: readonly Element[],
  ): void {
    const k = ids.indexOf(anchor.id) - first;
    const element = k >= 0 ? rendered[k] : undefined;
    if (!element) return;
    const moved = element.getBoundingClientRect().top - scroller.getBoundingClientRect().top - anchor.offset;
    if (Math.abs(moved) >= 0.5) scroller.scrollTop += moved;
  }
}

/** `window` without the first `older` positions (unloaded): they join the top spacer. */
function clampTo(layout: LiveLayout, window: ListWindow, older: number): ListWindow {
  const start = Math.max(window.start, older);
  const end = Math.max(window.end, start);
  return { start, end, before: layout.top(start), after: layout.total - layout.top(end) };
}
