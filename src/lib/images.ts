/**
 * Images in the transcript (a tool result's or a user message's image blocks: base64 data with a
 * MIME type, pi-ai's ImageContent). Invariants: only raster types a browser decodes without running
 * anything are shown (no SVG, whose markup could carry script or load other resources), only as a
 * `data:` URL built from data that is plain base64; anything else is described in words, never
 * given to the DOM as a URL.
 */

/** The image types shown inline. */
export const SHOWN_IMAGE_TYPES: ReadonlySet<string> = new Set([
  "image/png",
  "image/jpeg",
  "image/gif",
  "image/webp",
  "image/avif",
  "image/bmp",
]);

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

export interface ImageBlock {
  readonly data: string;
  readonly mimeType: string;
}

export type ShownImage =
  | { readonly shown: true; readonly src: string; readonly label: string }
  | { readonly shown: false; readonly label: string };

/** How an image block appears: a `data:` URL for a safe raster type, otherwise a line of words. */
export function showImage(image: ImageBlock): ShownImage {
  const type = String(image.mimeType ?? "")
    .toLowerCase()
    .trim();
  const data = typeof image.data === "string" ? image.data.replace(/\s+/g, "") : "";
  const kind = type.startsWith("image/") ? type.slice("image/".length) : type || "unknown type";
  if (!SHOWN_IMAGE_TYPES.has(type))
    return { shown: false, label: `An image of type ${kind}, not shown (only raster images are)` };
  if (data.length === 0 || data.length % 4 !== 0 || !BASE64.test(data))
    return { shown: false, label: `An image (${kind}) whose data is damaged, not shown` };
  const bytes = Math.floor((data.length * 3) / 4) - (data.endsWith("==") ? 2 : data.endsWith("=") ? 1 : 0);
  return { shown: true, src: `data:${type};base64,${data}`, label: `Image (${kind}, ${sizeInWords(bytes)})` };
}

function sizeInWords(bytes: number): string {
  if (bytes < 1024) return `${bytes} bytes`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)} MB`;
}
