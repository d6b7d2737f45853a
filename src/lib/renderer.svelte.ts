/**
 * The lazily loaded markdown renderer (render.ts with marked and DOMPurify) as reactive state: the
 * chat waits for it before showing a transcript, so a message is never shown first as raw text and
 * then re-rendered. Loading starts once and is shared by every component.
 */
type Render = (markdown: string) => string;

class Renderer {
  render = $state.raw<Render | undefined>(undefined);
  #loading: Promise<void> | undefined;

  load(): Promise<void> {
    this.#loading ??= import("./render.ts").then((m) => {
      this.render = m.renderMarkdown;
    });
    return this.#loading;
  }
}

export const renderer = new Renderer();
