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
 */
import { expect, test } from "vitest";
import type { Workload } from "../../sim/workload.ts";
import { runSeed } from "../../sim/world.ts";

const found: Array<{ seed: number; workload: Workload; expect: string }> = [
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
];

for (const f of found)
  test(`seed ${f.seed}'s shrunk workload keeps every invariant`, { timeout: 120_000 }, async () => {
    const r = await runSeed({ seed: f.seed, workload: f.workload });
    expect(r.failure).toBeUndefined();
    // It still reaches the fault sequence that broke it.
    expect(r.trace.some((line) => line.includes(f.expect))).toBe(true);
    expect(r.stats.crashes).toBeGreaterThan(0);
  });
