/**
 * pi.provider (spec §2.2): every conversation gets its own provider session id, a UUIDv7, in the
 * commit that creates it; the id's first 48 bits are the creation time in milliseconds.
 */
import { fauxAssistantMessage, fauxToolCall } from "@mariozechner/pi-ai";
import { expect, test } from "vitest";
import { SUMMARY_SYSTEM_PROMPT } from "../../../worker/agent/compaction/task.ts";
import { providerSession } from "../../../worker/agent/provider-session.ts";
import { defaultStream } from "../../../worker/agent/services.ts";
import {
  type AgentHarness,
  type AgentHarnessOptions,
  createModelResolver,
  HarnessClosed,
} from "../../../worker/index.ts";
import { fauxAgentModel, fauxError, recordJobs, type StoreJob } from "../../../worker/testing.ts";
import { callsThenAnswer, cleanups, echo, gatedTool, liveOf, open, reopen } from "./fixtures.ts";

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

const sessionOf = async (h: AgentHarness, c: number) =>
  (await h.doc<{ sessionId: string }>(c, "pi.provider"))!.sessionId;

test("pi.provider's session id is a UUIDv7 carrying its creation time, distinct per conversation", async () => {
  const before = Date.now();
  const { h } = await open(echo);
  const other = await h.createConversation({ ownership: { kind: "ownerless" } });
  const after = Date.now();
  const ids = [await sessionOf(h, 1), await sessionOf(h, other.id)];
  for (const id of ids) {
    expect(id).toMatch(UUID_V7);
    const millis = Number.parseInt(id.replace(/-/g, "").slice(0, 12), 16);
    expect(millis).toBeGreaterThanOrEqual(before);
    expect(millis).toBeLessThanOrEqual(after);
  }
  expect(new Set(ids).size).toBe(2);
});

test("requests pass the conversation's session id; a reset, a compaction, a model change and a reopen keep it", async () => {
  const sent: unknown[] = [];
  const stream: AgentHarnessOptions["stream"] = (model, context, options) => {
    sent.push(options.sessionId);
    return defaultStream(model, context, options);
  };
  const { h, root, store, faux } = await open(echo, { stream });
  const id = await sessionOf(h, root.id);
  await (await root.submit({ type: "input", content: "one" })).wait();
  await (await root.reset("again")).wait();
  await h.waitForTask(await root.compact());
  await root.configure({ model: faux.ref, thinkingLevel: "high" });
  await (await root.submit({ type: "input", content: "two" })).wait();
  expect(await sessionOf(h, root.id)).toBe(id);
  await h.close();
  const again = await reopen(store, { models: faux.models, defaultModel: faux.ref, stream });
  await (await (await again.root()).submit({ type: "input", content: "three" })).wait();
  expect(await sessionOf(again, root.id)).toBe(id);
  expect(sent.length).toBeGreaterThanOrEqual(3);
  expect(new Set(sent)).toEqual(new Set([id]));
});

test("a compaction that summarizes and a change to another model keep the session id: every request, the summary's and the other model's, passes it", async () => {
  const sent: Array<{ model: string; summary: boolean; sessionId: unknown }> = [];
  const stream: AgentHarnessOptions["stream"] = (model, context, options) => {
    sent.push({
      model: model.id,
      summary: context.systemPrompt === SUMMARY_SYSTEM_PROMPT,
      sessionId: options.sessionId,
    });
    return defaultStream(model, context, options);
  };
  const first = fauxAgentModel(echo, { id: "session-1" });
  const second = fauxAgentModel(echo, { id: "session-2" });
  cleanups.push(async () => {
    first.unregister();
    second.unregister();
  });
  const { h, root } = await open(echo, {
    stream,
    models: createModelResolver({ extra: [first.model, second.model] }),
    defaultModel: first.ref,
    settings: { compaction: { keepRecentTokens: 1, reserveTokens: 1000 } },
  });
  const id = await sessionOf(h, root.id);
  for (const text of ["one", "two", "three"])
    await (await root.submit({ type: "input", content: text })).wait();
  const compaction = await h.waitForTask(await root.compact());
  expect(compaction.state).toMatchObject({ outcome: { status: "completed" } });
  expect(sent.filter((s) => s.summary)).toHaveLength(1);
  await root.configure({ model: second.ref });
  await (await root.submit({ type: "input", content: "four" })).wait();
  expect(sent.at(-1)).toEqual({ model: "session-2", summary: false, sessionId: id });
  expect(sent.filter((s) => s.model === "session-1").length).toBeGreaterThanOrEqual(4);
  expect(new Set(sent.map((s) => s.sessionId))).toEqual(new Set([id]));
  expect(await sessionOf(h, root.id)).toBe(id);
});

