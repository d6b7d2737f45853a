/**
 * What a boundary selects from the inbox (spec §6): followUpMode and steeringMode read at each
 * boundary ("one-at-a-time" takes the first item of the mode, "all" every item, one successor run for
 * all their ids), writes before user items, a queued input's entry stamped at placement, and writes
 * that never start a generation by themselves.
 */
import { fauxAssistantMessage, fauxToolCall } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { expect, test } from "vitest";
import type { AgentSettings } from "../../../worker/index.ts";
import { AgentHarness, DOC, defineTool } from "../../../worker/index.ts";
import { deferred, fauxError, memoryStore, until } from "../../../worker/testing.ts";
import {
  callsThenAnswer,
  echo,
  faultingHook,
  gatedTool,
  inboxOf,
  kinds,
  liveOf,
  messageOf,
  open,
  textOf,
  transcript,
} from "./fixtures.ts";

/** A harness whose first request is held until released; later ones echo. */
async function busyWithHeldAnswer(settings: AgentSettings) {
  const hold = deferred();
  const setup = await open(
    async (req, n) => {
      if (n === 1) await hold.promise;
      return echo(req, n);
    },
    { settings },
  );
  const first = await setup.root.submit({ type: "input", content: "one" });
  return { ...setup, hold, first };
}

test("followUpMode one-at-a-time: each final boundary places only the first queued follow-up", async () => {
  const { root, faux, hold, first } = await busyWithHeldAnswer({ followUpMode: "one-at-a-time" });
  const two = await root.submit({ type: "input", content: "two" });
  const three = await root.submit({ type: "input", content: "three" });
  hold.resolve();
  await first.wait();
  await two.wait();
  await three.wait();
  expect(faux.requests).toHaveLength(3);
  const users = (await transcript(root)).filter((e) => e.kind === "pi.user").map((e) => textOf(messageOf(e)));
  expect(users).toEqual(["one", "two", "three"]);
});

test("followUpMode all: the final boundary places every queued follow-up and one successor run answers them all", async () => {
  const { h, root, faux, hold, first } = await busyWithHeldAnswer({ followUpMode: "all" });
  const two = await root.submit({ type: "input", content: "two" });
  const three = await root.submit({ type: "input", content: "three" });
  expect(inboxOf(h).items.map((i) => i.id)).toEqual([two.id, three.id]);
  // Which commit settles the current input, and which one places the follow-ups and starts the
  // successor (spec §6: the current run's inputs settle first).
  const commits: { done: number[]; placed: number[]; runInputs?: readonly number[] }[] = [];
  h.subscribe((change) => {
    const run = (
      change.docs.find((d) => d.name === "pi.live")?.value as { run?: { inputs: number[] } } | undefined
    )?.run;
    commits.push({
      done: change.submissions.filter((x) => x.status === "done").map((x) => x.id),
      placed: change.submissions.filter((x) => x.status === "placed").map((x) => x.id),
      ...(run ? { runInputs: run.inputs } : {}),
    });
  });
  hold.resolve();
  const a = await first.wait();
  const [b, c] = [await two.wait(), await three.wait()];
  const settledAt = commits.findIndex((x) => x.done.includes(first.id));
  const placedAt = commits.findIndex((x) => x.placed.includes(two.id));
  expect(settledAt).toBeGreaterThanOrEqual(0);
  expect(settledAt).toBeLessThanOrEqual(placedAt);
  expect(commits[placedAt]!.placed).toEqual([two.id, three.id]);
  // One successor generation, its run's inputs exactly the selected ids.
  expect(commits.filter((x) => x.runInputs !== undefined).map((x) => x.runInputs)).toContainEqual([
    two.id,
    three.id,
  ]);
  expect((a as { answer: number }).answer).not.toBe((b as { answer: number }).answer);
  expect(faux.requests).toHaveLength(2);
  expect(b.status).toBe("done");
  expect(c.status).toBe("done");
  expect((b as { answer: number }).answer).toBe((c as { answer: number }).answer);
  expect(kinds(await transcript(root))).toEqual([
    "pi.user",
    "pi.assistant",
    "pi.user",
    "pi.user",
    "pi.assistant",
  ]);
  expect(inboxOf(h).items).toEqual([]);
});

