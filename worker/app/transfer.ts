/**
 * Export and import of one conversation as versioned JSON: its entries (kind, data, model message,
 * head marker, edits, time) and a chosen set of its documents. No secret leaves: API keys live in the
 * settings conversation, which is never exported, and every stored key is redacted from the text as
 * a second guard. Import checks the whole file before writing anything and then writes it in one
 * commit as a new top-level conversation, renumbering entry ids (heads and edits follow); a malformed
 * or foreign file is refused with an `ImportRefused` that says what is wrong. A file may also carry
 * the user tools its conversation selects (`userTools`, sources only): the caller checks and stores
 * them, in the import's commit (`also`, which runs after the file's documents are written).
 * Attached files travel inside their user entries (worker/protocol/attachments.ts); import checks
 * every image block (plain base64, bounded, typed) and every attachment mark before it writes.
 */

import type { AgentHarness } from "../agent/harness.ts";
import { withoutSecret } from "../agent/services.ts";
import type { Tx } from "../core/define.ts";
import { HarnessError, InvalidTransition, NotJson } from "../core/errors.ts";
import type { ConversationId, EntryDraft, EntryEdit, EntryId, EntryRecord, Json } from "../core/types.ts";
import {
  ATTACHMENT_IMAGE_TYPES,
  ATTACHMENT_LIMITS,
  attachmentOf,
  sizeInWords,
} from "../protocol/attachments.ts";
import { base64Length } from "./attachments.ts";

export const EXPORT_FORMAT = "durable-agent/conversation";
export const EXPORT_VERSION = 1;
/** The largest file import reads (characters). */
export const MAX_IMPORT_CHARS = 64 * 1024 * 1024;
const MAX_ENTRIES = 200_000;
const KIND = /^[a-zA-Z][\w.-]{0,99}$/;

export interface ExportedEntry {
  /** The id in the exporting store: heads and edits refer to these. */
  readonly id: EntryId;
  readonly kind: string;
  readonly data?: Json;
  readonly model?: Json;
  readonly head?: EntryId;
  readonly edits?: readonly EntryEdit[];
  readonly timestamp?: number;
}

export interface ConversationExport {
  readonly format: typeof EXPORT_FORMAT;
  readonly version: typeof EXPORT_VERSION;
  readonly exportedAt: number;
  readonly entries: readonly ExportedEntry[];
  readonly documents: Readonly<Record<string, Json>>;
  /** The user tools the conversation selects (their sources), when it selects any. */
  readonly userTools?: readonly Json[];
}

/** A file that is not a conversation export this engine can read; nothing was written. */
export class ImportRefused extends HarnessError {
  override readonly name = "ImportRefused";
  constructor(reason: string) {
    super("import_refused", `This file cannot be imported: ${reason}. Nothing was written.`);
  }
}

function exportedEntry(e: EntryRecord): ExportedEntry {
  return {
    id: e.id,
    kind: e.kind,
    ...(e.data !== undefined ? { data: e.data } : {}),
    ...(e.model !== undefined ? { model: e.model } : {}),
    ...(e.head !== undefined ? { head: e.head } : {}),
    ...(e.edits !== undefined ? { edits: e.edits } : {}),
    ...(e.timestamp !== undefined ? { timestamp: e.timestamp } : {}),
  };
}

