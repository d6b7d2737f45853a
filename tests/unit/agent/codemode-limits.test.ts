/**
 * The sandbox's limits: a runaway script is stopped with its own limit's error (CPU slice, CPU total,
 * memory, stack, output, number of tool calls) while another conversation's run keeps committing:
 * the other conversation's committed output grows while the runaway call runs, and the engine's
 * thread is never held for long (the longest gap between two turns of the event loop during the
 * runaway is measured, in the engine's thread's own CPU time: see `holdProbe`). Every row runs on
 * both paths a script can take:
 * - in a script worker (worker_threads here, as the platform installs them): the engine's thread only
 *   passes messages, so it is never held by the script; a builtin looped for seconds between two
 *   interrupt polls is stopped by the engine's watchdog, which terminates the worker;
 * - in the engine's thread (the browser's SharedWorker engine, which cannot start a worker): a stretch
 *   is stopped at the next interrupt poll after its slice, so a runaway holds the thread for its slice
 *   plus the builtins it calls before that poll. Memory bombs held it for seconds before each script
 *   got an instance whose memory is capped. A loop over a heavy builtin still holds it far longer
 *   (`"x".repeat(1e5)` in a loop: about 15 s measured), so that row runs on the worker path only.
 */
import { closeSync, openSync, readSync } from "node:fs";
import { fauxAssistantMessage, fauxToolCall } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { createCodemodeTool } from "../../../worker/agent/tools/builtin/codemode.ts";
import { textResult } from "../../../worker/agent/tools/contract.ts";
import { DOC, defineTool, type LiveState } from "../../../worker/index.ts";
import { StackLimitExceeded } from "../../../worker/sandbox/errors.ts";
import { runScriptInThread } from "../../../worker/sandbox/in-thread.ts";
import { DEFAULT_SANDBOX_LIMITS } from "../../../worker/sandbox/types.ts";
import { setScriptWorkers } from "../../../worker/sandbox/workers.ts";
import { type FauxResponder, nodeScriptWorkers, until } from "../../../worker/testing.ts";
import { open, textOf, toolResults } from "./fixtures.ts";

/** The first user message is a script for `codemode`, or "tick" for the ticker; then "done". */
const responder: FauxResponder = (req) => {
  if (req.messages.some((m) => m.role === "assistant")) return fauxAssistantMessage("done");
  const text = textOf(req.messages.find((m) => m.role === "user")!);
  const call =
    text === "tick"
      ? fauxToolCall("ticker", {}, { id: "t1" })
      : fauxToolCall("codemode", { script: text }, { id: "cm1" });
  return fauxAssistantMessage([call], { stopReason: "toolUse" });
};

