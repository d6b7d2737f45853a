/**
 * Compaction summaries are head writes ordered by their cut (spec §6, §12): a summary whose cut is
 * before where the active range starts when it is placed settles `stale`; one at or after it is
 * placed. A summary reflects the context at its selection, so an application edit placed while it
 * summarizes is lost, and an application head before its cut is undone.
 */
import { fauxAssistantMessage, type Message } from "@mariozechner/pi-ai";
import { expect, test } from "vitest";
import { SUMMARY_SYSTEM_PROMPT } from "../../../worker/agent/compaction/task.ts";
import type { AgentHarness, Conversation, EntryRecord } from "../../../worker/index.ts";
import { deferred, type FauxRequest, type FauxResponder, until } from "../../../worker/testing.ts";
import { open, textOf } from "./fixtures.ts";

const big = (label: string) => `${label} ${"x".repeat(400)}`; // about 100 tokens
const isSummary = (r: FauxRequest) => r.systemPrompt === SUMMARY_SYSTEM_PROMPT;

async function chat(root: Conversation, from: number, turns: number): Promise<void> {
  for (let i = from; i < from + turns; i++)
    await (await root.submit({ type: "input", content: big(`q${i}`) })).wait();
}

/**
 * A conversation whose first compaction ("B") is summarizing and held until `releaseB`; later ones
 * answer at once. `keep` is read by each compaction when it selects its range.
 */
async function withBSummarizing() {
  const gate = deferred();
  let summaries = 0;
  const responder: FauxResponder = async (req) => {
    if (!isSummary(req)) return fauxAssistantMessage(big("answer"));
    const n = ++summaries;
    if (n === 1) await gate.promise;
    return fauxAssistantMessage(n === 1 ? "SUMMARY B" : "SUMMARY A");
  };
  const keep = { tokens: 150 };
  const setup = await open(responder, {
    settings: () => ({ compaction: { keepRecentTokens: keep.tokens } }),
  });
  await chat(setup.root, 1, 3);
  const b = await setup.root.compact();
  await until(() => setup.faux.requests.some(isSummary), { what: "B summarizing" });
  return { ...setup, keep, b, releaseB: () => gate.resolve() };
}

/** The write submission a compaction placed its summary through, and that submission's record. */
async function placement(h: AgentHarness, taskId: number) {
  const record = await h.waitForTask(taskId);
  const id = (record.state as unknown as { outcome: { result: { submissionId: number } } }).outcome.result
    .submissionId;
  await h.waitUntil(() => h.submissionNow(id)?.status !== "queued");
  return h.submissionNow(id)!;
}

const summaries = (entries: readonly EntryRecord[]) => entries.filter((e) => e.kind === "pi.compaction");
const firstText = async (root: Conversation) => textOf((await root.context()).messages[0] as Message);

test("compaction order: B cuts before where A's summary starts the range, so B settles stale", async () => {
  const { h, root, b, releaseB } = await withBSummarizing();
  // B never takes run control: while it summarizes, each input is placed at once and answered.
  for (let i = 4; i < 7; i++) {
    const input = await root.submit({ type: "input", content: big(`q${i}`) });
    expect((await input.record()).status).toBe("placed");
    expect((await input.wait()).status).toBe("done");
  }
  expect((await h.getTask(b))?.state.status).toBe("running");
  const a = await root.compact();
  expect((await placement(h, a)).status).toBe("done");
  // The stale summary's attempt is spend all the same (spec §8.6: counted whether the summary is
  // placed, fails or ends stale), in the commit that classifies it, with no entry of its own.
  const output = () =>
    Object.values((h.docNow(1, "pi.usage") as { models: Record<string, { output: number }> }).models).reduce(
      (sum, u) => sum + u.output,
      0,
    );
  const before = output();
  releaseB();
  expect(await placement(h, b)).toMatchObject({ status: "unanswered", reason: "stale" });
  expect(output()).toBeGreaterThan(before);
  const placed = summaries(await root.entries());
  expect(placed).toHaveLength(1);
  expect(await firstText(root)).toContain("SUMMARY A");
});

