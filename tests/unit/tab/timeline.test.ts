/**
 * The timeline view's pure parts (src/lib/timeline.ts): rows nested depth first by ownership, each
 * bar once, placed in percent of the range (a live bar to `now`, clamped at the edges), a bar whose
 * parent is off the page a root; names that say the outcome in words; ticks; zoom within bounds.
 */
import { expect, test } from "vitest";
import { barName, layoutRows, ticks, zoom } from "../../../src/lib/timeline.ts";
import type { TimelineBar } from "../../../worker/protocol/index.ts";

const bar = (
  id: string,
  start: number,
  end: number | undefined,
  more: Partial<TimelineBar> = {},
): TimelineBar => ({
  id,
  taskId: Number(id.slice(1)),
  conversationId: 1,
  kind: "tool",
  taskKind: "pi.tool",
  label: `bar ${id}`,
  outcome: end === undefined ? "running" : "ok",
  start,
  ...(end !== undefined ? { end } : {}),
  why: "done",
  ...more,
});

test("rows: depth first by ownership, siblings by start, each bar once, in percent of the range", () => {
  const page = {
    from: 1000,
    to: 2000,
    now: 1900,
    bars: [
      bar("t3", 1500, 1600, { parent: "t1" }),
      bar("t1", 1000, 2000, { kind: "generation" }),
      bar("t2", 1100, 1200, { parent: "t1" }),
      bar("t4", 1120, undefined, { parent: "t2" }),
      bar("t9", 500, 1050, { parent: "t8" }),
    ],
  };
  const rows = layoutRows(page);
  expect(rows.map((r) => [r.bar.id, r.depth])).toEqual([
    // t9's parent is not on the page: it is a root, ordered by start.
    ["t9", 0],
    ["t1", 0],
    ["t2", 1],
    ["t4", 2],
    ["t3", 1],
  ]);
  const at = (id: string) => rows.find((r) => r.bar.id === id)!;
  expect(at("t1")).toMatchObject({ left: 0, width: 100 });
  expect(at("t3")).toMatchObject({ left: 50, width: 10 });
  // A live bar runs to now; one that began before the range is cut at its start.
  expect(at("t4").left).toBeCloseTo(12);
  expect(at("t4").width).toBeCloseTo(78);
  expect(at("t9")).toMatchObject({ left: 0, width: 5 });
});

test("a bar's name says what it is, its outcome in words, how long and its usage", () => {
  const error = bar("t5", 0, 4200, { label: "read tool", outcome: "error" });
  expect(barName(error, 0)).toBe("read tool: error, 4.2 s");
  const live = bar("t6", 1000, undefined, {
    label: "answer",
    usage: { input: 1000, output: 234, total: 1234, cost: 0.0031 },
  });
  expect(barName(live, 1850)).toBe(
    "answer: running, for 850 ms so far, 1,234 tokens (1,000 in, 234 out) · $0.0031",
  );
});

test("ticks stay within the range; zoom stays within the run's bounds", () => {
  const t = ticks(0, 10_000);
  expect(t[0]).toEqual({ left: 0, words: "0" });
  expect(t.every((x) => x.left >= 0 && x.left <= 100)).toBe(true);
  expect(t.length).toBeGreaterThanOrEqual(2);
  expect(t.length).toBeLessThanOrEqual(5);
  expect(zoom({ from: 0, to: 1000 }, 0.5, { min: 0, max: 1000 })).toEqual({ from: 250, to: 750 });
  expect(zoom({ from: 0, to: 1000 }, 0.5, { min: 0, max: 1000 }, 0)).toEqual({ from: 0, to: 500 });
  expect(zoom({ from: 250, to: 750 }, 4, { min: 0, max: 1000 })).toEqual({ from: 0, to: 1000 });
});
