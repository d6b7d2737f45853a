/**
 * `npm run bench`: every bench suite, one after the other, each printing its own table. A suite is a
 * TypeScript file under tests/bench/ run with tsx (not a timed test: a missed bar is reported, never
 * a failure). Only a suite that crashes makes the run exit non-zero. `npm run bench -- core` runs the
 * suites whose file name contains "core".
 */
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const benchDir = join(root, "tests", "bench");
const filters = process.argv.slice(2);

const suites = readdirSync(benchDir)
  .filter((f) => f.endsWith(".bench.ts"))
  .filter((f) => filters.length === 0 || filters.some((word) => f.includes(word)))
  .sort();

if (suites.length === 0) {
  console.error(`[bench] no suite under tests/bench matches ${filters.join(", ") || "*.bench.ts"}`);
  process.exit(1);
}

const crashed = [];
for (const suite of suites) {
  console.log(`\n[bench] ${suite}`);
  const result = spawnSync("npx", ["tsx", join(benchDir, suite)], { cwd: root, stdio: "inherit" });
  if (result.error || result.status !== 0) crashed.push(suite);
}
if (crashed.length > 0) {
  console.error(`\n[bench] crashed: ${crashed.join(", ")}`);
  process.exit(1);
}
