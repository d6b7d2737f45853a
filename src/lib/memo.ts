/**
 * A function of a string with its newest results kept: the transcript's markdown is rendered once
 * per text (lib/renderer.svelte.ts). Invariants: at most `size` results are kept; when full, the
 * least recently stored one goes first; a kept result is returned as is, without calling `fn`.
 */
export function memoized<T>(fn: (key: string) => T, size: number): (key: string) => T {
  const kept = new Map<string, T>();
  return (key) => {
    if (kept.has(key)) return kept.get(key) as T;
    const value = fn(key);
    if (kept.size >= size) kept.delete(kept.keys().next().value as string);
    kept.set(key, value);
    return value;
  };
}