test("a write placed at the final boundary beside the follow-ups is no input of the successor run: its inputs are the selected user ids only (break 30G)", async () => {
  // Break 30G: the named test queued follow-ups only; a boundary that counted the writes it placed
  // among the ids starting the successor (a write settles done at once, so nothing else shows it)
  // passed every test.
  const { h, root, hold, first } = await busyWithHeldAnswer({ followUpMode: "all" });
  const two = await root.submit({ type: "input", content: "two" });
  const note = await root.submit({ type: "write", entry: { kind: "note", data: { n: 1 } } });
  const three = await root.submit({ type: "input", content: "three" });
  expect(inboxOf(h).items.map((i) => i.id)).toEqual([two.id, note.id, three.id]);
  const runs: (readonly number[])[] = [];
  h.subscribe((change) => {
    const run = (
      change.docs.find((d) => d.name === "pi.live")?.value as { run?: { inputs: number[] } } | undefined
    )?.run;
    if (run) runs.push(run.inputs);
  });
  hold.resolve();
  await first.wait();
  expect((await note.wait()).status).toBe("done");
  expect((await two.wait()).status).toBe("done");
  expect((await three.wait()).status).toBe("done");
  expect(runs.length).toBeGreaterThan(0);
  expect(runs.every((inputs) => JSON.stringify(inputs) === JSON.stringify([two.id, three.id]))).toBe(true);
});

test("a final boundary places a follow-up and a steer queued after it in ID order, not grouped by mode", async () => {
  const { h, root, faux, hold, first } = await busyWithHeldAnswer({});
  const followUp = await root.submit({ type: "input", content: "two" });
  const steer = await root.submit({ type: "input", content: "three", whenBusy: "steer" });
  expect(inboxOf(h).items.map((i) => [i.id, i.mode])).toEqual([
    [followUp.id, "followUp"],
    [steer.id, "steer"],
  ]);
  // The held answer calls no tool, so no post-tools boundary places the steer first: the final
  // boundary places both, the older one first, and one successor run answers them.
  hold.resolve();
  await first.wait();
  const [b, c] = [await followUp.wait(), await steer.wait()];
  expect(b.status).toBe("done");
  expect((b as { answer: number }).answer).toBe((c as { answer: number }).answer);
  expect(faux.requests).toHaveLength(2);
  const users = (await transcript(root)).filter((e) => e.kind === "pi.user").map((e) => textOf(messageOf(e)));
  expect(users).toEqual(["one", "two", "three"]);
});

test("steeringMode all: the post-tools boundary places every queued steer and they all join the run", async () => {
  const gate = gatedTool();
  const { h, root, faux } = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "c1" })), {
    tools: [gate.tool],
    settings: { steeringMode: "all" },
  });
  const first = await root.submit({ type: "input", content: "go" });
  await gate.started.promise;
  const s1 = await root.submit({ type: "input", content: "steer one", whenBusy: "steer" });
  const s2 = await root.submit({ type: "input", content: "steer two", whenBusy: "steer" });
  expect(inboxOf(h).items.map((i) => i.mode)).toEqual(["steer", "steer"]);
  gate.release.resolve();
  const answers = [await first.wait(), await s1.wait(), await s2.wait()];
  expect(new Set(answers.map((a) => (a as { answer?: number }).answer)).size).toBe(1);
  expect(faux.requests).toHaveLength(2);
  const last = faux.requests[1]!.messages.map((m) => (m.role === "user" ? textOf(m) : m.role));
  expect(last).toEqual(["go", "assistant", "toolResult", "steer one", "steer two"]);
  expect(liveOf(h).run).toBeUndefined();
});

