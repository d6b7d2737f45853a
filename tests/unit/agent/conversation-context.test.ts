/**
 * Conversation.context({ at }) (spec §2.2 ContextView, §2.1 derivation): the head marker, the
 * context entries, each entry's contribution (after edits and rule 9, before rules 7 and 8) and the
 * messages a request sends; with `at`, the context as of that entry of the conversation.
 */
import type { AssistantMessage, Message, ToolResultMessage, UserMessage } from "@mariozechner/pi-ai";
import { expect, test } from "vitest";
import { UNANSWERED_TOOL_CALL } from "../../../worker/agent/conversation/context.ts";
import { type Conversation, EntryNotVisible, type EntryRecord, type Json } from "../../../worker/index.ts";
import { echo, open, reopen } from "./fixtures.ts";

const user = (text: string): UserMessage => ({ role: "user", content: text, timestamp: 1 });
const assistant = (
  text: string,
  calls: string[] = [],
  stopReason: AssistantMessage["stopReason"] = calls.length ? "toolUse" : "stop",
): AssistantMessage => ({
  role: "assistant",
  content: [
    ...(text ? [{ type: "text" as const, text }] : []),
    ...calls.map((id) => ({ type: "toolCall" as const, id, name: "read", arguments: {} })),
  ],
  api: "faux",
  provider: "faux",
  model: "faux-1",
  usage: {
    input: 0,
    output: 0,
    cacheRead: 0,
    cacheWrite: 0,
    totalTokens: 0,
    cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
  },
  stopReason,
  timestamp: 1,
});
const result = (callId: string, text: string): ToolResultMessage => ({
  role: "toolResult",
  toolCallId: callId,
  toolName: "read",
  content: [{ type: "text", text }],
  isError: false,
  timestamp: 1,
});

/** Append raw entries in one commit; their ids in order. */
async function append(
  root: Conversation,
  drafts: Array<{ kind: string; model?: Message[]; edits?: EntryRecord["edits"] }>,
): Promise<number[]> {
  return root.commit((tx) =>
    drafts.map(
      (d) =>
        tx.appendEntry(root.id, {
          kind: d.kind,
          ...(d.model ? { model: d.model as unknown as Json } : {}),
          ...(d.edits ? { edits: d.edits } : {}),
        }).id,
    ),
  );
}

test("context(): contributions are each entry's messages after edits and without failed answers; messages pair results with their calls", async () => {
  const { root } = await open(echo);
  const [q, call, note, res, cut, replaced, editor] = await append(root, [
    { kind: "pi.user", model: [user("read two files")] },
    { kind: "pi.assistant", model: [assistant("", ["c1", "c2"])] },
    { kind: "pi.user", model: [user("meanwhile")] },
    { kind: "pi.tool-result", model: [result("c1", "file one")] },
    { kind: "pi.assistant", model: [assistant("half an answer", [], "aborted")] },
    { kind: "pi.user", model: [user("original")] },
    { kind: "app.note" },
  ]);
  // An edit replaces one entry's messages; the newest edit per target wins.
  const [edit] = await append(root, [
    {
      kind: "app.edit",
      edits: [
        { target: replaced!, action: "omit" },
        { target: replaced!, action: "replace", messages: [user("rewritten")] as unknown as Json },
      ],
    },
  ]);
  const view = await root.context();
  expect(view.head).toBeUndefined();
  expect(view.entries.map((e) => e.id)).toEqual([q, call, note, res, cut, replaced, editor, edit]);
  expect(view.contributions).toEqual([
    [user("read two files")],
    [assistant("", ["c1", "c2"])],
    [user("meanwhile")],
    [result("c1", "file one")],
    [], // an aborted answer is never sent (rule 9)
    [user("rewritten")],
    [], // model-less entries contribute nothing
    [],
  ]);
  // Rule 7: c1's result moves ahead of the user message; rule 8: c2 gets a synthesized error result.
  expect(view.messages).toEqual([
    user("read two files"),
    assistant("", ["c1", "c2"]),
    result("c1", "file one"),
    {
      role: "toolResult",
      toolCallId: "c2",
      toolName: "read",
      content: [{ type: "text", text: UNANSWERED_TOOL_CALL }],
      isError: true,
      timestamp: 1,
    },
    user("meanwhile"),
    user("rewritten"),
  ]);
});

