/**
 * The workspace seam: the files the built-in tools see. Paths are always relative to the workspace
 * root; `..` may not climb above it and absolute host paths are refused. Two implementations:
 * `MemoryFs` (tests, Node) and `OpfsFs` (the browser's origin-private file system, in a
 * sub-directory "workspace"). Runs in Node and in workers: no DOM, no Node APIs.
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

function display(segments: readonly string[]): string {
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

// ---------------------------------------------------------------------------------------------
// MemoryFs

type MemNode = { kind: "file"; text: string } | { kind: "dir"; children: Map<string, MemNode> };

/** An in-memory workspace, for tests. `snapshot()` gives every file as path -> text. */
export class MemoryFs implements WorkspaceFs {
  private readonly root: MemNode & { kind: "dir" } = { kind: "dir", children: new Map() };

  constructor(files?: Record<string, string>) {
    if (files) for (const [path, text] of Object.entries(files)) this.writeSync(pathSegments(path), text);
  }

  async list(path: string): Promise<FsEntry[]> {
    const segments = pathSegments(path);
    const node = this.lookup(segments);
    if (node.kind !== "dir")
      throw new FsError("not_dir", display(segments), `not a directory: ${display(segments)}`);
    return [...node.children.entries()]
      .map(
        ([name, child]): FsEntry =>
          child.kind === "dir"
            ? { name, kind: "dir", size: 0 }
            : { name, kind: "file", size: utf8Length(child.text) },
      )
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  async read(path: string): Promise<string> {
    const segments = pathSegments(path);
    const node = this.lookup(segments);
    if (node.kind !== "file")
      throw new FsError("is_dir", display(segments), `is a directory: ${display(segments)}`);
    return node.text;
  }

  async write(path: string, text: string): Promise<void> {
    this.writeSync(pathSegments(path), text);
  }

  async exists(path: string): Promise<boolean> {
    const segments = pathSegments(path);
    try {
      this.lookup(segments);
      return true;
    } catch (error) {
      if (error instanceof FsError && (error.code === "not_found" || error.code === "not_dir")) return false;
      throw error;
    }
  }

  async remove(path: string): Promise<void> {
    const segments = pathSegments(path);
    if (segments.length === 0) throw new FsError("invalid_path", ".", "cannot remove the workspace root");
    const parent = this.lookup(segments.slice(0, -1));
    const name = segments[segments.length - 1]!;
    if (parent.kind !== "dir" || !parent.children.delete(name)) {
      throw new FsError("not_found", display(segments), `no such file or directory: ${display(segments)}`);
    }
  }

  /** Every file as normalised path -> text, sorted by path. */
  snapshot(): Record<string, string> {
    const out: Record<string, string> = {};
    const walk = (node: MemNode, prefix: string) => {
      if (node.kind === "file") {
        out[prefix] = node.text;
        return;
      }
      for (const name of [...node.children.keys()].sort()) {
        walk(node.children.get(name)!, prefix ? `${prefix}/${name}` : name);
      }
    };
    walk(this.root, "");
    return out;
  }

  private lookup(segments: readonly string[]): MemNode {
    let node: MemNode = this.root;
    for (let i = 0; i < segments.length; i++) {
      if (node.kind !== "dir") {
        throw new FsError("not_dir", display(segments), `not a directory: ${display(segments.slice(0, i))}`);
      }
      const child: MemNode | undefined = node.children.get(segments[i]!);
      if (!child)
        throw new FsError("not_found", display(segments), `no such file or directory: ${display(segments)}`);
      node = child;
    }
    return node;
  }

  private writeSync(segments: readonly string[], text: string): void {
    if (segments.length === 0) throw new FsError("is_dir", ".", "is a directory: .");
    let dir: MemNode & { kind: "dir" } = this.root;
    for (let i = 0; i < segments.length - 1; i++) {
      const name = segments[i]!;
      let child = dir.children.get(name);
      if (!child) {
        child = { kind: "dir", children: new Map() };
        dir.children.set(name, child);
      }
      if (child.kind !== "dir") {
        throw new FsError(
          "not_dir",
          display(segments),
          `not a directory: ${display(segments.slice(0, i + 1))}`,
        );
      }
      dir = child;
    }
    const name = segments[segments.length - 1]!;
    const existing = dir.children.get(name);
    if (existing?.kind === "dir")
      throw new FsError("is_dir", display(segments), `is a directory: ${display(segments)}`);
    dir.children.set(name, { kind: "file", text: String(text) });
  }
}

// ---------------------------------------------------------------------------------------------
// OpfsFs

/** What we use of a directory handle; the DOM lib lacks the async iterators. */
interface DirHandle {
  readonly kind: "directory";
  readonly name: string;
  getDirectoryHandle(name: string, options?: { create?: boolean }): Promise<DirHandle>;
  getFileHandle(name: string, options?: { create?: boolean }): Promise<FileHandle>;
  removeEntry(name: string, options?: { recursive?: boolean }): Promise<void>;
  values(): AsyncIterable<DirHandle | FileHandle>;
}

interface Writable {
  write(data: string): Promise<void>;
  close(): Promise<void>;
  abort?(reason?: unknown): Promise<void>;
}

interface SyncAccessHandle {
  truncate(size: number): void;
  write(buffer: Uint8Array, options?: { at?: number }): number;
  flush(): void;
  close(): void;
}

interface FileHandle {
  readonly kind: "file";
  readonly name: string;
  getFile(): Promise<{ size: number; text(): Promise<string> }>;
  createWritable?(options?: { keepExistingData?: boolean }): Promise<Writable>;
  createSyncAccessHandle?(): Promise<SyncAccessHandle>;
}

export interface OpfsFsOptions {
  /** The directory below the OPFS root that holds the workspace. Default "workspace". */
  readonly directory?: string;
  /** Where the OPFS root comes from. Default `navigator.storage.getDirectory()`. */
  readonly root?: () => Promise<FileSystemDirectoryHandle>;
}

function domErrorName(error: unknown): string | undefined {
  return typeof error === "object" && error !== null && "name" in error && typeof error.name === "string"
    ? error.name
    : undefined;
}

/**
 * The workspace in the origin-private file system. Writes use `createWritable` (atomic: the new
 * content replaces the old on close) where it exists, else a sync access handle (dedicated workers).
 */
export class OpfsFs implements WorkspaceFs {
  private workspace: Promise<DirHandle> | undefined;

