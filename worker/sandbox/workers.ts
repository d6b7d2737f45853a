/**
 * Scripts off the engine's thread: when the platform installs a way to start script workers
 * (`setScriptWorkers`: worker_threads in Node, a dedicated Worker in a browser worker that may start
 * one), each script runs in a worker of its own (script-worker.ts) and the engine's thread only passes
 * messages, so a runaway script never holds it, whatever builtin it loops on.
 * - A watchdog here bounds each synchronous stretch from the outside: the worker reports when its
 *   script starts, when a stretch ends and when it waits for an answer; a script that has been running
 *   for its slice plus WATCHDOG_GRACE_MS without a word is terminated with `CpuSliceExceeded` (the
 *   worker's own interrupt handler stops ordinary loops at the slice; the watchdog catches what it
 *   cannot interrupt, a builtin that copies for seconds). An abort terminates the worker too.
 * - Tool calls come back here as messages and go through the host (`ScriptHost.call`), which journals
 *   the result before it is answered: the journal stays in the engine, replay is unchanged. A host
 *   failure terminates the worker and the run rejects with it, as in the engine's thread.
 * - Workers are pooled: one that ended its script (with a value or the script's own error or limit)
 *   goes back to the pool; one that was terminated is replaced by a fresh one started in the background.
 * - A worker hosted by someone else (a tab's worker handed to the SharedWorker engine) may go away
 *   under its script: the platform reports that as `ScriptWorkerLost` (never a limit), and when the
 *   watchdog fires it first asks the port whether its host still answers (`alive`): a silent host
 *   means the worker was lost, not that the script overran. run.ts reruns a lost script elsewhere.
 * - A worker that never reports that its script started (it died silently, or never loaded) within
 *   `startTimeoutMs` is lost too: without that bound the watchdog, which arms at `started`, would
 *   never fire and the run would wait forever.
 * Invariant: every run settles exactly once, and its worker is then either idle in the pool or gone.
 */
import { CpuSliceExceeded, ScriptWorkerLost } from "./errors.ts";
import { decodeError, type FromScriptWorker, type ToScriptWorker } from "./messages.ts";
import type { SandboxLimits, ScriptHost, ScriptRun } from "./types.ts";

/** One script worker as the platform gives it to the engine. */
export interface ScriptWorkerPort {
  post(message: ToScriptWorker): void;
  /** Called once, right after the worker is started. */
  listen(onMessage: (message: FromScriptWorker) => void, onError: (error: Error) => void): void;
  /** A busy worker keeps its process alive, an idle one does not (Node's ref/unref; optional). */
  hold?(busy: boolean): void;
  /**
   * Whether the worker's host still answers (asked when the watchdog fires; optional: a worker the
   * engine started itself is never lost that way). False makes the run fail with ScriptWorkerLost.
   */
  alive?(): Promise<boolean>;
  terminate(): void;
}

/** Starts a script worker. */
export type ScriptWorkerSpawner = () => ScriptWorkerPort;

export interface ScriptWorkerOptions {
  /** Whether a worker can be started now (default: always); else scripts run in the calling thread. */
  readonly available?: () => boolean;
  /** How long a worker may take to start a script before it counts as lost (default 30 s). */
  readonly startTimeoutMs?: number;
}

const DEFAULT_START_TIMEOUT_MS = 30_000;

/** How long past its slice a stretch may run before the engine terminates its worker. */
export const WATCHDOG_GRACE_MS = 1000;
/** Idle workers kept for the next script. */
const IDLE_WORKERS = 2;

interface PooledWorker {
  readonly port: ScriptWorkerPort;
  onMessage: ((message: FromScriptWorker) => void) | undefined;
  onError: ((error: Error) => void) | undefined;
  dead: boolean;
}

let spawner: ScriptWorkerSpawner | undefined;
let available: () => boolean = () => true;
let startTimeoutMs = DEFAULT_START_TIMEOUT_MS;
const idle: PooledWorker[] = [];
let started = 0;

/** Install (or remove, with undefined) the platform's script workers; idle ones are dropped. */
export function setScriptWorkers(
  next: ScriptWorkerSpawner | undefined,
  options: ScriptWorkerOptions = {},
): void {
  spawner = next;
  available = options.available ?? (() => true);
  startTimeoutMs = options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS;
  for (const worker of idle.splice(0)) worker.port.terminate();
}

/** Whether scripts run in workers (else in the calling thread). */
export function scriptWorkersInstalled(): boolean {
  return spawner !== undefined;
}

/** Whether the next script can run in a worker now: installed, and a worker can be started or is idle. */
export function scriptWorkersAvailable(): boolean {
  return spawner !== undefined && (idle.some((worker) => !worker.dead) || available());
}

/** How many script workers were started so far (a test sees a runaway's worker replaced). */
export function scriptWorkersStarted(): number {
  return started;
}

