/**
 * `Conversation.agent()` (spec §2.2, §7.1): the conversation's agent resolved with the current
 * registry snapshot and settings (the selected extensions, their tools and sections, the model and
 * thinking level a request would use and `instructions`; no `cwd`, see NOT-APPLICABLE); UIs re-resolve through it, so a
 * registry or settings change shows at its next call. It reads an absent pi.agent as `{}` and never
 * writes. The stored names (what `configure` edits) are `agentState()`.
 */
import { fauxToolCall } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { expect, test } from "vitest";
import {
  AgentHarness,
  createRegistry,
  defineExtension,
  defineTool,
  Harness,
  section,
  textResult,
} from "../../../worker/index.ts";
import { fauxAgentModel, memoryStore } from "../../../worker/testing.ts";
import { callsThenAnswer, cleanups, echo, open, reopen } from "./fixtures.ts";

const tool = (name: string) =>
  defineTool({
    name,
    description: name,
    parameters: Type.Object({}),
    execute: async () => textResult(name),
  });

test("agent() is the resolved agent: the current resolution of the stored names over the base, with the model, thinking level and instructions; agentState() the stored names", async () => {
  const extensions = createRegistry();
  extensions.install(
    defineExtension({ name: "a", tools: [tool("one")], sections: [section("s", () => "x")] }),
  );
  extensions.install(
    defineExtension({ name: "b", tools: [tool("two")], sections: [section("t", () => "y")] }),
  );
  extensions.install(defineExtension({ name: "c", tools: [tool("three")] }));
  let base = ["a", "b"];
  const { h, root, faux } = await open(echo, {
    extensions,
    settings: () => ({ extensions: base }),
  });
  await root.configure({
    extensions: { add: ["c"], remove: ["a"] },
    thinkingLevel: "low",
    instructions: "be brief",
  });
  const agent = await root.agent();
  expect(agent.extensions).toEqual(["b", "c"]);
  expect([...agent.tools.keys()]).toEqual(["two", "three"]);
  // "Extension sections, then `instructions` when set" (spec §2.2 Agent): rendered as the prompt has it.
  expect(agent.sections.map((s) => s.key)).toEqual(["t", "instructions"]);
  const last = agent.sections.at(-1)!;
  expect(last.tag ?? true).toBe(true);
  expect(await last.render({} as never, { signal: new AbortController().signal })).toBe("be brief");
  expect(agent.model).toEqual(faux.ref);
  expect(agent.thinkingLevel).toBe("low");
  expect(agent.instructions).toBe("be brief");
  expect(agent.state).toEqual(await root.agentState());
  expect((await root.agentState()).extensions).toEqual({ add: ["c"], remove: ["a"] });
  // UIs re-resolve through it: a registry change and a settings change show at the next call; nothing is written.
  const before = (await root.entries()).length;
  let commits = 0;
  h.subscribe(() => commits++);
  extensions.uninstall("b");
  expect([...(await root.agent()).tools.keys()]).toEqual(["three"]);
  extensions.install(defineExtension({ name: "d", tools: [tool("four")] }));
  base = ["d"];
  expect((await root.agent()).extensions).toEqual(["d", "c"]);
  expect([...(await root.agent()).tools.keys()]).toEqual(["four", "three"]);
  expect((await root.entries()).length).toBe(before);
  expect(commits).toBe(0);
  expect(h.services.agent(root.id).extensions).toEqual(["d", "c"]);
});