  constructor(private readonly options: OpfsFsOptions = {}) {}

  async list(path: string): Promise<FsEntry[]> {
    const segments = pathSegments(path);
    const dir = await this.dir(segments, false);
    const out: FsEntry[] = [];
    for await (const handle of dir.values()) {
      if (handle.kind === "directory") out.push({ name: handle.name, kind: "dir", size: 0 });
      else out.push({ name: handle.name, kind: "file", size: (await handle.getFile()).size });
    }
    return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  async read(path: string): Promise<string> {
    const segments = pathSegments(path);
    const file = await this.file(segments, false);
    return (await file.getFile()).text();
  }

  async write(path: string, text: string): Promise<void> {
    const segments = pathSegments(path);
    const file = await this.file(segments, true);
    if (file.createWritable) {
      const writable = await file.createWritable({ keepExistingData: false });
      try {
        await writable.write(String(text));
        await writable.close();
      } catch (error) {
        await writable.abort?.(error).catch(() => undefined);
        throw error;
      }
      return;
    }
    if (file.createSyncAccessHandle) {
      const handle = await file.createSyncAccessHandle();
      try {
        const bytes = new TextEncoder().encode(String(text));
        handle.truncate(0);
        handle.write(bytes, { at: 0 });
        handle.flush();
      } finally {
        handle.close();
      }
      return;
    }
    throw new Error("this context cannot write OPFS files (no createWritable, no createSyncAccessHandle)");
  }

  async exists(path: string): Promise<boolean> {
    const segments = pathSegments(path);
    if (segments.length === 0) return true;
    try {
      const parent = await this.dir(segments.slice(0, -1), false);
      const name = segments[segments.length - 1]!;
      try {
        await parent.getFileHandle(name);
        return true;
      } catch (error) {
        if (domErrorName(error) !== "TypeMismatchError") throw error;
        return true; // a directory of that name
      }
    } catch (error) {
      if (error instanceof FsError && (error.code === "not_found" || error.code === "not_dir")) return false;
      if (domErrorName(error) === "NotFoundError") return false;
      throw error;
    }
  }

  async remove(path: string): Promise<void> {
    const segments = pathSegments(path);
    if (segments.length === 0) throw new FsError("invalid_path", ".", "cannot remove the workspace root");
    const parent = await this.dir(segments.slice(0, -1), false);
    try {
      await parent.removeEntry(segments[segments.length - 1]!, { recursive: true });
    } catch (error) {
      throw this.translate(error, segments, "file");
    }
  }

  private root(): Promise<DirHandle> {
    if (!this.workspace) {
      const getRoot = this.options.root ?? (() => navigator.storage.getDirectory());
      const name = this.options.directory ?? "workspace";
      this.workspace = (async () => {
        const root = (await getRoot()) as unknown as DirHandle;
        return root.getDirectoryHandle(name, { create: true });
      })();
      this.workspace.catch(() => {
        this.workspace = undefined;
      });
    }
    return this.workspace;
  }

  private async dir(segments: readonly string[], create: boolean): Promise<DirHandle> {
    let dir = await this.root();
    for (let i = 0; i < segments.length; i++) {
      try {
        dir = await dir.getDirectoryHandle(segments[i]!, { create });
      } catch (error) {
        throw this.translate(error, segments.slice(0, i + 1), "dir", segments);
      }
    }
    return dir;
  }

  private async file(segments: readonly string[], create: boolean): Promise<FileHandle> {
    if (segments.length === 0) throw new FsError("is_dir", ".", "is a directory: .");
    const parent = await this.dir(segments.slice(0, -1), create);
    try {
      return await parent.getFileHandle(segments[segments.length - 1]!, { create });
    } catch (error) {
      throw this.translate(error, segments, "file");
    }
  }

  /** DOMException -> FsError. `wanted` is the kind the failing call asked for at `at`. */
  private translate(
    error: unknown,
    at: readonly string[],
    wanted: "file" | "dir",
    full: readonly string[] = at,
  ): unknown {
    const name = domErrorName(error);
    const path = display(full);
    if (name === "NotFoundError") return new FsError("not_found", path, `no such file or directory: ${path}`);
    if (name === "TypeMismatchError") {
      return wanted === "file"
        ? new FsError("is_dir", path, `is a directory: ${path}`)
        : new FsError("not_dir", path, `not a directory: ${display(at)}`);
    }
    if (name === "TypeError")
      return new FsError("invalid_path", path, `invalid path ${JSON.stringify(path)}`);
    return error;
  }
}
