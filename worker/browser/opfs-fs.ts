/**
 * `OpfsFs`: the agent's workspace in the browser's origin-private file system (a sub-directory
 * "workspace" of the OPFS root). Browser code: it lives with the platform adapters, not in the portable agent.
 * It follows the `WorkspaceFs` contract of `agent/workspace/fs.ts`: DOM errors become `FsError`s.
 */
import { displayPath, type FsEntry, FsError, pathSegments, type WorkspaceFs } from "../agent/workspace/fs.ts";

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
    const path = displayPath(full);
    if (name === "NotFoundError") return new FsError("not_found", path, `no such file or directory: ${path}`);
    if (name === "TypeMismatchError") {
      return wanted === "file"
        ? new FsError("is_dir", path, `is a directory: ${path}`)
        : new FsError("not_dir", path, `not a directory: ${displayPath(at)}`);
    }
    if (name === "TypeError")
      return new FsError("invalid_path", path, `invalid path ${JSON.stringify(path)}`);
    return error;
  }
}