test("agent() of a conversation with no pi.agent resolves it as {}: the host default, thinking off, and writes nothing", async () => {
  const extensions = createRegistry();
  extensions.install(defineExtension({ name: "a", tools: [tool("one")] }));
  // A conversation made by the plain core harness has no built-in documents.
  const store = await memoryStore();
  const core = await Harness.open(store);
  const id = await core.transaction((tx) => tx.createConversation({ kind: "ownerless" }).id);
  await core.close();
  const { h, faux } = await open(echo, { extensions, store: await memoryStore(store.image()) });
  const bare = (await h.loadedConversation(id))!;
  expect(await h.docVersioned(id, "pi.agent")).toEqual({ value: undefined, version: undefined });
  // Nothing at all is written: no commit, not only no pi.agent (reading 23b).
  let commits = 0;
  h.subscribe(() => commits++);
  const agent = await bare.agent();
  expect(agent.extensions).toEqual(["a"]);
  // The host default: the harness's default model, as a request would use it.
  expect(agent.model).toEqual(faux.ref);
  expect(agent.thinkingLevel).toBe("off");
  expect(agent.instructions).toBeUndefined();
  expect(agent.sections.map((s) => s.key)).not.toContain("instructions");
  expect(await bare.agentState()).toEqual({});
  expect(await h.docVersioned(id, "pi.agent")).toEqual({ value: undefined, version: undefined });
  // A commit of ours after anything agent() could have queued on the line: it is the only one.
  await h.transaction((tx) => tx.writeDoc(id, "app.marker", { n: 1 }));
  expect(commits).toBe(1);
});

test("agent() of a conversation with no pi.agent is {} even when the root's agent holds fields: nothing is borrowed (draw 39b)", async () => {
  // Draw 39b, 9: the named test's root held an empty pi.agent; an absent document read as the root's
  // stored agent passed it.
  const extensions = createRegistry();
  extensions.install(defineExtension({ name: "a", tools: [tool("one")] }));
  const store = await memoryStore();
  const core = await Harness.open(store);
  const id = await core.transaction((tx) => tx.createConversation({ kind: "ownerless" }).id);
  await core.close();
  const { h, root, faux } = await open(echo, { extensions, store: await memoryStore(store.image()) });
  await root.configure({ instructions: "Answer in French.", thinkingLevel: "high", tools: [] });
  const bare = (await h.loadedConversation(id))!;
  expect(await bare.agentState()).toEqual({});
  const agent = await bare.agent();
  expect(agent.instructions).toBeUndefined();
  expect(agent.thinkingLevel).toBe("off");
  expect(agent.model).toEqual(faux.ref);
  expect([...agent.tools.keys()]).toEqual(["one"]);
});

test("agent() of a fork with no pi.agent is {} even when its parent's agent holds fields: a fork borrows nothing either (draw 41)", async () => {
  // Draw 41, 10: every absent pi.agent of the named tests was an ownerless conversation with no
  // parent; an absent document read as the parent's stored agent passed them.
  const extensions = createRegistry();
  extensions.install(defineExtension({ name: "a", tools: [tool("one")] }));
  const store = await memoryStore();
  const core = await Harness.open(store);
  const { parent, at } = await core.transaction((tx) => {
    const c = tx.createConversation({ kind: "ownerless" }).id;
    return { parent: c, at: tx.appendEntry(c, { kind: "app.note", data: 1 }).id };
  });
  await core.close();
  // The parent's agent is written after the entry the fork starts at: its asOf copy is absent.
  const first = await open(echo, { extensions, store: await memoryStore(store.image()) });
  await (await first.h.loadedConversation(parent))!.configure({
    instructions: "Answer in French.",
    thinkingLevel: "high",
    tools: [],
  });
  await first.h.close();
  const mid = await memoryStore(first.store.image());
  const again = await Harness.open(mid);
  const id = await again.transaction(
    (tx) => tx.forkConversation(parent, at, { ownership: { kind: "ownerless" } }).id,
  );
  await again.close();
  const { h, faux } = await open(echo, { extensions, store: await memoryStore(mid.image()) });
  expect(await (await h.loadedConversation(parent))!.agentState()).toMatchObject({
    instructions: "Answer in French.",
  });
  const fork = (await h.loadedConversation(id))!;
  expect(await h.docVersioned(id, "pi.agent")).toEqual({ value: undefined, version: undefined });
  expect(await fork.agentState()).toEqual({});
  const agent = await fork.agent();
  expect(agent.instructions).toBeUndefined();
  expect(agent.thinkingLevel).toBe("off");
  expect(agent.model).toEqual(faux.ref);
  expect([...agent.tools.keys()]).toEqual(["one"]);
});

