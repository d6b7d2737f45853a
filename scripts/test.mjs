/**
 * `npm test`: unit tests (Node), the server tests (the Durable Object store in workerd, served by
 * miniflare: a workerd that cannot start fails the stage), then a fresh build of the app, then the
 * e2e suite in the system Chromium. Every stage runs even when an earlier one failed (except e2e,
 * which needs the build), and
 * the run exits non-zero if any stage failed. Browser tests are never skipped silently: no Chromium is
 * a failure, and so is an e2e run that ran no tests. Each stage's wall time is printed at the end,
 * before the last line, `N passed, N failed`.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, rmSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { findChromium } from "./chromium.mjs";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const outDir = join(root, "test-results");
mkdirSync(outDir, { recursive: true });

let passed = 0;
let failed = 0;
const problems = [];
/** Wall time of each stage run, in order: what CI time is made of. */
const stages = [];

/** Run `body` as the stage `name`, timing it. */
function stage(name, body) {
  const started = Date.now();
  try {
    return body();
  } finally {
    stages.push(`${name} ${Math.round((Date.now() - started) / 1000)} s`);
  }
}

function run(command, args, env = process.env) {
  console.log(`\n$ ${[command, ...args].join(" ")}`);
  const result = spawnSync(command, args, { cwd: root, stdio: "inherit", env });
  if (result.error) throw result.error;
  return result.status ?? 1;
}

function vitest(project, env) {
  const report = join(outDir, `vitest-${project}.json`);
  rmSync(report, { force: true });
  const status = run(
    "npx",
    [
      "vitest",
      "run",
      "--project",
      project,
      "--reporter=default",
      "--reporter=json",
      `--outputFile=${report}`,
    ],
    env,
  );
  let counts;
  try {
    counts = JSON.parse(readFileSync(report, "utf8"));
  } catch {
    counts = undefined;
  }
  if (!counts) {
    failed++;
    problems.push(`${project}: vitest exited ${status} without a report`);
    return;
  }
  const {
    numPassedTests = 0,
    numFailedTests = 0,
    numPendingTests = 0,
    numTodoTests = 0,
    numTotalTests = 0,
  } = counts;
  passed += numPassedTests;
  failed += numFailedTests;
  const skipped = numPendingTests + numTodoTests;
  if (skipped > 0) console.log(`[test] ${project}: ${skipped} test(s) skipped or todo`);
  if (numTotalTests === 0) {
    failed++;
    problems.push(`${project}: no tests ran`);
  } else if (status !== 0 && numFailedTests === 0) {
    // Unhandled errors, a failing hook or global setup: vitest failed with every test green.
    failed++;
    problems.push(`${project}: vitest exited ${status} (errors outside tests, see above)`);
  } else if (status !== 0) {
    problems.push(`${project}: ${numFailedTests} test(s) failed`);
  }
  for (const name of failedTests(counts)) problems.push(`${project}: ${name}`);
}

/**
 * The failed tests of a vitest JSON report, each as `file > test name: first line of its failure`, so the
 * last lines of a CI log (often all that is kept of it) say which tests failed and why.
 */
function failedTests(report) {
  const names = [];
  for (const file of report.testResults ?? []) {
    const path = String(file.name ?? "").replace(`${root}/`, "");
    for (const test of file.assertionResults ?? []) {
      if (test.status !== "failed") continue;
      const why = String(test.failureMessages?.[0] ?? "")
        .split("\n")[0]
        .slice(0, 300);
      names.push(`${path} > ${test.fullName ?? test.title}: ${why}`);
    }
    if ((file.assertionResults ?? []).length === 0 && file.status === "failed") {
      names.push(
        `${path}: ${String(file.message ?? "failed to run")
          .split("\n")[0]
          .slice(0, 300)}`,
      );
    }
  }
  return names;
}

stage("unit", () => vitest("unit"));
stage("server", () => vitest("server"));

console.log("\n[test] building the app");
const built = stage("build", () => run("npx", ["vite", "build"]) === 0);
if (!built) {
  failed++;
  problems.push("build: vite build failed, so the e2e suite could not run");
}

if (built) {
  let chromium;
  try {
    chromium = findChromium();
  } catch (error) {
    failed++;
    problems.push(`e2e: ${error instanceof Error ? error.message : String(error)}`);
  }
  if (chromium) {
    console.log(`[test] Chromium: ${chromium}`);
    stage("e2e", () => vitest("e2e", { ...process.env, CHROMIUM_PATH: chromium }));
  }
}

console.log("");
console.log(`[test] stage times: ${stages.join(", ")}`);
for (const problem of problems) console.log(`[test] FAILED ${problem}`);
console.log(`${passed} passed, ${failed} failed`);
process.exit(problems.length > 0 || failed > 0 ? 1 : 0);
