/**
 * `npm run sim`: the deterministic simulator of the whole engine (tests/sim/, see
 * docs/simulator.md). Runs tests/sim/cli.ts through tsx with the arguments given:
 *   npm run sim -- --seeds 100000 [--from 1]   a soak, printing its figures
 *   npm run sim -- --seed 1234                 replay one seed exactly (its trace, a shrunk workload)
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const run = spawnSync(process.execPath, ["--import", "tsx", "tests/sim/cli.ts", ...process.argv.slice(2)], {
  cwd: root,
  stdio: "inherit",
});
process.exit(run.status ?? 1);
