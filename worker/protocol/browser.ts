/**
 * What a browser tab and its engine share beyond the transport-neutral protocol. Browser-only by
 * nature (a server engine has neither Web Locks shared with a tab nor a tab's workers):
 * - the Web Lock names: the tab holds `tab:<id>` for its whole life, and the engine, granted that
 *   lock, knows the tab is gone (a SharedWorker cannot see a tab go away);
 * - the script-worker side channel: a SharedWorker cannot start workers in Chromium, so a tab lends
 *   it some. The tab opens a second connection to the SharedWorker, says `{ scriptWorkers: tabId }`
 *   on it, and then answers the engine's requests (start a worker and hand back a MessagePort to it,
 *   terminate one, ping). These messages carry MessagePorts, so they can never travel the protocol's
 *   wire (wire.ts), and they never share its port.
 */

export const tabLockName = (tabId: string) => `tab:${tabId}`;
/**
 * Held by the tab that runs the dedicated-worker engine (no SharedWorker) for the tab's whole life:
 * one such tab per store; the others wait on it and start their engine when it is released.
 */
export const hostTabLockName = (store: string) => `host-tab:${store}`;

/**
 * The first message of a script-worker side channel: the tab that offers its workers, and the protocol
 * it speaks (the engine takes no workers from a tab of another version). A tab may offer before its
 * protocol hello (its first script does: src/lib/engine-start.ts), but only once its lock is held.
 */
export interface ScriptWorkerHello {
  readonly scriptWorkers: string;
  readonly protocol: number;
  /**
   * A spare store worker lent with the hello (its port is the message's `ports[0]`), under this worker
   * id: the engine may open its first lent store there, within PRELENT_MS of the hello's arrival.
   */
  readonly store?: number;
}

/** How long a spare store worker waits for the engine's first message before it ends itself. */
export const SPARE_STORE_MS = 10_000;
/** How long after a hello the engine may still use the spare it lent (well within SPARE_STORE_MS). */
export const PRELENT_MS = 5_000;

/**
 * The engine asks the lending tab: start a worker, stop worker `worker`, or answer a ping; `store`
 * starts a lent store worker instead (worker/entry/lent-store.ts: the `opfs-lent` store kind, whose
 * engine cannot open OPFS sync access handles itself), handed over the same way.
 */
export type ScriptWorkerRequest =
  | { readonly id: number; readonly op: "start" }
  | { readonly id: number; readonly op: "store" }
  | { readonly id: number; readonly op: "terminate"; readonly worker: number }
  | { readonly id: number; readonly op: "ping" };

/**
 * The tab's answer: for `start`, the worker's id (the MessagePort to it travels in the message's
 * transfer list, `event.ports[0]`); `ok: false` with what went wrong.
 */
export type ScriptWorkerReply =
  | { readonly id: number; readonly ok: true; readonly worker?: number }
  | { readonly id: number; readonly ok: false; readonly message: string };

export function isScriptWorkerHello(m: unknown): m is ScriptWorkerHello {
  return (
    typeof m === "object" &&
    m !== null &&
    "scriptWorkers" in m &&
    typeof m.scriptWorkers === "string" &&
    "protocol" in m &&
    typeof m.protocol === "number" &&
    (!("store" in m) || m.store === undefined || (Number.isSafeInteger(m.store) && (m.store as number) > 0))
  );
}
