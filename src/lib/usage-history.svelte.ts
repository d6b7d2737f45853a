/**
 * The settings' "Usage over time" section: the range a person picks (the last 7 to 365 days), the
 * engine's answer for it (`usage.days`, the days counted in this browser's time zone) and what went
 * wrong, in words. A newer load supersedes an older one still on its way.
 */
import { type EngineApi, errorMessage, type UsageDays } from "../../worker/protocol/index.ts";
import { lastDays, localTimeZone, today, type UsageRange } from "./usage-history.ts";

export type UsageHistoryApi = Pick<EngineApi, "usage">;

export class UsageHistoryState {
  range = $state<UsageRange>(30);
  answer = $state.raw<UsageDays | undefined>(undefined);
  loading = $state(false);
  error = $state("");
  #asked = 0;

  constructor(
    private readonly api: UsageHistoryApi,
    private readonly timeZone = localTimeZone(),
  ) {}

  async load(range: UsageRange = this.range): Promise<void> {
    this.range = range;
    const asked = ++this.#asked;
    this.loading = true;
    try {
      const answer = await this.api.usage.days({
        timeZone: this.timeZone,
        ...lastDays(today(this.timeZone), range),
      });
      if (asked !== this.#asked) return;
      this.answer = answer;
      this.error = "";
    } catch (e) {
      if (asked === this.#asked) this.error = errorMessage(e);
    } finally {
      if (asked === this.#asked) this.loading = false;
    }
  }
}