test("the compaction's summary request passes the conversation's session id too", async () => {
  const sent: Array<{
    summary: boolean;
    sessionId: unknown;
    options: Record<string, unknown>;
    tools: unknown;
  }> = [];
  const stream: AgentHarnessOptions["stream"] = (model, context, options) => {
    const { signal: _s, sessionId, ...rest } = options;
    sent.push({
      summary: context.systemPrompt === SUMMARY_SYSTEM_PROMPT,
      sessionId,
      options: rest,
      tools: context.tools ?? [],
    });
    return defaultStream(model, context, options);
  };
  const { h, root } = await open(echo, {
    stream,
    settings: {
      compaction: { keepRecentTokens: 1, reserveTokens: 1000 },
      stream: { timeoutMs: 4321, cacheRetention: "long" },
    },
  });
  const id = await sessionOf(h, root.id);
  for (const text of ["one", "two", "three"])
    await (await root.submit({ type: "input", content: text })).wait();
  const taskId = await root.compact();
  expect((await h.waitForTask(taskId)).state).toMatchObject({ outcome: { status: "completed" } });
  const summaries = sent.filter((s) => s.summary);
  expect(summaries).toHaveLength(1);
  expect(summaries[0]!.sessionId).toBe(id);
  expect(id).toMatch(UUID_V7);
  // The rest of spec §8.7's request: the pinned stream options, caching off, the pinned maxTokens
  // (floor(0.8 * reserveTokens) here), no tools.
  expect(summaries[0]!.options).toMatchObject({ timeoutMs: 4321, cacheRetention: "none", maxTokens: 800 });
  expect(summaries[0]!.tools).toEqual([]);
  // The conversation's own requests keep the setting.
  expect(sent.filter((s) => !s.summary).every((s) => s.options["cacheRetention"] === "long")).toBe(true);
});

test("each conversation's requests, its generations' and its compaction summary's, pass that conversation's own session id", async () => {
  const sent: Array<{ summary: boolean; sessionId: unknown; text: string }> = [];
  const stream: AgentHarnessOptions["stream"] = (model, context, options) => {
    const first = context.messages.find((m) => m.role === "user");
    const text = typeof first?.content === "string" ? first.content : JSON.stringify(first?.content ?? "");
    sent.push({
      summary: context.systemPrompt === SUMMARY_SYSTEM_PROMPT,
      sessionId: options.sessionId,
      text,
    });
    return defaultStream(model, context, options);
  };
  const { h, root } = await open(echo, {
    stream,
    settings: { compaction: { keepRecentTokens: 1, reserveTokens: 1000 } },
  });
  const other = await h.createConversation({ ownership: { kind: "ownerless" } });
  const rootId = await sessionOf(h, root.id);
  const otherId = await sessionOf(h, other.id);
  expect(otherId).not.toBe(rootId);
  await (await root.submit({ type: "input", content: "in the root" })).wait();
  for (const text of ["elsewhere one", "elsewhere two"])
    await (await other.submit({ type: "input", content: text })).wait();
  const taskId = await other.compact();
  expect((await h.waitForTask(taskId)).state).toMatchObject({ outcome: { status: "completed" } });
  const generations = sent.filter((s) => !s.summary);
  expect(generations.map((s) => [s.text, s.sessionId])).toEqual([
    ["in the root", rootId],
    ["elsewhere one", otherId],
    ["elsewhere one", otherId],
  ]);
  expect(sent.filter((s) => s.summary).map((s) => s.sessionId)).toEqual([otherId]);
});

