/**
 * The network as the platform sees it: a typed input the agent reads when a model request failed for
 * want of a network. A browser host gives one built on `navigator.onLine`, the worker's online event
 * and a probe (browser/network.ts); Node tests drive one by hand (`networkSwitch` in the test kit); the
 * default is always online, so without a platform a network failure gets the timed retry alone.
 * Invariants: `check` never throws; `whenOnline` resolves once the platform has a reason to think the
 * network is back (it may be wrong: the next request is the last word) and rejects only when its
 * signal aborts. Neither is durable: what waits for the network keeps that in its own checkpoint.
 */

export interface NetworkState {
  /** Whether the network is reachable now (it may probe). Asked after a request failed on the network. */
  check(signal: AbortSignal): Promise<boolean>;
  /**
   * Resolves when the network may be back: at once if it is, else on an online event or a probe that
   * got through. `onNextCheck`, when given, is told the time (ms since the epoch) of each next look
   * the platform schedules, so a person can be told when it will next look.
   */
  whenOnline(signal: AbortSignal, onNextCheck?: (at: number) => void): Promise<void>;
}

/** The network of a platform that knows none: always reachable. */
export const ALWAYS_ONLINE: NetworkState = {
  check: async () => true,
  whenOnline: async (signal) => {
    if (signal.aborted) throw signal.reason;
  },
};
