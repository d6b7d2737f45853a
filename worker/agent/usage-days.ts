/**
 * Usage over time: tokens and cost per day and per model, read from the entries that carry spend
 * (the same spend `pi.usage` counts, worker/agent/records.ts): each `pi.assistant` entry's model
 * message (`provider/model`, its usage, its timestamp) and each `pi.tool-result` entry whose tool
 * spent on models of its own (`tool <name>`, the result's usage, its timestamp). Invariants:
 * - each model request is counted once, under the conversation that made it: entries are stored
 *   once (a fork sees its parent's without copying them, and starts a usage of its own);
 * - a day is a calendar day in the asker's IANA time zone (a day of 23 or 25 hours across a DST
 *   change is one day); a bad zone or range is refused with `UsageQueryInvalid` before any read;
 * - the range is bounded: at most `MAX_USAGE_DAYS` days, from and to included;
 * - a row of zeros (a failed attempt records one) is no spend and makes no row;
 * - rows are in day order, then by model; pure apart from the one read of the store.
 */
import type { Usage } from "@mariozechner/pi-ai";
import { HarnessError } from "../core/errors.ts";
import { entryValues } from "../core/queries.ts";
import type { Store } from "../store/types.ts";
import { ENTRY } from "./records.ts";

/** The longest range one query covers, in days (a leap year). */
export const MAX_USAGE_DAYS = 366;

/** Which days: `from` to `to` included, as `YYYY-MM-DD` calendar days in `timeZone` (IANA). */
export interface UsageDaysQuery {
  readonly timeZone: string;
  readonly from: string;
  readonly to: string;
}

/** What one model (or one tool's own model use) spent on one day. */
export interface UsageDayRow {
  readonly day: string;
  /** `provider/model`, or `tool <name>` for a tool's own spend (as the usage line names them). */
  readonly model: string;
  readonly input: number;
  readonly output: number;
  readonly cacheRead: number;
  readonly cacheWrite: number;
  /** US dollars. */
  readonly cost: number;
  /** How many model requests (or tool calls) spent it. */
  readonly requests: number;
}

export interface UsageDays extends UsageDaysQuery {
  readonly rows: readonly UsageDayRow[];
}

/** A query the engine cannot answer: `bad_time_zone` or `bad_range`, said in words. */
export class UsageQueryInvalid extends HarnessError {
  override readonly name = "UsageQueryInvalid";
  constructor(code: "bad_time_zone" | "bad_range", message: string) {
    super(code, message);
  }
}

const DAY_MS = 86_400_000;
/** The furthest any zone is from UTC, each way (Kiribati +14, Baker Island -12), with a margin. */
const AHEAD_MS = 15 * 3_600_000;
const BEHIND_MS = 13 * 3_600_000;

/** A `YYYY-MM-DD` day's UTC midnight, or undefined for a string that is not a real calendar day. */
export function dayStart(day: string): number | undefined {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(day);
  if (!m) return undefined;
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const at = Date.UTC(y, mo - 1, d);
  const back = new Date(at);
  if (back.getUTCFullYear() !== y || back.getUTCMonth() !== mo - 1 || back.getUTCDate() !== d)
    return undefined;
  return at;
}

/** The `YYYY-MM-DD` of a UTC midnight. */
export function dayName(utcMidnight: number): string {
  return new Date(utcMidnight).toISOString().slice(0, 10);
}

/** The days from `from` to `to`, both included (valid days, from <= to). */
export function daysBetween(from: string, to: string): string[] {
  const out: string[] = [];
  const end = dayStart(to)!;
  for (let at = dayStart(from)!; at <= end; at += DAY_MS) out.push(dayName(at));
  return out;
}

/** `(ms) => YYYY-MM-DD` in `timeZone`; refuses a zone Intl does not know. */
export function dayInZone(timeZone: string): (ms: number) => string {
  let format: Intl.DateTimeFormat;
  try {
    format = new Intl.DateTimeFormat("en-US", {
      timeZone,
      year: "numeric",
      month: "2-digit",
      day: "2-digit",
      calendar: "gregory",
      numberingSystem: "latn",
    });
  } catch {
    throw new UsageQueryInvalid(
      "bad_time_zone",
      `"${timeZone}" is not a time zone (try one like Europe/Berlin)`,
    );
  }
  return (ms) => {
    const parts: Record<string, string> = {};
    for (const p of format.formatToParts(ms)) parts[p.type] = p.value;
    return `${parts["year"]}-${parts["month"]}-${parts["day"]}`;
  };
}

