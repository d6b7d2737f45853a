/**
 * The part of opening a store every kind shares, once its VFS and connection exist: the kind's
 * pragmas, the schema version found (`PRAGMA user_version`, the connection's first read, which takes
 * the file lock for good: docs/ARCHITECTURE.md, "The owner epoch"), and the commit line. The
 * migrations are not the store's: the layer above hands them to `SqliteLine.migrate`. A failure
 * closes the connection and throws a classified StoreOpenError. Its own module so that open.ts
 * (which loads browser.ts lazily) and browser.ts both use it without importing each other.
 */
import type { DirectStatements } from "./direct.ts";
import { classifyStoreError } from "./errors.ts";
import { SqliteLine } from "./line.ts";
import { StoreOpenError } from "./types.ts";

/** Shared by every kind: pragmas, the version check, the line. */
export async function finishOpen(
  sqlite3: SQLiteAPI,
  db: number,
  kind: "memory" | "idb" | "opfs",
  name: string,
  onClose: () => Promise<void> | void,
  pragmas = "",
  lineOptions: { direct?: DirectStatements; idleCheckpoint?: { afterMs: number } } = {},
): Promise<SqliteLine> {
  const line = new SqliteLine({ kind, name, sqlite3, db, schemaVersion: 0, onClose, ...lineOptions });
  try {
    if (pragmas) await line.execScript(pragmas);
    line.schemaVersion = Number(
      (await line.read((sql) => sql.get("PRAGMA user_version")))?.["user_version"] ?? 0,
    );
    return line;
  } catch (error) {
    await line.close().catch(() => undefined);
    if (error instanceof StoreOpenError) throw error;
    throw await classifyStoreError(error, { store: name, stage: "open" });
  }
}
