/**
 * A call the engine takes at most once by its requestId (a submit, a retry, a rerun), carried across
 * a connection that drops while it is in flight. When a server's socket (or the engine's port) closes
 * between the call and its answer, the call fails with `Disconnected` and the tab cannot know whether
 * the engine took it; the transport never repeats a call on its own (worker/protocol/socket.ts), so
 * the caller, who knows the call is safe to repeat, does: the same call with the same requestId, once
 * the connection is back (a call made while disconnected waits for it, within its bound). The engine
 * answers a repeat with what the first made (the inbox dedupes submissions by requestId, a rerun
 * finds the call it made), so a person's message is sent once even when the network blinked.
 *
 * Invariants: one requestId for every attempt; only a `Disconnected` failure repeats, at most
 * `attempts` calls in all, each after `pauseMs` (a dead engine's port refuses at once; a short pause
 * lets the tab's reconnect run); any other failure, and the last `Disconnected`, reach the caller as
 * they came.
 */

export interface AcrossDropsOptions {
  /** The calls in all, the first included (default 4). */
  readonly attempts?: number;
  /** The pause before a repeat, ms (default 250). */
  readonly pauseMs?: number;
  /** The requestId (default: a new random one). */
  readonly requestId?: string;
}

/** Whether `e` says the connection dropped (the protocol's `Disconnected` error, by name). */
export const isDisconnected = (e: unknown): boolean =>
  typeof e === "object" && e !== null && (e as { name?: unknown }).name === "Disconnected";

/** Make `call(requestId)`, and make it again with the same requestId while it fails `Disconnected`. */
export async function acrossDrops<T>(
  call: (requestId: string) => Promise<T>,
  options: AcrossDropsOptions = {},
): Promise<T> {
  const requestId = options.requestId ?? crypto.randomUUID();
  const attempts = Math.max(1, options.attempts ?? 4);
  const pauseMs = options.pauseMs ?? 250;
  for (let attempt = 1; ; attempt++) {
    try {
      return await call(requestId);
    } catch (e) {
      if (!isDisconnected(e) || attempt >= attempts) throw e;
    }
    await new Promise((resolve) => setTimeout(resolve, pauseMs));
  }
}
