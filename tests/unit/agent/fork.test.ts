/**
 * Forks (spec §3.7): `Conversation.fork(at)` makes a child that sees its parent's entries through
 * `at` (also when the commit that appended `at` appended later ones), the parent's agent as it was at
 * the end of that commit, a fresh provider session, inbox and usage; other documents by their fork
 * rule. Each child's model context is asserted on the request the scripted model receives.
 */
import { fauxAssistantMessage, fauxToolCall, type Message } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { describe, expect, test } from "vitest";
import { textResult } from "../../../worker/agent/tools/contract.ts";
import {
  type Conversation,
  DOC,
  defineDoc,
  defineTool,
  EntryNotVisible,
  type EntryRecord,
  InvalidTransition,
  type Tx,
  UnknownConversation,
} from "../../../worker/index.ts";
import { deferred, type FauxRequest, memoryStore, until } from "../../../worker/testing.ts";
import { parked } from "../core/fixtures.ts";
import { callsThenAnswer, echo, open, textOf } from "./fixtures.ts";

const ownerless = { ownership: { kind: "ownerless" as const } };

/** A request's messages as `role:text` (tool results by call id), for comparing contexts. */
const context = (request: FauxRequest) =>
  request.messages.map((m: Message) =>
    m.role === "toolResult" ? `toolResult:${m.toolCallId}:${textOf(m)}` : `${m.role}:${textOf(m)}`,
  );

const ask = async (c: Conversation, text: string) => {
  const settled = await (await c.submit({ type: "input", content: text })).wait();
  expect(settled.status).toBe("done");
  return settled;
};

const entryWhere = (entries: readonly EntryRecord[], kind: string, n = 0) =>
  entries.filter((e) => e.kind === kind)[n]!;

