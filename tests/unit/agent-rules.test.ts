/**
 * The agent layer's remaining rules, one test each: hooks, the second validation after beforeTool,
 * recovery of an interrupted call (stored arguments and policy, no second beforeTool, the durable
 * partial output), streamed tool output, throttled partial answers, retry defaults and durable
 * backoff, parallel tool calls, follow-ups held past a tool round, Submission.abort and
 * Conversation.abort, the conversation API (agent, configure, provider session), custom documents.
 *
 * Recovery tests take the store's image while a tool is held mid-execution (its intent committed,
 * its result not) and open a second harness on that image: what a crash at that moment leaves.
 */
import { type AssistantMessage, fauxAssistantMessage, fauxToolCall, type Usage } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { describe, expect, test } from "vitest";
import { addUsage, defineDoc, type LiveState } from "../../worker/agent/records.ts";
import { DEFAULT_RETRY, defaultStream, resolveSettings, retryDelayMs } from "../../worker/agent/services.ts";
import { capHead, OUTPUT_LIMITS, type ReplayPolicy, textResult } from "../../worker/agent/tools/contract.ts";
import {
  AgentHarness,
  type AgentHarnessOptions,
  defineTool,
  type EntryRecord,
  Harness,
  InvalidTransition,
  type MemoryStore,
  type StreamSettings,
} from "../../worker/index.ts";
import {
  deferred,
  fauxAgentModel,
  fauxError,
  memoryStore,
  recordJobs,
  type StoreJob,
  until,
} from "../../worker/testing.ts";
import {
  callsThenAnswer,
  cleanups,
  diagnosticsOf,
  echo,
  gatedTool,
  inboxOf,
  kinds,
  liveOf,
  messageOf,
  open,
  textOf,
  transcript,
} from "./agent-fixtures.ts";

const toolResults = async (c: Parameters<typeof transcript>[0]): Promise<EntryRecord[]> =>
  (await transcript(c)).filter((e) => e.kind === "pi.tool-result");

/** A harness on a copy of `store` as it is now (a crash image), with `options`. */
async function reopen(store: MemoryStore, options: AgentHarnessOptions): Promise<AgentHarness> {
  const copy = await memoryStore(store.image());
  const h = await AgentHarness.open(copy, options);
  cleanups.push(() => h.close().catch(() => undefined));
  return h;
}

/** `{ item }` tool that records each execution's arguments and can be held on its first one. */
function itemTool(options: { replay?: ReplayPolicy; holdFirst?: boolean; output?: string }) {
  const seen: Array<{ item: unknown }> = [];
  const started = deferred();
  const release = deferred();
  const tool = defineTool({
    name: "apply",
    description: "Apply an item",
    parameters: Type.Object({ item: Type.String() }),
    ...(options.replay ? { replay: options.replay } : {}),
    async execute(args, api) {
      seen.push({ item: args.item });
      if (options.output) api.output(options.output);
      if (options.holdFirst && seen.length === 1) {
        started.resolve();
        await new Promise<void>((resolve, reject) => {
          void release.promise.then(() => resolve());
          api.signal.addEventListener("abort", () => reject(api.signal.reason), { once: true });
        });
      }
      return textResult(`applied ${args.item}`);
    },
  });
  return { tool, seen, started, release };
}

// ---------------------------------------------------------------------------------------------

