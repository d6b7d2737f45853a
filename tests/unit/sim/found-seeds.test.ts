/**
 * Seeds the simulator's CI budget once failed, replayed with their shrunk workloads so each cause
 * stays fixed even if the budget's seeds stop reaching it:
 * - 820: an io-error on a tool result's COMMIT, then a crash right after the reopening's recovery
 *   commit (running -> pending): the next engine ran the unsafe tool call again. An engine bug,
 *   fixed in Harness.start (the interruption is kept in storage); its unit test is
 *   tests/unit/core/recovery.test.ts ("... never ran it (found by sim seed 820)").
 * - 1677: a deletion (abort, wait, delete) whose deleting COMMIT a crash lost: the conversation
 *   stays with its input aborted, which the `answered` invariant did not forgive. A simulator bug:
 *   the abort before a deletion is the client's and now counts for the inputs sent before it.
 * - 6109 and 6988: "still live after 3000 rounds" while the engine waited on drawn model stalls
 *   (76 s, 73 s) with a `waitUntil` poll ticking every 50 virtual ms. A simulator bug: the settle
 *   bound counted those idle polls as rounds (3,000 x 50 ms = 150 s); it now counts rounds of work.
 *   No store faults: these replays check the stalls are waited out, not a crash sequence.
 */
import { expect, test } from "vitest";
import type { Workload } from "../../sim/workload.ts";
import { runSeed } from "../../sim/world.ts";

const found: Array<{ seed: number; workload: Workload; expect: string; crashes?: false }> = [
  {
    seed: 820,
    workload: {
      ops: [
        { op: "input", conv: 0, whenBusy: "followUp" },
        { op: "input", conv: 0, whenBusy: "followUp" },
      ],
      faults: [
        { at: 8, kind: "io-error" },
        { at: 9, kind: "crash-after-commit" },
      ],
    },
    expect: "reopened after io-error",
  },
  {
    seed: 1677,
    workload: {
      ops: [
        { op: "input", conv: 0, whenBusy: "followUp" },
        { op: "fork", conv: 0 },
        { op: "fork", conv: 0 },
        { op: "input", conv: 2, whenBusy: "steer" },
        { op: "delete", conv: 2 },
      ],
      faults: [{ at: 11, kind: "crash-before-commit" }],
    },
    expect: "reopened after crash-before-commit",
  },
  {
    seed: 6109,
    workload: {
      ops: [
        { op: "input", conv: 0, whenBusy: "followUp" },
        { op: "create" },
        { op: "input", conv: 1, whenBusy: "followUp" },
      ],
      faults: [],
    },
    expect: "model #9 stalls 76000 ms",
    crashes: false,
  },
  {
    seed: 6988,
    workload: {
      ops: [
        { op: "input", conv: 0, whenBusy: "followUp" },
        { op: "input", conv: 0, whenBusy: "followUp" },
        { op: "write", conv: 0 },
        { op: "create" },
        { op: "input", conv: 0, whenBusy: "steer" },
        { op: "input", conv: 1, whenBusy: "steer" },
        { op: "abort", conv: 1 },
        { op: "input", conv: 1, whenBusy: "followUp" },
        { op: "input", conv: 1, whenBusy: "followUp" },
      ],
      faults: [],
    },
    expect: "model #13 stalls 73000 ms",
    crashes: false,
  },
];

for (const f of found)
  test(`seed ${f.seed}'s shrunk workload keeps every invariant`, { timeout: 120_000 }, async () => {
    const r = await runSeed({ seed: f.seed, workload: f.workload });
    expect(r.failure).toBeUndefined();
    // It still reaches the fault sequence (or the model stall) that broke it.
    expect(r.trace.some((line) => line.includes(f.expect))).toBe(true);
    if (f.crashes !== false) expect(r.stats.crashes).toBeGreaterThan(0);
  });