/** Streams a dot every 2 ms until its call is aborted: a conversation that keeps committing output. */
const ticker = defineTool({
  name: "ticker",
  description: "Tick",
  parameters: Type.Object({}),
  replay: "safe",
  async execute(_args, api) {
    while (!api.signal.aborted) {
      api.output(".");
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    return textResult("stopped");
  },
});

const size = defineTool({
  name: "size",
  description: "A size",
  parameters: Type.Object({}),
  replay: "safe",
  execute: async () => textResult("1", { size: 1 }),
});

const LIMITS = {
  sliceMs: 100,
  cpuMs: 1000,
  memoryBytes: 16 * 1024 * 1024,
  stackBytes: 256 * 1024,
  outputBytes: 64 * 1024,
  calls: 200,
};

/**
 * The longest the engine's thread may be held by one runaway, per path, in CPU time (ms). In a worker:
 * nothing of the script runs on the engine's thread, so what is left is a garbage collection or a
 * message handled (about 50 ms seen), against seconds for the heavy-builtin row in the thread. In the
 * thread: a stretch is stopped at its slice (100 ms here) when QuickJS next polls its interrupt
 * handler; one builtin call (a copy of a large string, an allocation) runs to its end before that
 * (about 250 ms seen in all). The thread's bound is the script's whole CPU budget: a hold that long
 * means the slice did not stop the runaway.
 */
const MAX_HOLD_MS = { worker: 500, thread: LIMITS.cpuMs } as const;

/**
 * The longest stretch between two turns of the engine's event loop while it runs, measured in the
 * engine's thread's own CPU time rather than wall time: on a loaded machine the thread waits for a
 * core between turns, and wall time counts that wait (1,031-1,448 ms measured for a 100 ms slice at
 * load 20-30) while CPU time counts only the work done. A runaway that does hold the thread still
 * holds it for its work's CPU time, whatever the load. The thread's own time, not the process's: the
 * process's (`process.cpuUsage`) also counts the script worker's thread and V8's helper threads, which
 * run on the other core while the engine's thread waits for one, and so grew with the load: at load
 * 20 it put a deep recursion's hold at 551 ms on the worker path, where none of the script runs on
 * the engine's thread, and 1,006-1,084 ms on the thread path (this thread's own, at load 6: 2 ms and
 * 32 ms). See `threadCpuMs`.
 */
function holdProbe() {
  const cpu = threadCpuMs();
  let last = cpu.now();
  let longest = 0;
  const timer = setInterval(() => {
    const now = cpu.now();
    longest = Math.max(longest, now - last);
    last = now;
  }, 1);
  return {
    stop(): number {
      clearInterval(timer);
      const held = Math.max(longest, cpu.now() - last);
      cpu.close();
      return held;
    },
  };
}

/**
 * The calling thread's CPU time so far, in ms: Linux's scheduler statistics for this thread (its first
 * field is the nanoseconds it ran on a CPU), read again at offset 0 each time. Where there are none
 * (not Linux), the whole process's CPU time, which counts every thread: an upper bound of the thread's.
 */
function threadCpuMs(): { now(): number; close(): void } {
  let fd: number;
  try {
    fd = openSync("/proc/thread-self/schedstat", "r");
  } catch {
    return {
      now: () => {
        const { user, system } = process.cpuUsage();
        return (user + system) / 1000;
      },
      close: () => undefined,
    };
  }
  const buffer = Buffer.alloc(128);
  return {
    now: () => {
      const n = readSync(fd, buffer, 0, buffer.length, 0);
      return Number(buffer.toString("latin1", 0, n).split(" ")[0]) / 1e6;
    },
    close: () => closeSync(fd),
  };
}

const ROWS = [
  ["while (true) {}", "while (true) {}", "CpuSliceExceeded", "ran 100 ms without yielding"],
  ["an endless chain of awaits", "for (;;) await null;", "CpuTimeExceeded", "more than 1000 ms of CPU time"],
  [
    "a memory bomb (a string doubling)",
    'const keep = []; let s = "x"; for (;;) { s = s.repeat(2); keep.push(s); }',
    "MemoryLimitExceeded",
    "ran out of memory",
  ],
  [
    "a memory bomb (many 1 MiB buffers kept)",
    "const keep = []; for (;;) keep.push(new Uint8Array(1 << 20));",
    "MemoryLimitExceeded",
    "ran out of memory",
  ],
  [
    "deep recursion",
    "function f(n) { return f(n + 1) + 1; } return f(0);",
    "StackLimitExceeded",
    "stack overflowed",
  ],
  [
    "a huge output",
    'for (;;) console.log("x".repeat(1000));',
    "OutputLimitExceeded",
    "more than 65536 bytes",
  ],
  [
    "a loop over a heavy builtin (a 100 kB string built each turn)",
    'let n = 0; for (;;) n += "x".repeat(1e5).length;',
    "CpuSliceExceeded",
    "ran 100 ms without yielding",
  ],
  [
    "10,000 nested calls",
    "let n = 0; for (let i = 0; i < 10000; i++) n += (await size({})).details.size; return n;",
    "NestedCallLimitExceeded",
    "more than 200 tool calls",
  ],
] as const;

/** Rows whose script is not stopped within its slice in the engine's thread (see the header). */
const WORKER_ONLY = new Set<string>(["a loop over a heavy builtin (a 100 kB string built each turn)"]);

describe.each([
  { path: "worker", where: "in a script worker", workers: true },
  { path: "thread", where: "in the engine's thread", workers: false },
] as const)("$where", ({ path, workers }) => {
  beforeAll(() => setScriptWorkers(workers ? nodeScriptWorkers() : undefined));
  afterAll(() => setScriptWorkers(undefined));

  test.each(ROWS.filter(([name]) => workers || !WORKER_ONLY.has(name)))(
    "%s is stopped with its limit's error while another conversation commits",
    async (_name, script, kind, message) => {
      const inner = createCodemodeTool({ limits: LIMITS });
      let live = () => 0;
      const window: { start?: number; end?: number; error?: unknown; held?: number } = {};
      // The runaway call's window, as the engine runs it: from its start to its end.
      const codemode = defineTool({
        ...inner,
        async execute(args, api) {
          window.start = live();
          const probe = holdProbe();
          try {
            return await inner.execute(args, api);
          } catch (error) {
            window.error = error;
            throw error;
          } finally {
            window.held = probe.stop();
            window.end = live();
          }
        },
      });
      const { h, root } = await open(responder, {
        tools: [ticker, size, codemode],
        settings: { outputIntervalMs: 1 },
      });
      const other = await h.createConversation({ ownership: { kind: "ownerless" } });
      live = () => ((h.docNow(other.id, DOC.live) as LiveState | undefined)?.tools?.[0]?.output ?? "").length;
      const ticking = await other.submit({ type: "input", content: "tick" });
      // The other conversation is committing before the runaway starts.
      await until(() => live() >= 5, { what: "the ticker's first commits" });
      await (await root.submit({ type: "input", content: script })).wait();
      const [entry] = await toolResults(root);
      expect((window.error as Error | undefined)?.name).toBe(kind);
      expect(JSON.stringify(entry!.model)).toContain(message);
      expect(window.end!, "the other conversation's commits advanced during the runaway").toBeGreaterThan(
        window.start!,
      );
      expect(window.held!, "the longest the runaway held the engine's thread (CPU ms)").toBeLessThan(
        MAX_HOLD_MS[path],
      );
      await other.abort();
      await ticking.wait().catch(() => undefined);
    },
    60_000,
  );
});

test("deep recursion under the default stack limit in the engine's thread is stopped with StackLimitExceeded, and the next script runs", async () => {
  // In the engine's own thread the host's stack may run out before QuickJS's 512 KiB limit: the
  // same runaway, which must read as the stack limit, not as the host's RangeError.
  const host = {
    start: 0,
    seed: 1,
    functions: [],
    call: async () => ({ isError: false as const, value: null }),
    print: () => undefined,
  };
  const error = await runScriptInThread(
    "function f(n) { return f(n + 1) + 1; } return f(0);",
    host,
    DEFAULT_SANDBOX_LIMITS,
  ).catch((e: unknown) => e);
  expect(error).toBeInstanceOf(StackLimitExceeded);
  expect((error as Error).message).toContain("stack overflowed (limit 512 KiB)");
  const next = await runScriptInThread("return 1 + 1;", host, DEFAULT_SANDBOX_LIMITS);
  expect(next.value).toBe(2);
});
