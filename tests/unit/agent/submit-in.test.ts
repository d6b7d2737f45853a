/**
 * `AgentHarness.submitIn`: a submission inside the caller's commit, with the rules of
 * `Conversation.submit` (requestId dedupe, placement by `whenBusy`) and the caller's other writes in
 * the same transaction; a throw anywhere in the commit leaves nothing of the submission.
 */
import { fauxToolCall } from "@mariozechner/pi-ai";
import { afterEach, expect, test } from "vitest";
import { ConversationBusy } from "../../../worker/index.ts";
import {
  callsThenAnswer,
  cleanups,
  echo,
  gatedTool,
  inboxOf,
  liveOf,
  messageOf,
  open,
  textOf,
} from "./fixtures.ts";

afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

test("an input admitted with the caller's writes: one transaction, placed and its run started when idle", async () => {
  const { h, store } = await open(echo, { paused: true });
  const before = store.stats.transactions;
  const { id, record } = await h.transaction(async (tx) => {
    const c = tx.createConversation({ kind: "ownerless" });
    const record = h.submitIn(tx, c.id, { type: "input", content: "hello", requestId: "r1" });
    tx.writeDoc(c.id, "test.note", { by: "the caller" });
    return { id: c.id, record };
  });
  expect(store.stats.transactions - before).toBe(1);
  expect(record).toMatchObject({ conversationId: id, status: "placed", requestId: "r1" });
  expect(liveOf(h, id).run?.inputs).toEqual([record.id]);
  expect(await h.doc(id, "test.note")).toEqual({ by: "the caller" });
  // Not a progress call: the run waits for resume().
  expect(h.scheduling).toBe("paused");
  h.resume();
  const c = h.requireConversation(id);
  await c.waitForIdle();
  expect((await c.entries()).map((e) => textOf(messageOf(e)))).toEqual(["hello", "echo: hello"]);
});

test("a known requestId returns the submission admitted under it and writes no second input", async () => {
  const { h, root } = await open(echo);
  const first = await h.transaction((tx) =>
    h.submitIn(tx, 1, { type: "input", content: "once", requestId: "r" }),
  );
  await root.waitForIdle();
  const again = await h.transaction((tx) =>
    h.submitIn(tx, 1, { type: "input", content: "once", requestId: "r" }),
  );
  expect(again.id).toBe(first.id);
  expect((await root.entries()).filter((e) => e.kind === "pi.user")).toHaveLength(1);
});

test("on a busy conversation: queued by whenBusy; `reject` throws ConversationBusy and the caller's writes roll back", async () => {
  const hold = gatedTool();
  const { h, root } = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "c1" })), {
    tools: [hold.tool],
  });
  await root.submit({ type: "input", content: "go" });
  await hold.started.promise;
  const steer = await h.transaction((tx) =>
    h.submitIn(tx, 1, { type: "input", content: "this way", whenBusy: "steer" }),
  );
  const follow = await h.transaction((tx) => h.submitIn(tx, 1, { type: "input", content: "then this" }));
  expect(steer).toMatchObject({ status: "queued", mode: "steer" });
  expect(follow).toMatchObject({ status: "queued", mode: "followUp" });
  expect(inboxOf(h).items.map((i) => i.id)).toEqual([steer.id, follow.id]);
  await expect(
    h.transaction((tx) => {
      tx.writeDoc(1, "test.note", { lost: true });
      return h.submitIn(tx, 1, { type: "input", content: "now", whenBusy: "reject" });
    }),
  ).rejects.toBeInstanceOf(ConversationBusy);
  expect(await h.doc(1, "test.note")).toBeUndefined();
  expect(inboxOf(h).items).toHaveLength(2);
  hold.release.resolve();
  await root.waitForIdle();
});

test("a throw after the submission in the same commit leaves no input, no submission and no run", async () => {
  const { h, root } = await open(echo, { paused: true });
  await expect(
    h.transaction((tx) => {
      h.submitIn(tx, 1, { type: "input", content: "half", requestId: "lost" });
      throw new Error("the caller's next write failed");
    }),
  ).rejects.toThrow("the caller's next write failed");
  expect(await root.entries()).toEqual([]);
  expect(await h.submissionByRequest(1, "lost")).toBeUndefined();
  expect(liveOf(h).run).toBeUndefined();
});
