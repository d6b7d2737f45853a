/**
 * A tool's registration options of spec §7.3 and the pace of its progress: `prepareArguments` repairs
 * what the model sent before validation (a throw or a still invalid repair is `invalid_arguments`),
 * `outputLimits` bound streamed output and result text from the head or the tail with a `truncated`
 * warning the model reads, and progress commits are paced by their size as well as by time.
 */
import { fauxToolCall, type ToolCall } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { describe, expect, test, vi } from "vitest";
import { ThrottledWriter } from "../../../worker/agent/throttle.ts";
import { type OutputLimits, outputWindow, retainText } from "../../../worker/agent/tools/limits.ts";
import { defineTool, textResult } from "../../../worker/index.ts";
import { deferred, until } from "../../../worker/testing.ts";
import {
  callsThenAnswer,
  diagnosticsOf,
  liveOf,
  messageOf,
  messagesOf,
  open,
  textOf,
  toolResults,
  transcript,
} from "./fixtures.ts";

const enc = new TextEncoder();
const bytesOf = (s: string) => enc.encode(s).length;

describe("prepareArguments", () => {
  const listTool = (seen: unknown[], prepare: (args: unknown) => { items: string[] }) =>
    defineTool({
      name: "list",
      description: "Take a list",
      parameters: Type.Object({ items: Type.Array(Type.String()) }),
      prepareArguments: prepare,
      async execute(args) {
        seen.push(args);
        return textResult(`got ${args.items.length}`);
      },
    });

  /** The model's habit: the array sent as a JSON string. */
  const repairString = (args: unknown) => {
    const a = args as { items: unknown };
    return { items: typeof a.items === "string" ? (JSON.parse(a.items) as string[]) : (a.items as string[]) };
  };

  test("repairs the model's arguments before validation; execute gets the repair, the stored call what the model sent", async () => {
    const seen: unknown[] = [];
    const call = fauxToolCall("list", { items: '["a","b"]' }, { id: "call-1" });
    const { root } = await open(callsThenAnswer(call), { tools: [listTool(seen, repairString)] });
    expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
    expect(seen).toEqual([{ items: ["a", "b"] }]);
    const [result] = await toolResults(root);
    expect(messageOf(result!)).toMatchObject({ isError: false });
    expect(textOf(messageOf(result!))).toBe("got 2");
    const stored = (await transcript(root))
      .flatMap(messagesOf)
      .flatMap((m) => (m.role === "assistant" ? m.content : []))
      .find((b): b is ToolCall => b.type === "toolCall");
    expect(stored?.arguments).toEqual({ items: '["a","b"]' });
  });

  test("repairs before beforeTool hooks see the call, and the hook's arguments are validated again", async () => {
    const seen: unknown[] = [];
    const hookSaw: unknown[] = [];
    const call = fauxToolCall("list", { items: '["a"]' }, { id: "call-1" });
    const { root } = await open(callsThenAnswer(call), {
      tools: [listTool(seen, repairString)],
      hooks: {
        beforeTool: [
          (c) => {
            hookSaw.push(c.arguments);
            return { arguments: { items: ["a", "z"] } };
          },
        ],
      },
    });
    expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
    expect(hookSaw).toEqual([{ items: ["a"] }]);
    expect(seen).toEqual([{ items: ["a", "z"] }]);
  });

  test("a throwing repair, or one that returns invalid arguments, is an invalid_arguments result; execute never runs", async () => {
    for (const prepare of [
      (): { items: string[] } => {
        throw new Error("cannot repair this");
      },
      () => ({}) as { items: string[] },
    ]) {
      const seen: unknown[] = [];
      const call = fauxToolCall("list", { items: "nonsense" }, { id: "call-1" });
      const { root } = await open(callsThenAnswer(call), { tools: [listTool(seen, prepare)] });
      expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
      const [result] = await toolResults(root);
      expect(messageOf(result!)).toMatchObject({ isError: true });
      expect(diagnosticsOf(result!).map((d) => d.code)).toEqual(["invalid_arguments"]);
      expect(seen).toEqual([]);
    }
  });
});

