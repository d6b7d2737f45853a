/**
 * The tab's side channel as the engine reads it (worker/protocol/browser.ts, worker/browser/
 * script-worker-channel.ts, worker/browser/tab-locks.ts; issue 30 item 2): a hello names its tab and
 * protocol and may lend a spare store worker; the engine opens its first store on that spare only
 * while the spare still waits (PRELENT_MS), else asks the tab; and it watches a tab's lock only once
 * the tab's request shows, so a tab that said hello before its lock was granted is not dropped.
 */
import { expect, test } from "vitest";
import { tabOfferOver } from "../../../worker/browser/script-worker-channel.ts";
import { StoreLenders } from "../../../worker/browser/store-lenders.ts";
import { lockShows } from "../../../worker/browser/tab-locks.ts";
import {
  isScriptWorkerHello,
  PRELENT_MS,
  type ScriptWorkerRequest,
  SPARE_STORE_MS,
} from "../../../worker/protocol/browser.ts";

test("a side channel's hello names its tab and protocol; a lent spare is a positive worker id", () => {
  expect(isScriptWorkerHello({ scriptWorkers: "t1", protocol: 16 })).toBe(true);
  expect(isScriptWorkerHello({ scriptWorkers: "t1", protocol: 16, store: 1 })).toBe(true);
  // Refused: no protocol (a tab of a build before it), a protocol that is not a number, a bad id.
  expect(isScriptWorkerHello({ scriptWorkers: "t1" })).toBe(false);
  expect(isScriptWorkerHello({ scriptWorkers: "t1", protocol: "16" })).toBe(false);
  expect(isScriptWorkerHello({ scriptWorkers: 1, protocol: 16 })).toBe(false);
  for (const store of [0, -1, 1.5, "1", null, Number.NaN])
    expect(isScriptWorkerHello({ scriptWorkers: "t1", protocol: 16, store })).toBe(false);
  expect(PRELENT_MS).toBeLessThan(SPARE_STORE_MS);
});

/** The engine's end of a side channel, with the tab answering `store` requests by hand. */
function channel() {
  const requests: ScriptWorkerRequest[] = [];
  let onMessage: (event: MessageEvent) => void = () => undefined;
  const port = {
    postMessage: (m: ScriptWorkerRequest) => requests.push(m),
    addEventListener: (type: string, listener: (event: MessageEvent) => void) => {
      if (type === "message") onMessage = listener;
    },
    start: () => undefined,
  };
  const answer = (id: number, worker: number, ports: MessagePort[]) =>
    onMessage({ data: { id, ok: true, worker }, ports } as unknown as MessageEvent);
  return { port, requests, answer };
}

test("the first store asked for within PRELENT_MS is the spare the hello lent, with no request to the tab; the next is asked for", async () => {
  const c = channel();
  const spare = new MessageChannel();
  let clock = 1_000;
  const offer = tabOfferOver(c.port, { id: 1, port: spare.port1, at: 1_000 }, () => clock);
  clock += PRELENT_MS - 1;
  const first = await offer.startStore();
  expect(first).toEqual({ id: 1, port: spare.port1, spare: true });
  expect(c.requests).toEqual([]);
  // Only once: the next store (a handover) is the tab's to start.
  const next = offer.startStore();
  expect(c.requests).toEqual([{ id: 1, op: "store" }]);
  const fresh = new MessageChannel();
  c.answer(1, 2, [fresh.port1]);
  expect(await next).toEqual({ id: 2, port: fresh.port1 });
  for (const p of [spare.port1, spare.port2, fresh.port1, fresh.port2]) p.close();
});

test("a spare lent longer than PRELENT_MS ago is not used (it may have ended itself): the tab is asked", async () => {
  const c = channel();
  const spare = new MessageChannel();
  const offer = tabOfferOver(c.port, { id: 1, port: spare.port1, at: 1_000 }, () => 1_000 + PRELENT_MS);
  const asked = offer.startStore();
  expect(c.requests).toEqual([{ id: 1, op: "store" }]);
  const fresh = new MessageChannel();
  c.answer(1, 2, [fresh.port1]);
  expect(await asked).toEqual({ id: 2, port: fresh.port1 });
  // Without a spare at all, the first store is asked for too.
  const plain = channel();
  void tabOfferOver(plain.port).startStore();
  expect(plain.requests).toEqual([{ id: 1, op: "store" }]);
  for (const p of [spare.port1, spare.port2, fresh.port1, fresh.port2]) p.close();
});

test("the engine watches a tab's lock only once the tab's request shows (held or pending), or after the wait", async () => {
  const name = "tab:t1";
  let state: { held: { name: string }[]; pending: { name: string }[] } = { held: [], pending: [] };
  let queries = 0;
  const locks = {
    query: async () => {
      queries += 1;
      return state;
    },
  };
  let shown = false;
  const waiting = lockShows(locks, name, { ms: 10_000, everyMs: 1 }).then(() => {
    shown = true;
  });
  await new Promise((r) => setTimeout(r, 20));
  // Another tab's lock is not this tab's.
  state = { held: [{ name: "tab:other" }], pending: [] };
  await new Promise((r) => setTimeout(r, 20));
  expect(shown).toBe(false);
  expect(queries).toBeGreaterThan(2);
  state = { held: [{ name: "tab:other" }], pending: [{ name }] };
  await waiting;
  expect(shown).toBe(true);
  // Held counts too, at once.
  await lockShows({ query: async () => ({ held: [{ name }] }) }, name, { ms: 10_000 });
  // A tab whose request never shows is watched after the wait (and so dropped), never waited on forever.
  let clock = 0;
  await lockShows({ query: async () => ({}) }, name, {
    ms: 50,
    everyMs: 1,
    now: () => (clock += 10),
  });
  // A query that fails is read as "not shown", not as an error.
  clock = 0;
  await lockShows({ query: () => Promise.reject(new Error("no locks")) }, name, {
    ms: 50,
    everyMs: 1,
    now: () => (clock += 10),
  });
});

test("the engine's larger modules wait for a lender at hand: at once when a tab offers, else at most the wait", async () => {
  const lenders = new StoreLenders();
  let atHand = false;
  const waiting = lenders.lenderAtHand(10_000).then(() => {
    atHand = true;
  });
  await new Promise((r) => setTimeout(r, 20));
  expect(atHand).toBe(false);
  lenders.offer("t1", { startStore: () => new Promise(() => undefined), terminate: async () => undefined });
  await waiting;
  expect(atHand).toBe(true);
  // Already one at hand: at once. None ever: after the wait, never hung.
  await lenders.lenderAtHand(10_000);
  const started = Date.now();
  await new StoreLenders().lenderAtHand(30);
  expect(Date.now() - started).toBeGreaterThanOrEqual(25);
});