test("a task-owned conversation's requests, its generations' and its compaction summary's, pass its own session id, not its owner conversation's (break 29K)", async () => {
  const sent: Array<{ summary: boolean; sessionId: unknown }> = [];
  const { tool, started, release } = gatedTool();
  const calls = callsThenAnswer(fauxToolCall("hold", {}, { id: "call-1" }));
  const stream: AgentHarnessOptions["stream"] = (model, context, options) => {
    sent.push({ summary: context.systemPrompt === SUMMARY_SYSTEM_PROMPT, sessionId: options.sessionId });
    return defaultStream(model, context, options);
  };
  const { h, root } = await open(
    (req, n) =>
      req.systemPrompt === SUMMARY_SYSTEM_PROMPT ? fauxAssistantMessage("summary") : calls(req, n),
    { stream, tools: [tool], settings: { compaction: { keepRecentTokens: 1, reserveTokens: 1000 } } },
  );
  const sub = await root.submit({ type: "input", content: "go" });
  await started.promise;
  const taskId = liveOf(h).tools![0]!.taskId!;
  const child = await h.createConversation({ ownership: { kind: "task", taskId } });
  release.resolve();
  await sub.wait();
  const rootId = await sessionOf(h, root.id);
  const childId = await sessionOf(h, child.id);
  expect(childId).not.toBe(rootId);
  const before = sent.length;
  await (await child.submit({ type: "input", content: "in the child" })).wait();
  const compaction = await child.compact();
  expect((await h.waitForTask(compaction)).state).toMatchObject({ outcome: { status: "completed" } });
  const childRequests = sent.slice(before);
  expect(childRequests.filter((s) => !s.summary).length).toBeGreaterThan(0);
  expect(childRequests.filter((s) => s.summary)).toHaveLength(1);
  expect(childRequests.map((s) => s.sessionId)).toEqual(childRequests.map(() => childId));
});

test("a fork's requests, its generations' and its compaction summary's, pass the fork's own session id, not its parent's (draw 34dA)", async () => {
  // Every conversation above was created, none forked: requests of a fork passing its parent's session
  // id (the id resolved through the fork's parent) passed them all.
  const sent: Array<{ summary: boolean; sessionId: unknown }> = [];
  const stream: AgentHarnessOptions["stream"] = (model, context, options) => {
    sent.push({ summary: context.systemPrompt === SUMMARY_SYSTEM_PROMPT, sessionId: options.sessionId });
    return defaultStream(model, context, options);
  };
  const { h, root } = await open(echo, {
    stream,
    settings: { compaction: { keepRecentTokens: 1, reserveTokens: 1000 } },
  });
  await (await root.submit({ type: "input", content: "in the root" })).wait();
  const at = (await root.entries()).at(-1)!.id;
  const fork = await root.fork(at, { ownership: { kind: "ownerless" } });
  const rootId = await sessionOf(h, root.id);
  const forkId = await sessionOf(h, fork.id);
  expect(forkId).not.toBe(rootId);
  const before = sent.length;
  await (await fork.submit({ type: "input", content: "in the fork" })).wait();
  const compaction = await fork.compact();
  expect((await h.waitForTask(compaction)).state).toMatchObject({ outcome: { status: "completed" } });
  const forkRequests = sent.slice(before);
  expect(forkRequests.filter((s) => !s.summary).length).toBeGreaterThan(0);
  expect(forkRequests.filter((s) => s.summary)).toHaveLength(1);
  expect(forkRequests.map((s) => s.sessionId)).toEqual(forkRequests.map(() => forkId));
});

