/**
 * The simulator's CI budget, shared by the two unit test files that run it side by side (the unit
 * project runs two files at a time): seeds 1..1000 in one, 1001..2000 in the other. A failing seed
 * fails its file with the command that replays it and a shrunk workload.
 */
import { expect } from "vitest";
import { os } from "./os.ts";
import { replayCommand, runSeeds, shrink } from "./run.ts";

export const CI_SEEDS = 2_000;

export async function runBudget(from: number, count: number): Promise<void> {
  const f = await runSeeds({ from, count });
  console.log(
    `simulator seeds ${from}..${from + count - 1}: ${f.steps} steps, ${f.faults} store faults, ${f.modelFaults} model faults, ${f.toolFaults} tool faults, ${f.crashes} crashes, ${f.checks} invariant checks in ${(f.ms / 1000).toFixed(1)} s (${(f.cpuMs / 1000).toFixed(1)} s CPU; ${os()})`,
  );
  const first = f.failures[0];
  if (first) {
    const small = await shrink(first, { budget: 60 });
    expect.fail(
      `seed ${first.seed} broke ${first.failure!.invariant}: ${first.failure!.message.split("\n")[0]}\n` +
        `replay: ${replayCommand(first.seed)}\nshrunk: ${replayCommand(first.seed, small.workload)}\n` +
        `(${f.failures.length} failing seeds: ${f.failures.map((r) => r.seed).join(", ")})`,
    );
  }
  // The budget must reach what it claims to cover.
  expect(f.crashes).toBeGreaterThan(count / 2);
  expect(f.modelFaults).toBeGreaterThan(count / 10);
  expect(f.toolFaults).toBeGreaterThan(count / 10);
}
