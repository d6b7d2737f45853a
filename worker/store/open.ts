/**
 * Opening a store: pick the VFS and build for the context, open the database, and let
 * finish-open.ts check its schema version and hand back the commit line (the layer above then hands
 * it the migrations: `Store.migrate`). The memory kind works in Node (tests and benchmarks: sync
 * build, wasm bytes read from disk) and in browsers; `idb` and `opfs` load the browser module lazily
 * so Node never touches it.
 */
import * as SQLiteAPI from "@journeyapps/wa-sqlite";
import type { BrowserStoreOptions } from "./browser.ts";
import { DirectStatements, isSyncModule } from "./direct.ts";
import { finishOpen } from "./finish-open.ts";
import type { SqliteLine } from "./line.ts";
import { createMemoryVfs } from "./memory-vfs.ts";
import { OPFS_IDLE_CHECKPOINT_MS, PRAGMAS } from "./pragmas.ts";

/** The bytes of a memory database's files, as a crash would leave them. */
export type MemoryImage = ReadonlyArray<{ readonly path: string; readonly bytes: Uint8Array }>;

export type OpenStoreOptions =
  | {
      kind: "memory";
      name?: string;
      /** Start from these files (a crash image) instead of an empty database. */
      image?: MemoryImage;
      /** The sync build's wasm bytes; read from node_modules when omitted in Node. */
      wasmBinary?: ArrayBuffer | Uint8Array;
      /**
       * `persist` (the default): a rollback journal kept between transactions. `wal`: the opfs kind's
       * setup (its pragmas: exclusive locking, a write-ahead log; and its idle checkpoint), so its WAL
       * behaviour runs in Node: the conformance suite, the checkpoint's tests.
       */
      journal?: "persist" | "wal";
      /** With `journal: "wal"`: the idle checkpoint's delay (default the opfs kind's). */
      idleCheckpointMs?: number;
    }
  | BrowserStoreOptions;

/** A memory store can also hand out the image of its files. */
export interface MemoryStore extends SqliteLine {
  image(): MemoryImage;
}

let compiledSync: Promise<WebAssembly.Module> | undefined;

async function nodeWasmBytes(): Promise<Uint8Array> {
  // Variable specifiers keep bundlers from pulling Node modules into the browser build.
  const modSpec = "node:module";
  const fsSpec = "node:fs/promises";
  const { createRequire } = (await import(/* @vite-ignore */ modSpec)) as typeof import("node:module");
  const { readFile } = (await import(/* @vite-ignore */ fsSpec)) as typeof import("node:fs/promises");
  const require = createRequire(import.meta.url);
  return readFile(require.resolve("@journeyapps/wa-sqlite/dist/wa-sqlite.wasm"));
}

function syncModule(wasmBinary?: ArrayBuffer | Uint8Array): Promise<WebAssembly.Module> {
  if (wasmBinary) return WebAssembly.compile(wasmBinary as BufferSource);
  compiledSync ??= nodeWasmBytes().then((bytes) => WebAssembly.compile(bytes as BufferSource));
  return compiledSync;
}

let counter = 0;

export async function openStore(options: OpenStoreOptions & { kind: "memory" }): Promise<MemoryStore>;
export async function openStore(options: OpenStoreOptions): Promise<SqliteLine>;
export async function openStore(options: OpenStoreOptions): Promise<SqliteLine> {
  if (options.kind !== "memory") {
    const browser = await import("./browser.ts");
    return browser.openBrowserStore(options);
  }
  const wasm = await syncModule(options.wasmBinary);
  const { default: factory } = await import("@journeyapps/wa-sqlite/dist/wa-sqlite.mjs");
  const module = await factory({
    instantiateWasm(
      imports: WebAssembly.Imports,
      done: (i: WebAssembly.Instance, m: WebAssembly.Module) => void,
    ) {
      WebAssembly.instantiate(wasm, imports).then((instance) => done(instance, wasm));
      return {};
    },
  });
  const sqlite3 = SQLiteAPI.Factory(module);
  const vfsName = `mem${++counter}`;
  const vfs = await createMemoryVfs(vfsName, module);
  for (const { path, bytes } of options.image ?? []) {
    const data = new ArrayBuffer(bytes.byteLength);
    new Uint8Array(data).set(bytes);
    vfs.mapNameToFile.set(path, { pathname: path, flags: 0x106, size: bytes.byteLength, data });
  }
  sqlite3.vfs_register(vfs as never, false);
  const name = options.name ?? "memory";
  const db = await sqlite3.open_v2(`${name}.db`, undefined, vfsName);
  // PERSIST keeps the rollback journal's file between transactions instead of recreating it: same
  // atomicity (a crash before COMMIT leaves a hot journal that the next open rolls back).
  const wal = options.journal === "wal";
  const line = await finishOpen(
    sqlite3,
    db,
    "memory",
    name,
    () => vfs.close(),
    wal ? PRAGMAS.opfs : "PRAGMA journal_mode = PERSIST;",
    {
      // The sync build with a sync VFS: statements can skip the async API (see direct.ts).
      ...(isSyncModule(module) ? { direct: new DirectStatements(module, db) } : {}),
      ...(wal ? { idleCheckpoint: { afterMs: options.idleCheckpointMs ?? OPFS_IDLE_CHECKPOINT_MS } } : {}),
    },
  );
  const store = line as MemoryStore;
  store.image = () =>
    [...vfs.mapNameToFile.values()].map((f) => ({
      path: f.pathname,
      bytes: new Uint8Array(f.data, 0, f.size).slice(),
    }));
  return store;
}
