/**
 * Browser store kinds, each a wa-sqlite build plus a VFS chosen for the context it runs in:
 * - `idb`: IDBBatchAtomicVFS over IndexedDB. Works in a SharedWorker (the engine's home), a dedicated
 *   worker or a page. JSPI build when `WebAssembly.Suspending` exists and the caller did not ask for
 *   Asyncify, else the Asyncify build. Full durability by default (every COMMIT waits for a strict
 *   IndexedDB transaction).
 * - `opfs`: OPFSCoopSyncVFS (without its temporary-file pool: opfs-vfs.ts) with the sync build. Needs OPFS sync access handles, which only a dedicated
 *   worker has (the fallback engine host when SharedWorker is missing).
 * The wasm files are emitted by Vite (`?url`); each build's is fetched and compiled once per context
 * (`preloadBrowserStore` starts that early) and instantiated through Emscripten's `instantiateWasm`.
 * Every open gets its own instance: the async builds are not re-entrant, so two stores must never
 * share one.
 */
import * as SQLiteAPI from "@journeyapps/wa-sqlite";
import syncWasmUrl from "@journeyapps/wa-sqlite/dist/wa-sqlite.wasm?url";
import asyncifyWasmUrl from "@journeyapps/wa-sqlite/dist/wa-sqlite-async.wasm?url";
import jspiWasmUrl from "@journeyapps/wa-sqlite/dist/wa-sqlite-jspi.wasm?url";
import { classifyStoreError } from "./errors.ts";
import { finishOpen } from "./finish-open.ts";
import { OPFS_IDLE_CHECKPOINT_MS, PRAGMAS } from "./pragmas.ts";

export { OPFS_IDLE_CHECKPOINT_MS, PRAGMAS };

import type { SqliteLine } from "./line.ts";
import { createOpfsVfs, releaseOpfsVfs } from "./opfs-vfs.ts";
import { StoreOpenError } from "./types.ts";

export type IdbBuild = "jspi" | "asyncify";
/** The browser kinds' options (store/open.ts's `openStore` takes these too). */
export type BrowserStoreOptions =
  | { kind: "idb"; name: string; build?: IdbBuild }
  | {
      kind: "opfs";
      name: string;
      /** Told as each step of the open ends (the lent worker sends them to the engine: the bench's parts). */
      stamp?: (step: "instance" | "vfs" | "file") => void;
    };
type Build = IdbBuild | "sync";

/** The part of a wa-sqlite VFS instance this module touches. */
interface VfsInstance {
  readonly name: string;
  close(): void | Promise<void>;
}
interface VfsClass {
  create(name: string, module: unknown, options?: object): Promise<VfsInstance>;
}
/** Whether this context has JS Promise Integration (the JSPI build's requirement). */
export function jspiAvailable(): boolean {
  return typeof (WebAssembly as unknown as { Suspending?: unknown }).Suspending === "function";
}

/** The build `openBrowserStore` uses for an idb store here, given the caller's request. */
export function chooseIdbBuild(requested?: IdbBuild): IdbBuild {
  return requested !== "asyncify" && jspiAvailable() ? "jspi" : "asyncify";
}

/** True inside a dedicated worker (the only context with OPFS sync access handles). */
export function inDedicatedWorker(): boolean {
  const scope = (globalThis as { DedicatedWorkerGlobalScope?: abstract new () => unknown })
    .DedicatedWorkerGlobalScope;
  return typeof scope === "function" && globalThis instanceof scope;
}

type ModuleFactory = (config: {
  instantiateWasm(
    imports: WebAssembly.Imports,
    done: (instance: WebAssembly.Instance, module: WebAssembly.Module) => void,
  ): object;
}) => Promise<unknown>;

/** A build's Emscripten factory and its compiled wasm: fetched and compiled once per context. */
const builds = new Map<Build, Promise<{ factory: ModuleFactory; wasm: WebAssembly.Module }>>();

function importFactory(build: Build): Promise<{ default: unknown }> {
  switch (build) {
    case "jspi":
      return import("@journeyapps/wa-sqlite/dist/wa-sqlite-jspi.mjs");
    case "asyncify":
      return import("@journeyapps/wa-sqlite/dist/wa-sqlite-async.mjs");
    case "sync":
      return import("@journeyapps/wa-sqlite/dist/wa-sqlite.mjs");
  }
}

const WASM_URLS: Record<Build, string> = { jspi: jspiWasmUrl, asyncify: asyncifyWasmUrl, sync: syncWasmUrl };

/** Compile while the bytes arrive; a server that does not say application/wasm gets a plain compile. */
async function compileWasm(url: string): Promise<WebAssembly.Module> {
  try {
    return await WebAssembly.compileStreaming(fetch(url, { credentials: "same-origin" }));
  } catch {
    const response = await fetch(url, { credentials: "same-origin" });
    if (!response.ok) throw new Error(`fetching ${url} failed: HTTP ${response.status}`);
    return WebAssembly.compile(await response.arrayBuffer());
  }
}

function loadBuild(build: Build): Promise<{ factory: ModuleFactory; wasm: WebAssembly.Module }> {
  let loading = builds.get(build);
  if (!loading) {
    loading = Promise.all([importFactory(build), compileWasm(WASM_URLS[build])]).then(([m, wasm]) => ({
      factory: m.default as ModuleFactory,
      wasm,
    }));
    builds.set(build, loading);
    // A failed fetch may be tried again by the next open.
    loading.catch(() => builds.delete(build));
  }
  return loading;
}

/**
 * Start fetching and compiling the wasm (and its glue) that opening a store of this kind needs, so a
 * host can do it before it holds the store's lock. Resolves when both are here (a host may time
 * it); never rejects: the open reports a failure.
 */
