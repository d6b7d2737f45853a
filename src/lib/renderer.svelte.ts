/**
 * The lazily loaded markdown renderer (render.ts with marked and DOMPurify) as reactive state: the
 * chat waits for it before showing a transcript, so a message is never shown first as raw text and
 * then re-rendered. Loading starts once and is shared by every component.
 * Each text is rendered once: the HTML is kept (the newest MEMO_SIZE texts), so an entry entering
 * the transcript's window again, or a conversation opened again, costs no parse and no sanitize.
 */
import { memoized } from "./memo.ts";

type Render = (markdown: string) => string;

/** How many rendered texts are kept (a few windows' worth of a long chat's entries). */
export const MEMO_SIZE = 2000;

class Renderer {
  render = $state.raw<Render | undefined>(undefined);
  #loading: Promise<void> | undefined;

  load(): Promise<void> {
    this.#loading ??= import("./render.ts").then((m) => {
      this.render = memoized(m.renderMarkdown, MEMO_SIZE);
    });
    return this.#loading;
  }
}

export const renderer = new Renderer();
