/**
 * `npm run sim` (scripts/sim.mjs runs this file through tsx): the simulator from the command line.
 *   npm run sim -- --seeds 2000 [--from 1]     run seeds from..from+N-1 and print the figures
 *   npm run sim -- --seed 1234                 replay one seed, printing its trace
 *   npm run sim -- --seed 1234 --workload '…'  replay a shrunk workload under that seed
 * A failing seed prints its invariant, the command that replays it, and a shrunk workload with the
 * command that replays that. Exits 1 when any seed failed.
 */
import { os } from "./os.ts";
import { replayCommand, runSeeds, shrink } from "./run.ts";
import type { Workload } from "./workload.ts";
import { lastSeed, runSeed, type SimResult } from "./world.ts";

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

async function report(r: SimResult, shrinking: boolean): Promise<void> {
  console.log(`\nseed ${r.seed} FAILED: ${r.failure!.invariant}: ${r.failure!.message.split("\n")[0]}`);
  console.log(`  replay: ${replayCommand(r.seed)}`);
  if (!shrinking) return;
  const small = await shrink(r);
  console.log(
    `  shrunk in ${small.runs} runs to ${small.workload.ops.length} acts and ${small.workload.faults.length} store faults:`,
  );
  console.log(`  ${JSON.stringify(small.workload)}`);
  console.log(`  replay the shrunk workload: ${replayCommand(r.seed, small.workload)}`);
}

async function main(): Promise<number> {
  const seed = arg("seed");
  const shrinking = !process.argv.includes("--no-shrink");
  if (seed !== undefined) {
    const workload = arg("workload");
    const r = await runSeed({
      seed: Number(seed),
      ...(workload ? { workload: JSON.parse(workload) as Workload } : {}),
    });
    console.log(r.trace.join("\n"));
    console.log(JSON.stringify(r.stats));
    if (!r.ok) await report(r, shrinking && !workload);
    return r.ok ? 0 : 1;
  }
  const count = Number(arg("seeds") ?? 100);
  const from = Number(arg("from") ?? 1);
  console.log(`simulating seeds ${from}..${from + count - 1} (${os()})`);
  let done = 0;
  const f = await runSeeds({
    from,
    count,
    onResult: (r) => {
      done++;
      if (!r.ok) console.log(`seed ${r.seed}: ${r.failure!.invariant}`);
      if (done % 1000 === 0) console.log(`  ${done} seeds`);
    },
  });
  console.log(
    [
      `seeds ${f.seeds}`,
      `steps ${f.steps}`,
      `faults injected ${f.faults + f.modelFaults + f.toolFaults} (store ${f.faults}, model ${f.modelFaults}, tool ${f.toolFaults})`,
      `crashes ${f.crashes}`,
      `model requests ${f.requests}`,
      `invariant checks ${f.checks}`,
      `failures ${f.failures.length}`,
      `time ${(f.ms / 1000).toFixed(1)} s wall, ${(f.cpuMs / 1000).toFixed(1)} s CPU (${(f.cpuMs / Math.max(1, f.seeds)).toFixed(0)} ms CPU a seed)`,
      `real-time waits ${f.realWaits}`,
      `load ${os()}`,
    ].join("\n"),
  );
  for (const r of f.failures.slice(0, 3)) await report(r, shrinking);
  return f.failures.length === 0 ? 0 : 1;
}

// A run that waits on a promise nothing will settle empties the event loop and Node exits silently: say so.
let finished = false;
process.on("exit", () => {
  if (!finished)
    console.log(
      `\nthe simulator stopped before its end: a run awaited something that never settles (last seed started: ${lastSeed()})`,
    );
});
process.exitCode = await main();
finished = true;
