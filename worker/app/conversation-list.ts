/**
 * The conversation list the tabs show: the top-level conversations (owned ones, a subagent's say,
 * are not listed), each with its title (the `app.title` document) and whether a run is live
 * (`pi.live.run`), and where it went when it moved to another home (`away`: moving, or moved with
 * its id there; worker/core/move.ts); a deleted one leaves it. Invariants:
 * - O(what is shown), not O(store): the list knows every top-level conversation's id (from the
 *   harness's records, no read), but reads titles and run states only for the ids it hands out (a
 *   page: one read of those ids' two documents; none at open), and keeps what it read; a whole
 *   `list()` reads the rest once. A commit costs a few map lookups, never a query: it updates what
 *   was read and marks the other ids it touched, which are read when a page needs them;
 * - what a read returns is never older than a change already applied: changes published while a read
 *   is in flight are replayed over its result for the ids it brings in;
 * - no title leaves the list spelling a saved secret (secrets.ts): titles are kept as stored and
 *   redacted as they are handed out, with the secrets of the latest commit, so a key saved after it
 *   was pasted into a first message (and its title) disappears from the list at once;
 * - a watcher gets the list at once and then after each change, coalesced: while its previous
 *   delivery is unresolved, newer changes only mark it stale, so a slow tab holds one list, not a
 *   queue; a delivery that rejects (the tab went away) ends the watcher;
 * - what a tab shows pages (`watchPage`): the newest `limit` conversations and the total, O(limit)
 *   to hand out (the ids are kept in order beside the map), and a commit that touched no
 *   conversation of the page and changed neither the total nor the secrets delivers nothing;
 * - `titleMatches` finds conversations by title newest first, reading the titles not read yet in
 *   chunks, and stops at its limit.
 */
import type { AgentHarness } from "../agent/harness.ts";
import { API_KEYS_DOC, SETTINGS_CONVERSATION } from "../agent/models/keys.ts";
import { DOC, type LiveState } from "../agent/records.ts";
import type { ChangeSet, ConversationId, Json, MoveRecord } from "../core/types.ts";
import { ROOT_CONVERSATION_ID } from "../core/types.ts";
import type { ConversationAway, ConversationPage, ConversationSummary } from "../protocol/index.ts";
import { REMOTE_DOC } from "./remote.ts";
import { redactTitle, savedSecrets } from "./secrets.ts";

/** The settings documents that hold secrets: a change to either changes what a title hides. */
const SECRET_DOCS = [API_KEYS_DOC, REMOTE_DOC] as const;

/** Where a conversation's title is kept (an app document: the agent never reads it). */
export const TITLE_DOC = "app.title";
export const MAX_TITLE = 200;

export function defaultTitle(id: ConversationId): string {
  return id === ROOT_CONVERSATION_ID ? "Main" : `Conversation ${id}`;
}

/** A title from a conversation's first input: its first line, whitespace collapsed, at most 60 characters. */
export function titleFromInput(text: string): string | undefined {
  const line = text.split("\n").find((l) => l.trim() !== "") ?? "";
  const words = line.replace(/\s+/g, " ").trim();
  if (!words) return undefined;
  return words.length <= 60 ? words : `${words.slice(0, 59).trimEnd()}…`;
}

function titleOf(id: ConversationId, value: Json | undefined): string {
  const title = (value as { title?: unknown } | undefined)?.title;
  return typeof title === "string" && title.trim() ? title : defaultTitle(id);
}

function busyOf(value: Json | undefined): boolean {
  return (value as LiveState | undefined)?.run !== undefined;
}

/** A conversation's `away` mark from the move that holds it (none once a move was cancelled). */
function awayOf(move: MoveRecord | undefined): ConversationAway | undefined {
  if (move?.role !== "out" || move.status === "cancelled") return undefined;
  return move.status === "pending"
    ? { status: "moving" }
    : { status: "moved", ...(move.remote !== undefined ? { remote: move.remote } : {}) };
}

type Listener<T = ConversationSummary[]> = (list: T) => Promise<void> | void;

