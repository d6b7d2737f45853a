/**
 * The real network state. `navigator.onLine` only says whether an interface is up: with the server
 * gone (or a dead LAN) it still says "online". So while the browser claims to be online, the tab asks
 * the server for a tiny uncached resource now and then; the service worker does not answer it (only
 * precached URLs are served offline, and a query string keeps this one out of the precache).
 */
export class NetworkState {
  online = $state.raw(typeof navigator === "undefined" ? true : navigator.onLine);
  #timer: ReturnType<typeof setInterval> | undefined;
  #probing = false;

  constructor(
    private readonly probeUrl: string,
    private readonly everyMs = 15_000,
  ) {}

  start(): () => void {
    const onOnline = () => void this.probe();
    const onOffline = () => (this.online = false);
    addEventListener("online", onOnline);
    addEventListener("offline", onOffline);
    this.#timer = setInterval(() => void this.probe(), this.everyMs);
    void this.probe();
    return () => {
      removeEventListener("online", onOnline);
      removeEventListener("offline", onOffline);
      clearInterval(this.#timer);
    };
  }

  /** Ask the server once; a failure or a timeout means offline. */
  async probe(): Promise<boolean> {
    if (!navigator.onLine) return (this.online = false);
    if (this.#probing) return this.online;
    this.#probing = true;
    try {
      const url = new URL(this.probeUrl, location.href);
      url.searchParams.set("network-probe", Date.now().toString(36));
      const response = await fetch(url, {
        method: "HEAD",
        cache: "no-store",
        signal: AbortSignal.timeout(5000),
      });
      // Any answer from the server (even a 404) means the network reaches it.
      this.online = response.type !== "error";
    } catch {
      this.online = false;
    } finally {
      this.#probing = false;
    }
    return this.online;
  }
}

/** Whether a new version of the app was installed by the service worker while this page ran. */
export class UpdateState {
  ready = $state.raw(false);

  start(): void {
    const sw = typeof navigator === "undefined" ? undefined : navigator.serviceWorker;
    if (!sw) return;
    // The first controller of a fresh install is not an update; a change of controller afterwards is.
    let hadController = sw.controller !== null;
    sw.addEventListener("controllerchange", () => {
      if (hadController) this.ready = true;
      hadController = true;
    });
  }
}
