/**
 * The conversation list the tabs show: the top-level conversations (owned ones, a subagent's say,
 * are not listed), each with its title (the `app.title` document) and whether a run is live
 * (`pi.live.run`), and where it went when it moved to another home (`away`: moving, or moved with
 * its id there; worker/core/move.ts); a deleted one leaves it. Invariants:
 * - built once from the store, then kept by applying each commit's change set: a commit costs a few
 *   map lookups, never a query;
 * - no title leaves the list spelling a saved secret (secrets.ts): titles are kept as stored and
 *   redacted as they are handed out, with the secrets of the latest commit, so a key saved after it
 *   was pasted into a first message (and its title) disappears from the list at once;
 * - a watcher gets the list at once and then after each change, coalesced: while its previous
 *   delivery is unresolved, newer changes only mark it stale, so a slow tab holds one list, not a
 *   queue; a delivery that rejects (the tab went away) ends the watcher;
 * - what a tab shows pages (`watchPage`): the newest `limit` conversations and the total, O(limit)
 *   to hand out (the ids are kept in order beside the map), and a commit that touched no
 *   conversation of the page and changed neither the total nor the secrets delivers nothing;
 * - `titleMatches` finds conversations by title newest first and stops at its limit.
 */
import type { AgentHarness } from "../agent/harness.ts";
import { API_KEYS_DOC, SETTINGS_CONVERSATION } from "../agent/models/keys.ts";
import { DOC, type LiveState } from "../agent/records.ts";
import type { ChangeSet, ConversationId, ConversationRecord, Json, MoveRecord } from "../core/types.ts";
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

class Watcher<T = ConversationSummary[]> {
  #sending = false;
  #stale = false;
  #stopped = false;

  constructor(
    readonly listener: Listener<T>,
    readonly current: () => T,
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
      .then(() => this.listener(this.current()))
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
  readonly #items = new Map<ConversationId, ConversationSummary>();
  /** The ids of `#items`, ascending: the newest are at the end. */
  readonly #order: ConversationId[] = [];
  readonly #watchers = new Set<Watcher<ConversationSummary[]> | Watcher<ConversationPage>>();
  readonly #unsubscribe: () => void;
  readonly #settings = new Map<string, Json | undefined>();
  #secrets: string[] = [];

  private constructor(unsubscribe: () => void) {
    this.#unsubscribe = unsubscribe;
  }

  /** Read the list from the store, then follow the harness's commits. */
  static async open(h: AgentHarness): Promise<ConversationList> {
    // Changes that arrive while the store is read are applied after it, in order: a read queues
    // behind earlier commits, so replaying them only repeats values the read already has.
    const early: ChangeSet[] = [];
    let list: ConversationList | undefined;
    const unsubscribe = h.subscribe((change) => (list ? list.#apply(change) : early.push(change)));
    const built = new ConversationList(unsubscribe);
    for (const name of SECRET_DOCS) built.#settings.set(name, await h.doc(SETTINGS_CONVERSATION, name));
    built.#readSecrets();
    const [titles, lives] = await Promise.all([h.docsNamed(TITLE_DOC), h.docsNamed(DOC.live)]);
    for (const record of h.conversationRecords()) {
      if (record.owner) continue;
      const away = awayOf(h.awayOf(record.id));
      built.#insert(record.id, {
        id: record.id,
        title: titleOf(record.id, titles.get(record.id)),
        // A conversation that went away runs nowhere here, whatever its last run left.
        busy: away ? false : busyOf(lives.get(record.id)),
        ...(away ? { away } : {}),
      });
    }
    list = built;
    for (const change of early) built.#apply(change);
    return built;
  }

  list(): ConversationSummary[] {
    return [...this.#items.values()].map((item) => this.#handOut(item));
  }

  /** The newest `limit` conversations, newest first, and how many there are. */
  page(limit: number): ConversationPage {
    const items: ConversationSummary[] = [];
    for (let i = this.#order.length - 1; i >= 0 && items.length < limit; i--)
      items.push(this.#handOut(this.#items.get(this.#order[i]!)!));
    return { items, total: this.#order.length };
  }

  /** Up to `limit` conversations whose title (as handed out) contains `needle` (lower case), newest first. */
  titleMatches(needle: string, limit: number): ConversationSummary[] {
    const found: ConversationSummary[] = [];
    for (let i = this.#order.length - 1; i >= 0 && found.length < limit; i--) {
      const item = this.#handOut(this.#items.get(this.#order[i]!)!);
      if (item.title.toLowerCase().includes(needle)) found.push(item);
    }
    return found;
  }

  /** The summary of conversation `id` as handed out, if it is listed. */
  get(id: ConversationId): ConversationSummary | undefined {
    const item = this.#items.get(id);
    return item && this.#handOut(item);
  }

  #handOut(item: ConversationSummary): ConversationSummary {
    const title = redactTitle(item.title, this.#secrets);
    return title === item.title ? item : { ...item, title };
  }

  /** The smallest id inside the newest `limit`, or 0 when the list is shorter. */
  #pageFloor(limit: number): ConversationId {
    return this.#order[this.#order.length - limit] ?? 0;
  }

  #insert(id: ConversationId, item: ConversationSummary): void {
    this.#items.set(id, item);
    const order = this.#order;
    // New conversations get the highest id: appended. Anything else goes in its place.
    if (order.length === 0 || order[order.length - 1]! < id) order.push(id);
    else order.splice(lowerBound(order, id), 0, id);
  }

  #remove(id: ConversationId): boolean {
    if (!this.#items.delete(id)) return false;
    const at = lowerBound(this.#order, id);
    if (this.#order[at] === id) this.#order.splice(at, 1);
    return true;
  }

  #readSecrets(): void {
    this.#secrets = savedSecrets((c, name) =>
      c === SETTINGS_CONVERSATION ? this.#settings.get(name) : undefined,
    );
  }

  has(id: ConversationId): boolean {
    return this.#items.has(id);
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
    const add = (record: ConversationRecord) => {
      if (record.owner || this.#items.has(record.id)) return;
      this.#insert(record.id, { id: record.id, title: defaultTitle(record.id), busy: false });
      all = true;
    };
    for (const record of change.conversations) add(record);
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
      const item = this.#items.get(doc.conversationId);
      if (!item) continue;
      if (doc.name === TITLE_DOC) {
        const title = titleOf(item.id, doc.value);
        if (title !== item.title) {
          this.#items.set(item.id, { ...item, title });
          touched.add(item.id);
        }
      } else if (doc.name === DOC.live && !item.away) {
        const busy = busyOf(doc.value);
        if (busy !== item.busy) {
          this.#items.set(item.id, { ...item, busy });
          touched.add(item.id);
        }
      }
    }
    for (const move of change.moves ?? []) {
      if (move.role !== "out") continue;
      const item = this.#items.get(move.conversationId);
      if (!item) continue;
      const { away: _was, ...rest } = item;
      const away = awayOf(move);
      this.#items.set(item.id, away ? { ...rest, busy: false, away } : rest);
      touched.add(item.id);
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
