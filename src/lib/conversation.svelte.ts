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

  constructor(
    readonly api: Comlink.Remote<EngineApi>,
    readonly tabId: string,
    readonly id: number,
  ) {
    this.#subscribe = createSubscriber(() => {
      let watchId: number | undefined;
      let stopped = false;
      void this.api
        .watch(
          this.tabId,
          this.id,
          Comlink.proxy((frame: WatchFrame) => {
            if (stopped) return;
            this.#view = applyFrame(this.#view, frame);
            this.frames++;
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

  get view(): ConversationView | undefined {
    this.#subscribe();
    return this.#view;
  }
}
