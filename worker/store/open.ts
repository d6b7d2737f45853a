/**
 * Opening a store: pick the VFS and build for the context, open the database, run the numbered
 * migrations in one transaction, hand back the commit line. The memory kind works in Node (tests and
 * benchmarks: sync build, wasm bytes read from disk) and in browsers; `idb` and `opfs` load the
 * browser module lazily so Node never touches it.
 */
import * as SQLiteAPI from "@journeyapps/wa-sqlite";

type Api = SQLiteAPI;

import { DirectStatements, isSyncModule } from "./direct.ts";
import { SqliteLine } from "./line.ts";
import { migrations } from "./schema.ts";
import { StoreOpenError } from "./types.ts";

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
      /** Stop migrating at this version (tests of upgrades from older schemas). */
      targetVersion?: number;
      /** Group concurrent commits into one transaction (default true). */
      groupCommit?: boolean;
    }
  | { kind: "idb"; name: string; build?: "jspi" | "asyncify"; targetVersion?: number }
  | { kind: "opfs"; name: string; targetVersion?: number };

/** A memory store can also hand out the image of its files. */
export interface MemoryStore extends SqliteLine {
  image(): MemoryImage;
}

type MemoryFile = { pathname: string; flags: number; size: number; data: ArrayBuffer };
type MemoryVfs = { name: string; mapNameToFile: Map<string, MemoryFile>; close(): void };

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
  const { MemoryVFS } = (await import("@journeyapps/wa-sqlite/src/examples/MemoryVFS.js")) as unknown as {
    MemoryVFS: { create(name: string, module: unknown): Promise<MemoryVfs> };
  };
  const vfsName = `mem${++counter}`;
  const vfs = await MemoryVFS.create(vfsName, module);
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
  const line = await finishOpen(
    sqlite3,
    db,
    "memory",
    name,
    options.targetVersion,
    () => vfs.close(),
    "PRAGMA journal_mode = PERSIST;",
    {
      ...(options.groupCommit === false ? { maxGroup: 1 } : {}),
      // The sync build with a sync VFS: statements can skip the async API (see direct.ts).
      ...(isSyncModule(module) ? { direct: new DirectStatements(module, db) } : {}),
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

/** Shared by every kind: pragmas, migrations, the line. */
export async function finishOpen(
  sqlite3: Api,
  db: number,
  kind: "memory" | "idb" | "opfs",
  name: string,
  targetVersion: number | undefined,
  onClose: () => Promise<void> | void,
  pragmas = "",
  lineOptions: { maxGroup?: number; direct?: DirectStatements } = {},
): Promise<SqliteLine> {
  const line = new SqliteLine({ kind, name, sqlite3, db, schemaVersion: 0, onClose, ...lineOptions });
  try {
    if (pragmas) await line.execScript(pragmas);
    const found = Number((await line.read((sql) => sql.get("PRAGMA user_version")))?.["user_version"] ?? 0);
    const target = targetVersion ?? migrations.length;
    if (found > migrations.length) {
      throw new StoreOpenError(
        `store ${name} has schema version ${found}, newer than this build's ${migrations.length}`,
        "migration",
        "Reload the page to get the newest version of the app.",
      );
    }
    if (found < target) {
      await line.execScript("BEGIN IMMEDIATE");
      try {
        for (let v = found; v < target; v++) await line.execScript(migrations[v]!);
        await line.execScript(`PRAGMA user_version = ${target}`);
        await line.execScript("COMMIT");
      } catch (error) {
        await line.execScript("ROLLBACK").catch(() => undefined);
        throw new StoreOpenError(
          `migrating store ${name} from schema ${found} failed: ${(error as Error).message}`,
          "migration",
          "Export your data from an older version of the app, or reset the store.",
        );
      }
    }
    line.schemaVersion = Math.max(found, target);
    return line;
  } catch (error) {
    await line.close().catch(() => undefined);
    if (error instanceof StoreOpenError) throw error;
    throw classifyOpenError(error, name);
  }
}

export function classifyOpenError(error: unknown, name: string): StoreOpenError {
  const message = error instanceof Error ? error.message : String(error);
  if (/quota|SQLITE_FULL|full/i.test(message)) {
    return new StoreOpenError(
      `store ${name}: out of storage (${message})`,
      "quota",
      "Free up disk space or delete old conversations, then reload.",
    );
  }
  if (/corrupt|not a database|malformed/i.test(message)) {
    return new StoreOpenError(
      `store ${name} is damaged (${message})`,
      "corrupt",
      "Export what can be read, then reset the store.",
    );
  }
  return new StoreOpenError(
    `store ${name} could not be opened (${message})`,
    "unknown",
    "Reload the page; if it keeps failing, reset the store.",
  );
}
