/**
 * Head writes and staleness (spec §6): an entry with `head` starts the active range at that entry.
 * A head write whose head is older than where the active range starts now is stale: it is answered
 * `unanswered: stale` and never placed, whether placed at once or queued for a boundary (where heads
 * placed earlier at the same boundary count). User inputs never become stale.
 */
import { fauxAssistantMessage, fauxToolCall } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { describe, expect, test } from "vitest";
import { AgentHarness, defineTool, InvalidTransition, type LiveState } from "../../../worker/index.ts";
import {
  deferred,
  type FauxResponder,
  fauxAgentModel,
  fauxError,
  memoryStore,
  until,
  within,
} from "../../../worker/testing.ts";
import { callsThenAnswer, cleanups, echo, gatedTool, inboxOf, open, textOf, transcript } from "./fixtures.ts";

const note = (n: number, head?: number) => ({
  type: "write" as const,
  entry: { kind: "app.note", data: { n }, model: [], ...(head !== undefined ? { head } : {}) },
});

/** The texts of a request's user messages, in order. */
const userTexts = (messages: readonly { role: string }[]) =>
  messages.filter((m) => m.role === "user").map((m) => textOf(m as never));

/**
 * A run held inside its first round: the model's first answer calls the gated `hold` tool (the input
 * "go"), later answers echo the user texts; resolves once the tool is running.
 */
async function heldAtTool() {
  const hold = gatedTool();
  const responder: FauxResponder = (req) => {
    const texts = userTexts(req.messages);
    return texts.at(-1) === "go" && !req.messages.some((m) => m.role === "assistant")
      ? fauxAssistantMessage([fauxToolCall("hold", {}, { id: "call-1" })], { stopReason: "toolUse" })
      : fauxAssistantMessage(`echo: ${texts.join(" | ")}`);
  };
  const s = await open(responder, { tools: [hold.tool] });
  const run = await s.root.submit({ type: "input", content: "go" });
  await hold.started.promise;
  return { ...s, hold, run };
}

/**
 * A harness on `faux` (partials every 5 ms) whose root was asked "go" and is streaming its answer
 * (a partial committed): the harness, the root and that submission.
 */
async function streamingGo(faux: ReturnType<typeof fauxAgentModel>) {
  const h = await AgentHarness.open(await memoryStore(), {
    models: faux.models,
    defaultModel: faux.ref,
    settings: { partialIntervalMs: 5 },
  });
  cleanups.push(async () => {
    await h.close().catch(() => undefined);
    faux.unregister();
  });
  const root = await h.root();
  const run = await root.submit({ type: "input", content: "go" });
  await until(
    () => h.docNow<LiveState & Record<string, never>>(1, "pi.live")?.generation?.message !== undefined,
  );
  return { h, root, run };
}