test("context() read again after more entries (derived on from the first read) still returns the whole transcript: model-less entries appended later are in entries and contribute no message (break 31H)", async () => {
  const { root } = await open(echo);
  const [q] = await append(root, [{ kind: "pi.user", model: [user("first")] }]);
  expect((await root.context()).entries.map((e) => e.id)).toEqual([q]);
  const [note, answer, marker, again] = await append(root, [
    { kind: "app.note" },
    { kind: "pi.assistant", model: [assistant("an answer", [])] },
    { kind: "app.marker" },
    { kind: "pi.user", model: [user("second")] },
  ]);
  const view = await root.context();
  expect(view.head).toBeUndefined();
  expect(view.entries.map((e) => e.id)).toEqual([q, note, answer, marker, again]);
  expect(view.contributions).toEqual([
    [user("first")],
    [],
    [assistant("an answer", [])],
    [],
    [user("second")],
  ]);
  expect(view.messages).toEqual([user("first"), assistant("an answer", []), user("second")]);
});

test("context() without a head starts at the transcript's first entry even when it is model-less: leading notes are in entries and contribute no message (draw 35e)", async () => {
  // Draw 35e: every named context read's transcript began with a message entry; a range without a
  // head cut to its first message entry passed them.
  const { root } = await open(echo);
  const [note, marker, q] = await append(root, [
    { kind: "app.note" },
    { kind: "app.marker" },
    { kind: "pi.user", model: [user("first")] },
  ]);
  const view = await root.context();
  expect(view.head).toBeUndefined();
  expect(view.entries.map((e) => e.id)).toEqual([note, marker, q]);
  expect(view.contributions).toEqual([[], [], [user("first")]]);
  expect(view.messages).toEqual([user("first")]);
  // A transcript of model-less entries only is whole too, with no message.
  const other = await root.fork(marker!, { ownership: { kind: "ownerless" } });
  const only = await other.context();
  expect(only.entries.map((e) => e.id)).toEqual([note, marker]);
  expect(only.messages).toEqual([]);
});

test("a head between a call and its results: the results cut from their call are never sent, their raw entries stay in the view", async () => {
  const { root } = await open(echo);
  const [, , , second] = await append(root, [
    { kind: "pi.user", model: [user("go")] },
    { kind: "pi.assistant", model: [assistant("", ["x", "y"])] },
    { kind: "pi.tool-result", model: [result("x", "x done")] },
    { kind: "pi.tool-result", model: [result("y", "y done")] },
  ]);
  const reset = await root.commit((tx) => tx.appendEntry(root.id, { kind: "reset", head: second! }).id);
  const view = await root.context();
  expect(view.head?.id).toBe(reset);
  // The range starts at y's result: its call is cut off, so the stray result is dropped (rule 8) and
  // nothing is synthesized for a call the range does not hold.
  expect(view.entries.map((e) => [e.id, e.kind])).toEqual([
    [reset, "reset"],
    [second, "pi.tool-result"],
  ]);
  expect(view.contributions).toEqual([[], [result("y", "y done")]]);
  expect(view.messages).toEqual([]);
});