test.each(["a failed answer", "an abort", "a fault"] as const)(
  "a steer that joined the run is settled with the run's other input on every terminal path: %s",
  async (path) => {
    const gate = gatedTool();
    const second = deferred();
    let answered = 0;
    const { h, root, faux } = await open(
      async (req) => {
        if (!req.messages.some((m) => m.role === "assistant")) {
          return fauxAssistantMessage([fauxToolCall("hold", {}, { id: "c1" })], { stopReason: "toolUse" });
        }
        await second.promise;
        answered++;
        // A fault (reading 24e): the scheduler's cleanup settles the run, not the generation.
        if (path === "a fault") return fauxAssistantMessage("an answer a broken hook faults");
        return fauxError("400 Bad Request: not retryable");
      },
      {
        tools: [gate.tool],
        settings: { retry: { enabled: false } },
        ...(path === "a fault" ? faultingHook("afterResponse", "hook bug", () => answered > 0) : {}),
      },
    );
    const first = await root.submit({ type: "input", content: "go" });
    await gate.started.promise;
    const steer = await root.submit({ type: "input", content: "steer", whenBusy: "steer" });
    const later = await root.submit({ type: "input", content: "later" });
    gate.release.resolve();
    await expect.poll(() => faux.requests.length).toBe(2);
    // The post-tools boundary placed the steer and added it to the run; the follow-up stays queued.
    expect(liveOf(h).run?.inputs).toEqual([first.id, steer.id]);
    expect(inboxOf(h).items.map((i) => i.id)).toEqual([later.id]);
    const reason = { "an abort": "aborted", "a failed answer": "model_error", "a fault": "faulted" }[path];
    const aborting = path === "an abort" ? root.abort() : undefined;
    second.resolve();
    await aborting;
    expect(await first.wait()).toMatchObject({ status: "unanswered", reason });
    expect(await steer.wait()).toMatchObject({ status: "unanswered", reason });
    expect(liveOf(h).run).toBeUndefined();
    // Exactly the listed inputs: the queued follow-up is not settled by the failure (an abort withdraws it).
    expect((await later.record()).status).toBe(path === "an abort" ? "unanswered" : "queued");
  },
);

test.each(["a terminating round", "a reset at the boundary", "a handoff"] as const)(
  "a steer that joined the run is settled with the run's other input when a later tool round ends the run: %s",
  async (path) => {
    // Break 28I: the terminal paths above all end in the generation's answer or a failure; the
    // post-tools boundary's own endings (a terminating round, a queued reset) settling only the
    // first listed input passed every named test. Draw 40d-C, 4: a handoff round settling only the
    // first listed input passed them all, so a handoff ends the run here too.
    const gate = gatedTool();
    const fin = gatedTool("fin");
    const { h, root } = await open(
      async (req) => {
        const rounds = req.messages.filter((m) => m.role === "assistant").length;
        if (rounds === 0)
          return fauxAssistantMessage([fauxToolCall("hold", {}, { id: "c1" })], { stopReason: "toolUse" });
        if (rounds === 1)
          return fauxAssistantMessage([fauxToolCall("fin", {}, { id: "c2" })], { stopReason: "toolUse" });
        return fauxAssistantMessage("after the reset");
      },
      {
        tools: [
          gate.tool,
          path === "a reset at the boundary"
            ? fin.tool
            : defineTool({
                name: "fin",
                description: "Finish the run",
                parameters: Type.Object({}),
                async execute() {
                  const control = path === "a handoff" ? { handoff: "start over" } : { terminate: true };
                  return { content: [{ type: "text", text: "finished" }], control };
                },
              }),
        ],
      },
    );
    const first = await root.submit({ type: "input", content: "go" });
    await gate.started.promise;
    const steer = await root.submit({ type: "input", content: "steer", whenBusy: "steer" });
    gate.release.resolve();
    if (path === "a reset at the boundary") {
      await fin.started.promise;
      expect(liveOf(h).run?.inputs).toEqual([first.id, steer.id]);
      await root.reset();
      fin.release.resolve();
      expect(await first.wait()).toMatchObject({ status: "unanswered", reason: "reset" });
      // Draw 39e: the steer's record is read once the conversation is idle, so a reset boundary
      // settling only the first listed input fails on this assertion rather than by a hang.
      await root.waitForIdle();
      expect(await steer.record()).toMatchObject({ status: "unanswered", reason: "reset" });
      expect(await steer.wait()).toMatchObject({ status: "unanswered", reason: "reset" });
    } else {
      // Both answered by the ending round's tool-calling answer (the steer joined the run).
      // Read once idle, so an ending that settled only the first input fails here, not by a hang.
      // Sweep 42b, 38: the first input's record too is read once idle, before its wait, so an
      // ending that settled no input at all fails on this assertion rather than by a hang.
      await root.waitForIdle();
      expect(await first.record()).toMatchObject({ status: "done" });
      const a = await first.wait();
      expect(a.status).toBe("done");
      expect(await steer.record()).toMatchObject({
        status: "done",
        answer: (a as { answer: number }).answer,
      });
    }
    await until(() => liveOf(h).run === undefined, { what: "the run ended" });
  },
);

