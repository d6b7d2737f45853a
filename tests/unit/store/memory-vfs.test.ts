/**
 * The memory store's VFS (worker/store/memory-vfs.ts) answers as wa-sqlite's MemoryVFS example does,
 * while turning each name into its file's key once: the same calls on both give the same results and
 * the same files under the same keys.
 */
import {
  SQLITE_ACCESS_EXISTS,
  SQLITE_OPEN_CREATE,
  SQLITE_OPEN_MAIN_DB,
  SQLITE_OPEN_READWRITE,
} from "@journeyapps/wa-sqlite";
import { describe, expect, test } from "vitest";
import { createMemoryVfs, type MemoryVfs } from "../../../worker/store/memory-vfs.ts";

interface Calls extends MemoryVfs {
  jOpen(filename: string | null, fileId: number, flags: number, pOutFlags: DataView): number;
  jDelete(name: string, syncDir: number): number;
  jAccess(name: string, flags: number, pResOut: DataView): number;
  jClose(fileId: number): number;
}

async function example(): Promise<Calls> {
  const { MemoryVFS } = (await import("@journeyapps/wa-sqlite/src/examples/MemoryVFS.js")) as unknown as {
    MemoryVFS: { create(name: string, module: unknown): Promise<Calls> };
  };
  return MemoryVFS.create("example", {});
}

const CREATE = SQLITE_OPEN_CREATE | SQLITE_OPEN_READWRITE | SQLITE_OPEN_MAIN_DB;
const NAMES = [
  "memory.db",
  "memory.db-journal",
  "dir/x.db",
  "/abs.db",
  "a b.db",
  "./dot.db",
  "up/../up.db",
  "ü.db",
];

/** Each call's result (and its out-value), then the files by key: the same script for both VFSs. */
function script(vfs: Calls): unknown[] {
  const out = new DataView(new ArrayBuffer(4));
  const log: unknown[] = [];
  const access = (name: string) => {
    log.push(["access", name, vfs.jAccess(name, SQLITE_ACCESS_EXISTS, out), out.getInt32(0, true)]);
  };
  let id = 100;
  for (const name of NAMES) {
    access(name);
    log.push(["open, no create", name, vfs.jOpen(name, id++, SQLITE_OPEN_READWRITE, out)]);
    out.setInt32(0, -1, true);
    log.push(["open", name, vfs.jOpen(name, id, CREATE, out), out.getInt32(0, true)]);
    log.push(["close", vfs.jClose(id++)]);
    access(name);
    // Opened again (twice: a cached key), the same file.
    log.push(["open again", name, vfs.jOpen(name, id++, SQLITE_OPEN_READWRITE, out)]);
    log.push(["open again", name, vfs.jOpen(name, id++, SQLITE_OPEN_READWRITE, out)]);
  }
  log.push(["files", [...vfs.mapNameToFile.keys()].sort()]);
  for (const name of NAMES.slice(0, 3)) {
    log.push(["delete", name, vfs.jDelete(name, 0)]);
    access(name);
  }
  log.push(["files", [...vfs.mapNameToFile.keys()].sort()]);
  return log;
}

describe("the memory VFS", () => {
  test("answers every open, access check and delete as the example does, with the same keys", async () => {
    const ours = await createMemoryVfs("ours", {});
    const theirs = await example();
    const log = script(ours as Calls);
    expect(log).toEqual(script(theirs));
    // What the script saw, in short: keys are the names' file-URL paths.
    expect(log.at(-1)).toEqual(["files", ["/a%20b.db", "/abs.db", "/dot.db", "/up.db", "/%C3%BC.db"].sort()]);
  });

  test("a file without a name (a temporary one) gets a fresh key each time", async () => {
    const ours = (await createMemoryVfs("temp", {})) as Calls;
    const out = new DataView(new ArrayBuffer(4));
    expect(ours.jOpen(null, 1, CREATE, out)).toBe(0);
    expect(ours.jOpen(null, 2, CREATE, out)).toBe(0);
    expect(ours.mapNameToFile.size).toBe(2);
    expect(ours.mapIdToFile.get(1)).not.toBe(ours.mapIdToFile.get(2));
  });
});
