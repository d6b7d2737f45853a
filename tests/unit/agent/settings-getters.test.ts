/**
 * Settings given as an object whose fields are getters (spec §2.2 "Read at every resolution and never
 * copied; getters are fine"; the upstream scenario "reads settings through getters at every
 * decision"): a stream option changed while the first attempt runs reaches the retry, which
 * prepares again.
 */
import { fauxAssistantMessage } from "@mariozechner/pi-ai";
import { expect, test } from "vitest";
import { defaultStream } from "../../../worker/agent/services.ts";
import type { AgentHarnessOptions, AgentSettings } from "../../../worker/index.ts";
import { fauxError } from "../../../worker/testing.ts";
import { open } from "./fixtures.ts";

test("a settings object's getters are read at every decision: a stream option changed during the first attempt reaches its retry (reading 24f)", async () => {
  let timeoutMs = 111;
  const seen: unknown[] = [];
  const stream: AgentHarnessOptions["stream"] = (model, context, options) => {
    seen.push(options.timeoutMs);
    return defaultStream(model, context, options);
  };
  const settings: AgentSettings = {
    get stream() {
      return { timeoutMs };
    },
    retry: { baseDelayMs: 1 },
  };
  const { root } = await open(
    (_req, n) => {
      if (n === 1) {
        // The user changes the setting while the first attempt runs.
        timeoutMs = 222;
        return fauxError("503 Service Unavailable");
      }
      return fauxAssistantMessage("ok");
    },
    { settings, stream },
  );
  expect((await (await root.submit({ type: "input", content: "hi" })).wait()).status).toBe("done");
  expect(seen).toEqual([111, 222]);
});

test("a settings object is never copied: a retry policy changed in place during the first attempt is the one its classification reads (break 28F)", async () => {
  // Break 28F: each named test gave a new value (a getter's, a function's); a resolution kept per
  // nested settings object (a cache by the retry policy's identity) passed them, as a copy would.
  const retry = { maxRetries: 3, baseDelayMs: 1 };
  const settings: AgentSettings = { retry };
  const { root, faux } = await open(
    (_req, n) => {
      if (n === 1) {
        // The user turns retries off in place while the first attempt runs.
        retry.maxRetries = 0;
        return fauxError("503 Service Unavailable");
      }
      return fauxAssistantMessage("ok");
    },
    { settings },
  );
  // A first run resolves the settings before the change (its prepare reads them).
  const settled = await (await root.submit({ type: "input", content: "hi" })).wait();
  expect(settled).toMatchObject({ status: "unanswered", reason: "model_error" });
  expect(faux.requests).toHaveLength(1);
});
