/**
 * The simulator's `run-ends` bound measures progress, not loop turns: an engine waiting on a long
 * drawn stall with a 50 ms poll ticking is not stuck (seeds 6109 and 6988, found-seeds.test.ts), but
 * an engine that waits on nothing except its polls is (at once: "nothing moves"), and one that keeps
 * firing timers without ending is (after 3,000 rounds of work). The stuck engines are made from
 * outside, by the `opened` hook on seed 6109's shrunk workload: every `waitUntil` predicate is
 * replaced by one that never holds, so client waits and subagent handles wait forever.
 */
import { expect, test } from "vitest";
import type { Workload } from "../../sim/workload.ts";
import { runSeed } from "../../sim/world.ts";

const workload: Workload = {
  ops: [
    { op: "input", conv: 0, whenBusy: "followUp" },
    { op: "create" },
    { op: "input", conv: 1, whenBusy: "followUp" },
  ],
  faults: [],
};

test("an engine waiting only on its polls is stuck at once, not after hours of polls", {
  timeout: 120_000,
}, async () => {
  const r = await runSeed({
    seed: 6109,
    workload,
    hooks: {
      opened(h) {
        const real = h.waitUntil.bind(h);
        h.waitUntil = (_predicate, signal) => real(() => false, signal);
      },
    },
  });
  expect(r.failure?.invariant).toBe("run-ends");
  expect(r.failure?.message).toMatch(/^nothing moves after/);
});

test("an engine that keeps firing timers without ending is stuck after 3,000 rounds of work", {
  timeout: 120_000,
}, async () => {
  const r = await runSeed({
    seed: 6109,
    workload,
    hooks: {
      opened(h) {
        const real = h.waitUntil.bind(h);
        h.waitUntil = (_predicate, signal) => real(() => false, signal);
        const spin = () => {
          if (!h.closed) setTimeout(spin, 10);
        };
        spin();
      },
    },
  });
  expect(r.failure?.invariant).toBe("run-ends");
  expect(r.failure?.message).toBe("still live after 3000 rounds of work");
});