/** The query checked: its zone known, its days real, in order and at most MAX_USAGE_DAYS apart. */
export function checkUsageQuery(query: UsageDaysQuery): {
  from: number;
  to: number;
  day: (ms: number) => string;
} {
  const day = dayInZone(query.timeZone);
  const from = dayStart(query.from);
  const to = dayStart(query.to);
  if (from === undefined || to === undefined)
    throw new UsageQueryInvalid("bad_range", "the days must be calendar days written YYYY-MM-DD");
  if (to < from) throw new UsageQueryInvalid("bad_range", `${query.to} is before ${query.from}`);
  if ((to - from) / DAY_MS + 1 > MAX_USAGE_DAYS)
    throw new UsageQueryInvalid("bad_range", `at most ${MAX_USAGE_DAYS} days at a time`);
  return { from, to, day };
}

/** One spend as read from an entry: when, under which name, how much. */
export interface Spend {
  readonly at: number;
  readonly model: string;
  readonly usage: Usage;
}

const spent = (u: Usage) => u.input + u.output + u.cacheRead + u.cacheWrite > 0 || u.cost.total > 0;

/** Spends added up per day (in the query's zone) and model, only days in the query's range. */
export function aggregateUsageDays(query: UsageDaysQuery, spends: Iterable<Spend>): UsageDays {
  const { day } = checkUsageQuery(query);
  const rows = new Map<string, { -readonly [K in keyof UsageDayRow]: UsageDayRow[K] }>();
  for (const s of spends) {
    if (!spent(s.usage)) continue;
    const d = day(s.at);
    if (d < query.from || d > query.to) continue;
    const key = `${d}\u0000${s.model}`;
    let row = rows.get(key);
    if (!row) {
      row = {
        day: d,
        model: s.model,
        input: 0,
        output: 0,
        cacheRead: 0,
        cacheWrite: 0,
        cost: 0,
        requests: 0,
      };
      rows.set(key, row);
    }
    row.input += s.usage.input;
    row.output += s.usage.output;
    row.cacheRead += s.usage.cacheRead;
    row.cacheWrite += s.usage.cacheWrite;
    row.cost += s.usage.cost.total;
    row.requests += 1;
  }
  const sorted = [...rows.values()].sort((a, b) =>
    a.day < b.day ? -1 : a.day > b.day ? 1 : a.model < b.model ? -1 : a.model > b.model ? 1 : 0,
  );
  return { timeZone: query.timeZone, from: query.from, to: query.to, rows: sorted };
}

/** A stored usage, checked: the numbers a Usage must have (anything else is no spend). */
function usageFrom(value: unknown): Usage | undefined {
  let u: unknown = value;
  if (typeof value === "string") {
    try {
      u = JSON.parse(value);
    } catch {
      return undefined;
    }
  }
  if (!u || typeof u !== "object") return undefined;
  const o = u as Record<string, unknown>;
  const n = (v: unknown) => (typeof v === "number" && Number.isFinite(v) && v >= 0 ? v : 0);
  const cost = (o["cost"] && typeof o["cost"] === "object" ? o["cost"] : {}) as Record<string, unknown>;
  return {
    input: n(o["input"]),
    output: n(o["output"]),
    cacheRead: n(o["cacheRead"]),
    cacheWrite: n(o["cacheWrite"]),
    totalTokens: n(o["totalTokens"]),
    cost: {
      input: n(cost["input"]),
      output: n(cost["output"]),
      cacheRead: n(cost["cacheRead"]),
      cacheWrite: n(cost["cacheWrite"]),
      total: n(cost["total"]),
    },
  };
}

/**
 * The usage per day and model of every conversation in `store`, for the query's days: the entries
 * whose timestamp can fall on those days in any zone are read (only their spend fields), then each
 * is put on its day in the query's zone.
 */
export async function usageDays(store: Store, query: UsageDaysQuery): Promise<UsageDays> {
  const { from, to } = checkUsageQuery(query);
  const window = { path: "$.model[0].timestamp", from: from - AHEAD_MS, to: to + DAY_MS + BEHIND_MS };
  const [answers, results] = await Promise.all([
    entryValues(store, {
      kinds: [ENTRY.assistant],
      paths: ["$.model[0].timestamp", "$.model[0].provider", "$.model[0].model", "$.model[0].usage"],
      where: window,
    }),
    entryValues(store, {
      kinds: [ENTRY.toolResult],
      paths: ["$.model[0].timestamp", "$.model[0].toolName", "$.data.usage"],
      where: window,
    }),
  ]);
  // A store may hand an integer back as a bigint.
  const time = (v: unknown) => (typeof v === "bigint" ? Number(v) : typeof v === "number" ? v : undefined);
  const spends: Spend[] = [];
  for (const [at, provider, model, usage] of answers) {
    const t = time(at);
    const u = usageFrom(usage);
    if (t !== undefined && u) spends.push({ at: t, model: `${String(provider)}/${String(model)}`, usage: u });
  }
  for (const [at, tool, usage] of results) {
    const t = time(at);
    const u = usage === null ? undefined : usageFrom(usage);
    if (t !== undefined && u) spends.push({ at: t, model: `tool ${String(tool)}`, usage: u });
  }
  return aggregateUsageDays(query, spends);
}
