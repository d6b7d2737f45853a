/**
 * Attachments to an input (issue 31 part 3): what a tab sends with `run.submit`, the limits both
 * sides state in words, and how an attached file looks inside a stored user message. Types,
 * constants and pure readers only (the tab's bundle carries them); the engine checks a draft in
 * worker/app/attachments.ts and the door bounds its shape in schema.ts. Invariants:
 * - an attachment is given to the model as pi-ai content of the user message it came with: an image
 *   as an image block (`{ type: "image", data, mimeType }`, base64), a text-like file or a PDF's
 *   extracted text as a text block that starts with the file's name; each such block carries an
 *   `attachment` mark (name, size, kind, a PDF's pages) that providers ignore and the transcript
 *   reads to show a thumbnail or a file chip instead of the raw text;
 * - the bytes live in that entry: a fork sees its parent's entries without copying them, an export
 *   carries them, and deleting the conversation deletes them;
 * - the limits below are the same words for the tab (which refuses before reading a file) and the
 *   engine (which refuses before anything is stored).
 */

/** The image types an input may carry (raster types every vision model and browser read). */
export const ATTACHMENT_IMAGE_TYPES = ["image/png", "image/jpeg", "image/gif", "image/webp"] as const;
export type AttachmentImageType = (typeof ATTACHMENT_IMAGE_TYPES)[number];

export const ATTACHMENT_LIMITS = {
  /** Files attached to one input. */
  files: 8,
  /** A file as picked (a PDF, a text file): larger ones are refused before they are read. */
  fileBytes: 20 * 1024 * 1024,
  /** An image's bytes, which are stored and sent to the model with every later request. */
  imageBytes: 5 * 1024 * 1024,
  /** The text of one file (a text file's, a PDF's extracted text), in characters. */
  textChars: 500_000,
  /** What one input stores of all its attachments (image bytes and text characters). */
  totalBytes: 20 * 1024 * 1024,
  /** A file's name, in characters. */
  nameChars: 255,
  /** A PDF's pages. */
  pages: 10_000,
} as const;

/** The largest base64 text of an image within `ATTACHMENT_LIMITS.imageBytes`. */
export const MAX_IMAGE_BASE64 = Math.ceil(ATTACHMENT_LIMITS.imageBytes / 3) * 4;

/** A file attached to an input, as the tab read it (`SubmitRequest.attachments`). */
export type AttachmentDraft =
  | {
      readonly kind: "image";
      readonly name: string;
      readonly mimeType: AttachmentImageType;
      /** The image's bytes. */
      readonly size: number;
      /** The bytes, base64. */
      readonly data: string;
    }
  | {
      readonly kind: "text";
      readonly name: string;
      readonly mimeType: string;
      /** The file's bytes. */
      readonly size: number;
      readonly text: string;
    }
  | {
      readonly kind: "pdf";
      readonly name: string;
      /** The file's bytes. */
      readonly size: number;
      readonly pages: number;
      /** Its text, extracted in the tab (pdf.js). */
      readonly text: string;
    };

/** The mark a stored content block of an attachment carries. */
export interface AttachmentMark {
  readonly kind: "image" | "text" | "pdf";
  readonly name: string;
  readonly size: number;
  readonly pages?: number;
}

/** A size in words: "312 bytes", "4.2 KB", "1.5 MB". */
export function sizeInWords(bytes: number): string {
  if (bytes < 1024) return `${bytes} bytes`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)} MB`;
}

/** The limits in words, for the composer and for refusals. */
export const LIMITS_IN_WORDS =
  `up to ${ATTACHMENT_LIMITS.files} files a message; images (PNG, JPEG, GIF, WebP) up to ` +
  `${sizeInWords(ATTACHMENT_LIMITS.imageBytes)}; text files and PDFs up to ${sizeInWords(ATTACHMENT_LIMITS.fileBytes)}`;

/** The line a file's text block starts with (the model reads the file's name in it). */
export function attachmentHeading(draft: Exclude<AttachmentDraft, { kind: "image" }>): string {
  return draft.kind === "pdf"
    ? `Attached PDF "${draft.name}" (${draft.pages} ${draft.pages === 1 ? "page" : "pages"}, ${sizeInWords(draft.size)}; its text):`
    : `Attached file "${draft.name}" (${draft.mimeType || "text"}, ${sizeInWords(draft.size)}):`;
}

/** A content block's attachment mark, when it is a well-formed one (stored data is not trusted). */
export function attachmentOf(block: unknown): AttachmentMark | undefined {
  if (typeof block !== "object" || block === null) return undefined;
  const mark = (block as { attachment?: unknown }).attachment;
  if (typeof mark !== "object" || mark === null) return undefined;
  const { kind, name, size, pages } = mark as Record<string, unknown>;
  if (kind !== "image" && kind !== "text" && kind !== "pdf") return undefined;
  if (typeof name !== "string" || typeof size !== "number" || !Number.isFinite(size)) return undefined;
  return {
    kind,
    name,
    size,
    ...(typeof pages === "number" && Number.isInteger(pages) ? { pages } : {}),
  };
}

/** A text block's text without its attachment heading (what the transcript shows inside a file chip). */
export function attachmentBody(text: string): string {
  const nl = text.indexOf("\n\n");
  return nl >= 0 ? text.slice(nl + 2) : text;
}