test("a steer that joined the run stays in it across an onYield continuation: the last answer settles both inputs (draw 40d, 4)", async () => {
  // Draw 40d-C, 4: every named run ended at the answer after the steer joined; a continuation's
  // hand-over keeping only the run's first input (the steer dropped, left placed) passed them all.
  const gate = gatedTool();
  let yields = 0;
  const { h, root, faux } = await open(
    async (req) => {
      if (!req.messages.some((m) => m.role === "assistant"))
        return fauxAssistantMessage([fauxToolCall("hold", {}, { id: "c1" })], { stopReason: "toolUse" });
      return fauxAssistantMessage(`answer ${req.messages.length}`);
    },
    { tools: [gate.tool], hooks: { onYield: [() => (++yields === 1 ? "and once more" : undefined)] } },
  );
  const first = await root.submit({ type: "input", content: "go" });
  await gate.started.promise;
  const steer = await root.submit({ type: "input", content: "steer", whenBusy: "steer" });
  gate.release.resolve();
  const a = await first.wait();
  await root.waitForIdle();
  expect(faux.requests).toHaveLength(3);
  expect(a.status).toBe("done");
  expect(await steer.record()).toMatchObject({ status: "done", answer: (a as { answer: number }).answer });
  expect(liveOf(h).run).toBeUndefined();
});

test("steers placed at two successive post-tools boundaries all join the run, and its answer settles all three inputs", async () => {
  // Draw 34d: the tests above place steers at one boundary; a second boundary's hand-over keeping
  // only the first input and its own new steers (dropping the earlier steer) passed them all.
  const gate = gatedTool();
  const fin = gatedTool("fin");
  const { h, root } = await open(
    async (req) => {
      const rounds = req.messages.filter((m) => m.role === "assistant").length;
      if (rounds === 0)
        return fauxAssistantMessage([fauxToolCall("hold", {}, { id: "c1" })], { stopReason: "toolUse" });
      if (rounds === 1)
        return fauxAssistantMessage([fauxToolCall("fin", {}, { id: "c2" })], { stopReason: "toolUse" });
      return fauxAssistantMessage("answered all three");
    },
    { tools: [gate.tool, fin.tool] },
  );
  const first = await root.submit({ type: "input", content: "go" });
  await gate.started.promise;
  const steer1 = await root.submit({ type: "input", content: "steer one", whenBusy: "steer" });
  gate.release.resolve();
  await fin.started.promise;
  expect(liveOf(h).run?.inputs).toEqual([first.id, steer1.id]);
  const steer2 = await root.submit({ type: "input", content: "steer two", whenBusy: "steer" });
  fin.release.resolve();
  const a = await first.wait();
  expect(a.status).toBe("done");
  const answer = (a as { answer: number }).answer;
  await until(() => liveOf(h).run === undefined, { what: "the run ended" });
  // Read as records once the run is over (a wait on an input left placed would hang).
  expect(await steer1.record()).toMatchObject({ status: "done", answer });
  expect(await steer2.record()).toMatchObject({ status: "done", answer });
});

