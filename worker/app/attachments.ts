/**
 * The engine's check of the files attached to an input (worker/protocol/attachments.ts says what a
 * draft is and how it is stored). The door bounded each draft's shape, size and count (schema.ts);
 * this module judges what the shape cannot say, and builds the user message's content. Invariants:
 * - it runs before the submit's commit writes anything, and inside it: a refusal is an
 *   `AttachmentRefused` whose message says why in words (which file, which limit), and the commit
 *   rolls back whole (no entry, no submission, no title);
 * - an image is stored only when its data is plain base64 whose decoded length is its stated size
 *   and whose first bytes are those of its stated type (a renamed file is refused, not sent);
 * - an image is refused for a model whose `input` does not include "image" (said in words, naming
 *   the model): a person expects the model to see what they attached, never a silent drop;
 * - text (a text file's, a PDF's) holds no NUL character (binary data is refused) and goes to the
 *   model after a heading with the file's name;
 * - the total an input stores is bounded (`ATTACHMENT_LIMITS.totalBytes`), so one commit stays a
 *   bounded transaction whatever the door let through.
 */

import type { ImageContent, TextContent, UserMessage } from "@mariozechner/pi-ai";
import { HarnessError } from "../core/errors.ts";
import {
  ATTACHMENT_IMAGE_TYPES,
  ATTACHMENT_LIMITS,
  type AttachmentDraft,
  type AttachmentMark,
  attachmentHeading,
  attachmentOf,
  sizeInWords,
} from "../protocol/attachments.ts";

/** Why an attachment was refused: the file, a limit, or the model. */
export type AttachmentRefusal = "too_many" | "too_large" | "bad_type" | "bad_data" | "text_only_model";

/** An input's attachment the engine will not take; nothing was written. */
export class AttachmentRefused extends HarnessError {
  override readonly name = "AttachmentRefused";
  constructor(
    readonly reason: AttachmentRefusal,
    message: string,
  ) {
    super(`attachment_refused:${reason}`, message);
  }
}

