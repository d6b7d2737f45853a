/**
 * The files attached to the composer's next input (issue 31, part 3): each one's chip (name, size,
 * whether it is still being read, refused with why, or ready) until the input is sent or the file
 * removed. Files come from the picker, a drop or a paste (`add`); each is judged before it is read
 * (lib/attachments.ts) and read at once, so a refusal shows before the person sends. Invariants:
 * - at most `ATTACHMENT_LIMITS.files` chips: more files are refused in words, not silently dropped;
 * - `drafts()` is what `run.submit` carries: only ready files, in the order they were added;
 * - `ready` is false while any file is being read, so Send waits for it; refused chips never block
 *   a send (they are not sent) but stay until removed, so their words stay visible;
 * - `clear()` after a send the engine accepted; on a refusal the chips stay as they were.
 */

import { ATTACHMENT_LIMITS, type AttachmentDraft, LIMITS_IN_WORDS } from "../../worker/protocol/index.ts";
import { FileRefused, judgeFile, readAttachment } from "./attachments.ts";

export interface AttachmentChip {
  readonly id: number;
  readonly name: string;
  readonly size: number;
  readonly kind: "image" | "text" | "pdf" | "refused";
  readonly status: "reading" | "ready" | "refused";
  /** Why it is refused, in words. */
  readonly problem?: string;
  readonly draft?: AttachmentDraft;
  /** An image's data URL for the chip's thumbnail. */
  readonly preview?: string;
  /** A PDF's pages, for a chip without a draft (a stored message's file). */
  readonly pages?: number;
}

let nextId = 1;

export class ComposerAttachments {
  chips = $state.raw<readonly AttachmentChip[]>([]);

  /** Whether every attached file has been read (Send waits for this). */
  get ready(): boolean {
    return this.chips.every((c) => c.status !== "reading");
  }

  /** Whether something will be sent with the text. */
  get any(): boolean {
    return this.chips.some((c) => c.status === "ready");
  }

  /** The limits, for the picker's description. */
  readonly limits = LIMITS_IN_WORDS;

  /** Attach `files` (from the picker, a drop or a paste). */
  add(files: Iterable<File>): void {
    for (const file of files) {
      const id = nextId++;
      const counted = this.chips.filter((c) => c.status !== "refused").length;
      if (counted >= ATTACHMENT_LIMITS.files) {
        this.#put({
          id,
          name: file.name,
          size: file.size,
          kind: "refused",
          status: "refused",
          problem: `a message takes at most ${ATTACHMENT_LIMITS.files} files`,
        });
        continue;
      }
      const verdict = judgeFile(file);
      if ("refused" in verdict) {
        this.#put({
          id,
          name: file.name,
          size: file.size,
          kind: "refused",
          status: "refused",
          problem: verdict.refused,
        });
        continue;
      }
      this.#put({ id, name: file.name, size: file.size, kind: verdict.kind, status: "reading" });
      void readAttachment(file, verdict).then(
        (draft) =>
          this.#update(id, {
            status: "ready",
            draft,
            ...(draft.kind === "image" ? { preview: `data:${draft.mimeType};base64,${draft.data}` } : {}),
          }),
        (error: unknown) =>
          this.#update(id, {
            status: "refused",
            problem: error instanceof FileRefused ? error.message : `"${file.name}" could not be read`,
          }),
      );
    }
  }

  remove(id: number): void {
    this.chips = this.chips.filter((c) => c.id !== id);
  }

  clear(): void {
    this.chips = [];
  }

  /** What `run.submit` carries: the files read, in order. */
  drafts(): AttachmentDraft[] {
    return this.chips.flatMap((c) => (c.status === "ready" && c.draft ? [c.draft] : []));
  }

  #put(chip: AttachmentChip): void {
    this.chips = [...this.chips, chip];
  }

  #update(id: number, change: Partial<AttachmentChip>): void {
    // A chip removed while its file was read stays removed.
    this.chips = this.chips.map((c) => (c.id === id ? { ...c, ...change } : c));
  }
}