describe("outputLimits", () => {
  test("a tail-retaining tool keeps the end of its streamed output; the model reads it with a truncated warning", async () => {
    const release = deferred();
    const tool = defineTool({
      name: "build",
      description: "Print a build log",
      parameters: Type.Object({}),
      outputLimits: { maxLines: 3, retain: "tail" },
      async execute(_args, api) {
        for (let i = 1; i <= 10; i++) api.output(`line ${i}\n`);
        await release.promise;
        return { content: [] };
      },
    });
    const { h, root, faux } = await open(callsThenAnswer(fauxToolCall("build", {}, { id: "call-1" })), {
      tools: [tool],
    });
    const sub = await root.submit({ type: "input", content: "go" });
    await until(() => liveOf(h).tools?.[0]?.output === "line 8\nline 9\nline 10\n", { what: "the tail" });
    expect(liveOf(h).tools?.[0]).toMatchObject({ droppedLines: 7, droppedBytes: bytesOf("line 1\n") * 7 });
    release.resolve();
    expect((await sub.wait()).status).toBe("done");
    const [result] = await toolResults(root);
    const diagnostics = diagnosticsOf(result!);
    expect(diagnostics).toEqual([
      {
        severity: "warn",
        code: "truncated",
        message:
          "output truncated to its end: 7 lines and 49 bytes before it not shown (limits 3 lines, 50 KiB)",
      },
    ]);
    const shown = messageOf(result!);
    expect(shown).toMatchObject({ isError: false });
    expect(textOf(shown)).toBe(
      "line 8\nline 9\nline 10\n" +
        "<harness>\n[warn] output truncated to its end: 7 lines and 49 bytes before it not shown (limits 3 lines, 50 KiB)\n</harness>",
    );
    // What the model read next is exactly what the transcript stores.
    const sent = faux.requests[1]!.messages.find((m) => m.role === "toolResult");
    expect(sent).toEqual(shown);
  });

  test("a tool's limits bound the text of its explicit result, head by default, with the warning last", async () => {
    const tool = defineTool({
      name: "grep",
      description: "Find lines",
      parameters: Type.Object({}),
      outputLimits: { maxLines: 2 },
      execute: async () => textResult("one\ntwo\nthree\nfour"),
    });
    const { root } = await open(callsThenAnswer(fauxToolCall("grep", {}, { id: "call-1" })), {
      tools: [tool],
    });
    expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
    const [result] = await toolResults(root);
    expect(diagnosticsOf(result!)).toEqual([
      {
        severity: "warn",
        code: "truncated",
        message: "output truncated: 2 lines and 11 bytes not shown (limits 2 lines, 50 KiB)",
      },
    ]);
    const content = (messageOf(result!) as { content: Array<{ type: string; text: string }> }).content;
    expect(content.map((c) => c.text)).toEqual([
      "one\ntwo",
      "<harness>\n[warn] output truncated: 2 lines and 11 bytes not shown (limits 2 lines, 50 KiB)\n</harness>",
    ]);
  });

  test("streamed output its limits cut, returned as the result, tells the model what was dropped", async () => {
    const tool = defineTool({
      name: "chatty",
      description: "Prints a lot",
      parameters: Type.Object({}),
      outputLimits: { maxBytes: 10 },
      async execute(_args, api) {
        api.output("abcde\nfghij\nklmno\n");
        return { content: [] };
      },
    });
    const { root } = await open(callsThenAnswer(fauxToolCall("chatty", {}, { id: "call-1" })), {
      tools: [tool],
    });
    expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
    const [result] = await toolResults(root);
    expect(textOf(messageOf(result!))).toMatch(/^abcde<harness>\n\[warn\] output truncated: 2 lines/);
    expect(diagnosticsOf(result!).map((d) => d.code)).toEqual(["truncated"]);
  });

  test("defineTool refuses limits that are not positive integers or a known retention", () => {
    const base = {
      name: "t",
      description: "t",
      parameters: Type.Object({}),
      execute: async () => textResult(""),
    };
    expect(() => defineTool({ ...base, outputLimits: { maxBytes: 0 } })).toThrow(/maxBytes/);
    expect(() => defineTool({ ...base, outputLimits: { maxLines: 1.5 } })).toThrow(/maxLines/);
    expect(() => defineTool({ ...base, outputLimits: { retain: "middle" as "head" } })).toThrow(/retain/);
  });

  test("streamed tail output, however chunked, retains exactly what bounding the whole text retains", () => {
    const alphabet = ["a", "é", "€", "😀", "b", "\n"];
    let seed = 11;
    const next = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed;
    };
    for (const limits of [
      { maxBytes: 64, maxLines: 1000, retain: "tail" },
      { maxBytes: 10_000, maxLines: 5, retain: "tail" },
      { maxBytes: 7, maxLines: 3, retain: "tail" },
    ] satisfies OutputLimits[]) {
      const chunks: string[] = [];
      for (let i = 0; i < 500; i++) {
        let chunk = "";
        for (let j = 0, n = 1 + (next() % 9); j < n; j++) chunk += alphabet[next() % 6];
        chunks.push(chunk);
      }
      const window = outputWindow(limits);
      for (const chunk of chunks) window.append(chunk);
      const whole = chunks.join("");
      const expected = retainText(whole, limits);
      expect(window.retained()).toEqual(expected);
      expect(bytesOf(expected.text)).toBeLessThanOrEqual(limits.maxBytes);
      expect(whole.endsWith(expected.text)).toBe(true);
      expect(bytesOf(expected.text) + expected.droppedBytes).toBe(bytesOf(whole));
    }
  });

  test("a single line over the byte limit keeps its end, cut on a character boundary", () => {
    const kept = retainText("xx😀😀", { maxBytes: 5, maxLines: 10, retain: "tail" });
    expect(kept).toEqual({ text: "😀", droppedBytes: 6, droppedLines: 0 });
  });
});

