/**
 * What one seed asks of the engine: a workload (the client's acts, in order) and the store faults
 * (which transaction of the run dies, and how). Both are plain data drawn from the seed by
 * `drawWorkload`, so a failing run can be shrunk by removing parts and replayed from the data alone.
 * What the model answers and what the tools do is drawn during the run from the seed's other
 * streams (see world.ts), not stored here: it depends on the requests the engine makes.
 */
import { Prng } from "./prng.ts";

/** A conversation the workload names by its position among those the run created (0: the root). */
export type ConvRef = number;

export type Op =
  | { readonly op: "input"; readonly conv: ConvRef; readonly whenBusy: "followUp" | "steer" }
  | { readonly op: "write"; readonly conv: ConvRef }
  | { readonly op: "create" }
  | { readonly op: "fork"; readonly conv: ConvRef }
  | { readonly op: "compact"; readonly conv: ConvRef }
  | { readonly op: "abort"; readonly conv: ConvRef }
  | { readonly op: "withdraw"; readonly conv: ConvRef }
  | { readonly op: "delete"; readonly conv: ConvRef }
  | { readonly op: "reload" }
  | { readonly op: "timer"; readonly conv: ConvRef; readonly ms: number }
  | { readonly op: "upgrade" }
  | { readonly op: "offline"; readonly ms: number }
  | { readonly op: "pass"; readonly ms: number }
  | { readonly op: "settle" };

export type StoreFaultKind =
  | "crash-after-commit"
  | "crash-before-commit"
  | "crash-in-group"
  | "io-error"
  | "quota";

/** The store fails at the run's `at`-th transaction (counted across reopenings). */
export interface StoreFault {
  readonly at: number;
  readonly kind: StoreFaultKind;
}

export interface Workload {
  readonly ops: readonly Op[];
  readonly faults: readonly StoreFault[];
}

const KINDS: readonly StoreFaultKind[] = [
  "crash-after-commit",
  "crash-after-commit",
  "crash-before-commit",
  "crash-in-group",
  "io-error",
  "quota",
];

/** The workload of `seed`: 4 to 14 acts over up to 4 conversations, and 0 to 3 store faults. */
export function drawWorkload(seed: number): Workload {
  const r = new Prng(seed);
  const ops: Op[] = [];
  let convs = 1;
  const conv = () => r.int(0, convs - 1);
  const n = r.int(4, 14);
  // The first act is an input: a run that never asks anything proves little.
  ops.push({ op: "input", conv: 0, whenBusy: "followUp" });
  for (let i = 1; i < n; i++) {
    const x = r.next();
    if (x < 0.3) ops.push({ op: "input", conv: conv(), whenBusy: r.chance(0.7) ? "followUp" : "steer" });
    else if (x < 0.36) ops.push({ op: "write", conv: conv() });
    else if (x < 0.43 && convs < 4) {
      ops.push({ op: "create" });
      convs++;
    } else if (x < 0.49 && convs < 4) {
      ops.push({ op: "fork", conv: conv() });
      convs++;
    } else if (x < 0.54) ops.push({ op: "compact", conv: conv() });
    else if (x < 0.6) ops.push({ op: "abort", conv: conv() });
    else if (x < 0.64) ops.push({ op: "withdraw", conv: conv() });
    else if (x < 0.67 && convs > 1) ops.push({ op: "delete", conv: r.int(1, convs - 1) });
    else if (x < 0.71) ops.push({ op: "reload" });
    else if (x < 0.76) ops.push({ op: "timer", conv: conv(), ms: r.int(1, 60) * 1000 });
    else if (x < 0.8) ops.push({ op: "upgrade" });
    else if (x < 0.84) ops.push({ op: "offline", ms: r.int(1, 120) * 1000 });
    else if (x < 0.94) ops.push({ op: "pass", ms: r.int(0, 3) * r.int(1, 4000) });
    else ops.push({ op: "settle" });
  }
  const faults: StoreFault[] = [];
  const f = r.chance(0.25) ? 0 : r.int(1, 3);
  for (let i = 0; i < f; i++) faults.push({ at: r.int(1, 60), kind: r.pick(KINDS) });
  faults.sort((a, b) => a.at - b.at);
  return { ops, faults: faults.filter((x, i) => i === 0 || faults[i - 1]!.at !== x.at) };
}

export function describeOp(o: Op): string {
  const { op, ...rest } = o;
  const args = Object.entries(rest).map(([k, v]) => `${k}=${v}`);
  return [op, ...args].join(" ");
}
