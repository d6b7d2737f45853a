/**
 * The context derivation kept between rounds (agent/conversation/context.ts): deriving a list that
 * grew from one derived before gives exactly what a derivation from scratch gives, whatever the new
 * entries are (results after their calls, calls in parallel, unanswered calls, a head marker, an
 * edit, a system entry, an answer that failed), and a list that is not an extension of the kept one
 * is derived from scratch.
 */
import type { AssistantMessage, Message } from "@mariozechner/pi-ai";
import { expect, test } from "vitest";
import {
  contextView,
  contribution,
  deriveContext,
  deriveSystem,
  headRebaseline,
  replayedSystem,
} from "../../../worker/agent/conversation/context.ts";
import { ENTRY } from "../../../worker/agent/records.ts";
import type { EntryRecord, Json } from "../../../worker/core/types.ts";

const USAGE = {
  input: 0,
  output: 0,
  cacheRead: 0,
  cacheWrite: 0,
  totalTokens: 0,
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
};
const assistant = (calls: string[], stopReason: AssistantMessage["stopReason"] = "toolUse"): Message => ({
  role: "assistant",
  content: calls.length
    ? calls.map((id) => ({ type: "toolCall" as const, id, name: "read", arguments: {} }))
    : [{ type: "text", text: "done" }],
  api: "faux",
  provider: "faux",
  model: "faux-1",
  usage: USAGE,
  stopReason,
  timestamp: 1,
});
const result = (id: string): Message => ({
  role: "toolResult",
  toolCallId: id,
  toolName: "read",
  content: [{ type: "text", text: `result ${id}` }],
  isError: false,
  timestamp: 1,
});

let nextId = 0;
const entry = (
  kind: string,
  messages: Message[] | undefined,
  extra: Partial<EntryRecord> = {},
): EntryRecord =>
  Object.freeze({
    id: ++nextId,
    conversationId: 1,
    kind,
    ...(messages ? { model: messages as unknown as Json } : {}),
    ...extra,
  });
const system = (sections: Record<string, string | null>, toolsAdded: string[]) =>
  entry(ENTRY.system, [
    { role: "system", content: "", sections, toolsAdded, timestamp: 1 } as unknown as Message,
  ]);

/** The same list with fresh entry objects: nothing kept can match it, so it derives from scratch. */
const fresh = (list: readonly EntryRecord[]) => list.map((e) => ({ ...e }));

function expectSameAsScratch(list: readonly EntryRecord[]): void {
  const scratch = contextView(fresh(list));
  const kept = contextView(list);
  expect(kept.messages).toEqual(scratch.messages);
  expect(kept.contributions).toEqual(scratch.contributions);
  expect(kept.entries.map((e) => e.id)).toEqual(scratch.entries.map((e) => e.id));
  expect(kept.head?.id).toBe(scratch.head?.id);
  expect(kept.systemPrompt).toBe(scratch.systemPrompt);
  expect(kept.tools).toEqual(scratch.tools);
  expect(kept.sections).toEqual(scratch.sections);
  expect(deriveContext(list)).toEqual(deriveContext(fresh(list)));
  expect(deriveSystem(list)).toEqual(deriveSystem(fresh(list)));
  // A preparation's one derivation: what deriveSystem and headRebaseline each give, from scratch too.
  expect(replayedSystem(list)).toEqual({
    ...deriveSystem(fresh(list)),
    rebaseline: headRebaseline(fresh(list)),
  });
}

