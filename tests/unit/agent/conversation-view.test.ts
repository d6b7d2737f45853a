/**
 * The conversation view (spec §9.3, §6, §8.2, §8.6): every Harness conversation is created with its
 * built-in documents, mounted by kind under `docs`; the view shows only committed state; a head
 * marker restarts the mounted entries at its head.
 */
import { fauxAssistantMessage, fauxToolCall } from "@mariozechner/pi-ai";
import { expect, test } from "vitest";
import { SUMMARY_SYSTEM_PROMPT } from "../../../worker/agent/compaction/task.ts";
import { zeroUsage } from "../../../worker/agent/records.ts";
import type { Json } from "../../../worker/index.ts";
import { echo, gatedTool, open } from "./fixtures.ts";

test("every conversation is created with pi.agent, pi.live, pi.inbox, pi.usage and pi.provider, mounted by kind", async () => {
  const { h, root } = await open(echo);
  const child = await h.createConversation({ ownership: { kind: "ownerless" } });
  // A fork is created with them too: its own, fresh (their fork rule is "initial"), not its parent's.
  const parent = await h.createConversation({ ownership: { kind: "ownerless" } });
  const at = await h.transaction((tx) => tx.appendEntry(parent.id, { kind: "note", data: 1 }).id);
  const fork = await parent.fork(at, { ownership: { kind: "ownerless" } });
  for (const c of [root, child, fork]) {
    const { docs, entries } = await c.viewState();
    expect(Object.keys(docs).sort()).toEqual(["pi.agent", "pi.inbox", "pi.live", "pi.provider", "pi.usage"]);
    expect(docs["pi.live"]).toEqual({});
    expect(docs["pi.inbox"]).toEqual({ items: [] });
    expect(docs["pi.usage"]).toEqual({ models: {}, tools: {} });
    expect(typeof (docs["pi.provider"] as { sessionId?: unknown }).sessionId).toBe("string");
    expect(entries.map((e) => e.id)).toEqual(c === fork ? [at] : []);
    // Each built-in document's record carries the scope, history and fork of its table in the
    // specification (§2.2 pi.agent and pi.provider, §6 pi.inbox, §8.2 pi.live, §8.6 pi.usage).
    const rules = async (name: string) => {
      const r = await h.docRecord(c.id, name);
      return r && "history" in r ? { scope: r.scope, history: r.history, fork: r.fork } : r;
    };
    const conversation = { kind: "conversation", conversationId: c.id };
    expect({
      agent: await rules("pi.agent"),
      provider: await rules("pi.provider"),
      inbox: await rules("pi.inbox"),
      live: await rules("pi.live"),
      usage: await rules("pi.usage"),
    }).toEqual({
      agent: { scope: conversation, history: "rewindable", fork: "asOf" },
      provider: { scope: conversation, history: "latest", fork: "initial" },
      inbox: { scope: conversation, history: "latest", fork: "initial" },
      live: { scope: conversation, history: "latest", fork: "initial" },
      usage: { scope: conversation, history: "latest", fork: "initial" },
    });
    // pi.provider is final at version 1 (spec §2.2 table); its value is the schema's one field.
    const provider = await h.docVersioned(c.id, "pi.provider");
    expect(provider.version).toBe(1);
    expect(Object.keys(provider.value as object)).toEqual(["sessionId"]);
  }
});

test("pi.live holds run exactly while the conversation is busy, and is {} again when the run ends", async () => {
  let release!: () => void;
  const held = new Promise<void>((r) => {
    release = r;
  });
  const { h, root } = await open(async () => {
    await held;
    return fauxAssistantMessage("ok");
  });
  const other = await h.createConversation({ ownership: { kind: "ownerless" } });
  // Watching mounts see it too, each its own conversation's, at docs["pi.live"] (draw 28c: only
  // fresh loads were read, so a mount that dropped pi.live's changes, or took another
  // conversation's, passed).
  const rootWatch = await root.watch();
  const otherWatch = await other.watch();
  const seenRoot: unknown[] = [];
  const seenOther: unknown[] = [];
  rootWatch.start(async () => void seenRoot.push(rootWatch.value.docs["pi.live"]));
  otherWatch.start(async () => void seenOther.push(otherWatch.value.docs["pi.live"]));
  const input = await root.submit({ type: "input", content: "hi" });
  await expect
    .poll(() => (rootWatch.value.docs["pi.live"] as { run?: unknown } | undefined)?.run)
    .toBeDefined();
  const busy = (await root.viewState()).docs["pi.live"] as { run?: { taskId: number; inputs: number[] } };
  expect(busy.run?.inputs).toEqual([input.id]);
  // The inputs live there, not in the run's generation task (its input is {}: spec §8.3).
  const generation = await h.getTask(busy.run!.taskId);
  expect([generation?.kind, generation?.input]).toEqual(["pi.generation", {}]);
  // pi.live is the conversation's own (conversation scope): another conversation's stays {}.
  expect((await other.viewState()).docs["pi.live"]).toEqual({});
  expect([root.busy, other.busy]).toEqual([true, false]);
  // A fork of the busy conversation is not busy: its pi.live is its own, {} (break 28D: a fork
  // taking its parent's pi.live, run and all, passed while every fork was of an idle parent).
  const at = (await input.record()).entry!;
  const fork = await root.fork(at, { ownership: { kind: "ownerless" } });
  expect((await fork.viewState()).docs["pi.live"]).toEqual({});
  expect([root.busy, fork.busy]).toEqual([true, false]);
  release();
  await input.wait();
  expect((await root.viewState()).docs["pi.live"]).toEqual({});
  await expect.poll(() => rootWatch.value.docs["pi.live"]).toEqual({});
  expect(seenRoot.some((v) => (v as { run?: unknown }).run !== undefined)).toBe(true);
  expect(otherWatch.value.docs["pi.live"]).toEqual({});
  expect(seenOther.every((v) => JSON.stringify(v) === "{}")).toBe(true);
  await rootWatch.stop();
  await otherWatch.stop();
});

