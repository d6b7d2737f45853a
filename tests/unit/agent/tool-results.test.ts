/**
 * What a tool call leaves: streamed output within its caps and stored once, the tool's own model
 * spend, details and errors, and the recovery of an interrupted call (stored arguments and policy, no
 * second beforeTool, the durable partial output). Recovery tests take the store's image while a tool
 * is held mid-execution (its intent committed, its result not) and open a second harness on it.
 */
import { fauxToolCall, type Usage } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { describe, expect, test } from "vitest";
import { addUsage, type LiveState } from "../../../worker/agent/records.ts";
import { capHead, OUTPUT_LIMITS, type ToolResult, textResult } from "../../../worker/agent/tools/contract.ts";
import { internals } from "../../../worker/core/internals.ts";
import { defineTool, Harness } from "../../../worker/index.ts";
import { deferred, memoryStore, recordJobs, type StoreJob, until } from "../../../worker/testing.ts";
import {
  callsThenAnswer,
  diagnosticsOf,
  itemTool,
  liveOf,
  messageOf,
  open,
  reopen,
  textOf,
  toolResults,
} from "./fixtures.ts";

describe("tool output", () => {
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
      // Commits as often as possible: neither the interval nor the size pacing holds them back.
      settings: { outputIntervalMs: 1, progressBytesPerSecond: 1024 ** 3 },
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
    // Each commit writes at most one window (spec §8.2): no statement holds more than the retained
    // output and the slot's JSON around it; the slot holding the output is `running`.
    expect(Math.max(...liveWrites.map((s) => String(s.params?.[2] ?? "").length))).toBeLessThan(
      JSON.stringify(output).length + 1024,
    );
    expect(liveOf(h).tools?.[0]?.status).toBe("running");
    // What was stored is what the engine holds: a store opened on this image reads the same slot.
    const reopened = await memoryStore(store.image());
    const row = await reopened.read((sql) =>
      sql.get("SELECT count(*) AS n FROM doc_patches WHERE name = 'pi.live'"),
    );
    expect(Number(row?.["n"])).toBeGreaterThan(0);
    // A bare core harness: it loads the documents without recovering the agent's tasks.
    const again = await Harness.open(reopened);
    const slot = (internals(again).session.records.getDoc(1, "pi.live") as LiveState).tools?.[0];
    expect(slot?.output).toBe(output);
    await again.close();
    release.resolve();
    expect((await sub.wait()).status).toBe("done");
  });

  test("a sliding tail writes at most one retained window per progress commit", async () => {
    // Spec §8.2: a tail-retaining slot's window slides; whatever a commit writes for it, trim and
    // append or one set, is at most one window. (Reading 23d: only a head-retaining slot was measured.)
    const window = 2_000;
    const chunks = Array.from({ length: 200 }, (_, i) => `${String(i).padStart(4, "0")}${"y".repeat(95)}\n`);
    const emitted = deferred();
    const release = deferred();
    const tail = defineTool({
      name: "tail",
      description: "Prints a long log, keeping its end",
      parameters: Type.Object({}),
      outputLimits: { maxBytes: window, retain: "tail" },
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
    const { h, root } = await open(callsThenAnswer(fauxToolCall("tail", {}, { id: "call-1" })), {
      tools: [tail],
      settings: { outputIntervalMs: 1 },
      store,
    });
    recordJobs(store, { into: jobs });
    const sub = await root.submit({ type: "input", content: "go" });
    await emitted.promise;
    const kept = chunks.slice(-20).join("");
    await until(() => liveOf(h).tools?.[0]?.output === kept, { what: "the last window" });
    const liveWrites = jobs.flatMap((j) => j.statements).filter((s) => s.params?.[1] === "pi.live");
    expect(liveWrites.filter((s) => s.sql.includes("doc_patches")).length).toBeGreaterThan(50);
    // Per commit: the pi.live bytes of its statements, never more than one window and the slot.
    const perCommit = jobs.map((j) =>
      j.statements
        .filter((s) => s.params?.[1] === "pi.live")
        .reduce((n, s) => n + String(s.params?.[2] ?? "").length, 0),
    );
    expect(Math.max(...perCommit)).toBeLessThan(JSON.stringify(kept).length + 1024);
    expect(liveOf(h).tools?.[0]).toMatchObject({ status: "running", droppedLines: 180 });
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
    // Each commit that appends a result, with the pi.usage tools total that same commit wrote.
    const counted: Array<{ input: number | undefined; total: Usage | undefined }> = [];
    h.subscribe((change) => {
      for (const e of change.entries.filter((x) => x.kind === "pi.tool-result")) {
        const doc = change.docs.find((d) => d.conversationId === root.id && d.name === "pi.usage");
        counted.push({
          input: (e.data as { usage?: Usage }).usage?.input,
          total: (doc?.value as { tools?: Record<string, Usage> } | undefined)?.tools?.["summarize"],
        });
      }
    });
    expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
    const results = await toolResults(root);
    expect(results.map((e) => (e.data as { usage?: Usage }).usage?.input)).toEqual([10, 30]);
    const usage = await h.usage();
    expect(usage.tools["summarize"]).toEqual(addUsage(spent(10), spent(30)));
    // Counted in the result's own commit (the calls run in parallel: either may commit first).
    const first = counted[0]!.input === 10 ? spent(10) : spent(30);
    expect(counted.map((c) => c.total)).toEqual([first, addUsage(spent(10), spent(30))]);
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

  test("a tool that throws a value that is not an Error (a string, undefined) still gives a tool_error result and a failed task (draw 41c)", async () => {
    const thrower = (name: string, value: unknown) =>
      defineTool({
        name,
        description: "Throws a value that is not an Error",
        parameters: Type.Object({}),
        execute: async () => {
          throw value;
        },
      });
    const { h, root } = await open(
      callsThenAnswer(
        fauxToolCall("words", {}, { id: "call-1" }),
        fauxToolCall("nothing", {}, { id: "call-2" }),
      ),
      { tools: [thrower("words", "kaput as text"), thrower("nothing", undefined)] },
    );
    expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
    const results = await toolResults(root);
    expect(results).toHaveLength(2);
    for (const entry of results) {
      expect(messageOf(entry)).toMatchObject({ isError: true });
      expect(diagnosticsOf(entry).map((d) => d.code)).toEqual(["tool_error"]);
    }
    const words = results.find((e) => (messageOf(e) as { toolName?: string }).toolName === "words")!;
    expect(textOf(messageOf(words))).toContain("kaput as text");
    const tools = await h.tasks({ kind: "pi.tool" });
    const outcomes = tools.map((t) =>
      t.state.status === "terminal" ? t.state.outcome.status : t.state.status,
    );
    expect(outcomes).toEqual(["failed", "failed"]);
    for (const t of tools) {
      const outcome = (t.state as { outcome?: { result?: { entryId?: number } } }).outcome;
      expect(results.map((e) => e.id)).toContain(outcome?.result?.entryId);
    }
  });
});

describe("recovery of an interrupted call", () => {
  test("a safe call runs again with the stored (rewritten) arguments, without running beforeTool again", async () => {
    let hookRuns = 0;
    // The replay settles like a call: its afterTool chain runs on the new execution's result
    // (break 28H: a replay skipping afterTool passed every named test).
    const after: string[] = [];
    const hooks = {
      beforeTool: [
        () => {
          hookRuns++;
          return { arguments: { item: "rewritten" } };
        },
      ],
      afterTool: [
        (call: { result: ToolResult }) => {
          const text = call.result.content.map((part) => (part.type === "text" ? part.text : "")).join("");
          after.push(text);
          return textResult(`${text}, checked`);
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
    expect(after).toEqual(["applied rewritten"]);
    const [result] = await toolResults(root2);
    expect(textOf(messageOf(result!))).toBe("applied rewritten, checked");
    expect(messageOf(result!)).toMatchObject({ isError: false });
    // The rerun executed: its result carries this attempt's durationMs (spec §8.4; break 31F: a
    // recovered execution's result written without one, as if it had not executed, passed).
    expect(typeof (messageOf(result!) as { durationMs?: unknown }).durationMs).toBe("number");
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

  // Break 28R: the stored policy was only tried on an intent the answer's commit wrote; an intent
  // the call phase commits (a beforeTool hook present) stored "safe" for an unsafe tool unseen.
  test("the policy stored by the call phase decides too: with a beforeTool hook, a call stored unsafe is not run again even if the tool is safe now", async () => {
    const hooks = { beforeTool: [() => undefined] };
    const first = itemTool({ replay: "unsafe", holdFirst: true });
    const respond = callsThenAnswer(fauxToolCall("apply", { item: "x" }, { id: "call-1" }));
    const { root, store, faux } = await open(respond, { tools: [first.tool], hooks });
    await root.submit({ type: "input", content: "go" });
    await first.started.promise;

    const second = itemTool({ replay: "safe" });
    const h2 = await reopen(store, {
      models: faux.models,
      defaultModel: faux.ref,
      tools: [second.tool],
      hooks,
    });
    const root2 = await h2.root();
    await root2.waitForIdle();
    expect(second.seen).toEqual([]);
    const [result] = await toolResults(root2);
    expect(messageOf(result!)).toMatchObject({ isError: true });
    expect(diagnosticsOf(result!).map((d) => d.code)).toEqual(["interrupted"]);
  });

  // Break 28R: nor on an intent committed after an approval; its execute checkpoint stored
  // "safe" for an unsafe tool unseen, and a wait storing the model's arguments, not beforeTool's.
  test("the arguments and policy stored with an approval decide: an approved call runs with the rewritten arguments, and stored unsafe is not run again even if the tool is safe now", async () => {
    const settings = { approval: {} };
    const hooks = { beforeTool: [() => ({ arguments: { item: "rewritten" } })] };
    const first = itemTool({ replay: "unsafe", holdFirst: true });
    const respond = callsThenAnswer(fauxToolCall("apply", { item: "x" }, { id: "call-1" }));
    const { h, root, store, faux } = await open(respond, { tools: [first.tool], settings, hooks });
    await root.submit({ type: "input", content: "go" });
    const awaiting = () => (liveOf(h).tools ?? []).find((s) => s.status === "awaiting_approval");
    await until(() => awaiting() !== undefined, { what: "the call awaits approval" });
    await h.decideApproval(1, { taskId: awaiting()!.taskId!, decision: "approve", requestId: "r1" });
    await first.started.promise;
    // The approved call runs with the arguments stored in its wait: beforeTool's, not the model's.
    expect(first.seen).toEqual([{ item: "rewritten" }]);

    const second = itemTool({ replay: "safe" });
    const h2 = await reopen(store, {
      models: faux.models,
      defaultModel: faux.ref,
      tools: [second.tool],
      settings,
      hooks,
    });
    const root2 = await h2.root();
    await root2.waitForIdle();
    expect(second.seen).toEqual([]);
    const [result] = await toolResults(root2);
    expect(messageOf(result!)).toMatchObject({ isError: true });
    expect(diagnosticsOf(result!).map((d) => d.code)).toEqual(["interrupted"]);
  });

  test("recovery runs a call again only when it is safe both as stored and now: one stored safe whose tool is unsafe now ends failed with an interrupted result built from its slot's output, details and diagnostics", async () => {
    const started = deferred();
    let runs = 0;
    const reporter = (replay: "safe" | "unsafe") =>
      defineTool({
        name: "apply",
        description: "Reports, then waits",
        parameters: Type.Object({ item: Type.String() }),
        replay,
        async execute(_args, api) {
          runs++;
          api.output("step 1\n");
          api.diagnostic({ severity: "warn", message: "halfway" });
          await api.details({ step: 1 });
          started.resolve();
          if (runs > 1) return textResult("ran again");
          await new Promise((_, reject) =>
            api.signal.addEventListener("abort", () => reject(api.signal.reason), { once: true }),
          );
          return textResult("never");
        },
      });
    const respond = callsThenAnswer(fauxToolCall("apply", { item: "x" }, { id: "call-1" }));
    const { h, store, faux } = await open(respond, { tools: [reporter("safe")] });
    await (await h.root()).submit({ type: "input", content: "go" });
    await started.promise;
    await until(
      () => {
        const slot = liveOf(h).tools?.[0];
        return Boolean(slot?.output && slot.details !== undefined && slot.diagnostics?.length);
      },
      { what: "the slot's output, details and diagnostics" },
    );
    const h2 = await reopen(store, {
      models: faux.models,
      defaultModel: faux.ref,
      tools: [reporter("unsafe")],
    });
    const root2 = await h2.root();
    await root2.waitForIdle();
    expect(runs).toBe(1);
    const [result] = await toolResults(root2);
    expect(messageOf(result!)).toMatchObject({ isError: true, details: { step: 1 } });
    expect(textOf(messageOf(result!))).toContain("step 1");
    expect(diagnosticsOf(result!).map((d) => [d.severity, d.code ?? d.message])).toEqual([
      ["warn", "halfway"],
      ["error", "interrupted"],
    ]);
    const [task] = await h2.tasks({ kind: "pi.tool" });
    expect(task!.state).toMatchObject({
      status: "terminal",
      outcome: { status: "failed", result: { entryId: result!.id } },
    });
    // A tool that no longer resolves counts as unsafe: the same image reopened without it.
    const h3 = await reopen(store, { models: faux.models, defaultModel: faux.ref, tools: [] });
    await (await h3.root()).waitForIdle();
    const [gone] = await toolResults(await h3.root());
    expect(diagnosticsOf(gone!).map((d) => d.code ?? d.message)).toEqual(["halfway", "interrupted"]);
    expect(runs).toBe(1);
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
    // Interrupted, not executed to its end: no durationMs (spec §8.4).
    expect(messageOf(result!)).not.toHaveProperty("durationMs");
  });

  test("an interrupted call's slot is done with its entry and keeps no output, while a safe call of its round runs again (draw 34C)", async () => {
    // Draw 34C: the done slots read were those of calls that ran to their end, aborted or faulted; an
    // interrupted call's settling keeping its printed output in its done slot passed every test (the
    // round ended in the same breath and removed its slots).
    const first = itemTool({ holdFirst: true, output: "progress: step 1 of 3\n" });
    const again = deferred();
    let slowRuns = 0;
    const slow = defineTool({
      name: "slow",
      description: "Runs until released, again after a restart",
      parameters: Type.Object({}),
      replay: "safe",
      async execute(_args, api) {
        const run = ++slowRuns;
        // Held until released (the second run) or aborted (the engine closing under either).
        await new Promise<void>((resolve, reject) => {
          if (run > 1) void again.promise.then(() => resolve());
          api.signal.addEventListener("abort", () => reject(api.signal.reason), { once: true });
        });
        return textResult("slow");
      },
    });
    const respond = callsThenAnswer(
      fauxToolCall("apply", { item: "x" }, { id: "call-1" }),
      fauxToolCall("slow", {}, { id: "call-2" }),
    );
    const { h, root, store, faux } = await open(respond, { tools: [first.tool, slow] });
    await root.submit({ type: "input", content: "go" });
    await first.started.promise;
    await until(() => Boolean(liveOf(h).tools?.find((s) => s.callId === "call-1")?.output));
    const h2 = await reopen(store, {
      models: faux.models,
      defaultModel: faux.ref,
      tools: [itemTool({}).tool, slow],
    });
    await until(
      () => slowRuns === 2 && liveOf(h2).tools?.find((s) => s.callId === "call-1")?.status === "done",
      {
        what: "the unsafe call interrupted, the safe one running again",
      },
    );
    const [result] = await toolResults(await h2.root());
    const slot = liveOf(h2).tools?.find((s) => s.callId === "call-1");
    expect(slot).toMatchObject({ status: "done", entry: result!.id });
    expect(slot).not.toHaveProperty("output");
    expect(textOf(messageOf(result!))).toContain("progress: step 1 of 3");
    expect(liveOf(h2).tools?.find((s) => s.callId === "call-2")?.status).toBe("running");
    again.resolve();
    await (await h2.root()).waitForIdle();
    expect((await toolResults(await h2.root())).map((e) => textOf(messageOf(e)))).toContain("slow");
  });
});

test("a nested call interrupted by a restart is not run again when unsafe: it ends failed with an interrupted error result its rerun caller gets back (draw 36d)", async () => {
  // Draw 36d: recovery was only tried on top-level calls; a nested call's interrupted settling
  // ending `completed` (its caller still getting an error result) passed every test.
  const batch = defineTool({
    name: "batch",
    description: "Calls apply",
    parameters: Type.Object({}),
    replay: "safe",
    async execute(_args, api) {
      const r = await api.executeTool("apply", { item: "x" });
      const text = r.content.map((part) => (part.type === "text" ? part.text : "")).join("");
      return textResult(`nested: ${r.isError === true} ${text}`);
    },
  });
  const first = itemTool({ holdFirst: true });
  const respond = callsThenAnswer(fauxToolCall("batch", {}, { id: "call-1" }));
  const { root, store, faux } = await open(respond, { tools: [batch, first.tool] });
  await root.submit({ type: "input", content: "go" });
  await first.started.promise;
  const second = itemTool({});
  const h2 = await reopen(store, {
    models: faux.models,
    defaultModel: faux.ref,
    tools: [batch, second.tool],
  });
  const root2 = await h2.root();
  await root2.waitForIdle();
  expect(second.seen).toEqual([]);
  const [result] = await toolResults(root2);
  expect(textOf(messageOf(result!))).toMatch(/^nested: true interrupted/);
  const nested = (await h2.tasks({ kind: "pi.tool" })).filter((t) => "nested" in (t.input as object));
  expect(nested).toHaveLength(1);
  expect(nested[0]!.state).toMatchObject({
    status: "terminal",
    outcome: { status: "failed", result: { isError: true } },
  });
});

test("a safe replay restarts the call from a clean slot: the earlier execution's details and diagnostics are removed, so the result carries only the new execution's", async () => {
  // Reading 23e (spec §9.4: "removed ones, as when a safe replay restarts the tool, send `null` and
  // `[]`"): the restart removed the output only, so a replayed call kept the first execution's details
  // and diagnostics in its slot and its result.
  const firstStored = deferred();
  const worker = (run: "first" | "second") =>
    defineTool({
      name: "work",
      description: "Reports progress, then works",
      parameters: Type.Object({}),
      replay: "safe",
      async execute(_args, api) {
        api.output(`${run} output\n`);
        api.diagnostic({ severity: "warn", code: `${run}-run`, message: `seen in the ${run} run` });
        await api.details({ run });
        if (run === "first") {
          firstStored.resolve();
          // The first engine stops here: its store is copied, and its close signals the call.
          await new Promise((_, reject) =>
            api.signal.addEventListener("abort", () => reject(api.signal.reason), { once: true }),
          );
        }
        return textResult("done");
      },
    });
  const respond = callsThenAnswer(fauxToolCall("work", {}, { id: "call-1" }));
  const { h, store, faux } = await open(respond, {
    tools: [worker("first")],
    settings: { outputIntervalMs: 1 },
  });
  const root = await h.root();
  await root.submit({ type: "input", content: "go", requestId: "r" });
  await firstStored.promise;
  await until(
    () => liveOf(h).tools?.[0]?.diagnostics !== undefined && liveOf(h).tools?.[0]?.details !== undefined,
    {
      what: "the first run's details and diagnostic stored",
    },
  );
  const slotsAtRestart: unknown[] = [];
  const second = worker("second");
  const h2 = await reopen(store, {
    models: faux.models,
    defaultModel: faux.ref,
    settings: { outputIntervalMs: 1 },
    tools: [
      {
        ...second,
        execute: (
          args: Record<string, never>,
          api: Parameters<typeof second.execute>[1],
          ...rest: unknown[]
        ) => {
          const slot = liveOf(h2).tools?.[0];
          slotsAtRestart.push({
            details: slot?.details,
            diagnostics: slot?.diagnostics,
            output: slot?.output,
          });
          return (second.execute as (...a: unknown[]) => unknown)(args, api, ...rest);
        },
      } as typeof second,
    ],
  });
  const root2 = await h2.root();
  await root2.waitForIdle();
  expect(slotsAtRestart).toEqual([{ details: undefined, diagnostics: undefined, output: undefined }]);
  const [result] = await toolResults(root2);
  expect(diagnosticsOf(result!).map((d) => d.code)).toEqual(["second-run"]);
  expect(messageOf(result!)).toMatchObject({ isError: false, details: { run: "second" } });
});
