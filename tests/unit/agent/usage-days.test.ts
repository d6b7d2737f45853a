/**
 * Usage over time (issue 31 part 5): tokens and cost per day and per model, read from the stored
 * entries that carry spend, the days counted in the asker's time zone (a DST day is one day of 23
 * or 25 hours), a bad zone or range refused in words before anything is read.
 */
import type { AssistantMessage, Usage } from "@mariozechner/pi-ai";
import { describe, expect, test } from "vitest";
import { addToolUsage, appendJsonAssistant, ENTRY, errorAnswer } from "../../../worker/agent/records.ts";
import {
  aggregateUsageDays,
  daysBetween,
  MAX_USAGE_DAYS,
  type Spend,
  UsageQueryInvalid,
  usageDays,
} from "../../../worker/agent/usage-days.ts";
import { echo, open } from "./fixtures.ts";

const usage = (input: number, output: number, cost = 0, cache = 0): Usage => ({
  input,
  output,
  cacheRead: cache,
  cacheWrite: 0,
  totalTokens: input + output + cache,
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: cost },
});

const at = (iso: string) => Date.parse(iso);

describe("aggregateUsageDays: days in the asker's zone", () => {
  test("a spring-forward day in Berlin (23 hours) is one day: its first and last minutes are on it, the next minute is not", () => {
    // 2026-03-29: clocks go from 02:00 CET to 03:00 CEST; the day runs 2026-03-28T23:00Z .. 2026-03-29T22:00Z.
    const spends: Spend[] = [
      { at: at("2026-03-28T22:59:00Z"), model: "p/m", usage: usage(1, 0) }, // 23:59 CET on the 28th
      { at: at("2026-03-28T23:00:00Z"), model: "p/m", usage: usage(10, 0) }, // 00:00 CET on the 29th
      { at: at("2026-03-29T21:59:00Z"), model: "p/m", usage: usage(100, 0) }, // 23:59 CEST on the 29th
      { at: at("2026-03-29T22:00:00Z"), model: "p/m", usage: usage(1000, 0) }, // 00:00 CEST on the 30th
    ];
    const berlin = aggregateUsageDays(
      { timeZone: "Europe/Berlin", from: "2026-03-28", to: "2026-03-30" },
      spends,
    );
    expect(berlin.rows.map((r) => [r.day, r.input, r.requests])).toEqual([
      ["2026-03-28", 1, 1],
      ["2026-03-29", 110, 2],
      ["2026-03-30", 1000, 1],
    ]);
    // The same instants in UTC fall on other days.
    const utc = aggregateUsageDays({ timeZone: "UTC", from: "2026-03-28", to: "2026-03-30" }, spends);
    expect(utc.rows.map((r) => [r.day, r.input])).toEqual([
      ["2026-03-28", 11],
      ["2026-03-29", 1100],
    ]);
  });

  test("a fall-back day in New York (25 hours) is one day", () => {
    // 2026-11-01: 02:00 EDT goes back to 01:00 EST; the day runs 04:00Z .. 2026-11-02T05:00Z.
    const spends: Spend[] = [
      { at: at("2026-11-01T03:59:00Z"), model: "p/m", usage: usage(1, 0) }, // 23:59 EDT on Oct 31
      { at: at("2026-11-01T04:00:00Z"), model: "p/m", usage: usage(10, 0) }, // 00:00 EDT
      { at: at("2026-11-02T04:59:00Z"), model: "p/m", usage: usage(100, 0) }, // 23:59 EST
      { at: at("2026-11-02T05:00:00Z"), model: "p/m", usage: usage(1000, 0) }, // 00:00 EST on Nov 2
    ];
    const ny = aggregateUsageDays(
      { timeZone: "America/New_York", from: "2026-10-31", to: "2026-11-02" },
      spends,
    );
    expect(ny.rows.map((r) => [r.day, r.input])).toEqual([
      ["2026-10-31", 1],
      ["2026-11-01", 110],
      ["2026-11-02", 1000],
    ]);
  });

  test("per model: in, out, cache, cost and requests added up; zero rows and days outside the range dropped", () => {
    const noon = at("2026-05-04T12:00:00Z");
    const rows = aggregateUsageDays({ timeZone: "Asia/Kolkata", from: "2026-05-04", to: "2026-05-04" }, [
      { at: noon, model: "b/y", usage: usage(5, 6, 0.5, 7) },
      { at: noon + 1, model: "a/x", usage: usage(1, 2, 0.25) },
      { at: noon + 2, model: "a/x", usage: usage(3, 4, 0.25) },
      { at: noon + 3, model: "a/x", usage: usage(0, 0) }, // a failed attempt: no spend
      { at: noon + 86_400_000, model: "a/x", usage: usage(9, 9) }, // the next day: outside
    ]).rows;
    expect(rows).toEqual([
      {
        day: "2026-05-04",
        model: "a/x",
        input: 4,
        output: 6,
        cacheRead: 0,
        cacheWrite: 0,
        cost: 0.5,
        requests: 2,
      },
      {
        day: "2026-05-04",
        model: "b/y",
        input: 5,
        output: 6,
        cacheRead: 7,
        cacheWrite: 0,
        cost: 0.5,
        requests: 1,
      },
    ]);
  });

  test("a zone or range the engine cannot use is refused in words, with its code", () => {
    const refusal = (query: { timeZone: string; from: string; to: string }) => {
      try {
        aggregateUsageDays(query, []);
      } catch (e) {
        expect(e).toBeInstanceOf(UsageQueryInvalid);
        return {
          code: (e as UsageQueryInvalid).code,
          name: (e as Error).name,
          message: (e as Error).message,
        };
      }
      return undefined;
    };
    expect(refusal({ timeZone: "Mars/Olympus", from: "2026-01-01", to: "2026-01-02" })).toEqual({
      code: "bad_time_zone",
      name: "UsageQueryInvalid",
      message: '"Mars/Olympus" is not a time zone (try one like Europe/Berlin)',
    });
    expect(refusal({ timeZone: "UTC", from: "2026-02-30", to: "2026-03-01" })?.code).toBe("bad_range");
    expect(refusal({ timeZone: "UTC", from: "2026-03-02", to: "2026-03-01" })?.message).toBe(
      "2026-03-01 is before 2026-03-02",
    );
    expect(refusal({ timeZone: "UTC", from: "2025-01-01", to: "2026-01-02" })?.message).toBe(
      `at most ${MAX_USAGE_DAYS} days at a time`,
    );
    // A leap year's 366 days are one query.
    expect(refusal({ timeZone: "UTC", from: "2028-01-01", to: "2028-12-31" })).toBeUndefined();
    expect(daysBetween("2028-02-27", "2028-03-01")).toEqual([
      "2028-02-27",
      "2028-02-28",
      "2028-02-29",
      "2028-03-01",
    ]);
  });
});

