/**
 * The part of opening a store every kind shares, once its VFS and connection exist: the kind's
 * pragmas, the numbered migrations in one transaction (`PRAGMA user_version`), and the commit line.
 * A failure closes the connection and throws a classified StoreOpenError. Its own module so that
 * open.ts (which loads browser.ts lazily) and browser.ts both use it without importing each other.
 */
import type { DirectStatements } from "./direct.ts";
import { classifyStoreError } from "./errors.ts";
import { SqliteLine } from "./line.ts";
import { migrations } from "./schema.ts";
import { StoreOpenError } from "./types.ts";

/** Shared by every kind: pragmas, migrations, the line. */
export async function finishOpen(
  sqlite3: SQLiteAPI,
  db: number,
  kind: "memory" | "idb" | "opfs",
  name: string,
  targetVersion: number | undefined,
  onClose: () => Promise<void> | void,
  pragmas = "",
  lineOptions: { direct?: DirectStatements } = {},
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
    throw await classifyStoreError(error, { store: name, stage: "open" });
  }
}
