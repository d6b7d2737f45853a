/**
 * settings.contextRetentionMs (spec §2.2, §5.1): a conversation's cached entries stay while it is
 * busy and for contextRetentionMs (default 10 minutes) once idle; then they are dropped, checked at
 * every change and by a timer, and the next read loads them again from the store.
 */
import { fauxAssistantMessage, fauxToolCall } from "@mariozechner/pi-ai";
import { expect, test } from "vitest";
import { resolveSettings } from "../../../worker/agent/services.ts";
import type { AgentHarness } from "../../../worker/index.ts";
import { until } from "../../../worker/testing.ts";
import { echo, gatedTool, open, textOf } from "./fixtures.ts";

const cached = (h: AgentHarness, c = 1) => h.services.entries.holds(c);
/** Any commit: expiry is checked at every published change. */
const someCommit = (h: AgentHarness) => h.createConversation({ ownership: { kind: "ownerless" } });

test("contextRetentionMs defaults to 10 minutes; a negative value is refused", () => {
  expect(resolveSettings(undefined).contextRetentionMs).toBe(600_000);
  expect(resolveSettings({ contextRetentionMs: 0 }).contextRetentionMs).toBe(0);
  expect(() => resolveSettings({ contextRetentionMs: -1 })).toThrow(/contextRetentionMs/);
});

test("an idle conversation drops its cached entries once contextRetentionMs has passed, and the next run reads them again", async () => {
  let offset = 0;
  const { h, root, faux } = await open(echo, {
    now: () => Date.now() + offset,
    settings: { contextRetentionMs: 60_000 },
  });
  expect((await (await root.submit({ type: "input", content: "one" })).wait()).status).toBe("done");
  expect(cached(h)).toBe(true);
  offset += 59_000;
  await someCommit(h);
  expect(cached(h)).toBe(true);
  offset += 2_000;
  await someCommit(h);
  expect(cached(h)).toBe(false);
  // Loaded again for the next run: the request still carries the whole conversation.
  expect((await (await root.submit({ type: "input", content: "two" })).wait()).status).toBe("done");
  const sent = faux.requests
    .at(-1)!
    .messages.filter((m) => m.role === "user")
    .map(textOf);
  expect(sent).toEqual(["one", "two"]);
  expect(cached(h)).toBe(true);
});

test("contextRetentionMs is read anew at each expiry check: a settings getter lowered after the first checks drops an idle conversation at the new period", async () => {
  // draw 33b, 10: a retention read once (at the first check) and kept passed every named test (each
  // gave a fixed value); the getter here changes between two checks of one idle conversation.
  let offset = 0;
  let retention = 60_000;
  const { h, root } = await open(echo, {
    now: () => Date.now() + offset,
    settings: () => ({ contextRetentionMs: retention }),
  });
  expect((await (await root.submit({ type: "input", content: "one" })).wait()).status).toBe("done");
  offset += 2_000;
  await someCommit(h);
  expect(cached(h)).toBe(true);
  retention = 1_000;
  await someCommit(h);
  expect(cached(h)).toBe(false);
});

test("a busy conversation keeps its cached entries however long it runs; retention counts from when it went idle", async () => {
  let offset = 0;
  const hold = gatedTool();
  let turn = 0;
  const { h, root } = await open(
    () =>
      ++turn === 1
        ? fauxAssistantMessage([fauxToolCall("hold", {})], { stopReason: "toolUse" })
        : fauxAssistantMessage("done"),
    { now: () => Date.now() + offset, tools: [hold.tool], settings: { contextRetentionMs: 1_000 } },
  );
  const run = await root.submit({ type: "input", content: "hold on" });
  await hold.started.promise;
  expect(cached(h)).toBe(true);
  offset += 3_600_000;
  await someCommit(h);
  expect(cached(h)).toBe(true);
  hold.release.resolve();
  expect((await run.wait()).status).toBe("done");
  await someCommit(h);
  expect(cached(h)).toBe(true);
  offset += 1_001;
  await someCommit(h);
  expect(cached(h)).toBe(false);
});

test("without any later change, a timer drops an idle conversation's entries after contextRetentionMs", async () => {
  const { h, root } = await open(echo, { settings: { contextRetentionMs: 400 } });
  expect((await (await root.submit({ type: "input", content: "one" })).wait()).status).toBe("done");
  await h.waitForIdle();
  // Still held once idle, and no commit comes before the drop: it is the timer's (break 27E: with no
  // timer armed, the run's own later commits expired them past a 30 ms retention and the test passed).
  expect(cached(h)).toBe(true);
  const commits: unknown[] = [];
  const stop = h.subscribe((change) => commits.push(change));
  await until(() => !cached(h), { what: "the entries dropped by the timer" });
  stop();
  expect(commits).toEqual([]);
  expect((await root.entries()).length).toBeGreaterThan(0);
});

// Break 28R: every test cached one conversation; a conversation whose retention passed dropping every
// idle one with it passed them all.
test("retention counts per conversation: one idle past contextRetentionMs is dropped, one used later stays until its own has passed", async () => {
  let offset = 0;
  const { h, root } = await open(echo, {
    now: () => Date.now() + offset,
    settings: { contextRetentionMs: 60_000 },
  });
  expect((await (await root.submit({ type: "input", content: "one" })).wait()).status).toBe("done");
  const other = await h.createConversation({ ownership: { kind: "ownerless" } });
  offset += 30_000;
  await h.services.entries.get(other.id);
  expect([cached(h), cached(h, other.id)]).toEqual([true, true]);
  offset += 31_000;
  await someCommit(h);
  expect([cached(h), cached(h, other.id)]).toEqual([false, true]);
  offset += 30_000;
  await someCommit(h);
  expect([cached(h), cached(h, other.id)]).toEqual([false, false]);
});

test("a read restarts an idle conversation's retention: Conversation.context() while idle keeps its entries for contextRetentionMs from that read (draw 37b)", async () => {
  // Draw 37bA: retention counted only from the load and from going idle, a later read of the cached
  // entries not counting, passed every test above: each read an idle conversation once at most.
  let offset = 0;
  const { h, root } = await open(echo, {
    now: () => Date.now() + offset,
    settings: { contextRetentionMs: 60_000 },
  });
  expect((await (await root.submit({ type: "input", content: "one" })).wait()).status).toBe("done");
  offset += 50_000;
  await someCommit(h);
  expect(cached(h)).toBe(true);
  expect((await root.context()).entries.length).toBeGreaterThan(0);
  offset += 50_000;
  await someCommit(h);
  expect(cached(h)).toBe(true);
  offset += 11_000;
  await someCommit(h);
  expect(cached(h)).toBe(false);
});

test("an answer that takes longer than contextRetentionMs still leaves the conversation its retention once idle: the entries stay until it has passed from the run's end (draw 37b)", async () => {
  // Draw 37bA, contrary: retention counted from the last read or the last check that found the
  // conversation busy; a run whose answer came back more than contextRetentionMs after its request
  // read (no commit between) dropped its entries the moment it went idle, kept for 0 ms, not 60 s.
  let offset = 0;
  const { h, root } = await open(
    () => {
      offset += 3_600_000;
      return fauxAssistantMessage("done");
    },
    { now: () => Date.now() + offset, settings: { contextRetentionMs: 60_000 } },
  );
  expect((await (await root.submit({ type: "input", content: "one" })).wait()).status).toBe("done");
  expect(cached(h)).toBe(true);
  offset += 59_000;
  await someCommit(h);
  expect(cached(h)).toBe(true);
  offset += 2_000;
  await someCommit(h);
  expect(cached(h)).toBe(false);
});
