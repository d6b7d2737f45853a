/**
 * The engine's worker started before the app loads (src/lib/engine-start.ts, src/start.ts; issue 30
 * item 2): the engine client takes the worker the first script started, once and only for the same
 * configuration; the dedicated-worker fallback starts nothing early; and the first script stays small
 * (it imports the protocol's constants and nothing else, so it runs as soon as it arrives).
 */
import { readFileSync } from "node:fs";
import { afterEach, beforeEach, expect, test, vi } from "vitest";
import { staticImports } from "../../bench/initial-js.ts";

class FakeSharedWorker extends EventTarget {
  static made: FakeSharedWorker[] = [];
  constructor(
    readonly url: URL,
    readonly options: { type: string; name: string },
  ) {
    super();
    FakeSharedWorker.made.push(this);
  }
}

const g = globalThis as { SharedWorker?: unknown };
let saved: unknown;
beforeEach(() => {
  saved = g.SharedWorker;
  g.SharedWorker = FakeSharedWorker;
  FakeSharedWorker.made = [];
});
afterEach(() => {
  g.SharedWorker = saved;
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
  expect(FakeSharedWorker.made).toHaveLength(1);
  const [made] = FakeSharedWorker.made;
  expect(made!.options).toEqual({ type: "module", name: "store=s1&debug=1&effects=%2Ffx" });
  expect(made!.url.pathname).toMatch(/worker\/entry\/shared-worker\.ts$/);
  expect(m.takeEarlyWorker(m.workerQuery(new URLSearchParams("store=other")))).toBeUndefined();
  const taken = m.takeEarlyWorker(m.workerQuery(params));
  expect(taken?.worker).toBe(made);
  expect(taken?.failed).toBe(false);
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

test("the tab's first script imports only the early start, which imports only the protocol's constants", () => {
  const read = (path: string) => readFileSync(new URL(`../../../${path}`, import.meta.url), "utf8");
  expect(staticImports(read("src/start.ts"))).toEqual(["./lib/engine-start.ts"]);
  expect(staticImports(read("src/lib/engine-start.ts"))).toEqual(["../../worker/protocol/api.ts"]);
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