describe("hooks", () => {
  test("beforeRequest replaces the messages of that request only; the transcript keeps its own", async () => {
    const { root, faux } = await open(echo, {
      hooks: {
        beforeRequest: [(messages) => [...messages, { role: "user", content: "injected", timestamp: 0 }]],
      },
    });
    expect((await (await root.submit({ type: "input", content: "hi" })).wait()).status).toBe("done");
    expect(faux.requests[0]!.messages.map(textOf)).toEqual(["hi", "injected"]);
    expect((await transcript(root)).map((e) => textOf(messageOf(e)))).toEqual(["hi", "echo: injected"]);
  });

  test("afterResponse sees every final message, tool-calling ones included", async () => {
    const seen: string[] = [];
    const { tool } = itemTool({});
    const { root } = await open(callsThenAnswer(fauxToolCall("apply", { item: "a" }, { id: "call-1" })), {
      tools: [tool],
      hooks: { afterResponse: [(m) => void seen.push(m.stopReason)] },
    });
    expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
    expect(seen).toEqual(["toolUse", "stop"]);
  });

  test("onYield can continue a run with another user message; the input settles with the last answer", async () => {
    let yields = 0;
    const { root, faux } = await open(echo, {
      hooks: { onYield: [() => (++yields === 1 ? "and once more" : undefined)] },
    });
    const settled = await (await root.submit({ type: "input", content: "first" })).wait();
    const entries = await transcript(root);
    expect(kinds(entries)).toEqual(["pi.user", "pi.assistant", "pi.user", "pi.assistant"]);
    expect(entries.map((e) => textOf(messageOf(e)))).toEqual([
      "first",
      "echo: first",
      "and once more",
      "echo: and once more",
    ]);
    expect(settled).toMatchObject({ status: "done", answer: entries[3]!.id });
    expect(faux.requests).toHaveLength(2);
    expect(yields).toBe(2);
  });

  test("onAbort can replace an aborted call's result (its partial output by default); a throwing hook is reported and skipped", async () => {
    const release = deferred();
    const started = deferred();
    const slow = defineTool({
      name: "slow",
      description: "Works until aborted",
      parameters: Type.Object({}),
      async execute(_args, api) {
        api.output("half done\n");
        started.resolve();
        await new Promise<void>((resolve, reject) => {
          void release.promise.then(() => resolve());
          api.signal.addEventListener("abort", () => reject(api.signal.reason), { once: true });
        });
        return textResult("finished");
      },
    });
    const reported: unknown[] = [];
    const seen: string[] = [];
    const { h, root } = await open(callsThenAnswer(fauxToolCall("slow", {}, { id: "call-1" })), {
      tools: [slow],
      onReport: (error) => void reported.push(error),
      hooks: {
        onAbort: [
          () => {
            throw new Error("cleanup hook broke");
          },
          (call, result) => {
            seen.push(`${call.name}: ${textOf(result as never)}`);
            return textResult(`rolled back (${textOf(result as never).trim()})`);
          },
        ],
      },
    });
    await root.submit({ type: "input", content: "go" });
    await started.promise;
    await until(() => Boolean(liveOf(h).tools?.[0]?.output));
    await root.abort();
    expect(seen).toEqual(["slow: half done\n"]);
    expect(reported.map((e) => (e as Error).message)).toContain("cleanup hook broke");
    const [result] = await toolResults(root);
    expect(messageOf(result!)).toMatchObject({ isError: true });
    expect(textOf(messageOf(result!))).toContain("rolled back (half done)");
    expect(diagnosticsOf(result!).map((d) => d.code)).toEqual(["aborted"]);
  });

  test("afterTool can replace a result: the replacement is what is stored and what the model sees", async () => {
    const { tool } = itemTool({});
    const { root, faux } = await open(
      callsThenAnswer(fauxToolCall("apply", { item: "a" }, { id: "call-1" })),
      {
        tools: [tool],
        hooks: {
          afterTool: [(call) => textResult(`${call.name} replaced (was: ${textOf(call.result as never)})`)],
        },
      },
    );
    expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
    const [result] = await toolResults(root);
    expect(textOf(messageOf(result!))).toBe("apply replaced (was: applied a)");
    expect(textOf(faux.requests[1]!.messages.at(-1)!)).toBe("apply replaced (was: applied a)");
  });

  test("a beforeTool rewrite is validated again: invalid rewritten arguments give invalid_arguments and the tool never runs", async () => {
    const { tool, seen } = itemTool({});
    const { root } = await open(callsThenAnswer(fauxToolCall("apply", { item: "a" }, { id: "call-1" })), {
      tools: [tool],
      hooks: { beforeTool: [() => ({ arguments: { other: 1 } })] },
    });
    expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
    const [result] = await toolResults(root);
    expect(messageOf(result!)).toMatchObject({ isError: true });
    expect(diagnosticsOf(result!).map((d) => d.code)).toEqual(["invalid_arguments"]);
    expect(seen).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------

describe("recovery of an interrupted call", () => {
  test("a safe call runs again with the stored (rewritten) arguments, without running beforeTool again", async () => {
    let hookRuns = 0;
    const hooks = {
      beforeTool: [
        () => {
          hookRuns++;
          return { arguments: { item: "rewritten" } };
        },
      ],
    };
    const first = itemTool({ replay: "safe", holdFirst: true });
    const respond = callsThenAnswer(fauxToolCall("apply", { item: "original" }, { id: "call-1" }));
    const { root, store, faux } = await open(respond, { tools: [first.tool], hooks });
    await root.submit({ type: "input", content: "go", requestId: "r" });
    await first.started.promise;
    expect(first.seen).toEqual([{ item: "rewritten" }]);

    const second = itemTool({ replay: "safe" });
    const h2 = await reopen(store, {
      models: faux.models,
      defaultModel: faux.ref,
      tools: [second.tool],
      hooks,
    });
    const root2 = await h2.root();
    await root2.waitForIdle();
    expect(second.seen).toEqual([{ item: "rewritten" }]);
    expect(hookRuns).toBe(1);
    const [result] = await toolResults(root2);
    expect(textOf(messageOf(result!))).toBe("applied rewritten");
    expect(messageOf(result!)).toMatchObject({ isError: false });
  });

  test("the policy stored with the intent decides: a call stored unsafe is not run again even if the tool is safe now", async () => {
    const first = itemTool({ replay: "unsafe", holdFirst: true });
    const respond = callsThenAnswer(fauxToolCall("apply", { item: "x" }, { id: "call-1" }));
    const { root, store, faux } = await open(respond, { tools: [first.tool] });
    await root.submit({ type: "input", content: "go" });
    await first.started.promise;

    const second = itemTool({ replay: "safe" });
    const h2 = await reopen(store, { models: faux.models, defaultModel: faux.ref, tools: [second.tool] });
    const root2 = await h2.root();
    await root2.waitForIdle();
    expect(second.seen).toEqual([]);
    const [result] = await toolResults(root2);
    expect(messageOf(result!)).toMatchObject({ isError: true });
    expect(diagnosticsOf(result!).map((d) => d.code)).toEqual(["interrupted"]);
  });

  test("an unsafe call's interrupted result carries the output it had streamed durably", async () => {
    const first = itemTool({ holdFirst: true, output: "progress: step 1 of 3\n" });
    const respond = callsThenAnswer(fauxToolCall("apply", { item: "x" }, { id: "call-1" }));
    const { h, root, store, faux } = await open(respond, { tools: [first.tool] });
    await root.submit({ type: "input", content: "go" });
    await first.started.promise;
    // api.output reaches pi.live while the tool is still running (throttled, so wait for it).
    await until(() => Boolean(liveOf(h).tools?.[0]?.output));
    expect(liveOf(h).tools?.[0]).toMatchObject({ status: "running", output: "progress: step 1 of 3\n" });

    const h2 = await reopen(store, {
      models: faux.models,
      defaultModel: faux.ref,
      tools: [itemTool({}).tool],
    });
    const root2 = await h2.root();
    await root2.waitForIdle();
    const [result] = await toolResults(root2);
    expect(diagnosticsOf(result!).map((d) => d.code)).toEqual(["interrupted"]);
    expect(textOf(messageOf(result!))).toContain("progress: step 1 of 3");
  });
});

// ---------------------------------------------------------------------------------------------

describe("tools", () => {
  test("the calls of one round run in parallel: both have started before either finishes", async () => {
    const a = gatedTool("first");
    const b = gatedTool("second");
    const { root } = await open(
      callsThenAnswer(
        fauxToolCall("first", {}, { id: "call-1" }),
        fauxToolCall("second", {}, { id: "call-2" }),
      ),
      { tools: [a.tool, b.tool] },
    );
    const sub = await root.submit({ type: "input", content: "go" });
    await Promise.all([a.started.promise, b.started.promise]);
    a.release.resolve();
    b.release.resolve();
    expect((await sub.wait()).status).toBe("done");
    expect((await toolResults(root)).map((e) => textOf(messageOf(e)))).toEqual([
      "first finished",
      "second finished",
    ]);
  });

  test("toolExecution sequential: the next call of the round starts only when the previous one ended", async () => {
    const a = gatedTool("first");
    const b = gatedTool("second");
    const beforeTool: string[] = [];
    const { h, root } = await open(
      callsThenAnswer(
        fauxToolCall("first", {}, { id: "call-1" }),
        fauxToolCall("second", {}, { id: "call-2" }),
      ),
      {
        tools: [a.tool, b.tool],
        settings: { toolExecution: "sequential" },
        hooks: { beforeTool: [(call) => void beforeTool.push(call.name)] },
      },
    );
    const sub = await root.submit({ type: "input", content: "go" });
    await a.started.promise;
    await new Promise((r) => setTimeout(r, 30));
    let secondStarted = false;
    void b.started.promise.then(() => {
      secondStarted = true;
    });
    await Promise.resolve();
    expect(secondStarted).toBe(false);
    expect(liveOf(h).tools?.map((t) => [t.name, t.status, t.taskId !== undefined])).toEqual([
      ["first", "running", true],
      ["second", "pending", false],
    ]);
    a.release.resolve();
    await b.started.promise;
    b.release.resolve();
    expect((await sub.wait()).status).toBe("done");
    expect(beforeTool).toEqual(["first", "second"]);
    expect((await toolResults(root)).map((e) => textOf(messageOf(e)))).toEqual([
      "first finished",
      "second finished",
    ]);
  });

  test("a tool with executionMode sequential makes its whole round sequential", async () => {
    const a = gatedTool("first");
    const serial = defineTool({
      name: "serial",
      description: "One at a time",
      parameters: Type.Object({}),
      executionMode: "sequential",
      execute: async () => textResult("serial done"),
    });
    const { h, root } = await open(
      callsThenAnswer(
        fauxToolCall("first", {}, { id: "call-1" }),
        fauxToolCall("serial", {}, { id: "call-2" }),
      ),
      { tools: [a.tool, serial] },
    );
    const sub = await root.submit({ type: "input", content: "go" });
    await a.started.promise;
    expect(liveOf(h).tools?.map((t) => t.status)).toEqual(["running", "pending"]);
    a.release.resolve();
    expect((await sub.wait()).status).toBe("done");
    expect((await toolResults(root)).map((e) => textOf(messageOf(e)))).toEqual([
      "first finished",
      "serial done",
    ]);
    expect(() => defineTool({ ...serial, executionMode: "sometimes" as never })).toThrow(TypeError);
  });

  test("a sequential round survives a restart: the interrupted call gets its result, then the next one runs", async () => {
    const first = itemTool({ holdFirst: true });
    const later = defineTool({
      name: "later",
      description: "Runs after",
      parameters: Type.Object({}),
      execute: async () => textResult("later done"),
    });
    const respond = callsThenAnswer(
      fauxToolCall("apply", { item: "x" }, { id: "call-1" }),
      fauxToolCall("later", {}, { id: "call-2" }),
    );
    const settings = { toolExecution: "sequential" as const };
    const { root, store, faux } = await open(respond, { tools: [first.tool, later], settings });
    await root.submit({ type: "input", content: "go", requestId: "r" });
    await first.started.promise;

    const h2 = await reopen(store, {
      models: faux.models,
      defaultModel: faux.ref,
      tools: [itemTool({}).tool, later],
      settings,
    });
    const again = await (await h2.root()).submit({ type: "input", content: "go", requestId: "r" });
    expect((await again.wait()).status).toBe("done");
    const results = await toolResults(await h2.root());
    expect(results.map((e) => diagnosticsOf(e).map((d) => d.code))).toEqual([["interrupted"], []]);
    expect(textOf(messageOf(results[1]!))).toBe("later done");
  });

  test("aborting a sequential round answers the calls that never started with an aborted result", async () => {
    const a = gatedTool("first");
    const b = gatedTool("second");
    const { h, root } = await open(
      callsThenAnswer(
        fauxToolCall("first", {}, { id: "call-1" }),
        fauxToolCall("second", {}, { id: "call-2" }),
      ),
      { tools: [a.tool, b.tool], settings: { toolExecution: "sequential" } },
    );
    const sub = await root.submit({ type: "input", content: "go" });
    await a.started.promise;
    await root.abort();
    expect(await sub.wait()).toMatchObject({ status: "unanswered", reason: "aborted" });
    const results = await toolResults(root);
    expect(
      results.map((e) => [(messageOf(e) as { toolCallId: string }).toolCallId, diagnosticsOf(e)[0]?.code]),
    ).toEqual([
      ["call-1", "aborted"],
      ["call-2", "aborted"],
    ]);
    expect(liveOf(h).run).toBeUndefined();
    expect((liveOf(h).tools ?? []).filter((t) => t.status !== "done")).toEqual([]);
  });

  test("streamed output in pi.live keeps its head within the caps and counts what it dropped", async () => {
    const release = deferred();
    const chatty = defineTool({
      name: "chatty",
      description: "Prints a lot",
      parameters: Type.Object({}),
      async execute(_args, api) {
        for (let i = 1; i <= 2500; i++) api.output(`line ${i}\n`);
        await release.promise;
        return textResult("printed");
      },
    });
    const { h, root } = await open(callsThenAnswer(fauxToolCall("chatty", {}, { id: "call-1" })), {
      tools: [chatty],
    });
    const sub = await root.submit({ type: "input", content: "go" });
    await until(() => Boolean(liveOf(h).tools?.[0]?.droppedLines));
    const slot = liveOf(h).tools![0]!;
    const lines = slot.output!.split("\n").filter(Boolean);
    expect(lines).toHaveLength(2000);
    expect(lines[0]).toBe("line 1");
    expect(lines.at(-1)).toBe("line 2000");
    expect(slot.droppedLines).toBe(500);
    release.resolve();
    expect((await sub.wait()).status).toBe("done");
    expect(liveOf(h).tools?.[0]?.output).toBeUndefined();
  });

  test("output streamed in small chunks is cut by bytes exactly where the whole text would be", async () => {
    // Chunks of 1-17 characters mixing 1-, 2-, 3- and 4-byte UTF-8, 40,000 of them (about 400 KB):
    // the buffer counts as chunks arrive, so its cut must match capHead over the concatenation.
    const alphabet = ["a", "é", "€", "😀", "b", "\n"];
    const chunks: string[] = [];
    let seed = 7;
    const next = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed;
    };
    for (let i = 0; i < 40_000; i++) {
      let chunk = "";
      const length = 1 + (next() % 17);
      // Newlines are rare, so the byte cap binds before the line cap.
      for (let j = 0; j < length; j++) chunk += alphabet[next() % (next() % 50 === 0 ? 6 : 5)];
      chunks.push(chunk);
    }
    const whole = capHead(chunks.join(""));
    expect(whole.truncated).toBe(true);
    expect(whole.shownLines).toBeLessThan(OUTPUT_LIMITS.maxLines);
    const emitted = deferred();
    const release = deferred();
    const chatty = defineTool({
      name: "chatty",
      description: "Prints a lot",
      parameters: Type.Object({}),
      async execute(_args, api) {
        for (let i = 0; i < chunks.length; i++) {
          api.output(chunks[i]!);
          // Pauses let throttled progress commits land mid-stream, before and after the cut.
          if (i % 250 === 0) await new Promise((r) => setTimeout(r, 2));
        }
        emitted.resolve();
        await release.promise;
        return textResult("printed");
      },
    });
    const { h, root } = await open(callsThenAnswer(fauxToolCall("chatty", {}, { id: "call-1" })), {
      tools: [chatty],
      settings: { outputIntervalMs: 1 },
    });
    const watch = await root.watch();
    const committedBytes: number[] = [];
    watch.start((frame) => {
      const output = (frame.value.docs["pi.live"] as LiveState | undefined)?.tools?.[0]?.output;
      if (output !== undefined) committedBytes.push(new TextEncoder().encode(output).length);
    });
    const sub = await root.submit({ type: "input", content: "go" });
    await emitted.promise;
    const dropped = whole.totalBytes - whole.shownBytes;
    await until(() => liveOf(h).tools?.[0]?.droppedBytes === dropped);
    await watch.stop();
    // Every committed snapshot stayed within the cap, and there were several before the cut.
    expect(committedBytes.filter((b) => b < whole.shownBytes).length).toBeGreaterThan(5);
    expect(Math.max(...committedBytes)).toBeLessThanOrEqual(OUTPUT_LIMITS.maxBytes);
    const slot = liveOf(h).tools![0]!;
    expect(slot.output).toBe(whole.head);
    expect(slot.droppedLines).toBe(whole.totalLines - whole.shownLines);
    release.resolve();
    expect((await sub.wait()).status).toBe("done");
  });

  test("live output is stored once: progress commits store what was printed since the last one", async () => {
    // 300 chunks of 100 bytes (30 KB, under the cap) with a progress commit after nearly every one.
    // Rewriting the slot whole per commit would store about 150 times the output; patches store it
    // once, plus a whole write of pi.live each time a document's patch rows reach their limit.
    const chunks = Array.from({ length: 300 }, (_, i) => `${String(i).padStart(4, "0")}${"x".repeat(95)}\n`);
    const emitted = deferred();
    const release = deferred();
    const chatty = defineTool({
      name: "chatty",
      description: "Prints steadily",
      parameters: Type.Object({}),
      async execute(_args, api) {
        for (const chunk of chunks) {
          api.output(chunk);
          await new Promise((r) => setTimeout(r, 2));
        }
        emitted.resolve();
        await release.promise;
        return textResult("printed");
      },
    });
    const store = await memoryStore();
    const jobs: StoreJob[] = [];
    const { h, root } = await open(callsThenAnswer(fauxToolCall("chatty", {}, { id: "call-1" })), {
      tools: [chatty],
      settings: { outputIntervalMs: 1 },
      store,
    });
    recordJobs(store, { into: jobs });
    const sub = await root.submit({ type: "input", content: "go" });
    await emitted.promise;
    const output = chunks.join("");
    await until(() => liveOf(h).tools?.[0]?.output === output);
    const liveWrites = jobs.flatMap((j) => j.statements).filter((s) => s.params?.[1] === "pi.live");
    const bytes = liveWrites.reduce((n, s) => n + String(s.params?.[2] ?? "").length, 0);
    expect(liveWrites.filter((s) => s.sql.includes("doc_patches")).length).toBeGreaterThan(100);
    expect(bytes).toBeLessThan(output.length * 4);
    // What was stored is what the engine holds: a store opened on this image reads the same slot.
    const reopened = await memoryStore(store.image());
    const row = await reopened.read((sql) =>
      sql.get("SELECT count(*) AS n FROM doc_patches WHERE name = 'pi.live'"),
    );
    expect(Number(row?.["n"])).toBeGreaterThan(0);
    // A bare core harness: it loads the documents without recovering the agent's tasks.
    const again = await Harness.open(reopened);
    const slot = (again.session.records.getDoc(1, "pi.live") as LiveState).tools?.[0];
    expect(slot?.output).toBe(output);
    await again.close();
    release.resolve();
    expect((await sub.wait()).status).toBe("done");
  });

  test("a tool's own model spend is stored with its result and counted in pi.usage.tools", async () => {
    const spent = (tokens: number): Usage => ({
      input: tokens,
      output: 1,
      cacheRead: 0,
      cacheWrite: 0,
      totalTokens: tokens + 1,
      cost: {
        input: tokens / 1000,
        output: 0.001,
        cacheRead: 0,
        cacheWrite: 0,
        total: tokens / 1000 + 0.001,
      },
    });
    const summarize = defineTool({
      name: "summarize",
      description: "Summarize with a model of its own",
      parameters: Type.Object({ tokens: Type.Number() }),
      execute: async (args) => ({ ...textResult("summary"), usage: spent(args.tokens) }),
    });
    const { h, root } = await open(
      callsThenAnswer(
        fauxToolCall("summarize", { tokens: 10 }, { id: "call-1" }),
        fauxToolCall("summarize", { tokens: 30 }, { id: "call-2" }),
      ),
      { tools: [summarize] },
    );
    expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
    const results = await toolResults(root);
    expect(results.map((e) => (e.data as { usage?: Usage }).usage?.input)).toEqual([10, 30]);
    const usage = await h.usage();
    expect(usage.tools["summarize"]).toEqual(addUsage(spent(10), spent(30)));
    expect(Object.keys(usage.models)).toEqual(["faux/faux-1"]);
  });

  test("details are stored with the result for UIs; a throwing tool gives a tool_error result and a failed task", async () => {
    const withDetails = defineTool({
      name: "rows",
      description: "Count rows",
      parameters: Type.Object({}),
      execute: async () => ({ ...textResult("3 rows"), details: { rows: 3 } }),
    });
    const throws = defineTool({
      name: "boom",
      description: "Throws",
      parameters: Type.Object({}),
      execute: async () => {
        throw new Error("kaput");
      },
    });
    const { h, root } = await open(
      callsThenAnswer(fauxToolCall("rows", {}, { id: "call-1" }), fauxToolCall("boom", {}, { id: "call-2" })),
      { tools: [withDetails, throws] },
    );
    expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
    const [rows, boom] = await toolResults(root);
    expect(JSON.stringify(rows!.model)).toContain('"details":{"rows":3}');
    expect(messageOf(boom!)).toMatchObject({ isError: true });
    expect(diagnosticsOf(boom!).map((d) => d.code)).toEqual(["tool_error"]);
    const outcomes = (await h.tasks({ kind: "pi.tool" })).map((t) =>
      t.state.status === "terminal" ? t.state.outcome.status : t.state.status,
    );
    expect(outcomes.sort()).toEqual(["completed", "failed"]);
  });
});

// ---------------------------------------------------------------------------------------------

describe("generation", () => {
  test("a streaming answer reaches pi.live at most every 100 ms by default", async () => {
    const words = Array.from({ length: 400 }, (_, i) => `word${i}`).join(" ");
    const faux = fauxAgentModel(() => fauxAssistantMessage(words), { tokensPerSecond: 2500 });
    const store = await memoryStore();
    const h = await AgentHarness.open(store, { models: faux.models, defaultModel: faux.ref });
    cleanups.push(async () => {
      await h.close().catch(() => undefined);
      faux.unregister();
    });
    const root = await h.root();
    const partials: number[] = [];
    let lastText = "";
    const poll = setInterval(() => {
      const text = liveOf(h).generation?.message ? JSON.stringify(liveOf(h).generation?.message) : "";
      if (text && text !== lastText) partials.push(Date.now());
      lastText = text;
    }, 1);
    const before = store.stats.transactions;
    const started = Date.now();
    const settled = await (await root.submit({ type: "input", content: "talk" })).wait();
    const elapsed = Date.now() - started;
    clearInterval(poll);
    expect(settled.status).toBe("done");
    // Admission and the answer, plus one commit per 100 ms of streaming at most.
    const partialCommits = store.stats.transactions - before - 2;
    expect(elapsed).toBeGreaterThan(200);
    expect(partialCommits).toBeGreaterThanOrEqual(1);
    expect(partialCommits).toBeLessThanOrEqual(Math.ceil(elapsed / 100) + 1);
    expect(partials.length).toBeGreaterThanOrEqual(1);
  });

  test("retry defaults: 3 retries, 2 s base doubling per attempt, capped at 60 s", () => {
    expect(DEFAULT_RETRY).toEqual({ enabled: true, maxRetries: 3, baseDelayMs: 2000, maxDelayMs: 60_000 });
    const policy = resolveSettings({}).retry;
    expect(policy).toEqual(DEFAULT_RETRY);
    expect([1, 2, 3, 4, 5, 6, 7].map((n) => retryDelayMs(policy, n))).toEqual([
      2000, 4000, 8000, 16_000, 32_000, 60_000, 60_000,
    ]);
    expect(resolveSettings({})).toMatchObject({ partialIntervalMs: 100, outputIntervalMs: 100 });
  });

  test("the backoff is durable: after a restart during it, the retry is not sent before the stored time", async () => {
    const sent: number[] = [];
    const respond = (req: Parameters<typeof echo>[0], n: number) => {
      sent.push(Date.now());
      return n <= 1 ? fauxError("503 Service Unavailable") : echo(req, n);
    };
    const settings = { retry: { baseDelayMs: 400, maxDelayMs: 400 } };
    const { h, root, store, faux } = await open(respond, { settings });
    const sub = await root.submit({ type: "input", content: "hi", requestId: "r" });
    await until(() => Boolean(liveOf(h).generation?.retry));
    const retryAt = liveOf(h).generation!.retry!.at;
    expect(retryAt).toBeGreaterThanOrEqual(sent[0]! + 400);
    await h.close();
    void sub;

    const h2 = await reopen(store, { models: faux.models, defaultModel: faux.ref, settings });
    const again = await (await h2.root()).submit({ type: "input", content: "hi", requestId: "r" });
    expect((await again.wait()).status).toBe("done");
    expect(sent).toHaveLength(2);
    expect(sent[1]!).toBeGreaterThanOrEqual(retryAt);
  });

  test("requests carry the conversation's provider session (pi.provider): the model's prompt cache hits", async () => {
    const { tool } = itemTool({});
    const { root } = await open(callsThenAnswer(fauxToolCall("apply", { item: "a" }, { id: "call-1" })), {
      tools: [tool],
    });
    expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
    const answers = (await transcript(root))
      .filter((e) => e.kind === "pi.assistant")
      .map((e) => messageOf(e) as AssistantMessage);
    expect(answers[0]!.usage.cacheRead).toBe(0);
    expect(answers[1]!.usage.cacheRead).toBeGreaterThan(0);
  });

  test("an API key echoed by a provider error never reaches the store; a provider that throws at once gives an error answer", async () => {
    const KEY = "sk-test-0123456789abcdef";
    let mode: "echo" | "throw" = "echo";
    const { root, store } = await open(() => fauxError(`401 Unauthorized: key ${KEY} is not valid`), {
      apiKey: () => KEY,
      settings: { retry: { enabled: false } },
      stream: (model, context, options) => {
        expect(options.apiKey).toBe(KEY);
        if (mode === "throw") throw new Error(`could not reach the provider with key ${KEY}`);
        return defaultStream(model, context, options);
      },
    });
    const first = await (await root.submit({ type: "input", content: "hi" })).wait();
    expect(first).toMatchObject({ status: "unanswered", reason: "model_error" });
    mode = "throw";
    const second = await (await root.submit({ type: "input", content: "again" })).wait();
    expect(second).toMatchObject({ status: "unanswered", reason: "model_error" });
    const errors = (await transcript(root))
      .filter((e) => e.kind === "pi.assistant")
      .map((e) => (messageOf(e) as AssistantMessage).errorMessage);
    expect(errors).toEqual([
      "401 Unauthorized: key [redacted] is not valid",
      "could not reach the provider with key [redacted]",
    ]);
    const everything = await store.read(async (sql) =>
      JSON.stringify([
        await sql.all("SELECT * FROM entries"),
        await sql.all("SELECT * FROM documents"),
        await sql.all("SELECT * FROM tasks"),
        await sql.all("SELECT * FROM submissions"),
      ]),
    );
    expect(everything).not.toContain(KEY);
    expect(JSON.stringify([first, second])).not.toContain(KEY);
  });

  test("the thinking level is passed to the provider as reasoning", async () => {
    const reasoning: unknown[] = [];
    const { root } = await open(echo, {
      stream: (model, context, options) => {
        reasoning.push(options.reasoning);
        return defaultStream(model, context, options);
      },
    });
    await (await root.submit({ type: "input", content: "a" })).wait();
    await root.configure({ thinkingLevel: "high" });
    await (await root.submit({ type: "input", content: "b" })).wait();
    expect(reasoning).toEqual([undefined, "high"]);
  });

  test("settings.stream options are pinned into the attempt: a resent request keeps them, a retry takes new ones", async () => {
    const SECRET = "Bearer sk-header-secret-42";
    let stream: StreamSettings = {
      transport: "sse",
      timeoutMs: 1234,
      maxRetries: 2,
      maxRetryDelayMs: 500,
      metadata: { user: "u1" },
      cacheRetention: "short",
      headers: { authorization: SECRET },
    };
    const seen: Array<Record<string, unknown>> = [];
    const record: AgentHarnessOptions["stream"] = (model, context, options) => {
      const { signal: _s, sessionId, ...rest } = options;
      seen.push({ ...rest, sessionId: typeof sessionId });
      return defaultStream(model, context, options);
    };
    // The first request streams slowly, so the store's image is taken while it is in flight.
    const slow = fauxAgentModel(() => fauxAssistantMessage("word ".repeat(200)), { tokensPerSecond: 200 });
    cleanups.push(async () => slow.unregister());
    const store = await memoryStore();
    const h = await AgentHarness.open(store, {
      models: slow.models,
      defaultModel: slow.ref,
      settings: () => ({ stream, retry: { baseDelayMs: 1 } }),
      stream: record,
    });
    cleanups.push(() => h.close().catch(() => undefined));
    const root = await h.root();
    await root.submit({ type: "input", content: "go", requestId: "r" });
    await until(() => seen.length === 1);
    const image = store.image();
    const { headers: _h, ...pinned } = stream;
    expect(seen[0]).toEqual({ ...stream, sessionId: "string" });
    // Headers carry credentials: read at request time, never stored.
    const rows = await store.read((sql) => sql.all("SELECT state FROM tasks"));
    expect(JSON.stringify(rows)).not.toContain(SECRET);
    expect(JSON.parse(String(rows[0]?.["state"])).checkpoint.stream).toEqual(pinned);
    await h.close();

    // Reopened with other settings: the in-flight attempt is resent with its pinned options (and
    // today's headers); its retry after a 503 prepares again and takes the new ones.
    stream = { timeoutMs: 9999, headers: { authorization: "Bearer new" } };
    let calls = 0;
    const flaky = fauxAgentModel(
      () => (++calls === 1 ? fauxError("503 Service Unavailable") : fauxAssistantMessage("ok")),
      {
        id: slow.ref.id,
      },
    );
    cleanups.push(async () => flaky.unregister());
    const h2 = await AgentHarness.open(await memoryStore(image), {
      models: flaky.models,
      defaultModel: flaky.ref,
      settings: () => ({ stream, retry: { baseDelayMs: 1 } }),
      stream: record,
    });
    cleanups.push(() => h2.close().catch(() => undefined));
    const again = await (await h2.root()).submit({ type: "input", content: "go", requestId: "r" });
    expect((await again.wait()).status).toBe("done");
    expect(seen.slice(1)).toEqual([
      { ...pinned, headers: { authorization: "Bearer new" }, sessionId: "string" },
      { timeoutMs: 9999, headers: { authorization: "Bearer new" }, sessionId: "string" },
    ]);
  });

  test("bad stream settings are refused when the harness opens", async () => {
    const bad: unknown[] = [
      { nope: 1 },
      { timeoutMs: -5 },
      { headers: { a: 1 } },
      { transport: "pigeon" },
      { maxRetries: 1.5 },
      [],
    ];
    for (const stream of bad)
      await expect(open(echo, { settings: { stream: stream as StreamSettings } })).rejects.toThrow(TypeError);
  });
});

// ---------------------------------------------------------------------------------------------

describe("the inbox", () => {
  test("a follow-up sent during a tool round waits past the round and starts its own run after the answer", async () => {
    const { tool, started, release } = gatedTool();
    const { h, root, faux } = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "call-1" })), {
      tools: [tool],
    });
    const first = await root.submit({ type: "input", content: "work" });
    await started.promise;
    const later = await root.submit({ type: "input", content: "later" });
    expect(inboxOf(h).items.map((i) => i.mode)).toEqual(["followUp"]);
    release.resolve();
    expect((await first.wait()).status).toBe("done");
    expect(faux.requests[1]!.messages.map(textOf)).not.toContain("later");
    expect((await later.wait()).status).toBe("done");
    const entries = await transcript(root);
    expect(kinds(entries)).toEqual([
      "pi.user",
      "pi.assistant",
      "pi.tool-result",
      "pi.assistant",
      "pi.user",
      "pi.assistant",
    ]);
    expect(textOf(messageOf(entries[4]!))).toBe("later");
  });

  test("Submission.abort withdraws a queued input (aborted), and reports already_placed and settled otherwise", async () => {
    const { tool, started, release } = gatedTool();
    const { h, root } = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "call-1" })), {
      tools: [tool],
    });
    const first = await root.submit({ type: "input", content: "work" });
    await started.promise;
    const queued = await root.submit({ type: "input", content: "never mind" });
    expect(await queued.abort()).toBe("aborted");
    expect(inboxOf(h).items).toEqual([]);
    expect(await queued.wait()).toMatchObject({ status: "unanswered", reason: "aborted" });
    expect(await first.abort()).toBe("already_placed");
    release.resolve();
    await first.wait();
    expect(await queued.abort()).toBe("settled");
    expect((await transcript(root)).map((e) => textOf(messageOf(e)))).not.toContain("never mind");
  });

  test("Conversation.abort withdraws queued inputs but keeps queued writes for the next submission", async () => {
    const { tool, started } = gatedTool();
    const { h, root, faux } = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "call-1" })), {
      tools: [tool],
    });
    await root.submit({ type: "input", content: "work" });
    await started.promise;
    const input = await root.submit({ type: "input", content: "queued input" });
    const hint = { role: "user", content: "a hint", timestamp: 0 };
    const write = await root.submit({ type: "write", entry: { kind: "app.hint", model: [hint] } });
    await root.abort();
    expect(await input.wait()).toMatchObject({ status: "unanswered", reason: "aborted" });
    expect((await write.record()).status).toBe("queued");
    expect(inboxOf(h).items.map((i) => i.mode)).toEqual(["write"]);
    // The next submission places the kept write first.
    faux.respond = echo;
    const next = await root.submit({ type: "input", content: "again" });
    expect((await next.wait()).status).toBe("done");
    const entries = await transcript(root);
    expect(kinds(entries).slice(-3)).toEqual(["app.hint", "pi.user", "pi.assistant"]);
    expect(await write.wait()).toEqual({ status: "done", entry: entries.at(-3)!.id });
    expect(textOf(messageOf(entries.at(-2)!))).toBe("again");
  });

  test("a write carrying edits changes what the model sees next; malformed edits are refused at submit", async () => {
    const { root, faux } = await open(echo);
    await (await root.submit({ type: "input", content: "my password is hunter2" })).wait();
    const [secret] = await transcript(root);
    const edit = await root.submit({
      type: "write",
      entry: { kind: "app.redact", edits: [{ target: secret!.id, action: "omit" }] },
    });
    expect((await edit.wait()).status).toBe("done");
    await (await root.submit({ type: "input", content: "what did I say?" })).wait();
    expect(faux.requests[1]!.messages.map(textOf)).toEqual([
      "echo: my password is hunter2",
      "what did I say?",
    ]);
    // The transcript keeps the raw entry: edits change the context, never storage.
    expect(kinds(await transcript(root))).toEqual([
      "pi.user",
      "pi.assistant",
      "app.redact",
      "pi.user",
      "pi.assistant",
    ]);
    for (const edits of [
      [{ target: 10_000, action: "omit" }],
      [{ target: secret!.id, action: "shred" }],
      [{ target: secret!.id, action: "replace" }],
      "all",
    ]) {
      await expect(
        root.submit({ type: "write", entry: { kind: "app.redact", edits: edits as never } }),
      ).rejects.toBeInstanceOf(InvalidTransition);
    }
  });

  test("a requestId used for an input cannot be reused for a write", async () => {
    const { root } = await open(echo);
    await (await root.submit({ type: "input", content: "hi", requestId: "same" })).wait();
    await expect(
      root.submit({
        type: "write",
        requestId: "same",
        entry: { kind: "app.note", data: { n: 1 } },
      }),
    ).rejects.toBeInstanceOf(InvalidTransition);
  });
});

