/**
 * A conversation-owned compaction's summary in an idle conversation with queued items (spec §8.7,
 * §6): the write submission queues behind the waiting follow-up and a final boundary runs in the
 * same commit, placing the summary (writes first) and starting the follow-up's run; the task
 * completes with `{ submissionId }`, and `Harness.submission()` observes the placement.
 */
import { fauxAssistantMessage } from "@mariozechner/pi-ai";
import { expect, test } from "vitest";
import { SUMMARY_SYSTEM_PROMPT } from "../../../worker/agent/compaction/task.ts";
import type { ChangeSet } from "../../../worker/index.ts";
import { deferred, type FauxRequest, fauxError } from "../../../worker/testing.ts";
import { inboxOf, open, textOf } from "./fixtures.ts";

const big = (label: string) => `${label} ${"x".repeat(400)}`; // about 100 tokens
const isSummary = (r: FauxRequest) => r.systemPrompt === SUMMARY_SYSTEM_PROMPT;

test("in an idle conversation with a queued follow-up, a compaction's summary queues and the same commit's final boundary places it, then starts the follow-up (reading 24f)", async () => {
  const hold = deferred();
  const { h, root, faux } = await open(
    async (req) => {
      if (isSummary(req)) return fauxAssistantMessage("SUMMARY");
      const last = textOf([...req.messages].reverse().find((m) => m.role === "user")!);
      if (last.startsWith("fails")) {
        await hold.promise;
        return fauxError("400 invalid request");
      }
      return fauxAssistantMessage(big("answer"));
    },
    { settings: { compaction: { keepRecentTokens: 150 } } },
  );
  for (let i = 1; i <= 3; i++) await (await root.submit({ type: "input", content: big(`q${i}`) })).wait();
  // A failed run leaves a follow-up queued: idle, with a non-empty inbox.
  const failing = await root.submit({ type: "input", content: "fails" });
  const follow = await root.submit({ type: "input", content: "follow" });
  hold.resolve();
  expect(await failing.wait()).toMatchObject({ status: "unanswered", reason: "model_error" });
  expect(root.busy).toBe(false);
  expect(inboxOf(h).items.map((i) => i.id)).toEqual([follow.id]);

  const commits: ChangeSet[] = [];
  h.subscribe((c) => void commits.push(c));
  const taskId = await root.compact();
  const record = await h.waitForTask(taskId);
  const submissionId = (record.state as unknown as { outcome: { result: { submissionId?: number } } }).outcome
    .result.submissionId;
  expect(record.state).toMatchObject({ outcome: { status: "completed", result: { submissionId } } });
  // The completing commit admits the summary and runs the final boundary: the summary placed first,
  // then the waiting follow-up placed, and its run created.
  const completing = commits.find((c) =>
    c.tasks.some((t) => t.id === taskId && t.state.status === "terminal"),
  )!;
  expect(completing.entries.map((e) => e.kind)).toEqual(["pi.compaction", "pi.user"]);
  expect(
    completing.submissions.map((s) => [s.id, s.status]).sort((a, b) => Number(a[0]) - Number(b[0])),
  ).toEqual([
    [follow.id, "placed"],
    [submissionId, "done"],
  ]);
  expect(completing.tasks.some((t) => t.kind === "pi.generation")).toBe(true);
  // The public handle observes the placement.
  const summary = (await h.submission(submissionId!))!;
  expect(await summary.record()).toMatchObject({
    type: "write",
    status: "done",
    requestId: `compaction:${taskId}`,
    entry: completing.entries[0]!.id,
  });
  expect((await follow.wait()).status).toBe("done");
  // The follow-up's request starts from the summary.
  const sent = faux.requests.filter((r) => !isSummary(r)).at(-1)!;
  expect(textOf(sent.messages[0]!)).toContain("<summary>\nSUMMARY\n</summary>");
  expect(inboxOf(h).items).toEqual([]);
});
