/**
 * The timeline view's state (components/Timeline.svelte): the watched page of one range of a
 * conversation's run, the range (the whole run following now, or a zoomed window), the opened bar
 * with its entries, and the two intents a bar offers (fork at an entry, rerun a tool call).
 * Invariants: one watch at a time (a new range unwatches the old one first; a page of an old watch
 * that still arrives is dropped); `close()` ends the watch; an engine refusal is shown in words and
 * changes nothing else.
 */
import {
  type EngineApi,
  errorMessage,
  type TimelineBar,
  type TimelineDetail,
  type TimelinePage,
  type TimelineRange,
} from "../../worker/protocol/index.ts";
import { zoom } from "./timeline.ts";

export class TimelineState {
  page = $state.raw<TimelinePage | undefined>(undefined);
  /** undefined: the whole run, following now. */
  range = $state.raw<{ from: number; to: number } | undefined>(undefined);
  detail = $state.raw<TimelineDetail | undefined>(undefined);
  selected = $state<string | undefined>(undefined);
  error = $state("");
  notice = $state("");
  readonly #api: EngineApi;
  readonly conversationId: number;
  #watch: Promise<number | undefined> | undefined;
  #generation = 0;
  #closed = false;

  constructor(api: EngineApi, conversationId: number) {
    this.#api = api;
    this.conversationId = conversationId;
  }

  /** Watch the current range (again); the old watch ends first. */
  async watch(): Promise<void> {
    const generation = ++this.#generation;
    await this.#unwatch();
    if (this.#closed || generation !== this.#generation) return;
    const range: TimelineRange = this.range ? { from: this.range.from, to: this.range.to } : {};
    this.#watch = this.#api.timeline
      .watch(this.conversationId, range, (page: TimelinePage) => {
        if (generation !== this.#generation || this.#closed) return;
        this.page = page;
        // The opened bar follows the page (its outcome and end change while it runs).
        const bar = this.selected ? page.bars.find((b) => b.id === this.selected) : undefined;
        if (
          bar &&
          this.detail &&
          (bar.outcome !== this.detail.bar.outcome || bar.end !== this.detail.bar.end)
        )
          void this.open(bar);
      })
      .then(
        (id) => id,
        (e: unknown) => {
          this.error = errorMessage(e);
          return undefined;
        },
      );
    await this.#watch;
  }

  async #unwatch(): Promise<void> {
    const id = await this.#watch;
    this.#watch = undefined;
    if (id !== undefined) await this.#api.watches.unwatch(id).catch(() => undefined);
  }

  close(): void {
    this.#closed = true;
    this.#generation++;
    void this.#unwatch();
  }

  /** The run's whole span (what "Whole run" and zooming out are bounded by). */
  bounds(): { min: number; max: number } {
    const p = this.page;
    const min = p?.span.start ?? p?.from ?? 0;
    return { min, max: Math.max(min + 1, p?.span.end ?? p?.now ?? min + 1, p?.now ?? 0) };
  }

  /** Zoom in (factor < 1) or out (> 1) around the opened bar or the middle. */
  zoomBy(factor: number): void {
    const p = this.page;
    if (!p) return;
    const bar = p.bars.find((b) => b.id === this.selected);
    const center = bar ? (bar.start + (bar.end ?? p.now)) / 2 : undefined;
    const next = zoom({ from: p.from, to: p.to }, factor, this.bounds(), center);
    const b = this.bounds();
    this.range = next.from <= b.min && next.to >= b.max ? undefined : next;
    void this.watch();
  }

  wholeRun(): void {
    this.range = undefined;
    void this.watch();
  }

  /** Open a bar: its entries and why it ended. */
  async open(bar: TimelineBar): Promise<void> {
    this.selected = bar.id;
    this.error = "";
    try {
      const detail = await this.#api.timeline.detail(this.conversationId, bar.taskId);
      if (this.selected !== bar.id) return;
      // An approval wait's bar keeps its own words over its call's.
      this.detail = bar.kind === "approval" ? { ...detail, bar } : detail;
    } catch (e) {
      this.error = errorMessage(e);
    }
  }

  /** A new conversation forked at `entryId` (of `conversationId`, a subagent's too); resolves with its id. */
  async fork(conversationId: number, entryId: number): Promise<number | undefined> {
    this.error = "";
    try {
      return await this.#api.conversations.fork(conversationId, entryId);
    } catch (e) {
      this.error = errorMessage(e);
      return undefined;
    }
  }

  /** Run the bar's tool call again (its conversation's run); the page shows the new call's bar. */
  async rerun(bar: TimelineBar): Promise<void> {
    if (!bar.call) return;
    this.error = "";
    this.notice = "";
    try {
      await this.#api.timeline.rerunTool(bar.conversationId, {
        entryId: bar.call.entryId,
        callId: bar.call.callId,
        requestId: crypto.randomUUID(),
      });
      this.notice = `The ${bar.label} runs again; the first call stays in the history.`;
    } catch (e) {
      this.error = errorMessage(e);
    }
  }
}
