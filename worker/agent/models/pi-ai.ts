/**
 * pi-ai's values, loaded on demand. pi-ai exports everything through one index that also evaluates
 * its whole model catalogue (about 300 KB) and its provider registrations, so a static value import
 * anywhere in the engine puts all of that before the engine's first line. The engine therefore
 * imports pi-ai's types statically (erased) and its values only through this module:
 * - `loadPiAi()` imports it (once); `AgentHarness.open` awaits it, so every agent task, submission
 *   and model lookup of an open harness can use `piAi()` synchronously. A host may start the load
 *   early (the browser engine does, in parallel with opening its store).
 * - `providePiAi(module)` hands over a statically imported copy (the test kit does), making it
 *   available at once.
 * - `whenPiAiLoads(use)` runs `use` once pi-ai is here (at once when it is): for registrations that
 *   must precede every request, such as the demo provider's.
 * Invariant: a `use` registered before the load runs before anyone awaiting `loadPiAi()` resumes.
 */
export type PiAi = typeof import("@mariozechner/pi-ai");

let loaded: PiAi | undefined;
let loading: Promise<PiAi> | undefined;
const waiting: Array<(pi: PiAi) => void> = [];

function settle(pi: PiAi): PiAi {
  if (!loaded) {
    loaded = pi;
    for (const use of waiting.splice(0)) use(pi);
  }
  return loaded;
}

/** Import pi-ai (once); resolves with it. */
export function loadPiAi(): Promise<PiAi> {
  if (loaded) return Promise.resolve(loaded);
  loading ??= import("@mariozechner/pi-ai").then(settle, (error: unknown) => {
    loading = undefined; // a failed chunk fetch may be retried
    throw error;
  });
  return loading;
}

/** Use a copy of pi-ai the caller imported statically (it is the same module instance). */
export function providePiAi(pi: PiAi): void {
  settle(pi);
}

/** pi-ai, which must have been loaded (an open harness guarantees it). */
export function piAi(): PiAi {
  if (!loaded) throw new Error("pi-ai is not loaded yet: await loadPiAi() (AgentHarness.open does) first");
  return loaded;
}

/** Run `use` with pi-ai once it is loaded; at once when it is. */
export function whenPiAiLoads(use: (pi: PiAi) => void): void {
  if (loaded) use(loaded);
  else waiting.push(use);
}
