/**
 * The app's multi-step intents, each one engine call and one commit. Job: what the user means as one
 * act (send a message to a conversation that has no title yet, edit a message and resend it as a
 * fork, start a named conversation, import a file) is written by one `transaction`, so a crash (a
 * reload of the only tab, a killed worker) leaves either none of it or all of it: never a
 * conversation without the input it was made for, an input without the title it names, or a fork
 * without the text it was made to resend. Invariants:
 * - every intent here commits exactly once; what it reads first (the entry before an edited one,
 *   documents to load) is read before that commit and never written;
 * - submissions go through `AgentHarness.submitIn`, so the agent's submission rules hold unchanged
 *   (a known requestId returns its submission, an input is placed when idle, queued by `whenBusy`
 *   when busy, `reject` on a busy conversation rolls the whole intent back);
 * - a conversation without a title takes one from its first input, in the commit that admits the
 *   input; a fork's title is its parent's with " (fork)", in the commit that makes it;
 * - an input's attached files (attachments.ts) are checked inside its commit: a refused file
 *   rolls the whole intent back, so nothing of the input is stored;
 * - no title written here spells a saved secret (secrets.ts): the first input, a typed title and an
 *   imported file's title are redacted with the secrets the same commit reads;
 * - a commit's callback writes only through `tx` (the session may run it twice when it must load
 *   documents first);
 * - none of them resumes a paused harness (the engine's runs from its open, app-agent.ts): the run
 *   an intent starts waits for `resume()` there, which is what lets a test count its commits.
 * The engine host (engine-host.ts) calls these; each returns what its engine call answers.
 */

import type { AgentChange } from "../agent/conversation/agent-change.ts";
import { configure } from "../agent/conversation/handles.ts";
import type { SubmissionDraft } from "../agent/conversation/inbox.ts";
import type { AgentHarness } from "../agent/harness.ts";
import { agentDoc, DOC, modelMessages } from "../agent/records.ts";
import type { Tx } from "../core/define.ts";
import { EntryNotVisible } from "../core/errors.ts";
import type { ConversationId, EntryId, SubmissionRecord } from "../core/types.ts";
import { attachmentOf } from "../protocol/attachments.ts";
import type { SubmitRequest } from "../protocol/index.ts";
import { type AttachmentModel, attachedBlocks, inputContent, keptContent } from "./attachments.ts";
import { MAX_TITLE, TITLE_DOC, titleFromInput } from "./conversation-list.ts";
import { importWithUserTools } from "./extensions.ts";
import { redactSecrets, savedSecrets } from "./secrets.ts";

const OWNERLESS = { ownership: { kind: "ownerless" } } as const;

/** A title as the user typed it: whitespace collapsed and trimmed; empty or too long is refused. */
export function checkTitle(title: unknown): string {
  const trimmed = typeof title === "string" ? title.replace(/\s+/g, " ").trim() : "";
  if (!trimmed) throw new TypeError("a conversation's title cannot be empty");
  if (trimmed.length > MAX_TITLE)
    throw new TypeError(`a conversation's title is at most ${MAX_TITLE} characters`);
  return trimmed;
}

/** Inside a commit: `text` without the saved secrets the commit sees. */
export function redactedIn(tx: Tx, text: string): string {
  return redactSecrets(
    text,
    savedSecrets((c, name) => tx.readDoc(c, name)),
  );
}

/** Inside a commit: a conversation without a title takes one from `text` (its first input). */
function titleFromFirstInput(tx: Tx, conversationId: ConversationId, text: string): void {
  // Redacted before it is cut to a title's length: a cut secret would keep its first characters.
  const title = titleFromInput(redactedIn(tx, text));
  if (title && tx.readDoc(conversationId, TITLE_DOC) === undefined)
    tx.writeDoc(conversationId, TITLE_DOC, { title });
}

