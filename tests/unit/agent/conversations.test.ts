/**
 * The conversation API: agent configuration (createConversation, configure, root), the creation hook
 * that gives every conversation its documents (whatever path creates it), a task-owned
 * conversation's inherited agent and recorded owner, and custom documents.
 */
import { fauxToolCall } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { describe, expect, test } from "vitest";
import { defineDoc } from "../../../worker/agent/records.ts";
import { textResult } from "../../../worker/agent/tools/contract.ts";
import type { Tx } from "../../../worker/core/define.ts";
import { WaitCancelled } from "../../../worker/core/errors.ts";
import { type ChangeSet, ROOT_CONVERSATION_ID } from "../../../worker/core/types.ts";
import {
  AgentHarness,
  configure,
  defineEntry,
  defineTool,
  Harness,
  InvalidTransition,
} from "../../../worker/index.ts";
import { deferred, fauxAgentModel, fauxError, memoryStore, until } from "../../../worker/testing.ts";
import { complete, parked, single } from "../core/fixtures.ts";
import {
  callsThenAnswer,
  cleanups,
  echo,
  gatedTool,
  inboxOf,
  itemTool,
  liveOf,
  open,
  reopen,
} from "./fixtures.ts";

const parkedWorker = parked("conversations.worker");
const BUILT_IN_DOCS = ["pi.agent", "pi.live", "pi.inbox", "pi.usage", "pi.provider"] as const;