test("agent() sets thinkingLevel even with no model at all: no stored model and no host default resolve to thinking off, no model", async () => {
  // Break 29E: every named test had a host default model; a thinking level set only beside a model
  // passed them.
  const faux = fauxAgentModel(echo);
  const h = await AgentHarness.open(await memoryStore(), { models: faux.models });
  cleanups.push(async () => {
    await h.close().catch(() => undefined);
    faux.unregister();
  });
  const agent = await (await h.root()).agent();
  expect(agent.model).toBeUndefined();
  expect(agent.thinkingLevel).toBe("off");
});

test("agent() shows the tools a request would offer: after the conversation's tools filter, an array in its order or a { remove } (break 30A)", async () => {
  // Break 30A: no named test set a tools filter; an agent() resolving the selection without it passed.
  const extensions = createRegistry();
  extensions.install(defineExtension({ name: "a", tools: [tool("one"), tool("two"), tool("three")] }));
  const { root } = await open(echo, { extensions });
  await root.configure({ tools: ["three", "one"] });
  expect([...(await root.agent()).tools.keys()]).toEqual(["three", "one"]);
  await root.configure({ tools: { remove: ["two"] } });
  expect([...(await root.agent()).tools.keys()]).toEqual(["one", "three"]);
  expect((await root.agent()).state.tools).toEqual({ remove: ["two"] });
});

test("agent() after a reopen, before the conversation's documents are in memory, resolves its stored pi.agent: its selection, thinking level and instructions (draw 40c)", async () => {
  // Draw 40c (D, 10): every named test called agent() on a conversation whose documents were loaded;
  // an agent() resolving `{}` when they were not (no read of the stored pi.agent) passed them.
  const extensions = createRegistry();
  extensions.install(defineExtension({ name: "a", tools: [tool("one")] }));
  extensions.install(
    defineExtension({ name: "b", tools: [tool("two")], sections: [section("t", () => "y")] }),
  );
  const { h, root, faux, store } = await open(echo, { extensions });
  await root.configure({
    extensions: { remove: ["a"] },
    thinkingLevel: "high",
    instructions: "Answer in French.",
  });
  await h.close();
  const again = await reopen(store, { models: faux.models, defaultModel: faux.ref, extensions });
  const conversation = (await again.loadedConversation(root.id))!;
  expect(again.docsLoaded(root.id)).toBe(false);
  const agent = await conversation.agent();
  expect(agent.extensions).toEqual(["b"]);
  expect([...agent.tools.keys()]).toEqual(["two"]);
  expect(agent.sections.map((s) => s.key)).toEqual(["t", "instructions"]);
  expect(agent.thinkingLevel).toBe("high");
  expect(agent.instructions).toBe("Answer in French.");
  expect(agent.model).toEqual(faux.ref);
  expect(agent.state).toEqual({
    extensions: { remove: ["a"] },
    thinkingLevel: "high",
    instructions: "Answer in French.",
  });
});

test("agent() of a task-owned conversation with no pi.agent is {} even when its owner's agent holds fields: the creation copy is not a read rule (draw 41)", async () => {
  // Draw 41, 10: an absent pi.agent read as the owner task's conversation's stored agent passed every
  // named test (their absent documents were in ownerless conversations).
  const made: { id?: number } = {};
  const maker = defineTool({
    name: "maker",
    description: "maker",
    parameters: Type.Object({}),
    execute: async (_args, api) => {
      made.id = await api.commit((tx) => {
        const id = tx.createConversation({ kind: "task", taskId: api.taskId }).id;
        // The creation hook copied the owner's agent; the child's document is then retired: absent.
        tx.retireDoc(id, "pi.agent");
        return id;
      });
      return textResult("made");
    },
  });
  const { h, root, faux } = await open(callsThenAnswer(fauxToolCall("maker", {}, { id: "c1" })), {
    tools: [maker],
  });
  await root.configure({ instructions: "Answer in French.", thinkingLevel: "high" });
  expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
  const child = (await h.loadedConversation(made.id as never))!;
  expect(h.conversationRecord(child.id)?.owner?.conversationId).toBe(root.id);
  expect(await h.docVersioned(child.id, "pi.agent")).toEqual({ value: undefined, version: undefined });
  expect(await child.agentState()).toEqual({});
  const agent = await child.agent();
  expect(agent.instructions).toBeUndefined();
  expect(agent.thinkingLevel).toBe("off");
  expect(agent.model).toEqual(faux.ref);
});
