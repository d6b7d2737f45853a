/**
 * Global setup of the e2e project: find Chromium (installing Debian's package when allowed), build
 * the test fixtures into test-results/e2e-fixtures, and make sure the app is built (`npm test` builds
 * it fresh before this runs; a bare `vitest run --project e2e` builds it only when dist/ is missing).
 * Never skips: anything missing fails the run with the reason.
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { TestProject } from "vitest/node";
import { findChromium } from "../../scripts/chromium.mjs";

declare module "vitest" {
  export interface ProvidedContext {
    chromiumPath: string;
    appDir: string;
    fixtureDir: string;
  }
}

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

function viteBuild(args: string[], what: string): void {
  const viteBin = join(root, "node_modules/vite/bin/vite.js");
  const started = Date.now();
  const result = spawnSync(process.execPath, [viteBin, "build", "--logLevel", "warn", ...args], {
    cwd: root,
    stdio: "inherit",
  });
  if (result.status !== 0)
    throw new Error(`building ${what} failed (vite exit ${result.status ?? result.signal})`);
  console.log(`[e2e] built ${what} in ${Date.now() - started} ms`);
}

export default function setup(project: TestProject): void {
  const chromiumPath = findChromium();
  console.log(`[e2e] Chromium: ${chromiumPath}`);

  const fixtureDir = join(root, "test-results/e2e-fixtures");
  viteBuild(["--config", "tests/e2e/fixtures/vite.config.ts"], "e2e fixtures");

  const appDir = join(root, "dist");
  if (!existsSync(join(appDir, "index.html"))) viteBuild([], "the app (dist/ was missing)");

  project.provide("chromiumPath", chromiumPath);
  project.provide("appDir", appDir);
  project.provide("fixtureDir", fixtureDir);
}