export function preloadBrowserStore(
  options: Pick<BrowserStoreOptions, "kind"> & { build?: IdbBuild },
): Promise<void> {
  return loadBuild(options.kind === "idb" ? chooseIdbBuild(options.build) : "sync").then(
    () => undefined,
    () => undefined,
  );
}

/** The wasm memories of the stores open in this context (`wasmMemoryBytes`). */
const liveMemories = new Set<WebAssembly.Memory>();

/**
 * The bytes of wasm memory the stores open in this context hold now (each instance's linear memory:
 * SQLite's page cache, its heap, the VFS's buffers). A memory only grows, so this is also the most
 * each store has held. The growth bench reads it through `debug.memory`.
 */
export function wasmMemoryBytes(): number {
  let bytes = 0;
  for (const memory of liveMemories) bytes += memory.buffer.byteLength;
  return bytes;
}

/** A new instance of the build (its own memory: the async builds are not re-entrant) from the cached module. */
async function loadModule(build: Build, memories: WebAssembly.Memory[]): Promise<unknown> {
  const { factory, wasm } = await loadBuild(build);
  // Emscripten waits for `done` forever: an instantiation that fails rejects the load instead.
  let failed: (error: unknown) => void = () => undefined;
  const failure = new Promise<never>((_, reject) => {
    failed = reject;
  });
  return Promise.race([
    factory({
      instantiateWasm(imports, done) {
        WebAssembly.instantiate(wasm, imports).then((instance) => {
          const memory = Object.values(instance.exports).find((e) => e instanceof WebAssembly.Memory);
          if (memory) memories.push(memory);
          done(instance, wasm);
        }, failed);
        return {};
      },
    }),
    failure,
  ]);
}

function unsupported(message: string, advice: string): StoreOpenError {
  return new StoreOpenError(message, "unsupported", advice);
}

function checkSupport(options: BrowserStoreOptions): void {
  if (typeof navigator === "undefined" || !navigator.locks) {
    throw unsupported(
      `store kind ${options.kind} needs Web Locks, which this context lacks`,
      "Use a current Chromium, Firefox or Safari.",
    );
  }
  if (options.kind === "idb") {
    if (typeof indexedDB === "undefined") {
      throw unsupported(
        "IndexedDB is not available here",
        "Storage may be blocked for this site (private browsing or site settings); allow it and reload.",
      );
    }
    return;
  }
  if (!inDedicatedWorker()) {
    throw unsupported(
      "store kind opfs needs a dedicated worker (OPFS sync access handles exist only there)",
      "Open the store from the dedicated-worker engine host, or use kind idb.",
    );
  }
  const handle = (globalThis as { FileSystemFileHandle?: { prototype: object } }).FileSystemFileHandle;
  if (
    typeof navigator.storage?.getDirectory !== "function" ||
    !handle ||
    !("createSyncAccessHandle" in handle.prototype)
  ) {
    throw unsupported(
      "this browser has no OPFS sync access handles",
      "Use a current Chromium, Firefox or Safari, or the idb store kind.",
    );
  }
}

export async function openBrowserStore(options: BrowserStoreOptions): Promise<SqliteLine> {
  const { name } = options;
  checkSupport(options);
  let vfs: VfsInstance | undefined;
  let release: () => Promise<void> | void = () => undefined;
  const memories: WebAssembly.Memory[] = [];
  let sqlite3: SQLiteAPI;
  let db: number;
  try {
    if (options.kind === "idb") {
      const module = await loadModule(chooseIdbBuild(options.build), memories);
      sqlite3 = SQLiteAPI.Factory(module);
      const { IDBBatchAtomicVFS } = (await import(
        "@journeyapps/wa-sqlite/src/examples/IDBBatchAtomicVFS.js"
      )) as unknown as { IDBBatchAtomicVFS: VfsClass };
      // The IndexedDB database is named after the store; one store, one IndexedDB database.
      const idbVfs = await IDBBatchAtomicVFS.create("idb", module, {
        idbName: name,
        lockPolicy: "exclusive",
      });
      vfs = idbVfs;
      release = () => idbVfs.close();
    } else {
      const module = await loadModule("sync", memories);
      options.stamp?.("instance");
      sqlite3 = SQLiteAPI.Factory(module);
      const opfsVfs = await createOpfsVfs("opfs", module);
      vfs = opfsVfs;
      release = () => releaseOpfsVfs(opfsVfs);
      options.stamp?.("vfs");
    }
    sqlite3.vfs_register(vfs as unknown as SQLiteVFS, false);
    // OPFS is shared with the agent's workspace files: keep databases in their own directory.
    const path = options.kind === "opfs" ? `stores/${name}.db` : `${name}.db`;
    db = await sqlite3.open_v2(path, undefined, vfs.name);
    if (options.kind === "opfs") options.stamp?.("file");
  } catch (error) {
    try {
      await release();
    } catch {
      // The original error is what matters.
    }
    throw await classifyStoreError(error, { store: name, stage: "open" });
  }
  for (const memory of memories) liveMemories.add(memory);
  const releaseVfs = release;
  const releaseAll = async () => {
    for (const memory of memories) liveMemories.delete(memory);
    await releaseVfs();
  };
  // finishOpen closes the connection (and so releases the VFS) and classifies whatever it throws.
  return finishOpen(
    sqlite3,
    db,
    options.kind,
    name,
    releaseAll,
    PRAGMAS[options.kind],
    options.kind === "opfs" ? { idleCheckpoint: { afterMs: OPFS_IDLE_CHECKPOINT_MS } } : {},
  );
}
