import { availableParallelism } from "node:os";
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: "unit",
          include: ["tests/unit/**/*.test.ts"],
          environment: "node",
          // Vitest's default is one worker fewer than the cores: one on a 2-core CI machine, which
          // left a core idle through the whole unit run (most of a file's time is its CPU-bound
          // module import and tests).
          maxWorkers: Math.max(2, availableParallelism() - 1),
          testTimeout: 60_000,
          hookTimeout: 60_000,
        },
      },
      {
        test: {
          name: "server",
          include: ["tests/server/**/*.test.ts"],
          environment: "node",
          // Each file starts its own workerd (miniflare 3) on its own persist folder.
          maxWorkers: 2,
          testTimeout: 60_000,
          hookTimeout: 60_000,
        },
      },
      {
        test: {
          name: "e2e",
          include: ["tests/e2e/**/*.test.ts"],
          environment: "node",
          // Two files at a time: a file spends most of its time waiting on a browser (reloads, a
          // ticker's pacing, Chromium's quota checks), so two overlap well on 2 cores. Files never
          // share a store: each serves the app on its own port (0: a free one), each test launches
          // its own Chromium on a fresh temporary profile, and stores are uniquely named.
          maxWorkers: 2,
          globalSetup: ["tests/e2e/setup.ts"],
          testTimeout: 180_000,
          hookTimeout: 300_000,
        },
      },
    ],
  },
});