test("a list that grows entry by entry derives as from scratch at every step", () => {
  const list: EntryRecord[] = [];
  const push = (e: EntryRecord) => {
    list.push(e);
    expectSameAsScratch(list);
  };
  push(entry(ENTRY.user, [{ role: "user", content: "go", timestamp: 1 }]));
  push(system({ base: "be brief" }, ["read"]));
  for (let round = 1; round <= 4; round++) {
    push(entry(ENTRY.assistant, [assistant([`a${round}`, `b${round}`])]));
    push(entry(ENTRY.toolResult, [result(`b${round}`)]));
    push(entry(ENTRY.toolResult, [result(`a${round}`)]));
  }
  // A call left unanswered, then a failed answer, then a later round.
  push(entry(ENTRY.assistant, [assistant(["lost"])]));
  push(entry(ENTRY.assistant, [assistant([], "error")]));
  push(entry(ENTRY.user, [{ role: "user", content: "again", timestamp: 1 }]));
  push(entry(ENTRY.assistant, [assistant(["c1"])]));
  push(entry(ENTRY.toolResult, [result("c1")]));
  // An edit of an earlier entry, a system entry, then a head marker and what follows it.
  push(
    entry(ENTRY.user, [{ role: "user", content: "fix", timestamp: 1 }], {
      edits: [{ target: 3, action: "omit" }],
    }),
  );
  push(entry(ENTRY.assistant, [assistant(["d1"])]));
  push(system({ base: null, other: "new" }, ["write"]));
  push(entry(ENTRY.toolResult, [result("d1")]));
  const head = list.at(-3)!.id;
  push(entry(ENTRY.reset, [{ role: "user", content: "summary", timestamp: 1 }], { head }));
  push(entry(ENTRY.assistant, [assistant(["e1"])]));
  push(entry(ENTRY.toolResult, [result("e1")]));
  push(entry(ENTRY.assistant, [assistant([], "stop")]));
});

test("a list that is not an extension of the kept one derives from scratch", () => {
  const a = entry(ENTRY.user, [{ role: "user", content: "one", timestamp: 1 }]);
  const b = entry(ENTRY.assistant, [assistant(["x"])]);
  const c = entry(ENTRY.toolResult, [result("x")]);
  const other = entry(ENTRY.user, [{ role: "user", content: "other", timestamp: 1 }]);
  expectSameAsScratch([a, b, c]);
  // Same first and last entry, another middle.
  expectSameAsScratch([a, other, c]);
  // Shorter, then longer again.
  expectSameAsScratch([a, b]);
  expectSameAsScratch([a, b, c, other]);
});

test("callers get their own arrays: changing one does not change the next derivation", () => {
  const list = [
    entry(ENTRY.user, [{ role: "user", content: "go", timestamp: 1 }]),
    entry(ENTRY.assistant, [assistant(["m"])]),
    entry(ENTRY.toolResult, [result("m")]),
  ];
  const first = deriveContext(list);
  first.messages.pop();
  first.tools.push("mutated");
  first.sections["mutated"] = "yes";
  const view = contextView(list);
  view.entries.pop();
  view.contributions[0]!.pop();
  const replayed = replayedSystem(list);
  replayed.tools.push("mutated");
  replayed.sections["mutated"] = "yes";
  expectSameAsScratch(list);
});

test("a view handed out before the list grew keeps what it held: the kept derivation grows in place, never a view", () => {
  const list = [
    entry(ENTRY.user, [{ role: "user", content: "go", timestamp: 1 }]),
    entry(ENTRY.assistant, [assistant(["p"])]),
  ];
  const before = contextView(list);
  const beforeContext = deriveContext(list);
  const snapshot = structuredClone({ before, beforeContext });
  list.push(entry(ENTRY.toolResult, [result("p")]), entry(ENTRY.assistant, [assistant(["q"])]));
  expectSameAsScratch(list);
  list.push(entry(ENTRY.toolResult, [result("q")]));
  expectSameAsScratch(list);
  expect({ before, beforeContext }).toEqual(snapshot);
  // The unanswered call of the first view is still answered there by the synthetic result.
  expect(before.messages.at(-1)).toMatchObject({ role: "toolResult", toolCallId: "p", isError: true });
});

test("an entry's contribution is its own frozen list when nothing of it is left out, a filtered copy otherwise", () => {
  // Derived for every new entry of every round: no copy for the common case.
  const ok = entry(ENTRY.assistant, [assistant(["k"])]);
  expect(contribution(ok, undefined)).toBe(ok.model);
  const failed = entry(ENTRY.assistant, [assistant([], "error")]);
  expect(contribution(failed, undefined)).toEqual([]);
  const mixed = entry(ENTRY.assistant, [assistant(["x"]), assistant([], "aborted")]);
  expect(contribution(mixed, undefined)).toEqual([assistant(["x"])]);
  expect(contribution(ok, new Map([[ok.id, { target: ok.id, action: "omit" as const }]]))).toEqual([]);
});