test("compaction order: A cuts before B's cut, so B is placed after A and the range starts at B", async () => {
  const { h, root, keep, b, releaseB } = await withBSummarizing();
  keep.tokens = 450;
  const a = await root.compact();
  expect((await placement(h, a)).status).toBe("done");
  releaseB();
  expect((await placement(h, b)).status).toBe("done");
  const [first, second] = summaries(await root.entries());
  expect(first!.head!).toBeLessThan(second!.head!);
  expect(textOf((second!.model as unknown as Message[])[0]!)).toContain("SUMMARY B");
  expect(await firstText(root)).toContain("SUMMARY B");
});

test("an application edit placed while a compaction summarizes is lost", async () => {
  const { h, root, faux, b, releaseB } = await withBSummarizing();
  const q1 = (await root.entries()).find((e) => e.kind === "pi.user")!;
  const edit = await root.submit({
    type: "write",
    entry: { kind: "app.redact", edits: [{ target: q1.id, action: "omit" }] },
  });
  expect((await edit.wait()).status).toBe("done");
  expect((await root.context()).messages.map((m) => textOf(m))).not.toContain(big("q1"));
  releaseB();
  expect((await placement(h, b)).status).toBe("done");
  // The summary was asked for the context as it was at selection, the redacted message included.
  expect(textOf(faux.requests.find(isSummary)!.messages[0]!)).toContain("[User]: q1");
  expect(await firstText(root)).toContain("SUMMARY B");
});

test("an application edit placed while a compaction summarizes is lost only for what the summary cuts: an edit of an entry the summary keeps still applies after it (draw 36b)", async () => {
  // Draw 36b: the named edit test edits a summarized entry only; a derivation that read the edits of
  // the entries after the newest marker only (an edit placed before the summary landed dropped)
  // passed it.
  const { h, root, b, releaseB } = await withBSummarizing();
  const last = (await root.entries()).filter((e) => e.kind === "pi.user").at(-1)!;
  const edit = await root.submit({
    type: "write",
    entry: {
      kind: "app.redact",
      edits: [
        { target: last.id, action: "replace", messages: [{ role: "user", content: "EDITED", timestamp: 0 }] },
      ],
    },
  });
  expect((await edit.wait()).status).toBe("done");
  releaseB();
  expect((await placement(h, b)).status).toBe("done");
  const [summary] = summaries(await root.entries());
  expect(summary!.head!).toBeLessThanOrEqual(last.id);
  const texts = (await root.context()).messages.map((m) => textOf(m));
  expect(texts[0]).toContain("SUMMARY B");
  expect(texts).toContain("EDITED");
  expect(texts).not.toContain(textOf((last.model as unknown as Message[])[0]!));
});

test("an application head placed while a compaction summarizes is undone when the summary cuts past it", async () => {
  const { h, root, b, releaseB } = await withBSummarizing();
  const users = (await root.entries()).filter((e) => e.kind === "pi.user");
  const note = await root.submit({
    type: "write",
    entry: {
      kind: "app.context",
      head: users[1]!.id,
      model: [{ role: "user", content: "APP NOTE", timestamp: 0 }],
    },
  });
  expect((await note.wait()).status).toBe("done");
  expect(await firstText(root)).toBe("APP NOTE");
  releaseB();
  expect((await placement(h, b)).status).toBe("done");
  const [summary] = summaries(await root.entries());
  expect(summary!.head!).toBeGreaterThanOrEqual(users[1]!.id);
  const texts = (await root.context()).messages.map((m) => textOf(m));
  expect(texts).not.toContain("APP NOTE");
  expect(texts[0]).toContain("SUMMARY B");
});

