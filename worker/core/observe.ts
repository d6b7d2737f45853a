/**
 * Observation of committed state. A `Watch` delivers frames one at a time, waiting for the
 * consumer's promise before the next; it keeps at most `limit` undelivered frames, and when one more
 * arrives the whole undelivered backlog is replaced by a single frame holding the newest value, so a
 * stalled consumer costs bounded memory and never slows the producer. A `ConversationMount` keeps a
 * conversation's view (entries of the active range and documents) current from published change
 * sets, applying them by the rules of view-ops.ts (the ones a tab applies too); it is shared by every
 * observer of that conversation. Besides watches it serves `MountObserver`s (the agent's event
 * adapter): attached atomically with the view it returns, each is called synchronously, in commit
 * order, with every published change set and the view before and after it. When its conversation
 * is deleted, every watch and observer of the mount ends with "deleted". A paged mount (`page`
 * given: the tab's watch) reads only the newest `page` entries of the active range and counts the
 * rest (`view.older`, core/pages.ts), so opening a long conversation never reads its whole history;
 * its watchers fetch older pages themselves.
 */
import { HarnessClosed, UnknownConversation } from "./errors.ts";
import { newestHead, readVisibleEntries } from "./fork.ts";
import { readActivePage } from "./pages.ts";
import type { Session } from "./session.ts";
import type { ChangeSet, ConversationId, Json } from "./types.ts";
import {
  activeRange,
  applyViewChanges,
  type ConversationView,
  type ViewChange,
  type ViewOp,
} from "./view-ops.ts";

export type { ConversationView, ViewChange, ViewOp } from "./view-ops.ts";

export const WATCH_FRAME_LIMIT = 100;

export interface Frame<V> {
  readonly seq: number;
  readonly value: V;
  readonly ops: readonly ViewOp[];
}

export type WatchEnd = "stopped" | "closed" | "listener_error" | "deleted";

/**
 * A synchronous observer of a conversation mount. `change` runs on the publication path for every
 * published change set (also those that leave the view as it was: `after === before` then), so it
 * must be quick and must not throw; `end` runs once when the mount is closed under it.
 */
export interface MountObserver {
  change(change: ChangeSet, before: ConversationView, after: ConversationView): void;
  end(reason: WatchEnd): void;
}

/** An attached observer: the view it starts from, and `detach` (idempotent). */
export interface MountAttachment {
  readonly view: ConversationView;
  detach(): void;
}

export class Watch<V> {
  #pending: Frame<V>[] = [];
  #listener: ((frame: Frame<V>) => unknown) | undefined;
  #delivering = false;
  #ended: WatchEnd | undefined;
  #resolveClosed!: (end: WatchEnd) => void;
  /** Resolves with the reason the watch ended. */
  readonly closed = new Promise<WatchEnd>((r) => {
    this.#resolveClosed = r;
  });
  /** Frames replaced by an overflow since the watch began (for diagnostics and tests). */
  collapsed = 0;

  constructor(
    /** The value at acquisition; advances just before each delivery. */
    public value: V,
    readonly limit = WATCH_FRAME_LIMIT,
    readonly onEnd: () => void = () => undefined,
  ) {}

  get pending(): number {
    return this.#pending.length;
  }