test("steeringMode is read at each post-tools boundary of one run: switched from one-at-a-time to all between two tool rounds, the second round places every waiting steer (draw 35e)", async () => {
  // Draw 35e: the mode was only ever switched between two final boundaries; a steeringMode read once
  // per run (at its first tool round) passed every test.
  const gate = gatedTool();
  const fin = gatedTool("fin");
  let settings: AgentSettings = { steeringMode: "one-at-a-time" };
  const { h, root, faux } = await open(
    async (req) => {
      const rounds = req.messages.filter((m) => m.role === "assistant").length;
      if (rounds === 0)
        return fauxAssistantMessage([fauxToolCall("hold", {}, { id: "c1" })], { stopReason: "toolUse" });
      if (rounds === 1)
        return fauxAssistantMessage([fauxToolCall("fin", {}, { id: "c2" })], { stopReason: "toolUse" });
      return fauxAssistantMessage("answered");
    },
    { tools: [gate.tool, fin.tool], settings: () => settings },
  );
  const first = await root.submit({ type: "input", content: "go" });
  await gate.started.promise;
  const a = await root.submit({ type: "input", content: "A", whenBusy: "steer" });
  const b = await root.submit({ type: "input", content: "B", whenBusy: "steer" });
  gate.release.resolve();
  await fin.started.promise;
  // The first post-tools boundary, one-at-a-time: A alone joined the run.
  expect(liveOf(h).run?.inputs).toEqual([first.id, a.id]);
  expect((await b.record()).status).toBe("queued");
  const c = await root.submit({ type: "input", content: "C", whenBusy: "steer" });
  settings = { steeringMode: "all" };
  fin.release.resolve();
  const answer = ((await first.wait()) as { answer: number }).answer;
  await until(() => liveOf(h).run === undefined, { what: "the run ended" });
  for (const s of [a, b, c]) expect(await s.record()).toMatchObject({ status: "done", answer });
  expect(kinds(await transcript(root))).toEqual([
    "pi.user",
    "pi.assistant",
    "pi.tool-result",
    "pi.user",
    "pi.assistant",
    "pi.tool-result",
    "pi.user",
    "pi.user",
    "pi.assistant",
  ]);
  expect(faux.requests).toHaveLength(3);
});

test("a boundary places the selected writes before the selected user items, even a write queued after them", async () => {
  const { root, hold, first } = await busyWithHeldAnswer({});
  const note = await root.submit({ type: "write", entry: { kind: "app.note", data: { n: 1 } } });
  const follow = await root.submit({ type: "input", content: "two" });
  const later = await root.submit({ type: "write", entry: { kind: "app.note", data: { n: 2 } } });
  hold.resolve();
  await first.wait();
  await follow.wait();
  expect((await note.wait()).status).toBe("done");
  expect((await later.wait()).status).toBe("done");
  const entries = await transcript(root);
  expect(kinds(entries)).toEqual([
    "pi.user",
    "pi.assistant",
    "app.note",
    "app.note",
    "pi.user",
    "pi.assistant",
  ]);
  // The writes among themselves in id order.
  expect(entries.filter((e) => e.kind === "app.note").map((e) => e.data)).toEqual([{ n: 1 }, { n: 2 }]);
});

test("the post-tools boundary places the writes before the steer too, even a write queued after it", async () => {
  const gate = gatedTool();
  const { root } = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "c1" })), {
    tools: [gate.tool],
  });
  const first = await root.submit({ type: "input", content: "go" });
  await gate.started.promise;
  const steer = await root.submit({ type: "input", content: "steer", whenBusy: "steer" });
  const note = await root.submit({ type: "write", entry: { kind: "app.note", data: { n: 1 } } });
  gate.release.resolve();
  await first.wait();
  expect((await steer.wait()).status).toBe("done");
  expect((await note.wait()).status).toBe("done");
  // One post-tools boundary placed both: the write first, then the steer, then the run goes on.
  expect(kinds(await transcript(root))).toEqual([
    "pi.user",
    "pi.assistant",
    "pi.tool-result",
    "app.note",
    "pi.user",
    "pi.assistant",
  ]);
});

test("a queued input's pi.user entry is stamped with the harness clock at placement, not at admission", async () => {
  let clock = 1_000;
  const hold = deferred();
  const { root } = await open(
    async (req, n) => {
      if (n === 1) await hold.promise;
      return echo(req, n);
    },
    { now: () => clock },
  );
  const first = await root.submit({ type: "input", content: "one" });
  const second = await root.submit({ type: "input", content: "two" });
  clock = 5_000;
  hold.resolve();
  await first.wait();
  await second.wait();
  const users = (await transcript(root)).filter((e) => e.kind === "pi.user");
  expect(users.map((e) => (messageOf(e) as { timestamp: number }).timestamp)).toEqual([1_000, 5_000]);
  // Each is one UserMessage, the one placed at a boundary as much as the one placed at admission
  // (break 30C: the boundary's entry carried the queue's bookkeeping beside the message).
  expect(users.map((e) => e.model)).toEqual([
    [{ role: "user", content: "one", timestamp: 1_000 }],
    [{ role: "user", content: "two", timestamp: 5_000 }],
  ]);
});

