/**
 * Reading the files a person attaches to an input (worker/protocol/attachments.ts says what is
 * sent and the limits). Pure decisions plus the reads themselves; the composer's state is in
 * attachments.svelte.ts. Invariants:
 * - a file is judged by its name, type and size before a byte of it is read: one over its limit or
 *   of an unknown binary type is refused in words at once;
 * - an image is sent as its own bytes (base64) only if its type is one an input may carry; a
 *   text-like file as its text (decoded as UTF-8; one holding a NUL is binary and refused); a PDF as
 *   the text pdf.js extracts in the tab with its page count (pdf-text.ts, loaded only when a PDF is
 *   attached: it is not part of the tab's first JS);
 * - nothing here talks to the engine.
 */

import {
  ATTACHMENT_IMAGE_TYPES,
  ATTACHMENT_LIMITS,
  type AttachmentDraft,
  type AttachmentImageType,
  sizeInWords,
} from "../../worker/protocol/index.ts";

/** What kind of attachment a file would be, or why it cannot be one. */
export type FileVerdict =
  | { readonly kind: "image"; readonly mimeType: AttachmentImageType }
  | { readonly kind: "text"; readonly mimeType: string }
  | { readonly kind: "pdf" }
  | { readonly refused: string };

/** Extensions of text files whose type a browser often leaves empty or names oddly. */
const TEXT_EXTENSIONS = new Set(
  (
    "txt md markdown csv tsv json jsonl ndjson xml yaml yml toml ini cfg conf log html htm css scss " +
    "js mjs cjs jsx ts tsx svelte vue py rb go rs java kt c h cc cpp hpp cs swift php sh bash zsh sql " +
    "r lua pl dart scala ex exs erl hs ml clj el tex rst adoc org env gitignore dockerfile makefile"
  ).split(" "),
);
const TEXT_TYPES = new Set([
  "application/json",
  "application/ld+json",
  "application/xml",
  "application/x-yaml",
  "application/yaml",
  "application/toml",
  "application/javascript",
  "application/x-javascript",
  "application/typescript",
  "application/x-sh",
  "application/sql",
  "application/x-ndjson",
]);
const IMAGE_EXT: Readonly<Record<string, AttachmentImageType>> = {
  png: "image/png",
  jpg: "image/jpeg",
  jpeg: "image/jpeg",
  gif: "image/gif",
  webp: "image/webp",
};

function extension(name: string): string {
  const base = name.toLowerCase().split(/[\\/]/).pop() ?? "";
  const dot = base.lastIndexOf(".");
  return dot >= 0 ? base.slice(dot + 1) : base;
}

/** Judge a file by its name, type and size (nothing read yet). */
export function judgeFile(file: {
  readonly name: string;
  readonly type: string;
  readonly size: number;
}): FileVerdict {
  const type = file.type.toLowerCase();
  const ext = extension(file.name);
  const name = `"${file.name}"`;
  if (file.name.length > ATTACHMENT_LIMITS.nameChars)
    return {
      refused: `${name.slice(0, 40)}…: its name is longer than ${ATTACHMENT_LIMITS.nameChars} characters`,
    };
  const image = (ATTACHMENT_IMAGE_TYPES as readonly string[]).includes(type)
    ? (type as AttachmentImageType)
    : !type
      ? IMAGE_EXT[ext]
      : undefined;
  if (image) {
    if (file.size > ATTACHMENT_LIMITS.imageBytes)
      return {
        refused: `${name} is ${sizeInWords(file.size)}: an image can be at most ${sizeInWords(ATTACHMENT_LIMITS.imageBytes)}`,
      };
    if (file.size === 0) return { refused: `${name} is empty` };
    return { kind: "image", mimeType: image };
  }
  if (type.startsWith("image/"))
    return {
      refused: `${name} is a ${type.slice(6).toUpperCase()} image: only PNG, JPEG, GIF and WebP images can be attached`,
    };
  const pdf = type === "application/pdf" || ext === "pdf";
  const text = !pdf && (type.startsWith("text/") || TEXT_TYPES.has(type) || TEXT_EXTENSIONS.has(ext));
  if (!pdf && !text)
    return {
      refused: `${name} is a kind of file this app cannot read (${type || "unknown type"}): attach images, PDFs or text files`,
    };
  if (file.size > ATTACHMENT_LIMITS.fileBytes)
    return {
      refused: `${name} is ${sizeInWords(file.size)}: a file can be at most ${sizeInWords(ATTACHMENT_LIMITS.fileBytes)}`,
    };
  if (pdf) return { kind: "pdf" };
  return { kind: "text", mimeType: type || "text/plain" };
}

/** Bytes as base64 (in slices: a spread of millions of bytes would overflow the call stack). */
export function toBase64(bytes: Uint8Array): string {
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000)
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

/** A refusal found while reading a file (its words are shown on the file's chip). */
export class FileRefused extends Error {
  override readonly name = "FileRefused";
}

/** Read a judged file into what `run.submit` carries; throws `FileRefused` in words. */
export async function readAttachment(
  file: File,
  verdict: Exclude<FileVerdict, { refused: string }>,
): Promise<AttachmentDraft> {
  const name = file.name;
  if (verdict.kind === "image")
    return {
      kind: "image",
      name,
      mimeType: verdict.mimeType,
      size: file.size,
      data: toBase64(new Uint8Array(await file.arrayBuffer())),
    };
  if (verdict.kind === "text") {
    let text: string;
    try {
      text = new TextDecoder("utf-8", { fatal: true }).decode(await file.arrayBuffer());
    } catch {
      throw new FileRefused(`"${name}" is not UTF-8 text`);
    }
    if (text.includes("\u0000")) throw new FileRefused(`"${name}" is not text (it holds binary data)`);
    if (text.length > ATTACHMENT_LIMITS.textChars)
      throw new FileRefused(
        `"${name}" holds more than ${ATTACHMENT_LIMITS.textChars.toLocaleString("en")} characters`,
      );
    return { kind: "text", name, mimeType: verdict.mimeType, size: file.size, text };
  }
  const { pdfText } = await import("./pdf-text.ts");
  let extracted: { text: string; pages: number };
  try {
    extracted = await pdfText(new Uint8Array(await file.arrayBuffer()));
  } catch (error) {
    throw new FileRefused(`"${name}" could not be read as a PDF (${(error as Error).message || "damaged"})`);
  }
  if (extracted.text.length > ATTACHMENT_LIMITS.textChars)
    throw new FileRefused(
      `"${name}" holds more than ${ATTACHMENT_LIMITS.textChars.toLocaleString("en")} characters of text`,
    );
  return { kind: "pdf", name, size: file.size, pages: extracted.pages, text: extracted.text };
}
