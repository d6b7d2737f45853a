/**
 * deriveContext: the messages a request carries, derived from the transcript (synthetic results
 * for unanswered calls, edits, misplaced or orphan results, failed answers left out).
 */
import { type AssistantMessage, fauxAssistantMessage, fauxToolCall } from "@mariozechner/pi-ai";
import { describe, expect, test } from "vitest";
import { contextView, UNANSWERED_TOOL_CALL } from "../../../worker/agent/conversation/context.ts";
import { deriveContext, type EntryRecord } from "../../../worker/index.ts";
import { textOf } from "./fixtures.ts";

describe("deriveContext", () => {
  let nextId = 0;
  const entry = (kind: string, message: object): EntryRecord => ({
    id: ++nextId,
    conversationId: 1,
    kind,
    model: [message] as never,
  });
  const user = (text: string) => entry("pi.user", { role: "user", content: text, timestamp: 1 });
  const assistant = (
    content: string | AssistantMessage["content"],
    stopReason: AssistantMessage["stopReason"] = "stop",
  ) => entry("pi.assistant", { ...fauxAssistantMessage(content, { stopReason, timestamp: 1 }) });
  const result = (callId: string, text: string) =>
    entry("pi.tool-result", {
      role: "toolResult",
      toolCallId: callId,
      toolName: "t",
      content: [{ type: "text", text }],
      isError: false,
      timestamp: 1,
    });
  const call = (id: string) => fauxToolCall("t", {}, { id });

  const system = (message: object) =>
    entry("pi.system", { role: "system", content: "", timestamp: 1, sections: {}, ...message });

  test("every system entry of the active range applies in order: sections patch by name (a string replaces in place or adds, null removes), toolsRemoved before toolsAdded", () => {
    const derived = deriveContext([
      system({ sections: { base: "You help.", style: "Be terse." }, toolsAdded: ["read", "write"] }),
      user("q"),
      system({
        sections: { style: null, extra: "Cite files.", base: "You help, briefly." },
        toolsRemoved: ["write", "read"],
        toolsAdded: ["read"],
      }),
      user("again"),
      // A message that only adds a tool keeps the tools earlier messages left (break 27I: a tool
      // change that replaced the whole list passed, the second message restating it).
      system({ toolsAdded: ["grep"] }),
    ]);
    expect(derived.sections).toEqual({ base: "You help, briefly.", extra: "Cite files." });
    expect(derived.tools).toEqual(["read", "grep"]);
    expect(derived.systemPrompt).toBe("You help, briefly.\n\nCite files.");
    expect(derived.messages.map((m) => m.role)).toEqual(["user", "user"]);

    // Of the active range only: a system entry before the newest head marker's head sets nothing; and
    // every record of an entry applies, in order (draw 34b-D: the whole transcript's system entries
    // replayed, and an entry's first record only, each passed the case above).
    const stale = system({ sections: { stale: "Old." }, toolsAdded: ["old"] });
    const fresh = user("fresh");
    const two: EntryRecord = {
      id: ++nextId,
      conversationId: 1,
      kind: "pi.system",
      model: [
        {
          role: "system",
          content: "",
          timestamp: 1,
          sections: { base: "New." },
          toolsAdded: ["read", "write"],
        },
        { role: "system", content: "", timestamp: 1, sections: { extra: "More." }, toolsRemoved: ["read"] },
      ] as never,
    };
    const marker: EntryRecord = { ...user("reset"), head: fresh.id };
    const ranged = deriveContext([stale, fresh, two, marker]);
    expect(ranged.sections).toEqual({ base: "New.", extra: "More." });
    expect(ranged.tools).toEqual(["write"]);
    expect(ranged.systemPrompt).toBe("New.\n\nMore.");
  });

  test("replay order: a section removed with null and added again later goes to the end of the map; a tool removed and added in one message takes the new position (break 30F)", () => {
    // Spec §7.4: "null removes it, and a later re-addition appends it to the ordered section map";
    // "within one message, tool removals happen before additions, so a same-name replacement gets
    // the new declaration and position". Break 30F: a removal that left its key behind, and a
    // removal skipped for a name the same message adds, passed the named test (it re-adds nothing
    // it removed, and its same-name tool was the only one left).
    const derived = deriveContext([
      system({
        sections: { base: "You help.", style: "Be terse.", cwd: "In /w." },
        toolsAdded: ["read", "write", "grep"],
      }),
      user("q"),
      system({ sections: { style: null }, toolsRemoved: ["read"], toolsAdded: ["read"] }),
      user("again"),
      system({ sections: { style: "Be kind." } }),
    ]);
    expect(Object.keys(derived.sections)).toEqual(["base", "cwd", "style"]);
    expect(derived.systemPrompt).toBe("You help.\n\nIn /w.\n\nBe kind.");
    expect(derived.tools).toEqual(["write", "grep", "read"]);
  });

  test("replay: an empty-string section is a section (only null removes: a later text replaces it in place); a tool added again while offered is offered once (draw 36b)", () => {
    // Spec §2: "a string adds or replaces a section, while null removes it". Draw 36b-A: a replay
    // that dropped a falsy section ("" taken as null) and one that pushed an offered tool again
    // passed every named test (none writes an empty section or re-adds a tool it did not remove).
    const derived = deriveContext([
      system({ sections: { base: "You help.", notes: "", cwd: "In /w." }, toolsAdded: ["read", "write"] }),
      user("q"),
      system({ sections: { notes: "Keep notes." }, toolsAdded: ["read", "grep"] }),
    ]);
    expect(Object.keys(derived.sections)).toEqual(["base", "notes", "cwd"]);
    expect(derived.systemPrompt).toBe("You help.\n\nKeep notes.\n\nIn /w.");
    expect(derived.tools).toEqual(["read", "write", "grep"]);
    // An empty section stays in the map as given; it adds no text to the prompt.
    const empty = deriveContext([system({ sections: { base: "You help.", notes: "" } })]);
    expect(empty.sections).toEqual({ base: "You help.", notes: "" });
    expect(empty.systemPrompt).toBe("You help.");
  });

  test("an edit of a system entry applies as to any entry: its replacement's sections and tools replay in the entry's place, an omitted one sets nothing (draw 41c)", () => {
    // Spec §2.1 rules 4 and 6: the newest edit per target wins, whatever the target. Draw 41cA: a
    // replay that took a system entry's own record over its replace edit passed every test (each
    // edit targeted a user or assistant entry; head rebaselines only omit system entries).
    const first = system({
      sections: { base: "You help.", style: "Be terse." },
      toolsAdded: ["read", "write"],
    });
    const second = system({ sections: { extra: "Cite files." }, toolsAdded: ["grep"] });
    const edit = (edits: NonNullable<EntryRecord["edits"]>): EntryRecord => {
      const { model: _model, ...base } = entry("app.edit", {});
      return { ...base, edits };
    };
    const replacement = [
      {
        role: "system",
        content: "",
        timestamp: 1,
        sections: { base: "You help, briefly." },
        toolsAdded: ["read"],
      },
    ];
    const q = user("q");
    const derived = deriveContext([
      first,
      q,
      second,
      edit([{ target: first.id, action: "replace", messages: replacement as never }]),
    ]);
    expect(derived.sections).toEqual({ base: "You help, briefly.", extra: "Cite files." });
    expect(derived.tools).toEqual(["read", "grep"]);
    expect(derived.systemPrompt).toBe("You help, briefly.\n\nCite files.");
    const view = contextView([first, q, second, edit([{ target: second.id, action: "omit" }])]);
    expect(view.sections).toEqual({ base: "You help.", style: "Be terse." });
    expect(view.tools).toEqual(["read", "write"]);
  });

  test("model-less entries contribute no message", () => {
    const note: EntryRecord = { id: ++nextId, conversationId: 1, kind: "app.note", data: "for the UI" };
    expect(deriveContext([user("q"), note, assistant("a")]).messages.map((m) => m.role)).toEqual([
      "user",
      "assistant",
    ]);
  });

  test("a tool call without a result gets a synthetic error result", () => {
    const { messages } = deriveContext([
      user("q"),
      assistant([call("c1"), call("c2")], "toolUse"),
      result("c1", "r1"),
      user("next"),
    ]);
    expect(messages.map((m) => [m.role, m.role === "toolResult" ? m.toolCallId : textOf(m)])).toEqual([
      ["user", "q"],
      ["assistant", "call:tcall:t"],
      ["toolResult", "c1"],
      ["toolResult", "c2"],
      ["user", "next"],
    ]);
    expect(messages[3]).toMatchObject({ role: "toolResult", toolCallId: "c2", toolName: "t", isError: true });
    expect(messages[2]).toMatchObject({ isError: false });
    // The first call unanswered, the second answered: a result answers its own call only, so the
    // first gets the synthetic error and the second its result.
    const second = deriveContext([
      user("q"),
      assistant([call("c5"), call("c6")], "toolUse"),
      result("c6", "r6"),
    ]).messages;
    expect(second.slice(2)).toMatchObject([
      { role: "toolResult", toolCallId: "c5", isError: true },
      { role: "toolResult", toolCallId: "c6", isError: false, content: [{ type: "text", text: "r6" }] },
    ]);
    // At the tail (an interrupted run, a fork cut after the call), with nothing after it.
    const tail = deriveContext([user("q"), assistant([call("c3")], "toolUse")]).messages;
    expect(tail.map((m) => m.role)).toEqual(["user", "assistant", "toolResult"]);
    expect(tail[2]).toMatchObject({ toolCallId: "c3", isError: true });
    // A result found before its call precedes no call of its own: dropped, and the call synthesized.
    const early = deriveContext([
      user("q"),
      result("c4", "too early"),
      assistant([call("c4")], "toolUse"),
      user("next"),
    ]).messages;
    expect(early.map((m) => [m.role, m.role === "toolResult" ? m.isError : textOf(m)])).toEqual([
      ["user", "q"],
      ["assistant", "call:t"],
      ["toolResult", true],
      ["user", "next"],
    ]);
  });

  test("edits: the newest edit per target within the active range omits or replaces its messages; the raw entries stay", () => {
    const first = user("first");
    const second = user("second");
    const answer = assistant("answer");
    const edit = (edits: NonNullable<EntryRecord["edits"]>): EntryRecord => {
      const { model: _model, ...base } = entry("app.edit", {});
      return { ...base, edits };
    };
    const texts = (entries: EntryRecord[]) => deriveContext(entries).messages.map(textOf);
    expect(texts([first, second, answer, edit([{ target: first.id, action: "omit" }])])).toEqual([
      "second",
      "answer",
    ]);
    const replacement = [{ role: "user", content: "second, shortened", timestamp: 1 }];
    expect(
      texts([
        first,
        second,
        answer,
        edit([{ target: second.id, action: "omit" }]),
        edit([{ target: second.id, action: "replace", messages: replacement as never }]),
      ]),
    ).toEqual(["first", "second, shortened", "answer"]);
    // The raw entries stay: the view still carries the omitted and the replaced entry, unchanged, and
    // only their contributions change (break 27E: a view dropping omitted entries passed).
    const omitFirst = edit([{ target: first.id, action: "omit" }]);
    const replaceSecond = edit([{ target: second.id, action: "replace", messages: replacement as never }]);
    const raw = structuredClone([first, second, answer]);
    const view = contextView([first, second, answer, omitFirst, replaceSecond]);
    expect(view.entries).toEqual([first, second, answer, omitFirst, replaceSecond]);
    expect(view.contributions.slice(0, 2)).toEqual([[], replacement]);
    expect([first, second, answer]).toEqual(raw);
    // The newest wins whatever the actions: an omit after a replace omits, a second replace wins.
    const later = [{ role: "user", content: "second, again", timestamp: 1 }];
    expect(
      texts([
        first,
        second,
        answer,
        edit([{ target: second.id, action: "replace", messages: replacement as never }]),
        edit([{ target: second.id, action: "omit" }]),
      ]),
    ).toEqual(["first", "answer"]);
    expect(
      texts([
        first,
        second,
        answer,
        edit([{ target: second.id, action: "replace", messages: replacement as never }]),
        edit([{ target: second.id, action: "replace", messages: later as never }]),
      ]),
    ).toEqual(["first", "second, again", "answer"]);
    // Within the active range only (spec §2.1, rules 3-4): after a head at `second`, `first` and its
    // edits are out of the range; the omit of `second`, appended after it, still applies, and a newer
    // replace of it wins over that omit.
    const marker = (head: number): EntryRecord => {
      const { model: _model, ...base } = entry("app.reset", {});
      return { ...base, head };
    };
    const omitted = [
      first,
      second,
      edit([{ target: first.id, action: "replace", messages: replacement as never }]),
      edit([{ target: second.id, action: "omit" }]),
    ];
    expect(texts([...omitted, marker(second.id)])).toEqual([]);
    const again = [{ role: "user", content: "second v2", timestamp: 1 }];
    expect(
      texts([
        ...omitted,
        marker(second.id),
        edit([{ target: second.id, action: "replace", messages: again as never }]),
      ]),
    ).toEqual(["second v2"]);
  });

  test("a replace with no messages contributes none: the target is left out as an omit leaves it, the newer edit winning over an older full replace (sweep 42b, 9)", () => {
    // Sweep 42b, 9: every named edit test replaced with at least one message; a replace whose empty
    // list was read as no edit (the target's own messages kept) passed them all.
    const first = user("first");
    const second = user("second");
    const answer = assistant("answer");
    const edit = (edits: NonNullable<EntryRecord["edits"]>): EntryRecord => {
      const { model: _model, ...base } = entry("app.edit", {});
      return { ...base, edits };
    };
    const texts = (entries: EntryRecord[]) => deriveContext(entries).messages.map(textOf);
    const emptied = edit([{ target: first.id, action: "replace", messages: [] }]);
    expect(texts([first, second, answer, emptied])).toEqual(["second", "answer"]);
    const unedited = contextView([first, second, answer]).contributions;
    expect(contextView([first, second, answer, emptied]).contributions.slice(0, 2)).toEqual([
      [],
      unedited[1],
    ]);
    const replacement = [{ role: "user", content: "second, shortened", timestamp: 1 }];
    expect(
      texts([
        first,
        second,
        answer,
        edit([{ target: second.id, action: "replace", messages: replacement as never }]),
        edit([{ target: second.id, action: "replace", messages: [] }]),
      ]),
    ).toEqual(["first", "answer"]);
  });

  test("with a head, the context is that newest marker, then the range's entries that carry no head: an older marker inside the range is left out", () => {
    const marked = (text: string, head: (self: number) => number): EntryRecord => {
      const e = user(text);
      return { ...e, head: head(e.id) };
    };
    const first = user("first");
    const answer = assistant("answer");
    const reset = marked("reset", (self) => self);
    const after = user("after");
    // The newest marker reaches back past the older one: its range holds that marker, which stays out.
    const summary = marked("summary", () => answer.id);
    const tail = assistant("tail");
    const { messages } = deriveContext([first, answer, reset, after, summary, tail]);
    expect(messages.map(textOf)).toEqual(["summary", "answer", "after", "tail"]);
    // Without a head, the whole range.
    expect(deriveContext([first, answer, after]).messages.map(textOf)).toEqual(["first", "answer", "after"]);
  });

  test("edits carried by an older marker inside the range apply, and the newest marker's own edits are ordered by its position, not first", () => {
    // Spec §2.1 steps 3-5: the scan runs over every visible entry from the newest marker's head
    // through the tail, older markers included; their edits count (step 4, and §8.7 "including
    // edits carried by older in-range markers"), though the markers themselves are not context
    // entries (step 5). Found contrary in session 22: only the newest marker was kept, with its
    // edits taken first.
    const marked = (text: string, head: number, edits?: EntryRecord["edits"]): EntryRecord => {
      const e = user(text);
      return { ...e, head, ...(edits ? { edits } : {}) };
    };
    const edit = (edits: NonNullable<EntryRecord["edits"]>): EntryRecord => {
      const { model: _model, ...base } = entry("app.edit", {});
      return { ...base, edits };
    };
    const first = user("first");
    const answer = assistant("answer");
    const secret = user("secret");
    const reply = assistant("reply");
    // An older marker (head at `answer`) that omits `secret`; then a newer one whose head is `secret`.
    const older = marked("older summary", answer.id, [{ target: secret.id, action: "omit" }]);
    const after = user("after");
    const newest = marked("newest summary", secret.id);
    const { messages } = deriveContext([first, answer, secret, reply, older, after, newest]);
    expect(messages.map(textOf)).toEqual(["newest summary", "reply", "after"]);
    // The newest marker's edit is newer than an edit entry before it: it wins, though the marker
    // leads the context entries.
    const one = user("one");
    const two = assistant("two");
    const byEntry = [{ role: "user", content: "by the edit entry", timestamp: 1 }];
    const byMarker = [{ role: "user", content: "by the marker", timestamp: 1 }];
    const edited = edit([{ target: one.id, action: "replace", messages: byEntry as never }]);
    const head = marked("handoff", one.id, [
      { target: one.id, action: "replace", messages: byMarker as never },
    ]);
    expect(deriveContext([one, two, edited, head]).messages.map(textOf)).toEqual([
      "handoff",
      "by the marker",
      "two",
    ]);
  });

  test("a tool result whose call is nowhere in the context is dropped", () => {
    const { messages } = deriveContext([user("q"), result("ghost", "orphaned"), assistant("a")]);
    expect(messages.map((m) => m.role)).toEqual(["user", "assistant"]);
    // Inside a tool round too, among its call's results (draw 32b: unmatched results of a round kept
    // after its answers passed the case above, whose orphan precedes every assistant).
    const inRound = deriveContext([
      user("q"),
      assistant([call("c1")], "toolUse"),
      result("ghost", "orphaned"),
      result("c1", "r1"),
      assistant("a"),
    ]).messages;
    expect(inRound.map((m) => (m.role === "toolResult" ? `result:${m.toolCallId}` : m.role))).toEqual([
      "user",
      "assistant",
      "result:c1",
      "assistant",
    ]);
    // A second result for a call already answered is an orphan too (draw 36dA: every matching result
    // kept passed the cases above, each call answered once): the first answers it, the second goes.
    const twice = deriveContext([
      user("q"),
      assistant([call("c1"), call("c2")], "toolUse"),
      result("c1", "r1"),
      result("c1", "again"),
      result("c2", "r2"),
      assistant("a"),
    ]).messages;
    expect(
      twice.map((m) => (m.role === "toolResult" ? `result:${m.toolCallId}:${textOf(m)}` : m.role)),
    ).toEqual(["user", "assistant", "result:c1:r1", "result:c2:r2", "assistant"]);
  });

  test("a tool result that appears after a later user message is moved right after its call", () => {
    const { messages } = deriveContext([
      user("q"),
      assistant([call("c1")], "toolUse"),
      user("steer"),
      result("c1", "r1"),
      assistant("answer"),
    ]);
    expect(
      messages.map((m) => (m.role === "toolResult" ? `result:${m.toolCallId}` : `${m.role}:${textOf(m)}`)),
    ).toEqual(["user:q", "assistant:call:t", "result:c1", "user:steer", "assistant:answer"]);
  });

  test("an assistant's results, found before the next assistant, move right after it in call order, ahead of a user message between", () => {
    const { messages } = deriveContext([
      user("q"),
      assistant([call("c1"), call("c2"), call("c3")], "toolUse"),
      result("c3", "r3"),
      user("steer"),
      result("c2", "r2"),
      result("c1", "r1"),
      assistant("answer"),
    ]);
    expect(
      messages.map((m) => (m.role === "toolResult" ? `result:${textOf(m)}` : `${m.role}:${textOf(m)}`)),
    ).toEqual([
      "user:q",
      "assistant:call:tcall:tcall:t",
      "result:r1",
      "result:r2",
      "result:r3",
      "user:steer",
      "assistant:answer",
    ]);
  });

  test("two assistants that reuse a call id each get their own result, in call order", () => {
    // Break 31A: every named case had distinct call ids, so results consumed by id (not by position)
    // passed: the second assistant's call c1 then got a synthetic error and its own result was dropped.
    const { messages } = deriveContext([
      user("q"),
      assistant([call("c1"), call("c2")], "toolUse"),
      result("c2", "a2"),
      result("c1", "a1"),
      assistant([call("c1")], "toolUse"),
      result("c1", "b1"),
      assistant("answer"),
    ]);
    expect(
      messages.map((m) => (m.role === "toolResult" ? `result:${textOf(m)}` : `${m.role}:${textOf(m)}`)),
    ).toEqual([
      "user:q",
      "assistant:call:tcall:t",
      "result:a1",
      "result:a2",
      "assistant:call:t",
      "result:b1",
      "assistant:answer",
    ]);
  });

  test("a result found only after the next assistant is not moved back: its call gets a synthetic error result and the late one is dropped", () => {
    // Spec §2.1 rule 7 moves the results "found before the next assistant message" (reading 24b:
    // the bound was never set up; every result sat before the next assistant).
    const { messages } = deriveContext([
      user("q"),
      assistant([call("c1")], "toolUse"),
      user("steer"),
      assistant("mid"),
      result("c1", "late"),
      user("next"),
      assistant("final"),
    ]);
    expect(
      messages.map((m) => (m.role === "toolResult" ? `result:${m.isError}` : `${m.role}:${textOf(m)}`)),
    ).toEqual([
      "user:q",
      "assistant:call:t",
      "result:true",
      "user:steer",
      "assistant:mid",
      "user:next",
      "assistant:final",
    ]);
  });

  test("a result found before its assistant is not moved forward to it: a retry reusing the id of an aborted attempt's call gets a synthetic error result and the earlier one is dropped", () => {
    // Draw 34c: rule 7 moves the results found between an assistant and the next one; a search from
    // the transcript's start passed every test (no result ever preceded a call with its id). Some
    // providers number calls afresh each turn: the aborted attempt's result must not answer the retry
    // (here followed by a later turn: the newest assistant's results are paired apart from the rest).
    const { messages } = deriveContext([
      user("q"),
      assistant([call("c1")], "aborted"),
      result("c1", "from the aborted attempt"),
      assistant([call("c1")], "toolUse"),
      user("next"),
      assistant("final"),
    ]);
    expect(
      messages.map((m) =>
        m.role === "toolResult" ? `result:${m.isError}:${textOf(m)}` : `${m.role}:${textOf(m)}`,
      ),
    ).toEqual([
      "user:q",
      "assistant:call:t",
      `result:true:${UNANSWERED_TOOL_CALL}`,
      "user:next",
      "assistant:final",
    ]);
  });

  test("aborted, error and deferred answers are left out of requests", () => {
    const { messages } = deriveContext([
      user("q"),
      assistant("half an ans", "aborted"),
      entry(
        "pi.assistant",
        fauxAssistantMessage([], { stopReason: "error", errorMessage: "503", timestamp: 1 }),
      ),
      // Draw 35b: an error answer is judged by its stop reason alone, not by an errorMessage (a
      // provider may give none), and an aborted answer carrying a tool call goes too.
      entry("pi.assistant", fauxAssistantMessage("no message", { stopReason: "error", timestamp: 1 })),
      assistant([call("c-aborted")], "aborted"),
      // A deferred stop reason (spec §2.1 rule 9), and a placeholder carrying a deferred handle.
      assistant("later", "deferred" as AssistantMessage["stopReason"]),
      entry("pi.assistant", {
        ...fauxAssistantMessage("pending", { timestamp: 1 }),
        deferred: { id: "job-1" },
      }),
      assistant("the answer"),
    ]);
    expect(messages.map((m) => `${m.role}:${textOf(m)}`)).toEqual(["user:q", "assistant:the answer"]);
  });

  test("a failed answer is left out message by message: the rest of an entry of several messages stays, and an edit's replacement is judged too", () => {
    // Break 30M: every named case was one answer alone in its entry; an entry dropped whole for one
    // failed answer in it, and an edit's replacement sent unjudged, both passed.
    const texts = (entries: EntryRecord[]) =>
      deriveContext(entries).messages.map((m) => `${m.role}:${textOf(m)}`);
    const several: EntryRecord = {
      id: ++nextId,
      conversationId: 1,
      kind: "app.import",
      model: [
        { role: "user", content: "imported", timestamp: 1 },
        fauxAssistantMessage("cut short", { stopReason: "aborted", timestamp: 1 }),
        fauxAssistantMessage("kept", { timestamp: 1 }),
      ] as never,
    };
    expect(texts([user("q"), several])).toEqual(["user:q", "user:imported", "assistant:kept"]);
    const answer = assistant("the answer");
    const { model: _model, ...base } = entry("app.edit", {});
    const failed = fauxAssistantMessage("half", { stopReason: "error", errorMessage: "503", timestamp: 1 });
    const edit: EntryRecord = {
      ...base,
      edits: [{ target: answer.id, action: "replace", messages: [failed] as never }],
    };
    expect(texts([user("again"), answer, edit])).toEqual(["user:again"]);
  });

  test("every failed answer of an entry is left out, not only its first: an aborted, an error and a deferred answer in one entry, and in one edit's replacement (draw 36e-D)", () => {
    // Draw 36e-D: each entry or replacement of the named tests held one failed answer; leaving out
    // only the first failed answer of an entry (the others sent) passed them all.
    const texts = (entries: EntryRecord[]) =>
      deriveContext(entries).messages.map((m) => `${m.role}:${textOf(m)}`);
    const failedThree = () =>
      [
        fauxAssistantMessage("cut short", { stopReason: "aborted", timestamp: 1 }),
        fauxAssistantMessage("kept one", { timestamp: 1 }),
        fauxAssistantMessage("half", { stopReason: "error", errorMessage: "503", timestamp: 1 }),
        { ...fauxAssistantMessage("", { timestamp: 1 }), stopReason: "deferred" },
        fauxAssistantMessage("kept two", { timestamp: 1 }),
      ] as never;
    const several: EntryRecord = {
      id: ++nextId,
      conversationId: 1,
      kind: "app.import",
      model: failedThree(),
    };
    expect(texts([user("q"), several])).toEqual(["user:q", "assistant:kept one", "assistant:kept two"]);
    const view = contextView([user("q"), several]);
    expect(view.entries.map((e) => e.id)).toContain(several.id);
    const answer = assistant("the answer");
    const { model: _model, ...base } = entry("app.edit", {});
    const edit: EntryRecord = {
      ...base,
      edits: [{ target: answer.id, action: "replace", messages: failedThree() }],
    };
    expect(texts([user("again"), answer, edit])).toEqual([
      "user:again",
      "assistant:kept one",
      "assistant:kept two",
    ]);
  });
});