test("pi.live holds run across a successor run too: the final boundary that places a queued follow-up writes the successor's run in the commit that ends the first", async () => {
  // Sweep 42c, 104: the test above reads one run started by a submission; a final boundary that
  // started the follow-up's run and then cleared run (busy with no run) passed every named test.
  let release!: () => void;
  const held = new Promise<void>((r) => {
    release = r;
  });
  const { h, root } = await open(async (_req, n) => {
    if (n === 1) await held;
    return fauxAssistantMessage(`answer ${n}`);
  });
  // For each commit settling a submission done: the pi.live it wrote.
  const settling: unknown[] = [];
  h.subscribe((change) => {
    if (!change.submissions.some((s) => s.status === "done")) return;
    settling.push(change.docs.find((d) => d.name === "pi.live" && d.conversationId === root.id)?.value);
  });
  const first = await root.submit({ type: "input", content: "one" });
  const second = await root.submit({ type: "input", content: "two", whenBusy: "followUp" });
  release();
  expect((await first.wait()).status).toBe("done");
  const [ending] = settling as { run?: { taskId: number; inputs: number[] } }[];
  expect(ending?.run?.inputs).toEqual([second.id]);
  expect((await h.getTask(ending!.run!.taskId))?.kind).toBe("pi.generation");
  expect((await second.wait()).status).toBe("done");
  expect(settling[1]).toEqual({});
  expect(root.busy).toBe(false);
});

test("every pi.live value a run, its tool round and a compaction commit holds only run, generation, tools and compactions (spec §8.2 LiveState; break 31E)", async () => {
  // Break 31E: the named line was asserted by the type only; a run that wrote a field of its own
  // beside run (removed again when the run ended) passed every test reading pi.live.
  const gate = gatedTool("hold");
  gate.release.resolve();
  const { h, root } = await open(
    (req) => {
      if (req.systemPrompt === SUMMARY_SYSTEM_PROMPT) return fauxAssistantMessage("SUMMARY");
      const answered = req.messages.at(-1)?.role === "toolResult";
      const last = [...req.messages].reverse().find((m) => m.role === "user");
      const wantsTool = last !== undefined && JSON.stringify(last.content).includes("tool");
      return wantsTool && !answered
        ? fauxAssistantMessage([fauxToolCall("hold", {}, { id: `c${req.messages.length}` })], {
            stopReason: "toolUse",
          })
        : fauxAssistantMessage(`answer ${"x".repeat(400)}`);
    },
    { tools: [gate.tool], settings: { compaction: { keepRecentTokens: 150 } } },
  );
  const seen = new Set<string>();
  h.subscribe((change) => {
    for (const d of change.docs)
      if (d.name === "pi.live") for (const key of Object.keys((d.value ?? {}) as object)) seen.add(key);
  });
  for (const text of ["q1", "q2", "use a tool"])
    await (await root.submit({ type: "input", content: `${text} ${"x".repeat(400)}` })).wait();
  await h.waitForTask(await root.compact());
  // Each of the four was written, and nothing else.
  expect([...seen].sort()).toEqual(["compactions", "generation", "run", "tools"]);
});

test("a head marker restarts the view's entries: the marker, then the kept entries from its head", async () => {
  const { root } = await open(echo);
  const write = (n: number, head?: number) =>
    root.submit({ type: "write", entry: { kind: "app.note", data: { n }, ...(head ? { head } : {}) } });
  for (let n = 1; n <= 3; n++) await (await write(n)).wait();
  const ids = (await root.entries()).map((e) => e.id);
  // A mount that is watching when the marker lands drops the entries before its head from its own
  // entries (break 27I: only a mount loaded after the marker was read).
  const watch = await root.watch();
  watch.start(async () => {});
  await (await write(4, ids[1])).wait();
  const n = (entries: readonly { data?: unknown }[]) => entries.map((e) => (e.data as { n: number }).n);
  await expect.poll(() => n(watch.value.entries)).toContain(4);
  expect(n(watch.value.entries)).toEqual([4, 2, 3]);
  await watch.stop();
  const view = await root.viewState();
  expect(n(view.entries)).toEqual([4, 2, 3]);
  // The raw history keeps every entry.
  expect((await root.entries()).map((e) => (e.data as { n: number }).n)).toEqual([1, 2, 3, 4]);
});

