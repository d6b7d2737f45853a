/**
 * The simulator bites: each deliberate defect below is put into the engine from outside (a wrapper
 * around the simulated store, a prototype patched for the length of a test, or a module replaced by
 * `vi.mock` whose replacement is off unless the test turns it on), and the simulator, run over the
 * CI budget's seeds from seed 1, must catch it with a named invariant. Production code has no switch
 * for any of them. Each test stops at the first seed that catches its bug and prints it.
 */
import { afterEach, describe, expect, test, vi } from "vitest";
import { AgentHarness } from "../../../worker/index.ts";
import { runSeeds } from "../../sim/run.ts";
import type { SimHooks } from "../../sim/world.ts";

/** Which mocked defect is on (none outside these tests). */
const bug = vi.hoisted(() => ({
  on: undefined as undefined | "no-marks" | "unsafe-replayed" | "no-migrate",
}));

// Marks no longer flow down: an abort marks no task that another task owns, and the scheduler derives
// no marks for owned work.
vi.mock("../../../worker/core/ownership.ts", async (original) => {
  const real = await original<typeof import("../../../worker/core/ownership.ts")>();
  return {
    ...real,
    mark: (...a: Parameters<typeof real.mark>) =>
      bug.on === "no-marks" && a[0].task(a[1])?.owner !== undefined ? false : real.mark(...a),
    deriveMarks: (...a: Parameters<typeof real.deriveMarks>) =>
      bug.on === "no-marks" ? [] : real.deriveMarks(...a),
  };
});
// An unsafe tool is treated as safe to run again after a crash.
vi.mock("../../../worker/agent/tools/contract.ts", async (original) => {
  const real = await original<typeof import("../../../worker/agent/tools/contract.ts")>();
  return {
    ...real,
    replayPolicyOf: (d: Parameters<typeof real.replayPolicyOf>[0]) =>
      bug.on === "unsafe-replayed" ? "safe" : real.replayPolicyOf(d),
  };
});
// A newer definition loses its migrate on the way into the engine.
vi.mock("../../../worker/core/define.ts", async (original) => {
  const real = await original<typeof import("../../../worker/core/define.ts")>();
  return {
    ...real,
    defineTask: (d: Parameters<typeof real.defineTask>[0]) => {
      if (bug.on !== "no-migrate" || d.version === 1) return real.defineTask(d);
      const { migrate: _lost, ...rest } = d;
      return real.defineTask(rest);
    },
  };
});

afterEach(() => {
  bug.on = undefined;
});

const CI_SEEDS = 2_000;

async function caught(hooks: SimHooks = {}): Promise<{ seed: number; invariant: string; message: string }> {
  const f = await runSeeds({ from: 1, count: CI_SEEDS, hooks, stopAtFailure: true });
  const r = f.failures[0];
  expect(r, "the simulator caught the bug within the CI budget").toBeDefined();
  const found = {
    seed: r!.seed,
    invariant: r!.failure!.invariant,
    message: r!.failure!.message.split("\n")[0]!,
  };
  console.log(`caught by seed ${found.seed} after ${f.seeds} seeds: ${found.invariant}: ${found.message}`);
  return found;
}

describe("seeded bugs", { timeout: 30 * 60_000 }, () => {
  test("a COMMIT acknowledged before it is durable (publish before COMMIT)", async () => {
    // The store wrapper: after a crash, the store holds what it held before its last COMMIT.
    const r = await caught({ imageAtCrash: (_committed, before) => before ?? _committed });
    expect(r.invariant).toBe("acknowledged-kept");
  });

  test("a follow-up admitted twice", async () => {
    const real = AgentHarness.prototype.submitIn;
    // The patched prototype: a follow-up input is admitted once more without its request id.
    AgentHarness.prototype.submitIn = function (this: AgentHarness, tx, conversationId, draft) {
      const record = real.call(this, tx, conversationId, draft);
      if (draft.type === "input" && draft.whenBusy === "followUp")
        real.call(this, tx, conversationId, { type: "input", content: draft.content, whenBusy: "followUp" });
      return record;
    };
    try {
      const r = await caught();
      expect(r.invariant).toBe("input-once");
    } finally {
      AgentHarness.prototype.submitIn = real;
    }
  });

  test("an abort mark that does not flow down to owned tasks", async () => {
    bug.on = "no-marks";
    const r = await caught();
    expect(["task-graph", "run-ends", "answered"]).toContain(r.invariant);
  });

  test("an unsafe tool run again after a crash", async () => {
    bug.on = "unsafe-replayed";
    const r = await caught();
    expect(r.invariant).toBe("tool-policy");
  });

  test("a lost migration: version 2 of a task registered without its migrate", async () => {
    bug.on = "no-migrate";
    const r = await caught();
    expect(["migrated", "run-ends"]).toContain(r.invariant);
  });
});
