/**
 * The engine's end of a tab's script-worker side channel (worker/protocol/browser.ts): turns the
 * connection on which a tab said `{ scriptWorkers: tabId }` into the `TabOffer` that
 * tab-script-workers.ts calls. Browser-only, and apart from the tab protocol: its replies carry
 * MessagePorts. Invariants: each request gets at most one answer (a reply, or a rejection when the
 * connection closes); an answer to no pending request is ignored.
 */

import { PRELENT_MS, type ScriptWorkerReply, type ScriptWorkerRequest } from "../protocol/browser.ts";
import type { StoreLenderOffer } from "./store-lenders.ts";
import type { TabOffer, TabWorkerPort } from "./tab-script-workers.ts";

/** The port side of a tab's channel (a MessagePort). */
export interface SideChannelPort {
  postMessage(message: ScriptWorkerRequest): void;
  addEventListener(type: "message", listener: (event: MessageEvent) => void): void;
  addEventListener(type: "close", listener: () => void): void;
  start(): void;
}

function isReply(m: unknown): m is ScriptWorkerReply {
  return typeof m === "object" && m !== null && "id" in m && typeof m.id === "number" && "ok" in m;
}

/** A spare store worker the tab lent with its hello: its id, its port, and when the hello arrived. */
export interface PrelentStore {
  readonly id: number;
  readonly port: MessagePort;
  readonly at: number;
}

/**
 * The offer of the tab on `port`. `prelent`: a spare store worker its hello lent; the first store asked
 * for within PRELENT_MS of its arrival is that one, with no round trip through the tab (a later one
 * would find it gone: it ends itself unused, worker/entry/lent-store.ts).
 */
export function tabOfferOver(
  port: SideChannelPort,
  prelent?: PrelentStore,
  now: () => number = Date.now,
): TabOffer & StoreLenderOffer {
  let next = 0;
  let spare = prelent;
  const pending = new Map<
    number,
    { resolve(reply: ScriptWorkerReply, ports: readonly MessagePort[]): void; reject(e: Error): void }
  >();
  port.addEventListener("message", (event) => {
    if (!isReply(event.data)) return;
    const waiting = pending.get(event.data.id);
    pending.delete(event.data.id);
    waiting?.resolve(event.data, event.ports);
  });
  port.addEventListener("close", () => {
    for (const waiting of pending.values()) waiting.reject(new Error("the tab's side channel closed"));
    pending.clear();
  });
  port.start();
  const send = (build: (id: number) => ScriptWorkerRequest) =>
    new Promise<{ reply: ScriptWorkerReply; ports: readonly MessagePort[] }>((resolve, reject) => {
      const id = ++next;
      pending.set(id, { resolve: (reply, ports) => resolve({ reply, ports }), reject });
      port.postMessage(build(id));
    });
  const ok = async (build: (id: number) => ScriptWorkerRequest) => {
    const answered = await send(build);
    if (!answered.reply.ok) throw new Error(answered.reply.message);
    return answered;
  };
  return {
    async start() {
      const { reply, ports } = await ok((id) => ({ id, op: "start" }));
      const workerPort: TabWorkerPort | undefined = ports[0];
      if (!workerPort || !reply.ok || reply.worker === undefined) throw new Error("the tab sent no worker");
      return { id: reply.worker, port: workerPort };
    },
    async startStore() {
      const taken = spare;
      spare = undefined;
      if (taken && now() - taken.at < PRELENT_MS) return { id: taken.id, port: taken.port, spare: true };
      const { reply, ports } = await ok((id) => ({ id, op: "store" }));
      const storePort = ports[0];
      if (!storePort || !reply.ok || reply.worker === undefined)
        throw new Error("the tab sent no store worker");
      return { id: reply.worker, port: storePort };
    },
    async terminate(worker) {
      await ok((id) => ({ id, op: "terminate", worker }));
    },
    async ping() {
      await ok((id) => ({ id, op: "ping" }));
      return true;
    },
  };
}
