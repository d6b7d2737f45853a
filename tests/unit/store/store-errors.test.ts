/**
 * Store failure classification (worker/store/errors.ts): one function names the reason, says what
 * happened and what to do, for a store that cannot be opened and for a running store whose COMMIT
 * failed. The engine host shows exactly these to the user.
 */
import { describe, expect, test } from "vitest";
import { Harness, StoreFailed, StoreOpenError } from "../../../worker/index.ts";
import { classifyStoreError } from "../../../worker/store/errors.ts";
import { memoryStore } from "../../../worker/testing.ts";

const notFull = async () => false;
const full = async () => true;

describe("classifyStoreError", () => {
  test("a quota error names the store and says storage is full, at open and at run", async () => {
    const quota = Object.assign(new Error("the write was refused"), { name: "QuotaExceededError" });
    const open = await classifyStoreError(quota, { store: "s", stage: "open", storageFull: notFull });
    expect(open).toBeInstanceOf(StoreOpenError);
    expect(open.reason).toBe("quota");
    expect(open.message).toBe(
      "store s cannot be written: this site's storage is full (the write was refused)",
    );
    expect(open.advice).toMatch(/^Free up space .*everything committed so far is kept\.$/);
    const run = await classifyStoreError(new Error("SQLITE_FULL: database or disk is full"), {
      store: "s",
      stage: "run",
      storageFull: notFull,
    });
    expect(run.reason).toBe("quota");
    expect(run.message).toBe(
      "the engine stopped: this site's storage is full (SQLITE_FULL: database or disk is full)",
    );
    expect(run.advice).toBe(open.advice);
  });

  test("a failed COMMIT is classified by its cause (StoreFailed wraps the SQLite error)", async () => {
    const failed = new StoreFailed("transaction failed: disk I/O error");
    (failed as { cause?: unknown }).cause = new Error("SQLITE_FULL");
    const run = await classifyStoreError(failed, { store: "s", stage: "run", storageFull: notFull });
    expect(run.reason).toBe("quota");
    expect(run.message).toMatch(/^the engine stopped: this site's storage is full \(transaction failed/);
  });

  test("an error that says nothing is quota when the storage probe finds the site full, else unknown", async () => {
    const aborted = new Error("transaction aborted");
    const probed = await classifyStoreError(aborted, { store: "s", stage: "open", storageFull: full });
    expect(probed.reason).toBe("quota");
    const open = await classifyStoreError(aborted, { store: "s", stage: "open", storageFull: notFull });
    expect(open).toMatchObject({
      reason: "unknown",
      message: "store s could not be opened (transaction aborted)",
      advice: "Reload the page; if it keeps failing, reset the store.",
    });
    const run = await classifyStoreError(aborted, { store: "s", stage: "run", storageFull: notFull });
    expect(run).toMatchObject({
      reason: "unknown",
      message: "the engine stopped: transaction aborted",
      advice: "Reload the page: the engine reopens the store and resumes from its last commit.",
    });
  });

  test("corrupt and locked stores get their own reason and advice", async () => {
    const corrupt = await classifyStoreError(new Error("file is not a database"), {
      store: "s",
      stage: "open",
      storageFull: notFull,
    });
    expect(corrupt).toMatchObject({
      reason: "corrupt",
      message: "store s is damaged (file is not a database)",
    });
    expect(corrupt.advice).toMatch(/reset the store/);
    const busy = await classifyStoreError(new Error("database is locked"), {
      store: "s",
      stage: "open",
      storageFull: full,
    });
    expect(busy).toMatchObject({
      reason: "locked",
      advice: "Close other tabs or windows of the app, then reload.",
    });
    const fenced = await classifyStoreError(
      new StoreFailed("another engine has taken over this store; this one stops writing"),
      { store: "s", stage: "run", storageFull: notFull },
    );
    expect(fenced.reason).toBe("locked");
    expect(fenced.advice).toMatch(/Another tab of the app took over the store/);
  });

  test("a StoreOpenError passes through unchanged (classified where it was thrown)", async () => {
    const migration = new StoreOpenError("newer schema", "migration", "Reload the page.");
    expect(await classifyStoreError(migration, { store: "s", stage: "open", storageFull: full })).toBe(
      migration,
    );
  });

  test("the engine's fatal error from a COMMIT that failed for want of space classifies as quota", async () => {
    const store = await memoryStore();
    const fatal: Error[] = [];
    const h = await Harness.open(store, { onFatal: (e) => fatal.push(e) });
    store.setFaultHook((point) => {
      if (point === "before-commit") throw new Error("SQLITE_FULL: database or disk is full");
    });
    await expect(h.transaction(() => undefined)).rejects.toThrow(/disk is full/);
    store.setFaultHook(undefined);
    expect(fatal).toHaveLength(1);
    const failure = await classifyStoreError(fatal[0], {
      store: store.name,
      stage: "run",
      storageFull: notFull,
    });
    expect(failure.reason).toBe("quota");
    await h.close();
  });
});

describe("a store damaged on disk, opened for real", () => {
  /** A committed store's files, its first page's SQLite header overwritten (or a later page zeroed). */
  async function damagedImage(damage: (db: Uint8Array) => void) {
    const store = await memoryStore();
    await Harness.open(store, {}).then((h) => h.close());
    const image = store.image().map(({ path, bytes }) => ({ path, bytes: bytes.slice() }));
    const db = image.find((f) => f.path.endsWith(".db"));
    if (!db) throw new Error("the image has no database file");
    damage(db.bytes);
    return image;
  }

  test("a first page whose header is garbage is `corrupt` at open, in words, with the advice to export", async () => {
    const image = await damagedImage((db) => db.set(new TextEncoder().encode("not a database!!"), 0));
    const opened = await memoryStore(image).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(opened).toBeInstanceOf(StoreOpenError);
    const error = opened as StoreOpenError;
    expect(error.reason).toBe("corrupt");
    expect(error.message).toMatch(/^store memory is damaged \(.*not a database.*\)$/);
    expect(error.advice).toBe("Export what can be read, then reset the store.");
  });
});
