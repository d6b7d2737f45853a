/**
 * The conversation list the tabs show: the top-level conversations (owned ones, a subagent's say,
 * are not listed), each with its title (the `app.title` document) and whether a run is live
 * (`pi.live.run`), and where it went when it moved to another home (`away`: moving, or moved with
 * its id there; worker/core/move.ts); a deleted one leaves it. Invariants:
 * - O(what is shown), not O(store): the list holds no id it has not handed out. A page asks the
 *   store for its ids (newest first, by the `conversations_top_level` index) and the total (a count,
 *   kept until a deletion or a creation changes it), then reads titles and run states only for those
 *   ids (one read of their two documents); its open reads nothing; it keeps what it read. A whole
 *   `list()` reads every id and the summaries not read yet. A commit costs a few map lookups, never
 *   a query: it updates what was read and marks the other ids it touched;
 * - what a read returns is never older than a change already applied: changes published while a read
 *   is in flight are replayed over its result for the ids it brings in;
 * - no title leaves the list spelling a saved secret (secrets.ts): titles are kept as stored and
 *   redacted as they are handed out, with the secrets of the latest commit, so a key saved after it
 *   was pasted into a first message (and its title) disappears from the list at once;
 * - a watcher gets the list at once and then after each change, coalesced: while its previous
 *   delivery is unresolved, newer changes only mark it stale, so a slow tab holds one list, not a
 *   queue; a delivery that rejects (the tab went away) ends the watcher;
 * - what a tab shows pages (`watchPage`): the newest `limit` conversations and the total, O(limit)
 *   to hand out, and a commit that touched no conversation of the page it last delivered and
 *   created, deleted and changed no secret delivers nothing (a creation or a deletion moves the page
 *   and the total);
 * - `titleMatches` finds conversations by title newest first, reading the ids and the titles not
 *   read yet in chunks, and stops at its limit or after `TITLE_PAGE_SCAN` ids, saying where the next
 *   walk starts.
 */
import type { AgentHarness } from "../agent/harness.ts";
import { API_KEYS_DOC, SETTINGS_CONVERSATION } from "../agent/models/keys.ts";
import { DOC, type LiveState } from "../agent/records.ts";
import { topLevelAmong, topLevelConversations } from "../core/queries.ts";
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
/** Conversations one search page reads the titles of at most (ten chunks), unless they are in memory. */
export const TITLE_PAGE_SCAN = 5_000;

