/**
 * CPU profiles the browser bench takes over CDP (long-chat.ts): written to
 * test-results/profiles/*.cpuprofile (DevTools opens them), summed by function's self time, over the
 * whole profile or over stretches of it (a long task). A profile's samples are on the profiler's
 * clock (µs); `clock` maps them to the page's `performance.now()` (ms), known from one instant read
 * on both (the profiler's start, read in the page just after it), so a stretch's attribution is as
 * exact as that read (a few ms: fine for tasks over 50 ms).
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

export interface CpuProfile {
  nodes: Array<{ id: number; callFrame: { functionName: string; url: string; lineNumber: number } }>;
  startTime: number;
  samples?: number[];
  timeDeltas?: number[];
}

/** A stretch of the page's time, `performance.now()` ms. */
export interface Stretch {
  readonly from: number;
  readonly to: number;
}

/** Write the profile under test-results/profiles/. */
export function saveProfile(file: string, profile: CpuProfile): void {
  const dir = join(root, "test-results", "profiles");
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, file), JSON.stringify(profile));
}

/**
 * Self time by function ("name file:line"), ms, busiest first: of the whole profile, or (with
 * `within` and the page's `performance.now()` at the profile's start) of the samples inside it.
 */
export function selfTime(
  profile: CpuProfile,
  options: { within?: Stretch; startedAt?: number } = {},
): Array<[string, number]> {
  const byNode = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map<string, number>();
  const samples = profile.samples ?? [];
  const deltas = profile.timeDeltas ?? [];
  let at = profile.startTime;
  for (let i = 0; i < samples.length; i++) {
    at += deltas[i] ?? 0;
    const ms = (deltas[i + 1] ?? 0) / 1000;
    if (options.within) {
      const t = (options.startedAt ?? 0) + (at - profile.startTime) / 1000;
      if (t < options.within.from || t > options.within.to) continue;
    }
    const node = byNode.get(samples[i]!);
    if (!node || node.callFrame.functionName === "(idle)") continue;
    const where = node.callFrame.url.split("/").at(-1) ?? "";
    const key = `${node.callFrame.functionName || "(anonymous)"} ${where}:${node.callFrame.lineNumber + 1}`;
    self.set(key, (self.get(key) ?? 0) + ms);
  }
  return [...self].sort((a, b) => b[1] - a[1]);
}

/** Print a profile's busy time and its top functions by self time. */
export function printTop(file: string, profile: CpuProfile): void {
  const all = selfTime(profile);
  const total = all.reduce((sum, [, ms]) => sum + ms, 0);
  console.log(`  ${file}: ${total.toFixed(0)} ms busy; top self time:`);
  for (const [name, ms] of all.slice(0, 12)) console.log(`    ${ms.toFixed(1).padStart(7)} ms  ${name}`);
}
