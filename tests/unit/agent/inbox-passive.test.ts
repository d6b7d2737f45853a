/**
 * Writes take the ordered passive path (spec §2.2, §6): a write is appended at once only when the
 * conversation is idle with an empty inbox; otherwise it queues and a boundary places it. An idle
 * conversation whose inbox still holds items (a failed run leaves them there) queues every new
 * submission behind them and runs a final boundary in the same commit, so nothing is stranded.
 */
import { fauxAssistantMessage } from "@mariozechner/pi-ai";
import { describe, expect, test } from "vitest";
import type { ChangeSet } from "../../../worker/index.ts";
import { deferred, fauxError } from "../../../worker/testing.ts";
import { echo, inboxOf, kinds, liveOf, messageOf, open, textOf, transcript } from "./fixtures.ts";

const users = async (c: Parameters<typeof transcript>[0]) =>
  (await transcript(c)).filter((e) => e.kind === "pi.user").map((e) => textOf(messageOf(e)));

/** A conversation whose first run fails while a follow-up ("two") waits: idle, inbox non-empty. */
async function failedRunWithFollowUp(options: Parameters<typeof open>[1] = {}) {
  const hold = deferred();
  const setup = await open(async (req, n) => {
    if (n === 1) {
      await hold.promise;
      return fauxError("400 invalid request");
    }
    return echo(req, n);
  }, options);
  const { root } = setup;
  const one = await root.submit({ type: "input", content: "one" });
  const two = await root.submit({ type: "input", content: "two" });
  hold.resolve();
  expect(await one.wait()).toMatchObject({ status: "unanswered", reason: "model_error" });
  expect(root.busy).toBe(false);
  expect(inboxOf(setup.h).items.map((i) => i.id)).toEqual([two.id]);
  return { ...setup, two };
}

