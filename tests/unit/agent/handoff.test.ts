/**
 * Handoff (spec §7.3, §8.5): a tool result's `control: { handoff }` ends the run at the round's
 * closing commit, after a `pi.reset` entry (head itself) whose user message is the handoff text, as
 * `Conversation.reset(handoff)` writes; the inputs are answered with the tool-calling answer. The
 * next input's request starts from the handoff text.
 */
import { fauxAssistantMessage, fauxToolCall, type ToolCall } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { describe, expect, test } from "vitest";
import { textResult } from "../../../worker/agent/tools/contract.ts";
import { defineTool } from "../../../worker/index.ts";
import { deferred, type FauxRequest, until } from "../../../worker/testing.ts";
import { echo, messagesOf, open, textOf, transcript } from "./fixtures.ts";

/** A tool that hands off with the `text` argument, or answers plainly without one. */
const handoffTool = defineTool({
  name: "hand_off",
  description: "Start the context over from a summary",
  parameters: Type.Object({ text: Type.Optional(Type.String()) }),
  async execute(args) {
    const result = textResult(args.text === undefined ? "nothing to hand off" : "handed off");
    return args.text === undefined ? result : { ...result, control: { handoff: args.text } };
  },
});

/** Calls `calls` when the last message is the user's "start"; echoes otherwise. */
const callsOnStart =
  (...calls: ToolCall[]) =>
  (req: FauxRequest) => {
    const last = req.messages.at(-1)!;
    if (last.role === "user" && textOf(last) === "start")
      return fauxAssistantMessage(calls, { stopReason: "toolUse" });
    return echo(req, 0);
  };

const contextOf = (request: FauxRequest) => request.messages.map((m) => `${m.role}:${textOf(m)}`);