  /** Install the sole listener; delivery starts on a later tick, never inline. */
  start(listener: (frame: Frame<V>) => unknown): void {
    if (this.#listener) throw new Error("a watch has one listener");
    this.#listener = listener;
    queueMicrotask(() => void this.#deliver());
  }

  push(frame: Frame<V>): void {
    if (this.#ended) return;
    if (this.#pending.length >= this.limit) {
      this.collapsed += this.#pending.length;
      this.#pending = [{ seq: frame.seq, value: frame.value, ops: [{ op: "replace" }] }];
    } else {
      this.#pending.push(frame);
    }
    if (this.#listener && !this.#delivering) queueMicrotask(() => void this.#deliver());
  }

  async #deliver(): Promise<void> {
    if (this.#delivering || !this.#listener) return;
    this.#delivering = true;
    try {
      while (!this.#ended && this.#pending.length > 0) {
        const frame = this.#pending.shift()!;
        this.value = frame.value;
        try {
          await this.#listener(frame);
        } catch {
          this.#end("listener_error");
        }
      }
    } finally {
      this.#delivering = false;
    }
  }

  stop(): Promise<WatchEnd> {
    this.#end("stopped");
    return this.closed;
  }

  end(reason: WatchEnd): void {
    this.#end(reason);
  }

  #end(reason: WatchEnd): void {
    if (this.#ended) return;
    this.#ended = reason;
    this.#pending = [];
    this.onEnd();
    this.#resolveClosed(reason);
  }
}

export class ConversationMount {
  #view: ConversationView | undefined;
  #watches = new Set<Watch<ConversationView>>();
  #observers = new Set<MountObserver>();
  /**
   * Observers that took this mount and wait for it to be ready: they count as observing, so a last
   * observer stopping meanwhile does not drop the mount they are about to join (draw 31b).
   */
  #joining = 0;
  #ready: Promise<void> | undefined;
  #unsubscribe: (() => void) | undefined;
  #buffer: ChangeSet[] | undefined = [];
  #readSeq = 0;
  /** Set by endAll: a watch or observer asked before it and still loading is refused, never left attached to a dead mount. */
  #ended: WatchEnd | undefined;

  constructor(
    readonly session: Session,
    readonly conversationId: ConversationId,
    readonly onIdle: () => void,
    /** Carry only this many of the newest entries (a paged view); absent: the whole active range. */
    readonly page?: number,
  ) {}

  /** Load the view once: subscribe first, then read; changes after the read point are replayed. */
  ready(): Promise<void> {
    this.#ready ??= (async () => {
      this.#unsubscribe = this.session.subscribe((change) => this.#onChange(change));
      // First access to the conversation's documents: load them into both the published records
      // and the line's copy (loading only the former left commits on the conversation retrying a
      // load that never came, forever).
      await this.session.ensureDocs(this.conversationId);
      const { entries, conversation, docs, older } = await this.session.store.read(async (sql) => {
        this.#readSeq = this.session.records.seq;
        const records = this.session.records;
        const segments = this.session.segments(this.conversationId);
        const conversation = records.conversations.get(this.conversationId);
        // Deleted between the caller's check and this read.
        if (!conversation) throw new UnknownConversation(this.conversationId);
        const docs: Record<string, Json> = {};
        const prefix = `${this.conversationId}:`;
        for (const [key, value] of records.docs)
          if (key.startsWith(prefix)) docs[key.slice(prefix.length)] = value;
        if (this.page !== undefined) {
          const page = await readActivePage(sql, segments, { limit: this.page });
          return { conversation, docs, entries: page.entries, older: page.older };
        }
        // The active range starts at the newest head marker's head, which may be older than the
        // marker itself (a compaction keeps the entries from its first kept one on); a fork's
        // history runs on into its parent's, through its entry (fork.ts).
        const start = (await newestHead(sql, segments)) ?? 0;
        const entries = await readVisibleEntries(sql, segments, { afterId: start - 1 });
        return { conversation, docs, entries: activeRange(entries), older: 0 };
      });
      this.#view = { conversation, entries, docs, ...(older > 0 ? { older } : {}) };
      const buffered = this.#buffer ?? [];
      this.#buffer = undefined;
      for (const change of buffered) if (change.seq > this.#readSeq) this.#onChange(change);
    })();
    this.#ready.catch(() => {
      this.#unsubscribe?.();
      this.onIdle();
    });
    return this.#ready;
  }

  get view(): ConversationView {
    if (!this.#view) throw new Error("mount not ready");
    return this.#view;
  }

  async watch(limit = WATCH_FRAME_LIMIT): Promise<Watch<ConversationView>> {
    // Counted as observing while it waits, and registered in the same step as it stops counting.
    this.#joining++;
    try {
      await this.ready();
    } finally {
      this.#joining--;
    }
    this.#refuseIfEnded();
    const watch: Watch<ConversationView> = new Watch(this.view, limit, () => {
      this.#watches.delete(watch);
      this.#releaseIfUnobserved();
    });
    this.#watches.add(watch);
    return watch;
  }

  /**
   * Attach a synchronous observer: the returned view and the observer's first change are adjacent
   * (no publication falls between them). `start`, when given, runs synchronously at that point too,
   * so the caller can capture other committed state at the same instant.
   */
  async attach(observer: MountObserver, start?: (view: ConversationView) => void): Promise<MountAttachment> {
    // Counted as observing while it waits, and registered in the same step as it stops counting.
    this.#joining++;
    try {
      await this.ready();
    } finally {
      this.#joining--;
    }
    this.#refuseIfEnded();
    const view = this.view;
    start?.(view);
    this.#observers.add(observer);
    let attached = true;
    return {
      view,
      detach: () => {
        if (!attached) return;
        attached = false;
        this.#observers.delete(observer);
        this.#releaseIfUnobserved();
      },
    };
  }

  /** Spec §2.2: of the operations queued at the close's seal, states and watches reject. */
  #refuseIfEnded(): void {
    if (this.#ended === "closed") throw new HarnessClosed();
    if (this.#ended === "deleted") throw new UnknownConversation(this.conversationId);
  }

  #releaseIfUnobserved(): void {
    if (this.#watches.size === 0 && this.#observers.size === 0 && this.#joining === 0) this.#release();
  }

  #release(): void {
    this.#unsubscribe?.();
    this.onIdle();
  }

  /** End every watch and observer (close; or "deleted": the conversation is gone). */
  endAll(reason: WatchEnd = "closed"): void {
    this.#ended ??= reason;
    for (const w of [...this.#watches]) w.end(reason);
    const observers = [...this.#observers];
    this.#observers.clear();
    for (const o of observers) o.end(reason);
    this.#unsubscribe?.();
  }

  #onChange(change: ChangeSet): void {
    if (this.#buffer) {
      this.#buffer.push(change);
      return;
    }
    const view = this.#view!;
    const id = this.conversationId;
    if (change.deletedConversations?.includes(id)) {
      this.endAll("deleted");
      this.onIdle();
      return;
    }
    const appended = change.entries.filter((e) => e.conversationId === id);
    const docChanges = change.docs.filter((d) => d.conversationId === id);
    if (appended.length === 0 && docChanges.length === 0) {
      for (const o of this.#observers) o.change(change, view, view);
      return;
    }
    const ops: ViewChange[] = [];
    if (appended.length > 0)
      ops.push(
        appended.some((e) => e.head !== undefined)
          ? { op: "head", entries: appended }
          : { op: "append", entries: appended },
      );
    for (const d of docChanges) ops.push({ op: "doc", name: d.name, value: d.value });
    this.#view = applyViewChanges(view, ops);
    for (const o of this.#observers) o.change(change, view, this.#view);
    const frame: Frame<ConversationView> = { seq: change.seq, value: this.#view, ops };
    for (const w of this.#watches) w.push(frame);
  }
}
