/**
 * The QuickJS interpreter, loaded lazily: the first script pays for fetching and compiling the
 * WebAssembly module (dynamic imports, so the tab's bundle never contains it and an engine that runs
 * no script never loads it). "Interpreter" names the QuickJS WebAssembly module and its instances;
 * "engine" is only ever the worker that owns the store. The variant is fixed (the release build with
 * a separate .wasm file, synchronous), and its name is part of every script's fingerprint: a replay
 * under another variant is refused.
 * Memory: this build cannot measure its allocations (no `malloc_usable_size`), so QuickJS's own
 * memory limit only refuses a single allocation larger than the limit, and a script keeping many
 * smaller ones grew the shared WebAssembly heap to its 2 GiB maximum, holding the thread for tens of
 * seconds. So every script runs in a module instance of its own whose WebAssembly memory is capped
 * at the interpreter's base plus the script's memory limit: an allocation past the cap fails inside
 * QuickJS (`out of memory`). Instances are leased: one script at a time, returned to a small idle pool when
 * the script ended cleanly and left the memory small, so a warm call reuses one; any other is dropped
 * (its memory goes with it).
 */
import type { QuickJSWASMModule } from "quickjs-emscripten-core";

/** The interpreter and its variant, as recorded in a script's fingerprint (`SandboxFingerprint.engine`). */
export const INTERPRETER_VARIANT =
  "quickjs-emscripten-core@0.32.0+@jitl/quickjs-wasmfile-release-sync@0.32.0";

const PAGE = 64 * 1024;
/** The interpreter's own start (its static data, stack and first heap): Emscripten's INITIAL_MEMORY, 16 MiB. */
export const INTERPRETER_BASE_BYTES = 256 * PAGE;
/** Idle instances kept per memory cap. */
const IDLE_PER_CAP = 2;

/** One interpreter instance with its own capped memory, leased to one script at a time. */
export interface InterpreterLease {
  readonly quickjs: QuickJSWASMModule;
  readonly memory: WebAssembly.Memory;
  readonly memoryBytes: number;
}

type Loader = (memory: WebAssembly.Memory) => Promise<QuickJSWASMModule>;
let loading: Promise<Loader> | undefined;
let compiled: WebAssembly.Module | undefined;

/**
 * Hand the interpreter its WebAssembly module already compiled, for a host that refuses to compile
 * WebAssembly at run time (workerd: a worker's WebAssembly comes as a module of its upload). Call it
 * before the first script; without it the variant fetches and compiles its .wasm file itself.
 */
export function setInterpreterModule(module: WebAssembly.Module): void {
  compiled = module;
  loading = undefined;
}
const idle = new Map<number, InterpreterLease[]>();

function loader(): Promise<Loader> {
  if (!loading) {
    loading = (async () => {
      const [core, variant] = await Promise.all([
        import("quickjs-emscripten-core"),
        import("@jitl/quickjs-wasmfile-release-sync"),
      ]);
      return (memory: WebAssembly.Memory) =>
        core.newQuickJSWASMModuleFromVariant(
          core.newVariant(variant.default, {
            wasmMemory: memory,
            ...(compiled ? { wasmModule: compiled } : {}),
          }),
        );
    })();
    loading.catch(() => {
      loading = undefined;
    });
  }
  return loading;
}

/** An instance whose scripts may allocate about `memoryBytes` (an idle one when there is one). */
export async function leaseInterpreter(memoryBytes: number): Promise<InterpreterLease> {
  const reused = idle.get(memoryBytes)?.pop();
  if (reused) return reused;
  const load = await loader();
  const initial = INTERPRETER_BASE_BYTES / PAGE;
  const memory = new WebAssembly.Memory({ initial, maximum: initial + Math.ceil(memoryBytes / PAGE) });
  const quickjs = await load(memory);
  return { quickjs, memory, memoryBytes };
}

/**
 * Give an instance back. It is kept for the next script only when `reuse` (its script ended without
 * hitting a limit or breaking the interpreter, every runtime disposed) and its memory stayed at most
 * twice the base; otherwise it is dropped.
 */
export function releaseInterpreter(lease: InterpreterLease, options: { reuse: boolean }): void {
  if (!options.reuse || lease.memory.buffer.byteLength > 2 * INTERPRETER_BASE_BYTES) return;
  const list = idle.get(lease.memoryBytes) ?? [];
  if (list.length >= IDLE_PER_CAP) return;
  list.push(lease);
  idle.set(lease.memoryBytes, list);
}