describe("fork", () => {
  test("at an entry in the middle of a tool round: the child's context has the results through it, the rest answered as interrupted; its agent is the parent's as of then", async () => {
    const tool = (name: string) =>
      defineTool({
        name,
        description: `Tool ${name}`,
        parameters: Type.Object({}),
        async execute() {
          return textResult(`${name} ran`);
        },
      });
    const { root, faux } = await open(
      (req) => {
        const last = req.messages.at(-1)!;
        if (last.role === "user" && textOf(last) === "go")
          return fauxAssistantMessage(
            [fauxToolCall("a", {}, { id: "call-a" }), fauxToolCall("b", {}, { id: "call-b" })],
            {
              stopReason: "toolUse",
            },
          );
        return echo(req, 0);
      },
      { tools: [tool("a"), tool("b")], settings: { toolExecution: "sequential" } },
    );
    await root.configure({ instructions: "before" });
    await ask(root, "go");
    await root.configure({ instructions: "after" });
    const parentEntries = await root.entries();
    const firstResult = entryWhere(parentEntries, "pi.tool-result", 0);
    expect(entryWhere(parentEntries, "pi.tool-result", 1).id).toBeGreaterThan(firstResult.id);

    const child = await root.fork(firstResult.id, ownerless);
    expect(await child.agentState()).toEqual({ instructions: "before" });
    expect((await child.entries()).map((e) => e.id)).toEqual(
      parentEntries.filter((e) => e.id <= firstResult.id).map((e) => e.id),
    );
    const requestsBefore = faux.requests.length;
    await ask(child, "next");
    const request = faux.requests[requestsBefore]!;
    const resultA = context(faux.requests[1]!).find((m) => m.startsWith("toolResult:call-a"));
    expect(context(request)).toEqual([
      "user:go",
      "assistant:call:acall:b",
      resultA,
      "toolResult:call-b:The tool call was not answered (the run was interrupted or cut).",
      "user:next",
    ]);
    expect(request.systemPrompt).toContain("before");
    // The parent is untouched by the child's run.
    expect((await root.entries()).map((e) => e.id)).toEqual(parentEntries.map((e) => e.id));
    expect(await root.agentState()).toEqual({ instructions: "after" });
  });

  test("at an entry appended in the same commit as later ones: the child sees entries through it and the agent that commit left", async () => {
    const { h, root, faux } = await open(echo);
    await root.configure({ instructions: "old" });
    await ask(root, "one");
    const [x, y] = await h.transaction((tx) => {
      const user = (text: string) => ({
        kind: "pi.user",
        model: [{ role: "user", content: text, timestamp: 0 }],
      });
      const a = tx.appendEntry(root.id, user("x"));
      const b = tx.appendEntry(root.id, user("y"));
      tx.writeDoc(root.id, DOC.agent, { instructions: "same commit" });
      return [a.id, b.id];
    });
    expect(y).toBe(x + 1);
    await root.configure({ instructions: "later" });

    const child = await root.fork(x, ownerless);
    expect((await child.entries()).map((e) => e.id).at(-1)).toBe(x);
    expect(await child.agentState()).toEqual({ instructions: "same commit" });
    const n = faux.requests.length;
    await ask(child, "two");
    expect(context(faux.requests[n]!)).toEqual(["user:one", "assistant:echo: one", "user:x", "user:two"]);
    expect(faux.requests[n]!.systemPrompt).toContain("same commit");
    // Two commits requested together (one group, one store transaction): a fork at each one's entry
    // gets the agent its own commit left, not the group's last (break 31C).
    const [p, q] = await Promise.all(
      ["first of two", "second of two"].map((instructions) =>
        h.transaction((tx) => {
          const entry = tx.appendEntry(root.id, { kind: "app.note", data: { instructions } });
          tx.writeDoc(root.id, DOC.agent, { instructions });
          return entry.id;
        }),
      ),
    );
    expect(await (await root.fork(p!, ownerless)).agentState()).toEqual({ instructions: "first of two" });
    expect(await (await root.fork(q!, ownerless)).agentState()).toEqual({ instructions: "second of two" });
  });

  test("a fork's edit of an entry it inherited omits or replaces it in the fork's context; the parent's context keeps the entry", async () => {
    // Break 29D: every named edit targeted an entry of the editing conversation; edits applied only
    // to entries of the conversation that wrote them (an inherited target left as it was) passed.
    const { root, faux } = await open(echo);
    await ask(root, "r1");
    await ask(root, "r2");
    const [r1, , r2, answer] = await root.entries();
    const child = await root.fork(answer!.id, ownerless);
    const replacement = [{ role: "user", content: "r2, shortened", timestamp: 1 }];
    const edit = await child.submit({
      type: "write",
      entry: {
        kind: "app.edit",
        edits: [
          { target: r1!.id, action: "omit" },
          { target: r2!.id, action: "replace", messages: replacement as never },
        ],
      },
    });
    expect((await edit.wait()).status).toBe("done");
    let n = faux.requests.length;
    await ask(child, "c1");
    expect(context(faux.requests[n]!)).toEqual([
      "assistant:echo: r1",
      "user:r2, shortened",
      "assistant:echo: r2",
      "user:c1",
    ]);
    n = faux.requests.length;
    await ask(root, "r3");
    expect(context(faux.requests[n]!)).toEqual([
      "user:r1",
      "assistant:echo: r1",
      "user:r2",
      "assistant:echo: r2",
      "user:r3",
    ]);
  });

  test("a fork of a fork: the grandchild sees the root through the first fork's entry, then the child through its own", async () => {
    const { h, root, faux } = await open(echo);
    await root.configure({ instructions: "root-1" });
    await ask(root, "r1");
    const r1 = (await root.entries()).at(-1)!.id;
    await root.configure({ instructions: "root-2" });
    await ask(root, "r2");
    const e1 = (await root.entries()).at(-1)!.id;
    await ask(root, "r3"); // after the fork point: never seen by a child

    const child = await root.fork(e1, ownerless);
    expect(await child.agentState()).toEqual({ instructions: "root-2" });
    await child.configure({ instructions: "child-1" });
    await ask(child, "c1");
    const e2 = (await child.entries()).at(-1)!.id;
    await child.configure({ instructions: "child-2" });
    await ask(child, "c2");

    const grandchild = await child.fork(e2, ownerless);
    expect(await grandchild.agentState()).toEqual({ instructions: "child-1" });
    let n = faux.requests.length;
    await ask(grandchild, "g1");
    expect(context(faux.requests[n]!)).toEqual([
      "user:r1",
      "assistant:echo: r1",
      "user:r2",
      "assistant:echo: r2",
      "user:c1",
      "assistant:echo: c1",
      "user:g1",
    ]);
    expect(faux.requests[n]!.systemPrompt).toContain("child-1");

    // A fork of the child at an entry it inherited reads the root's agent as of that entry.
    const early = await child.fork(r1, ownerless);
    expect(await early.agentState()).toEqual({ instructions: "root-1" });
    n = faux.requests.length;
    await ask(early, "e");
    expect(context(faux.requests[n]!)).toEqual(["user:r1", "assistant:echo: r1", "user:e"]);

    // Each conversation has its own provider session and starts with zero usage and an empty inbox.
    const sessions = new Set<unknown>();
    for (const c of [root, child, grandchild, early])
      sessions.add(((await h.doc(c.id, DOC.provider)) as { sessionId: string }).sessionId);
    expect(sessions.size).toBe(4);
    const freshChild = await root.fork(e1, ownerless);
    expect(await h.doc(freshChild.id, DOC.usage)).toEqual({ models: {}, tools: {} });
    expect(await h.doc(freshChild.id, DOC.inbox)).toEqual({ items: [] });
    expect(await h.doc(freshChild.id, DOC.live)).toEqual({});
  });

  test("a fork of a parent whose tool spent starts pi.usage at zero in both ledgers, by the handle and by a raw fork: the tool spend is counted once, under the parent (draw 40b)", async () => {
    // Draw 40b: every fork test forked a parent whose spend was in `models` only, so a fork that
    // started its `tools` ledger as a copy of its parent's passed them all.
    const spent = { input: 10, output: 1, cacheRead: 0, cacheWrite: 0, totalTokens: 11 };
    const cost = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 };
    const summarize = defineTool({
      name: "summarize",
      description: "Summarize with a model of its own",
      parameters: Type.Object({}),
      execute: async () => ({ ...textResult("summary"), usage: { ...spent, cost } }),
    });
    const { h, root } = await open(callsThenAnswer(fauxToolCall("summarize", {}, { id: "call-1" })), {
      tools: [summarize],
    });
    await ask(root, "one");
    type Ledger = {
      models: Record<string, { totalTokens: number }>;
      tools: Record<string, { totalTokens: number }>;
    };
    const parent = (await h.doc(root.id, DOC.usage)) as unknown as Ledger;
    expect(parent.tools["summarize"]?.totalTokens).toBe(11);
    const at = (await root.entries()).at(-1)!.id;
    const child = await root.fork(at, ownerless);
    const raw = await h.transaction((tx) => tx.forkConversation(root.id, at, ownerless));
    for (const id of [child.id, raw.id])
      expect(await h.doc(id, DOC.usage)).toEqual({ models: {}, tools: {} });
    // The child's own answer adds to its own zero: its models ledger only; the Session's tool total is the parent's.
    await ask(child, "two");
    const own = (await h.doc(child.id, DOC.usage)) as unknown as Ledger;
    expect(own.tools).toEqual({});
    expect(Object.keys(own.models)).toHaveLength(1);
    expect((await h.usage()).tools).toEqual(parent.tools);
  });

  test("a fork of a fork at the last entry the first fork inherited (its own fork point) is visible: the grandchild sees the root through it, a raw fork past it is refused", async () => {
    // Break 29E: forking exactly at an ancestor segment's cap was never tried; a visibility check
    // excluding the cap passed every fork test.
    const { h, root, faux } = await open(echo);
    await ask(root, "r1");
    const e1 = (await root.entries()).at(-1)!.id;
    await ask(root, "r2"); // after the first fork point: not visible from the child
    const after = (await root.entries()).at(-1)!.id;
    const child = await root.fork(e1, ownerless);
    await ask(child, "c1");
    const grandchild = await child.fork(e1, ownerless);
    const n = faux.requests.length;
    await ask(grandchild, "g1");
    expect(context(faux.requests[n]!)).toEqual(["user:r1", "assistant:echo: r1", "user:g1"]);
    await expect(h.transaction((tx) => tx.forkConversation(child.id, after, ownerless))).rejects.toThrow(
      EntryNotVisible,
    );
  });

  test("a task-owned fork keeps the asOf copy of its parent's agent, whatever its ownership: not its owner conversation's agent, nor the parent's current one", async () => {
    const owner = parked("fork.owner");
    const { h, root } = await open(echo, { tasks: [owner] });
    await root.configure({ instructions: "then" });
    await ask(root, "one");
    const at = (await root.entries()).at(-1)!.id;
    await root.configure({ instructions: "now" });
    const other = await h.createConversation(ownerless);
    await other.configure({ instructions: "owner's", thinkingLevel: "high" });
    const worker = await h.createTask(owner, null, {
      ownership: { kind: "conversation" },
      conversationId: other.id,
    });
    const taskOwned = { ownership: { kind: "task" as const, taskId: worker } };
    const child = await root.fork(at, taskOwned);
    const raw = await h.transaction((tx) => tx.forkConversation(root.id, at, taskOwned));
    // A raw fork returns an inert record too (spec §3.3), plain JSON with nothing to call.
    expect(Object.getPrototypeOf(raw)).toBe(Object.prototype);
    expect(JSON.parse(JSON.stringify(raw))).toStrictEqual(raw);
    for (const id of [child.id, raw.id]) {
      expect(await h.conversation(id)!.agentState()).toEqual({ instructions: "then" });
      expect((await h.transaction((tx) => tx.conversation(id)))?.owner).toEqual({
        taskId: worker,
        conversationId: other.id,
      });
    }
    await h.abortTask(worker);
  });

  test("a fork survives a reopen: its history, agent and active range are read from the store", async () => {
    const store = await memoryStore();
    let setup = await open(echo, { store });
    await setup.root.configure({ instructions: "kept" });
    await ask(setup.root, "first");
    await (await setup.root.reset("handoff text")).wait();
    await ask(setup.root, "second");
    const at = (await setup.root.entries()).at(-1)!.id;
    await setup.root.configure({ instructions: "changed" });
    const child = await setup.root.fork(at, ownerless);
    const childId = child.id;
    const before = (await child.entries()).map((e) => e.id);
    await setup.h.close();

    setup = await open(echo, { store: await memoryStore(store.image()) });
    // Loaded when named: the reopen read only live work's records.
    const reopened = (await setup.h.loadedConversation(childId))!;
    expect(setup.h.conversationRecord(childId)?.parent).toEqual({ conversationId: 1, at });
    expect((await reopened.entries()).map((e) => e.id)).toEqual(before);
    expect(await reopened.agentState()).toEqual({ instructions: "kept" });
    // The view shows the inherited active range: from the reset on.
    const view = await reopened.viewState();
    expect(view.entries.map((e) => e.kind)).toEqual(["pi.reset", "pi.user", "pi.system", "pi.assistant"]);
    await ask(reopened, "third");
    expect(context(setup.faux.requests.at(-1)!)).toEqual([
      "user:handoff text",
      "user:second",
      "assistant:echo: second",
      "user:third",
    ]);
  });

  test("a reset the parent places after the fork point is not the child's head: the child's view, its first page and its next request keep the inherited range (break 30F)", async () => {
    // Spec §2.1: the active transcript starts at the newest head visible to the conversation, and
    // fork traversal stops at each parent.at. Break 30F: a head marker looked up in the parent's
    // whole history (its cap ignored) cut the child's view and passed every named test (their heads
    // were all in the conversation's own visible history).
    const { h, root, faux } = await open(echo);
    await ask(root, "first");
    const at = (await root.entries()).at(-1)!.id;
    const child = await root.fork(at, ownerless);
    await (await root.reset("elsewhere")).wait();
    await ask(child, "mine");
    expect(context(faux.requests.at(-1)!)).toEqual(["user:first", "assistant:echo: first", "user:mine"]);
    const kinds = ["pi.user", "pi.assistant", "pi.user", "pi.assistant"];
    expect((await child.viewState()).entries.map((e) => e.kind)).toEqual(kinds);
    expect(h.pageMount(child.id)).toBeDefined();
    await h.pageMount(child.id).ready();
    expect(h.pageMount(child.id).view.entries.map((e) => e.kind)).toEqual(kinds);
    // The parent's own view starts at its reset.
    expect((await root.viewState()).entries.map((e) => e.kind)).toEqual(["pi.reset"]);
  });

  test("documents follow their fork rule: current is copied as it is when the fork is made, initial is not", async () => {
    const copied = defineDoc<{ on: boolean }>({ name: "app.plan", initial: { on: false } });
    const fresh = defineDoc({ name: "app.scratch", initial: { text: "" }, fork: "initial" });
    const { h, root } = await open(echo, { documents: [fresh] });
    await ask(root, "one");
    const at = (await root.entries()).at(-1)!.id;
    await h.transaction((tx) => {
      copied.write(tx, root.id, { on: true });
      fresh.write(tx, root.id, { text: "parent notes" });
      tx.writeDoc(root.id, "app.raw", { free: 1 }); // no definition: copied as stored
    });
    const child = await root.fork(at, ownerless);
    // "initial" copies no instance: the child has none stored until its first typed access.
    expect(await h.docVersioned(child.id, "app.scratch")).toEqual({ value: undefined, version: undefined });
    await h.transaction((tx) => {
      expect(copied.read(tx, child.id)).toEqual({ on: true });
      expect(fresh.read(tx, child.id)).toEqual({ text: "" });
      expect(tx.readDoc(child.id, "app.raw")).toEqual({ free: 1 });
      copied.write(tx, child.id, { on: false });
    });
    expect(await h.doc(root.id, "app.plan")).toEqual({ on: true });
    // That first access created it from the initializer (spec §3.7), not from the parent's value.
    expect(await h.docVersioned(child.id, "app.scratch")).toEqual({ value: { text: "" }, version: 1 });
    // Every copy ("current" ones, and "asOf" pi.agent) is an independent instance with its own id:
    // a parent's later write reaches no child copy, and a child's none of the parent's.
    for (const name of ["app.plan", "app.raw", DOC.agent]) {
      const [parentDoc, childDoc] = [await h.docRecord(root.id, name), await h.docRecord(child.id, name)];
      expect(childDoc?.id, name).toBeDefined();
      expect(childDoc?.id, name).not.toBe(parentDoc?.id);
    }
    await h.transaction((tx) => tx.writeDoc(root.id, "app.raw", { free: 2 }));
    await root.configure({ instructions: "parent after the fork" });
    await child.configure({ instructions: "child" });
    expect(await h.doc(child.id, "app.raw")).toEqual({ free: 1 });
    expect(await child.agentState()).toEqual({ instructions: "child" });
    expect(await root.agentState()).toEqual({ instructions: "parent after the fork" });
  });

  test("a definition-free document is copied as stored (its value and version, uninterpreted); a typed read in the child migrates it there only", async () => {
    const { h, root } = await open(echo);
    await ask(root, "one");
    const at = (await root.entries()).at(-1)!.id;
    // Stored at version 3 by code this harness does not know (no definition given to it).
    await h.transaction((tx) => tx.writeDoc(root.id, "app.legacy", { n: 1 }, 3));
    const v4 = defineDoc<{ count: number }>({
      name: "app.legacy",
      version: 4,
      initial: { count: 0 },
      migrate: (value) => ({ count: (value as { n: number }).n }),
    });
    // A typed read of the parent's before the fork migrates in memory only: the fork copies the stored pair.
    expect(await h.snapshot(v4, root.id)).toEqual({ count: 1 });
    const child = await root.fork(at, ownerless);
    expect(await h.docVersioned(child.id, "app.legacy")).toEqual({ value: { n: 1 }, version: 3 });
    await h.transaction((tx) => {
      expect(v4.read(tx, child.id)).toEqual({ count: 1 });
    });
    expect(await h.docVersioned(child.id, "app.legacy")).toEqual({ value: { count: 1 }, version: 4 });
    expect(await h.docVersioned(root.id, "app.legacy")).toEqual({ value: { n: 1 }, version: 3 });
  });

  test("after a reopen, a fork copies the stored value/version pairs read back from the store: a current copy at its stored version, an asOf copy at the fork entry's", async () => {
    const store = await memoryStore();
    const first = await open(echo, { store });
    const rules = { history: "rewindable", fork: "asOf" } as const;
    await first.h.transaction((tx) => {
      tx.writeDoc(first.root.id, "app.legacy", { n: 1 }, 3);
      tx.writeDoc(first.root.id, "app.history", { n: 1 }, 6, rules);
    });
    await ask(first.root, "one");
    const at = (await first.root.entries()).at(-1)!.id;
    await first.h.transaction((tx) => tx.writeDoc(first.root.id, "app.history", { n: 2 }, 7, rules));
    await first.h.close();

    const { h, root } = await open(echo, { store: await memoryStore(store.image()) });
    const child = await root.fork(at, ownerless);
    expect(await h.docVersioned(child.id, "app.legacy")).toEqual({ value: { n: 1 }, version: 3 });
    expect(await h.docVersioned(child.id, "app.history")).toEqual({ value: { n: 1 }, version: 6 });
    expect(await h.docVersioned(root.id, "app.history")).toEqual({ value: { n: 2 }, version: 7 });
  });

  test("an asOf copy is the stored value/version pair at the fork entry, not the parent's current one", async () => {
    const { h, root } = await open(echo);
    // A rewindable, asOf document stored at version 3 before the fork entry, rewritten at version 5 after it.
    const rules = { history: "rewindable", fork: "asOf" } as const;
    await h.transaction((tx) => tx.writeDoc(root.id, "app.history", { n: 1 }, 3, rules));
    await ask(root, "one");
    const at = (await root.entries()).at(-1)!.id;
    await h.transaction((tx) => tx.writeDoc(root.id, "app.history", { n: 2 }, 5, rules));
    const child = await root.fork(at, ownerless);
    expect(await h.docVersioned(child.id, "app.history")).toEqual({ value: { n: 1 }, version: 3 });
    expect(await h.docVersioned(root.id, "app.history")).toEqual({ value: { n: 2 }, version: 5 });
  });

  test("a fork names a visible entry of a known conversation; a commit cannot fork and write the parent's copied documents", async () => {
    const { h, root } = await open(echo);
    await ask(root, "one");
    const other = await h.createConversation(ownerless);
    await ask(other, "elsewhere");
    const foreign = (await other.entries()).at(-1)!.id;
    await expect(root.fork(foreign, ownerless)).rejects.toThrow(EntryNotVisible);
    await expect(root.fork(10_000, ownerless)).rejects.toThrow(EntryNotVisible);
    await expect(h.forkConversation(99, 1, ownerless)).rejects.toThrow(UnknownConversation);
    const at = (await root.entries())[0]!.id;
    const child = await root.fork(at, ownerless);
    await ask(root, "two");
    const past = (await root.entries()).at(-1)!.id;
    // Past the child's cap: in the parent's history, not in the child's.
    await expect(child.fork(past, ownerless)).rejects.toThrow(EntryNotVisible);
    // Two levels down, the root's entry within both caps is still visible, one past them is not
    // (break 31B: a visibility check that looked at the conversation and its parent only passed).
    const grandchild = await child.fork(at, ownerless);
    expect((await grandchild.fork(at, ownerless)).id).toBeGreaterThan(grandchild.id);
    await expect(grandchild.fork(past, ownerless)).rejects.toThrow(EntryNotVisible);
    await expect(
      h.transaction((tx) => {
        tx.writeDoc(root.id, "app.note", { n: 1 });
        tx.forkConversation(root.id, at, ownerless);
      }),
    ).rejects.toThrow(/cannot be created in a commit that writes its document app.note/);
    const unowned = await root.fork(at, { ownership: undefined as never }).catch((e: unknown) => e);
    expect(unowned).toBeInstanceOf(InvalidTransition);
    expect((unowned as Error).message).toMatch(/explicit ownership/);
  });

  test("a fork's ownership is one of the two kinds: a task's own kind (conversation), a kind-less object or null is refused, by the handle and by a raw transaction, and nothing is created", async () => {
    // Sweep 42, 34: the test above refused a missing ownership only; a fork that took createTask's
    // `{ kind: "conversation" }` for ownerless (tx.ts, forks only) passed every fork, conversation and
    // ownership test (ownership-explicit tries that kind on a creation, never on a fork).
    const { h, root } = await open(echo);
    await ask(root, "one");
    const at = (await root.entries())[0]!.id;
    let commits = 0;
    h.subscribe(() => commits++);
    for (const ownership of [{ kind: "conversation" }, {}, null]) {
      const byHandle = await root.fork(at, { ownership: ownership as never }).catch((e: unknown) => e);
      expect(byHandle).toBeInstanceOf(InvalidTransition);
      expect((byHandle as Error).message).toMatch(/explicit ownership/);
      const raw = await h
        .transaction((tx) => tx.forkConversation(root.id, at, { ownership: ownership as never }))
        .catch((e: unknown) => e);
      expect(raw).toBeInstanceOf(InvalidTransition);
    }
    expect(commits).toBe(0);
    // The two kinds are taken.
    expect((await root.fork(at, ownerless)).id).toBeGreaterThan(root.id);
  });

  test("after a reopen, a grandchild forks at an entry it inherits from the root and is refused one past its cap, by the handle and by a raw transaction; the refusal names the conversation and the entry", async () => {
    // Draw 32A: every visibility check above ran live, with the fork chain in memory, and compared
    // the refusal by its class only.
    const store = await memoryStore();
    let setup = await open(echo, { store });
    await ask(setup.root, "r1");
    const at = (await setup.root.entries()).at(-1)!.id;
    await ask(setup.root, "r2");
    const past = (await setup.root.entries()).at(-1)!.id;
    const child = await setup.root.fork(at, ownerless);
    await ask(child, "c1");
    const mid = (await child.entries()).at(-1)!.id;
    const grandchildId = (await child.fork(mid, ownerless)).id;
    await setup.h.close();

    setup = await open(echo, { store: await memoryStore(store.image()) });
    const refusedRaw = await setup.h
      .transaction((tx) => tx.forkConversation(grandchildId, past, ownerless))
      .catch((e: unknown) => e);
    expect(refusedRaw).toBeInstanceOf(EntryNotVisible);
    expect(refusedRaw).toMatchObject({ conversationId: grandchildId, entryId: past });
    const raw = await setup.h.transaction((tx) => tx.forkConversation(grandchildId, at, ownerless).id);
    expect(setup.h.conversationRecord(raw)?.parent).toEqual({ conversationId: grandchildId, at });
    const grandchild = (await setup.h.loadedConversation(grandchildId))!;
    const refused = await grandchild.fork(past, ownerless).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(EntryNotVisible);
    expect(refused).toMatchObject({ conversationId: grandchildId, entryId: past });
    const byHandle = await grandchild.fork(mid, ownerless);
    const n = setup.faux.requests.length;
    await ask(byHandle, "g1");
    expect(context(setup.faux.requests[n]!)).toEqual([
      "user:r1",
      "assistant:echo: r1",
      "user:c1",
      "assistant:echo: c1",
      "user:g1",
    ]);
  });

  // Break 30N: contrary, fixed: the engine cached a fork point at its first load, the invisible ones
  // too, so an entry id refused before it was committed stayed refused once it was a committed,
  // visible entry of the parent's history (by the handle and by a raw transaction alike).
  test("a fork point that is no entry id (its id as a string, a fraction, NaN, 0, -1) is refused as not visible, by the handle and by a raw transaction, and nothing is created (draw 36b)", async () => {
    const { h, root } = await open(echo);
    await ask(root, "one");
    const first = (await root.entries())[0]!.id;
    for (const at of [String(first), first + 0.5, Number.NaN, 0, -1] as number[]) {
      await expect(root.fork(at, ownerless)).rejects.toThrow(EntryNotVisible);
      await expect(h.transaction((tx) => tx.forkConversation(root.id, at, ownerless))).rejects.toThrow(
        EntryNotVisible,
      );
    }
    // Nothing was created: the next conversation takes the id right after the root's.
    const child = await root.fork(first, ownerless);
    expect(child.id).toBe(root.id + 1);
    expect((await child.entries()).map((e) => e.id)).toEqual([first]);
  });

  test("a fork at an entry refused before it existed is accepted once that entry is committed in the parent's history", async () => {
    const { h, root } = await open(echo);
    await ask(root, "one");
    const last = (await root.entries()).at(-1)!.id;
    await expect(root.fork(last + 1, ownerless)).rejects.toThrow(EntryNotVisible);
    await expect(h.transaction((tx) => tx.forkConversation(root.id, last + 2, ownerless).id)).rejects.toThrow(
      EntryNotVisible,
    );
    await ask(root, "two");
    expect((await root.entries()).map((e) => e.id)).toEqual(expect.arrayContaining([last + 1, last + 2]));
    const child = await root.fork(last + 1, ownerless);
    expect(child.id).not.toBe(root.id);
    const raw = await h.transaction((tx) => tx.forkConversation(root.id, last + 2, ownerless).id);
    expect(raw).not.toBe(child.id);
  });

  test("a fork's source may not change in the forking commit: a write to the parent's copied document after the fork is refused as one before it; the copy is the committed value and no task is copied", async () => {
    const plan = defineDoc<{ n: number }>({ name: "app.plan", initial: { n: 0 } });
    const scratch = defineDoc({ name: "app.scratch", initial: { n: 0 }, fork: "initial" });
    const { h, root } = await open(echo, { tasks: [parked("fork.worker")], documents: [scratch] });
    await ask(root, "one");
    const at = (await root.entries()).at(-1)!.id;
    const worker = await h.createTask(parked("fork.worker"), null, { ownership: { kind: "conversation" } });
    await h.transaction((tx) => {
      tx.writeDoc(root.id, "app.note", { n: 1 });
      plan.write(tx, root.id, { n: 1 });
    });
    const conversationsBefore = h.conversationRecords().length;
    // After the fork, in the same commit: a whole write, a typed write and a patch are each refused.
    const afterFork: Array<(tx: Tx) => void> = [
      (tx) => tx.writeDoc(root.id, "app.note", { n: 2 }),
      (tx) => plan.write(tx, root.id, { n: 2 }),
      (tx) => void tx.patchDoc(root.id, "app.note", [{ path: ["n"], set: 2 }]),
      (tx) => tx.writeDoc(root.id, "app.new", { created: true }), // creating one is a change too
      (tx) => tx.retireDoc(root.id, "app.note"), // and so is retiring one
    ];
    for (const write of afterFork) {
      const refused = h.transaction((tx) => {
        tx.forkConversation(root.id, at, ownerless);
        write(tx);
      });
      await expect(refused).rejects.toThrow(/forked in this commit/);
      // A typed refusal (reading 23b): InvalidTransition, as before the fork.
      await expect(refused).rejects.toBeInstanceOf(InvalidTransition);
    }
    // Retired before the fork in the same commit: refused as a write before it is.
    const before = h.transaction((tx) => {
      tx.retireDoc(root.id, "app.note");
      tx.forkConversation(root.id, at, ownerless);
    });
    await expect(before).rejects.toThrow(/cannot be created in a commit that writes its document app.note/);
    await expect(before).rejects.toBeInstanceOf(InvalidTransition);
    // The value it already holds, written again before the fork, is a write too (draw 37: a check that
    // let an unchanged value through passed): a whole write and a typed one, each refused.
    const unchanged = h.transaction((tx) => {
      tx.writeDoc(root.id, "app.note", { n: 1 });
      tx.forkConversation(root.id, at, ownerless);
    });
    await expect(unchanged).rejects.toThrow(
      /cannot be created in a commit that writes its document app.note/,
    );
    const unchangedTyped = h.transaction((tx) => {
      plan.write(tx, root.id, { n: 1 });
      tx.forkConversation(root.id, at, ownerless);
    });
    await expect(unchangedTyped).rejects.toThrow(
      /cannot be created in a commit that writes its document app.plan/,
    );
    expect(h.conversationRecords().length).toBe(conversationsBefore);
    expect(await h.doc(root.id, "app.note")).toEqual({ n: 1 });
    expect(await h.doc(root.id, "app.new")).toBeUndefined();
    // A document the fork does not copy ("initial") may change in the same commit.
    const childId = await h.transaction((tx) => {
      const child = tx.forkConversation(root.id, at, ownerless);
      scratch.write(tx, root.id, { n: 5 });
      return child.id;
    });
    expect(await h.doc(childId, "app.note")).toEqual({ n: 1 });
    expect(await h.doc(childId, "app.plan")).toEqual({ n: 1 });
    expect(await h.doc(root.id, "app.scratch")).toEqual({ n: 5 });
    expect(await h.doc(childId, "app.scratch")).toBeUndefined();
    // Nor is the refusal wider than "current" (break 29F): an "initial" document written before the
    // fork, and an "asOf" one (copied as of the fork entry, not the commit) written before and after it.
    const asOf = { history: "rewindable", fork: "asOf" } as const;
    await h.transaction((tx) => tx.writeDoc(root.id, "app.asof", { n: 1 }, 1, asOf));
    const laterId = await h.transaction((tx) => {
      scratch.write(tx, root.id, { n: 6 });
      tx.writeDoc(root.id, "app.asof", { n: 2 }, 1, asOf);
      const child = tx.forkConversation(root.id, at, ownerless);
      tx.writeDoc(root.id, "app.asof", { n: 3 }, 1, asOf);
      return child.id;
    });
    expect(await h.doc(root.id, "app.scratch")).toEqual({ n: 6 });
    expect(await h.doc(root.id, "app.asof")).toEqual({ n: 3 });
    expect(await h.doc(laterId, "app.note")).toEqual({ n: 1 });
    expect(await h.doc(laterId, "app.asof")).toBeUndefined(); // first written after the fork entry
    // No task is copied: the parent's live work stays the parent's alone.
    const live = await h.tasks({ kind: "fork.worker" });
    expect(live.map((t) => [t.id, t.conversationId])).toEqual([[worker, root.id]]);
    expect(h.inspect().tasks.filter((t) => t.record.conversationId === childId)).toEqual([]);
  });

  test("a fork's source may not change in the forking commit also when that commit created another conversation first or forked another parent first: the write after the fork is refused and nothing is created (draw 39b)", async () => {
    // Draw 39b: every named forking commit created only the one fork; a refusal that stopped looking
    // at the first conversation created in the commit that was not a child of the parent passed them.
    const { h, root } = await open(echo);
    await ask(root, "one");
    const at = (await root.entries()).at(-1)!.id;
    const other = await h.createConversation(ownerless);
    await ask(other, "other");
    const otherAt = (await other.entries()).at(-1)!.id;
    await h.transaction((tx) => tx.writeDoc(root.id, "app.note", { n: 1 }));
    const conversationsBefore = h.conversationRecords().length;
    const first: Array<(tx: Tx) => void> = [
      (tx) => void tx.createConversation({ kind: "ownerless" }),
      (tx) => void tx.forkConversation(other.id, otherAt, ownerless),
    ];
    for (const before of first) {
      const refused = h.transaction((tx) => {
        before(tx);
        tx.forkConversation(root.id, at, ownerless);
        tx.writeDoc(root.id, "app.note", { n: 2 });
      });
      await expect(refused).rejects.toThrow(/forked in this commit/);
      await expect(refused).rejects.toBeInstanceOf(InvalidTransition);
    }
    expect(h.conversationRecords().length).toBe(conversationsBefore);
    expect(await h.doc(root.id, "app.note")).toEqual({ n: 1 });
  });

  test("a fork of a busy conversation copies none of its tasks: the child's pi.live names no run, generation or tool slot, the child is idle and its own input starts its own run", async () => {
    // Spec §3.7: tasks are never copied; so no document of the child may name the parent's run task
    // or tool tasks (break 28B: a fork copying pi.live made the child busy with the parent's run).
    const gate = deferred();
    const hold = defineTool({
      name: "hold",
      description: "Holds until released",
      parameters: Type.Object({}),
      async execute() {
        await gate.promise;
        return textResult("held");
      },
    });
    const { h, root } = await open(
      (req) => {
        const last = req.messages.at(-1)!;
        if (last.role === "user" && textOf(last) === "go")
          return fauxAssistantMessage([fauxToolCall("hold", {}, { id: "call-hold" })], {
            stopReason: "toolUse",
          });
        return echo(req, 0);
      },
      { tools: [hold] },
    );
    const input = await root.submit({ type: "input", content: "go" });
    await until(
      () => h.inspect().tasks.some((t) => t.record.kind !== "pi.generation" && t.state.kind === "running"),
      {
        what: "the tool task running",
      },
    );
    expect(root.busy).toBe(true);
    const parentLive = (await h.doc(root.id, DOC.live)) as { run?: { taskId: number } };
    expect(parentLive.run).toBeDefined();
    const at = (await root.entries()).filter((e) => e.kind === "pi.assistant").at(-1)!.id;
    const tasksBefore = h.inspect().tasks.map((t) => t.record.id);
    const child = await root.fork(at, ownerless);
    expect(await h.doc(child.id, DOC.live)).toEqual({});
    expect(child.busy).toBe(false);
    expect(h.inspect().tasks.map((t) => t.record.id)).toEqual(tasksBefore);
    expect(h.inspect().tasks.filter((t) => t.record.conversationId === child.id)).toEqual([]);
    const settled = await ask(child, "next");
    const childLive = (await h.doc(child.id, DOC.live)) as { run?: unknown };
    expect(childLive.run).toBeUndefined();
    expect(settled.status).toBe("done");
    gate.resolve();
    expect((await input.wait()).status).toBe("done");
  });

  test("tx.forkConversation inside any commit: the fork point is loaded and the commit runs again", async () => {
    const { h, root, faux } = await open(echo);
    await ask(root, "one");
    const at = (await root.entries()).at(-1)!.id;
    const id = await h.transaction((tx) => tx.forkConversation(root.id, at, ownerless).id);
    expect(await h.conversation(id)!.agentState()).toEqual({});
    const n = faux.requests.length;
    await ask(h.conversation(id)!, "two");
    expect(context(faux.requests[n]!)).toEqual(["user:one", "assistant:echo: one", "user:two"]);
  });
});