/** Inside the commit that forks `parentId`: the fork's title is the parent's with " (fork)". */
export function forkTitle(tx: Tx, parentId: ConversationId, forkId: ConversationId): void {
  const parent = tx.readDoc<{ title?: string }>(parentId, TITLE_DOC)?.title;
  if (parent) tx.writeDoc(forkId, TITLE_DOC, { title: `${parent.slice(0, MAX_TITLE - 7)} (fork)` });
}

/**
 * The model an input to `conversationId` goes to, as attachments.ts judges it (inside a commit: the
 * conversation's model, else the harness's default; undefined when it does not resolve).
 */
function inputModel(h: AgentHarness, tx: Tx, conversationId: ConversationId): AttachmentModel | undefined {
  const ref = agentDoc.read(tx, conversationId).model ?? h.services.defaultModel;
  const model = ref ? h.services.models.resolve(ref) : undefined;
  return model ? { name: model.name || model.id, input: model.input } : undefined;
}

function inputDraft(
  h: AgentHarness,
  tx: Tx,
  conversationId: ConversationId,
  request: SubmitRequest,
): SubmissionDraft {
  const content = request.attachments?.length
    ? inputContent(request.text, request.attachments, inputModel(h, tx, conversationId))
    : request.text;
  return {
    type: "input",
    content,
    whenBusy: request.mode ?? "followUp",
    ...(request.requestId ? { requestId: request.requestId } : {}),
  };
}

/**
 * Inside a commit: submit `request` to the conversation and title it from the text if it has no
 * title. `kept`: files of an edited message that go with the text (edit and resend), instead of
 * new drafts.
 */
function submitTitledIn(
  h: AgentHarness,
  tx: Tx,
  conversationId: ConversationId,
  request: SubmitRequest,
  kept: readonly KeptBlock[] = [],
): SubmissionRecord {
  const draft: SubmissionDraft =
    kept.length > 0
      ? {
          type: "input",
          content: keptContent(request.text, kept, inputModel(h, tx, conversationId)),
          whenBusy: request.mode ?? "followUp",
        }
      : inputDraft(h, tx, conversationId, request);
  const record = h.submitIn(tx, conversationId, draft);
  // Files sent without words name the conversation by the first file.
  const firstFile = request.attachments?.[0]?.name ?? (kept[0] ? attachmentOf(kept[0])?.name : undefined);
  titleFromFirstInput(tx, conversationId, request.text.trim() || (firstFile ?? ""));
  return record;
}

type KeptBlock = ReturnType<typeof attachedBlocks>[number];

/**
 * The files of the user message `entryId` (visible in `conversationId`) that an edit keeps: all of
 * them when `keep` is undefined, else those at the indexes `keep` names (in the message's order).
 * Rejects with EntryNotVisible when the entry is not in the conversation's history, and with a
 * TypeError when `keep` names a file the message does not have.
 */
async function keptFiles(
  h: AgentHarness,
  conversationId: ConversationId,
  entryId: EntryId,
  keep: readonly number[] | undefined,
): Promise<KeptBlock[]> {
  const [entry] = await h.entries(conversationId, { afterId: entryId - 1, limit: 1 });
  if (entry?.id !== entryId) throw new EntryNotVisible(conversationId, entryId);
  const message = modelMessages(entry)[0];
  const files = message?.role === "user" ? attachedBlocks(message.content) : [];
  if (keep === undefined) return files;
  return [...new Set(keep)].map((i) => {
    const file = files[i];
    if (!file)
      throw new TypeError(
        `resendAsFork: the message has ${files.length === 1 ? "1 attached file" : `${files.length} attached files`}; there is no file ${i}`,
      );
    return file;
  });
}

/**
 * Submit an input; a conversation without a title takes one from it. One commit: the input's
 * admission (placed and its run started, or queued) and the title.
 */
export async function submitWithTitle(
  h: AgentHarness,
  conversationId: ConversationId,
  request: SubmitRequest,
): Promise<SubmissionRecord> {
  await h.requireLoadedConversation(conversationId);
  // The title check reads the conversation's documents: loaded before the commit, not inside it.
  await h.doc(conversationId, TITLE_DOC);
  return h.transaction((tx) => submitTitledIn(h, tx, conversationId, request));
}

