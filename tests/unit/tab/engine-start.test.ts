/**
 * The engine's worker started before the app loads (src/lib/engine-start.ts, src/start.ts; issue 30
 * item 2): the engine client takes the worker the first script started, once and only for the same
 * configuration; the dedicated-worker fallback starts nothing early; and the first script stays small
 * (it imports the protocol's constants and nothing else, so it runs as soon as it arrives).
 */
import { readFileSync } from "node:fs";
import { afterEach, beforeEach, expect, test, vi } from "vitest";
import { PROTOCOL_VERSION } from "../../../worker/protocol/api.ts";
import { staticImports } from "../../bench/initial-js.ts";

/** What the tab's first script did, in order: lock requests, side channel hellos, workers started. */
let events: string[] = [];

class FakePort extends EventTarget {
  sent: Array<{ message: unknown; transfer: unknown[] }> = [];
  postMessage(message: unknown, transfer: unknown[] = []) {
    this.sent.push({ message, transfer });
    events.push(`post ${JSON.stringify(message)}`);
  }
  start() {}
}

class FakeSharedWorker extends EventTarget {
  static made: FakeSharedWorker[] = [];
  readonly port = new FakePort();
  constructor(
    readonly url: URL,
    readonly options: { type: string; name: string },
  ) {
    super();
    FakeSharedWorker.made.push(this);
  }
}

class FakeWorker extends EventTarget {
  static made: FakeWorker[] = [];
  sent: unknown[] = [];
  constructor(
    readonly url: URL,
    readonly options: { type: string; name: string },
  ) {
    super();
    FakeWorker.made.push(this);
    events.push(`worker ${options.name}`);
  }
  postMessage(message: unknown) {
    this.sent.push(message);
  }
  terminate() {}
}

/** Lock requests are granted only when the test says (the tab's thread may be busy meanwhile). */
const grants: Array<() => void> = [];
const fakeLocks = {
  request: (name: string, callback: () => Promise<never>) => {
    events.push(`lock ${name}`);
    grants.push(() => void callback());
    return new Promise(() => undefined);
  },
  query: async () => ({ held: [], pending: [] }),
};

const g = globalThis as { SharedWorker?: unknown; Worker?: unknown };
let saved: unknown;
let savedWorker: unknown;
beforeEach(() => {
  saved = g.SharedWorker;
  savedWorker = g.Worker;
  g.SharedWorker = FakeSharedWorker;
  g.Worker = FakeWorker;
  vi.stubGlobal("navigator", { locks: fakeLocks });
  FakeSharedWorker.made = [];
  FakeWorker.made = [];
  events = [];
  grants.length = 0;
});
afterEach(() => {
  g.SharedWorker = saved;
  g.Worker = savedWorker;
  vi.unstubAllGlobals();
});

/** A fresh copy of the module (its early worker is module state). */
async function fresh() {
  vi.resetModules();
  return import("../../../src/lib/engine-start.ts");
}

test("the engine client takes the worker started early, once, and only for the same configuration", async () => {
  const m = await fresh();
  const params = new URLSearchParams("store=s1&debug=1&effects=/fx");
  m.startEngineEarly(params);
  m.startEngineEarly(params);
  // The engine, and a second connection to it: the side channel.
  expect(FakeSharedWorker.made).toHaveLength(2);
  const [made] = FakeSharedWorker.made;
  expect(made!.options).toEqual({ type: "module", name: "store=s1&debug=1&effects=%2Ffx" });
  expect(made!.url.pathname).toMatch(/worker\/entry\/shared-worker\.ts$/);
  expect(m.takeEarlyWorker(m.workerQuery(new URLSearchParams("store=other")))).toBeUndefined();
  const taken = m.takeEarlyWorker(m.workerQuery(params));
  expect(taken?.worker).toBe(made);
  expect(taken?.failed).toBe(false);
  expect(m.takeEarlyWorker(m.workerQuery(params))).toBeUndefined();
});

test("the start runs once a page: a later call, after the worker was taken, starts no second engine connection or tab", async () => {
  // The first script is async: it may run before the app's engine client or after it, and both call
  // the start. Whichever comes second must start nothing (a second side channel would offer another tab).
  const m = await fresh();
  const params = new URLSearchParams("store=s1");
  m.startEngineEarly(params);
  const tabId = m.earlyTabId(m.workerQuery(params));
  expect(tabId).toEqual(expect.any(String));
  expect(m.takeEarlyWorker(m.workerQuery(params))).toBeDefined();
  m.startEngineEarly(params);
  expect(FakeSharedWorker.made).toHaveLength(2);
  expect(m.takeEarlyWorker(m.workerQuery(params))).toBeUndefined();
});

test("a script that failed to load before the client took the worker is reported", async () => {
  const m = await fresh();
  const params = new URLSearchParams("");
  m.startEngineEarly(params);
  FakeSharedWorker.made[0]!.dispatchEvent(new Event("error"));
  expect(m.takeEarlyWorker(m.workerQuery(params))?.failed).toBe(true);
});