test("a steer's pi.user entry placed at the post-tools boundary is one UserMessage stamped with the harness clock at placement (draw 35d)", async () => {
  // Draw 35d: the test above places a follow-up at the final boundary; a post-tools placement
  // stamped with Date.now() passed it.
  let clock = 1_000;
  const gate = gatedTool();
  const { root } = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "c1" })), {
    tools: [gate.tool],
    now: () => clock,
  });
  const first = await root.submit({ type: "input", content: "go" });
  await gate.started.promise;
  clock = 3_000;
  const steer = await root.submit({ type: "input", content: "steer", whenBusy: "steer" });
  clock = 7_000;
  gate.release.resolve();
  await first.wait();
  expect((await steer.wait()).status).toBe("done");
  const users = (await transcript(root)).filter((e) => e.kind === "pi.user");
  expect(users.map((e) => e.model)).toEqual([
    [{ role: "user", content: "go", timestamp: 1_000 }],
    [{ role: "user", content: "steer", timestamp: 7_000 }],
  ]);
});

test("writes never start a generation: a write on an idle conversation is done at once and no run begins", async () => {
  const { h, root, faux } = await open(echo);
  const note = await root.submit({ type: "write", entry: { kind: "app.note", data: { n: 1 } } });
  expect((await note.record()).status).toBe("done");
  expect(liveOf(h).run).toBeUndefined();
  await root.waitForIdle();
  expect(faux.requests).toHaveLength(0);
  const entries = await transcript(root);
  expect(kinds(entries)).toEqual(["app.note"]);
  // Done with its entry (spec §6 table): the record names the entry the write appended.
  expect(await note.record()).toMatchObject({ status: "done", entry: entries[0]!.id });
  expect(await note.wait()).toEqual({ status: "done", entry: entries[0]!.id });
  // A write the model sees starts no run either (break 29B: only a display-only write was tried).
  const hint = { role: "user", content: "a hint", timestamp: 0 };
  const visible = await root.submit({ type: "write", entry: { kind: "app.hint", model: [hint] } });
  expect((await visible.record()).status).toBe("done");
  expect(liveOf(h).run).toBeUndefined();
  await root.waitForIdle();
  expect(faux.requests).toHaveLength(0);
  expect(await h.tasks({ kind: "pi.generation" })).toEqual([]);
  const withHint = await transcript(root);
  expect(kinds(withHint)).toEqual(["app.note", "app.hint"]);
  expect(await visible.wait()).toEqual({ status: "done", entry: withHint[1]!.id });

  // Queued while busy and selected alone at the run's final boundary: placed, and still no run.
  const busy = await busyWithHeldAnswer({});
  const queued = await busy.root.submit({ type: "write", entry: { kind: "app.note", data: { n: 2 } } });
  expect((await queued.record()).status).toBe("queued");
  busy.hold.resolve();
  await busy.first.wait();
  await busy.root.waitForIdle();
  expect(busy.faux.requests).toHaveLength(1);
  expect(liveOf(busy.h).run).toBeUndefined();
  expect(kinds(await transcript(busy.root))).toEqual(["pi.user", "pi.assistant", "app.note"]);
  expect((await queued.wait()).status).toBe("done");
});