test("context({ at }) is the context as of that entry: before a reset it has no head and the older entries, after it starts at the reset", async () => {
  const { root } = await open(echo);
  expect((await (await root.submit({ type: "input", content: "one" })).wait()).status).toBe("done");
  const before = (await root.entries()).at(-1)!.id;
  await (await root.reset("start over")).wait();
  expect((await (await root.submit({ type: "input", content: "two" })).wait()).status).toBe("done");

  const now = await root.context();
  expect(now.head?.kind).toBe("pi.reset");
  expect(now.entries[0]).toEqual(now.head);
  const texts = (messages: readonly Message[]) =>
    messages.map((m) =>
      typeof m.content === "string" ? m.content : m.content.map((b) => ("text" in b ? b.text : "")).join(""),
    );
  expect(texts(now.messages).some((t) => t.includes("one"))).toBe(false);
  expect(texts(now.messages).at(-1)).toBe("echo: two");

  const then = await root.context({ at: before });
  expect(then.head).toBeUndefined();
  expect(then.entries.at(-1)?.id).toBe(before);
  expect(texts(then.messages)).toEqual(["one", "echo: one"]);
});

test("context({ at }) refuses an entry that is not in the conversation", async () => {
  const { h, root } = await open(echo);
  expect((await (await root.submit({ type: "input", content: "one" })).wait()).status).toBe("done");
  const other = await h.createConversation({ ownership: { kind: "ownerless" } });
  const last = (await root.entries()).at(-1)!.id;
  await expect(other.context({ at: last })).rejects.toThrow(EntryNotVisible);
  await expect(root.context({ at: last + 100 })).rejects.toThrow(EntryNotVisible);
});

test("context({ at }) is what a fork at that entry starts with, at every cutoff: before and after an edit, a reset, a kept entry and a summary", async () => {
  const { root } = await open(echo);
  const one = async (draft: {
    kind: string;
    model?: Message[];
    edits?: EntryRecord["edits"];
    head?: "self" | number;
  }) =>
    root.commit((tx) => {
      const head = draft.head === "self" ? tx.lastEntryId() + 1 : draft.head;
      return tx.appendEntry(root.id, {
        kind: draft.kind,
        ...(draft.model ? { model: draft.model as unknown as Json } : {}),
        ...(draft.edits ? { edits: draft.edits } : {}),
        ...(head !== undefined ? { head } : {}),
      }).id;
    });
  const first = await one({ kind: "message", model: [user("first")] });
  // A system entry, so the cutoffs differ in the prompt and tools they replay too.
  const system = await one({
    kind: "pi.system",
    model: [
      { role: "system", content: "", timestamp: 1, sections: { base: "You help." }, toolsAdded: ["read"] },
    ] as unknown as Message[],
  });
  const edit = await one({
    kind: "edit",
    edits: [{ target: first, action: "replace", messages: [user("edited")] as unknown as Json }],
  });
  const reset = await one({ kind: "reset", head: "self", model: [user("fresh")] });
  const kept = await one({ kind: "message", model: [assistant("kept")] });
  const summary = await one({ kind: "summary", head: kept, model: [user("summary")] });
  const later = await one({ kind: "message", model: [user("later")] });
  // A run the engine answers: its entries appended by its tasks (byTaskId set), the parent's held as
  // published, the fork's inherited ones read from the store (draw 34b-D).
  expect((await (await root.submit({ type: "input", content: "asked" })).wait()).status).toBe("done");
  const run = (await root.entries()).filter((e) => e.id > later);
  expect(run.some((e) => e.kind === "pi.assistant")).toBe(true);
  const byTasks = run.map((e) => e.id);
  const texts = (messages: readonly Message[]) =>
    messages.map((m) =>
      typeof m.content === "string" ? m.content : m.content.map((b) => ("text" in b ? b.text : "")).join(""),
    );
  for (const at of [first, system, edit, reset, kept, summary, ...byTasks]) {
    const fork = await root.fork(at, { ownership: { kind: "ownerless" } });
    const asOf = await root.context({ at });
    const forked = await fork.context();
    // The whole view: head, entries, contributions, messages, and the prompt, sections and tools.
    expect({ at, ...forked }).toEqual({ at, ...asOf });
  }
  expect((await root.context({ at: first })).tools).toEqual([]);
  expect((await root.context({ at: system })).tools).toEqual(["read"]);
  expect((await root.context({ at: edit })).systemPrompt).toBe("You help.");
  expect(texts((await root.context({ at: first })).messages)).toEqual(["first"]);
  expect(texts((await root.context({ at: edit })).messages)).toEqual(["edited"]);
  expect(texts((await root.context({ at: summary })).messages)).toEqual(["summary", "kept"]);
});

