/**
 * Spec §8.3: "Both thresholds apply only when range selection finds a cut." A first input far above
 * the blocking threshold, and one far above the background threshold, have no history before them to
 * summarize: no compaction starts, blocking or background, and the request is sent and answered.
 * (Reading 23d: asserted nowhere for the thresholds, only for an overflow.)
 */
import { fauxAssistantMessage } from "@mariozechner/pi-ai";
import { expect, test } from "vitest";
import { AgentHarness } from "../../../worker/index.ts";
import { fauxAgentModel, memoryStore } from "../../../worker/testing.ts";
import { cleanups } from "./fixtures.ts";

test.each([
  ["blocking", 300, 0],
  ["background", 100_100, 99_500],
] as const)(
  "a first input above the %s threshold with nothing before it to summarize starts no compaction and is sent",
  async (_kind, contextWindow, backgroundTokens) => {
    const faux = fauxAgentModel(() => fauxAssistantMessage("ok"), { contextWindow });
    const h = await AgentHarness.open(await memoryStore(), {
      models: faux.models,
      defaultModel: faux.ref,
      settings: { compaction: { reserveTokens: 100, keepRecentTokens: 150, backgroundTokens } },
    });
    cleanups.push(async () => {
      await h.close().catch(() => undefined);
      faux.unregister();
    });
    const root = await h.root();
    // About 1,000 tokens: above 200 (blocking at 300 - 100) and above 500 (background at 100,000 - 99,500).
    const settled = await (await root.submit({ type: "input", content: "y".repeat(4000) })).wait();
    expect(settled.status).toBe("done");
    expect(faux.requests).toHaveLength(1);
    expect(await h.tasks({ kind: "pi.compaction" })).toEqual([]);
  },
);
