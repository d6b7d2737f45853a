/**
 * When the engine may start watching a tab's Web Lock (`tab:<id>`, worker/protocol/browser.ts): a
 * watch is a request for the same lock, granted only once the tab released it (the tab is gone). A
 * tab's first script says hello on its side channel right after asking for its lock
 * (src/lib/engine-start.ts), so the engine may hear of the tab before the lock manager has its
 * request; a watch asked for then would be granted at once and drop a live tab. Web Locks grant in
 * request order, so a watch asked for once the tab's request shows (held or pending) waits its turn.
 * Invariant: `lockShows` never rejects; after `ms` it resolves anyway (a tab that never asked for
 * its lock is then dropped at once, as one that went away).
 */

/** How long the engine waits for a tab's lock request to show before it watches the lock anyway. */
export const TAB_LOCK_SHOW_MS = 5000;

/** The part of `navigator.locks` this needs (a fake in tests). */
export interface LockQuery {
  query(): Promise<{ held?: ReadonlyArray<{ name?: string }>; pending?: ReadonlyArray<{ name?: string }> }>;
}

/** Resolves once lock `name` is held or asked for, or after `ms` (checking every `everyMs`). */
export async function lockShows(
  locks: LockQuery,
  name: string,
  options: { ms?: number; everyMs?: number; now?: () => number } = {},
): Promise<void> {
  const { ms = TAB_LOCK_SHOW_MS, everyMs = 20, now = Date.now } = options;
  const until = now() + ms;
  for (;;) {
    const shown = await locks.query().then(
      ({ held = [], pending = [] }) => [...held, ...pending].some((l) => l.name === name),
      () => false,
    );
    if (shown || now() >= until) return;
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}
