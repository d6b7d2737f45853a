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

/** The first message of a script-worker side channel: the tab that offers its workers. */
export interface ScriptWorkerHello {
  readonly scriptWorkers: string;
}

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
  return typeof m === "object" && m !== null && "scriptWorkers" in m && typeof m.scriptWorkers === "string";
}
