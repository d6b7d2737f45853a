/**
 * `npm run test:e2e`: build the app, then run only the e2e suite in the system Chromium (installed
 * from Debian's package when missing and allowed; otherwise a clear failure, never a skip).
 */
import { spawnSync } from "node:child_process";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { findChromium } from "./chromium.mjs";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const run = (args, env = process.env) =>
  spawnSync("npx", args, { cwd: root, stdio: "inherit", env }).status ?? 1;

if (run(["vite", "build"]) !== 0) process.exit(1);
const chromium = findChromium();
process.exit(
  run(["vitest", "run", "--project", "e2e", ...process.argv.slice(2)], {
    ...process.env,
    CHROMIUM_PATH: chromium,
  }),
);
