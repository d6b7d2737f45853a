/**
 * Finding the system Chromium for the e2e tests (Playwright's own browser download does not work
 * here). Order: $CHROMIUM_PATH, `chromium` / `chromium-browser` on PATH, then — only when running as
 * root with apt-get — install Debian's `chromium` package. Anything else is a clear error.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { accessSync, constants } from "node:fs";

/** Launch flags for every test browser (headless, no sandbox, no background traffic or updates). */
export const CHROMIUM_FLAGS = Object.freeze([
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--no-first-run",
  "--disable-quic",
]);

function executable(path) {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function onPath(name) {
  const found = spawnSync("sh", ["-c", `command -v ${name}`], { encoding: "utf8" });
  const path = found.status === 0 ? found.stdout.trim() : "";
  return path && executable(path) ? path : undefined;
}

/** @returns {string} the path of a Chromium executable */
export function findChromium() {
  const fromEnv = process.env.CHROMIUM_PATH;
  if (fromEnv) {
    if (!executable(fromEnv)) throw new Error(`CHROMIUM_PATH=${fromEnv} is not an executable file`);
    return fromEnv;
  }
  for (const name of ["chromium", "chromium-browser"]) {
    const path = onPath(name);
    if (path) return path;
  }
  const isRoot = typeof process.getuid === "function" && process.getuid() === 0;
  if (isRoot && onPath("apt-get")) {
    const install = "apt-get update && apt-get install -y chromium";
    console.log(`[chromium] no Chromium found; running: ${install}`);
    execFileSync("sh", ["-c", install], {
      stdio: ["ignore", "inherit", "inherit"],
      env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" },
    });
    const installed = onPath("chromium") ?? "/usr/bin/chromium";
    if (!executable(installed))
      throw new Error(`apt-get installed chromium but ${installed} is not executable`);
    console.log(`[chromium] installed ${installed}`);
    return installed;
  }
  throw new Error(
    "No Chromium found for the browser tests. Install Debian's `chromium` package " +
      "(sudo apt-get install -y chromium), or set CHROMIUM_PATH to a Chromium/Chrome executable.",
  );
}