test("a legacy conversation without pi.provider gets a UUIDv7 session id committed before its first request, and keeps it", async () => {
  const sent: unknown[] = [];
  // What is committed when the request is sent (a synchronous read of the committed state).
  const committedAtSend: unknown[] = [];
  let h!: AgentHarness;
  const stream: AgentHarnessOptions["stream"] = (model, context, options) => {
    sent.push(options.sessionId);
    committedAtSend.push((h.docNow(1, "pi.provider") as { sessionId?: string } | undefined)?.sessionId);
    return defaultStream(model, context, options);
  };
  const setup = await open(echo, { stream });
  h = setup.h;
  const { root } = setup;
  // As a plain harness or an older store left it: no pi.provider.
  await h.transaction((tx) => tx.retireDoc(root.id, "pi.provider"));
  expect(await h.doc(root.id, "pi.provider")).toBeUndefined();
  await (await root.submit({ type: "input", content: "one" })).wait();
  const stored = await sessionOf(h, root.id);
  expect(stored).toMatch(UUID_V7);
  expect(sent).toEqual([stored]);
  // Committed before the request went out, not after it.
  expect(committedAtSend).toEqual([stored]);
  // Draw 37bA: the document this path creates is the table's too (version 1, the schema's one field,
  // latest, fork initial); one written with a second field passed every test, all of which read
  // the stored document's shape only where the creation hook made it.
  const provider = await h.docVersioned(root.id, "pi.provider");
  expect(provider.version).toBe(1);
  expect(provider.value).toEqual({ sessionId: stored });
  const record = await h.docRecord(root.id, "pi.provider");
  expect(record && "history" in record ? [record.history, record.fork] : record).toEqual([
    "latest",
    "initial",
  ]);
  await (await root.submit({ type: "input", content: "two" })).wait();
  expect(sent).toEqual([stored, stored]);
});

test("a legacy conversation whose first provider request is a compaction's summary gets its session id committed before that request", async () => {
  const sent: Array<{ summary: boolean; sessionId: unknown; committed: unknown }> = [];
  let h!: AgentHarness;
  const stream: AgentHarnessOptions["stream"] = (model, context, options) => {
    sent.push({
      summary: context.systemPrompt === SUMMARY_SYSTEM_PROMPT,
      sessionId: options.sessionId,
      committed: (h.docNow(1, "pi.provider") as { sessionId?: string } | undefined)?.sessionId,
    });
    return defaultStream(model, context, options);
  };
  const setup = await open(echo, {
    stream,
    settings: { compaction: { keepRecentTokens: 1, reserveTokens: 1000 } },
  });
  h = setup.h;
  const { root } = setup;
  for (const text of ["one", "two", "three"])
    await (await root.submit({ type: "input", content: text })).wait();
  const before = await sessionOf(h, root.id);
  // The document goes (as an older store never had it): the next provider request is the summary's.
  await h.transaction((tx) => tx.retireDoc(root.id, "pi.provider"));
  sent.length = 0;
  expect((await h.waitForTask(await root.compact())).state).toMatchObject({
    outcome: { status: "completed" },
  });
  const stored = await sessionOf(h, root.id);
  expect(stored).toMatch(UUID_V7);
  expect(stored).not.toBe(before);
  expect(sent).toEqual([{ summary: true, sessionId: stored, committed: stored }]);
  await (await root.submit({ type: "input", content: "four" })).wait();
  expect(sent.at(-1)).toEqual({ summary: false, sessionId: stored, committed: stored });
});

test("concurrent callers of a legacy conversation all get the one session id stored first", async () => {
  const { h, root } = await open(echo);
  await h.transaction((tx) => tx.retireDoc(root.id, "pi.provider"));
  const ids = await Promise.all([1, 2, 3].map(() => providerSession(h, root.id)));
  expect(new Set(ids).size).toBe(1);
  expect(ids[0]).toMatch(UUID_V7);
  expect(await sessionOf(h, root.id)).toBe(ids[0]);
});

test("concurrent callers of two legacy conversations each get their own conversation's one session id, stored in it (draw 34b)", async () => {
  const { h, root } = await open(echo);
  const other = await h.createConversation({ ownership: { kind: "ownerless" } });
  await h.transaction((tx) => {
    tx.retireDoc(root.id, "pi.provider");
    tx.retireDoc(other.id, "pi.provider");
  });
  // Interleaved, all asked before any commit settles: one winner per conversation, not one in all.
  const ids = await Promise.all([root.id, other.id, root.id, other.id].map((c) => providerSession(h, c)));
  expect(ids[0]).toMatch(UUID_V7);
  expect(ids[1]).toMatch(UUID_V7);
  expect(ids[1]).not.toBe(ids[0]);
  expect(ids).toEqual([ids[0], ids[1], ids[0], ids[1]]);
  expect(await sessionOf(h, root.id)).toBe(ids[0]);
  expect(await sessionOf(h, other.id)).toBe(ids[1]);
});

