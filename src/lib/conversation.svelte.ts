/**
 * One conversation's committed view in the tab. It subscribes only while something reads it
 * (createSubscriber), applies the engine's frames in order, and resolves each frame's promise only
 * after applying it, so the engine's bounded queue is what limits a slow tab.
 */
import * as Comlink from "comlink";
import { createSubscriber } from "svelte/reactivity";
import {
  applyFrame,
  type ConversationView,
  type EngineApi,
  errorMessage,
  type WatchFrame,
} from "../../worker/protocol.ts";

export class ConversationState {
  #view = $state.raw<ConversationView | undefined>(undefined);
  frames = $state.raw(0);
  /** The engine has no conversation of this id (an unknown or stale deep link). */
  missing = $state.raw(false);
  /** The watch could not start for another reason (said in words). */
  error = $state.raw<string | undefined>(undefined);
  #subscribe: () => void;
  #listed = false;

  constructor(
    readonly api: Comlink.Remote<EngineApi>,
    readonly tabId: string,
    readonly id: number,
  ) {
    this.#subscribe = createSubscriber(() => {
      let watchId: number | undefined;
      let stopped = false;
      // Marks for the browser bench: the watch asked for, its first frame received and applied.
      performance.mark("watch:asked");
      void this.api
        .watch(
          this.tabId,
          this.id,
          Comlink.proxy((frame: WatchFrame) => {
            if (stopped) return;
            const first = this.#view === undefined;
            if (first) performance.mark("watch:received");
            this.#view = applyFrame(this.#view, frame);
            this.frames++;
            if (first) performance.mark("watch:applied");
          }),
        )
        .then(
          (id) => {
            watchId = id;
            if (stopped) void this.api.unwatch(id);
          },
          (e: unknown) => {
            // Errors cross the wire as plain Errors that keep their name (Comlink).
            if (e instanceof Error && e.name === "UnknownConversation") this.missing = true;
            else this.error = errorMessage(e);
          },
        );
      return () => {
        stopped = true;
        if (watchId !== undefined) void this.api.unwatch(watchId);
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
}