/** The conversation as export JSON text (pretty-printed), with `documents` among its documents. */
export async function exportConversation(
  h: AgentHarness,
  conversationId: ConversationId,
  options: { documents: readonly string[]; secrets: readonly string[]; userTools?: readonly Json[] },
): Promise<string> {
  const conversation = await h.requireLoadedConversation(conversationId);
  const entries = await conversation.entries();
  const documents: Record<string, Json> = {};
  for (const name of options.documents) {
    const value = await h.doc(conversationId, name);
    if (value !== undefined) documents[name] = value;
  }
  const file: ConversationExport = {
    format: EXPORT_FORMAT,
    version: EXPORT_VERSION,
    exportedAt: h.now(),
    entries: entries.map(exportedEntry),
    documents,
    ...(options.userTools?.length ? { userTools: options.userTools } : {}),
  };
  let text = JSON.stringify(file, null, 1);
  for (const secret of options.secrets) text = withoutSecret(text, secret);
  return text;
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** An entry's `model` is the list of messages it contributes: each with a role and text or blocks. */
function checkModel(model: unknown, where: string): void {
  if (!Array.isArray(model)) throw new ImportRefused(`${where}: its model messages are not a list`);
  for (const message of model) {
    if (!isObject(message) || typeof message["role"] !== "string")
      throw new ImportRefused(`${where}: a model message has no role`);
    const content = message["content"];
    if (typeof content === "string") continue;
    if (!Array.isArray(content) || !content.every((c) => isObject(c) && typeof c["type"] === "string"))
      throw new ImportRefused(`${where}: a model message's content is neither text nor a list of blocks`);
    for (const block of content as Record<string, unknown>[]) checkBlock(block, where);
  }
}

/** The longest image data an import takes (a tool's image may carry whitespace in its base64). */
const MAX_IMAGE_CHARS = Math.ceil((ATTACHMENT_LIMITS.fileBytes * 4) / 3) + 1024 * 1024;

/**
 * An image block (an attached image's, a tool result's) and an attachment's mark
 * (worker/protocol/attachments.ts): an image has data of a bounded size and a type; an attached one
 * is plain base64 of a type an input may carry and exactly as large as its mark says; a mark is
 * well-formed and sits on a block of its kind.
 */
function checkBlock(block: Record<string, unknown>, where: string): void {
  const marked = block["attachment"] !== undefined;
  const mark = attachmentOf(block);
  if (marked && !mark) throw new ImportRefused(`${where}: an attached file's description is malformed`);
  if (block["type"] === "image") {
    const data = block["data"];
    const type = block["mimeType"];
    if (typeof type !== "string" || type.length > 100 || typeof data !== "string")
      throw new ImportRefused(`${where}: an image has no data or no type`);
    if (data.length > MAX_IMAGE_CHARS)
      throw new ImportRefused(
        `${where}: an image is larger than ${sizeInWords(ATTACHMENT_LIMITS.fileBytes)}`,
      );
    if (mark) {
      const bytes = base64Length(data);
      if (bytes === undefined) throw new ImportRefused(`${where}: an attached image's data is not base64`);
      if (mark.kind !== "image" || !(ATTACHMENT_IMAGE_TYPES as readonly string[]).includes(type))
        throw new ImportRefused(`${where}: an attached image is of a type an input cannot carry (${type})`);
      if (bytes !== mark.size || bytes > ATTACHMENT_LIMITS.imageBytes)
        throw new ImportRefused(`${where}: an attached image's size does not match its data`);
    }
  } else if (mark) {
    if (block["type"] !== "text" || mark.kind === "image" || typeof block["text"] !== "string")
      throw new ImportRefused(`${where}: an attached file is not text`);
    if ((block["text"] as string).length > ATTACHMENT_LIMITS.textChars + 1000)
      throw new ImportRefused(`${where}: an attached file holds too much text`);
  }
}

/** Parse and check an export file completely; throws ImportRefused naming the first problem. */
export function parseExport(
  text: unknown,
  options: { documents: readonly string[]; userTools?: (carried: unknown) => void },
): ConversationExport {
  if (typeof text !== "string") throw new ImportRefused("it is not text");
  if (text.length > MAX_IMPORT_CHARS)
    throw new ImportRefused(`it is larger than ${MAX_IMPORT_CHARS / 1024 / 1024} MiB`);
  let file: unknown;
  try {
    file = JSON.parse(text);
  } catch {
    throw new ImportRefused("it is not JSON");
  }
  if (!isObject(file) || file["format"] !== EXPORT_FORMAT)
    throw new ImportRefused(`it is not a conversation export (format should be "${EXPORT_FORMAT}")`);
  const version = file["version"];
  if (typeof version === "number" && version > EXPORT_VERSION)
    throw new ImportRefused(`it was made by a newer version of the app (export version ${version})`);
  if (version !== EXPORT_VERSION)
    throw new ImportRefused(`its version ${JSON.stringify(version)} is unknown`);
  const entries = file["entries"];
  if (!Array.isArray(entries)) throw new ImportRefused("it has no entries list");
  if (entries.length > MAX_ENTRIES) throw new ImportRefused(`it has more than ${MAX_ENTRIES} entries`);
  const seen = new Set<number>();
  let previous = 0;
  entries.forEach((e: unknown, i) => {
    const where = `entry ${i + 1}`;
    if (!isObject(e)) throw new ImportRefused(`${where} is not an object`);
    const id = e["id"];
    if (!Number.isSafeInteger(id) || (id as number) <= previous)
      throw new ImportRefused(`${where}: ids must be increasing positive integers`);
    previous = id as number;
    if (typeof e["kind"] !== "string" || !KIND.test(e["kind"]))
      throw new ImportRefused(`${where}: its kind is invalid`);
    const head = e["head"];
    if (head !== undefined && !(head === id || seen.has(head as number)))
      throw new ImportRefused(`${where}: its head names no earlier entry of the file`);
    const edits = e["edits"];
    if (edits !== undefined) {
      if (!Array.isArray(edits)) throw new ImportRefused(`${where}: its edits are not a list`);
      for (const edit of edits)
        if (
          !isObject(edit) ||
          !seen.has(edit["target"] as number) ||
          (edit["action"] !== "omit" && edit["action"] !== "replace")
        )
          throw new ImportRefused(
            `${where}: an edit names no earlier entry of the file, or an unknown action`,
          );
    }
    if (e["model"] !== undefined) checkModel(e["model"], where);
    const timestamp = e["timestamp"];
    if (timestamp !== undefined && !Number.isFinite(timestamp))
      throw new ImportRefused(`${where}: its time is not a number`);
    seen.add(id as number);
  });
  const documents = file["documents"] ?? {};
  if (!isObject(documents)) throw new ImportRefused("its documents are not an object");
  for (const name of Object.keys(documents))
    if (!options.documents.includes(name))
      throw new ImportRefused(`it carries an unknown document ${JSON.stringify(name)}`);
  if (file["userTools"] !== undefined) {
    if (!options.userTools) throw new ImportRefused("it carries user tools, which this engine does not take");
    try {
      options.userTools(file["userTools"]);
    } catch (error) {
      throw new ImportRefused(`a user tool it carries is invalid: ${(error as Error).message}`);
    }
  }
  return file as unknown as ConversationExport;
}

/** Write a checked export as a new top-level conversation, in one commit; returns its id. */
export async function importConversation(
  h: AgentHarness,
  file: ConversationExport,
  options: { also?: (tx: Tx, conversationId: ConversationId) => void } = {},
): Promise<ConversationId> {
  try {
    return await h.transaction((tx) => {
      const record = tx.createConversation({ kind: "ownerless" });
      for (const [name, value] of Object.entries(file.documents)) tx.writeDoc(record.id, name, value);
      options.also?.(tx, record.id);
      const ids = new Map<EntryId, EntryId>();
      for (const e of file.entries) {
        // The new entry's id is the next one: a head naming the entry itself maps to it.
        const next = tx.lastEntryId() + 1;
        const draft: EntryDraft = {
          kind: e.kind,
          ...(e.data !== undefined ? { data: e.data } : {}),
          ...(e.model !== undefined ? { model: e.model } : {}),
          ...(e.head !== undefined ? { head: e.head === e.id ? next : ids.get(e.head)! } : {}),
          ...(e.edits !== undefined
            ? { edits: e.edits.map((edit) => ({ ...edit, target: ids.get(edit.target)! })) }
            : {}),
          ...(e.timestamp !== undefined ? { timestamp: e.timestamp } : {}),
        };
        ids.set(e.id, tx.appendEntry(record.id, draft).id);
      }
      return record.id;
    });
  } catch (error) {
    // The commit rolled back. What the file's content broke is said in the import's words; a store
    // failure (quota, I/O) stays what it is.
    if (error instanceof InvalidTransition || error instanceof NotJson)
      throw new ImportRefused(error.message);
    throw error;
  }
}