// ---------------------------------------------------------------------------------------------

describe("conversations", () => {
  test("createConversation({ agent }), configure (null clears) and conversation(id) shape what the model gets", async () => {
    const { h, faux } = await open(echo);
    const c = await h.createConversation({ agent: { instructions: "Answer briefly." } });
    expect(await c.agent()).toMatchObject({ instructions: "Answer briefly." });
    await (await c.submit({ type: "input", content: "one" })).wait();
    expect(faux.requests[0]!.systemPrompt).toContain("Answer briefly.");
    await c.configure({ instructions: null });
    expect((await c.agent()).instructions).toBeUndefined();
    await (await c.submit({ type: "input", content: "two" })).wait();
    expect(faux.requests[1]!.systemPrompt ?? "").not.toContain("Answer briefly.");
    expect(h.conversation(c.id)?.id).toBe(c.id);
    expect(h.conversation(9999)).toBeUndefined();
  });

  test("root({ agent }) configures the root conversation on first use only", async () => {
    const { h, faux } = await open(echo);
    const root = await h.root({ agent: { instructions: "First set." } });
    await h.root({ agent: { instructions: "Second set." } });
    expect(await root.agent()).toMatchObject({ instructions: "First set." });
    await (await root.submit({ type: "input", content: "x" })).wait();
    expect(faux.requests[0]!.systemPrompt).toContain("First set.");
  });

  test("a conversation owned by a task starts with its owner conversation's agent", async () => {
    const { tool, started, release } = gatedTool();
    const { h, root } = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "call-1" })), {
      tools: [tool],
    });
    await root.configure({ instructions: "Be terse.", thinkingLevel: "low" });
    const sub = await root.submit({ type: "input", content: "go" });
    await started.promise;
    const taskId = liveOf(h).tools![0]!.taskId!;
    const child = await h.createConversation({ ownership: { kind: "task", taskId } });
    expect(await child.agent()).toEqual({ instructions: "Be terse.", thinkingLevel: "low" });
    const ownerless = await h.createConversation();
    expect(await ownerless.agent()).toEqual({});
    release.resolve();
    expect((await sub.wait()).status).toBe("done");
  });

  test("defineDoc: a custom document reads its initial value until written, and shows in the view", async () => {
    const notes = defineDoc<{ items: string[] }>("app.notes", { items: [] });
    const { h, root } = await open(echo);
    expect(await h.transaction((tx) => notes.read(tx, root.id))).toEqual({ items: [] });
    await h.transaction((tx) => notes.write(tx, root.id, { items: ["a"] }));
    expect(await h.transaction((tx) => notes.read(tx, root.id))).toEqual({ items: ["a"] });
    expect((await root.viewState()).docs["app.notes"]).toEqual({ items: ["a"] });
    expect(() => defineDoc("pi.custom", {})).toThrow(TypeError);
  });
});