const answer = (model: string, timestamp: number, spent: Usage): AssistantMessage => ({
  role: "assistant",
  content: [{ type: "text", text: "hi" }],
  api: "faux",
  provider: "prov",
  model,
  usage: spent,
  stopReason: "stop",
  timestamp,
});

describe("usageDays: read from the store", () => {
  test("answers and tools' own spend per day and model, over every conversation, each request once (a fork's shared past too)", async () => {
    const { h, root } = await open(echo);
    const day1 = at("2026-07-01T10:00:00Z");
    const day2 = at("2026-07-02T10:00:00Z");
    const other = await h.createConversation({ ownership: { kind: "ownerless" } });
    const forkAt = await h.transaction((tx) => {
      appendJsonAssistant(tx, root.id, answer("m1", day1, usage(10, 5, 0.01)));
      const e = appendJsonAssistant(tx, root.id, answer("m2", day1 + 1000, usage(20, 1, 0.02)));
      appendJsonAssistant(tx, other.id, answer("m1", day2, usage(1, 1, 0.001)));
      // A failed request: a row of zeros, no spend.
      appendJsonAssistant(
        tx,
        other.id,
        errorAnswer({ api: "faux", provider: "prov", model: "m1" }, new Error("503"), day2),
      );
      // A tool that spent on a model of its own (a summarizer): under "tool <name>".
      tx.appendEntry(other.id, {
        kind: ENTRY.toolResult,
        model: [
          {
            role: "toolResult",
            toolCallId: "c1",
            toolName: "summarize",
            content: [],
            isError: false,
            timestamp: day2 + 5,
          },
        ] as never,
        data: { diagnostics: [], usage: usage(7, 3, 0.5) } as never,
      });
      addToolUsage(tx, other.id, "summarize", usage(7, 3, 0.5));
      return e.id;
    });
    // A fork sees the root's two answers but holds no copy of them.
    await h.forkConversation(root.id, forkAt, { ownership: { kind: "ownerless" } });

    const days = await usageDays(h.store, {
      timeZone: "Europe/Lisbon",
      from: "2026-06-30",
      to: "2026-07-03",
    });
    expect(days).toEqual({
      timeZone: "Europe/Lisbon",
      from: "2026-06-30",
      to: "2026-07-03",
      rows: [
        {
          day: "2026-07-01",
          model: "prov/m1",
          input: 10,
          output: 5,
          cacheRead: 0,
          cacheWrite: 0,
          cost: 0.01,
          requests: 1,
        },
        {
          day: "2026-07-01",
          model: "prov/m2",
          input: 20,
          output: 1,
          cacheRead: 0,
          cacheWrite: 0,
          cost: 0.02,
          requests: 1,
        },
        {
          day: "2026-07-02",
          model: "prov/m1",
          input: 1,
          output: 1,
          cacheRead: 0,
          cacheWrite: 0,
          cost: 0.001,
          requests: 1,
        },
        {
          day: "2026-07-02",
          model: "tool summarize",
          input: 7,
          output: 3,
          cacheRead: 0,
          cacheWrite: 0,
          cost: 0.5,
          requests: 1,
        },
      ],
    });
    // The same totals as the usage documents (the fork has a fresh one of its own).
    const total = await h.usage();
    const tokens = (rows: typeof days.rows) => rows.reduce((n, r) => n + r.input + r.output, 0);
    expect(tokens(days.rows)).toBe(
      [...Object.values(total.models), ...Object.values(total.tools)].reduce(
        (n, u) => n + u.input + u.output,
        0,
      ),
    );
    // Outside the range, nothing; the range is read in the asker's zone (Kiribati is UTC+14).
    expect(
      (await usageDays(h.store, { timeZone: "UTC", from: "2026-07-03", to: "2026-07-04" })).rows,
    ).toEqual([]);
    const kiribati = await usageDays(h.store, {
      timeZone: "Pacific/Kiritimati",
      from: "2026-07-02",
      to: "2026-07-02",
    });
    expect(kiribati.rows.map((r) => r.model)).toEqual(["prov/m1", "prov/m2"]);
  });
});