describe("handoff", () => {
  test("a tool's handoff ends the run with the tool-calling answer; the next input starts from the handoff text", async () => {
    const { h, root, faux } = await open(
      callsOnStart(fauxToolCall("hand_off", { text: "Summary: the user wants a haiku" }, { id: "call-1" })),
      { tools: [handoffTool] },
    );
    // The tools phase commits once (spec §8.5): the reset, the input's settlement, pi.live without
    // run and tools. (Reading 23d: each was read after the run.)
    const closing: unknown[] = [];
    const stop = h.subscribe((change) => {
      if (!change.entries.some((e) => e.kind === "pi.reset")) return;
      closing.push({
        settled: change.submissions.map((s) => s.status),
        live: change.docs.find((d) => d.name === "pi.live" && d.conversationId === root.id)?.value,
      });
    });
    const settled = await (await root.submit({ type: "input", content: "start" })).wait();
    stop();
    expect(closing).toEqual([{ settled: ["done"], live: {} }]);
    // One request only: the round's results never went back to the model.
    expect(faux.requests).toHaveLength(1);
    const entries = await transcript(root);
    expect(entries.map((e) => e.kind)).toEqual(["pi.user", "pi.assistant", "pi.tool-result", "pi.reset"]);
    expect(settled).toEqual({ status: "done", answer: entries[1]!.id, entry: entries[0]!.id });
    const reset = entries[3]!;
    expect(reset.head).toBe(reset.id);
    expect(messagesOf(reset).map((m) => `${m.role}:${textOf(m)}`)).toEqual([
      "user:Summary: the user wants a haiku",
    ]);
    expect(root.busy).toBe(false);
    // Written by the generation's tools phase (spec §8.1): the task that wrote the tool-calling
    // answer, not the tool task; and exactly the entry reset(handoff) writes (spec §7.3), told
    // apart only by id and timestamp. (Reading 23d: neither was asserted.)
    expect(reset.byTaskId).toBeDefined();
    expect(reset.byTaskId).toBe(entries[1]!.byTaskId);
    expect(reset.byTaskId).not.toBe(entries[2]!.byTaskId);
    // That generation completes with the tool-calling answer's entry, not the reset it wrote after it
    // (spec §8.5; break 30M: the last entry the closing commit wrote passed).
    const [generation] = await h.tasks({ kind: "pi.generation" });
    expect(generation!.id).toBe(reset.byTaskId);
    expect(generation!.state).toEqual({
      status: "terminal",
      outcome: { status: "completed", result: { entryId: entries[1]!.id } },
    });
    await (await root.reset("Summary: the user wants a haiku")).wait();
    const byReset = (await transcript(root)).at(-1)!;
    const shape = (e: typeof reset) => ({
      kind: e.kind,
      head: e.head === e.id ? "self" : e.head,
      data: e.data,
      edits: e.edits,
      model: messagesOf(e).map((m) => ({ ...m, timestamp: 0 })),
    });
    expect(byReset.kind).toBe("pi.reset");
    expect(shape(reset)).toEqual(shape(byReset));

    await (await root.submit({ type: "input", content: "go on" })).wait();
    expect(contextOf(faux.requests[1]!)).toEqual(["user:Summary: the user wants a haiku", "user:go on"]);
  });

  /** A conversation whose first answer calls hand_off, a tool that hands off once `gate` opens. */
  async function openGatedHandoff() {
    const gate = deferred();
    const slowHandoff = defineTool({
      name: "hand_off",
      description: "Hand off once released",
      parameters: Type.Object({ text: Type.String() }),
      async execute(args) {
        await gate.promise;
        return { ...textResult("handed off"), control: { handoff: args.text } };
      },
    });
    const opened = await open(
      callsOnStart(fauxToolCall("hand_off", { text: "Summary: a haiku" }, { id: "call-1" })),
      { tools: [slowHandoff] },
    );
    return { ...opened, gate };
  }

  test("an empty handoff from a tool is a handoff too: the run ends with a reset whose one user message is empty text (draw 34B)", async () => {
    // Draw 34B: every named handoff was non-empty text; a round that took an empty handoff for none
    // (the run going on, no reset) passed them.
    const { root, faux } = await open(
      callsOnStart(fauxToolCall("hand_off", { text: "" }, { id: "call-1" })),
      {
        tools: [handoffTool],
      },
    );
    const settled = await (await root.submit({ type: "input", content: "start" })).wait();
    expect(settled.status).toBe("done");
    expect(faux.requests).toHaveLength(1);
    const entries = await transcript(root);
    expect(entries.map((e) => e.kind)).toEqual(["pi.user", "pi.assistant", "pi.tool-result", "pi.reset"]);
    const reset = entries.at(-1)!;
    expect(reset.head).toBe(reset.id);
    expect(reset.model).toEqual([{ role: "user", content: "", timestamp: expect.any(Number) }]);
  });

  test("a handoff round uses final behaviour: a follow-up queued during it is placed after the reset and starts the next run from the handoff text", async () => {
    const { root, faux, gate } = await openGatedHandoff();
    const first = await root.submit({ type: "input", content: "start" });
    await until(() => faux.requests.length === 1, { what: "the round running" });
    const follow = await root.submit({ type: "input", content: "then this" });
    expect((await follow.record()).status).toBe("queued");
    gate.resolve();
    expect((await first.wait()).status).toBe("done");
    // The commit that settles the first input applies the final boundary: the follow-up has left
    // the inbox by then (draw 38C, 7: a handoff round ending the run bare failed here only by a timeout).
    expect((await follow.record()).status).not.toBe("queued");
    // No further submission: the final boundary of the handoff round placed it, after the reset.
    expect((await follow.wait()).status).toBe("done");
    expect((await transcript(root)).map((e) => e.kind)).toEqual([
      "pi.user",
      "pi.assistant",
      "pi.tool-result",
      "pi.reset",
      "pi.user",
      "pi.assistant",
    ]);
    expect(faux.requests).toHaveLength(2);
    expect(contextOf(faux.requests[1]!)).toEqual(["user:Summary: a haiku", "user:then this"]);
  });

  test("a handoff round uses final behaviour with a reset queued during it: the input is done with the tool-calling answer, the handoff's reset is placed, then the queued one (draw 33C)", async () => {
    // Draw 33C: only a terminating round had a reset queued during it (inbox-heads), so a closing
    // commit that took the ordinary post-tools path for a handoff round when a reset was queued (the
    // input left unanswered (reset), the handoff text never written) passed every handoff test.
    const { root, faux, gate } = await openGatedHandoff();
    const first = await root.submit({ type: "input", content: "start" });
    await until(() => faux.requests.length === 1, { what: "the round running" });
    const reset = await root.reset("over again");
    expect((await reset.record()).status).toBe("queued");
    gate.resolve();
    const answered = await first.wait();
    const placed = await reset.wait();
    const entries = await transcript(root);
    expect(entries.map((e) => e.kind)).toEqual([
      "pi.user",
      "pi.assistant",
      "pi.tool-result",
      "pi.reset",
      "pi.reset",
    ]);
    expect(answered).toEqual({ status: "done", entry: entries[0]!.id, answer: entries[1]!.id });
    expect(messagesOf(entries[3]!).map(textOf)).toEqual(["Summary: a haiku"]);
    expect(placed).toEqual({ status: "done", entry: entries[4]!.id });
    await root.waitForIdle();
    expect(faux.requests).toHaveLength(1);
    // The next input starts from the queued reset's text, the newer head.
    expect((await (await root.submit({ type: "input", content: "next" })).wait()).status).toBe("done");
    expect(contextOf(faux.requests[1]!)).toEqual(["user:over again", "user:next"]);
  });

  test("the last handoff of a round wins, and one handoff ends a round whose other results do not terminate", async () => {
    const { root, faux } = await open(
      callsOnStart(
        fauxToolCall("hand_off", { text: "first summary" }, { id: "call-1" }),
        fauxToolCall("hand_off", {}, { id: "call-2" }),
        fauxToolCall("hand_off", { text: "second summary" }, { id: "call-3" }),
      ),
      { tools: [handoffTool] },
    );
    expect((await (await root.submit({ type: "input", content: "start" })).wait()).status).toBe("done");
    expect(faux.requests).toHaveLength(1);
    const resets = (await transcript(root)).filter((e) => e.kind === "pi.reset");
    expect(resets.map((e) => messagesOf(e).map(textOf))).toEqual([["second summary"]]);
    await (await root.submit({ type: "input", content: "next" })).wait();
    expect(contextOf(faux.requests[1]!)).toEqual(["user:second summary", "user:next"]);
  });

  test("a round without a handoff goes back to the model as before", async () => {
    const { root, faux } = await open(callsOnStart(fauxToolCall("hand_off", {}, { id: "call-1" })), {
      tools: [handoffTool],
    });
    expect((await (await root.submit({ type: "input", content: "start" })).wait()).status).toBe("done");
    expect(faux.requests).toHaveLength(2);
    expect((await transcript(root)).some((e) => e.kind === "pi.reset")).toBe(false);
  });
});
