/**
 * Runs one script in a fresh QuickJS runtime under the sandbox's limits, in the calling thread (the
 * engine's when no script worker is installed, a script worker's otherwise: see workers.ts). The script is the body of an
 * async function (so `return` and `await` work at its top level); its tools are async functions whose
 * host side (`ScriptHost.call`) settles a QuickJS promise, after which the pending jobs run. Every
 * synchronous stretch (the first evaluation, each batch of jobs) runs under a deadline enforced by
 * the interrupt handler: the slice, or what is left of the total CPU budget, whichever is sooner. The
 * engine gets the thread back between batches and while the script awaits a tool, so a runaway
 * script holds it for at most one slice. Memory and stack are the runtime's own limits; output and
 * the number of calls are counted here. A limit that is hit stops the script for good (an
 * interrupt cannot be caught by the script), and the run rejects with that limit's error.
 * Invariants: the runtime is disposed whatever happens; a value crosses the boundary only as JSON.
 */
import type {
  QuickJSContext,
  QuickJSDeferredPromise,
  QuickJSHandle,
  QuickJSRuntime,
} from "quickjs-emscripten-core";
import {
  CpuSliceExceeded,
  CpuTimeExceeded,
  MemoryLimitExceeded,
  NestedCallLimitExceeded,
  OutputLimitExceeded,
  SandboxLimitError,
  ScriptError,
  StackLimitExceeded,
} from "./errors.ts";
import { leaseInterpreter, releaseInterpreter } from "./interpreter.ts";
import { HOST_CALL, HOST_PRINT, preludeSource } from "./prelude.ts";
import type { CallAnswer, SandboxLimits, ScriptHost, ScriptRun } from "./types.ts";

/** Hooks into a run's progress (the script worker reports them to the engine's watchdog). */
export interface RunObserver {
  /** The prelude ran; the script's first stretch starts now. */
  started?(): void;
  /** A synchronous stretch of the script ended. */
  stretched?(): void;
  /** Nothing runs until a tool call's answer arrives. */
  waiting?(): void;
}

const encoder = new TextEncoder();

const yieldToHost = (): Promise<void> =>
  new Promise((resolve) => {
    if (typeof setImmediate === "function") setImmediate(resolve);
    else setTimeout(resolve, 0);
  });

/** Run `code` (an async function's body) under `limits`, in this thread. */
export async function runScriptInThread(
  code: string,
  host: ScriptHost,
  limits: SandboxLimits,
  observer: RunObserver = {},
): Promise<ScriptRun> {
  const lease = await leaseInterpreter(limits.memoryBytes);
  let reuse = false;
  /** Set when the wasm was unwound mid-run (the host's stack overflowed): its heap is not freed. */
  let unwound = false;
  // A dispose that fails leaves the instance broken: it is dropped, and the run's outcome stands.
  const dispose = (item: { dispose(): void }) => {
    if (unwound) return;
    try {
      item.dispose();
    } catch {
      reuse = false;
    }
  };
  try {
    const runtime = lease.quickjs.newRuntime();
    try {
      runtime.setMemoryLimit(limits.memoryBytes);
      runtime.setMaxStackSize(limits.stackBytes);
      const context = runtime.newContext();
      try {
        const run = await new Run(runtime, context, host, limits, observer).run(code);
        reuse = true;
        return run;
      } catch (error) {
        // An instance whose script hit a limit (a full heap, say) is not kept.
        reuse = !(error instanceof SandboxLimitError) && !(error instanceof WebAssembly.RuntimeError);
        if (hostStackOverflow(error)) {
          // The script's recursion ran the host's own stack out before QuickJS's limit was reached
          // (in the engine's thread, whose stack the host's frames share): the same runaway, stopped
          // the same way, so it reads as the stack limit. The runtime it left was cut mid-call: it
          // is neither freed (QuickJS would assert on its half-built objects) nor reused; the
          // whole instance is dropped.
          reuse = false;
          unwound = true;
          throw new StackLimitExceeded(limits.stackBytes);
        }
        throw error;
      } finally {
        dispose(context);
      }
    } finally {
      dispose(runtime);
    }
  } finally {
    releaseInterpreter(lease, { reuse });
  }
}

