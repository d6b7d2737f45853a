/**
 * The conformance suite's assertions: small, dependency-free, and the same in Node and in workerd
 * (vitest's `expect` does not run inside a Durable Object). Each throws an `AssertionFailed` whose
 * message says what was expected and what came; `equal` compares structurally like vitest's
 * `toEqual` (object keys holding `undefined` count as absent; byte arrays by content).
 */

export class AssertionFailed extends Error {
  override readonly name = "AssertionFailed";
}

export function assert(condition: unknown, message: string): asserts condition {
  if (!condition) throw new AssertionFailed(message);
}

export function equal(actual: unknown, expected: unknown, message: string): void {
  if (!deepEqual(actual, expected))
    throw new AssertionFailed(`${message}: expected ${show(expected)}, got ${show(actual)}`);
}

/** `promise` rejects with an instance of `type` (by class, or by `name` across bundles) whose message matches `pattern`. */
export async function rejects(
  promise: Promise<unknown>,
  type: { readonly name: string } | undefined,
  pattern: RegExp | undefined,
  message: string,
): Promise<unknown> {
  let error: unknown;
  try {
    await promise;
  } catch (e) {
    error = e;
  }
  if (error === undefined) throw new AssertionFailed(`${message}: expected a rejection, it resolved`);
  const name = error instanceof Error ? error.name : typeof error;
  if (type && name !== type.name)
    throw new AssertionFailed(`${message}: expected ${type.name}, got ${name}: ${text(error)}`);
  if (pattern && !pattern.test(text(error)))
    throw new AssertionFailed(`${message}: expected a message matching ${pattern}, got ${text(error)}`);
  return error;
}

function text(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export function show(value: unknown): string {
  try {
    return JSON.stringify(value, (_k, v: unknown) =>
      v instanceof Uint8Array ? `bytes[${[...v].join(",")}]` : typeof v === "bigint" ? `${v}n` : v,
    );
  } catch {
    return String(value);
  }
}

export function deepEqual(a: unknown, b: unknown): boolean {
  if (Object.is(a, b)) return true;
  if (a instanceof Uint8Array || b instanceof Uint8Array) {
    if (!(a instanceof Uint8Array && b instanceof Uint8Array) || a.length !== b.length) return false;
    return a.every((x, i) => x === b[i]);
  }
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!(Array.isArray(a) && Array.isArray(b)) || a.length !== b.length) return false;
    return a.every((x, i) => deepEqual(x, b[i]));
  }
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  const ra = a as Record<string, unknown>;
  const rb = b as Record<string, unknown>;
  const keys = (r: Record<string, unknown>) => Object.keys(r).filter((k) => r[k] !== undefined);
  const ka = keys(ra);
  const kb = keys(rb);
  if (ka.length !== kb.length) return false;
  return ka.every((k) => Object.hasOwn(rb, k) && deepEqual(ra[k], rb[k]));
}
