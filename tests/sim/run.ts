/**
 * Running many seeds, and shrinking a failure. `runSeeds` runs seeds `from .. from + count - 1`
 * one after another and adds up the figures; `shrink` takes a failing run's workload and removes
 * acts and store faults one at a time (and shortens waits) while the same invariant still breaks,
 * until no single removal keeps it failing: a minimal workload, replayable with `--workload`.
 * `replayCommand` is the one command that replays a seed (or a shrunk workload) exactly.
 */

import type { Op, Workload } from "./workload.ts";
import { runSeed, type SimHooks, type SimResult, type SimStats } from "./world.ts";

/** A batch's figures: each seed's counters summed (all but its virtual time), its failures, its time. */
export interface Figures extends Omit<SimStats, "virtualMs"> {
  seeds: number;
  failures: SimResult[];
  ms: number;
  cpuMs: number;
}

export async function runSeeds(options: {
  from: number;
  count: number;
  hooks?: SimHooks;
  /** Stop at the first failure (the bug tests); default: run them all. */
  stopAtFailure?: boolean;
  onResult?: (r: SimResult) => void;
}): Promise<Figures> {
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  const f: Figures = {
    seeds: 0,
    steps: 0,
    faults: 0,
    crashes: 0,
    checks: 0,
    modelFaults: 0,
    toolFaults: 0,
    requests: 0,
    realWaits: 0,
    failures: [],
    ms: 0,
    cpuMs: 0,
  };
  for (let seed = options.from; seed < options.from + options.count; seed++) {
    const r = await runSeed({ seed, ...(options.hooks ? { hooks: options.hooks } : {}) });
    f.seeds++;
    f.steps += r.stats.steps;
    f.faults += r.stats.faults;
    f.crashes += r.stats.crashes;
    f.checks += r.stats.checks;
    f.modelFaults += r.stats.modelFaults;
    f.toolFaults += r.stats.toolFaults;
    f.requests += r.stats.requests;
    f.realWaits += r.stats.realWaits;
    options.onResult?.(r);
    if (!r.ok) {
      f.failures.push(r);
      if (options.stopAtFailure) break;
    }
  }
  f.ms = performance.now() - t0;
  const c = process.cpuUsage(c0);
  f.cpuMs = (c.user + c.system) / 1000;
  return f;
}

/** Smaller variants of `w`: each without one store fault, without one act, or with one wait shortened. */
function* smaller(w: Workload): Generator<Workload> {
  for (let i = 0; i < w.faults.length; i++) yield { ops: w.ops, faults: w.faults.filter((_, j) => j !== i) };
  // Later acts first: removing them never shifts which conversation an earlier act names.
  for (let i = w.ops.length - 1; i >= 0; i--) {
    if (i === 0 && w.ops.length === 1) continue;
    yield { ops: w.ops.filter((_, j) => j !== i), faults: w.faults };
  }
  for (let i = 0; i < w.ops.length; i++) {
    const o = w.ops[i]!;
    if ((o.op === "pass" || o.op === "offline" || o.op === "timer") && o.ms > 1000) {
      const ops = [...w.ops];
      ops[i] = { ...o, ms: Math.floor(o.ms / 2) } as Op;
      yield { ops, faults: w.faults };
    }
  }
}

/** Greedy shrinking: keep the first smaller workload that breaks the same invariant, until none does. */
export async function shrink(
  failing: SimResult,
  options: { hooks?: SimHooks; budget?: number } = {},
): Promise<{ workload: Workload; result: SimResult; runs: number }> {
  const invariant = failing.failure!.invariant;
  let best = failing;
  let runs = 0;
  const budget = options.budget ?? 300;
  let progress = true;
  while (progress && runs < budget) {
    progress = false;
    for (const candidate of smaller(best.workload)) {
      if (runs >= budget) break;
      runs++;
      const r = await runSeed({
        seed: failing.seed,
        workload: candidate,
        ...(options.hooks ? { hooks: options.hooks } : {}),
      });
      if (!r.ok && r.failure!.invariant === invariant) {
        best = r;
        progress = true;
        break;
      }
    }
  }
  return { workload: best.workload, result: best, runs };
}

export function replayCommand(seed: number, workload?: Workload): string {
  const base = `npm run sim -- --seed ${seed}`;
  return workload ? `${base} --workload '${JSON.stringify(workload)}'` : base;
}
