/**
 * A conversation's view and the operations that change it: the one set of rules both the engine's
 * mount (core/observe.ts) and a tab's copy (through worker/protocol/) apply, so the two never drift.
 * Pure: no I/O, inputs are never mutated (a new view shares what did not change).
 * Rules: operations apply in order; entries apply one by one, a head marker restarting the active
 * range at its head (it is kept, with the non-marker entries from its head on), so a mounted view
 * keeps only what it held when a marker reaches back past its range (spec §12), while a view rebuilt
 * from the store is the newest marker's whole range (`activeRange`); a `doc` operation sets
 * a document, or deletes it when its value is undefined; a snapshot frame replaces the view.
 * A paged view (the tab's watch: core/pages.ts) carries only the newest entries of the active range
 * and counts the others (`older`); a page of them goes in front (`applyPage`). A head marker whose
 * head is at or after a carried entry leaves none of the uncarried ones in the range (`older` 0);
 * one whose head is before every carried entry keeps `older` as it was, then an upper bound (the
 * next page says how many there are).
 */
import type { ConversationRecord, EntryRecord, Json } from "./types.ts";

export interface ConversationView {
  readonly conversation: ConversationRecord;
  /** The active range: the newest head marker (if any) and the entries after its head. */
  readonly entries: readonly EntryRecord[];
  readonly docs: Readonly<Record<string, Json>>;
  /**
   * Entries of the active range before `entries` that this view does not carry (a paged view);
   * absent: it carries them all.
   */
  readonly older?: number;
}

/** One change to a view. `append` entries carry no head marker; `head` ones carry at least one. */
export type ViewChange =
  | { readonly op: "append"; readonly entries: readonly EntryRecord[] }
  | { readonly op: "head"; readonly entries: readonly EntryRecord[] }
  | { readonly op: "doc"; readonly name: string; readonly value: Json | undefined };

/** A view operation: a change, or `replace` (the frame carries the whole view). */
export type ViewOp = ViewChange | { readonly op: "replace" };

/** A frame that carries the whole view: a watch's first frame, and the frame after an overflow. */
export interface SnapshotFrame {
  readonly seq: number;
  readonly ops: readonly [{ readonly op: "replace" }];
  readonly value: ConversationView;
}

/** A frame that carries one commit's changes to the view. */
export interface ChangeFrame {
  readonly seq: number;
  readonly ops: readonly ViewChange[];
  readonly value?: undefined;
}

/** A watch frame on the wire. */
export type WatchFrame = SnapshotFrame | ChangeFrame;

/** Apply entries in order to an entry list, honouring head markers. */
export function applyEntries(
  entries: readonly EntryRecord[],
  appended: readonly EntryRecord[],
): readonly EntryRecord[] {
  let out = entries;
  let owned: EntryRecord[] | undefined;
  for (const e of appended) {
    const head = e.head;
    if (head !== undefined) {
      owned = [e, ...out.filter((x) => x.head === undefined && x.id >= head)];
    } else {
      owned ??= [...out];
      owned.push(e);
    }
    out = owned;
  }
  return out;
}

/**
 * The active range of a view read whole from the store (a mount's load): `entries` are every visible
 * entry from the newest head marker's head on, in id order. The newest marker leads, then the
 * non-marker entries from its head on; older markers drop out. Unlike `applyEntries`, which applies
 * markers one by one to what a view holds, this brings back entries an older marker had cut when
 * the newest one reaches back past it (spec §12: a mounted view keeps its held entries until it is
 * rebuilt; a rebuilt view is the range as stored).
 */
export function activeRange(entries: readonly EntryRecord[]): readonly EntryRecord[] {
  let marker: EntryRecord | undefined;
  for (const e of entries) if (e.head !== undefined) marker = e;
  if (!marker) return entries;
  const head = marker.head!;
  return [marker, ...entries.filter((e) => e.head === undefined && e.id >= head)];
}

/** Apply changes in order; returns `view` itself when there are none. */
export function applyViewChanges(view: ConversationView, changes: readonly ViewChange[]): ConversationView {
  if (changes.length === 0) return view;
  let entries = view.entries;
  let docs: Record<string, Json> | undefined;
  let older = view.older ?? 0;
  for (const change of changes) {
    if (change.op === "doc") {
      docs ??= { ...view.docs };
      if (change.value === undefined) delete docs[change.name];
      else docs[change.name] = change.value;
    } else {
      if (older > 0 && change.op === "head") older = olderAfter(entries, change.entries, older);
      entries = applyEntries(entries, change.entries);
    }
  }
  return {
    conversation: view.conversation,
    entries,
    docs: docs ?? view.docs,
    ...(older > 0 ? { older } : {}),
  };
}

/**
 * `older` after head markers: the uncarried entries precede every carried non-marker entry, so a
 * marker whose head is at or after one of those leaves none of them in the range.
 */
function olderAfter(
  entries: readonly EntryRecord[],
  appended: readonly EntryRecord[],
  older: number,
): number {
  let first = Number.POSITIVE_INFINITY;
  for (const e of entries) if (e.head === undefined && e.id < first) first = e.id;
  for (const e of appended) {
    if (e.head !== undefined && e.head >= first) return 0;
    if (e.head === undefined && e.id < first) first = e.id;
  }
  return older;
}

/**
 * Put a page of older entries (core/pages.ts: those just before the view's first non-marker entry)
 * in front of a paged view; an entry it already carries (its head marker) stays once, in the page's
 * place. `older` becomes the page's.
 */
export function applyPage(
  view: ConversationView,
  page: { readonly entries: readonly EntryRecord[]; readonly older: number },
): ConversationView {
  const paged = new Set(page.entries.map((e) => e.id));
  const entries = [...page.entries, ...view.entries.filter((e) => !paged.has(e.id))];
  return {
    conversation: view.conversation,
    entries,
    docs: view.docs,
    ...(page.older > 0 ? { older: page.older } : {}),
  };
}

/** The entry a paged view's next older page ends before: its first non-marker entry. */
export function pageCursor(view: ConversationView): EntryRecord["id"] | undefined {
  return view.entries.find((e) => e.head === undefined)?.id;
}

/**
 * Apply a watch frame to a copy of the view: a snapshot replaces it; changes apply to it. Without a
 * view yet (a tab's copy before its first frame), changes have nothing to apply to: undefined.
 */
export function applyFrame(
  view: ConversationView | undefined,
  frame: WatchFrame,
): ConversationView | undefined {
  if (frame.value !== undefined) return frame.value;
  return view && applyViewChanges(view, frame.ops);
}

/** The wire form of a watch's frame: the whole view only when the frame replaces the view. */
export function watchFrame(frame: {
  readonly seq: number;
  readonly value: ConversationView;
  readonly ops: readonly ViewOp[];
}): WatchFrame {
  const changes: ViewChange[] = [];
  for (const op of frame.ops) {
    if (op.op === "replace") return { seq: frame.seq, ops: [op], value: frame.value };
    changes.push(op);
  }
  return { seq: frame.seq, ops: changes };
}