/** A page of title matches: newest first, and where the next page's walk starts. */
export interface TitlePage {
  items: ConversationSummary[];
  /** The conversation id the next page walks below; absent once the oldest was walked. */
  before?: ConversationId;
}

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
  /** The summaries read so far (or made from commits) of listed conversations, by id. */
  readonly #items = new Map<ConversationId, ConversationSummary>();
  readonly #watchers = new Set<Watcher<ConversationSummary[]> | Watcher<ConversationPage>>();
  readonly #unsubscribe: () => void;
  readonly #settings = new Map<string, Json | undefined>();
  #secrets: string[] = [];
  /**
   * Every listed conversation's summary is in `#items` (a title walk read them all with no deletion
   * meanwhile); creations add to it and deletions remove from it, so it stays whole, and later
   * title searches walk memory instead of reading the ids again.
   */
  #whole = false;
  /** How many conversations are listed, once counted (undefined: count at the next page). */
  #total: number | undefined;
  /** Reads in flight, and the change sets published since the oldest of them began. */
  #reads = 0;
  readonly #since: ChangeSet[] = [];

  private constructor(h: AgentHarness) {
    this.#h = h;
    this.#unsubscribe = h.subscribe((change) => {
      if (this.#reads > 0) this.#since.push(change);
      this.#apply(change);
    });
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

  /** Every listed conversation, oldest first (reads every id, and the titles and run states not read yet). */
  async list(): Promise<ConversationSummary[]> {
    const { ids } = await this.#tracked(() => topLevelConversations(this.#h.store));
    return this.#present(ids.reverse());
  }

  /** The newest `limit` conversations, newest first, and how many there are: reads only those. */
  async page(limit: number): Promise<ConversationPage> {
    const counted = this.#total !== undefined;
    const start = this.#since.length;
    const read = await this.#tracked(() => topLevelConversations(this.#h.store, { limit, total: !counted }));
    // A count read while a commit created or deleted is as good as any: later ones adjust it.
    if (read.total !== undefined && this.#total === undefined && !this.#changedTotal(start))
      this.#total = read.total;
    this.#settle();
    // Counted before a deletion made the count stale while the ids were read: read both again.
    if (read.total === undefined && this.#total === undefined) return this.page(limit);
    const items = await this.#present(read.ids);
    return { items, total: this.#total ?? read.total ?? items.length };
  }

  /**
   * Up to `limit` conversations whose title (as handed out) contains `needle` (lower case), newest
   * first, among those below `before` (all, when absent). Ids and titles not read yet are read newest
   * first in chunks, and the walk stops once `limit` are found or `scan` ids were read
   * (`TITLE_PAGE_SCAN`), so a search page costs the same on any store; `before` in the answer is
   * where the next page's walk starts (absent once the oldest was walked). What it reads is kept;
   * once a walk from the newest reached the oldest, later walks go through memory and read nothing.
   */
  async titleMatches(
    needle: string,
    limit: number,
    options: { before?: ConversationId; scan?: number } = {},
  ): Promise<TitlePage> {
    const found: ConversationSummary[] = [];
    const below = options.before ?? Number.MAX_SAFE_INTEGER;
    if (this.#whole) {
      // Every listed summary is here: the walk needs no read.
      for (const id of [...this.#items.keys()].sort((a, b) => b - a)) {
        if (id >= below) continue;
        const item = this.#handOut(this.#items.get(id)!);
        if (!item.title.toLowerCase().includes(needle)) continue;
        found.push(item);
        if (found.length === limit) return { items: found, before: id };
      }
      return { items: found };
    }
    const scan = Math.max(1, options.scan ?? TITLE_PAGE_SCAN);
    // One read in flight for the whole walk, so a deletion published during it is seen below.
    this.#reads++;
    const start = this.#since.length;
    try {
      let before = below;
      let read = 0;
      while (found.length < limit) {
        const want = Math.min(READ_CHUNK, scan - read);
        const { ids } = await this.#tracked(() =>
          topLevelConversations(this.#h.store, { limit: want, before }),
        );
        read += ids.length;
        for (const item of await this.#present(ids)) {
          if (!item.title.toLowerCase().includes(needle)) continue;
          found.push(item);
          // The page is full: the next one starts below this conversation.
          if (found.length === limit) return { items: found, before: item.id };
        }
        if (ids.length < want) {
          // Walked to the end: from the newest, every listed summary is kept now, unless a deletion
          // raced a read.
          if (options.before === undefined && this.#deletedSince(start).size === 0) this.#whole = true;
          return { items: found };
        }
        before = ids[ids.length - 1]!;
        if (read >= scan) return { items: found, before };
      }
      return { items: found, before };
    } finally {
      this.#reads--;
      this.#settle();
    }
  }

  /** The summary of conversation `id` as handed out, if it is listed. */
  async get(id: ConversationId): Promise<ConversationSummary | undefined> {
    return (await this.pick([id]))[0];
  }

  /** The summaries of those of `ids` that are listed, as handed out, in the order given. */
  async pick(ids: readonly ConversationId[]): Promise<ConversationSummary[]> {
    const listed = await this.listedAmong(ids);
    return this.#present(ids.filter((id) => listed.has(id)));
  }

  /** Those of `ids` that are listed (top-level conversations): one read for those not read yet. */
  async listedAmong(ids: readonly ConversationId[]): Promise<Set<ConversationId>> {
    const out = new Set<ConversationId>();
    const unknown: ConversationId[] = [];
    for (const id of ids) {
      if (this.#items.has(id)) out.add(id);
      else if (Number.isSafeInteger(id)) unknown.push(id);
    }
    const start = this.#since.length;
    const read = await this.#tracked(() => topLevelAmong(this.#h.store, unknown));
    const deleted = this.#deletedSince(start);
    this.#settle();
    for (const id of read) if (!deleted.has(id)) out.add(id);
    return out;
  }

  /**
   * The summaries of `ids` (listed ones, as a query of the store just named them), as handed out, in
   * the order given: those not read yet are read (one read job), and kept.
   */
  async #present(ids: readonly ConversationId[]): Promise<ConversationSummary[]> {
    const missing = ids.filter((id) => !this.#items.has(id));
    for (let at = 0; at < missing.length; at += READ_CHUNK) {
      const read = await this.#summaries(missing.slice(at, at + READ_CHUNK));
      for (const [id, item] of read) if (!this.#items.has(id)) this.#items.set(id, item);
    }
    const out: ConversationSummary[] = [];
    for (const id of ids) {
      const item = this.#items.get(id);
      if (item) out.push(this.#handOut(item));
    }
    return out;
  }

  /** Run a read, recording the change sets published meanwhile (`#since`); `#settle` after using them. */
  async #tracked<T>(read: () => Promise<T>): Promise<T> {
    this.#reads++;
    try {
      return await read();
    } finally {
      this.#reads--;
    }
  }

  /** Forget the change sets recorded once no read is in flight. */
  #settle(): void {
    if (this.#reads === 0) this.#since.length = 0;
  }

  /** The conversations deleted by the change sets published since `start`. */
  #deletedSince(start: number): Set<ConversationId> {
    const out = new Set<ConversationId>();
    for (const change of this.#since.slice(start))
      for (const id of change.deletedConversations ?? []) out.add(id);
    return out;
  }

  /** Whether a change set published since `start` created a listed conversation or deleted one. */
  #changedTotal(start: number): boolean {
    return this.#since
      .slice(start)
      .some(
        (change) =>
          (change.deletedConversations?.length ?? 0) > 0 || change.conversations.some((r) => !r.owner),
      );
  }

  /**
   * The summaries of `ids` as committed now: their title and run state read from the store (one read
   * job), with the changes published while it was read replayed over it; none of one deleted meanwhile.
   */
  async #summaries(ids: readonly ConversationId[]): Promise<Map<ConversationId, ConversationSummary>> {
    const out = new Map<ConversationId, ConversationSummary>();
    if (ids.length === 0) return out;
    const start = this.#since.length;
    const docs = await this.#tracked(() => this.#h.docsIn(ITEM_DOCS, ids));
    const wanted = new Set(ids);
    const values = new Map<ConversationId, Map<string, Json | undefined>>();
    for (const id of ids) values.set(id, new Map<string, Json | undefined>(docs.get(id) ?? []));
    for (const change of this.#since.slice(start))
      for (const doc of change.docs)
        if (wanted.has(doc.conversationId) && (ITEM_DOCS as readonly string[]).includes(doc.name))
          values.get(doc.conversationId)!.set(doc.name, doc.value);
    const deleted = this.#deletedSince(start);
    this.#settle();
    for (const id of ids) {
      if (deleted.has(id)) continue;
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
    // The ids of the page being delivered or last delivered (none yet: every change concerns it).
    let shown: Set<ConversationId> | undefined;
    const watcher: Watcher<ConversationPage> = new Watcher(
      listener,
      async () => {
        const page = await this.page(limit);
        shown = new Set(page.items.map((item) => item.id));
        return page;
      },
      () => {
        this.#watchers.delete(watcher);
        onEnd();
      },
      (change) => {
        if (change.all || shown === undefined) return true;
        for (const id of change.touched) if (shown.has(id)) return true;
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
      // Created by this commit (a change set names a conversation only when it creates it): its
      // documents are all in this change set (applied below).
      if (record.owner || this.#items.has(record.id)) continue;
      this.#items.set(record.id, { id: record.id, title: defaultTitle(record.id), busy: false });
      if (this.#total !== undefined) this.#total++;
      all = true;
    }
    if ((change.deletedConversations?.length ?? 0) > 0) {
      // Whether each was listed is not known without a read: the total is counted again.
      for (const id of change.deletedConversations!) this.#items.delete(id);
      this.#total = undefined;
      all = true;
    }
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
      if (move.role !== "out") continue;
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
