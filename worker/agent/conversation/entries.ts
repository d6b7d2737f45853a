/**
 * A per-conversation cache of committed entries, so a generation reads only what is new instead of
 * re-reading and re-parsing the whole transcript every turn. The engine is the only writer: the cache
 * is loaded once from the store and then follows published change sets. Loading subscribes first
 * and replays the changes committed after its read, so nothing falls between.
 */
import type { Harness } from "../../core/harness.ts";
import type { ChangeSet, ConversationId, EntryRecord } from "../../core/types.ts";

export class EntryCache {
  #entries = new Map<ConversationId, EntryRecord[]>();
  #loading = new Map<ConversationId, Promise<void>>();
  #buffers = new Map<ConversationId, ChangeSet[]>();

  constructor(readonly source: Pick<Harness, "subscribe" | "entries">) {
    source.subscribe((change) => {
      for (const [c, buffer] of this.#buffers)
        if (change.entries.some((e) => e.conversationId === c)) buffer.push(change);
      for (const e of change.entries) {
        const list = this.#entries.get(e.conversationId);
        if (list && (list.length === 0 || list[list.length - 1]!.id < e.id)) list.push(e);
      }
    });
  }

  /** Committed entries of a conversation (loaded on first use), in id order. */
  async get(conversationId: ConversationId, upTo = Number.MAX_SAFE_INTEGER): Promise<readonly EntryRecord[]> {
    await this.ensure(conversationId);
    const list = this.#entries.get(conversationId)!;
    if (upTo >= (list.at(-1)?.id ?? 0)) return list.slice();
    return list.filter((e) => e.id <= upTo);
  }

  /** The cached entries if loaded, else undefined (for synchronous callers inside commits). */
  peek(conversationId: ConversationId): readonly EntryRecord[] | undefined {
    return this.#entries.get(conversationId);
  }

  ensure(conversationId: ConversationId): Promise<void> {
    if (this.#entries.has(conversationId)) return Promise.resolve();
    let loading = this.#loading.get(conversationId);
    if (!loading) {
      this.#buffers.set(conversationId, []);
      loading = this.source.entries(conversationId).then((list) => {
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
      });
      this.#loading.set(conversationId, loading);
    }
    return loading;
  }
}