describe("conversations", () => {
  test("createConversation({ agent }), configure (null clears) and conversation(id) shape what the model gets", async () => {
    const { h, faux } = await open(echo);
    const c = await h.createConversation({
      ownership: { kind: "ownerless" },
      agent: { instructions: "Answer briefly." },
    });
    expect(await c.agentState()).toMatchObject({ instructions: "Answer briefly." });
    await (await c.submit({ type: "input", content: "one" })).wait();
    expect(faux.requests[0]!.systemPrompt).toContain("Answer briefly.");
    await c.configure({ instructions: null });
    expect((await c.agentState()).instructions).toBeUndefined();
    await (await c.submit({ type: "input", content: "two" })).wait();
    expect(faux.requests[1]!.systemPrompt ?? "").not.toContain("Answer briefly.");
    expect(h.conversation(c.id)?.id).toBe(c.id);
    expect(h.conversation(9999)).toBeUndefined();
  });

  test("conversation handles are stateless, told apart by id only: each lookup is a new handle, and any two for one id read and act alike, whatever the other did", async () => {
    const { h } = await open(echo);
    const made = await h.createConversation({ ownership: { kind: "ownerless" } });
    const found = h.conversation(made.id)!;
    expect(found).not.toBe(made);
    expect(found.id).toBe(made.id);
    // Each read goes to the committed state, not to anything a handle kept.
    expect(await made.agentState()).toEqual({});
    // The resolved agent too (draw 33cB: a handle keeping its first agent() passed when only agentState() was read).
    expect((await made.agent()).instructions).toBeUndefined();
    await found.configure({ instructions: "Be brief." });
    expect(await made.agentState()).toEqual({ instructions: "Be brief." });
    expect((await made.agent()).instructions).toBe("Be brief.");
    const kinds = async (c: typeof made) => (await c.entries()).map((e) => [e.id, e.kind]);
    // A handle that read the entries before another one submitted reads the new ones after.
    const earlier = await kinds(found);
    await (await made.submit({ type: "input", content: "one" })).wait();
    expect((await kinds(found)).length).toBeGreaterThan(earlier.length);
    expect(await kinds(found)).toEqual(await kinds(made));
    expect(await kinds(h.conversation(made.id)!)).toEqual(await kinds(made));
  });

  test("root({ agent, init }) creates the root lazily in one commit: the creation hook, then the agent, then init; once it exists both are ignored and nothing is written", async () => {
    const faux = fauxAgentModel(echo);
    const store = await memoryStore();
    const seen: Array<{ id: number; agent: unknown }> = [];
    const options = {
      models: faux.models,
      defaultModel: faux.ref,
      // The host's creation hook runs after the built-in one, before `agent` is applied.
      onConversationCreated: (tx: Tx, record: { id: number }) =>
        seen.push({ id: record.id, agent: tx.readDoc(record.id, "pi.agent") }),
    };
    const h = await AgentHarness.open(store, options);
    cleanups.push(async () => {
      await h.close().catch(() => undefined);
      faux.unregister();
    });
    // Not created at open, and its id stays reserved: another conversation never takes it.
    expect(h.conversation(ROOT_CONVERSATION_ID)).toBeUndefined();
    const other = await h.createConversation({ ownership: { kind: "ownerless" } });
    expect(other.id).not.toBe(ROOT_CONVERSATION_ID);
    expect(h.conversation(ROOT_CONVERSATION_ID)).toBeUndefined();
    // A throwing init creates nothing.
    await expect(
      h.root({
        agent: { instructions: "Never." },
        init: () => {
          throw new Error("init failed");
        },
      }),
    ).rejects.toThrow("init failed");
    expect(h.conversation(ROOT_CONVERSATION_ID)).toBeUndefined();
    seen.length = 0;

    const commits: ChangeSet[] = [];
    const stop = h.subscribe((change) => commits.push(change));
    let initSaw: unknown;
    const root = await h.root({
      agent: { instructions: "First set." },
      init: (tx, id) => {
        initSaw = tx.readDoc(id, "pi.agent");
        tx.writeDoc(id, "app.note", { text: "seeded" });
      },
    });
    expect(root.id).toBe(ROOT_CONVERSATION_ID);
    // One commit: the ownerless root, the built-in documents, the agent and init's write.
    expect(commits).toHaveLength(1);
    const [created] = commits;
    expect(created!.conversations).toEqual([expect.objectContaining({ id: ROOT_CONVERSATION_ID })]);
    expect(created!.conversations[0]!.owner).toBeUndefined();
    const docs = new Map(
      created!.docs.filter((d) => d.conversationId === ROOT_CONVERSATION_ID).map((d) => [d.name, d.value]),
    );
    expect([...docs.keys()].sort()).toEqual([...BUILT_IN_DOCS, "app.note"].sort());
    expect(docs.get("pi.agent")).toEqual({ instructions: "First set." });
    expect(docs.get("app.note")).toEqual({ text: "seeded" });
    // Order inside the commit: the creation hook saw the empty agent, init the configured one.
    expect(seen).toEqual([{ id: ROOT_CONVERSATION_ID, agent: {} }]);
    expect(initSaw).toEqual({ instructions: "First set." });

    // It exists: agent and init are ignored, and nothing is written.
    let initRan = false;
    const again = await h.root({
      agent: { instructions: "Second set." },
      init: () => {
        initRan = true;
      },
    });
    expect(again.id).toBe(ROOT_CONVERSATION_ID);
    expect(initRan).toBe(false);
    expect(commits).toHaveLength(1);
    stop();
    expect(await root.agentState()).toEqual({ instructions: "First set." });
    await (await root.submit({ type: "input", content: "x" })).wait();
    expect(faux.requests[0]!.systemPrompt).toContain("First set.");

    // A reopen finds the same root by its id, and root() there writes nothing either.
    await h.close();
    const h2 = await reopen(store, { models: faux.models, defaultModel: faux.ref });
    expect(h2.conversation(ROOT_CONVERSATION_ID)?.id).toBe(ROOT_CONVERSATION_ID);
    const after: ChangeSet[] = [];
    h2.subscribe((change) => after.push(change));
    const reopened = await h2.root({
      agent: { instructions: "Third set." },
      init: () => void (initRan = true),
    });
    expect(reopened.id).toBe(ROOT_CONVERSATION_ID);
    expect(initRan).toBe(false);
    expect(after).toEqual([]);
    expect(await reopened.agentState()).toEqual({ instructions: "First set." });
    expect(await h2.doc(ROOT_CONVERSATION_ID, "app.note")).toEqual({ text: "seeded" });
  });

  test("two root() calls at once: the one whose commit finds the root just created ignores its agent and init", async () => {
    const faux = fauxAgentModel(echo);
    const h = await AgentHarness.open(await memoryStore(), { models: faux.models, defaultModel: faux.ref });
    cleanups.push(async () => {
      await h.close().catch(() => undefined);
      faux.unregister();
    });
    const inits: string[] = [];
    const commits: ChangeSet[] = [];
    const stop = h.subscribe((change) => commits.push(change));
    const [first, second] = await Promise.all([
      h.root({ agent: { instructions: "First." }, init: () => void inits.push("first") }),
      h.root({ agent: { instructions: "Second." }, init: () => void inits.push("second") }),
    ]);
    stop();
    expect([first.id, second.id]).toEqual([ROOT_CONVERSATION_ID, ROOT_CONVERSATION_ID]);
    expect(inits).toEqual(["first"]);
    expect(await first.agentState()).toEqual({ instructions: "First." });
    // And the second writes nothing, not even what the root already holds (draw 33cA: its commit
    // rewriting pi.agent unchanged passed): only the creating commit carries records.
    const writing = commits.filter(
      (c) =>
        c.docs.length + c.entries.length + c.conversations.length + c.tasks.length + c.submissions.length > 0,
    );
    expect(writing).toHaveLength(1);
    expect(writing[0]!.conversations.map((c) => c.id)).toEqual([ROOT_CONVERSATION_ID]);
  });

  test("ownership is never inferred in a conversation handle's commit: its tx.createTask without one is refused (InvalidTransition) and nothing is created", async () => {
    // Break 28P: the handle's commit defaults a conversation-owned task's conversation; one that
    // also took a missing ownership as conversation-owned passed every named test.
    const { h } = await open(echo);
    const root = await h.root();
    const work = parked("handle-work");
    h.registry.register(work);
    const refused = await root
      .commit((tx) => tx.createTask(work, null, {} as never))
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(InvalidTransition);
    expect(String(refused)).toMatch(/ownership/);
    expect(await h.tasks({ kind: "handle-work" })).toEqual([]);
  });

  test("ownership is never inferred in a conversation handle's commit: its tx.createConversation and tx.forkConversation without one are refused (InvalidTransition) and nothing is created (draw 38b)", async () => {
    // Draw 38b A: the handle's commit taking a missing conversation ownership as ownerless passed
    // every named test, whose handle refusals were of tx.createTask and of the handle's own fork().
    const { h } = await open(echo);
    const root = await h.root();
    const at = await root.commit((tx) => tx.appendEntry(root.id, { kind: "app.note", data: "fork here" }).id);
    const errors: unknown[] = [];
    for (const attempt of [
      (tx: Tx) => tx.createConversation(undefined as never),
      (tx: Tx) => tx.forkConversation(root.id, at, {} as never),
    ])
      errors.push(await root.commit((tx) => void attempt(tx)).catch((e: unknown) => e));
    for (const error of errors) {
      expect(error).toBeInstanceOf(InvalidTransition);
      expect(String(error)).toMatch(/explicit ownership/);
    }
    // Nothing was created: the next conversation made takes the id after the root.
    const next = await h.createConversation({ ownership: { kind: "ownerless" } });
    expect(next.id).toBe(ROOT_CONVERSATION_ID + 1);
  });

  test("a conversation owned by a task starts with a copy of its owner conversation's agent; later owner changes do not reach it", async () => {
    const { tool, started, release } = gatedTool();
    const { h, root } = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "call-1" })), {
      tools: [tool],
      tasks: [parkedWorker],
    });
    await root.configure({ instructions: "Be terse.", thinkingLevel: "low" });
    const sub = await root.submit({ type: "input", content: "go" });
    await started.promise;
    const taskId = liveOf(h).tools![0]!.taskId!;
    const child = await h.createConversation({ ownership: { kind: "task", taskId } });
    expect(await child.agentState()).toEqual({ instructions: "Be terse.", thinkingLevel: "low" });
    // The `agent` option is applied over the hook's copy, field by field (sample 22).
    const tuned = await h.createConversation({
      ownership: { kind: "task", taskId },
      agent: { thinkingLevel: "high" },
    });
    expect(await tuned.agentState()).toEqual({ instructions: "Be terse.", thinkingLevel: "high" });
    // The convenience infers no ownership either: without one, nothing is created.
    const refused = await h.createConversation({} as never).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(InvalidTransition);
    expect(String(refused)).toMatch(/ownership/);
    const ownerless = await h.createConversation({ ownership: { kind: "ownerless" } });
    expect(await ownerless.agentState()).toEqual({});
    await root.configure({ instructions: "Be verbose.", thinkingLevel: null });
    expect(await child.agentState()).toEqual({ instructions: "Be terse.", thinkingLevel: "low" });
    release.resolve();
    expect((await sub.wait()).status).toBe("done");
    // The owner task's own conversation, not the root: a task running in `child` owns the next one.
    await child.configure({ instructions: "Child's own." });
    const worker = await h.createTask(parkedWorker, null, {
      ownership: { kind: "conversation" },
      conversationId: child.id,
    });
    const grandchild = await h.createConversation({ ownership: { kind: "task", taskId: worker } });
    expect(await grandchild.agentState()).toEqual({ instructions: "Child's own.", thinkingLevel: "low" });
    // Its provider session is its own, never the owner's (spec §2.2 pi.provider).
    const sessions = await Promise.all(
      [root.id, child.id, grandchild.id].map(
        async (id) => (await h.doc<{ sessionId: string }>(id, "pi.provider"))!.sessionId,
      ),
    );
    expect(new Set(sessions).size).toBe(3);
    await h.abortTask(worker);
  });

  test("a task-owned conversation copies every field of its owner conversation's stored agent; fields the owner leaves unset stay unset", async () => {
    const { h, root, faux } = await open(echo);
    const full = {
      model: faux.ref,
      thinkingLevel: "low" as const,
      extensions: ["ext.a", "ext.b"],
      tools: ["read"],
      instructions: "Every field.",
    };
    await root.configure(full);
    const worker = await h.createTask(parkedWorker, null, { ownership: { kind: "conversation" } });
    const child = await h.createConversation({ ownership: { kind: "task", taskId: worker } });
    expect(await child.agentState()).toEqual(full);
    // An edit selection and a tools filter are copied as stored, not resolved.
    await root.configure({ extensions: { add: ["ext.c"], remove: ["ext.a"] }, tools: { remove: ["bash"] } });
    await root.configure({ model: null, instructions: null });
    const second = await h.createConversation({ ownership: { kind: "task", taskId: worker } });
    expect(await second.agentState()).toEqual({
      thinkingLevel: "low",
      extensions: { add: ["ext.c"], remove: ["ext.a"] },
      tools: { remove: ["bash"] },
    });
    await h.abortTask(worker);
  });

  test("a conversation keeps its recorded owner after the owner task ended, also after a reopen", async () => {
    const { tool, started, release } = gatedTool();
    const { h, root, store, faux } = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "call-1" })), {
      tools: [tool],
      tasks: [parkedWorker],
    });
    const sub = await root.submit({ type: "input", content: "go" });
    await started.promise;
    const taskId = liveOf(h).tools![0]!.taskId!;
    const child = await h.createConversation({ ownership: { kind: "task", taskId } });
    // Draw 34A: a fork the task owns keeps its owner too (every owned conversation here was a plain
    // creation, so an owner dropped from a fork's record read back passed).
    const [at] = await root.entries({ limit: 1 });
    const fork = await h.forkConversation(root.id, at!.id, { ownership: { kind: "task", taskId } });
    release.resolve();
    await sub.wait();
    expect((await h.getTask(taskId))?.state.status).toBe("terminal");
    const owner = { taskId, conversationId: root.id };
    expect((await h.transaction((tx) => tx.conversation(child.id)))?.owner).toEqual(owner);
    expect((await h.transaction((tx) => tx.conversation(fork.id)))?.owner).toEqual(owner);
    // Break 30G: an owner living in a conversation other than the root (every owner above lived in
    // the root, so a pair stored with the root's id passed): its pair too stays, also after a reopen.
    const worker = await h.createTask(parkedWorker, null, {
      ownership: { kind: "conversation" },
      conversationId: child.id,
    });
    const grandchild = await h.createConversation({ ownership: { kind: "task", taskId: worker } });
    await h.abortTask(worker);
    expect((await h.waitForTask(worker)).state.status).toBe("terminal");
    const deeper = { taskId: worker, conversationId: child.id };
    expect((await h.transaction((tx) => tx.conversation(grandchild.id)))?.owner).toEqual(deeper);
    await h.close();
    const again = await reopen(store, { models: faux.models, defaultModel: faux.ref });
    expect((await again.transaction((tx) => tx.conversation(child.id)))?.owner).toEqual(owner);
    expect((await again.transaction((tx) => tx.conversation(grandchild.id)))?.owner).toEqual(deeper);
    expect((await again.transaction((tx) => tx.conversation(fork.id)))?.owner).toEqual(owner);
  });

  test("the creation hook runs inside tx.createConversation: a raw creation has pi.agent, pi.live, pi.inbox, pi.usage and pi.provider before the call returns", async () => {
    const { h } = await open(echo);
    const seen = await h.transaction((tx) => {
      const created = tx.createConversation({ kind: "ownerless" });
      return { id: created.id, docs: BUILT_IN_DOCS.map((name) => tx.readDoc(created.id, name)) };
    });
    expect(seen.docs.slice(0, 4)).toEqual([{}, {}, { items: [] }, { models: {}, tools: {} }]);
    expect(seen.docs[4]).toMatchObject({ sessionId: expect.any(String) });
    for (const [i, name] of BUILT_IN_DOCS.entries()) expect(await h.doc(seen.id, name)).toEqual(seen.docs[i]);
  });

  test("the creation hook runs for each of several raw creations in one commit: the second and third have their built-in documents before their calls return, each its own session id", async () => {
    // break 30O: every raw creation was the only one in its commit; a hook run for the commit's first
    // creation only passed.
    const { h } = await open(echo);
    const seen = await h.transaction((tx) => {
      const out: Array<{ id: number; docs: unknown[] }> = [];
      for (let i = 0; i < 3; i++) {
        const created = tx.createConversation({ kind: "ownerless" });
        out.push({ id: created.id, docs: BUILT_IN_DOCS.map((name) => tx.readDoc(created.id, name)) });
      }
      return out;
    });
    for (const { docs } of seen) {
      expect(docs.slice(0, 4)).toEqual([{}, {}, { items: [] }, { models: {}, tools: {} }]);
      expect(docs[4]).toMatchObject({ sessionId: expect.any(String) });
    }
    expect(new Set(seen.map(({ docs }) => (docs[4] as { sessionId: string }).sessionId)).size).toBe(3);
    for (const { id, docs } of seen)
      for (const [i, name] of BUILT_IN_DOCS.entries()) expect(await h.doc(id, name)).toEqual(docs[i]);
  });

  test("the creation hook runs inside a raw tx.forkConversation too: the fork's built-in documents, its own session id among them, are there before the call returns, and a configure later in the callback overrides its agent copy", async () => {
    const { h, root } = await open(echo);
    await root.configure({ instructions: "Parent's." });
    await (await root.submit({ type: "input", content: "one" })).wait();
    const at = (await root.entries()).at(-1)!.id;
    const parentSession = (await h.doc<{ sessionId: string }>(root.id, "pi.provider"))!.sessionId;
    const seen = await h.transaction((tx) => {
      const child = tx.forkConversation(root.id, at, { ownership: { kind: "ownerless" } });
      const docs = BUILT_IN_DOCS.map((name) => tx.readDoc(child.id, name));
      configure(tx, child.id, { instructions: "Child's." });
      return { id: child.id, docs };
    });
    expect(seen.docs.slice(0, 4)).toEqual([
      { instructions: "Parent's." },
      {},
      { items: [] },
      { models: {}, tools: {} },
    ]);
    expect(seen.docs[4]).toMatchObject({ sessionId: expect.any(String) });
    expect((seen.docs[4] as { sessionId: string }).sessionId).not.toBe(parentSession);
    expect(await h.conversation(seen.id)!.agentState()).toEqual({ instructions: "Child's." });
    expect(await root.agentState()).toEqual({ instructions: "Parent's." });
  });

  test("the creation hook runs inside a raw tx.createConversation in a tool's commit: the task-owned child has its built-in documents, the owner's agent copied, before the call returns, and a configure later in the callback overrides the copy", async () => {
    const seen: Array<{ id: number; docs: unknown[] }> = [];
    const spawn = defineTool({
      name: "spawn",
      description: "Create a child conversation",
      parameters: Type.Object({}),
      async execute(_args, api) {
        seen.push(
          await api.commit((tx) => {
            const child = tx.createConversation({ kind: "task", taskId: api.taskId });
            const docs = BUILT_IN_DOCS.map((name) => tx.readDoc(child.id, name));
            configure(tx, child.id, { instructions: "Child's." });
            return { id: child.id, docs };
          }),
        );
        return textResult("spawned");
      },
    });
    const { h, root } = await open(callsThenAnswer(fauxToolCall("spawn", {}, { id: "call-1" })), {
      tools: [spawn],
    });
    await root.configure({ instructions: "Owner's.", thinkingLevel: "low" });
    expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
    expect(seen).toHaveLength(1);
    const [{ id, docs }] = seen as [{ id: number; docs: unknown[] }];
    expect(docs.slice(0, 4)).toEqual([
      { instructions: "Owner's.", thinkingLevel: "low" },
      {},
      { items: [] },
      { models: {}, tools: {} },
    ]);
    expect(docs[4]).toMatchObject({ sessionId: expect.any(String) });
    expect(await h.conversation(id)!.agentState()).toEqual({
      instructions: "Child's.",
      thinkingLevel: "low",
    });
    expect(await root.agentState()).toEqual({ instructions: "Owner's.", thinkingLevel: "low" });
  });

  test("an ownerless conversation made by a raw tx.createConversation in a tool's commit starts with an empty pi.agent: not a copy of the calling task's conversation's agent (draw 39e)", async () => {
    // Draw 39e, 7: every named ownerless creation was the host's, outside any task; a hook copying
    // the committing task's conversation's agent into an ownerless child passed them all.
    const seen: Array<{ id: number; agent: unknown }> = [];
    const spawn = defineTool({
      name: "spawn",
      description: "Create an ownerless conversation",
      parameters: Type.Object({}),
      async execute(_args, api) {
        seen.push(
          await api.commit((tx) => {
            const other = tx.createConversation({ kind: "ownerless" });
            return { id: other.id, agent: tx.readDoc(other.id, "pi.agent") };
          }),
        );
        return textResult("spawned");
      },
    });
    const { h, root } = await open(callsThenAnswer(fauxToolCall("spawn", {}, { id: "call-1" })), {
      tools: [spawn],
    });
    await root.configure({ instructions: "Caller's.", thinkingLevel: "low" });
    expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
    expect(seen).toHaveLength(1);
    const [{ id, agent }] = seen as [{ id: number; agent: unknown }];
    expect(agent).toEqual({});
    expect(await h.conversation(id)!.agentState()).toEqual({});
    expect(await root.agentState()).toEqual({ instructions: "Caller's.", thinkingLevel: "low" });
  });

  test("a task-owned fork made by a raw tx.forkConversation in a tool's commit is created with its own pi.inbox too: { items: [] } before the call returns, mounted, its record conversation-scoped, latest, initial (draw 36cB)", async () => {
    // Draw 36cB: every named creation of a task-owned conversation was a plain child, every fork
    // ownerless; a creation hook leaving pi.inbox out for a fork that a task owns passed them all
    // (reads of an absent inbox fall back to an empty one).
    let at = 0;
    const seen: Array<{ id: number; docs: unknown[] }> = [];
    const spawn = defineTool({
      name: "spawn",
      description: "Fork the conversation, owned by this call",
      parameters: Type.Object({}),
      async execute(_args, api) {
        seen.push(
          await api.commit((tx) => {
            const fork = tx.forkConversation(1, at, { ownership: { kind: "task", taskId: api.taskId } });
            return { id: fork.id, docs: BUILT_IN_DOCS.map((name) => tx.readDoc(fork.id, name)) };
          }),
        );
        return textResult("forked");
      },
    });
    const { h, root } = await open(callsThenAnswer(fauxToolCall("spawn", {}, { id: "call-1" })), {
      tools: [spawn],
    });
    expect(root.id).toBe(1);
    at = await h.transaction((tx) => tx.appendEntry(root.id, { kind: "app.note", data: 1 }).id);
    expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
    const [{ id, docs }] = seen as [{ id: number; docs: unknown[] }];
    expect(h.conversationRecord(id)).toMatchObject({ parent: { conversationId: root.id, at } });
    expect(docs[BUILT_IN_DOCS.indexOf("pi.inbox")]).toEqual({ items: [] });
    expect((await h.conversation(id)!.viewState()).docs["pi.inbox"]).toEqual({ items: [] });
    expect(await h.docRecord(id, "pi.inbox")).toMatchObject({
      scope: { kind: "conversation", conversationId: id },
      history: "latest",
      fork: "initial",
    });
  });

  test("onConversationCreated runs after the built-in hook in the creating commit; a throw there creates nothing", async () => {
    let fail = false;
    const seen: Array<{ id: number; live: unknown }> = [];
    const { h } = await open(echo, {
      onConversationCreated: (tx, record) => {
        seen.push({ id: record.id, live: tx.readDoc(record.id, "pi.live") });
        if (fail) throw new Error("refused by the host");
        tx.writeDoc(record.id, "app.tag", { by: "host" });
      },
    });
    const made = await h.createConversation({ ownership: { kind: "ownerless" } });
    expect(seen.at(-1)).toEqual({ id: made.id, live: {} });
    expect(await h.doc(made.id, "app.tag")).toEqual({ by: "host" });
    // Every creation path: a raw creation, a fork and a raw fork, each after the built-in hook.
    await (await made.submit({ type: "input", content: "one" })).wait();
    const at = (await made.entries()).at(-1)!.id;
    const raw = await h.transaction((tx) => tx.createConversation({ kind: "ownerless" }).id);
    const forked = (await made.fork(at, { ownership: { kind: "ownerless" } })).id;
    const rawFork = await h.transaction(
      (tx) => tx.forkConversation(made.id, at, { ownership: { kind: "ownerless" } }).id,
    );
    expect(seen.slice(-3)).toEqual([raw, forked, rawFork].map((id) => ({ id, live: {} })));
    for (const id of [raw, forked, rawFork]) expect(await h.doc(id, "app.tag")).toEqual({ by: "host" });
    fail = true;
    await expect(h.createConversation({ ownership: { kind: "ownerless" } })).rejects.toThrow(
      "refused by the host",
    );
    await expect(made.fork(at, { ownership: { kind: "ownerless" } })).rejects.toThrow("refused by the host");
    expect(h.conversation(rawFork + 1)).toBeUndefined();
    expect(await h.transaction((tx) => tx.conversation(rawFork + 1))).toBeUndefined();
  });

  test("onConversationCreated finds the conversation's pi.inbox already made, { items: [] }, on every creation path (draw 37C)", async () => {
    // Draw 37, 5 (spec §6: pi.inbox is created with every conversation, by the built-in creation
    // hook, which runs before the host's, spec §2.2): the inbox written after the host's hook passed
    // every named test, which read it only once the creating commit was done.
    const seen: Array<{ id: number; inbox: unknown }> = [];
    const { h, root } = await open(echo, {
      onConversationCreated: (tx, record) => {
        seen.push({ id: record.id, inbox: tx.readDoc(record.id, "pi.inbox") });
      },
    });
    const made = await h.createConversation({ ownership: { kind: "ownerless" } });
    await (await made.submit({ type: "input", content: "one" })).wait();
    const at = (await made.entries()).at(-1)!.id;
    const raw = await h.transaction((tx) => tx.createConversation({ kind: "ownerless" }).id);
    const forked = (await made.fork(at, { ownership: { kind: "ownerless" } })).id;
    const rawFork = await h.transaction(
      (tx) => tx.forkConversation(made.id, at, { ownership: { kind: "ownerless" } }).id,
    );
    const ids = [root.id, made.id, raw, forked, rawFork];
    expect(seen.filter((s) => ids.includes(s.id))).toEqual(ids.map((id) => ({ id, inbox: { items: [] } })));
  });

  test("a throw in onConversationCreated fails the creating commit though the callback catches it: a raw creation and a raw fork commit nothing", async () => {
    // Break 30D (contrary): a transaction that caught the hook's throw committed the conversation
    // without the host's documents, and its other writes with it.
    let fail = false;
    const { h, root } = await open(echo, {
      onConversationCreated: (tx, record) => {
        if (fail) throw new Error("refused by the host");
        tx.writeDoc(record.id, "app.tag", { by: "host" });
      },
    });
    await (await root.submit({ type: "input", content: "one" })).wait();
    const at = (await root.entries()).at(-1)!.id;
    const before = await h.transaction(
      (tx) => tx.appendEntry(root.id, { kind: "app.note", data: "before" }).id,
    );
    fail = true;
    const caught: unknown[] = [];
    for (const create of [
      (tx: Tx) => tx.createConversation({ kind: "ownerless" }),
      (tx: Tx) => tx.forkConversation(root.id, at, { ownership: { kind: "ownerless" } }),
    ]) {
      await expect(
        h.transaction((tx) => {
          tx.appendEntry(root.id, { kind: "app.note", data: "beside the creation" });
          try {
            create(tx);
          } catch (error) {
            caught.push(error);
          }
        }),
      ).rejects.toThrow("refused by the host");
    }
    // Each callback caught the hook's throw (the fork's first run caught the engine's "fork point not
    // loaded" too, and ran again once it loaded).
    expect(caught.filter((e) => (e as Error).message === "refused by the host")).toHaveLength(2);
    expect(await h.transaction((tx) => tx.conversation(root.id + 1))).toBeUndefined();
    expect((await root.entries()).at(-1)!.id).toBe(before);
    // The harness goes on: a creation the hook accepts commits.
    fail = false;
    const made = await h.createConversation({ ownership: { kind: "ownerless" } });
    expect(await h.doc(made.id, "app.tag")).toEqual({ by: "host" });
  });

  test("onConversationCreated gets the new record on every path, the root's included, its parent and owner telling forks and task-owned conversations apart, and runs before the convenience's agent change and init", async () => {
    const seen: Array<{ record: unknown; agent: unknown; tag?: unknown }> = [];
    const { h, root } = await open(echo, {
      tasks: [parkedWorker],
      onConversationCreated: (tx, record) => {
        seen.push({ record: { ...record }, agent: tx.readDoc(record.id, "pi.agent") });
        tx.writeDoc(record.id, "app.tag", { n: seen.length });
      },
      root: { agent: { instructions: "Root's." } },
    });
    expect(seen).toEqual([{ record: expect.objectContaining({ id: root.id }), agent: {} }]);
    expect(seen[0]!.record).not.toHaveProperty("parent");
    expect(seen[0]!.record).not.toHaveProperty("owner");
    await (await root.submit({ type: "input", content: "one" })).wait();
    const at = (await root.entries()).at(-1)!.id;
    const worker = await h.createTask(parkedWorker, null, { ownership: { kind: "conversation" } });
    const initSaw: unknown[] = [];
    const owned = await h.createConversation({
      ownership: { kind: "task", taskId: worker },
      agent: { thinkingLevel: "high" },
      init: (tx, id) => void initSaw.push(tx.readDoc(id, "app.tag")),
    });
    expect(seen[1]).toEqual({
      record: expect.objectContaining({ id: owned.id, owner: { taskId: worker, conversationId: root.id } }),
      // The hook's copy of the owner's agent, before the convenience's change.
      agent: { instructions: "Root's." },
    });
    expect(seen[1]!.record).not.toHaveProperty("parent");
    expect(initSaw).toEqual([{ n: 2 }]);
    expect(await owned.agentState()).toEqual({ instructions: "Root's.", thinkingLevel: "high" });
    const forked = await root.fork(at, {
      ownership: { kind: "task", taskId: worker },
      agent: { instructions: null },
      init: (tx, id) => void initSaw.push(tx.readDoc(id, "app.tag")),
    });
    expect(seen[2]).toEqual({
      record: expect.objectContaining({
        id: forked.id,
        parent: { conversationId: root.id, at },
        owner: { taskId: worker, conversationId: root.id },
      }),
      agent: { instructions: "Root's." },
    });
    expect(initSaw).toEqual([{ n: 2 }, { n: 3 }]);
    expect(await forked.agentState()).toEqual({});
    await h.abortTask(worker);
  });

  test("a conversation made by a plain core harness has no built-in documents; Conversation.agent() reads the absent pi.agent as {} and writes nothing", async () => {
    const store = await memoryStore();
    const core = await Harness.open(store);
    const id = await core.transaction((tx) => {
      const created = tx.createConversation({ kind: "ownerless" });
      expect(BUILT_IN_DOCS.map((name) => tx.readDoc(created.id, name))).toEqual(
        BUILT_IN_DOCS.map(() => undefined),
      );
      return created.id;
    });
    // Committed, and a fork of it made by the same plain harness: still no built-in document (break 30I).
    const at = await core.transaction((tx) => tx.appendEntry(id, { kind: "app.note", data: 1 }).id);
    const fork = await core.transaction(
      (tx) => tx.forkConversation(id, at, { ownership: { kind: "ownerless" } }).id,
    );
    // The root too: the plain harness made it at its open (draw 35cA).
    for (const c of [1, id, fork])
      expect(await Promise.all(BUILT_IN_DOCS.map((name) => core.doc(c, name)))).toEqual(
        BUILT_IN_DOCS.map(() => undefined),
      );
    await core.close();
    const { h } = await open(echo, { store: await memoryStore(store.image()) });
    expect(await (await h.loadedConversation(id))!.agentState()).toEqual({});
    expect(await h.doc(id, "pi.agent")).toBeUndefined();
    // Loading it into an agent harness adds none of them either: nothing is backfilled.
    await h.loadedConversation(fork);
    // Nor does asking the agent harness for the root the plain one made (draw 35cA: `root()`
    // backfilling an existing root that lacks pi.agent passed): root() writes nothing when it exists.
    for (const c of [1, id, fork])
      expect(await Promise.all(BUILT_IN_DOCS.map((name) => h.doc(c, name)))).toEqual(
        BUILT_IN_DOCS.map(() => undefined),
      );
  });

  test("a fork at an entry before its parent's first pi.agent starts from initial {}: the asOf copy has no value there, so not the parent's current agent (draw 40c)", async () => {
    // Draw 40c: every named fork copied a pi.agent the parent held at the fork entry, so a fork that
    // took the parent's current agent when the entry had none passed them all.
    const store = await memoryStore();
    const core = await Harness.open(store);
    const { id, at } = await core.transaction((tx) => {
      const created = tx.createConversation({ kind: "ownerless" });
      return { id: created.id, at: tx.appendEntry(created.id, { kind: "app.note", data: 1 }).id };
    });
    await core.close();
    const { h } = await open(echo, { store: await memoryStore(store.image()) });
    const parent = (await h.loadedConversation(id))!;
    await parent.configure({ instructions: "later", thinkingLevel: "high" });
    expect(await h.doc(id, "pi.agent")).toEqual({ instructions: "later", thinkingLevel: "high" });
    const child = await parent.fork(at, { ownership: { kind: "ownerless" } });
    expect(await h.doc(child.id, "pi.agent")).toEqual({});
    expect(await child.agentState()).toEqual({});
    const raw = await h.transaction(
      (tx) => tx.forkConversation(id, at, { ownership: { kind: "ownerless" } }).id,
    );
    expect(await h.doc(raw, "pi.agent")).toEqual({});
  });

  test("configure() neither starts a generation nor appends an entry", async () => {
    const { h, root, faux } = await open(echo);
    let commits = 0;
    h.subscribe(() => commits++);
    await root.configure({ instructions: "Be brief.", thinkingLevel: "high" });
    expect(commits).toBe(1);
    expect(await root.entries()).toEqual([]);
    expect(await h.tasks()).toEqual([]);
    expect(root.busy).toBe(false);
    expect(faux.requests).toHaveLength(0);
    // After a run (its baseline pi.system is in the transcript), a change still appends nothing: the
    // next request's preparation appends the delta (sample 22).
    await (await root.submit({ type: "input", content: "one" })).wait();
    const before = await root.entries();
    expect(before.filter((e) => e.kind === "pi.system")).toHaveLength(1);
    await root.configure({ instructions: "Be verbose." });
    expect(await root.entries()).toEqual(before);
    // Every field, through the handle and through configure(tx) (draw 34c: a model change that
    // appended an entry of its own, as some harnesses record one, passed with instructions alone).
    await root.configure({ model: faux.ref, tools: null, extensions: null });
    await h.transaction((tx) => configure(tx, root.id, { model: faux.ref, thinkingLevel: "low" }));
    expect(await root.entries()).toEqual(before);
    expect(root.busy).toBe(false);
    expect(faux.requests).toHaveLength(1);
    await (await root.submit({ type: "input", content: "two" })).wait();
    const added = (await root.entries()).slice(before.length).map((e) => e.kind);
    expect(added).toEqual(["pi.user", "pi.system", "pi.assistant"]);
  });

  test("configure() on an idle conversation whose failed run left a follow-up queued starts nothing: through the handle or configure(tx) the item stays queued until the next submission", async () => {
    // Break 29D: the named test configures a conversation with an empty inbox; a configure that
    // placed the queued items (a model fixed, the work resumed) passed it.
    const hold = deferred();
    const { h, root, faux } = await open(async (req, n) => {
      if (n === 1) {
        await hold.promise;
        return fauxError("400 invalid request");
      }
      return echo(req, n);
    });
    const first = await root.submit({ type: "input", content: "one" });
    const followUp = await root.submit({ type: "input", content: "two" });
    hold.resolve();
    expect(await first.wait()).toMatchObject({ status: "unanswered", reason: "model_error" });
    await root.waitForIdle();
    const before = await root.entries();
    const tasks = (await h.tasks()).length;
    await root.configure({ instructions: "Be brief." });
    await h.transaction((tx) => configure(tx, root.id, { thinkingLevel: "high" }));
    expect(root.busy).toBe(false);
    expect((await followUp.record()).status).toBe("queued");
    expect(inboxOf(h).items.map((i) => i.id)).toEqual([followUp.id]);
    expect(await root.entries()).toEqual(before);
    expect((await h.tasks()).length).toBe(tasks);
    expect(faux.requests).toHaveLength(1);
    const third = await root.submit({ type: "input", content: "three" });
    expect(await followUp.wait()).toMatchObject({ status: "done" });
    expect(await third.wait()).toMatchObject({ status: "done" });
  });

  test("Conversation.entries() is bound to its conversation and pages by afterId and limit", async () => {
    const { h, root } = await open(echo);
    const other = await h.createConversation({ ownership: { kind: "ownerless" } });
    await h.transaction((tx) => {
      for (let i = 0; i < 5; i++) {
        tx.appendEntry(root.id, { kind: "app.note", data: `root ${i}` });
        tx.appendEntry(other.id, { kind: "app.note", data: `other ${i}` });
      }
    });
    const all = await root.entries();
    expect(all.map((e) => e.data)).toEqual(["root 0", "root 1", "root 2", "root 3", "root 4"]);
    const first = await root.entries({ limit: 2 });
    const next = await root.entries({ afterId: first.at(-1)!.id, limit: 2 });
    const rest = await root.entries({ afterId: next.at(-1)!.id });
    expect([...first, ...next, ...rest]).toEqual(all);
    expect([first.length, next.length, rest.length]).toEqual([2, 2, 1]);
    expect((await other.entries()).every((e) => e.conversationId === other.id)).toBe(true);
  });

  test("Conversation.entries() of a fork pages its fork-aware history across the fork point; a conversation id in the query is not taken", async () => {
    const { h, root } = await open(echo);
    const ids = await h.transaction((tx) =>
      [0, 1, 2, 3, 4].map((i) => tx.appendEntry(root.id, { kind: "app.note", data: `root ${i}` }).id),
    );
    const child = await root.fork(ids[2]!, { ownership: { kind: "ownerless" } });
    await h.transaction((tx) => {
      for (let i = 0; i < 3; i++) tx.appendEntry(child.id, { kind: "app.note", data: `child ${i}` });
    });
    const all = await child.entries();
    expect(all.map((e) => e.data)).toEqual(["root 0", "root 1", "root 2", "child 0", "child 1", "child 2"]);
    const pages: unknown[][] = [];
    let afterId: number | undefined;
    // At most one page past the three expected: an afterId that were not taken would page forever.
    for (let n = 0; n < 4; n++) {
      const page = await child.entries({ ...(afterId !== undefined ? { afterId } : {}), limit: 2 });
      if (page.length === 0) break;
      pages.push(page.map((e) => e.data));
      afterId = page.at(-1)!.id;
    }
    expect(pages).toEqual([
      ["root 0", "root 1"],
      ["root 2", "child 0"],
      ["child 1", "child 2"],
    ]);
    // The query is bound: another conversation's id in it is not taken.
    expect(await child.entries({ conversationId: root.id } as never)).toEqual(all);
    expect(await root.entries({ conversationId: child.id, limit: 10 } as never)).toHaveLength(5);
  });

  test("Conversation.entries() with a limit of 0 is an empty page, on a conversation and across a fork point; a fork of a fork read after a reopen pages the same", async () => {
    // Sweep 42, 33: the tests above page with limits of 2 and none; a limit of 0 read as no limit
    // (fork.ts, `limit || -1`) passed them all. A page holds at most `limit` entries.
    const store = await memoryStore();
    const { h, root } = await open(echo, { store });
    const ids = await h.transaction((tx) =>
      [0, 1, 2].map((i) => tx.appendEntry(root.id, { kind: "app.note", data: `root ${i}` }).id),
    );
    const child = await root.fork(ids[1]!, { ownership: { kind: "ownerless" } });
    const childIds = await h.transaction((tx) =>
      [0, 1].map((i) => tx.appendEntry(child.id, { kind: "app.note", data: `child ${i}` }).id),
    );
    const grandchild = await child.fork(childIds[0]!, { ownership: { kind: "ownerless" } });
    await h.transaction((tx) => tx.appendEntry(grandchild.id, { kind: "app.note", data: "grandchild 0" }));
    expect(await root.entries({ limit: 0 })).toEqual([]);
    expect(await grandchild.entries({ limit: 0 })).toEqual([]);
    expect(await grandchild.entries({ afterId: ids[0]!, limit: 0 })).toEqual([]);
    const all = await grandchild.entries();
    expect(all.map((e) => e.data)).toEqual(["root 0", "root 1", "child 0", "grandchild 0"]);
    const image = store.image();
    await h.close();
    // After a reopen nothing of the three is in memory: the handle's read finds the whole ancestry.
    const again = await open(echo, { store: await memoryStore(image) });
    const reread = (await again.h.loadedConversation(grandchild.id))!;
    expect(await reread.entries()).toEqual(all);
    expect((await reread.entries({ afterId: ids[0]!, limit: 2 })).map((e) => e.data)).toEqual([
      "root 1",
      "child 0",
    ]);
    expect(await reread.entries({ limit: 0 })).toEqual([]);
  });

  test("createConversation's and fork's init run in the creating commit after the creation hook and the agent change; a throw in it creates nothing", async () => {
    const { h, root } = await open(echo);
    const seen: unknown[] = [];
    const made = await h.createConversation({
      ownership: { kind: "ownerless" },
      agent: { instructions: "Set first." },
      init: (tx, id) => {
        seen.push(tx.readDoc(id, "pi.agent"), tx.readDoc(id, "pi.live"));
        tx.appendEntry(id, { kind: "app.note", data: "welcome" });
      },
    });
    expect(seen).toEqual([{ instructions: "Set first." }, {}]);
    expect((await made.entries()).map((e) => e.data)).toEqual(["welcome"]);
    await expect(
      h.createConversation({
        ownership: { kind: "ownerless" },
        init: () => {
          throw new Error("init refused");
        },
      }),
    ).rejects.toThrow("init refused");
    expect(h.conversation(made.id + 1)).toBeUndefined();

    // A fork: one commit with the child, its ownership, the hook's documents, the agent, init's writes.
    await (await root.submit({ type: "input", content: "hello" })).wait();
    const at = (await root.entries()).at(-1)!.id;
    const commits: ChangeSet[] = [];
    const stop = h.subscribe((change) => commits.push(change));
    const forkSaw: unknown[] = [];
    const fork = await root.fork(at, {
      ownership: { kind: "ownerless" },
      agent: { instructions: "Forked." },
      init: (tx, id) => {
        forkSaw.push(tx.readDoc(id, "pi.agent"), tx.readDoc(id, "pi.inbox"));
        tx.appendEntry(id, { kind: "app.note", data: "fork note" });
      },
    });
    expect(commits).toHaveLength(1);
    expect(commits[0]!.conversations).toEqual([
      expect.objectContaining({ id: fork.id, parent: { conversationId: root.id, at } }),
    ]);
    expect(commits[0]!.conversations[0]!.owner).toBeUndefined();
    expect(commits[0]!.entries.map((e) => [e.conversationId, e.data])).toEqual([[fork.id, "fork note"]]);
    expect(
      commits[0]!.docs
        .filter((d) => d.conversationId === fork.id)
        .map((d) => d.name)
        .sort(),
    ).toEqual([...BUILT_IN_DOCS].sort());
    expect(forkSaw).toEqual([{ instructions: "Forked." }, { items: [] }]);
    expect((await fork.entries()).at(-1)!.data).toBe("fork note");
    // A throwing init forks nothing: no conversation, no entry, no commit.
    const before = h.conversationRecords().length;
    await expect(
      root.fork(at, {
        ownership: { kind: "ownerless" },
        init: (tx, id) => {
          tx.appendEntry(id, { kind: "app.note", data: "lost" });
          throw new Error("fork init refused");
        },
      }),
    ).rejects.toThrow("fork init refused");
    expect(h.conversationRecords()).toHaveLength(before);
    expect(commits).toHaveLength(1);
    // Draw 36c: a refused creation takes no id either: the fork after the refused createConversation
    // is the next id, and so is the fork after the refused fork (a counter advanced outside the
    // rolled-back commit passed every test).
    expect(fork.id).toBe(made.id + 1);
    const next = await root.fork(at, { ownership: { kind: "ownerless" } });
    expect(next.id).toBe(fork.id + 1);
    stop();
  });

  test("a fork's agent change applies over the parent's agent as of the fork entry, field by field, before init (draw 39)", async () => {
    // Draw 39A: every fork with an `agent` option forked a parent whose agent held no field it left;
    // a fork writing its agent change over an empty agent (the asOf copy lost) passed every test.
    const { root, faux } = await open(echo);
    await root.configure({ instructions: "Be terse.", thinkingLevel: "low", model: faux.ref });
    await (await root.submit({ type: "input", content: "hello" })).wait();
    const at = (await root.entries()).at(-1)!.id;
    await root.configure({ model: null });
    const initSaw: unknown[] = [];
    const fork = await root.fork(at, {
      ownership: { kind: "ownerless" },
      agent: { thinkingLevel: "high", instructions: null },
      init: (tx, id) => {
        initSaw.push(tx.readDoc(id, "pi.agent"));
      },
    });
    expect(initSaw).toEqual([{ thinkingLevel: "high", model: faux.ref }]);
    expect(await fork.agentState()).toEqual({ thinkingLevel: "high", model: faux.ref });
    expect(await root.agentState()).toEqual({ instructions: "Be terse.", thinkingLevel: "low" });
  });

  test("init has document access in every creating commit: createConversation's and fork's init write their conversation's documents and read them back, and read another conversation's (draw 40b, 5)", async () => {
    // Draw 40b: only root()'s init wrote a document; the others read the built-in ones and appended
    // entries, so a write refused in any commit that forks (not only to the forked parent's copied
    // documents) passed every init test.
    const { h, root } = await open(echo);
    await h.transaction((tx) => tx.writeDoc(root.id, "app.setting", { theme: "dark" }));
    const seen: unknown[] = [];
    const made = await h.createConversation({
      ownership: { kind: "ownerless" },
      init: (tx, id) => {
        tx.writeDoc(id, "app.tag", { by: "init" });
        seen.push(tx.readDoc(id, "app.tag"), tx.readDoc(root.id, "app.setting"));
      },
    });
    expect(seen).toEqual([{ by: "init" }, { theme: "dark" }]);
    expect(await h.transaction((tx) => tx.readDoc(made.id, "app.tag"))).toEqual({ by: "init" });
    await (await root.submit({ type: "input", content: "hello" })).wait();
    const at = (await root.entries()).at(-1)!.id;
    seen.length = 0;
    const fork = await root.fork(at, {
      ownership: { kind: "ownerless" },
      init: (tx, id) => {
        // Its copy of the parent's document, the parent's own, then its own write over the copy.
        seen.push(tx.readDoc(id, "app.setting"), tx.readDoc(root.id, "app.setting"));
        tx.writeDoc(id, "app.setting", { theme: "light" });
        tx.writeDoc(id, "app.tag", { by: "fork init" });
        seen.push(tx.readDoc(id, "app.setting"));
      },
    });
    expect(seen).toEqual([{ theme: "dark" }, { theme: "dark" }, { theme: "light" }]);
    expect(
      await h.transaction((tx) => [
        tx.readDoc(fork.id, "app.setting"),
        tx.readDoc(fork.id, "app.tag"),
        tx.readDoc(root.id, "app.setting"),
      ]),
    ).toEqual([{ theme: "light" }, { by: "fork init" }, { theme: "dark" }]);
  });

  test("an async init (ConversationInit may return a promise) is awaited in the creating commit of createConversation, fork and root(): its writes after an await land there, a rejection creates nothing", async () => {
    // Break 28J: every init above was synchronous; an init called without awaiting its promise
    // passed them all (its throw is synchronous).
    const faux = fauxAgentModel(echo);
    const h = await AgentHarness.open(await memoryStore(), { models: faux.models, defaultModel: faux.ref });
    cleanups.push(async () => {
      await h.close().catch(() => undefined);
      faux.unregister();
    });
    const later = (tx: Tx, id: number, data: string) => async () => {
      await Promise.resolve();
      await new Promise((resolve) => setTimeout(resolve, 5));
      tx.appendEntry(id, { kind: "app.note", data });
    };
    const refusing = async () => {
      await new Promise((resolve) => setTimeout(resolve, 5));
      throw new Error("async init refused");
    };
    const commits: ChangeSet[] = [];
    const stop = h.subscribe((change) => commits.push(change));
    // The root: a rejecting async init creates nothing; then one commit with the note.
    await expect(h.root({ init: refusing })).rejects.toThrow("async init refused");
    expect(h.conversation(ROOT_CONVERSATION_ID)).toBeUndefined();
    const root = await h.root({ init: (tx, id) => later(tx, id, "root note")() });
    expect(commits).toHaveLength(1);
    expect(commits[0]!.entries.map((e) => [e.conversationId, e.data])).toEqual([[root.id, "root note"]]);
    // createConversation: the same.
    const count = h.conversationRecords().length;
    await expect(h.createConversation({ ownership: { kind: "ownerless" }, init: refusing })).rejects.toThrow(
      "async init refused",
    );
    expect(h.conversationRecords()).toHaveLength(count);
    const made = await h.createConversation({
      ownership: { kind: "ownerless" },
      init: (tx, id) => later(tx, id, "made note")(),
    });
    expect(commits).toHaveLength(2);
    expect(commits[1]!.conversations.map((c) => c.id)).toEqual([made.id]);
    expect(commits[1]!.entries.map((e) => [e.conversationId, e.data])).toEqual([[made.id, "made note"]]);
    // fork: the same.
    await (await root.submit({ type: "input", content: "hello" })).wait();
    const at = (await root.entries()).at(-1)!.id;
    const before = h.conversationRecords().length;
    await expect(root.fork(at, { ownership: { kind: "ownerless" }, init: refusing })).rejects.toThrow(
      "async init refused",
    );
    expect(h.conversationRecords()).toHaveLength(before);
    commits.length = 0;
    const fork = await root.fork(at, {
      ownership: { kind: "ownerless" },
      init: (tx, id) => later(tx, id, "fork note")(),
    });
    expect(commits).toHaveLength(1);
    expect(commits[0]!.entries.map((e) => [e.conversationId, e.data])).toEqual([[fork.id, "fork note"]]);
    stop();
  });

  test("configure(tx, id, change) edits pi.agent inside any commit, also the creating one, over the creation hook's copy", async () => {
    const { h, root } = await open(echo);
    await root.configure({ instructions: "Owner's.", thinkingLevel: "low" });
    const id = await h.transaction((tx) => {
      const created = tx.createConversation({ kind: "ownerless" });
      configure(tx, created.id, { thinkingLevel: "high" });
      configure(tx, root.id, { instructions: null });
      return created.id;
    });
    expect(await h.conversation(id)!.agentState()).toEqual({ thinkingLevel: "high" });
    expect(await root.agentState()).toEqual({ thinkingLevel: "low" });
    // Over a copy holding several fields (a fork's): the given field replaces its own, the rest stay.
    await root.configure({ instructions: "Again." });
    await (await root.submit({ type: "input", content: "one" })).wait();
    const at = (await root.entries()).at(-1)!.id;
    const fork = await h.transaction((tx) => {
      const child = tx.forkConversation(root.id, at, { ownership: { kind: "ownerless" } });
      configure(tx, child.id, { thinkingLevel: "high" });
      return child.id;
    });
    expect(await h.conversation(fork)!.agentState()).toEqual({
      instructions: "Again.",
      thinkingLevel: "high",
    });
  });

  test("several configure calls in one commit each edit what the one before wrote: in the creating commit and in a later one, also after a reopen (draw 35d)", async () => {
    // Spec §2.2: configure edits pi.agent inside the commit, so a second call in the same commit
    // starts from the first one's write (a base read once per commit loses the first's fields).
    const faux = fauxAgentModel(echo);
    const store = await memoryStore();
    const h = await AgentHarness.open(store, { models: faux.models, defaultModel: faux.ref });
    const root = await h.root();
    const id = await h.transaction((tx) => {
      const created = tx.createConversation({ kind: "ownerless" });
      configure(tx, created.id, { thinkingLevel: "high" });
      configure(tx, created.id, { instructions: "Second." });
      configure(tx, root.id, { instructions: "Root's." });
      configure(tx, root.id, { thinkingLevel: "low" });
      return created.id;
    });
    expect(await h.conversation(id)!.agentState()).toEqual({
      thinkingLevel: "high",
      instructions: "Second.",
    });
    expect(await root.agentState()).toEqual({ instructions: "Root's.", thinkingLevel: "low" });
    await h.transaction((tx) => {
      configure(tx, id, { instructions: null });
      configure(tx, id, { thinkingLevel: "minimal" });
    });
    expect(await h.conversation(id)!.agentState()).toEqual({ thinkingLevel: "minimal" });
    await h.close();
    const h2 = await reopen(store, { models: faux.models, defaultModel: faux.ref });
    expect(await (await h2.loadedConversation(id))!.agentState()).toEqual({ thinkingLevel: "minimal" });
    expect(await (await h2.root()).agentState()).toEqual({ instructions: "Root's.", thinkingLevel: "low" });
    await h2.close();
  });

  test("configure replaces whole fields: a given object replaces the stored one, never merged into it; null clears; a field given as undefined is left as stored", async () => {
    // The rule (configure, spec §2.2): a given field replaces, null clears, undefined leaves (break 26H: the
    // named tests gave no object over a stored object, and never an explicit undefined).
    const { root } = await open(echo);
    await root.configure({
      extensions: { add: ["ext.a"], remove: ["ext.b"] },
      tools: { remove: ["bash"] },
      instructions: "Kept.",
      thinkingLevel: "low",
    });
    // A JavaScript caller may give a field as undefined (the TypeScript type leaves such a field out).
    const change = {
      extensions: { add: ["ext.c"] },
      tools: { remove: ["read"] },
      instructions: undefined,
      thinkingLevel: null,
    } as unknown as Parameters<typeof root.configure>[0];
    await root.configure(change);
    expect(await root.agentState()).toEqual({
      extensions: { add: ["ext.c"] },
      tools: { remove: ["read"] },
      instructions: "Kept.",
    });
    // An empty value given is given, not a clear (break 30M: a falsy check cleared "" and kept nothing apart).
    await root.configure({ instructions: "", extensions: [] });
    expect(await root.agentState()).toEqual({
      extensions: [],
      tools: { remove: ["read"] },
      instructions: "",
    });
  });

  test("defineEntry: a typed entry kind drafts its entries and recognises them; pi. kinds are reserved", async () => {
    const bookmark = defineEntry<{ label: string }>("app.bookmark");
    const { h, root } = await open(echo);
    await h.transaction((tx) => {
      // A kind that merely extends this one's name is another kind (break 29M: `is` by prefix).
      tx.appendEntry(root.id, { kind: "app.bookmark.old", data: { label: "prefix" } });
      tx.appendEntry(root.id, bookmark.draft({ label: "start" }));
      tx.appendEntry(root.id, { kind: "app.other", data: { label: "no" } });
    });
    const entries = await root.entries();
    expect(bookmark.kind).toBe("app.bookmark");
    expect(bookmark.is(entries.at(-3))).toBe(false);
    expect(entries.filter(bookmark.is).map((e) => e.data.label)).toEqual(["start"]);
    // spec §2.2: `is(entry: EntryRecord | undefined)`, so a lookup that found nothing is simply not one.
    expect(bookmark.is(entries.at(-1))).toBe(false);
    expect(bookmark.is(entries.at(-2))).toBe(true);
    expect(bookmark.is(entries[99])).toBe(false);
    expect(bookmark.is(undefined)).toBe(false);
    expect(() => defineEntry("pi.mine")).toThrow(TypeError);
    expect(() => defineEntry("")).toThrow(TypeError);
    // Only the `pi.` namespace is reserved: a kind that merely begins with the letters is the app's
    // (draw 35cA: a check by `startsWith("pi")` refused these and passed).
    for (const kind of ["pizza.order", "pi-extension.note", "pi"]) {
      const own = defineEntry(kind);
      expect(own.kind).toBe(kind);
      expect(own.is(own.draft(null) as never)).toBe(true);
    }
    // A draft keeps its data whatever it is: a falsy value is the entry's data, appended and read back
    // as given (draw 36b-A: a draft that left out a falsy data passed, every data above being an
    // object or only asked of `is()`).
    const count = defineEntry<number | boolean | string | null>("app.count");
    const falsy = [0, false, "", null];
    expect(falsy.map((d) => count.draft(d))).toEqual(falsy.map((data) => ({ kind: "app.count", data })));
    await h.transaction((tx) => {
      for (const d of falsy) tx.appendEntry(root.id, count.draft(d));
    });
    const counted = (await root.entries()).filter(count.is);
    expect(counted.map((e) => [e.kind, "data" in e, e.data])).toEqual(
      falsy.map((d) => ["app.count", true, d]),
    );
  });

  test("a configure during a request applies at the next preparation: the request in flight keeps the prompt it was prepared with", async () => {
    const hold = deferred();
    const { tool } = itemTool({});
    const { root, faux } = await open(
      async (req, n) => {
        if (n === 1) await hold.promise;
        return callsThenAnswer(fauxToolCall("apply", { item: "a" }, { id: "call-1" }))(req, n);
      },
      { tools: [tool] },
    );
    await root.configure({ instructions: "Old rule." });
    const sub = await root.submit({ type: "input", content: "go" });
    await until(() => faux.requests.length === 1, { what: "first request sent" });
    await root.configure({ instructions: "New rule." });
    hold.resolve();
    expect((await sub.wait()).status).toBe("done");
    expect(faux.requests.map((r) => r.systemPrompt)).toEqual([
      expect.stringContaining("Old rule."),
      expect.stringContaining("New rule."),
    ]);
    expect(faux.requests[0]!.systemPrompt).not.toContain("New rule.");
  });

  test("Conversation.commit() is a commit bound to its conversation: a conversation-owned task it creates lands there", async () => {
    const { h } = await open(echo);
    const noop = single("bound-noop", async (_t, runtime) => {
      await runtime.commit(() => complete(null));
    });
    h.registry.register(noop);
    const other = await h.createConversation({ ownership: { kind: "ownerless" } });
    const [bound, elsewhere] = await other.commit((tx) => [
      tx.createTask(noop, null, { ownership: { kind: "conversation" } }),
      tx.createTask(noop, null, { ownership: { kind: "conversation" }, conversationId: 1 }),
    ]);
    expect((await h.getTask(bound!))?.conversationId).toBe(other.id);
    expect((await h.getTask(elsewhere!))?.conversationId).toBe(1);
    expect(await other.commit((tx) => tx.appendEntry(other.id, { kind: "app.note" }).conversationId)).toBe(
      other.id,
    );
  });

  test("Conversation.commit() binds a background conversation-owned task too: it lands in the bound conversation, background (draw 39)", async () => {
    // Draw 39A: every task the bound commits in the tests created was a foreground one; a binding
    // that defaulted only non-background tasks (a background one landing in the root) passed them.
    const { h } = await open(echo);
    const noop = single("bound-background-noop", async (_t, runtime) => {
      await runtime.commit(() => complete(null));
    });
    h.registry.register(noop);
    const other = await h.createConversation({ ownership: { kind: "ownerless" } });
    const [background, foreground] = await other.commit((tx) => [
      tx.createTask(noop, null, { ownership: { kind: "conversation" }, background: true }),
      tx.createTask(noop, null, { ownership: { kind: "conversation" }, background: false }),
    ]);
    const records = await Promise.all([h.getTask(background!), h.getTask(foreground!)]);
    expect(records.map((r) => [r?.conversationId, r?.background])).toEqual([
      [other.id, true],
      [other.id, false],
    ]);
  });

  test("Conversation.commit() stays bound after an await in its callback: a conversation-owned task an async callback creates later lands in the bound conversation (draw 33c)", async () => {
    // Draw 33cA: every bound commit in the tests had a synchronous callback; a binding that ended when
    // the callback returned its promise (not when it settled) passed them.
    const { h } = await open(echo);
    const noop = single("bound-async-noop", async (_t, runtime) => {
      await runtime.commit(() => complete(null));
    });
    h.registry.register(noop);
    const other = await h.createConversation({ ownership: { kind: "ownerless" } });
    const [before, after] = await other.commit(async (tx) => {
      const first = tx.createTask(noop, null, { ownership: { kind: "conversation" } });
      await Promise.resolve();
      await new Promise<void>((resolve) => setTimeout(resolve, 0));
      return [first, tx.createTask(noop, null, { ownership: { kind: "conversation" } })];
    });
    expect((await h.getTask(before))?.conversationId).toBe(other.id);
    expect((await h.getTask(after))?.conversationId).toBe(other.id);
  });

  test("a task-owned task created in another conversation's Conversation.commit() lands in its owner's conversation, not the bound one (break 30G)", async () => {
    // Break 30G: every task-owned creation the tests made was a task's own commit or a host
    // transaction; a bound commit that filled in its own conversation for a task-owned task too (so
    // refusing it, its owner living elsewhere) passed them. The bound default is the conversation
    // owned tasks' only (spec §5: the owner task's conversation first).
    const { h, root } = await open(echo, { tasks: [parkedWorker] });
    const owner = await h.createTask(parkedWorker, null, {
      ownership: { kind: "conversation" },
      conversationId: root.id,
    });
    const other = await h.createConversation({ ownership: { kind: "ownerless" } });
    const child = await other.commit((tx) =>
      tx.createTask(parkedWorker, null, { ownership: { kind: "task", taskId: owner } }),
    );
    expect(await h.getTask(child)).toMatchObject({ owner, conversationId: root.id });
    // (draw 39d) The bound commit passes a task-owned creation on as given: naming the bound
    // conversation (not the owner's) is refused, and so is a background child; nothing is created.
    const before = (await h.tasks({ kind: parkedWorker.name })).length;
    for (const bad of [{ conversationId: other.id }, { background: true }])
      await expect(
        other.commit((tx) =>
          tx.createTask(parkedWorker, null, { ownership: { kind: "task", taskId: owner }, ...bad }),
        ),
      ).rejects.toBeInstanceOf(InvalidTransition);
    expect((await h.tasks({ kind: parkedWorker.name })).length).toBe(before);
    await h.abortTask(owner);
  });

  test("Conversation.commit() with an aborted signal is refused like the harness's commit: WaitCancelled, the callback not run, nothing written (draw 32c)", async () => {
    // Draw 32c: every bound commit the tests made had no signal; a handle that dropped its signal
    // (committing what the caller had cancelled) passed them.
    const { h } = await open(echo);
    const other = await h.createConversation({ ownership: { kind: "ownerless" } });
    const before = (await other.entries()).length;
    let ran = false;
    const error = await other
      .commit((tx) => {
        ran = true;
        tx.appendEntry(other.id, { kind: "app.note" });
      }, AbortSignal.abort())
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WaitCancelled);
    expect(ran).toBe(false);
    expect(await other.entries()).toHaveLength(before);
  });

  test("defineDoc: a custom document reads its initial value until written, and shows in the view", async () => {
    const notes = defineDoc<{ items: string[] }>("app.notes", { items: [] });
    const { h, root } = await open(echo);
    expect(await h.transaction((tx) => notes.read(tx, root.id))).toEqual({ items: [] });
    await h.transaction((tx) => notes.write(tx, root.id, { items: ["a"] }));
    expect(await h.transaction((tx) => notes.read(tx, root.id))).toEqual({ items: ["a"] });
    expect((await root.viewState()).docs["app.notes"]).toEqual({ items: ["a"] });
    expect(() => defineDoc("pi.custom", {})).toThrow(TypeError);
    // An initial given as a function is called for each document it creates, never once for all
    // (spec §3.1 `initial()`, §3.3 "a missing singleton calls the token's initial()"; break 31C).
    let made = 0;
    const stamped = defineDoc<{ n: number }>({ name: "app.stamped", initial: () => ({ n: ++made }) });
    const other = await h.createConversation({ ownership: { kind: "ownerless" } });
    expect(await h.transaction((tx) => stamped.read(tx, root.id))).toEqual({ n: 1 });
    expect(await h.transaction((tx) => stamped.read(tx, other.id))).toEqual({ n: 2 });
    expect(await h.transaction((tx) => stamped.read(tx, root.id))).toEqual({ n: 1 });
  });

  test("once admitted, a conversation handle's commit(), submit() and configure() whose signal is cancelled before their callbacks run still commit and resolve (sweep 42)", async () => {
    const { h, root, faux, store } = await open(echo);
    // Hold the line so the three are admitted behind it, then cancel their signal before they run.
    const gate = deferred();
    const holding = h.transaction(async (tx) => {
      await gate.promise;
      tx.appendEntry(root.id, { kind: "app.note", data: "holding" });
    });
    const cancel = new AbortController();
    const committed = root.commit(
      (tx) => tx.appendEntry(root.id, { kind: "app.note", data: "by commit" }).id,
      cancel.signal,
    );
    const submitted = root.submit(
      { type: "write", entry: { kind: "app.note", data: "by submit" } },
      cancel.signal,
    );
    const configured = root.configure({ instructions: "kept" }, cancel.signal);
    cancel.abort();
    gate.resolve();
    await holding;
    expect(typeof (await committed)).toBe("number");
    expect((await (await submitted).record()).status).toBe("done");
    await configured;
    await h.close();
    // What the store holds, not only memory.
    const again = await reopen(store, { models: faux.models, defaultModel: faux.ref });
    const notes = (await again.conversation(root.id)!.entries()).filter((e) => e.kind === "app.note");
    expect(notes.map((e) => e.data)).toEqual(["holding", "by commit", "by submit"]);
    expect(await again.conversation(root.id)!.agentState()).toEqual({ instructions: "kept" });
  });
});
