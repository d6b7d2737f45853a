/** The transcript's windowing (src/lib/list-window.ts): which entries a long chat renders. */
import { describe, expect, test } from "vitest";
import { Heights, sameWindow, windowFor } from "../../src/lib/list-window.ts";

const ids = (n: number) => Array.from({ length: n }, (_, i) => i + 1);

describe("windowFor", () => {
  test("a list shorter than the viewport is rendered whole, with no spacers", () => {
    const h = new Heights();
    expect(windowFor(ids(5), h, { top: 0, height: 800, overscan: 200 })).toEqual({
      start: 0,
      end: 5,
      before: 0,
      after: 0,
    });
    expect(windowFor([], h, { top: Number.POSITIVE_INFINITY, height: 800, overscan: 200 })).toEqual({
      start: 0,
      end: 0,
      before: 0,
      after: 0,
    });
  });

  test("the tail of 5,000 entries renders only the newest that fill the viewport and the overscan", () => {
    const h = new Heights();
    for (const id of ids(5000)) h.set(id, 100);
    const w = windowFor(ids(5000), h, { top: Number.POSITIVE_INFINITY, height: 800, overscan: 400 });
    // 800 px of viewport + 400 px above it at 100 px each: the last 12 entries.
    expect(w).toEqual({ start: 4988, end: 5000, before: 498_800, after: 0 });
  });

  test("a window in the middle covers the viewport and the overscan on both sides; spacers add up to the rest", () => {
    const h = new Heights();
    for (const id of ids(1000)) h.set(id, 50);
    const w = windowFor(ids(1000), h, { top: 10_000, height: 500, overscan: 250 });
    expect(w.start).toBe(195); // 9,750 px above: 195 entries of 50 px
    expect(w.end).toBe(215); // through 10,750 px
    expect(w.before).toBe(9750);
    expect(w.before + (w.end - w.start) * 50 + w.after).toBe(50_000);
  });

  test("entries never measured count as the average of the measured ones", () => {
    const h = new Heights();
    expect(h.of(1)).toBe(80);
    h.set(1, 100);
    h.set(2, 300);
    expect(h.of(3)).toBe(200);
    const w = windowFor(ids(10), h, { top: Number.POSITIVE_INFINITY, height: 400, overscan: 0 });
    expect(w).toEqual({ start: 8, end: 10, before: 1600, after: 0 });
  });
});

describe("Heights", () => {
  test("set says whether the height changed by more than a pixel, and the average follows re-measures", () => {
    const h = new Heights();
    expect(h.set(1, 100)).toBe(true);
    expect(h.set(1, 100.5)).toBe(false);
    expect(h.set(1, 140)).toBe(true);
    h.set(2, 60);
    expect(h.estimate()).toBe(100);
  });
});

test("sameWindow compares the range and the spacers to the pixel", () => {
  const a = { start: 1, end: 5, before: 100.2, after: 50 };
  expect(sameWindow(a, { ...a, before: 99.9 })).toBe(true);
  expect(sameWindow(a, { ...a, before: 120 })).toBe(false);
  expect(sameWindow(a, { ...a, end: 6 })).toBe(false);
});
