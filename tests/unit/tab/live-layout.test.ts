/**
 * lib/live-layout.ts: the incremental layout agrees with a `Layout` rebuilt from the same heights,
 * through measurements in any order, re-measurements and a changing estimate.
 */
import { expect, test } from "vitest";
import { Heights, Layout, sameWindow, windowFor } from "../../../src/lib/list-window.ts";
import { LiveLayout } from "../../../src/lib/live-layout.ts";

/** A small deterministic pseudo-random sequence (so a failure reproduces). */
function random(seed: number): () => number {
  let x = seed;
  return () => {
    x = (x * 1103515245 + 12345) % 2147483648;
    return x / 2147483648;
  };
}

test("tops, the total and indexAt match a rebuilt Layout after every measurement", () => {
  const next = random(7);
  const ids = Array.from({ length: 500 }, (_, i) => 1000 + i);
  const heights = new Heights();
  // Some heights known before the live layout is built.
  for (let i = 0; i < 40; i++) heights.set(ids[i * 7]!, 30 + Math.floor(next() * 200));
  const live = new LiveLayout(ids, heights);
  for (let step = 0; step < 300; step++) {
    const index = Math.floor(next() * ids.length);
    const height = 20 + Math.floor(next() * 300);
    if (heights.set(ids[index]!, height)) live.note(index, height);
    if (step % 25 !== 0) continue;
    const whole = new Layout(ids, heights);
    expect(live.length).toBe(whole.length);
    expect(live.total).toBeCloseTo(whole.total, 6);
    for (let i = 0; i <= ids.length; i += 13) expect(live.top(i)).toBeCloseTo(whole.top(i), 6);
    for (let k = 0; k < 20; k++) {
      const y = next() * whole.total * 1.1 - 50;
      expect(live.indexAt(y)).toBe(whole.indexAt(y));
    }
    const view = { top: next() * whole.total, height: 800, overscan: 1200, wholeUpTo: 120 };
    const a = windowFor(live, view);
    const b = windowFor(whole, view);
    expect({ start: a.start, end: a.end }).toEqual({ start: b.start, end: b.end });
    expect(sameWindow(a, b)).toBe(true);
  }
});

test("an empty list has no entries and no height", () => {
  const live = new LiveLayout([], new Heights());
  expect(live.length).toBe(0);
  expect(live.total).toBe(0);
  expect(live.indexAt(10)).toBe(-1);
});

test("entries not loaded yet (`lead`) come first at the estimate, as unmeasured entries of a rebuilt Layout", () => {
  const next = random(11);
  const ids = Array.from({ length: 200 }, (_, i) => 5000 + i);
  const heights = new Heights();
  for (let i = 0; i < 60; i++) heights.set(ids[i * 3]!, 40 + Math.floor(next() * 150));
  const lead = 1000;
  const live = new LiveLayout(ids, heights, { lead });
  // The same list with the unloaded entries standing in as ids never measured.
  const stand = [...Array.from({ length: lead }, (_, i) => -1 - i), ...ids];
  for (let step = 0; step < 50; step++) {
    const k = Math.floor(next() * ids.length);
    const height = 20 + Math.floor(next() * 300);
    if (heights.set(ids[k]!, height)) live.note(lead + k, height);
  }
  const whole = new Layout(stand, heights);
  expect(live.length).toBe(lead + ids.length);
  expect(live.total).toBeCloseTo(whole.total, 6);
  expect(live.top(lead)).toBeCloseTo(lead * heights.estimate(), 6);
  for (let i = 0; i <= stand.length; i += 17) expect(live.top(i)).toBeCloseTo(whole.top(i), 6);
  for (let k = 0; k < 30; k++) {
    const y = next() * whole.total;
    expect(live.indexAt(y)).toBe(whole.indexAt(y));
  }
});
