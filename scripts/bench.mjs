/**
 * `npm run bench`: every bench suite, one after the other, each printing its own table. A suite is a
 * TypeScript file under tests/bench/ run with tsx (not a timed test: a missed bar is reported, never
 * a failure). Only a suite that crashes makes the run exit non-zero. `npm run bench -- agent` runs the
 * suite agent.bench.ts alone (a name matches one file exactly, with or without ".bench.ts": "agent"
 * once ran subagent.bench.ts too); `npm run bench -- agent core` runs both. A name that matches no
 * suite is an error. `--list` prints the suites a run would take, one a line, and runs none.
 *
 * A suite that times the engine's own JavaScript (listed in BUILT: the agent bench, and the server
 * bench, which times the same agent loop in Node beside the server's) runs as the app ships it instead:
 * bundled with esbuild (as Vite bundles the worker: ES2022, no `keepNames`, whose `__name` wrapper
 * tsx adds to every named function and class and costs a few percent of such a run), next to its
 * source so `import.meta.url` resolves the same, run with plain node, then deleted. npm packages
 * stay external (Node loads them as published). BENCH_TSX=1 runs such a suite with tsx anyway.
 *
 * Each suite's start and end print the machine's load averages beside its tables: judge figures
 * only from a quiet machine (nothing else running), and by ratios measured in the same run.
 */
import { spawnSync } from "node:child_process";
import { readdirSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { availableParallelism, loadavg } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const benchDir = join(root, "tests", "bench");
const listOnly = process.argv.includes("--list");
const filters = process.argv.slice(2).filter((a) => a !== "--list");
/** The suites run from a build rather than through tsx. */
const BUILT = new Set(["agent.bench.ts", "server.bench.ts"]);

const SUFFIX = ".bench.ts";
const all = readdirSync(benchDir)
  .filter((f) => f.endsWith(SUFFIX))
  .sort();
/** Whether the suite file `f` is the one `name` names: its file name, or that without ".bench.ts". */
const names = (name, f) => f === name || f === `${name}${SUFFIX}`;

const unknown = filters.filter((name) => !all.some((f) => names(name, f)));
if (all.length === 0 || unknown.length > 0) {
  console.error(
    `[bench] no suite under tests/bench is named ${unknown.join(", ") || `*${SUFFIX}`}; the suites: ` +
      all.map((f) => f.slice(0, -SUFFIX.length)).join(", "),
  );
  process.exit(1);
}
const suites = filters.length === 0 ? all : all.filter((f) => filters.some((name) => names(name, f)));
if (listOnly) {
  console.log(suites.join("\n"));
  process.exit(0);
}

/** Vite's `import url from "x?url"`: the asset's file URL, as a module. */
const assetUrls = {
  name: "asset-urls",
  setup(build) {
    build.onResolve({ filter: /\?url$/ }, (args) => ({
      path: createRequire(join(args.resolveDir, "x")).resolve(args.path.slice(0, -"?url".length)),
      namespace: "asset-url",
    }));
    build.onLoad({ filter: /.*/, namespace: "asset-url" }, (args) => ({
      contents: `export default ${JSON.stringify(pathToFileURL(args.path).href)};`,
      loader: "js",
    }));
  },
};

/** Bundle `suite` next to its source, run it with node, delete the bundle. */
async function runBuilt(suite) {
  const { build } = await import("esbuild");
  const outfile = join(benchDir, suite.replace(/\.ts$/, ".built.mjs"));
  try {
    await build({
      entryPoints: [join(benchDir, suite)],
      outfile,
      bundle: true,
      platform: "node",
      format: "esm",
      target: "es2022",
      packages: "external",
      logLevel: "warning",
      plugins: [assetUrls],
    });
    return spawnSync(process.execPath, [outfile], { cwd: root, stdio: "inherit" });
  } finally {
    rmSync(outfile, { force: true });
  }
}

/** The machine's 1/5/15-minute load averages: figures taken on a loaded machine mean little. */
const load = () =>
  `load average ${loadavg()
    .map((l) => l.toFixed(2))
    .join(" ")} on ${availableParallelism()} cores`;

const crashed = [];
for (const suite of suites) {
  console.log(`\n[bench] ${suite} (${load()})`);
  const result =
    BUILT.has(suite) && process.env.BENCH_TSX !== "1"
      ? await runBuilt(suite)
      : spawnSync("npx", ["tsx", join(benchDir, suite)], { cwd: root, stdio: "inherit" });
  if (result.error || result.status !== 0) crashed.push(suite);
  console.log(`[bench] ${suite} ended (${load()})`);
}
if (crashed.length > 0) {
  console.error(`\n[bench] crashed: ${crashed.join(", ")}`);
  process.exit(1);
}