test("a raw tx.appendEntry with head: self heads its own entry; the newest head marker decides the context, an older one in range dropping out, also after a reopen", async () => {
  // The scenario "resolves self heads and uses the newest head marker" through a raw commit: the
  // inbox resolves a submitted self head itself, so this is the core's resolution (draw 27c).
  const { h, root, faux, store } = await open(echo);
  const raw = (draft: { kind: string; model: Message[]; head?: "self" | number }) =>
    root.commit((tx) => tx.appendEntry(root.id, { ...draft, model: draft.model as unknown as Json }));
  const old = await raw({ kind: "message", model: [user("old")] });
  const reset = await raw({ kind: "reset", head: "self", model: [user("fresh start")] });
  expect(reset.head).toBe(reset.id);
  const after = await raw({ kind: "message", model: [assistant("after reset")] });
  let view = await root.context();
  expect(view.head?.id).toBe(reset.id);
  expect(view.entries.map((e) => e.id)).toEqual([reset.id, after.id]);
  const summary = await raw({ kind: "summary", head: after.id, model: [user("summary")] });
  const tail = await raw({ kind: "message", model: [user("next")] });
  view = await root.context();
  expect(view.head?.id).toBe(summary.id);
  expect(view.entries.map((e) => e.id)).toEqual([summary.id, after.id, tail.id]);
  expect(view.messages.map((m) => m.role)).toEqual(["user", "assistant", "user"]);
  // The newest marker decides even when its head reaches back past an older marker's.
  const back = await raw({ kind: "summary", head: old.id, model: [user("back")] });
  view = await root.context();
  expect(view.head?.id).toBe(back.id);
  expect(view.entries.map((e) => e.id)).toEqual([back.id, old.id, after.id, tail.id]);
  // After a reopen the newest marker is read from the store: the same context.
  await h.close();
  const again = await reopen(store, { models: faux.models, defaultModel: faux.ref });
  const reopened = await again.conversation(root.id)!.context();
  expect(reopened.head?.id).toBe(back.id);
  expect(reopened.entries.map((e) => e.id)).toEqual([back.id, old.id, after.id, tail.id]);
});

// Draw 27c: the committed view rebuilt from the store (a reopen, a new mount) applied the stored
// markers one by one, so a newest marker reaching back past an older one left out the entries that one
// had cut. Spec §12: a mounted view keeps its held entries until rebuilt; rebuilt, it is the range.
test("the committed view of a conversation whose newest head marker reaches back past an older marker: the mounted view keeps what it held, a rebuilt one holds the entries from its head on", async () => {
  const { h, root, faux, store } = await open(echo);
  const raw = (draft: { kind: string; model: Message[]; head?: "self" | number }) =>
    root.commit((tx) => tx.appendEntry(root.id, { ...draft, model: draft.model as unknown as Json }));
  const old = await raw({ kind: "message", model: [user("old")] });
  const reset = await raw({ kind: "reset", head: "self", model: [user("fresh start")] });
  const after = await raw({ kind: "message", model: [assistant("after reset")] });
  const watch = await root.watch();
  expect(watch.value.entries.map((e) => e.id)).toEqual([reset.id, after.id]);
  const back = await raw({ kind: "summary", head: old.id, model: [user("back")] });
  expect((await root.context()).entries.map((e) => e.id)).toEqual([back.id, old.id, after.id]);
  // Mounted (the watch holds the mount): it keeps its held entries, from the new head on.
  expect((await root.viewState()).entries.map((e) => e.id)).toEqual([back.id, after.id]);
  await watch.stop();
  // Unobserved, the mount is dropped: the next one is rebuilt from the store.
  expect((await root.viewState()).entries.map((e) => e.id)).toEqual([back.id, old.id, after.id]);
  await h.close();
  const again = await reopen(store, { models: faux.models, defaultModel: faux.ref });
  const stored = await again.conversation(root.id)!.viewState();
  expect(stored.entries.map((e) => e.id)).toEqual([back.id, old.id, after.id]);
  const page = await again.pageMount(root.id).watch();
  expect(page.value.entries.map((e) => e.id)).toEqual([back.id, old.id, after.id]);
  await page.stop();
});