test("in a fork, a head marker at a parent entry keeps the parent's entries from its head on, in a watching mount and in one loaded after it", async () => {
  // Draw 32C: every named case wrote its marker in the root; a mount that kept only the marker's own
  // conversation's entries (dropping a fork's inherited ones) passed them.
  const { root } = await open(echo);
  const write = (c: typeof root, n: number, head?: number) =>
    c.submit({ type: "write", entry: { kind: "app.note", data: { n }, ...(head ? { head } : {}) } });
  for (let n = 1; n <= 3; n++) await (await write(root, n)).wait();
  const ids = (await root.entries()).map((e) => e.id);
  const child = await root.fork(ids[2]!, { ownership: { kind: "ownerless" } });
  await (await write(child, 4)).wait();
  const n = (entries: readonly { data?: unknown }[]) => entries.map((e) => (e.data as { n: number }).n);
  const watch = await child.watch();
  watch.start(async () => {});
  expect(n(watch.value.entries)).toEqual([1, 2, 3, 4]);
  await (await write(child, 5, ids[1])).wait();
  await expect.poll(() => n(watch.value.entries)).toContain(5);
  expect(n(watch.value.entries)).toEqual([5, 2, 3, 4]);
  await watch.stop();
  expect(n((await child.viewState()).entries)).toEqual([5, 2, 3, 4]);
  // The parent's view is its own: untouched by the child's marker.
  expect(n((await root.viewState()).entries)).toEqual([1, 2, 3]);
});

test("the view carries raw active entries: an edited, an omitted and a failed entry stay as stored, where the model context leaves them out (spec §2.1)", async () => {
  const { root } = await open(echo);
  const ids = await root.commit((tx) => {
    const q = tx.appendEntry(root.id, {
      kind: "pi.user",
      model: [{ role: "user", content: "original", timestamp: 1 }],
    });
    const failed = tx.appendEntry(root.id, {
      kind: "pi.assistant",
      model: [
        {
          role: "assistant",
          content: [{ type: "text", text: "half" }],
          api: "faux",
          provider: "faux",
          model: "faux-1",
          usage: zeroUsage(),
          stopReason: "aborted",
          timestamp: 2,
        },
      ] as unknown as Json,
    });
    const edit = tx.appendEntry(root.id, {
      kind: "app.edit",
      edits: [
        { target: q.id, action: "replace", messages: [{ role: "user", content: "rewritten", timestamp: 3 }] },
      ],
    });
    return [q.id, failed.id, edit.id];
  });
  const view = await root.viewState();
  expect(view.entries.map((e) => e.id)).toEqual(ids);
  // As stored: the edit's target keeps its own message, the failed answer is there.
  expect(view.entries).toEqual(await root.entries());
  // The model context is another consumer: the edit applies, the failed answer is left out.
  const context = await root.context();
  expect(context.messages.map((m) => (typeof m.content === "string" ? m.content : m.role))).toEqual([
    "rewritten",
  ]);
});

test("the view's conversation is the committed conversation record: a fork's carries its parent and cut (reading 24f)", async () => {
  const { h, root } = await open(echo);
  await (await root.submit({ type: "input", content: "one" })).wait();
  const at = (await root.entries()).at(-1)!.id;
  const fork = await root.fork(at, { ownership: { kind: "ownerless" } });
  for (const c of [root, fork]) {
    const view = await c.viewState();
    expect(view.conversation).toEqual(await h.loadConversation(c.id));
  }
  expect((await fork.viewState()).conversation).toMatchObject({
    id: fork.id,
    parent: { conversationId: root.id, at },
  });
});

test("pi.usage is mounted like the others: a watching mount sees each answer's usage as it is committed, equal to the stored document", async () => {
  // Break 28L: only fresh loads read pi.usage; a mount that dropped its changes kept { models: {}, tools: {} }.
  const { h, root } = await open(echo);
  const watch = await root.watch();
  watch.start(async () => {});
  expect(watch.value.docs["pi.usage"]).toEqual({ models: {}, tools: {} });
  await (await root.submit({ type: "input", content: "hi" })).wait();
  const stored = (await h.docVersioned(root.id, "pi.usage")).value as { models: Record<string, unknown> };
  expect(Object.keys(stored.models)).toHaveLength(1);
  await expect.poll(() => watch.value.docs["pi.usage"]).toEqual(stored);
  expect((await root.viewState()).docs["pi.usage"]).toEqual(stored);
  await watch.stop();
});