function spawn(start: ScriptWorkerSpawner): PooledWorker {
  const port = start();
  started++;
  const worker: PooledWorker = { port, dead: false, onMessage: undefined, onError: undefined };
  port.listen(
    (message) => worker.onMessage?.(message),
    (error) => {
      worker.dead = true;
      const at = idle.indexOf(worker);
      if (at >= 0) idle.splice(at, 1);
      worker.onError?.(error);
    },
  );
  port.hold?.(false);
  return worker;
}

function lease(start: ScriptWorkerSpawner): PooledWorker {
  for (;;) {
    const worker = idle.pop();
    if (!worker) {
      if (!available()) throw new ScriptWorkerLost("no host can start a script worker");
      return spawn(start);
    }
    if (!worker.dead) return worker;
  }
}

function giveBack(worker: PooledWorker): void {
  worker.onMessage = undefined;
  worker.onError = undefined;
  worker.port.hold?.(false);
  if (!worker.dead && idle.length < IDLE_WORKERS && spawner) idle.push(worker);
  else worker.port.terminate();
}

function discard(worker: PooledWorker): void {
  worker.onMessage = undefined;
  worker.onError = undefined;
  worker.dead = true;
  worker.port.terminate();
  // The replacement starts now, so the next script does not wait for it.
  if (spawner && idle.length === 0 && available()) idle.push(spawn(spawner));
}

/** Run `code` in a script worker (one must be installed) under `limits`. */
export function runScriptInWorker(code: string, host: ScriptHost, limits: SandboxLimits): Promise<ScriptRun> {
  const start = spawner;
  if (!start) return Promise.reject(new Error("no script workers are installed"));
  const signal = host.signal;
  if (signal?.aborted) return Promise.reject(signal.reason);
  let worker: PooledWorker;
  try {
    worker = lease(start);
  } catch (error) {
    return Promise.reject(error);
  }
  worker.port.hold?.(true);
  return new Promise<ScriptRun>((resolve, reject) => {
    let settled = false;
    /** Whether the script is running (not waiting for an answer), and since when it last said so. */
    let running = false;
    /** Whether the worker said its script started; until then the start bound applies. */
    let begun = false;
    const dispatched = performance.now();
    let lastWord = 0;
    let answers = 0;
    const settle = (outcome: () => void, options: { keep: boolean }) => {
      if (settled) return;
      settled = true;
      clearInterval(watchdog);
      signal?.removeEventListener("abort", onAbort);
      if (options.keep) giveBack(worker);
      else discard(worker);
      outcome();
    };
    const fail = (error: unknown) => settle(() => reject(error), { keep: false });
    const onAbort = () => fail(signal?.reason);
    const heard = () => {
      lastWord = performance.now();
    };
    /** Set while the watchdog asks whether the worker's host still answers. */
    let asking = false;
    const watchdog = setInterval(
      () => {
        if (!begun && performance.now() - dispatched > startTimeoutMs)
          return fail(new ScriptWorkerLost("it never started the script"));
        if (asking || !running || performance.now() - lastWord <= limits.sliceMs + WATCHDOG_GRACE_MS) return;
        const alive = worker.port.alive;
        if (!alive) return fail(new CpuSliceExceeded(limits.sliceMs));
        asking = true;
        void alive.call(worker.port).then(
          (yes) =>
            fail(
              yes ? new CpuSliceExceeded(limits.sliceMs) : new ScriptWorkerLost("its host stopped answering"),
            ),
          () => fail(new ScriptWorkerLost("its host stopped answering")),
        );
      },
      Math.max(10, limits.sliceMs / 4),
    );
    worker.onError = fail;
    worker.onMessage = (message) => {
      if (settled) return;
      switch (message.type) {
        case "started":
          begun = true;
          running = true;
          heard();
          return;
        case "beat":
          heard();
          return;
        case "waiting":
          // A `waiting` sent before the worker saw the newest answer says nothing about now.
          if (message.answered === answers) running = false;
          return;
        case "print":
          heard();
          host.print(message.text);
          return;
        case "call":
          heard();
          host.call(message.name, message.args, message.index).then((answer) => {
            if (settled) return;
            answers++;
            running = true;
            heard();
            worker.port.post({ type: "answer", index: message.index, answer });
          }, fail);
          return;
        case "done":
          settle(() => resolve({ value: message.value, cpuMs: message.cpuMs, calls: message.calls }), {
            keep: true,
          });
          return;
        case "failed":
          settle(() => reject(decodeError(message.error)), { keep: true });
          return;
      }
    };
    signal?.addEventListener("abort", onAbort);
    worker.port.post({
      type: "run",
      code,
      start: host.start,
      seed: host.seed,
      functions: [...host.functions],
      globals: host.globals ?? {},
      limits,
    });
  });
}
