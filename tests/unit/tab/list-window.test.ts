/** The transcript's windowing (src/lib/list-window.ts): which entries a long chat renders. */
import { describe, expect, test } from "vitest";
import { FIRST_GUESS, Heights, Layout, sameWindow, windowFor } from "../../../src/lib/list-window.ts";

const ids = (n: number) => Array.from({ length: n }, (_, i) => i + 1);
const measured = (n: number, height: (id: number) => number) => {
  const h = new Heights();
  for (const id of ids(n)) h.set(id, height(id));
  return h;
};
const view = { height: 800, overscan: 400, wholeUpTo: 0 };

describe("windowFor", () => {
  test("a list of at most wholeUpTo entries is rendered whole, with no spacers, wherever the view is", () => {
    const h = measured(120, () => 100);
    const layout = new Layout(ids(120), h);
    for (const top of [0, 5000, Number.POSITIVE_INFINITY])
      expect(windowFor(layout, { ...view, top, wholeUpTo: 120 })).toEqual({
        start: 0,
        end: 120,
        before: 0,
        after: 0,
      });
    expect(windowFor(new Layout([], h), { ...view, top: Number.POSITIVE_INFINITY })).toEqual({
      start: 0,
      end: 0,
      before: 0,
      after: 0,
    });
  });

  test("the tail of 5,000 entries renders only the newest that fill the viewport and the overscan", () => {
    const layout = new Layout(
      ids(5000),
      measured(5000, () => 100),
    );
    const w = windowFor(layout, { ...view, top: Number.POSITIVE_INFINITY, wholeUpTo: 120 });
    // The last 800 px and 400 px above them at 100 px each: entries 4988..4999.
    expect(w).toEqual({ start: 4988, end: 5000, before: 498_800, after: 0 });
  });

  test("the top of 5,000 entries starts at the first, with no spacer above", () => {
    const layout = new Layout(
      ids(5000),
      measured(5000, () => 100),
    );
    const w = windowFor(layout, { ...view, top: 0 });
    expect(w).toEqual({ start: 0, end: 13, before: 0, after: 498_700 });
    // Above the list (a scroller's padding) is the top too.
    expect(windowFor(layout, { ...view, top: -20 })).toEqual(w);
  });

  test("a window in the middle covers the viewport and the overscan on both sides; spacers add up to the rest", () => {
    const layout = new Layout(
      ids(1000),
      measured(1000, () => 50),
    );
    const w = windowFor(layout, { top: 10_000, height: 500, overscan: 250, wholeUpTo: 0 });
    expect(w.start).toBe(195); // 9,750 px above: 195 entries of 50 px
    expect(w.end).toBe(216); // through the entry holding 10,750 px
    expect(w.before).toBe(9750);
    expect(w.before + (w.end - w.start) * 50 + w.after).toBe(50_000);
  });

  test("entries of different heights: the window starts at the entry holding the overscan's top", () => {
    // Heights 10, 20, 30, ... px: the entry of id k starts at 5*k*(k-1), at index k - 1.
    const layout = new Layout(
      ids(100),
      measured(100, (id) => 10 * id),
    );
    expect(layout.total).toBe(50_500);
    const w = windowFor(layout, { top: 1000, height: 100, overscan: 0, wholeUpTo: 0 });
    // Id 14 spans 910..1050 (the viewport's top), id 15 1050..1200 (its bottom, 1100).
    expect(w).toEqual({ start: 13, end: 15, before: 910, after: 50_500 - 1200 });
  });

  test("entries never measured count as the average of the measured ones", () => {
    const h = new Heights();
    expect(h.of(1)).toBe(FIRST_GUESS);
    h.set(1, 100);
    h.set(2, 300);
    expect(h.of(3)).toBe(200);
    const w = windowFor(new Layout(ids(10), h), {
      top: Number.POSITIVE_INFINITY,
      height: 400,
      overscan: 0,
      wholeUpTo: 0,
    });
    expect(w).toEqual({ start: 8, end: 10, before: 1600, after: 0 });
  });
});

describe("Layout", () => {
  test("tops add the heights; indexAt finds the entry holding a position, clamped into the list", () => {
    const layout = new Layout(
      [7, 8, 9],
      measured(9, (id) => id * 10),
    );
    expect([layout.top(0), layout.top(1), layout.top(2), layout.top(3)]).toEqual([0, 70, 150, 240]);
    expect(layout.total).toBe(240);
    expect([-5, 0, 69.9, 70, 149, 150, 239, 240, 1e9].map((y) => layout.indexAt(y))).toEqual([
      0, 0, 0, 1, 1, 2, 2, 2, 2,
    ]);
    expect(new Layout([], new Heights()).indexAt(0)).toBe(-1);
  });

  test("a measurement replacing an estimate moves every later top by the difference", () => {
    const h = measured(4, () => 100);
    const list = ids(6); // 5 and 6 are estimated at 100
    const before = new Layout(list, h);
    h.set(5, 100); // measured as estimated: nothing moves
    h.set(2, 160);
    const after = new Layout(list, h);
    expect(after.top(2) - before.top(2)).toBe(60);
    // The mean rose to 112 for entry 6, the only one still estimated.
    expect(after.total - before.total).toBe(60 + 12);
  });
});

describe("Heights", () => {
  test("set says whether the height changed by more than half a pixel; clear forgets everything", () => {
    const h = new Heights();
    expect(h.set(1, 100)).toBe(true);
    expect(h.set(1, 100.4)).toBe(false);
    expect(h.set(1, 140)).toBe(true);
    h.set(2, 60);
    expect(h.estimate()).toBe(100);
    h.clear();
    expect(h.of(1)).toBe(FIRST_GUESS);
    expect(h.estimate()).toBe(FIRST_GUESS);
  });

  test("version changes with every height that changed and with clear, and only then", () => {
    const h = new Heights();
    const v0 = h.version;
    h.set(1, 100);
    const v1 = h.version;
    expect(v1).not.toBe(v0);
    h.set(1, 100.3);
    expect(h.version).toBe(v1);
    h.set(2, 50);
    const v2 = h.version;
    expect(v2).not.toBe(v1);
    h.clear();
    expect(h.version).not.toBe(v2);
  });
});

test("sameWindow compares the range and the spacers to half a pixel", () => {
  const a = { start: 1, end: 5, before: 100.2, after: 50 };
  expect(sameWindow(a, { ...a, before: 99.9 })).toBe(true);
  expect(sameWindow(a, { ...a, before: 99.6 })).toBe(false);
  expect(sameWindow(a, { ...a, after: 51 })).toBe(false);
  expect(sameWindow(a, { ...a, end: 6 })).toBe(false);
});