test("a legacy conversation whose session id cannot be stored sends no request, a generation's or a compaction's summary: the failed commit stops the engine, no uncommitted id goes out (draw 34b)", async () => {
  for (const first of ["generation", "summary"] as const) {
    const sent: unknown[] = [];
    const stream: AgentHarnessOptions["stream"] = (model, context, options) => {
      sent.push(options.sessionId);
      return defaultStream(model, context, options);
    };
    const fatal: Error[] = [];
    const { h, root, store } = await open(echo, {
      stream,
      onFatal: (e) => fatal.push(e),
      settings: { compaction: { keepRecentTokens: 1, reserveTokens: 1000 } },
    });
    if (first === "summary")
      for (const text of ["one", "two", "three"])
        await (await root.submit({ type: "input", content: text })).wait();
    await h.transaction((tx) => tx.retireDoc(root.id, "pi.provider"));
    sent.length = 0;
    // The storage fails on the transaction that writes the conversation's new pi.provider.
    const jobs: { into: StoreJob[] } = { into: [] };
    recordJobs(store, jobs);
    const writesProvider = (job: StoreJob | undefined) =>
      job?.statements.some((s) => /INTO documents/.test(s.sql) && s.params?.includes("pi.provider"));
    store.setFaultHook((point) => {
      if (point === "before-commit" && writesProvider(jobs.into.at(-1))) throw new Error("disk I/O error");
    });
    const waiting =
      first === "generation"
        ? (await root.submit({ type: "input", content: "four" })).wait()
        : h.waitForTask(await root.compact());
    await expect(waiting, first).rejects.toBeInstanceOf(HarnessClosed);
    expect(fatal[0]?.message, first).toMatch(/disk I\/O error/);
    expect(sent, first).toEqual([]);
    store.setFaultHook(undefined);
  }
});

test("a legacy conversation other than the root, read from the store after a reopen, gets its own session id committed before its first request; the root keeps its own (break 30C)", async () => {
  const { h, root, store, faux } = await open(echo);
  const rootSession = await sessionOf(h, root.id);
  const other = await h.createConversation({ ownership: { kind: "ownerless" } });
  // As an older store left it: no pi.provider.
  await h.transaction((tx) => tx.retireDoc(other.id, "pi.provider"));
  const sent: unknown[] = [];
  const committedAtSend: unknown[] = [];
  let again!: AgentHarness;
  const stream: AgentHarnessOptions["stream"] = (model, context, options) => {
    sent.push(options.sessionId);
    committedAtSend.push(
      (again.docNow(other.id, "pi.provider") as { sessionId?: string } | undefined)?.sessionId,
    );
    return defaultStream(model, context, options);
  };
  again = await reopen(store, { models: faux.models, defaultModel: faux.ref, stream });
  const conversation = await again.requireLoadedConversation(other.id);
  await (await conversation.submit({ type: "input", content: "one" })).wait();
  await (await conversation.submit({ type: "input", content: "two" })).wait();
  const stored = await sessionOf(again, other.id);
  expect(stored).toMatch(UUID_V7);
  expect(sent).toEqual([stored, stored]);
  expect(committedAtSend).toEqual([stored, stored]);
  expect(await sessionOf(again, root.id)).toBe(rootSession);
});