describe("head writes", () => {
  test("placed at once: a head older than the active range start is stale; at or after it is placed", async () => {
    const { root } = await open(echo);
    for (let n = 1; n <= 3; n++) expect((await (await root.submit(note(n))).wait()).status).toBe("done");
    const cut = await (await root.submit(note(4, 3))).wait(); // entry 4: the range starts at 3
    expect(cut.status).toBe("done");
    const stale = await root.submit(note(5, 2));
    expect(await stale.wait()).toEqual({ status: "unanswered", reason: "stale" });
    // A write's unanswered record has no entry, and nothing of what was submitted (break 29F).
    expect(await stale.record()).toEqual({
      id: stale.id,
      conversationId: root.id,
      type: "write",
      status: "unanswered",
      reason: "stale",
    });
    expect((await (await root.submit(note(6, 3))).wait()).status).toBe("done");
    const kept = (await transcript(root)).map((e) => (e.data as { n: number }).n);
    expect(kept).toEqual([1, 2, 3, 4, 6]);
  });

  test("placed at once with a requestId: the stale write's record keeps it, so the same request again returns that record and writes nothing (draw 41b, 15)", async () => {
    // Draw 41b C: every named stale write had no requestId; a stale record written without the
    // draft's requestId passed them, and the request sent again was judged anew.
    const { root } = await open(echo);
    for (let n = 1; n <= 3; n++) expect((await (await root.submit(note(n))).wait()).status).toBe("done");
    expect((await (await root.submit(note(4, 3))).wait()).status).toBe("done");
    const stale = await root.submit({ ...note(5, 2), requestId: "stale-1" });
    expect(await stale.wait()).toEqual({ status: "unanswered", reason: "stale" });
    expect(await stale.record()).toEqual({
      id: stale.id,
      conversationId: root.id,
      requestId: "stale-1",
      type: "write",
      status: "unanswered",
      reason: "stale",
    });
    const again = await root.submit({ ...note(5, 4), requestId: "stale-1" });
    expect(again.id).toBe(stale.id);
    expect(await again.wait()).toEqual({ status: "unanswered", reason: "stale" });
    const kept = (await transcript(root)).map((e) => (e.data as { n: number }).n);
    expect(kept).toEqual([1, 2, 3, 4]);
  });

  test("queued at a boundary: a head placed earlier at the same boundary makes a later, older one stale", async () => {
    const hold = gatedTool();
    const { h, root } = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "call-1" })), {
      tools: [hold.tool],
    });
    for (let n = 1; n <= 2; n++) await (await root.submit(note(n))).wait();
    const run = await root.submit({ type: "input", content: "go" }); // entry 3
    await hold.started.promise;
    const newer = await root.submit(note(10, 3));
    const older = await root.submit(note(11, 2));
    expect(inboxOf(h).items).toHaveLength(2);
    hold.release.resolve();
    expect((await newer.wait()).status).toBe("done");
    expect(await older.wait()).toEqual({ status: "unanswered", reason: "stale" });
    // Its record: unanswered with no entry and without the payload it was queued with (break 29F).
    expect(await older.record()).toEqual({
      id: older.id,
      conversationId: root.id,
      type: "write",
      status: "unanswered",
      reason: "stale",
    });
    expect((await run.wait()).status).toBe("done");
    expect(inboxOf(h).items).toEqual([]);
    const notes = (await transcript(root))
      .filter((e) => e.kind === "app.note")
      .map((e) => (e.data as { n: number }).n);
    expect(notes).toEqual([1, 2, 10]);
  });

  test("three heads queued at one boundary: each is judged against the newest head placed before it in that commit, not the first", async () => {
    const hold = gatedTool();
    const { root } = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "call-1" })), {
      tools: [hold.tool],
    });
    for (let n = 1; n <= 2; n++) await (await root.submit(note(n))).wait();
    const run = await root.submit({ type: "input", content: "go" }); // entry 3
    await hold.started.promise;
    const first = await root.submit(note(10, 2)); // the range starts at 2
    const second = await root.submit(note(11, 3)); // then at 3
    const third = await root.submit(note(12, 2)); // older than 3, though not than the first head placed
    hold.release.resolve();
    expect((await first.wait()).status).toBe("done");
    expect((await second.wait()).status).toBe("done");
    expect(await third.wait()).toEqual({ status: "unanswered", reason: "stale" });
    expect((await run.wait()).status).toBe("done");
    const notes = (await transcript(root))
      .filter((e) => e.kind === "app.note")
      .map((e) => (e.data as { n: number }).n);
    expect(notes).toEqual([1, 2, 10, 11]);
  });

  test("queued at a boundary after an older head: the range start a head moved at this boundary counts, not the one the boundary began with (break 30C)", async () => {
    const hold = gatedTool();
    const { root } = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "call-1" })), {
      tools: [hold.tool],
    });
    await (await root.submit(note(1))).wait();
    await (await root.submit(note(2, 1))).wait(); // the active range starts at entry 1
    const run = await root.submit({ type: "input", content: "go" }); // entry 3
    await hold.started.promise;
    const newer = await root.submit(note(10, 3));
    // Fresh against the start the boundary began with (1), stale against the one `newer` set (3).
    const older = await root.submit(note(11, 2));
    hold.release.resolve();
    expect((await newer.wait()).status).toBe("done");
    expect(await older.wait()).toEqual({ status: "unanswered", reason: "stale" });
    expect((await run.wait()).status).toBe("done");
    const notes = (await transcript(root))
      .filter((e) => e.kind === "app.note")
      .map((e) => (e.data as { n: number }).n);
    expect(notes).toEqual([1, 2, 10]);
  });

  test("a head that names no earlier entry is refused at submit", async () => {
    const { root } = await open(echo);
    await (await root.submit(note(1))).wait();
    for (const head of [0, -1, 1.5, 99])
      await expect(root.submit(note(2, head))).rejects.toThrow(InvalidTransition);
  });

  test("the active range start survives a restart, and is found in a store written before the head column", async () => {
    // A schema-1 store holding a head marker only in the entry's body.
    const old = await memoryStore(undefined, { schemaVersion: 1 });
    await old.commit(async (sql) => {
      await sql.run("INSERT INTO conversations (id, created_at) VALUES (1, 0)");
      for (let id = 1; id <= 3; id++)
        await sql.run("INSERT INTO entries (id, conversation_id, kind, body) VALUES (?, 1, 'app.note', ?)", [
          id,
          JSON.stringify({ data: { n: id }, model: [], ...(id === 3 ? { head: 2 } : {}) }),
        ]);
    });
    const image = old.image();
    await old.close();
    const faux = fauxAgentModel(echo);
    const h = await AgentHarness.open(await memoryStore(image), {
      models: faux.models,
      defaultModel: faux.ref,
    });
    cleanups.push(async () => {
      await h.close().catch(() => undefined);
      faux.unregister();
    });
    const root = await h.root();
    expect(await (await root.submit(note(4, 1))).wait()).toEqual({ status: "unanswered", reason: "stale" });
    expect((await (await root.submit(note(5, 2))).wait()).status).toBe("done");
  });

  test("a fork inherits the active range start: a head older than it is stale in the child and in its own fork, live and after a reopen (draw 35b C)", async () => {
    // Draw 35b C: the fork's inherited range start dropped at the fork (so the child read "no head")
    // passed every head-write test, each of which wrote to the root.
    const ownerless = { ownership: { kind: "ownerless" as const } };
    const store = await memoryStore();
    const setup = await open(echo, { store });
    for (let n = 1; n <= 3; n++) await (await setup.root.submit(note(n))).wait();
    expect((await (await setup.root.submit(note(4, 3))).wait()).status).toBe("done"); // the range starts at 3
    const child = await setup.root.fork(4, ownerless);
    const grandchild = await child.fork(4, ownerless);
    for (const c of [child, grandchild]) {
      expect(await (await c.submit(note(5, 2))).wait()).toEqual({ status: "unanswered", reason: "stale" });
      expect(inboxOf(setup.h, c.id).items).toEqual([]);
    }
    const [childId, grandchildId] = [child.id, grandchild.id];
    await setup.h.close();
    const again = await open(echo, { store: await memoryStore(store.image()) });
    for (const id of [childId, grandchildId]) {
      const c = (await again.h.loadedConversation(id))!;
      expect(await (await c.submit(note(6, 2))).wait()).toEqual({ status: "unanswered", reason: "stale" });
      expect((await (await c.submit(note(7, 3))).wait()).status).toBe("done");
    }
  });
});