test("a head write cutting exactly where the active range starts is placed, not stale (at or after the start)", async () => {
  const { root } = await open(async () => fauxAssistantMessage(big("answer")));
  await chat(root, 1, 3);
  const users = (await root.entries()).filter((e) => e.kind === "pi.user");
  const head = (text: string) =>
    root.submit({
      type: "write",
      entry: {
        kind: "app.context",
        head: users[1]!.id,
        model: [{ role: "user", content: text, timestamp: 0 }],
      },
    });
  expect((await (await head("FIRST")).wait()).status).toBe("done");
  // The range now starts at users[1]: a second head at the same entry cuts at the start, not before it.
  expect(await (await head("SECOND")).wait()).toMatchObject({ status: "done" });
  expect(await firstText(root)).toBe("SECOND");
});

test("a fork inherits where its parent's summary starts the range: in a live fork, a head cutting before the summary's cut settles stale, one at it is placed", async () => {
  // Break 29N: every named ordering was in the conversation that placed the summary; a fork created
  // by the live engine that did not carry the inherited range start (its first head judged against
  // no start) passed them all.
  const { h, root } = await open(
    async (req) => fauxAssistantMessage(isSummary(req) ? "SUMMARY" : big("answer")),
    { settings: { compaction: { keepRecentTokens: 150 } } },
  );
  await chat(root, 1, 3);
  const a = await root.compact();
  expect((await placement(h, a)).status).toBe("done");
  const entries = await root.entries();
  const [summary] = summaries(entries);
  const users = entries.filter((e) => e.kind === "pi.user");
  expect(users[0]!.id).toBeLessThan(summary!.head!);
  const fork = await root.fork(entries.at(-1)!.id, { ownership: { kind: "ownerless" } });
  const head = (at: number, text: string) =>
    fork.submit({
      type: "write",
      entry: { kind: "app.context", head: at, model: [{ role: "user", content: text, timestamp: 0 }] },
    });
  expect(await (await head(users[0]!.id, "BEFORE")).wait()).toMatchObject({
    status: "unanswered",
    reason: "stale",
  });
  expect(await firstText(fork)).toContain("SUMMARY");
  expect((await (await head(summary!.head!, "AT")).wait()).status).toBe("done");
  expect(await firstText(fork)).toBe("AT");
});

test("a fork compacting over its inherited history: the summary is headed at an inherited entry, and nothing is deleted, in the fork or its parent (draw 34C)", async () => {
  // Draw 34C: every named compaction summarized the conversation's own entries; a fork's summary
  // cuts into its parent's entries, which it reads but does not hold.
  const { h, root } = await open(
    async (req) => fauxAssistantMessage(isSummary(req) ? "SUMMARY" : big("answer")),
    { settings: { compaction: { keepRecentTokens: 150 } } },
  );
  await chat(root, 1, 3);
  const parentBefore = await root.entries();
  const fork = await root.fork(parentBefore.at(-1)!.id, { ownership: { kind: "ownerless" } });
  const inherited = await fork.entries();
  expect(inherited).toEqual(parentBefore);
  const task = await fork.compact();
  expect((await placement(h, task)).status).toBe("done");
  const after = await fork.entries();
  expect(after.slice(0, inherited.length)).toEqual(inherited);
  const [summary] = summaries(after);
  expect(after).toHaveLength(inherited.length + 1);
  expect(summary).toMatchObject({ conversationId: fork.id });
  // Headed at an inherited entry (the fork holds none of its own before the summary).
  expect(inherited.map((e) => e.id)).toContain(summary!.head);
  expect(summary!.head).toBeGreaterThan(inherited[0]!.id);
  expect(await root.entries()).toEqual(parentBefore);
  expect((await root.context()).head).toBeUndefined();
  expect(await firstText(fork)).toContain("SUMMARY");
  // The parent's own next turn still starts from its whole history.
  await chat(root, 4, 1);
  expect(await firstText(root)).toContain("q1");
});