test("a retried request, a generation's and a compaction summary's, passes the conversation's session id again (draw 40, 9)", async () => {
  const sent: Array<{ summary: boolean; sessionId: unknown }> = [];
  const stream: AgentHarnessOptions["stream"] = (model, context, options) => {
    sent.push({ summary: context.systemPrompt === SUMMARY_SYSTEM_PROMPT, sessionId: options.sessionId });
    return defaultStream(model, context, options);
  };
  // The first request of each kind fails with a retryable error; its retry is answered.
  let generations = 0;
  let summaries = 0;
  const { h } = await open(
    (req, call) =>
      req.systemPrompt === SUMMARY_SYSTEM_PROMPT
        ? ++summaries === 1
          ? fauxError("503 Service Unavailable")
          : fauxAssistantMessage("THE SUMMARY")
        : ++generations === 1
          ? fauxError("503 Service Unavailable")
          : echo(req, call),
    {
      stream,
      settings: { retry: { baseDelayMs: 1 }, compaction: { keepRecentTokens: 1, reserveTokens: 1000 } },
    },
  );
  const other = await h.createConversation({ ownership: { kind: "ownerless" } });
  const id = await sessionOf(h, other.id);
  for (const text of ["one", "two"])
    expect((await (await other.submit({ type: "input", content: text })).wait()).status).toBe("done");
  const taskId = await other.compact();
  expect((await h.waitForTask(taskId)).state).toMatchObject({ outcome: { status: "completed" } });
  // Two generation attempts for the first input (the 503 and its retry), one for the second; two summary attempts.
  expect(sent.filter((s) => !s.summary)).toHaveLength(3);
  expect(sent.filter((s) => s.summary)).toHaveLength(2);
  expect(sent.map((s) => s.sessionId)).toEqual(sent.map(() => id));
});

test("with settings.stream.cacheRetention none, every request still passes the session id: suppressing it is the provider's behavior, not the engine's (draw 40b, 8)", async () => {
  // Draw 40b: no generation request of any test ran with cacheRetention "none" (only the summary
  // request, which always sends "none"); a generation leaving the session id out under it passed
  // every test.
  const sent: Array<{ summary: boolean; cacheRetention: unknown; sessionId: unknown }> = [];
  const stream: AgentHarnessOptions["stream"] = (model, context, options) => {
    sent.push({
      summary: context.systemPrompt === SUMMARY_SYSTEM_PROMPT,
      cacheRetention: options.cacheRetention,
      sessionId: options.sessionId,
    });
    return defaultStream(model, context, options);
  };
  const { h, root } = await open(echo, {
    stream,
    settings: {
      stream: { cacheRetention: "none" },
      compaction: { keepRecentTokens: 1, reserveTokens: 1000 },
    },
  });
  const id = await sessionOf(h, root.id);
  for (const text of ["one", "two"])
    expect((await (await root.submit({ type: "input", content: text })).wait()).status).toBe("done");
  expect((await h.waitForTask(await root.compact())).state).toMatchObject({
    outcome: { status: "completed" },
  });
  expect(sent.filter((s) => !s.summary)).toHaveLength(2);
  expect(sent.filter((s) => s.summary)).toHaveLength(1);
  expect(sent.map((s) => s.cacheRetention)).toEqual(sent.map(() => "none"));
  expect(sent.map((s) => s.sessionId)).toEqual(sent.map(() => id));
});

test("an automatic compaction's summary request passes the conversation's session id too, as a manual one's does (draw 40b, 8)", async () => {
  // Draw 40b: every summary request of these tests was a manual compact()'s; a summary passing the
  // session id for a manual compaction only passed them all.
  const sent: Array<{ summary: boolean; sessionId: unknown }> = [];
  const stream: AgentHarnessOptions["stream"] = (model, context, options) => {
    sent.push({ summary: context.systemPrompt === SUMMARY_SYSTEM_PROMPT, sessionId: options.sessionId });
    return defaultStream(model, context, options);
  };
  const small = fauxAgentModel(
    (req, call) =>
      req.systemPrompt === SUMMARY_SYSTEM_PROMPT ? fauxAssistantMessage("SUMMARY") : echo(req, call),
    { id: "session-small", contextWindow: 1200 },
  );
  cleanups.push(async () => small.unregister());
  const { h, root } = await open(echo, {
    stream,
    models: createModelResolver({ extra: [small.model] }),
    defaultModel: small.ref,
    settings: { compaction: { reserveTokens: 100, keepRecentTokens: 150, backgroundTokens: 0 } },
  });
  const id = await sessionOf(h, root.id);
  // About 100 tokens an input: the blocking threshold (1,100) is crossed within a dozen turns.
  for (let turn = 1; turn <= 12 && !sent.some((s) => s.summary); turn++)
    expect(
      (await (await root.submit({ type: "input", content: `q${turn} ${"x".repeat(400)}` })).wait()).status,
    ).toBe("done");
  expect((await root.entries()).find((e) => e.kind === "pi.compaction")?.data).toEqual({
    reason: "threshold",
  });
  expect(sent.filter((s) => s.summary)).toHaveLength(1);
  expect(sent.map((s) => s.sessionId)).toEqual(sent.map(() => id));
});

