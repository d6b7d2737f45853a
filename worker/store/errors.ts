/**
 * What a user is told when a store fails: one classification for a store that cannot be opened
 * (store/open.ts, store/browser.ts) and for a running store whose COMMIT failed (the engine host).
 * Every failure gets a reason (quota, corrupt, locked, unsupported, migration, unknown), a message
 * that says what happened and advice that says what to do. The patterns and the advice live here
 * only. Runs in Node and in browsers; the storage probe answers "not full" where IndexedDB is missing.
 */
import { StoreOpenError } from "./types.ts";

/** Where the store failed: while opening, or while running (a COMMIT that did not go through). */
export type StoreStage = "open" | "run";

export interface StoreErrorContext {
  /** The store's name (open messages name it). */
  readonly store: string;
  readonly stage: StoreStage;
  /**
   * Asked when nothing in the error says why (the idb VFS reports a failed IndexedDB write as
   * "transaction aborted", losing its cause): is this site's storage full? Defaults to
   * `storageIsFull`, a small IndexedDB write.
   */
  readonly storageFull?: () => Promise<boolean>;
}

const QUOTA = /quota|SQLITE_FULL|full/i;
const CORRUPT = /corrupt|not a database|malformed/i;
/** Another engine holds the database (open), or fenced this one off (run: the owner epoch moved). */
const LOCKED = /database is locked|SQLITE_BUSY|NoModificationAllowedError|taken over/i;
const REFUSED = /SecurityError|not allowed|denied/i;

type Reason = "quota" | "corrupt" | "locked" | "unsupported" | "unknown";

/**
 * What each reason says. Open: "store <name> <open> (<error>)"; run: "the engine stopped: <run>
 * (<error>)", or just the error when `run` is empty.
 */
const SAYS: Record<Reason, { open: string; run: string }> = {
  quota: { open: "cannot be written: this site's storage is full", run: "this site's storage is full" },
  corrupt: { open: "is damaged", run: "the store is damaged" },
  locked: { open: "is in use by another engine", run: "another engine took over the store" },
  unsupported: { open: "cannot be used: storage access was refused", run: "storage access was refused" },
  unknown: { open: "could not be opened", run: "" },
};

const ADVICE: Record<Reason, { open: string; run: string }> = {
  quota: both(
    "Free up space (delete old conversations, or other sites' data in the browser's settings), then reload: everything committed so far is kept.",
  ),
  corrupt: both("Export what can be read, then reset the store."),
  locked: {
    open: "Close other tabs or windows of the app, then reload.",
    run: "Another tab of the app took over the store: use that tab, or reload this one.",
  },
  unsupported: both(
    "Storage may be blocked for this site (private browsing or site settings); allow it and reload.",
  ),
  unknown: {
    open: "Reload the page; if it keeps failing, reset the store.",
    run: "Reload the page: the engine reopens the store and resumes from its last commit.",
  },
};

function both(advice: string): { open: string; run: string } {
  return { open: advice, run: advice };
}

/** An error's message, or the thrown value as text. Every layer above uses this one (core re-exports it). */
export function errorMessage(error: unknown): string {
  try {
    return error instanceof Error ? error.message : String(error);
  } catch {
    // A value with no text of its own (no prototype, a toString that throws): its tag, never a throw.
    return Object.prototype.toString.call(error);
  }
}

/** The name and message of an error and of its causes (a StoreFailed wraps the SQLite error). */
function describe(error: unknown): { message: string; text: string } {
  const message = errorMessage(error);
  const parts: string[] = [];
  let current: unknown = error;
  for (let depth = 0; current !== undefined && current !== null && depth < 3; depth++) {
    parts.push(current instanceof Error ? `${current.name} ${current.message}` : String(current));
    current = current instanceof Error ? (current as { cause?: unknown }).cause : undefined;
  }
  return { message, text: parts.join(" ") };
}

function reasonOf(text: string): Reason | undefined {
  if (LOCKED.test(text)) return "locked";
  if (REFUSED.test(text)) return "unsupported";
  if (QUOTA.test(text)) return "quota";
  if (CORRUPT.test(text)) return "corrupt";
  return undefined;
}

/**
 * Classify anything a store threw. A StoreOpenError passes through unchanged (it was classified where
 * it was thrown); anything else is matched against the known patterns, and an error that says
 * nothing is checked against the storage probe before it is called unknown.
 */
export async function classifyStoreError(
  error: unknown,
  context: StoreErrorContext,
): Promise<StoreOpenError> {
  if (error instanceof StoreOpenError) return error;
  const { message, text } = describe(error);
  const { store, stage } = context;
  const reason = reasonOf(text) ?? ((await (context.storageFull ?? storageIsFull)()) ? "quota" : "unknown");
  const says = SAYS[reason][stage];
  return new StoreOpenError(
    stage === "open"
      ? `store ${store} ${says} (${message})`
      : `the engine stopped: ${says ? `${says} (${message})` : message}`,
    reason,
    ADVICE[reason][stage],
  );
}

/** True when a small IndexedDB write fails with QuotaExceededError (works in every worker kind). */
export async function storageIsFull(): Promise<boolean> {
  if (typeof indexedDB === "undefined") return false;
  const name = "engine-quota-probe";
  try {
    const db = await new Promise<IDBDatabase>((resolve, reject) => {
      const request = indexedDB.open(name, 1);
      request.onupgradeneeded = () => request.result.createObjectStore("probe");
      request.onsuccess = () => resolve(request.result);
      request.onerror = () => reject(request.error);
    });
    try {
      const tx = db.transaction("probe", "readwrite");
      tx.objectStore("probe").put(new Uint8Array(64 * 1024), 1);
      await new Promise<void>((resolve, reject) => {
        tx.oncomplete = () => resolve();
        tx.onabort = () => reject(tx.error);
        tx.onerror = () => reject(tx.error);
      });
      return false;
    } finally {
      db.close();
      indexedDB.deleteDatabase(name);
    }
  } catch (error) {
    return error instanceof DOMException && error.name === "QuotaExceededError";
  }
}
