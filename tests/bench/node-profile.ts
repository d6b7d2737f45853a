/**
 * CPU profiles of chosen stretches of a Node bench (node:inspector, in-process): `start()` and
 * `stop()` around each stretch to profile; `report(name)` writes each stretch's profile (files
 * DevTools opens) under test-results/profiles/, and prints the self time of all stretches ranked by
 * module (the engine's worker/<dir>, or the npm package) and by function. Under tsx each engine file
 * is its own module; in a bundle (`npm run bench`) the engine is one file, ranked by function only. Idle and the settle pauses are
 * left out of the ranking, so its percentages are shares of the busy time.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { Session } from "node:inspector/promises";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples?: number[];
  timeDeltas?: number[];
}

/** Where a frame's code lives: worker/<dir>, an npm package, node's own, or a native pseudo-frame. */
function moduleOf(url: string): string {
  if (!url) return "(native, gc, program)";
  const pkg = url.match(/node_modules\/((@[^/]+\/)?[^/]+)/);
  if (pkg) return pkg[1]!;
  const engine = url.match(/\/(worker\/[^/]+)\//);
  if (engine) return engine[1]!;
  if (url.startsWith("node:")) return "node:internal";
  if (url.startsWith("wasm:")) return "wasm (SQLite)";
  return url.split("/").at(-1) ?? url;
}

export interface NodeProfiler {
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Write each stretch's profile to test-results/profiles/<name>-<n>.cpuprofile; print the rankings of all. */
  report(name: string, top?: number): void;
}

export async function nodeProfiler(): Promise<NodeProfiler> {
  const session = new Session();
  session.connect();
  await session.post("Profiler.enable");
  await session.post("Profiler.setSamplingInterval", { interval: 100 });
  const profiles: CpuProfile[] = [];
  return {
    start: async () => void (await session.post("Profiler.start")),
    stop: async () => {
      const { profile } = (await session.post("Profiler.stop")) as { profile: CpuProfile };
      profiles.push(profile);
    },
    report(name, top = 40) {
      const byModule = new Map<string, number>();
      const byFunction = new Map<string, number>();
      let total = 0;
      for (const profile of profiles) {
        const byNode = new Map(profile.nodes.map((n) => [n.id, n]));
        const samples = profile.samples ?? [];
        const deltas = profile.timeDeltas ?? [];
        for (let i = 0; i < samples.length; i++) {
          const ms = (deltas[i + 1] ?? 0) / 1000;
          const frame = byNode.get(samples[i]!)?.callFrame;
          if (!frame || frame.functionName === "(idle)") continue;
          const mod = moduleOf(frame.url);
          const where = frame.url.split("/").at(-1) ?? "";
          const fn = `${frame.functionName || "(anonymous)"} ${where}:${frame.lineNumber + 1}`;
          byModule.set(mod, (byModule.get(mod) ?? 0) + ms);
          byFunction.set(fn, (byFunction.get(fn) ?? 0) + ms);
          total += ms;
        }
      }
      const dir = join(root, "test-results", "profiles");
      mkdirSync(dir, { recursive: true });
      profiles.forEach((p, i) => {
        writeFileSync(join(dir, `${name}-${i + 1}.cpuprofile`), JSON.stringify(p));
      });
      const rank = (m: Map<string, number>, n: number) => {
        for (const [name, ms] of [...m].sort((a, b) => b[1] - a[1]).slice(0, n))
          console.log(
            `  ${ms.toFixed(1).padStart(8)} ms ${((100 * ms) / total).toFixed(1).padStart(5)}%  ${name}`,
          );
      };
      console.log(`\nCPU profile of ${profiles.length} stretches, ${total.toFixed(0)} ms busy (in ${dir})`);
      console.log("self time by module:");
      rank(byModule, 20);
      console.log("self time by function:");
      rank(byFunction, top);
    },
  };
}