test("an overflow's compaction summary and a background compaction's summary pass the conversation's session id too (draw 41b, 13)", async () => {
  // Draw 41b, 13: every summary request of these tests was a manual compact()'s or a blocking
  // threshold's; a summary leaving the session id out for an overflow's compaction, or for a
  // background one, passed them all.
  const sent: Array<{ summary: boolean; sessionId: unknown }> = [];
  const stream: AgentHarnessOptions["stream"] = (model, context, options) => {
    sent.push({ summary: context.systemPrompt === SUMMARY_SYSTEM_PROMPT, sessionId: options.sessionId });
    return defaultStream(model, context, options);
  };
  const text = (m: { content: unknown }) =>
    typeof m.content === "string" ? m.content : JSON.stringify(m.content);
  // An overflow: the fourth input's first request is too long for the provider; a summary cures it.
  const wide = fauxAgentModel(
    (req, call) => {
      if (req.systemPrompt === SUMMARY_SYSTEM_PROMPT) return fauxAssistantMessage("SUMMARY");
      const last = [...req.messages].reverse().find((m) => m.role === "user")!;
      if (text(last).includes("q4") && !text(req.messages[0]!).includes("<summary>"))
        return fauxError("prompt is too long: 210000 tokens > 200000 maximum");
      return echo(req, call);
    },
    { id: "session-wide", contextWindow: 1_000_000 },
  );
  // A background threshold: from 100,100 - 99,000 - 600 = 500 tokens, blocking only above 1,100.
  const roomy = fauxAgentModel(
    (req, call) =>
      req.systemPrompt === SUMMARY_SYSTEM_PROMPT ? fauxAssistantMessage("SUMMARY") : echo(req, call),
    { id: "session-roomy", contextWindow: 100_100 },
  );
  cleanups.push(async () => {
    wide.unregister();
    roomy.unregister();
  });
  const models = createModelResolver({ extra: [wide.model, roomy.model] });
  const overflowed = await open(echo, {
    stream,
    models,
    defaultModel: wide.ref,
    settings: { compaction: { reserveTokens: 100, keepRecentTokens: 150, backgroundTokens: 0 } },
  });
  const id = await sessionOf(overflowed.h, overflowed.root.id);
  for (let turn = 1; turn <= 4; turn++)
    expect(
      (await (await overflowed.root.submit({ type: "input", content: `q${turn} ${"x".repeat(400)}` })).wait())
        .status,
    ).toBe("done");
  expect(
    (await overflowed.root.entries()).filter((e) => e.kind === "pi.compaction").map((e) => e.data),
  ).toEqual([{ reason: "overflow" }]);
  expect(sent.filter((s) => s.summary)).toHaveLength(1);
  expect(sent.map((s) => s.sessionId)).toEqual(sent.map(() => id));

  sent.length = 0;
  const background = await open(echo, {
    stream,
    models,
    defaultModel: roomy.ref,
    settings: { compaction: { reserveTokens: 99_000, keepRecentTokens: 150, backgroundTokens: 600 } },
  });
  const other = await sessionOf(background.h, background.root.id);
  expect(other).not.toBe(id);
  for (let turn = 1; turn <= 8 && (await background.h.tasks({ kind: "pi.compaction" })).length === 0; turn++)
    expect(
      (await (await background.root.submit({ type: "input", content: `q${turn} ${"x".repeat(400)}` })).wait())
        .status,
    ).toBe("done");
  const [task] = await background.h.tasks({ kind: "pi.compaction" });
  expect(task).toMatchObject({ background: true, input: { reason: "threshold" } });
  expect((await background.h.waitForTask(task!.id)).state).toMatchObject({
    outcome: { status: "completed" },
  });
  expect(sent.filter((s) => s.summary)).toHaveLength(1);
  expect(sent.map((s) => s.sessionId)).toEqual(sent.map(() => other));
});
