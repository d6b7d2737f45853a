/**
 * One conversation's committed view in the tab. It subscribes only while something reads it
 * (createSubscriber), applies the engine's frames in order, and resolves each frame's promise only
 * after applying it, so the engine's bounded queue is what limits a slow tab. The view is paged (the
 * engine's first frame carries the newest entries and counts the rest in `older`): `loadOlder`
 * fetches the entries before the loaded ones, one request at a time, and puts them in front. A page
 * asked for before a frame that replaced the view or moved its start (a head marker) is dropped: it
 * may not fit any more (the reader's next scroll asks again).
 */
import { createSubscriber } from "svelte/reactivity";
import {
  applyFrame,
  applyPage,
  type ConversationView,
  type EngineApi,
  errorMessage,
  pageCursor,
  type WatchFrame,
} from "../../worker/protocol/index.ts";

/** Entries asked for in one older page: at least, and at most. */
export const OLDER_PAGE = 250;
export const OLDER_PAGE_MAX = 1000;

export class ConversationState {
  #view = $state.raw<ConversationView | undefined>(undefined);
  frames = $state.raw(0);
  /** The engine has no conversation of this id (an unknown or stale deep link). */
  missing = $state.raw(false);
  /** The watch could not start for another reason (said in words). */
  error = $state.raw<string | undefined>(undefined);
  #subscribe: () => void;
  #listed = false;
  /** Frames that replaced the view or moved its start since the watch began (a page asked before is stale). */
  #moves = 0;
  #loading = false;

  constructor(
    readonly api: Pick<EngineApi, "watches">,
    readonly id: number,
  ) {
    this.#subscribe = createSubscriber(() => {
      let watchId: number | undefined;
      let stopped = false;
      // Marks for the browser bench: the watch asked for, its first frame received and applied.
      performance.mark("watch:asked");
      void this.api.watches
        .conversation(this.id, (frame: WatchFrame) => {
          if (stopped) return;
          const first = this.#view === undefined;
          if (first) performance.mark("watch:received");
          if (frame.value !== undefined || frame.ops.some((op) => op.op === "head")) this.#moves++;
          this.#view = applyFrame(this.#view, frame);
          this.frames++;
          // The first frame's size too (the e2e checks it is a page, not the whole history).
          if (first)
            performance.mark("watch:applied", {
              detail: { entries: this.#view?.entries.length ?? 0, older: this.#view?.older ?? 0 },
            });
        })
        .then(
          (id) => {
            watchId = id;
            if (stopped) void this.api.watches.unwatch(id);
          },
          (e: unknown) => {
            // Errors cross the wire as Errors that keep their name (worker/protocol/wire.ts).
            if (e instanceof Error && e.name === "UnknownConversation") this.missing = true;
            else this.error = errorMessage(e);
          },
        );
      return () => {
        stopped = true;
        if (watchId !== undefined) void this.api.watches.unwatch(watchId);
      };
    });
  }

  /**
   * Follow the conversation list: once this conversation was listed, its leaving the list means it
   * was deleted (here or in another tab), and the view says so instead of showing a stale transcript.
   * (Conversations a task owns are never listed, so they are never taken for deleted.)
   */
  noteList(list: readonly { id: number }[]): void {
    const listed = list.some((c) => c.id === this.id);
    if (listed) this.#listed = true;
    else if (this.#listed) this.missing = true;
  }

  get view(): ConversationView | undefined {
    this.#subscribe();
    return this.#view;
  }

  /** Entries of the active range before `view.entries` not loaded yet. */
  get older(): number {
    return this.view?.older ?? 0;
  }

  /**
   * Load at least `count` (within OLDER_PAGE..OLDER_PAGE_MAX) of the older entries, unless a load is
   * under way or none are left; resolves when the page is in (or dropped).
   */
  async loadOlder(count: number = OLDER_PAGE): Promise<void> {
    const view = this.#view;
    const before = view && (view.older ?? 0) > 0 ? pageCursor(view) : undefined;
    if (this.#loading || before === undefined) return;
    this.#loading = true;
    const moves = this.#moves;
    try {
      const limit = Math.min(OLDER_PAGE_MAX, Math.max(OLDER_PAGE, Math.ceil(count)));
      const page = await this.api.watches.entriesBefore(this.id, before, limit);
      if (this.#moves === moves && this.#view) {
        this.#view = applyPage(this.#view, page);
        // For the browser bench: when each older page went in (its long tasks are told apart by it).
        performance.mark("page:applied", { detail: { entries: page.entries.length, older: page.older } });
      }
    } catch (e) {
      this.error = errorMessage(e);
    } finally {
      this.#loading = false;
    }
  }
}
