/**
 * Markdown to HTML for untrusted model text, the pure half of the chat's renderer (render.ts adds
 * DOMPurify on top). Invariants, before any sanitizer runs: raw HTML in the text is escaped (shown
 * as text, never parsed), a link or image whose URL is not http(s), mailto or a relative path keeps
 * only its text, and images never load (they become links to their source). No DOM needed.
 * marked treats the text after an inline `<script>`, `<pre>`, `<code>` or `<kbd>` tag as raw (it
 * marks it `escaped` and passes it through): here every text is escaped like any other.
 */
import { Marked, Renderer, type Tokens } from "marked";

const plain = new Renderer();

const SAFE_URL = /^(?:https?:|mailto:|[^:]*$)/i;

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** A URL a link may point to (http, https, mailto or relative); anything else is dropped. */
export function safeUrl(href: string): string | undefined {
  // Control characters and spaces inside a scheme ("java\tscript:") are ignored by browsers.
  const compact = [...href].filter((c) => c.charCodeAt(0) > 0x20).join("");
  return SAFE_URL.test(compact) ? href : undefined;
}

const marked = new Marked({
  gfm: true,
  breaks: false,
  async: false,
  renderer: {
    html({ text }: Tokens.HTML | Tokens.Tag): string {
      return escapeHtml(text);
    },
    text(token: Tokens.Text | Tokens.Escape): string {
      if ("tokens" in token && token.tokens) return this.parser.parseInline(token.tokens);
      // Never raw: marked's default escaping, whatever state the lexer was in.
      return plain.text({ ...token, escaped: false } as Tokens.Text);
    },
    link({ href, title, tokens }: Tokens.Link): string {
      const inner = this.parser.parseInline(tokens);
      const url = safeUrl(href);
      if (url === undefined) return inner;
      const t = title ? ` title="${escapeHtml(title)}"` : "";
      return `<a href="${escapeHtml(url)}"${t} rel="noopener noreferrer nofollow" target="_blank">${inner}</a>`;
    },
    image({ href, text }: Tokens.Image): string {
      const url = safeUrl(href);
      const label = escapeHtml(text || "image");
      return url === undefined
        ? label
        : `<a href="${escapeHtml(url)}" rel="noopener noreferrer nofollow" target="_blank">${label}</a>`;
    },
  },
});

/** The HTML of `text` read as GitHub-flavoured markdown, with the invariants above. */
export function markdownToHtml(text: string): string {
  return marked.parse(text, { async: false });
}