/**
 * Whether `error` is the host's own stack overflow (V8's RangeError), thrown out of QuickJS's wasm
 * by a deep recursion. A script's own throw never reaches here as a host RangeError: it is dumped
 * from QuickJS and becomes a ScriptError.
 */
function hostStackOverflow(error: unknown): boolean {
  return error instanceof RangeError && /maximum call stack size exceeded/i.test(error.message);
}

class Run {
  #cpuMs = 0;
  #deadline = Number.POSITIVE_INFINITY;
  #stretchStart = 0;
  /** The limit that stopped the script (the interrupt handler then keeps interrupting it). */
  #stopped: SandboxLimitError | undefined;
  /** A host failure (a call that rejected, an abort): the run rejects with it. */
  #failed: { error: unknown } | undefined;
  #outputBytes = 0;
  #calls = 0;
  #outstanding = new Set<QuickJSDeferredPromise>();
  #wake: (() => void) | undefined;

  constructor(
    readonly runtime: QuickJSRuntime,
    readonly context: QuickJSContext,
    readonly host: ScriptHost,
    readonly limits: SandboxLimits,
    readonly observer: RunObserver,
  ) {
    runtime.setInterruptHandler(() => {
      if (this.#stopped || this.#failed) return true;
      const now = performance.now();
      if (now <= this.#deadline) return false;
      this.#stopped =
        this.#cpuMs + (now - this.#stretchStart) >= limits.cpuMs
          ? new CpuTimeExceeded(limits.cpuMs)
          : new CpuSliceExceeded(limits.sliceMs);
      return true;
    });
  }

  /** Run a synchronous stretch under its deadline, counting its CPU time. */
  #stretch<T>(fn: () => T): T {
    this.#stretchStart = performance.now();
    this.#deadline = this.#stretchStart + Math.min(this.limits.sliceMs, this.limits.cpuMs - this.#cpuMs);
    try {
      return fn();
    } finally {
      this.#cpuMs += performance.now() - this.#stretchStart;
      this.#deadline = Number.POSITIVE_INFINITY;
      this.observer.stretched?.();
    }
  }

  #defineHostFunctions(): void {
    const { context: ctx } = this;
    const print = ctx.newFunction(HOST_PRINT, (text) => {
      const chunk = ctx.getString(text);
      this.#outputBytes += encoder.encode(chunk).length;
      if (this.#outputBytes > this.limits.outputBytes) {
        this.#stopped ??= new OutputLimitExceeded(this.limits.outputBytes);
        return { error: ctx.newError(this.#stopped.message) };
      }
      this.host.print(chunk);
      return undefined;
    });
    const call = ctx.newFunction(HOST_CALL, (name, args) => {
      if (this.#calls >= this.limits.calls) {
        this.#stopped ??= new NestedCallLimitExceeded(this.limits.calls);
        return { error: ctx.newError(this.#stopped.message) };
      }
      const index = this.#calls++;
      const deferred = ctx.newPromise();
      this.#outstanding.add(deferred);
      const settle = (answer: CallAnswer) => {
        if (!deferred.alive) return;
        const text = ctx.newString(JSON.stringify(answer));
        deferred.resolve(text);
        text.dispose();
      };
      let parsed: unknown;
      try {
        parsed = JSON.parse(ctx.getString(args));
      } catch (error) {
        parsed = undefined;
        this.#failed ??= { error };
      }
      void this.host
        .call(ctx.getString(name), parsed, index)
        .then(settle, (error: unknown) => {
          this.#failed ??= { error };
        })
        .finally(() => {
          this.#outstanding.delete(deferred);
          deferred.dispose();
          this.#wake?.();
        });
      return deferred.handle.dup();
    });
    ctx.setProp(ctx.global, HOST_PRINT, print);
    ctx.setProp(ctx.global, HOST_CALL, call);
    print.dispose();
    call.dispose();
  }

  async run(code: string): Promise<ScriptRun> {
    const { context: ctx, runtime } = this;
    this.#defineHostFunctions();
    const prelude = ctx.evalCode(
      preludeSource({
        start: this.host.start,
        seed: this.host.seed,
        functions: this.host.functions,
        globals: this.host.globals ?? {},
      }),
      "prelude.js",
    );
    ctx.unwrapResult(prelude).dispose();
    this.observer.started?.();
    const evaluated = this.#stretch(() => ctx.evalCode(`(async () => {\n${code}\n})()`, "script.js"));
    if (evaluated.error) throw this.#errorOf(evaluated.error);
    const promise = evaluated.value;
    const onAbort = () => this.#wake?.();
    this.host.signal?.addEventListener("abort", onAbort);
    try {
      let lastYield = performance.now();
      for (;;) {
        this.#check();
        const state = ctx.getPromiseState(promise);
        if (state.type === "fulfilled") {
          const value = this.#json(state.value);
          if (!state.notAPromise) state.value.dispose();
          return { value, cpuMs: this.#cpuMs, calls: this.#calls };
        }
        if (state.type === "rejected") throw this.#errorOf(state.error);
        // Give the event loop a turn now and then: the jobs' stretches, and the calls settled through
        // promise chains alone, would otherwise keep timers and other work waiting.
        if (performance.now() - lastYield >= this.limits.sliceMs / 2) {
          await yieldToHost();
          lastYield = performance.now();
          continue;
        }
        if (runtime.hasPendingJob()) {
          const jobs = this.#stretch(() => runtime.executePendingJobs(64));
          if (jobs.error) throw this.#errorOf(jobs.error);
          continue;
        }
        if (this.#outstanding.size === 0)
          throw new ScriptError("the script is waiting for a promise that nothing will settle");
        this.observer.waiting?.();
        await new Promise<void>((resolve) => {
          this.#wake = resolve;
        });
        this.#wake = undefined;
      }
    } finally {
      this.host.signal?.removeEventListener("abort", onAbort);
      promise.dispose();
      for (const deferred of this.#outstanding) deferred.dispose();
    }
  }

  /** Throws what stops the run now: an abort, a host failure, a limit. */
  #check(): void {
    const signal = this.host.signal;
    if (signal?.aborted) throw signal.reason;
    if (this.#failed) throw this.#failed.error;
    if (this.#stopped) throw this.#stopped;
  }

  /** The script's value, as JSON. */
  #json(handle: QuickJSHandle): unknown {
    const value: unknown = this.context.dump(handle);
    if (value === undefined) return undefined;
    try {
      const text = JSON.stringify(value);
      return text === undefined ? undefined : JSON.parse(text);
    } catch {
      return String(value);
    }
  }

  /** The error a script's failure stands for (a limit that stopped it, or its own throw). */
  #errorOf(handle: QuickJSHandle): Error {
    const dumped: unknown = this.context.dump(handle);
    handle.dispose();
    if (this.#failed)
      return this.#failed.error instanceof Error ? this.#failed.error : new Error(String(this.#failed.error));
    if (this.#stopped) return this.#stopped;
    const error = (dumped ?? {}) as { name?: unknown; message?: unknown; stack?: unknown };
    const name = typeof error.name === "string" ? error.name : "Error";
    const message = typeof error.message === "string" ? error.message : String(dumped);
    if (name === "InternalError" && message === "out of memory")
      return new MemoryLimitExceeded(this.limits.memoryBytes);
    if (name === "InternalError" && message === "stack overflow")
      return new StackLimitExceeded(this.limits.stackBytes);
    if (name === "InternalError" && message === "interrupted")
      return new CpuSliceExceeded(this.limits.sliceMs);
    const stack =
      typeof error.stack === "string" ? error.stack.split("\n").slice(0, 5).join("\n") : undefined;
    return new ScriptError(name === "Error" ? message : `${name}: ${message}`, stack);
  }
}
