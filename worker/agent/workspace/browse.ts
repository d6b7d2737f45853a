/**
 * The workspace as a file browser sees it: every file below the root with its size, depth first and
 * sorted, capped so a huge workspace cannot stall the engine.
 */
import type { WorkspaceFs } from "./fs.ts";

export interface WorkspaceFile {
  /** Relative to the workspace root, `/`-separated. */
  readonly path: string;
  /** UTF-8 bytes. */
  readonly size: number;
}

export const MAX_LISTED_FILES = 5_000;

/** Every file (not directory) under the root, at most `max` of them. */
export async function listWorkspaceFiles(fs: WorkspaceFs, max = MAX_LISTED_FILES): Promise<WorkspaceFile[]> {
  const files: WorkspaceFile[] = [];
  const walk = async (dir: string): Promise<void> => {
    for (const entry of await fs.list(dir)) {
      if (files.length >= max) return;
      const path = dir === "." ? entry.name : `${dir}/${entry.name}`;
      if (entry.kind === "dir") await walk(path);
      else files.push({ path, size: entry.size });
    }
  };
  await walk(".");
  return files;
}