test("the dedicated-worker engine, or no SharedWorker, starts nothing early", async () => {
  const m = await fresh();
  m.startEngineEarly(new URLSearchParams("engine=dedicated"));
  expect(FakeSharedWorker.made).toHaveLength(0);
  g.SharedWorker = undefined;
  m.startEngineEarly(new URLSearchParams(""));
  expect(m.takeEarlyWorker(m.workerQuery(new URLSearchParams("")))).toBeUndefined();
});

test("the tab's first script imports only the early start, which imports only the protocol's constants and the side channel's offer", () => {
  const read = (path: string) => readFileSync(new URL(`../../../${path}`, import.meta.url), "utf8");
  expect(staticImports(read("src/start.ts"))).toEqual(["./lib/engine-start.ts"]);
  expect(staticImports(read("src/lib/engine-start.ts"))).toEqual([
    "../../worker/protocol/api.ts",
    "../../worker/protocol/browser.ts",
    "./script-worker-offer.ts",
  ]);
  // The offer brings nothing but types with it.
  const offer = read("src/lib/script-worker-offer.ts");
  expect(offer.match(/^import (?!type )/gm)).toBeNull();
  // The engine client takes that worker instead of making its own.
  expect(read("src/lib/engine.svelte.ts")).toContain("takeEarlyWorker(query)");
});

test("a page's forced store kind (idb or opfs-lent) reaches the engine's name; anything else is left to the engine", async () => {
  const m = await fresh();
  expect(m.workerQuery(new URLSearchParams("store=s&storeKind=idb")).get("storeKind")).toBe("idb");
  expect(m.workerQuery(new URLSearchParams("store=s&storeKind=opfs-lent")).get("storeKind")).toBe(
    "opfs-lent",
  );
  expect(m.workerQuery(new URLSearchParams("store=s&storeKind=opfs")).has("storeKind")).toBe(false);
  expect(m.workerQuery(new URLSearchParams("store=s")).toString()).toBe("store=s");
});

test("the first script asks for the tab's lock, then says hello on the side channel at once, lending a spare store worker, without waiting for the lock", async () => {
  const m = await fresh();
  const params = new URLSearchParams("store=s1");
  m.startEngineEarly(params);
  const query = m.workerQuery(params);
  const tabId = m.earlyTabId(query);
  expect(tabId).toMatch(/^[0-9a-f-]{36}$/);
  // No lock granted yet: the hello went anyway, after the lock request and the spare's start.
  expect(grants).toHaveLength(1);
  expect(events).toEqual([
    `lock tab:${tabId}`,
    "worker lent-store",
    `post ${JSON.stringify({ scriptWorkers: tabId, protocol: PROTOCOL_VERSION, store: 1 })}`,
  ]);
  const [, side] = FakeSharedWorker.made;
  expect(side!.options.name).toBe(query.toString());
  // The spare's port travels in the hello; the spare got the other end and knows its tab.
  const [spare] = FakeWorker.made;
  expect(spare!.url.pathname).toMatch(/worker\/entry\/lent-store\.ts$/);
  const connect = spare!.sent[0] as { type: string; port: MessagePort; spare: string };
  expect(connect.type).toBe("connect");
  expect(connect.spare).toBe(tabId);
  expect(side!.port.sent[0]!.transfer).toHaveLength(1);
  expect(side!.port.sent[0]!.transfer[0]).toBeInstanceOf(MessagePort);
  // The engine client takes the same tab: its id, its lock (held once granted), no second offer.
  const taken = m.takeEarlyWorker(query);
  expect(taken?.tab?.tabId).toBe(tabId);
  expect(taken?.tab?.offered).toBe(true);
  let held = false;
  void taken!.tab!.held.then(() => {
    held = true;
  });
  await Promise.resolve();
  expect(held).toBe(false);
  grants[0]!();
  await Promise.resolve();
  expect(held).toBe(true);
  (connect.port as MessagePort).close();
});

test("no spare for a page forcing the idb store, and no early offer from a page claiming another protocol", async () => {
  const m = await fresh();
  m.startEngineEarly(new URLSearchParams("store=s2&storeKind=idb"));
  expect(FakeWorker.made).toHaveLength(0);
  const hello = FakeSharedWorker.made[1]!.port.sent[0]!;
  expect(hello.message).toEqual({ scriptWorkers: expect.any(String), protocol: PROTOCOL_VERSION });
  expect(hello.transfer).toEqual([]);

  const again = await fresh();
  FakeSharedWorker.made = [];
  events = [];
  const claiming = new URLSearchParams("store=s3&debug=1&protocol=1");
  again.startEngineEarly(claiming);
  expect(FakeSharedWorker.made).toHaveLength(1);
  expect(events).toEqual([]);
  expect(again.earlyTabId(again.workerQuery(claiming))).toBeUndefined();
  expect(again.takeEarlyWorker(again.workerQuery(claiming))?.tab).toBeUndefined();
});
