/**
 * Scripts in script workers (worker/sandbox/workers.ts), seen from the engine: the watchdog
 * terminates a worker whose script runs past its slice where the interrupt handler cannot stop it
 * (a loop over a heavy builtin), and never one whose script waits for a slow tool call; a
 * terminated worker is replaced and the next script runs; an abort and a failing tool call
 * terminate the worker and the run rejects with their error; a clean run leaves its worker for the
 * next script; a limit's error keeps its class and fields across the worker boundary.
 */
import { afterEach, beforeEach, expect, test } from "vitest";
import { MemoryLimitExceeded, SandboxLimitError } from "../../../worker/sandbox/errors.ts";
import { runScript, type ScriptHost } from "../../../worker/sandbox/run.ts";
import { setScriptWorkers, WATCHDOG_GRACE_MS } from "../../../worker/sandbox/workers.ts";
import { nodeScriptWorkers } from "../../../worker/testing.ts";
import { WORKER_TEST_LIMITS as LIMITS } from "./fixtures.ts";

/** Node's script workers, counting the workers started and terminated by the engine. */
let counts = { started: 0, terminated: 0 };
beforeEach(() => {
  counts = { started: 0, terminated: 0 };
  const spawn = nodeScriptWorkers();
  setScriptWorkers(() => {
    const port = spawn();
    counts.started++;
    return {
      ...port,
      terminate() {
        counts.terminated++;
        port.terminate();
      },
    };
  });
});
afterEach(() => setScriptWorkers(undefined));

const host = (overrides: Partial<ScriptHost> = {}): ScriptHost => ({
  start: 0,
  seed: 1,
  functions: ["echo"],
  call: async (_name, args) => ({ isError: false, value: args }),
  print: () => undefined,
  ...overrides,
});

test("a loop over a heavy builtin is terminated by the watchdog, and the next script gets a new worker", async () => {
  await expect(runScript("return 1", host(), LIMITS)).resolves.toMatchObject({ value: 1 });
  expect(counts).toEqual({ started: 1, terminated: 0 });
  const started = performance.now();
  // About 10 s between two interrupt polls on this machine: only terminating the worker stops it sooner.
  const runaway = runScript('let n = 0; for (;;) n += "x".repeat(1e5).length;', host(), LIMITS);
  await expect(runaway).rejects.toMatchObject({ name: "CpuSliceExceeded", sliceMs: 50 });
  expect(performance.now() - started).toBeLessThan(LIMITS.sliceMs + WATCHDOG_GRACE_MS + 3_000);
  expect(counts.terminated).toBe(1);
  await expect(runScript("return 2", host(), LIMITS)).resolves.toMatchObject({ value: 2 });
  expect(counts).toEqual({ started: 2, terminated: 1 });
});

test("a script waiting for a tool call longer than its slice and the watchdog's grace is not stopped", async () => {
  const slow = host({
    call: (_name, args) =>
      new Promise((resolve) =>
        setTimeout(() => resolve({ isError: false, value: args }), LIMITS.sliceMs + WATCHDOG_GRACE_MS + 300),
      ),
  });
  const run = await runScript(
    "const a = await echo({ n: 1 }); const b = await echo({ n: 2 }); return a.n + b.n;",
    slow,
    LIMITS,
  );
  expect(run).toMatchObject({ value: 3, calls: 2 });
  expect(counts.terminated).toBe(0);
});

test("an abort terminates the worker and the run rejects with the abort's reason", async () => {
  const controller = new AbortController();
  const reason = new Error("stop");
  const waiting = host({
    signal: controller.signal,
    call: () => {
      setTimeout(() => controller.abort(reason), 20);
      return new Promise(() => undefined);
    },
  });
  await expect(runScript("await echo({}); return 1;", waiting, LIMITS)).rejects.toBe(reason);
  expect(counts.terminated).toBe(1);
});

test("a tool call failing in the engine stops the script with that very error", async () => {
  const failure = new Error("the journal refused");
  const failing = host({ call: () => Promise.reject(failure) });
  await expect(runScript("try { await echo({}); } catch {} return 1;", failing, LIMITS)).rejects.toBe(
    failure,
  );
  expect(counts.terminated).toBe(1);
});

test("clean runs (a value, the script's own error, a limit) leave their worker for the next script", async () => {
  const printed: string[] = [];
  const run = await runScript(
    'console.log("hi"); return (await echo({ n: 41 })).n + 1;',
    host({ print: (text) => printed.push(text) }),
    LIMITS,
  );
  expect(run).toMatchObject({ value: 42, calls: 1 });
  expect(printed).toEqual(["hi\n"]);
  await expect(runScript('throw new TypeError("boom")', host(), LIMITS)).rejects.toMatchObject({
    name: "ScriptError",
    message: "TypeError: boom",
  });
  const bomb = runScript("const keep = []; for (;;) keep.push(new Uint8Array(1 << 20));", host(), LIMITS);
  const error = await bomb.catch((e: unknown) => e);
  expect(error).toBeInstanceOf(MemoryLimitExceeded);
  expect(error).toBeInstanceOf(SandboxLimitError);
  expect((error as MemoryLimitExceeded).bytes).toBe(LIMITS.memoryBytes);
  expect(counts).toEqual({ started: 1, terminated: 0 });
});