describe("progress pacing", () => {
  // The writer's pace is judged on a fake clock (timers, performance.now and Date), where each step is
  // exact. Two writes paced 200 ms apart were once logged 180 ms apart on a machine at load 20-30: the
  // writer paced by Date.now while its timer ran on the monotonic clock; it now paces by the latter.
  const fakeClock = () => vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date", "performance"] });

  /** A writer of `size()` bytes at 10,000 bytes/s (1 ms interval) that logs each write's bytes and time. */
  function sizedWriter(size: () => number) {
    const writes: Array<{ at: number; bytes: number }> = [];
    const writer = new ThrottledWriter({
      intervalMs: 1,
      bytesPerSecond: 10_000,
      write: () => {
        writes.push({ at: performance.now(), bytes: size() });
        return { bytes: size(), done: Promise.resolve() };
      },
    });
    return { writer, writes };
  }

  test("the first change after idle commits at once; the next waits for the written size at the byte rate", async () => {
    fakeClock();
    try {
      let size = 0;
      const { writer, writes } = sizedWriter(() => size);
      size = 2_000;
      writer.mark();
      // At once: no timer between the change and its write.
      expect(writes).toHaveLength(1);
      size = 10;
      writer.mark();
      // 2,000 bytes at 10,000 bytes/s: 200 ms, not the 1 ms interval.
      await vi.advanceTimersByTimeAsync(199);
      expect(writes).toHaveLength(1);
      await vi.advanceTimersByTimeAsync(1);
      expect(writes.map((w) => w.bytes)).toEqual([2_000, 10]);
      expect(writes[1]!.at - writes[0]!.at).toBe(200);
      // After a quiet period longer than the pace (10 bytes: the 1 ms interval), the next change is
      // written at once again.
      await vi.advanceTimersByTimeAsync(30);
      writer.mark();
      expect(writes).toHaveLength(3);
      await writer.stop();
    } finally {
      vi.useRealTimers();
    }
  });

  test("the pace is kept on the timers' clock when the wall clock jumps, forward or back", async () => {
    fakeClock();
    try {
      let size = 2_000;
      const { writer, writes } = sizedWriter(() => size);
      writer.mark();
      size = 10;
      // The wall clock jumps an hour ahead (a clock correction): the pace of 200 ms still holds.
      vi.setSystemTime(Date.now() + 3_600_000);
      writer.mark();
      expect(writes).toHaveLength(1);
      await vi.advanceTimersByTimeAsync(199);
      expect(writes).toHaveLength(1);
      await vi.advanceTimersByTimeAsync(1);
      expect(writes.map((w) => w.bytes)).toEqual([2_000, 10]);
      // It jumps back two hours: the next change after the 1 ms pace is written at once, not in hours.
      size = 2_000;
      await vi.advanceTimersByTimeAsync(5);
      vi.setSystemTime(Date.now() - 7_200_000);
      writer.mark();
      expect(writes.map((w) => w.bytes)).toEqual([2_000, 10, 2_000]);
      expect(writes[1]!.at - writes[0]!.at).toBe(200);
      await writer.stop();
    } finally {
      vi.useRealTimers();
    }
  });

  test("a tool's progress commits are paced by their size at 100 KiB/s by default", async () => {
    // The default rate is 100 KiB/s, and the tool's output commits use it: 100 KiB at that rate, the
    // next commit waits a second after the first. Judged by order against a timer of half that pace
    // started with the first commit, on the clock the writer's own timer runs on, rather than by
    // reading the wall clock: the tail is committed after the half-pace timer fires. Paced by the
    // 1 ms interval alone (size pacing lost), it is committed right after the first commit.
    const big = `${"x".repeat(1023)}\n`.repeat(100);
    const events: string[] = [];
    const release = deferred();
    const tool = defineTool({
      name: "dump",
      description: "Print 100 KiB, then a little more",
      parameters: Type.Object({}),
      // Above the default 50 KiB, so that the first commit is the whole 100 KiB.
      outputLimits: { maxBytes: 200 * 1024 },
      async execute(_args, api) {
        // The first change after idle is written at once: the pace starts here.
        api.output(big);
        const half = new Promise((resolve) => setTimeout(resolve, 500)).then(() =>
          events.push("half the pace"),
        );
        api.output("tail\n");
        await half;
        await release.promise;
        return textResult("dumped");
      },
    });
    const { h, root } = await open(callsThenAnswer(fauxToolCall("dump", {}, { id: "call-1" })), {
      tools: [tool],
      settings: { outputIntervalMs: 1 },
    });
    expect(h.services.settings().progressBytesPerSecond).toBe(100 * 1024);
    // Each commit as it lands (subscribers hear a change right after its COMMIT).
    const unsubscribe = h.subscribe(() => {
      const output = liveOf(h).tools?.[0]?.output;
      const event = output === big ? "the 100 KiB" : output === `${big}tail\n` ? "the tail" : undefined;
      if (event && events.at(-1) !== event) events.push(event);
    });
    const sub = await root.submit({ type: "input", content: "go" });
    await until(() => events.includes("the tail"), { what: "the tail's commit" });
    unsubscribe();
    expect(events).toEqual(["the 100 KiB", "half the pace", "the tail"]);
    release.resolve();
    expect((await sub.wait()).status).toBe("done");
  });
});
