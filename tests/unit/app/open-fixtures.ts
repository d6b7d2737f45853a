/**
 * The options the app's open tests (recovery-path, open-live-work, lent-open) give `openAppHarness`:
 * the debug tasks, a fatal error thrown into the test, tools allowed, a memory workspace, always
 * online.
 */
import { ALWAYS_ONLINE } from "../../../worker/agent/network.ts";
import { MemoryFs } from "../../../worker/agent/workspace/memory-fs.ts";
import { debugTasks } from "../../../worker/debug/ticker.ts";

export const appOpenOptions = () => ({
  onFatal: (error: Error) => {
    throw error;
  },
  tasks: debugTasks,
  approval: { defaults: "allow" as const },
  workspace: new MemoryFs(),
  network: ALWAYS_ONLINE,
});