/**
 * Edit and resend: a fork of `conversationId` at the entry just before `entryId` in its active range
 * (so it sees what the model saw then, without that message), with `text` submitted there, and the
 * message's attached files with it (all of them, or those `keep` names by index); when
 * `entryId` has nothing before it, a new conversation with the source's model, thinking level and
 * instructions takes the text. One commit: the new conversation, its settings, its title and the
 * input (placed, its run started). The text may be empty when a file is kept. Resolves with the new
 * conversation's id. Rejects like `forkConversation` (UnknownConversation, EntryNotVisible), or with
 * `AttachmentRefused` (an image kept for a text-only model), and then writes nothing.
 */
export async function resendAsFork(
  h: AgentHarness,
  conversationId: ConversationId,
  entryId: EntryId,
  text: string,
  keep?: readonly number[],
): Promise<ConversationId> {
  if (!Number.isInteger(conversationId) || !Number.isInteger(entryId))
    throw new TypeError("resendAsFork takes a conversation id and an entry id (integers)");
  if (typeof text !== "string") throw new TypeError("resendAsFork needs the text to send");
  if (keep !== undefined && (!Array.isArray(keep) || !keep.every((i) => Number.isInteger(i) && i >= 0)))
    throw new TypeError("resendAsFork keeps files by their indexes (integers from 0)");
  await h.requireLoadedConversation(conversationId);
  const kept = await keptFiles(h, conversationId, entryId, keep);
  if (!text.trim() && kept.length === 0)
    throw new TypeError("resendAsFork needs the text to send or a file to keep");
  const request: SubmitRequest = { text: text.trim() ? text : "" };
  const before = (await h.entryPage(conversationId, { before: entryId, limit: 1 })).entries.at(-1);
  if (before) {
    const fork = await h.forkConversation(conversationId, before.id, {
      ...OWNERLESS,
      init: (tx, id) => {
        forkTitle(tx, conversationId, id);
        submitTitledIn(h, tx, id, request, kept);
      },
    });
    return fork.id;
  }
  // The source's settings are read inside the commit; its documents are loaded first.
  await h.doc(conversationId, DOC.agent);
  const created = await h.createConversation({
    ...OWNERLESS,
    init: (tx, id) => {
      const source = agentDoc.read(tx, conversationId);
      const copied: AgentChange = {
        ...(source.model ? { model: source.model } : {}),
        ...(source.thinkingLevel ? { thinkingLevel: source.thinkingLevel } : {}),
        ...(source.instructions !== undefined ? { instructions: source.instructions } : {}),
      };
      if (Object.keys(copied).length > 0) configure(tx, id, copied);
      submitTitledIn(h, tx, id, request, kept);
    },
  });
  return created.id;
}

/** A new top-level conversation, titled when `title` is given (checked first). One commit. */
export async function createTitled(h: AgentHarness, title?: string): Promise<ConversationId> {
  const checked = title ? checkTitle(title) : undefined;
  const c = await h.createConversation({
    ...OWNERLESS,
    ...(checked ? { init: (tx, id) => tx.writeDoc(id, TITLE_DOC, { title: redactedIn(tx, checked) }) } : {}),
  });
  return c.id;
}

/**
 * Import a conversation file (with the user tools it carries, extensions.ts); one without a title
 * is called "Imported conversation". One commit: the conversation, its entries, the tools, the title.
 */
export function importTitled(
  h: AgentHarness,
  text: string,
  options: { documents: readonly string[] },
): Promise<ConversationId> {
  return importWithUserTools(h, text, {
    documents: options.documents,
    also: (tx, id) => {
      const title = (tx.readDoc(id, TITLE_DOC) as { title?: unknown } | undefined)?.title;
      if (typeof title !== "string") tx.writeDoc(id, TITLE_DOC, { title: "Imported conversation" });
      else if (redactedIn(tx, title) !== title) tx.writeDoc(id, TITLE_DOC, { title: redactedIn(tx, title) });
    },
  });
}