test("writes never start a generation: on an idle conversation whose inbox holds a write a failed run left, a new write places both and no run begins", async () => {
  // Spec §6: an idle conversation with a non-empty inbox queues the new submission and runs a final
  // boundary in the same commit; writes never trigger generation by themselves. (Reading 23d: only
  // an empty inbox and a busy run's final boundary were tried.)
  const hold = deferred();
  const { h, root, faux } = await open(async (_req, n) => {
    if (n === 1) {
      await hold.promise;
      return fauxError("400 bad request");
    }
    return fauxAssistantMessage("never asked");
  });
  const failing = await root.submit({ type: "input", content: "one" });
  const left = await root.submit({ type: "write", entry: { kind: "app.note", data: { n: 1 } } });
  hold.resolve();
  expect((await failing.wait()).status).toBe("unanswered");
  // The failed run left the inbox alone: the write still waits, the conversation idle.
  expect((await left.record()).status).toBe("queued");
  expect(liveOf(h).run).toBeUndefined();
  const next = await root.submit({ type: "write", entry: { kind: "app.note", data: { n: 2 } } });
  expect([(await left.wait()).status, (await next.wait()).status]).toEqual(["done", "done"]);
  await root.waitForIdle();
  expect(liveOf(h).run).toBeUndefined();
  expect(inboxOf(h).items).toEqual([]);
  expect(faux.requests).toHaveLength(1);
  expect(kinds(await transcript(root)).slice(-2)).toEqual(["app.note", "app.note"]);
});

test.each([
  ["followUpMode", undefined],
  ["steeringMode", "steer"],
] as const)(
  "%s is read at each boundary: switched from one-at-a-time to all between two final boundaries, the second places every waiting item of its mode",
  async (mode, whenBusy) => {
    // steeringMode added by sample 22: only followUpMode was shown read anew at each boundary.
    const holds = [deferred(), deferred()];
    let settings: AgentSettings = { [mode]: "one-at-a-time" };
    const { root, faux } = await open(
      async (req, n) => {
        if (n <= 2) await holds[n - 1]!.promise;
        return echo(req, n);
      },
      { settings: () => settings },
    );
    const first = await root.submit({ type: "input", content: "one" });
    const queue = (content: string) =>
      root.submit({ type: "input", content, ...(whenBusy ? { whenBusy } : {}) });
    const [a, b, c] = [await queue("A"), await queue("B"), await queue("C")];
    holds[0]!.resolve();
    await first.wait();
    // The first boundary, one-at-a-time: A alone started the next run.
    await until(() => faux.requests.length === 2, { what: "A's run asking" });
    expect((await a.record()).status).toBe("placed");
    expect((await b.record()).status).toBe("queued");
    settings = { [mode]: "all" };
    holds[1]!.resolve();
    await a.wait();
    const [settledB, settledC] = [await b.wait(), await c.wait()];
    expect(kinds(await transcript(root))).toEqual([
      "pi.user",
      "pi.assistant",
      "pi.user",
      "pi.assistant",
      "pi.user",
      "pi.user",
      "pi.assistant",
    ]);
    expect((settledB as { answer: number }).answer).toBe((settledC as { answer: number }).answer);
    expect(faux.requests).toHaveLength(3);
    const asked = faux.requests[2]!.messages.filter((m) => m.role === "user").map((m) => textOf(m));
    expect(asked.slice(-2)).toEqual(["B", "C"]);
  },
);

