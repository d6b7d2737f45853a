/**
 * A network a test switches by hand (`networkSwitch()`): the agent's `NetworkState` input, as a
 * browser host would give it, without a browser. `set(false)` is the platform saying "offline";
 * `set(true)` wakes every `whenOnline` at once, like the worker's online event. It counts the
 * questions it was asked, so a test can see that the engine asked (and how often it woke);
 * `announce(at)` plays the platform scheduling its next look.
 */
import type { NetworkState } from "../agent/network.ts";

export interface NetworkSwitch extends NetworkState {
  /** Whether the network is up now. */
  readonly online: boolean;
  /** How many times `check` was asked, and how many `whenOnline` waits are pending. */
  readonly checks: number;
  readonly waiting: number;
  set(online: boolean): void;
  /** Say to every pending `whenOnline` that the platform next looks at `at`. */
  announce(at: number): void;
}

export function networkSwitch(initial: { online: boolean } = { online: true }): NetworkSwitch {
  let online = initial.online;
  let checks = 0;
  const waiters = new Set<() => void>();
  const listeners = new Map<() => void, (at: number) => void>();
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
    announce(at) {
      for (const tell of listeners.values()) tell(at);
    },
    async check() {
      checks++;
      return online;
    },
    whenOnline(signal, onNextCheck) {
      return new Promise<void>((resolve, reject) => {
        if (signal.aborted) return reject(signal.reason);
        if (online) return resolve();
        const wake = () => {
          listeners.delete(wake);
          signal.removeEventListener("abort", onAbort);
          resolve();
        };
        const onAbort = () => {
          waiters.delete(wake);
          listeners.delete(wake);
          reject(signal.reason);
        };
        waiters.add(wake);
        if (onNextCheck) listeners.set(wake, onNextCheck);
        signal.addEventListener("abort", onAbort, { once: true });
      });
    },
  };
}
