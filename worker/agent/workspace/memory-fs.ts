/**
 * `MemoryFs`: the workspace held in memory, for tests and Node. It follows the `WorkspaceFs`
 * contract of `fs.ts` exactly (same paths, same errors) so a test sees what the browser would.
 */
import { displayPath, type FsEntry, FsError, pathSegments, utf8Length, type WorkspaceFs } from "./fs.ts";

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
      throw new FsError("not_dir", displayPath(segments), `not a directory: ${displayPath(segments)}`);
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
      throw new FsError("is_dir", displayPath(segments), `is a directory: ${displayPath(segments)}`);
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
      throw new FsError(
        "not_found",
        displayPath(segments),
        `no such file or directory: ${displayPath(segments)}`,
      );
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
        throw new FsError(
          "not_dir",
          displayPath(segments),
          `not a directory: ${displayPath(segments.slice(0, i))}`,
        );
      }
      const child: MemNode | undefined = node.children.get(segments[i]!);
      if (!child)
        throw new FsError(
          "not_found",
          displayPath(segments),
          `no such file or directory: ${displayPath(segments)}`,
        );
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
          displayPath(segments),
          `not a directory: ${displayPath(segments.slice(0, i + 1))}`,
        );
      }
      dir = child;
    }
    const name = segments[segments.length - 1]!;
    const existing = dir.children.get(name);
    if (existing?.kind === "dir")
      throw new FsError("is_dir", displayPath(segments), `is a directory: ${displayPath(segments)}`);
    dir.children.set(name, { kind: "file", text: String(text) });
  }
}
