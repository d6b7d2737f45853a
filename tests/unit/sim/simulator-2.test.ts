/** The second half of the simulator's CI budget (see simulator.test.ts): seeds 1001..2000. */
import { test } from "vitest";
import { CI_SEEDS, runBudget } from "../../sim/ci.ts";

test(`seeds ${CI_SEEDS / 2 + 1}..${CI_SEEDS} keep every invariant`, { timeout: 30 * 60_000 }, async () => {
  await runBudget(CI_SEEDS / 2 + 1, CI_SEEDS / 2);
});
