/**
 * `test.ticker`: a task that commits one `test.tick` entry per phase, `delayMs` apart. The e2e suite
 * uses it as a long run with an exact, checkable commit trail (each tick's entry and checkpoint are
 * one commit, so a tick can never be lost or doubled by a reload or a crash). Each tick entry carries
 * the wall-clock time of its commit callback as its `timestamp`.
 */

import { sleepUntil } from "../agent/services.ts";
import { defineTask } from "../core/define.ts";
import { tickEntry } from "../protocol/index.ts";

export type TickerInput = { phases: number; delayMs: number };
type TickerState = { phase: "tick"; n: number };

export const tickerTask = defineTask<TickerInput, TickerState, { ticks: number }>({
  name: "test.ticker",
  version: 1,
  initial: () => ({ phase: "tick", n: 1 }),
  phases: {
    tick: async (task, runtime, signal) => {
      const { n } = task.state.checkpoint;
      await sleepUntil(runtime.now() + task.input.delayMs, () => runtime.now(), signal);
      await runtime.commit((tx, current) => {
        tx.appendEntry(current.conversationId, {
          ...tickEntry.draft({ n, taskId: task.id }),
          timestamp: runtime.now(),
        });
        return n >= task.input.phases
          ? { status: "terminal", outcome: { status: "completed", result: { ticks: n } } }
          : { status: "running", checkpoint: { phase: "tick", n: n + 1 } };
      });
    },
  },
  abort: async (_task, runtime) => {
    await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted", reason: "aborted" } }));
  },
});

/** `test.noop`: one phase that completes at once; `debug.seed` fills a store with terminal tasks. */
export const noopTask = defineTask<null, { phase: "done" }, null>({
  name: "test.noop",
  version: 1,
  initial: () => ({ phase: "done" }),
  phases: {
    done: async (_task, runtime) => {
      await runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: null } }));
    },
  },
  abort: async (_task, runtime) => {
    await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted", reason: "aborted" } }));
  },
});

/** The test tasks a test page's engine registers (boot.ts, only with `?debug=1`). */
export const debugTasks = [tickerTask, noopTask] as const;
