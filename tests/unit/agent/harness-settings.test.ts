/**
 * Harness settings (spec §2.2): every reading resolves the host's settings anew over the built-in
 * defaults, object fields merged key by key; a change of a settings getter makes no commit and takes
 * effect at the next reading. (The app's settings dialog is tested in settings.test.ts.)
 */
import { expect, test } from "vitest";
import { type AgentSettings, resolveSettings } from "../../../worker/agent/services.ts";
import { echo, open } from "./fixtures.ts";

test("defaults: retry 3 x 2 s up to 60 s, compaction 16384/20000/32768, parallel tools, one-at-a-time queues, no stream options", () => {
  expect(resolveSettings(undefined)).toMatchObject({
    retry: { enabled: true, maxRetries: 3, baseDelayMs: 2000, maxDelayMs: 60_000 },
    compaction: { enabled: true, reserveTokens: 16_384, keepRecentTokens: 20_000, backgroundTokens: 32_768 },
    toolExecution: "parallel",
    steeringMode: "one-at-a-time",
    followUpMode: "one-at-a-time",
    stream: {},
  });
});

test("partial retry and compaction settings merge key by key with the defaults", () => {
  const resolved = resolveSettings({ retry: { maxRetries: 7 }, compaction: { enabled: false } });
  expect(resolved.retry).toEqual({ enabled: true, maxRetries: 7, baseDelayMs: 2000, maxDelayMs: 60_000 });
  expect(resolved.compaction).toEqual({
    enabled: false,
    reserveTokens: 16_384,
    keepRecentTokens: 20_000,
    backgroundTokens: 32_768,
  });
});

test("a settings getter is read anew at each use: changing it makes no commit, and the next reading follows it", async () => {
  let settings: AgentSettings = { followUpMode: "one-at-a-time" };
  let reads = 0;
  const { h, root } = await open(echo, {
    settings: () => {
      reads++;
      return settings;
    },
  });
  let commits = 0;
  h.subscribe(() => commits++);
  settings = { followUpMode: "all", compaction: { enabled: false } };
  await new Promise((r) => setTimeout(r, 20));
  expect(commits).toBe(0);
  const before = reads;
  expect(h.services.settings().followUpMode).toBe("all");
  expect(reads).toBe(before + 1);
  await (await root.submit({ type: "input", content: "one" })).wait();
  expect(reads).toBeGreaterThan(before + 1);
});
