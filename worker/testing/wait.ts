/**
 * Waiting in tests: one `deferred()` (a promise resolved from outside: gates for tools, responders
 * and task phases) and one `until(condition, { what, timeoutMs })` (poll a fake's or the engine's
 * state; fails with `what` instead of hanging). Invariant: every deferred still pending is known, so
 * a test's cleanup can `releaseDeferreds()` and let held work finish before its engine closes.
 */

export interface Deferred<T> {
  readonly promise: Promise<T>;
  resolve(value: T): void;
}

const pending = new Set<() => void>();

/** A promise you resolve later. Pending ones are released by `releaseDeferreds()`. */
export function deferred<T = void>(): Deferred<T> {
  let settle!: (value: T) => void;
  const promise = new Promise<T>((r) => {
    settle = r;
  });
  const release = () => settle(undefined as T);
  pending.add(release);
  return {
    promise,
    resolve(value: T) {
      pending.delete(release);
      settle(value);
    },
  };
}

/**
 * Resolve every deferred still pending (a value-typed one with `undefined`): a test's cleanup runs
 * this so that a failed test does not leave a tool or a responder held while its engine closes.
 */
export function releaseDeferreds(): void {
  const all = [...pending];
  pending.clear();
  for (const release of all) release();
}

/** Poll until `condition` holds; fails after `timeoutMs` (default 5000) naming `what`. */
export async function until(
  condition: () => boolean,
  options: { what?: string; timeoutMs?: number } = {},
): Promise<void> {
  const { what = "condition", timeoutMs = 5000 } = options;
  const start = Date.now();
  while (!condition()) {
    if (Date.now() - start > timeoutMs) throw new Error(`${what} not met in ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 1));
  }
}

/** `promise`, or a rejection naming `what` once `ms` have passed without a result. */
export function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([
    promise,
    new Promise<T>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: no result after ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
