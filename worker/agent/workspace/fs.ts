/**
 * The workspace seam: the files the built-in tools see. Paths are always relative to the workspace
 * root; `..` may not climb above it and absolute host paths are refused. Two implementations:
 * `MemoryFs` (memory-fs.ts: tests, Node) and `OpfsFs` (browser/opfs-fs.ts: the browser's origin-private
 * file system). This module runs in Node and in workers: no DOM, no Node APIs.
 */

export type FsErrorCode = "not_found" | "is_dir" | "not_dir" | "invalid_path";

/** A typed workspace error. `path` is the normalised path (or the raw one for `invalid_path`). */
export class FsError extends Error {
  constructor(
    readonly code: FsErrorCode,
    readonly path: string,
    message: string,
  ) {
    super(message);
    this.name = "FsError";
  }
}

export interface FsEntry {
  readonly name: string;
  readonly kind: "file" | "dir";
  /** UTF-8 bytes for files, 0 for directories. */
  readonly size: number;
}

export interface WorkspaceFs {
  /** Entries of a directory, sorted by name. `not_found`, `not_dir`. */
  list(path: string): Promise<FsEntry[]>;
  /** A file's text. `not_found`, `is_dir`. */
  read(path: string): Promise<string>;
  /** Replace a file's text, creating missing parent directories. `is_dir`, `not_dir` (a parent is a file). */
  write(path: string, text: string): Promise<void>;
  exists(path: string): Promise<boolean>;
  /** Remove a file or a directory with its contents. `not_found`. */
  remove?(path: string): Promise<void>;
}

// ---------------------------------------------------------------------------------------------
// Paths

const DRIVE = /^[a-zA-Z]:/;
// Control characters are never valid in a workspace name.
// biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point
const CONTROL = /[\u0000-\u001f\u007f]/;

/**
 * The path's segments below the workspace root ([] is the root). Accepts `.`, `a/./b`, `a//b`,
 * `a/../b`, backslashes as separators; refuses absolute paths (`/x`, `\x`, `C:...`, URLs), a `..`
 * that climbs above the root, and control characters.
 */
export function pathSegments(path: string): string[] {
  if (typeof path !== "string") throw new FsError("invalid_path", String(path), "path must be a string");
  const trimmed = path.trim();
  if (CONTROL.test(trimmed)) {
    throw new FsError("invalid_path", path, `invalid path ${JSON.stringify(path)}: control characters`);
  }
  if (
    trimmed.startsWith("/") ||
    trimmed.startsWith("\\") ||
    DRIVE.test(trimmed) ||
    /^[a-z]+:\/\//i.test(trimmed)
  ) {
    throw new FsError(
      "invalid_path",
      path,
      `invalid path ${JSON.stringify(path)}: use a path relative to the workspace root (for example "notes/a.md")`,
    );
  }
  const out: string[] = [];
  for (const part of trimmed.split(/[\\/]/)) {
    if (part === "" || part === ".") continue;
    if (part === "..") {
      if (out.length === 0) {
        throw new FsError(
          "invalid_path",
          path,
          `invalid path ${JSON.stringify(path)}: it leaves the workspace`,
        );
      }
      out.pop();
      continue;
    }
    out.push(part);
  }
  return out;
}

/** The canonical form of a workspace path: `a/b/c`, or `.` for the root. */
export function normalizePath(path: string): string {
  const segments = pathSegments(path);
  return segments.length === 0 ? "." : segments.join("/");
}

/** How a path's segments read in messages: `a/b/c`, or `.` for the root. */
export function displayPath(segments: readonly string[]): string {
  return segments.length === 0 ? "." : segments.join("/");
}

/** Length of a string in UTF-8 bytes, without allocating. */
export function utf8Length(text: string): number {
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) bytes += 1;
    else if (c < 0x800) bytes += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        bytes += 4;
        i++;
      } else bytes += 3;
    } else bytes += 3;
  }
  return bytes;
}

// ---------------------------------------------------------------------------------------------
// One writer per path

/** Runs `fn` after every earlier call for the same path has settled. */
export type PathQueue = <T>(path: string, fn: () => Promise<T>) => Promise<T>;

/**
 * A per-path promise chain: calls for the same normalised path run one at a time, in call order;
 * different paths run concurrently. Idle paths leave no state behind.
 */
export function serializeByPath(): PathQueue {
  const tails = new Map<string, Promise<unknown>>();
  return <T>(path: string, fn: () => Promise<T>): Promise<T> => {
    let key: string;
    try {
      key = normalizePath(path);
    } catch (error) {
      return Promise.reject(error);
    }
    const previous = tails.get(key) ?? Promise.resolve();
    const run = previous.then(fn, fn);
    const tail = run.then(
      () => undefined,
      () => undefined,
    );
    tails.set(key, tail);
    void tail.then(() => {
      if (tails.get(key) === tail) tails.delete(key);
    });
    return run;
  };
}

const queues = new WeakMap<WorkspaceFs, PathQueue>();

/** The shared queue of one workspace: the tools that modify files go through it. */
export function pathQueueFor(fs: WorkspaceFs): PathQueue {
  let queue = queues.get(fs);
  if (!queue) {
    queue = serializeByPath();
    queues.set(fs, queue);
  }
  return queue;
}