test("context({ at }) of a fork accepts an inherited entry, the same as its parent's, and refuses one past the fork point", async () => {
  const { root } = await open(echo);
  const [inherited, hidden] = await append(root, [
    { kind: "message", model: [user("inherited")] },
    { kind: "message", model: [user("hidden")] },
  ]);
  const child = await root.fork(inherited!, { ownership: { kind: "ownerless" } });
  const own = await child.commit((tx) => tx.appendEntry(child.id, { kind: "note" }).id);
  // The whole view, not only its messages.
  expect(await child.context({ at: inherited! })).toEqual(await root.context({ at: inherited! }));
  expect((await child.context({ at: inherited! })).entries.map((e) => e.id)).toEqual([inherited]);
  await expect(child.context({ at: hidden! })).rejects.toThrow(EntryNotVisible);
  await expect(root.context({ at: own })).rejects.toThrow(EntryNotVisible);
});

test("context() leaves aborted, error and deferred answers out of its messages but keeps their raw entries; a length stop stays (reading 24f)", async () => {
  const { root } = await open(echo);
  const ids = await append(root, [
    { kind: "pi.user", model: [user("q")] },
    { kind: "pi.assistant", model: [assistant("partial", [], "aborted")] },
    { kind: "pi.assistant", model: [assistant("failed", [], "error")] },
    { kind: "pi.assistant", model: [assistant("later", [], "deferred" as AssistantMessage["stopReason"])] },
    { kind: "pi.assistant", model: [assistant("done", [], "length")] },
  ]);
  const view = await root.context();
  expect(view.entries.map((e) => e.id)).toEqual(ids);
  expect(
    view.messages.map(
      (m) => `${m.role}:${typeof m.content === "string" ? m.content : JSON.stringify(m.content)}`,
    ),
  ).toEqual(["user:q", `assistant:${JSON.stringify([{ type: "text", text: "done" }])}`]);
});

test("context() keeps a pi.system entry's system record as its contribution, one a run's preparation wrote and a raw one alike; messages leave them out and their sections replay (draw 37, 1)", async () => {
  // Spec §2.1 rule 6 keeps every positional system message and its changes; ContextView.contributions
  // are each entry's model messages after edits and rule 9. Draw 37-A: a view that dropped system
  // records from the contributions (as `messages` leaves them out, pi-ai 0.73.1 having no system role)
  // passed every named test and every file that reads contributions.
  const { root } = await open(echo);
  await root.configure({ instructions: "be brief" });
  expect((await (await root.submit({ type: "input", content: "one" })).wait()).status).toBe("done");
  const raw = {
    role: "system",
    content: "",
    timestamp: 1,
    sections: { extra: "Cite files." },
  } as unknown as Message;
  const [added] = await append(root, [{ kind: "pi.system", model: [raw] }]);
  const view = await root.context();
  const systems = view.entries.flatMap((e, i) =>
    e.kind === "pi.system" ? [{ e, c: view.contributions[i]! }] : [],
  );
  expect(systems.length).toBe(2);
  for (const { e, c } of systems) {
    expect(c).toEqual(e.model);
    expect(c.map((m) => m.role as string)).toEqual(["system"]);
  }
  expect(systems[1]!.e.id).toBe(added);
  expect((systems[0]!.c[0] as unknown as { sections: Record<string, string> }).sections).toMatchObject({
    instructions: "<instructions>\nbe brief\n</instructions>",
  });
  expect(view.messages.map((m) => m.role)).toEqual(["user", "assistant"]);
  expect(view.sections).toMatchObject({ extra: "Cite files." });
});