test("a boundary removes the items it selects from anywhere in the inbox and keeps the rest in their order (spec §6: removed positionally)", async () => {
  const tool = gatedTool("hold");
  const answer = deferred();
  let n = 0;
  const { h, root, faux } = await open(
    async (req) => {
      n++;
      if (n === 1)
        return fauxAssistantMessage([fauxToolCall("hold", {}, { id: "c1" })], { stopReason: "toolUse" });
      if (n === 2) await answer.promise;
      return echo(req, n);
    },
    { tools: [tool.tool], settings: { steeringMode: "all" } },
  );
  const run = await root.submit({ type: "input", content: "go" });
  await tool.started.promise;
  const f1 = await root.submit({ type: "input", content: "f1" });
  const s1 = await root.submit({ type: "input", content: "s1", whenBusy: "steer" });
  const f2 = await root.submit({ type: "input", content: "f2" });
  const s2 = await root.submit({ type: "input", content: "s2", whenBusy: "steer" });
  expect(inboxOf(h).items.map((i) => i.id)).toEqual([f1.id, s1.id, f2.id, s2.id]);
  tool.release.resolve();
  // The post-tools boundary took both steers (steeringMode all) from between the follow-ups.
  await until(() => faux.requests.length === 2, { what: "the continuation's request" });
  expect(inboxOf(h).items.map((i) => [i.id, i.mode])).toEqual([
    [f1.id, "followUp"],
    [f2.id, "followUp"],
  ]);
  answer.resolve();
  expect((await run.wait()).status).toBe("done");
  expect((await f2.wait()).status).toBe("done");
});
test("the items a boundary removes from between retained ones are removed so in the stored inbox too: a store reopened after it reads the retained items in their order (draw 35c)", async () => {
  const tool = gatedTool("hold");
  const answer = deferred();
  let n = 0;
  const { h, root, faux, store } = await open(
    async (req) => {
      n++;
      if (n === 1)
        return fauxAssistantMessage([fauxToolCall("hold", {}, { id: "c1" })], { stopReason: "toolUse" });
      if (n === 2) await answer.promise;
      return echo(req, n);
    },
    { tools: [tool.tool], settings: { steeringMode: "all" } },
  );
  const run = await root.submit({ type: "input", content: "go" });
  await tool.started.promise;
  const f1 = await root.submit({ type: "input", content: "f1" });
  const s1 = await root.submit({ type: "input", content: "s1", whenBusy: "steer" });
  const f2 = await root.submit({ type: "input", content: "f2" });
  const s2 = await root.submit({ type: "input", content: "s2", whenBusy: "steer" });
  const f3 = await root.submit({ type: "input", content: "f3" });
  expect(inboxOf(h).items.map((i) => i.id)).toEqual([f1.id, s1.id, f2.id, s2.id, f3.id]);
  tool.release.resolve();
  // One commit takes both steers out (two removals, each below a retained item).
  await until(() => faux.requests.length === 2, { what: "the continuation's request" });
  const retained = [
    [f1.id, "followUp"],
    [f2.id, "followUp"],
    [f3.id, "followUp"],
  ];
  expect(inboxOf(h).items.map((i) => [i.id, i.mode])).toEqual(retained);
  const other = await AgentHarness.open(await memoryStore(store.image()), {
    models: faux.models,
    defaultModel: faux.ref,
    paused: true,
  });
  const stored = (await other.doc(root.id, DOC.inbox)) as { items: { id: number; mode: string }[] };
  expect(stored.items.map((i) => [i.id, i.mode])).toEqual(retained);
  await other.close();
  answer.resolve();
  expect((await run.wait()).status).toBe("done");
  expect((await f3.wait()).status).toBe("done");
});
test("a boundary removes its selected items positionally from an inbox of more than ten items: steers at positions past nine leave, the follow-ups around them stay in their order (draw 41b, 5)", async () => {
  // Draw 41b C: every named boundary worked on an inbox of at most five items; removal positions
  // ordered as text ("10" before "2", so a removal shifted the next one) passed them all.
  const tool = gatedTool("hold");
  const answer = deferred();
  let n = 0;
  const { h, root, faux } = await open(
    async (req) => {
      n++;
      if (n === 1)
        return fauxAssistantMessage([fauxToolCall("hold", {}, { id: "c1" })], { stopReason: "toolUse" });
      if (n === 2) await answer.promise;
      return echo(req, n);
    },
    { tools: [tool.tool], settings: { steeringMode: "all" } },
  );
  const run = await root.submit({ type: "input", content: "go" });
  await tool.started.promise;
  // Follow-ups at positions 0, 1, 3..9, 11; steers at 2 and 10.
  const queued: { id: number; steer: boolean }[] = [];
  for (let i = 0; i < 12; i++) {
    const steer = i === 2 || i === 10;
    const s = await root.submit({
      type: "input",
      content: `q${i}`,
      ...(steer ? { whenBusy: "steer" as const } : {}),
    });
    queued.push({ id: s.id, steer });
  }
  expect(inboxOf(h).items.map((i) => i.id)).toEqual(queued.map((q) => q.id));
  tool.release.resolve();
  await until(() => faux.requests.length === 2, { what: "the continuation's request" });
  expect(inboxOf(h).items.map((i) => [i.id, i.mode])).toEqual(
    queued.filter((q) => !q.steer).map((q) => [q.id, "followUp"]),
  );
  // Both steers were placed into the run, nothing else.
  const users = (await transcript(root)).filter((e) => e.kind === "pi.user").map((e) => textOf(messageOf(e)));
  expect(users).toEqual(["go", "q2", "q10"]);
  answer.resolve();
  expect((await run.wait()).status).toBe("done");
});
