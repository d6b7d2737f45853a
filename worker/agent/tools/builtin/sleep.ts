import { Type } from "typebox";
import { defineTool, textResult } from "../contract.ts";

const parameters = Type.Object({
  seconds: Type.Number({ minimum: 0, maximum: 3600, description: "How long the task runs, in seconds" }),
  steps: Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: 1000,
      description: "Number of progress steps (default 1 per second)",
    }),
  ),
});

function delay(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * `sleep`: a long-running task for demos and tests. Reports progress through `api.output` once per
 * step and stops when `api.signal` aborts. It changes nothing, so recovery may rerun it.
 */
export function createSleepTool() {
  return defineTool({
    name: "sleep",
    label: "Run a long task",
    description: "Run a long task that takes the given number of seconds, reporting progress at each step.",
    parameters,
    replay: "safe",
    readOnly: true,
    async execute(args, api) {
      const seconds = Math.max(0, args.seconds);
      const steps = args.steps ?? Math.max(1, Math.round(seconds));
      const stepMs = (seconds * 1000) / steps;
      for (let step = 1; step <= steps; step++) {
        await delay(stepMs, api.signal);
        api.output(`step ${step}/${steps} done\n`);
      }
      return textResult(`Finished the long task: ${steps} steps in ${seconds} seconds`, { seconds, steps });
    },
  });
}