describe("writes take the ordered passive path", () => {
  test("a display-only write while busy queues and is placed at the next boundary, not mid-request", async () => {
    const hold = deferred();
    const { h, root, faux } = await open(async (req, n) => {
      await hold.promise;
      return echo(req, n);
    });
    const input = await root.submit({ type: "input", content: "one" });
    await expect.poll(() => faux.requests.length).toBe(1);
    const note = await root.submit({ type: "write", entry: { kind: "note", data: { text: "fyi" } } });
    expect((await note.record()).status).toBe("queued");
    expect(inboxOf(h).items.map((i) => i.mode)).toEqual(["write"]);
    expect(kinds(await transcript(root))).toEqual(["pi.user"]);
    hold.resolve();
    await input.wait();
    const entries = await transcript(root);
    expect(kinds(entries)).toEqual(["pi.user", "pi.assistant", "note"]);
    expect(await note.wait()).toEqual({ status: "done", entry: entries[2]!.id });
  });

  test("a display-only write while the inbox holds items is not appended ahead of the queued items", async () => {
    const { root, two } = await failedRunWithFollowUp();
    const note = await root.submit({ type: "write", entry: { kind: "note", data: { text: "fyi" } } });
    // A stranded follow-up would never settle: give up after a few seconds instead of the test's limit.
    expect((await two.wait(AbortSignal.timeout(5000))).status).toBe("done");
    const entries = await transcript(root);
    // The boundary that places the waiting follow-up places the write with it (writes first).
    expect(kinds(entries)).toEqual(["pi.user", "pi.assistant", "note", "pi.user", "pi.assistant"]);
    expect(await note.wait()).toEqual({ status: "done", entry: entries[2]!.id });
    expect(await users(root)).toEqual(["one", "two"]);
  });

  test("in an idle conversation with a non-empty inbox a new input queues behind the waiting follow-up and a final boundary starts it", async () => {
    const { h, root, two } = await failedRunWithFollowUp();
    const changes: ChangeSet[] = [];
    h.subscribe((change) => changes.push(change));
    const three = await root.submit({ type: "input", content: "three" });
    // One commit: the new input queued, the boundary placed the older follow-up and started its run.
    const admission = changes.find((c) => c.submissions.some((x) => x.id === three.id));
    expect(
      admission?.submissions.map((x) => [x.id, x.status]).sort((a, b) => Number(a[0]) - Number(b[0])),
    ).toEqual([
      [two.id, "placed"],
      [three.id, "queued"],
    ]);
    expect(admission?.tasks.map((t) => [t.kind, t.state.status])).toEqual([["pi.generation", "pending"]]);
    const record = await two.record();
    expect(record.status === "placed" || record.status === "done").toBe(true);
    expect((await three.record()).status).toBe("queued");
    expect(root.busy).toBe(true);
    expect((await two.wait()).status).toBe("done");
    expect((await three.wait()).status).toBe("done");
    expect(await users(root)).toEqual(["one", "two", "three"]);
    expect(inboxOf(h).items).toEqual([]);
  });

  test("with followUpMode all, the final boundary an idle admission runs is the same boundary: the waiting follow-up and the new input are both placed in that commit and one run answers both (sweep 42b)", async () => {
    // Sweep 42b, 98: every named test ran with one-at-a-time; an idle admission whose final boundary
    // took only the first follow-up whatever the setting passed them.
    const { h, root, faux, two } = await failedRunWithFollowUp({ settings: { followUpMode: "all" } });
    const changes: ChangeSet[] = [];
    h.subscribe((change) => changes.push(change));
    const three = await root.submit({ type: "input", content: "three" });
    const admission = changes.find((c) => c.submissions.some((x) => x.id === three.id));
    expect(
      admission?.submissions.map((x) => [x.id, x.status]).sort((a, b) => Number(a[0]) - Number(b[0])),
    ).toEqual([
      [two.id, "placed"],
      [three.id, "placed"],
    ]);
    expect(admission?.entries.map((e) => e.kind)).toEqual(["pi.user", "pi.user"]);
    expect(inboxOf(h).items).toEqual([]);
    const [a, b] = await Promise.all([two.wait(), three.wait()]);
    expect(a.status).toBe("done");
    expect(b.status === "done" && a.status === "done" && b.answer === a.answer).toBe(true);
    // The failed request, then one request answering both.
    expect(faux.requests.length).toBe(2);
    expect(await users(root)).toEqual(["one", "two", "three"]);
  });

  test("a write on an idle conversation whose inbox holds a write and a follow-up queues behind both, in id order: the boundary places the older write first, then the new one, then the follow-up (sweep 42b)", async () => {
    // Sweep 42b, 98: the waiting item was always a follow-up alone; a new write put at the head of
    // the inbox (placed ahead of an older waiting write) passed every test.
    const hold = deferred();
    const { h, root } = await open(async (req, n) => {
      if (n === 1) {
        await hold.promise;
        return fauxError("400 invalid request");
      }
      return echo(req, n);
    });
    const one = await root.submit({ type: "input", content: "one" });
    const older = await root.submit({ type: "write", entry: { kind: "note", data: { n: 1 } } });
    const two = await root.submit({ type: "input", content: "two" });
    hold.resolve();
    expect(await one.wait()).toMatchObject({ status: "unanswered", reason: "model_error" });
    expect(inboxOf(h).items.map((i) => i.id)).toEqual([older.id, two.id]);
    const changes: ChangeSet[] = [];
    h.subscribe((change) => changes.push(change));
    const newer = await root.submit({ type: "write", entry: { kind: "note", data: { n: 2 } } });
    const admission = changes.find((c) => c.submissions.some((x) => x.id === newer.id));
    expect(admission?.entries.map((e) => [e.kind, (e.data as { n?: number } | undefined)?.n])).toEqual([
      ["note", 1],
      ["note", 2],
      ["pi.user", undefined],
    ]);
    expect((await older.record()).status).toBe("done");
    expect((await newer.record()).status).toBe("done");
    expect((await two.wait()).status).toBe("done");
    expect(inboxOf(h).items).toEqual([]);
  });

  test("a write on an idle conversation with a non-empty inbox queues behind the waiting follow-up too, and the final boundary of the same commit places both", async () => {
    const { h, root, two } = await failedRunWithFollowUp();
    const changes: ChangeSet[] = [];
    h.subscribe((change) => changes.push(change));
    const note = await root.submit({
      type: "write",
      entry: { kind: "app.note", model: [{ role: "user", content: "a note", timestamp: 0 }] },
    });
    // One commit: the write admitted behind the follow-up, and the boundary placing the write
    // (writes first) and the follow-up, which starts the run.
    const admission = changes.find((c) => c.submissions.some((x) => x.id === note.id));
    expect(
      admission?.submissions.map((x) => [x.id, x.status]).sort((a, b) => Number(a[0]) - Number(b[0])),
    ).toEqual([
      [two.id, "placed"],
      [note.id, "done"],
    ]);
    expect(admission?.entries.map((e) => e.kind)).toEqual(["app.note", "pi.user"]);
    expect(admission?.tasks.map((t) => [t.kind, t.state.status])).toEqual([["pi.generation", "pending"]]);
    expect((await two.wait()).status).toBe("done");
    expect(inboxOf(h).items).toEqual([]);
  });

  test("a reset on an idle conversation with a non-empty inbox takes the same path: it queues behind the waiting follow-up, and the final boundary of the same commit places it first and starts the follow-up from its handoff (draw 39b)", async () => {
    // Draw 39b: every named reset was on an idle conversation with an empty inbox or a busy one; a
    // reset appended at once whenever the conversation was idle (no final boundary) passed them.
    const { h, root, two, faux } = await failedRunWithFollowUp();
    const changes: ChangeSet[] = [];
    h.subscribe((change) => changes.push(change));
    const reset = await root.reset("handoff");
    const admission = changes.find((c) => c.submissions.some((x) => x.id === reset.id));
    expect(
      admission?.submissions.map((x) => [x.id, x.status]).sort((a, b) => Number(a[0]) - Number(b[0])),
    ).toEqual([
      [two.id, "placed"],
      [reset.id, "done"],
    ]);
    expect(admission?.entries.map((e) => e.kind)).toEqual(["pi.reset", "pi.user"]);
    expect(admission?.tasks.map((t) => [t.kind, t.state.status])).toEqual([["pi.generation", "pending"]]);
    expect((await two.wait(AbortSignal.timeout(5000))).status).toBe("done");
    expect(faux.requests.at(-1)!.messages.map((m) => textOf(m))).toEqual(["handoff", "two"]);
    expect(inboxOf(h).items).toEqual([]);
  });

  test("an input on an idle conversation with a non-empty inbox queues by its whenBusy: steer as a steer (so the final boundary places it with the follow-up), reject as a follow-up (not refused: the conversation is not busy)", async () => {
    const steer = await failedRunWithFollowUp();
    const three = await steer.root.submit({ type: "input", content: "three", whenBusy: "steer" });
    // one-at-a-time selects the first steer and the first follow-up: both start the one successor run.
    expect((await three.record()).status).toBe("placed");
    expect(liveOf(steer.h).run?.inputs).toEqual([steer.two.id, three.id]);
    expect((await three.wait()).status).toBe("done");

    const reject = await failedRunWithFollowUp();
    const four = await reject.root.submit({ type: "input", content: "four", whenBusy: "reject" });
    expect((await four.record()).status).toBe("queued");
    expect(inboxOf(reject.h).items.map((i) => [i.id, i.mode])).toEqual([[four.id, "followUp"]]);
    expect((await four.wait()).status).toBe("done");
    expect(await users(reject.root)).toEqual(["one", "two", "four"]);
  });

  test("a host may write an entry with head: self through submit; its head is its own id", async () => {
    const { root, h } = await open(() => fauxAssistantMessage("ok"));
    await (await root.submit({ type: "input", content: "before" })).wait();
    const write = await root.submit({ type: "write", entry: { kind: "app.restart", head: "self" } });
    const settled = await write.wait();
    expect(settled.status).toBe("done");
    const entry = (await root.entries()).find((e) => e.kind === "app.restart")!;
    expect(settled).toEqual({ status: "done", entry: entry.id });
    expect(entry.head).toBe(entry.id);
    // The active range starts over at it: the view no longer shows the earlier turn.
    const view = await root.viewState();
    expect(view.entries.map((e) => e.kind)).toEqual(["app.restart"]);
    expect(h.closed).toBe(false);
  });

  test("a draft carrying a byTaskId (not an EntryDraft field) does not attribute its entry: a transaction's and a submitted write's entries carry none, as stored too (draw 33c)", async () => {
    // Draw 33cA: the engine kept a draft's byTaskId (the spread took it), so a host or a client's
    // write could name a task that never appended the entry; only a task's own commit sets it.
    const { root, h, store } = await open(() => fauxAssistantMessage("ok"));
    const forged = { kind: "app.forged", data: "x", byTaskId: 7 } as never;
    const appended = await h.transaction((tx) => tx.appendEntry(root.id, forged));
    expect(appended.byTaskId).toBeUndefined();
    expect((await (await root.submit({ type: "write", entry: forged })).wait()).status).toBe("done");
    const stored = (await root.entries()).filter((e) => e.kind === "app.forged");
    expect(stored).toHaveLength(2);
    expect(stored.map((e) => e.byTaskId)).toEqual([undefined, undefined]);
    expect(stored.every((e) => !Object.hasOwn(e, "byTaskId"))).toBe(true);
    const rows = await store.read((sql) => sql.all("SELECT by_task FROM entries WHERE kind = 'app.forged'"));
    expect(rows).toEqual([{ by_task: null }, { by_task: null }]);
    expect(h.closed).toBe(false);
  });

  test("the newest of several self heads decides where the active range starts, in later commits too", async () => {
    // Break 26C: the active range start a later commit reads (the stale check) was never tried with
    // two head markers in separate commits, so keeping the first marker's head went unseen.
    const { root } = await open(() => fauxAssistantMessage("ok"));
    const write = (kind: string, head: number | "self") =>
      root.submit({ type: "write", entry: { kind, head } });
    await (await write("app.first", "self")).wait();
    await (await root.submit({ type: "write", entry: { kind: "app.between" } })).wait();
    await (await write("app.second", "self")).wait();
    const ids = new Map((await root.entries()).map((e) => [e.kind, e.id]));
    // A head at the entry between the two markers is older than the newest marker's head: stale.
    expect(await (await write("app.late", ids.get("app.between")!)).wait()).toEqual({
      status: "unanswered",
      reason: "stale",
    });
    // At the newest marker's head it is placed.
    expect((await (await write("app.at", ids.get("app.second")!)).wait()).status).toBe("done");
    const view = await root.viewState();
    expect(view.entries.map((e) => e.kind)).toEqual(["app.at"]);
  });

  test("a transaction may append an entry with head: self (an EntryDraft); its head is its own id", async () => {
    const { root, h } = await open(() => fauxAssistantMessage("ok"));
    await (await root.submit({ type: "input", content: "before" })).wait();
    const appended = await h.transaction((tx) => {
      tx.appendEntry(root.id, { kind: "app.note" });
      return tx.appendEntry(root.id, { kind: "app.restart", head: "self" });
    });
    expect(appended.head).toBe(appended.id);
    const entry = (await root.entries()).find((e) => e.kind === "app.restart")!;
    expect(entry.head).toBe(entry.id);
    // The active range starts over at it: neither the earlier turn nor the note before it shows.
    expect((await root.viewState()).entries.map((e) => e.kind)).toEqual(["app.restart"]);
  });

  test("a submitted write with head: self heads itself also when its commit appended an entry before it: a boundary placing a note then the reset, and a submit inside a transaction after an append (sweep 42)", async () => {
    // Sweep 42, 3: "self" resolved to the next committed entry id (not the commit's own next) passed
    // the tests above, whose submitted resets were the first entry of their commit.
    const hold = deferred();
    const { root, h } = await open(async (req, n) => {
      if (n === 1) await hold.promise;
      return echo(req, n);
    });
    const input = await root.submit({ type: "input", content: "one" });
    const note = await root.submit({ type: "write", entry: { kind: "app.note", data: "n" } });
    const restart = await root.submit({ type: "write", entry: { kind: "app.restart", head: "self" } });
    expect((await restart.record()).status).toBe("queued");
    hold.resolve();
    await input.wait();
    const placed = await restart.wait();
    const entries = await transcript(root);
    const noteEntry = entries.find((e) => e.kind === "app.note")!;
    const entry = entries.find((e) => e.kind === "app.restart")!;
    expect(await note.wait()).toEqual({ status: "done", entry: noteEntry.id });
    expect(placed).toEqual({ status: "done", entry: entry.id });
    expect(entry.id).toBe(noteEntry.id + 1);
    expect(entry.head).toBe(entry.id);
    expect((await root.viewState()).entries.map((e) => e.kind)).toEqual(["app.restart"]);
    // In a transaction: an entry appended first, then the write submitted in the same commit.
    const record = await h.transaction((tx) => {
      tx.appendEntry(root.id, { kind: "app.note" });
      return h.submitIn(tx, root.id, { type: "write", entry: { kind: "app.again", head: "self" } });
    });
    const again = (await transcript(root)).find((e) => e.kind === "app.again")!;
    expect(record).toMatchObject({ status: "done", entry: again.id });
    expect(again.head).toBe(again.id);
    expect((await root.viewState()).entries.map((e) => e.kind)).toEqual(["app.again"]);
  });
});
