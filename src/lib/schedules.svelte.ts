/**
 * The schedule desk of one conversation view (issue 31, part 4): the form a person fills in for a
 * new schedule or an edit (what to send; repeat by a cron expression or once "in N hours"; the time
 * zone; what to do with times missed while the app was closed), its preview in words from the
 * engine (`schedules.preview`, which also refuses a bad cron, time zone or past time, typed), and
 * the calls that save, pause, resume and delete. The schedules themselves are read from the view's
 * `app.schedules` document (`schedulesOf`), so every tab shows the same list as it changes.
 */

import {
  errorMessage,
  type Json,
  type Schedule,
  type ScheduleDraft,
  type SchedulesDoc,
} from "../../worker/protocol/index.ts";
import type { ConversationHome } from "./server.svelte.ts";

/** The view's schedules, in creation order. */
export function schedulesOf(docs: Readonly<Record<string, Json>>): readonly Schedule[] {
  return ((docs["app.schedules"] as unknown as SchedulesDoc | undefined)?.items ?? []) as readonly Schedule[];
}

/** The tab's own time zone (the default of a new schedule). */
export function localTimeZone(): string {
  return Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
}

/** A time in words in `timeZone`: "Mon 5 Jan, 09:00". */
export function when(at: number, timeZone: string): string {
  try {
    return new Intl.DateTimeFormat("en-GB", {
      timeZone,
      weekday: "short",
      day: "numeric",
      month: "short",
      hour: "2-digit",
      minute: "2-digit",
    }).format(at);
  } catch {
    return new Date(at).toISOString();
  }
}

export class ScheduleDesk {
  /** The form: open for a new schedule (`editing` undefined) or an edit. */
  open = $state(false);
  editing = $state<string | undefined>();
  text = $state("");
  repeat = $state<"cron" | "once">("cron");
  cron = $state("0 9 * * 1-5");
  inAmount = $state(2);
  inUnit = $state<"minutes" | "hours" | "days">("hours");
  timeZone = $state(localTimeZone());
  catchUp = $state<"run" | "skip">("run");
  /** The engine's words for the draft, or its refusal. */
  preview = $state("");
  error = $state("");
  busy = $state(false);
  #previewing = 0;

  constructor(
    private readonly engine: () => ConversationHome,
    private readonly conversationId: () => number,
  ) {}

  start(): void {
    this.open = true;
    this.editing = undefined;
    this.text = "";
    this.error = "";
    void this.refreshPreview();
  }

  edit(s: Schedule): void {
    this.open = true;
    this.editing = s.id;
    this.text = s.text;
    this.repeat = s.when.kind;
    if (s.when.kind === "cron") this.cron = s.when.cron;
    this.timeZone = s.timeZone;
    this.catchUp = s.catchUp;
    this.error = "";
    void this.refreshPreview();
  }

  cancel(): void {
    this.open = false;
    this.editing = undefined;
    this.error = "";
  }

  draft(now = Date.now()): ScheduleDraft {
    const unit = { minutes: 60_000, hours: 3_600_000, days: 86_400_000 }[this.inUnit];
    return {
      text: this.text.trim() || "…",
      when:
        this.repeat === "cron"
          ? { kind: "cron", cron: this.cron.trim() }
          : { kind: "once", at: now + Math.round(Math.max(0, Number(this.inAmount) || 0) * unit) },
      timeZone: this.timeZone.trim(),
      catchUp: this.catchUp,
    };
  }

  /** Ask the engine to say the draft in words (the latest answer wins). */
  async refreshPreview(): Promise<void> {
    const api = this.engine().api;
    if (!api) return;
    const mine = ++this.#previewing;
    const draft = this.draft();
    try {
      const p = await api.schedules.preview(draft);
      if (mine !== this.#previewing) return;
      this.preview = `${p.description}. Next: ${p.next.map((at) => when(at, draft.timeZone)).join("; ")}`;
      this.error = "";
    } catch (error) {
      if (mine !== this.#previewing) return;
      this.preview = "";
      this.error = errorMessage(error);
    }
  }

  async save(): Promise<void> {
    const api = this.engine().api;
    if (!api || this.busy) return;
    if (this.text.trim() === "") {
      this.error = "Say what the schedule sends.";
      return;
    }
    this.busy = true;
    try {
      const draft = this.draft();
      if (this.editing) await api.schedules.update(this.conversationId(), this.editing, draft);
      else await api.schedules.create(this.conversationId(), draft);
      this.cancel();
    } catch (error) {
      this.error = errorMessage(error);
    } finally {
      this.busy = false;
    }
  }

  async setPaused(s: Schedule, paused: boolean): Promise<void> {
    await this.#call(async (api) => {
      await api.schedules.setPaused(this.conversationId(), s.id, paused);
    });
  }

  async remove(s: Schedule): Promise<void> {
    await this.#call(async (api) => {
      await api.schedules.delete(this.conversationId(), s.id);
    });
  }

  async #call(run: (api: NonNullable<ConversationHome["api"]>) => Promise<void>): Promise<void> {
    const api = this.engine().api;
    if (!api || this.busy) return;
    this.busy = true;
    this.error = "";
    try {
      await run(api);
    } catch (error) {
      this.error = errorMessage(error);
    } finally {
      this.busy = false;
    }
  }
}