describe("reset", () => {
  test("idle: the reset is placed at once and the next request starts from its handoff", async () => {
    const { root, faux } = await open(echo);
    await (await root.submit({ type: "input", content: "first" })).wait();
    const reset = await root.reset("summary of before");
    expect((await reset.wait()).status).toBe("done");
    expect(await (await root.submit({ type: "input", content: "second" })).wait()).toMatchObject({
      status: "done",
    });
    expect(faux.requests.map((r) => userTexts(r.messages))).toEqual([
      ["first"],
      ["summary of before", "second"],
    ]);
    expect(faux.requests[1]!.messages.map((m) => m.role)).toEqual(["user", "user"]);
    const resetEntry = (await root.entries()).find((e) => e.kind === "pi.reset")!;
    expect(resetEntry.head).toBe(resetEntry.id);
    // A write submission of that entry (spec §2.2), done with it (reading 24b).
    expect(await reset.record()).toMatchObject({ type: "write", status: "done", entry: resetEntry.id });
    // Nothing is deleted: the old entries stay stored, the view shows the active range.
    const stored = (await root.entries()).map((e) => e.kind);
    expect(stored).toEqual(["pi.user", "pi.assistant", "pi.reset", "pi.user", "pi.assistant"]);
    const view = (await root.viewState()).entries.map((e) => e.kind);
    expect(view).toEqual(["pi.reset", "pi.user", "pi.assistant"]);
    // A reset without a handoff starts from nothing.
    await (await root.reset()).wait();
    await (await root.submit({ type: "input", content: "third" })).wait();
    expect(userTexts(faux.requests.at(-1)!.messages)).toEqual(["third"]);
    // Both resets head themselves; the handoff is one user message, the bare reset has no model.
    const resets = (await root.entries()).filter((e) => e.kind === "pi.reset");
    expect(resets.map((e) => [e.head === e.id, e.model])).toEqual([
      [true, [expect.objectContaining({ role: "user", content: "summary of before" })]],
      [true, undefined],
    ]);
  });

  test("an empty handoff is a handoff: the reset carries it as its one user message, head itself; only an absent one leaves the model out (draw 34B)", async () => {
    // Draw 34B: every named handoff was non-empty text; a reset dropping a falsy handoff (model
    // absent for "") passed them.
    const { root } = await open(echo);
    await (await root.reset("")).wait();
    await (await root.reset()).wait();
    const resets = (await root.entries()).filter((e) => e.kind === "pi.reset");
    expect(resets.map((e) => [e.head === e.id, e.model])).toEqual([
      [true, [{ role: "user", content: "", timestamp: expect.any(Number) }]],
      [true, undefined],
    ]);
  });

  test("a fork's own reset heads itself in the fork: its next request starts from its handoff, live and after a reopen, over a reset its parent placed before the fork point; the parent keeps its range (draw 35e)", async () => {
    // Draw 35e: every named reset was the root's; a head marker looked up parent first passed them.
    const store = await memoryStore();
    let s = await open(echo, { store });
    await (await s.root.submit({ type: "input", content: "old" })).wait();
    await (await s.root.reset("parent handoff")).wait();
    await (await s.root.submit({ type: "input", content: "kept" })).wait();
    const at = (await s.root.entries()).at(-1)!.id;
    const child = await s.root.fork(at, { ownership: { kind: "ownerless" } });
    const childId = child.id;
    const reset = await child.reset("child handoff");
    expect((await reset.wait()).status).toBe("done");
    const own = (await child.entries()).at(-1)!;
    expect([own.kind, own.head === own.id]).toEqual(["pi.reset", true]);
    await (await child.submit({ type: "input", content: "next" })).wait();
    expect(userTexts(s.faux.requests.at(-1)!.messages)).toEqual(["child handoff", "next"]);
    expect((await child.viewState()).entries.map((e) => e.kind)).toEqual([
      "pi.reset",
      "pi.user",
      "pi.assistant",
    ]);
    // The fork's range starts at its own reset now, not at the parent's: a head before it is stale
    // (a head store that kept the fork's inherited start passed every other check here).
    expect(await (await child.submit(note(1, at))).wait()).toEqual({ status: "unanswered", reason: "stale" });
    expect((await s.root.viewState()).entries.map((e) => e.kind)).toEqual([
      "pi.reset",
      "pi.user",
      "pi.assistant",
    ]);
    await s.h.close();
    s = await open(echo, { store: await memoryStore(store.image()) });
    const reopened = (await s.h.loadedConversation(childId))!;
    expect((await reopened.viewState()).entries.map((e) => e.kind)).toEqual([
      "pi.reset",
      "pi.user",
      "pi.assistant",
    ]);
    expect(await (await reopened.submit(note(2, at))).wait()).toEqual({
      status: "unanswered",
      reason: "stale",
    });
    await (await reopened.submit({ type: "input", content: "again" })).wait();
    expect(userTexts(s.faux.requests.at(-1)!.messages)).toEqual(["child handoff", "next", "again"]);
  });

  test("a user item queued before a reset lands after it: the reset is placed first and the input runs in the new context", async () => {
    const { root, faux, hold, run } = await heldAtTool();
    const placedAt = (await run.record()).entry;
    expect(placedAt).toEqual(expect.any(Number));
    // Queued first, the reset after it: ID order alone would place the input before the reset.
    const early = await root.submit({ type: "input", content: "early", whenBusy: "followUp" });
    const reset = await root.reset("handoff");
    expect(early.id).toBeLessThan(reset.id);
    hold.release.resolve();
    expect(await run.wait()).toEqual({ status: "unanswered", reason: "reset" });
    // Unanswered by the reset, the input keeps the entry it was placed with (draw 39c: a reset's
    // settlement dropping it passed every inbox test, whose unanswered inputs were aborted).
    expect(await run.record()).toEqual({
      id: run.id,
      conversationId: root.id,
      type: "input",
      status: "unanswered",
      reason: "reset",
      entry: placedAt,
    });
    expect((await reset.wait()).status).toBe("done");
    expect((await early.wait()).status).toBe("done");
    expect(faux.requests).toHaveLength(2);
    // The input ran after the reset, in its context: the old run's "go" is gone from it.
    expect(userTexts(faux.requests[1]!.messages)).toEqual(["handoff", "early"]);
    await root.waitForIdle();
  });

  test("a steer queued before a head write that is no reset is placed after it at the post-tools boundary and joins the run, never stale", async () => {
    // Draw 32C: the named tests build resets (which end the run) and a summary at a final boundary;
    // a post-tools boundary answering `stale` the steers queued before a head write it placed passed.
    const { root, faux, hold, run } = await heldAtTool();
    const [go] = await transcript(root);
    const steer = await root.submit({ type: "input", content: "also", whenBusy: "steer" });
    const cut = await root.submit(note(1, go!.id));
    expect(steer.id).toBeLessThan(cut.id);
    hold.release.resolve();
    expect((await cut.wait()).status).toBe("done");
    const answered = await run.wait();
    const entries = await transcript(root);
    const kinds = entries.map((e) => e.kind);
    expect(kinds).toEqual([
      "pi.user",
      "pi.assistant",
      "pi.tool-result",
      "app.note",
      "pi.user",
      "pi.assistant",
    ]);
    // The steer joined the run: both inputs are answered by the run's one answer.
    expect(await steer.wait()).toEqual({ status: "done", entry: entries[4]!.id, answer: entries[5]!.id });
    expect(answered).toEqual({ status: "done", entry: go!.id, answer: entries[5]!.id });
    expect(faux.requests).toHaveLength(2);
    expect(userTexts(faux.requests[1]!.messages)).toEqual(["go", "also"]);
  });

  test("several user items queued before a reset each outlive it: a follow-up the reset's boundary does not select stays queued and runs later, never stale (draw 32b)", async () => {
    // Draw 32b: a boundary that placed a head answering `stale` the user items it left queued passed
    // every named test; each queued one item per mode, which the boundary always selects.
    const { h, root, faux, hold, run } = await heldAtTool();
    // Two follow-ups (one at a time by default) and a steer, all queued before the reset.
    const first = await root.submit({ type: "input", content: "first", whenBusy: "followUp" });
    const second = await root.submit({ type: "input", content: "second", whenBusy: "followUp" });
    const steer = await root.submit({ type: "input", content: "steer", whenBusy: "steer" });
    const reset = await root.reset("handoff");
    hold.release.resolve();
    expect(await run.wait()).toEqual({ status: "unanswered", reason: "reset" });
    expect((await reset.wait()).status).toBe("done");
    for (const s of [first, second, steer]) expect((await s.wait()).status, String(s.id)).toBe("done");
    await root.waitForIdle();
    // Each ran after the reset, in its context; none was dropped.
    const asked = faux.requests.slice(1).map((r) => userTexts(r.messages));
    expect(asked.at(-1)).toEqual(["handoff", "first", "steer", "second"]);
    expect(faux.requests.slice(1).every((r) => !userTexts(r.messages).includes("go"))).toBe(true);
    expect(inboxOf(h, root.id)).toEqual({ items: [] });
  });

  test("a run aborted with a reset and a follow-up queued: the abort's boundary places the reset, then the follow-up runs in its context, never stale (draw 34B)", async () => {
    // Draw 34B: every named reset ended its run at a boundary (post-tools or final); a generation's
    // abort answering `stale` the users queued behind a reset passed every inbox test.
    const faux = fauxAgentModel(
      (req) =>
        fauxAssistantMessage(
          userTexts(req.messages).at(-1) === "go"
            ? "word ".repeat(200)
            : `echo: ${userTexts(req.messages).join(" | ")}`,
        ),
      { tokensPerSecond: 300 },
    );
    const { h, root, run } = await streamingGo(faux);
    const after = await root.submit({ type: "input", content: "after", whenBusy: "followUp" });
    const reset = await root.reset("handoff");
    const generation = h.docNow<LiveState & Record<string, never>>(1, "pi.live")!.run!.taskId;
    await h.abortTask(generation);
    expect(await run.wait()).toEqual({ status: "unanswered", reason: "aborted" });
    expect((await after.wait()).status).toBe("done");
    expect((await reset.wait()).status).toBe("done");
    await root.waitForIdle();
    expect(userTexts(faux.requests.at(-1)!.messages)).toEqual(["handoff", "after"]);
    expect(inboxOf(h, root.id)).toEqual({ items: [] });
  });

  test("a failed run leaves a follow-up and a reset queued: the next input's admission boundary places the reset, then the follow-up runs in its context, never stale (draw 38c-B)", async () => {
    // Draw 38c-B: every named reset was placed by a run's own boundary; the final boundary an input's
    // admission runs on an idle conversation with a non-empty inbox answering `stale` the users
    // queued before a reset it placed passed every inbox test.
    const hold = deferred();
    const { h, root, faux } = await open(async (req, n) => {
      if (n === 1) {
        await hold.promise;
        return fauxError("400 invalid request");
      }
      return echo(req, n);
    });
    const one = await root.submit({ type: "input", content: "one" });
    const two = await root.submit({ type: "input", content: "two", whenBusy: "followUp" });
    const reset = await root.reset("handoff");
    hold.resolve();
    expect(await one.wait()).toMatchObject({ status: "unanswered", reason: "model_error" });
    expect(root.busy).toBe(false);
    expect(inboxOf(h, root.id).items.map((i) => i.id)).toEqual([two.id, reset.id]);
    const three = await root.submit({ type: "input", content: "three", whenBusy: "followUp" });
    expect((await reset.wait()).status).toBe("done");
    expect((await two.wait()).status).toBe("done");
    expect((await three.wait()).status).toBe("done");
    await root.waitForIdle();
    // The follow-up ran after the reset, in its context: the failed run's "one" is gone from it.
    expect(userTexts(faux.requests[1]!.messages)).toEqual(["handoff", "two"]);
    expect(userTexts(faux.requests.at(-1)!.messages)).toEqual(["handoff", "two", "three"]);
    expect(inboxOf(h, root.id)).toEqual({ items: [] });
  });

  test("busy: at the post-tools boundary it ends the run (inputs unanswered: reset); queued users start over", async () => {
    const { root, faux, hold, run } = await heldAtTool();
    const reset = await root.reset("handoff");
    const later = await root.submit({ type: "input", content: "after", whenBusy: "followUp" });
    hold.release.resolve();
    expect(await run.wait()).toEqual({ status: "unanswered", reason: "reset" });
    expect((await reset.wait()).status).toBe("done");
    expect((await later.wait()).status).toBe("done");
    expect(faux.requests).toHaveLength(2); // no request continued the reset run
    expect(userTexts(faux.requests[1]!.messages)).toEqual(["handoff", "after"]);
    await root.waitForIdle();
  });

  test("busy: a host's own head: self write (not reset()) at the post-tools boundary ends the run the same way: inputs unanswered reset, a queued follow-up starts over (draw 41)", async () => {
    // Draw 41: every named test queued its reset through reset() (kind pi.reset); a boundary that took
    // only that kind for a reset (placing another head: self write as an ordinary postTools write and
    // generating on) passed them.
    const { root, faux, hold, run } = await heldAtTool();
    const restart = await root.submit({ type: "write", entry: { kind: "app.restart", head: "self" } });
    const later = await root.submit({ type: "input", content: "after", whenBusy: "followUp" });
    hold.release.resolve();
    expect(await run.wait()).toEqual({ status: "unanswered", reason: "reset" });
    expect((await restart.wait()).status).toBe("done");
    expect((await later.wait()).status).toBe("done");
    expect(faux.requests).toHaveLength(2); // no request continued the reset run
    expect(userTexts(faux.requests[1]!.messages)).toEqual(["after"]);
    await root.waitForIdle();
  });

  test("busy: reset() resolves once its write is admitted, while it is still queued; the boundary places it later (draw 38b)", async () => {
    // Draw 38b A: a reset() that resolved only once its write was placed made the named busy test
    // hang rather than fail; here the tool stays held until reset() has resolved.
    const hold = gatedTool();
    const responder: FauxResponder = (req) =>
      req.messages.some((m) => m.role === "assistant")
        ? fauxAssistantMessage(`echo: ${userTexts(req.messages).join(" | ")}`)
        : fauxAssistantMessage([fauxToolCall("hold", {}, { id: "call-1" })], { stopReason: "toolUse" });
    const { root } = await open(responder, { tools: [hold.tool] });
    const run = await root.submit({ type: "input", content: "go" });
    await hold.started.promise;
    const reset = await within(root.reset("handoff"), 2000, "reset() resolved before its placement");
    // Admitted durably, not placed: queued while the run holds its tool.
    expect(await reset.record()).toMatchObject({ type: "write", status: "queued" });
    expect((await root.entries()).map((e) => e.kind)).not.toContain("pi.reset");
    hold.release.resolve();
    expect(await run.wait()).toEqual({ status: "unanswered", reason: "reset" });
    const placed = (await root.entries()).find((e) => e.kind === "pi.reset")!;
    expect(await reset.wait()).toEqual({ status: "done", entry: placed.id });
  });

  test("busy: at the final boundary it follows the answer, whose input is already done", async () => {
    // No tool round: the answer streams slowly, the reset is queued meanwhile.
    const faux = fauxAgentModel(() => fauxAssistantMessage("word ".repeat(100)), { tokensPerSecond: 300 });
    const { root, run } = await streamingGo(faux);
    const reset = await root.reset("next");
    const answered = await run.wait();
    const placed = await reset.wait();
    const entries = await root.entries();
    expect(entries.map((e) => e.kind)).toEqual(["pi.user", "pi.assistant", "pi.reset"]);
    // The input is done with the answer the reset follows, not with the reset placed after it.
    expect(answered).toEqual({ status: "done", entry: entries[0]!.id, answer: entries[1]!.id });
    expect(placed).toEqual({ status: "done", entry: entries[2]!.id });
  });

  test("busy: a terminating tool round is a final boundary too: the reset follows the tool-calling answer, whose input is already done", async () => {
    // The round terminates (spec §8.5), so it uses final behaviour (spec §6): a reset queued during
    // it is placed after the round, and the run's input is done with the tool-calling answer, not
    // left unanswered (reset) as at an ordinary post-tools boundary.
    const started = deferred();
    const release = deferred();
    const finish = defineTool({
      name: "finish",
      description: "End the run once released",
      parameters: Type.Object({}),
      async execute() {
        started.resolve();
        await release.promise;
        return { content: [{ type: "text", text: "finished" }], control: { terminate: true } };
      },
    });
    const { root, faux } = await open(callsThenAnswer(fauxToolCall("finish", {}, { id: "call-1" })), {
      tools: [finish],
    });
    const run = await root.submit({ type: "input", content: "go" });
    await started.promise;
    const reset = await root.reset("next");
    release.resolve();
    const answered = await run.wait();
    const placed = await reset.wait();
    const entries = await transcript(root);
    expect(entries.map((e) => e.kind)).toEqual(["pi.user", "pi.assistant", "pi.tool-result", "pi.reset"]);
    expect(answered).toEqual({ status: "done", entry: entries[0]!.id, answer: entries[1]!.id });
    expect(placed).toEqual({ status: "done", entry: entries[3]!.id });
    await root.waitForIdle();
    expect(faux.requests).toHaveLength(1);
  });

  test("a reset's handoff must be text", async () => {
    const { root } = await open(echo);
    await expect(root.reset(42 as unknown as string)).rejects.toThrow(InvalidTransition);
  });
});
