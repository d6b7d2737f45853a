/**
 * `npm run bench -- <name>...` picks suites by exact name (scripts/bench.mjs, asked with `--list`):
 * "agent" once ran subagent.bench.ts as well, since a name matched any file containing it.
 */
import { spawnSync } from "node:child_process";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, test } from "vitest";

const script = join(resolve(dirname(fileURLToPath(import.meta.url)), "../../.."), "scripts", "bench.mjs");

/** What `npm run bench -- --list ...names` prints and how it exits. */
function listed(...names: string[]): { suites: string[]; status: number | null; stderr: string } {
  const run = spawnSync(process.execPath, [script, "--list", ...names], { encoding: "utf8" });
  return { suites: run.stdout.split("\n").filter(Boolean), status: run.status, stderr: run.stderr };
}

describe("bench suite names", () => {
  test("a name picks the suite of exactly that name, with or without .bench.ts", () => {
    expect(listed("agent")).toMatchObject({ suites: ["agent.bench.ts"], status: 0 });
    expect(listed("subagent.bench.ts")).toMatchObject({ suites: ["subagent.bench.ts"], status: 0 });
  });

  test("several names run several suites; none runs them all", () => {
    expect(listed("core", "agent").suites).toEqual(["agent.bench.ts", "core.bench.ts"]);
    expect(listed().suites).toEqual(
      expect.arrayContaining(["agent.bench.ts", "subagent.bench.ts", "core.bench.ts"]),
    );
  });

  test("a name no suite has is an error that lists the suites", () => {
    const run = listed("agen");
    expect(run.status).toBe(1);
    expect(run.stderr).toMatch(/no suite under tests\/bench is named agen; the suites: .*\bagent\b/);
  });
});