/** The model an input goes to, as far as attachments care. */
export interface AttachmentModel {
  /** Its name in words ("Llama 4 Scout 17B"). */
  readonly name: string;
  readonly input: readonly string[];
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** The first bytes each image type starts with (checked on the decoded data). */
const SIGNATURES: Readonly<Record<string, (b: Uint8Array) => boolean>> = {
  "image/png": (b) => b[0] === 0x89 && b[1] === 0x50 && b[2] === 0x4e && b[3] === 0x47,
  "image/jpeg": (b) => b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff,
  "image/gif": (b) => b[0] === 0x47 && b[1] === 0x49 && b[2] === 0x46 && b[3] === 0x38,
  "image/webp": (b) =>
    b[0] === 0x52 && b[1] === 0x49 && b[2] === 0x46 && b[3] === 0x46 && b[8] === 0x57 && b[9] === 0x45,
};

/** The decoded length of plain base64 text, or undefined when it is not plain base64. */
export function base64Length(data: string): number | undefined {
  if (data.length % 4 !== 0 || !BASE64.test(data)) return undefined;
  return (data.length / 4) * 3 - (data.endsWith("==") ? 2 : data.endsWith("=") ? 1 : 0);
}

/** The first `n` decoded bytes of base64 text (n a multiple of 3). */
function firstBytes(data: string, n: number): Uint8Array {
  const head = atob(data.slice(0, (n / 3) * 4));
  return Uint8Array.from(head, (c) => c.charCodeAt(0));
}

/** A stored block: pi-ai content plus the mark the transcript reads (providers ignore it). */
type Marked<T> = T & { readonly attachment: AttachmentMark };

function checkImage(draft: Extract<AttachmentDraft, { kind: "image" }>): Marked<ImageContent> {
  const name = JSON.stringify(draft.name);
  if (!(ATTACHMENT_IMAGE_TYPES as readonly string[]).includes(draft.mimeType))
    throw new AttachmentRefused(
      "bad_type",
      `${name} is a ${draft.mimeType} image; only PNG, JPEG, GIF and WebP images can be attached`,
    );
  if (draft.size > ATTACHMENT_LIMITS.imageBytes)
    throw new AttachmentRefused(
      "too_large",
      `${name} is ${sizeInWords(draft.size)}; an image can be at most ${sizeInWords(ATTACHMENT_LIMITS.imageBytes)}`,
    );
  const length = base64Length(draft.data);
  if (length === undefined || length !== draft.size)
    throw new AttachmentRefused(
      "bad_data",
      `${name} did not arrive whole (its data is damaged); attach it again`,
    );
  if (!SIGNATURES[draft.mimeType]?.(firstBytes(draft.data, 12)))
    throw new AttachmentRefused("bad_type", `${name} is not the ${draft.mimeType} image its type says`);
  return {
    type: "image",
    data: draft.data,
    mimeType: draft.mimeType,
    attachment: { kind: "image", name: draft.name, size: draft.size },
  };
}

function checkText(draft: Exclude<AttachmentDraft, { kind: "image" }>): Marked<TextContent> {
  const name = JSON.stringify(draft.name);
  if (draft.size > ATTACHMENT_LIMITS.fileBytes)
    throw new AttachmentRefused(
      "too_large",
      `${name} is ${sizeInWords(draft.size)}; a file can be at most ${sizeInWords(ATTACHMENT_LIMITS.fileBytes)}`,
    );
  if (draft.text.length > ATTACHMENT_LIMITS.textChars)
    throw new AttachmentRefused(
      "too_large",
      `${name} holds more than ${ATTACHMENT_LIMITS.textChars.toLocaleString("en")} characters of text`,
    );
  if (draft.text.includes("\u0000"))
    throw new AttachmentRefused("bad_type", `${name} is not text (it holds binary data)`);
  return {
    type: "text",
    text: `${attachmentHeading(draft)}\n\n${draft.text}`,
    attachment: {
      kind: draft.kind,
      name: draft.name,
      size: draft.size,
      ...(draft.kind === "pdf" ? { pages: draft.pages } : {}),
    },
  };
}

/**
 * The user message's content for `text` with `attachments` (checked; throws `AttachmentRefused`):
 * the text as given when nothing is attached, else a list of blocks, the text first.
 * `model` is the model the input goes to (undefined: unknown here, its generation says so).
 */
export function inputContent(
  text: string,
  attachments: readonly AttachmentDraft[] | undefined,
  model: AttachmentModel | undefined,
): UserMessage["content"] {
  if (!attachments || attachments.length === 0) return text;
  if (attachments.length > ATTACHMENT_LIMITS.files)
    throw new AttachmentRefused(
      "too_many",
      `${attachments.length} files were attached; a message takes at most ${ATTACHMENT_LIMITS.files}`,
    );
  const blocks: (TextContent | ImageContent)[] = text ? [{ type: "text", text }] : [];
  let total = 0;
  for (const draft of attachments) {
    if (typeof draft !== "object" || draft === null || typeof draft.name !== "string")
      throw new AttachmentRefused("bad_data", "an attachment is not a file");
    const name = JSON.stringify(draft.name);
    if (draft.kind === "image") {
      if (model && !model.input.includes("image"))
        throw new AttachmentRefused(
          "text_only_model",
          `${model.name} reads text only, so it cannot see the image ${name}. Choose a model that accepts images, or remove the image`,
        );
      blocks.push(checkImage(draft));
      total += draft.size;
    } else if (draft.kind === "text" || draft.kind === "pdf") {
      blocks.push(checkText(draft));
      total += draft.text.length;
    } else throw new AttachmentRefused("bad_type", `${name} is of a kind this app does not take`);
    if (total > ATTACHMENT_LIMITS.totalBytes)
      throw new AttachmentRefused(
        "too_large",
        `the files attached to one message come to more than ${sizeInWords(ATTACHMENT_LIMITS.totalBytes)}`,
      );
  }
  return blocks;
}

/**
 * The attached files of a stored user message's content, in order (each block with a well-formed
 * `attachment` mark: an image block, or a file's text block). Edit and resend keeps them by index.
 */
export function attachedBlocks(content: unknown): (TextContent | ImageContent)[] {
  if (!Array.isArray(content)) return [];
  return content.filter(
    (b): b is TextContent | ImageContent =>
      attachmentOf(b) !== undefined &&
      ((b as { type?: unknown }).type === "image" || (b as { type?: unknown }).type === "text"),
  );
}

/**
 * The content of an edited message that keeps `kept` (blocks `attachedBlocks` returned, already
 * checked when they were first stored): the text first, then the files. An image is refused again
 * for a model that reads text only (the new conversation's model may not be the one they were sent to).
 */
export function keptContent(
  text: string,
  kept: readonly (TextContent | ImageContent)[],
  model: AttachmentModel | undefined,
): UserMessage["content"] {
  if (kept.length === 0) return text;
  const image = kept.find((b) => b.type === "image");
  if (image && model && !model.input.includes("image"))
    throw new AttachmentRefused(
      "text_only_model",
      `${model.name} reads text only, so it cannot see the image ${JSON.stringify(attachmentOf(image)?.name)}. Choose a model that accepts images, or remove the image`,
    );
  return [...(text ? [{ type: "text" as const, text }] : []), ...kept];
}
