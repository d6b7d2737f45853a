/**
 * A per-conversation cache of committed entries, so a generation reads only what is new instead of
 * re-reading and re-parsing the whole transcript every turn. The engine is the only writer: the cache
 * is loaded once from the store and then follows published change sets. Loading subscribes first
 * and replays the changes committed after its read, so nothing falls between.
 *
 * Retention (spec §5.1, `contextRetentionMs`): a busy conversation always keeps its entries; an idle
 * one drops them once `retentionMs()` has passed since it was last read or last busy. Expiry is
 * checked at every published change and by one timer that never keeps the process alive. The timer
 * is moved only to fire earlier: one that fires late or finds nothing due just checks again, so a
 * busy engine does not clear and set a timer at every commit.
 */
import type { Harness } from "../../core/harness.ts";
import type { ChangeSet, ConversationId, EntryRecord } from "../../core/types.ts";

export interface EntryCacheOptions {
  /** How long an idle conversation keeps its entries (ms; read at every check that finds one idle). */
  readonly retentionMs: () => number;
  /** Whether a run is under way in the conversation (a busy one always keeps its entries). */
  readonly busy: (conversationId: ConversationId) => boolean;
  /** The harness clock. */
  readonly now: () => number;
}

const KEEP: EntryCacheOptions = {
  retentionMs: () => Number.POSITIVE_INFINITY,
  busy: () => true,
  now: Date.now,
};

export class EntryCache {
  #entries = new Map<ConversationId, EntryRecord[]>();
  #loading = new Map<ConversationId, Promise<EntryRecord[]>>();
  #buffers = new Map<ConversationId, ChangeSet[]>();
  /** When each cached conversation was last read or seen busy (the clock of `options.now`). */
  #usedAt = new Map<ConversationId, number>();
  /** Cached conversations last seen busy (a read or a check): the check that finds one idle starts its retention. */
  #seenBusy = new Set<ConversationId>();
  #timer: ReturnType<typeof setTimeout> | undefined;
  /** When the armed timer is due (the clock of `options.now`). */
  #timerDue = Number.POSITIVE_INFINITY;
  #disposed = false;

  constructor(
    readonly source: Pick<Harness, "subscribe" | "storedEntries">,
    readonly options: EntryCacheOptions = KEEP,
  ) {
    source.subscribe((change) => {
      for (const [c, buffer] of this.#buffers)
        if (change.entries.some((e) => e.conversationId === c)) buffer.push(change);
      for (const e of change.entries) {
        const list = this.#entries.get(e.conversationId);
        if (list && (list.length === 0 || list[list.length - 1]!.id < e.id)) list.push(e);
      }
      for (const c of change.deletedConversations ?? []) {
        this.#entries.delete(c);
        this.#usedAt.delete(c);
        this.#seenBusy.delete(c);
      }
      this.expire();
    });
  }

  /** Committed entries of a conversation (loaded on first use), in id order. */
  async get(conversationId: ConversationId, upTo = Number.MAX_SAFE_INTEGER): Promise<readonly EntryRecord[]> {
    // The loaded list itself: the cache may drop it again before this continues (retention 0).
    const list = await this.ensure(conversationId);
    this.#touch(conversationId);
    if (upTo >= (list.at(-1)?.id ?? 0)) return list.slice();
    return list.filter((e) => e.id <= upTo);
  }

  /** The cached entries if loaded, else undefined (for synchronous callers inside commits). */
  peek(conversationId: ConversationId): readonly EntryRecord[] | undefined {
    const list = this.#entries.get(conversationId);
    if (list) this.#touch(conversationId);
    return list;
  }

  /** Whether the conversation's entries are in the cache now (does not count as a read). */
  holds(conversationId: ConversationId): boolean {
    return this.#entries.has(conversationId);
  }

  ensure(conversationId: ConversationId): Promise<EntryRecord[]> {
    const cached = this.#entries.get(conversationId);
    if (cached) return Promise.resolve(cached);
    let loading = this.#loading.get(conversationId);
    if (!loading) {
      this.#buffers.set(conversationId, []);
      loading = this.source.storedEntries(conversationId).then((list) => {
        const buffered = this.#buffers.get(conversationId) ?? [];
        this.#buffers.delete(conversationId);
        const entries = [...list];
        for (const change of buffered) {
          for (const e of change.entries) {
            if (
              e.conversationId === conversationId &&
              (entries.length === 0 || entries[entries.length - 1]!.id < e.id)
            )
              entries.push(e);
          }
        }
        this.#entries.set(conversationId, entries);
        this.#loading.delete(conversationId);
        this.#touch(conversationId);
        return entries;
      });
      this.#loading.set(conversationId, loading);
    }
    return loading;
  }

  /** Drop the entries of idle conversations whose retention has passed; arm the timer for the next. */
  expire(): void {
    if (this.#disposed) return;
    const now = this.options.now();
    // Read only for an idle conversation: at every commit of a busy one, the settings were resolved
    // for nothing.
    let retention: number | undefined;
    let next = Number.POSITIVE_INFINITY;
    for (const c of this.#entries.keys()) {
      if (this.options.busy(c)) {
        this.#usedAt.set(c, now);
        this.#seenBusy.add(c);
        continue;
      }
      // It went idle since it was last seen busy: its retention starts now (spec §2.2: busy ones always keep it).
      if (this.#seenBusy.delete(c)) this.#usedAt.set(c, now);
      retention ??= Math.max(0, this.options.retentionMs());
      const due = (this.#usedAt.get(c) ?? now) + retention;
      if (due <= now) {
        this.#entries.delete(c);
        this.#seenBusy.delete(c);
        this.#usedAt.delete(c);
      } else next = Math.min(next, due);
    }
    this.#arm(next === Number.POSITIVE_INFINITY ? undefined : next - now);
  }

  /** Stop the timer (the harness closed). */
  dispose(): void {
    this.#disposed = true;
    this.#disarm();
  }

  #touch(conversationId: ConversationId): void {
    this.#usedAt.set(conversationId, this.options.now());
    if (this.options.busy(conversationId)) this.#seenBusy.add(conversationId);
    if (this.#timer === undefined && !this.#disposed) this.#arm(Math.max(0, this.options.retentionMs()));
  }

  /** Have the timer check again within `delayMs` (nothing when undefined: the armed one may stay). */
  #arm(delayMs: number | undefined): void {
    if (delayMs === undefined || !Number.isFinite(delayMs)) return;
    const due = this.options.now() + delayMs;
    if (this.#timer !== undefined && this.#timerDue <= due) return;
    this.#disarm();
    this.#timerDue = due;
    const timer = setTimeout(() => {
      this.#timer = undefined;
      this.#timerDue = Number.POSITIVE_INFINITY;
      this.expire();
    }, delayMs);
    // Never keeps the process alive (where the platform allows it).
    (timer as { unref?: () => void }).unref?.();
    this.#timer = timer;
  }

  #disarm(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#timerDue = Number.POSITIVE_INFINITY;
  }
}
