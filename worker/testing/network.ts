/**
 * A network a test switches by hand (`networkSwitch()`): the agent's `NetworkState` input, as a
 * browser host would give it, without a browser. `set(false)` is the platform saying "offline";
 * `set(true)` wakes every `whenOnline` at once, like the worker's online event. It counts the
 * questions it was asked, so a test can see that the engine asked (and how often it woke).
 */
import type { NetworkState } from "../agent/network.ts";

export interface NetworkSwitch extends NetworkState {
  /** Whether the network is up now. */
  readonly online: boolean;
  /** How many times `check` was asked, and how many `whenOnline` waits are pending. */
  readonly checks: number;
  readonly waiting: number;
  set(online: boolean): void;
}

export function networkSwitch(initial: { online: boolean } = { online: true }): NetworkSwitch {
  let online = initial.online;
  let checks = 0;
  const waiters = new Set<() => void>();
  return {
    get online() {
      return online;
    },
    get checks() {
      return checks;
    },
    get waiting() {
      return waiters.size;
    },
    set(next) {
      online = next;
      if (!online) return;
      const woken = [...waiters];
      waiters.clear();
      for (const wake of woken) wake();
    },
    async check() {
      checks++;
      return online;
    },
    whenOnline(signal) {
      return new Promise<void>((resolve, reject) => {
        if (signal.aborted) return reject(signal.reason);
        if (online) return resolve();
        const wake = () => {
          signal.removeEventListener("abort", onAbort);
          resolve();
        };
        const onAbort = () => {
          waiters.delete(wake);
          reject(signal.reason);
        };
        waiters.add(wake);
        signal.addEventListener("abort", onAbort, { once: true });
      });
    },
  };
}
