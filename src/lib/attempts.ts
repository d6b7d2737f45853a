/**
 * Failed attempts, shown quietly. The engine keeps every classified attempt of a model turn as a
 * pi.assistant entry (errors are data), so a turn that failed twice before a network wait or a retry
 * countdown leaves two failed answers in the transcript. This folds them, for display only: the
 * consecutive failed attempts of one turn that the turn went on from become one item (its first
 * entry stands for the group), while a turn's last failure (the run failed) stays an entry of its own.
 * A partial answer a reload or crash cut short is an aborted attempt of its turn (spec §8.3: the
 * turn's next request converts it) and folds the same way once the turn has answered after it; while
 * that request is still under way it stays listed, so what was streamed before the reload is on
 * screen right after it. A partial the person stopped ends its turn, so it stays listed.
 * Invariants: presentation only (the entries are not changed, only which of them are listed and how);
 * every entry is either listed or in exactly one group; groups keep the entries' order.
 */
import type { EntryRecord } from "../../worker/protocol/index.ts";
import { modelMessages } from "../../worker/protocol/index.ts";

type Listed = Pick<EntryRecord, "id" | "kind" | "model" | "byTaskId">;

export interface FoldedEntries<E extends Listed> {
  /** The entries to list: a group of failed attempts is listed as its first entry. */
  readonly shown: E[];
  /** The groups of failed attempts the turn went on from, by the id of the entry that lists them. */
  readonly attempts: ReadonlyMap<number, readonly E[]>;
}

export interface FoldOptions {
  /** The task of the model turn running now (pi.live's generation): its last failure is not its last word. */
  readonly liveTurn?: number | undefined;
}

/** Why an attempt failed, as the provider said it (or "error"), and when (the answer's time, if known). */
export function attemptOf(entry: Pick<EntryRecord, "model" | "timestamp">): { error: string; at?: number } {
  const m = modelMessages(entry)[0];
  const error = (m?.role === "assistant" && m.errorMessage) || "error";
  const at = entry.timestamp ?? m?.timestamp;
  return at === undefined ? { error } : { error, at };
}

const aborted = (entry: Listed): boolean => {
  const m = modelMessages(entry)[0];
  return m?.role === "assistant" && m.stopReason === "aborted";
};

const failed = (entry: Listed): boolean => {
  if (entry.kind !== "pi.assistant") return false;
  const m = modelMessages(entry)[0];
  return m?.role === "assistant" && (m.stopReason === "error" || m.stopReason === "aborted");
};

/**
 * Fold `entries` (in transcript order): a failed attempt whose turn (the task that wrote it) made
 * another attempt after it, or is still running, joins the group of such failures just before it.
 */
export function foldFailedAttempts<E extends Listed>(
  entries: readonly E[],
  options: FoldOptions = {},
): FoldedEntries<E> {
  // The last attempt each turn made: a failure there ended the turn, unless the turn still runs.
  const lastOfTurn = new Map<number, number>();
  for (const e of entries)
    if (e.kind === "pi.assistant" && e.byTaskId !== undefined) lastOfTurn.set(e.byTaskId, e.id);
  const wentOn = (e: E) =>
    failed(e) &&
    e.byTaskId !== undefined &&
    (lastOfTurn.get(e.byTaskId) !== e.id || (e.byTaskId === options.liveTurn && !aborted(e)));

  const shown: E[] = [];
  const attempts = new Map<number, E[]>();
  let group: E[] | undefined;
  for (const e of entries) {
    if (!wentOn(e)) {
      group = undefined;
      shown.push(e);
    } else if (group && group[0]?.byTaskId === e.byTaskId) {
      group.push(e);
    } else {
      group = [e];
      attempts.set(e.id, group);
      shown.push(e);
    }
  }
  return { shown, attempts };
}