/** What one commit changed in the list: the conversations touched, and whether the total or the secrets did. */
interface ListChange {
  touched: ReadonlySet<ConversationId>;
  all: boolean;
}

/** Ids a read of titles and run states takes at once (the largest page). */
const READ_CHUNK = 500;

/** The documents a list item is made of. */
const ITEM_DOCS = [TITLE_DOC, DOC.live] as const;

class Watcher<T = ConversationSummary[]> {
  #sending = false;
  #stale = false;
  #stopped = false;

  constructor(
    readonly listener: Listener<T>,
    readonly current: () => Promise<T>,
    readonly onEnd: () => void,
    /** Whether a change concerns this watcher (a page's: only one inside it). */
    readonly concerns: (change: ListChange) => boolean = () => true,
  ) {}

  /** Deliver the newest list now, or once the previous delivery resolved. */
  changed(): void {
    if (this.#stopped) return;
    if (this.#sending) {
      this.#stale = true;
      return;
    }
    this.#sending = true;
    this.#stale = false;
    Promise.resolve()
      .then(() => this.current())
      .then((value) => (this.#stopped ? undefined : this.listener(value)))
      .then(
        () => {
          this.#sending = false;
          if (this.#stale) this.changed();
        },
        () => this.stop(),
      );
  }

  stop(): void {
    if (this.#stopped) return;
    this.#stopped = true;
    this.onEnd();
  }
}

export class ConversationList {
  readonly #h: AgentHarness;
  /** The summaries read so far (or made from commits), by id: a subset of `#order`. */
  readonly #items = new Map<ConversationId, ConversationSummary>();
  /** Every listed id, ascending: the newest are at the end. */
  readonly #order: ConversationId[] = [];
  readonly #listed = new Set<ConversationId>();
  readonly #watchers = new Set<Watcher<ConversationSummary[]> | Watcher<ConversationPage>>();
  readonly #unsubscribe: () => void;
  readonly #settings = new Map<string, Json | undefined>();
  #secrets: string[] = [];
  /** Reads of items in flight, and the change sets published since the oldest of them began. */
  #reads = 0;
  readonly #since: ChangeSet[] = [];

  private constructor(h: AgentHarness) {
    this.#h = h;
    this.#unsubscribe = h.subscribe((change) => {
      if (this.#reads > 0) this.#since.push(change);
      this.#apply(change);
    });
    // The ids from the records in memory, in the same step as the subscription: no commit between.
    for (const record of h.conversationRecords()) if (!record.owner) this.#insertId(record.id);
  }

  /** Follow the harness's commits; nothing of the list is read yet but the secrets (settings, in memory). */
  static async open(h: AgentHarness): Promise<ConversationList> {
    const built = new ConversationList(h);
    for (const name of SECRET_DOCS) {
      const value = await h.doc(SETTINGS_CONVERSATION, name);
      // A commit applied while this was read already set the newest value.
      if (!built.#settings.has(name)) built.#settings.set(name, value);
    }
    built.#readSecrets();
    return built;
  }

  /** Every listed conversation, oldest first (reads the titles and run states not read yet). */
  async list(): Promise<ConversationSummary[]> {
    await this.#read([...this.#order]);
    const out: ConversationSummary[] = [];
    for (const id of this.#order) {
      const item = this.#items.get(id);
      if (item) out.push(this.#handOut(item));
    }
    return out;
  }

  /** The newest `limit` conversations, newest first, and how many there are: reads only those. */
  async page(limit: number): Promise<ConversationPage> {
    const ids = this.#order.slice(Math.max(0, this.#order.length - limit)).reverse();
    await this.#read(ids);
    const items: ConversationSummary[] = [];
    for (const id of ids) {
      const item = this.#items.get(id);
      if (item) items.push(this.#handOut(item));
    }
    return { items, total: this.#order.length };
  }

  /**
   * Up to `limit` conversations whose title (as handed out) contains `needle` (lower case), newest
   * first: titles not read yet are read newest first in chunks, and the walk stops once `limit` are
   * found. What it reads is kept: a search that walks the whole list costs its reads once.
   */
  async titleMatches(needle: string, limit: number): Promise<ConversationSummary[]> {
    const found: ConversationSummary[] = [];
    for (let end = this.#order.length; end > 0 && found.length < limit; end -= READ_CHUNK) {
      const ids = this.#order.slice(Math.max(0, end - READ_CHUNK), end).reverse();
      await this.#read(ids);
      for (const id of ids) {
        if (found.length >= limit) break;
        const known = this.#items.get(id);
        if (!known) continue;
        const item = this.#handOut(known);
        if (item.title.toLowerCase().includes(needle)) found.push(item);
      }
    }
    return found;
  }

  /** The summary of conversation `id` as handed out, if it is listed. */
  async get(id: ConversationId): Promise<ConversationSummary | undefined> {
    return (await this.pick([id]))[0];
  }

  /** The summaries of those of `ids` that are listed, as handed out, in the order given (one read). */
  async pick(ids: readonly ConversationId[]): Promise<ConversationSummary[]> {
    await this.#read(ids);
    const out: ConversationSummary[] = [];
    for (const id of ids) {
      const item = this.#items.get(id);
      if (item) out.push(this.#handOut(item));
    }
    return out;
  }

  has(id: ConversationId): boolean {
    return this.#listed.has(id);
  }

  /** Read and keep the summaries of those of `ids` that are listed and not read yet. */
  async #read(ids: readonly ConversationId[]): Promise<void> {
    const missing = ids.filter((id) => this.#listed.has(id) && !this.#items.has(id));
    for (let at = 0; at < missing.length; at += READ_CHUNK) {
      const read = await this.#summaries(missing.slice(at, at + READ_CHUNK));
      for (const [id, item] of read)
        if (this.#listed.has(id) && !this.#items.has(id)) this.#items.set(id, item);
    }
  }

  /**
   * The summaries of `ids` as committed now: their title and run state read from the store (one read
   * job, none when all are in memory), with the changes published while it was read replayed over it.
   */
  async #summaries(ids: readonly ConversationId[]): Promise<Map<ConversationId, ConversationSummary>> {
    const out = new Map<ConversationId, ConversationSummary>();
    if (ids.length === 0) return out;
    const start = this.#since.length;
    this.#reads++;
    let docs: Map<ConversationId, Map<string, Json>>;
    try {
      docs = await this.#h.docsIn(ITEM_DOCS, ids);
    } finally {
      this.#reads--;
    }
    const wanted = new Set(ids);
    const values = new Map<ConversationId, Map<string, Json | undefined>>();
    for (const id of ids) values.set(id, new Map<string, Json | undefined>(docs.get(id) ?? []));
    for (const change of this.#since.slice(start))
      for (const doc of change.docs)
        if (wanted.has(doc.conversationId) && (ITEM_DOCS as readonly string[]).includes(doc.name))
          values.get(doc.conversationId)!.set(doc.name, doc.value);
    if (this.#reads === 0) this.#since.length = 0;
    for (const id of ids) {
      const read = values.get(id)!;
      const away = awayOf(this.#h.awayOf(id));
      out.set(id, {
        id,
        title: titleOf(id, read.get(TITLE_DOC)),
        // A conversation that went away runs nowhere here, whatever its last run left.
        busy: away ? false : busyOf(read.get(DOC.live)),
        ...(away ? { away } : {}),
      });
    }
    return out;
  }

  #handOut(item: ConversationSummary): ConversationSummary {
    const title = redactTitle(item.title, this.#secrets);
    return title === item.title ? item : { ...item, title };
  }

  /** The smallest id inside the newest `limit`, or 0 when the list is shorter. */
  #pageFloor(limit: number): ConversationId {
    return this.#order[this.#order.length - limit] ?? 0;
  }

  #insertId(id: ConversationId): void {
    if (this.#listed.has(id)) return;
    this.#listed.add(id);
    const order = this.#order;
    // New conversations get the highest id: appended. Anything else goes in its place.
    if (order.length === 0 || order[order.length - 1]! < id) order.push(id);
    else order.splice(lowerBound(order, id), 0, id);
  }

  #remove(id: ConversationId): boolean {
    this.#items.delete(id);
    if (!this.#listed.delete(id)) return false;
    const at = lowerBound(this.#order, id);
    if (this.#order[at] === id) this.#order.splice(at, 1);
    return true;
  }

  #readSecrets(): void {
    this.#secrets = savedSecrets((c, name) =>
      c === SETTINGS_CONVERSATION ? this.#settings.get(name) : undefined,
    );
  }

  /** Watch the list; the returned function stops the watch. */
  watch(listener: Listener, onEnd: () => void = () => undefined): () => void {
    const watcher = new Watcher(
      listener,
      () => this.list(),
      () => {
        this.#watchers.delete(watcher);
        onEnd();
      },
    );
    this.#watchers.add(watcher);
    watcher.changed();
    return () => watcher.stop();
  }

  /** Watch the newest `limit` conversations and the total; the returned function stops the watch. */
  watchPage(
    limit: number,
    listener: Listener<ConversationPage>,
    onEnd: () => void = () => undefined,
  ): () => void {
    const watcher: Watcher<ConversationPage> = new Watcher(
      listener,
      () => this.page(limit),
      () => {
        this.#watchers.delete(watcher);
        onEnd();
      },
      (change) => {
        if (change.all) return true;
        const floor = this.#pageFloor(limit);
        for (const id of change.touched) if (id >= floor) return true;
        return false;
      },
    );
    this.#watchers.add(watcher);
    watcher.changed();
    return () => watcher.stop();
  }

  close(): void {
    this.#unsubscribe();
    for (const w of [...this.#watchers]) w.stop();
  }

  #apply(change: ChangeSet): void {
    // A page watcher cares about the conversations touched, unless the total or the secrets changed.
    const touched = new Set<ConversationId>();
    let all = false;
    for (const record of change.conversations) {
      if (record.owner || this.#listed.has(record.id)) continue;
      // Created by this commit: its documents are all in this change set (applied below).
      this.#insertId(record.id);
      this.#items.set(record.id, { id: record.id, title: defaultTitle(record.id), busy: false });
      all = true;
    }
    for (const id of change.deletedConversations ?? []) all = this.#remove(id) || all;
    for (const doc of change.docs) {
      if (
        doc.conversationId === SETTINGS_CONVERSATION &&
        (SECRET_DOCS as readonly string[]).includes(doc.name)
      ) {
        this.#settings.set(doc.name, doc.value);
        this.#readSecrets();
        all = true;
        continue;
      }
      if (doc.name !== TITLE_DOC && doc.name !== DOC.live) continue;
      if (!this.#listed.has(doc.conversationId)) continue;
      const item = this.#items.get(doc.conversationId);
      // Not read yet: whoever hands it out reads it, newer than this change.
      if (!item) {
        touched.add(doc.conversationId);
        continue;
      }
      if (doc.name === TITLE_DOC) {
        const title = titleOf(item.id, doc.value);
        if (title !== item.title) {
          this.#items.set(item.id, { ...item, title });
          touched.add(item.id);
        }
      } else if (!item.away) {
        const busy = busyOf(doc.value);
        if (busy !== item.busy) {
          this.#items.set(item.id, { ...item, busy });
          touched.add(item.id);
        }
      }
    }
    for (const move of change.moves ?? []) {
      if (move.role !== "out" || !this.#listed.has(move.conversationId)) continue;
      touched.add(move.conversationId);
      const item = this.#items.get(move.conversationId);
      if (!item) continue;
      const { away: _was, ...rest } = item;
      const away = awayOf(move);
      this.#items.set(item.id, away ? { ...rest, busy: false, away } : rest);
    }
    if (!all && touched.size === 0) return;
    const listChange: ListChange = { touched, all };
    for (const w of this.#watchers) if (w.concerns(listChange)) w.changed();
  }
}

/** The first index of ascending `ids` whose id is not below `id`. */
function lowerBound(ids: readonly number[], id: number): number {
  let lo = 0;
  let hi = ids.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (ids[mid]! < id) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
