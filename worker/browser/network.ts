/**
 * The engine's network state in a browser worker (the agent's `NetworkState`, agent/network.ts): the
 * worker's `navigator.onLine` and `online` event, and a probe, a HEAD request for an uncached URL of
 * the app's own server (a query string keeps it out of the service worker's precache). The probe is
 * what decides: `onLine` says only that an interface is up (true with the server gone or a dead LAN),
 * and a wrong `false`, or an `online` event that never comes (a worker under emulated offline gets
 * none, verified in Chromium), must not wedge a run that waits. So `check` probes whenever `onLine`
 * is true, and `whenOnline` probes at once and then every `probeEveryMs`, and ends early on `online`;
 * it says when each next probe is due (`onNextCheck`), for the wait shown to a person.
 */
import type { NetworkState } from "../agent/network.ts";

export interface BrowserNetworkOptions {
  /** A URL of the app's server (any answer, a 404 included, means the network reaches it). */
  readonly probeUrl: string;
  /** How often a wait for the network probes (default 10 s). */
  readonly probeEveryMs?: number;
  /** How long one probe may take (default 5 s). */
  readonly probeTimeoutMs?: number;
}

export function browserNetwork(options: BrowserNetworkOptions): NetworkState {
  const every = options.probeEveryMs ?? 10_000;
  const timeout = options.probeTimeoutMs ?? 5_000;

  async function probe(signal: AbortSignal): Promise<boolean> {
    const url = new URL(options.probeUrl);
    url.searchParams.set("network-probe", Date.now().toString(36));
    try {
      const response = await fetch(url, {
        method: "HEAD",
        cache: "no-store",
        signal: AbortSignal.any([signal, AbortSignal.timeout(timeout)]),
      });
      return response.type !== "error";
    } catch {
      return false;
    }
  }

  return {
    async check(signal) {
      return navigator.onLine && (await probe(signal));
    },
    whenOnline(signal, onNextCheck) {
      return new Promise<void>((resolve, reject) => {
        if (signal.aborted) return reject(signal.reason);
        let timer: ReturnType<typeof setTimeout> | undefined;
        let done = false;
        const finish = (online: boolean) => {
          if (done) return;
          done = true;
          clearTimeout(timer);
          removeEventListener("online", onOnline);
          signal.removeEventListener("abort", onAbort);
          if (online) resolve();
          else reject(signal.reason);
        };
        const onOnline = () => finish(true);
        const onAbort = () => finish(false);
        const tick = async () => {
          if (await probe(signal)) return finish(true);
          if (done) return;
          timer = setTimeout(tick, every);
          onNextCheck?.(Date.now() + every);
        };
        addEventListener("online", onOnline);
        signal.addEventListener("abort", onAbort, { once: true });
        void tick();
      });
    },
  };
}
