/**
 * The chat's renderer of untrusted model text: markdown.ts's HTML passed through DOMPurify with an
 * allow-list of plain document tags (no images, forms, styles, SVG or event attributes survive, even
 * if the markdown step let one through). Loaded lazily (renderer.svelte.ts): it is the biggest part
 * of the tab's JavaScript and the shell does not need it to start.
 */
import DOMPurify from "dompurify";
import { markdownToHtml } from "./markdown.ts";

const ALLOWED_TAGS = [
  "a",
  "b",
  "blockquote",
  "br",
  "code",
  "del",
  "em",
  "h1",
  "h2",
  "h3",
  "h4",
  "h5",
  "h6",
  "hr",
  "i",
  "li",
  "ol",
  "p",
  "pre",
  "s",
  "strong",
  "table",
  "tbody",
  "td",
  "th",
  "thead",
  "tr",
  "ul",
];
const ALLOWED_ATTR = ["href", "title", "class", "rel", "target", "start", "align"];

/** Sanitized HTML for `text` (markdown), safe to insert with {@html}. */
export function renderMarkdown(text: string): string {
  return DOMPurify.sanitize(markdownToHtml(text), {
    ALLOWED_TAGS,
    ALLOWED_ATTR,
    ALLOW_DATA_ATTR: false,
    ALLOWED_URI_REGEXP: /^(?:https?:|mailto:|[^a-z]|[a-z+.-]+(?:[^a-z+.\-:]|$))/i,
  });
}
