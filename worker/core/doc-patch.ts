/**
 * Document patches: a change to one place in a document, stored as a row of its own instead of a new
 * copy of the whole document. Streaming writers (a tool's live output) append a little text to a big
 * document many times; with patches each commit stores only what it added (live output is
 * stored once and appended to).
 *
 * Invariants:
 * - applying is copy-on-write: the value given is never mutated (committed values are frozen), only
 *   the containers on the path are copied;
 * - a path names an existing container at every step but the last; `append` targets a string or an
 *   absent key (which reads as ""), `set` any key of an object, an existing index of an array or
 *   the index one past its end (adding an item), `remove` an existing index of an array (the items
 *   after it move down by one: a queue's head taken off without storing the whole queue again);
 * - a document keeps at most `PATCH_ROW_LIMIT` stored patch rows: the commit that would pass it
 *   stores the whole document instead, which deletes them (so replay at open stays short).
 */
import { InvalidTransition } from "./errors.ts";
import type { Json } from "./types.ts";

export type DocPath = ReadonlyArray<string | number>;

export type DocPatch =
  | { readonly path: DocPath; readonly append: string }
  | { readonly path: DocPath; readonly set: Json }
  | { readonly path: DocPath; readonly remove: true };

export const PATCH_ROW_LIMIT = 64;

/** `value` with `patches` applied in order; throws InvalidTransition for a path that does not fit. */
export function applyDocPatches(value: Json | undefined, patches: readonly DocPatch[]): Json {
  if (value === undefined) throw new InvalidTransition("a patch needs an existing document");
  let result = value;
  for (const patch of patches) result = applyAt(result, patch, 0);
  return result;
}

function applyAt(node: Json, patch: DocPatch, depth: number): Json {
  const path = patch.path;
  if (path.length === 0) throw new InvalidTransition("a patch path must name a key");
  const key = path[depth]!;
  const last = depth === path.length - 1;
  if (Array.isArray(node)) {
    // The last step may also `set` one past the end: that adds an item.
    const end = last && "set" in patch ? node.length + 1 : node.length;
    if (typeof key !== "number" || !Number.isInteger(key) || key < 0 || key >= end)
      throw new InvalidTransition(`patch path ${describe(path)}: no index ${String(key)}`);
    if (last && "remove" in patch) {
      if (patch.remove !== true)
        throw new InvalidTransition(`patch at ${describe(path)}: remove must be true`);
      return node.slice(0, key).concat(node.slice(key + 1));
    }
    const copy = node.slice();
    copy[key] = last ? leaf(node[key], patch) : applyAt(container(node[key], path), patch, depth + 1);
    return copy;
  }
  if (node === null || typeof node !== "object")
    throw new InvalidTransition(`patch path ${describe(path)} runs through a non-container`);
  if (typeof key !== "string")
    throw new InvalidTransition(`patch path ${describe(path)}: objects take names`);
  const record = node as Record<string, Json>;
  const next = last ? leaf(record[key], patch) : applyAt(container(record[key], path), patch, depth + 1);
  return { ...record, [key]: next };
}

function container(node: Json | undefined, path: DocPath): Json {
  if (node === undefined)
    throw new InvalidTransition(`patch path ${describe(path)} runs through a missing key`);
  return node;
}

function leaf(current: Json | undefined, patch: DocPatch): Json {
  if ("set" in patch) return patch.set;
  if ("remove" in patch)
    throw new InvalidTransition(`patch at ${describe(patch.path)}: remove takes an index of an array`);
  if (typeof patch.append !== "string")
    throw new InvalidTransition(`patch at ${describe(patch.path)} must append a string or set a value`);
  if (current === undefined) return patch.append;
  if (typeof current !== "string")
    throw new InvalidTransition(`patch path ${describe(patch.path)} appends to a non-string`);
  return current + patch.append;
}

function describe(path: DocPath): string {
  return JSON.stringify(path);
}
