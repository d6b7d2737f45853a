/**
 * The browser host's network state (browser/network.ts) with the worker's globals stubbed: `check`
 * trusts an `onLine` of false and otherwise asks the server; `whenOnline` ends on an `online` event,
 * or on a periodic probe that gets through even while `onLine` wrongly says false (so a missing
 * event or a wrong flag cannot wedge a run), and an abort ends it without more probes.
 */
import { afterEach, expect, test, vi } from "vitest";
import { browserNetwork } from "../../../worker/browser/network.ts";
import { until } from "../../../worker/testing.ts";

const events = new EventTarget();
let reachable = false;
let probes: string[] = [];

function stubWorker(onLine: boolean): void {
  reachable = false;
  probes = [];
  vi.stubGlobal("navigator", { onLine });
  vi.stubGlobal("addEventListener", events.addEventListener.bind(events));
  vi.stubGlobal("removeEventListener", events.removeEventListener.bind(events));
  vi.stubGlobal("fetch", async (url: URL, init: RequestInit) => {
    probes.push(`${init.method} ${url.pathname} ${url.searchParams.has("network-probe")}`);
    if (!reachable) throw new TypeError("Failed to fetch");
    return { type: "basic", status: 404 };
  });
}

afterEach(() => {
  vi.unstubAllGlobals();
});

const options = { probeUrl: "http://app.test/assets/worker.js", probeEveryMs: 20 };

test("check: offline by onLine without a probe; online only when the server answers (a 404 counts)", async () => {
  stubWorker(false);
  const net = browserNetwork(options);
  expect(await net.check(new AbortController().signal)).toBe(false);
  expect(probes).toEqual([]);
  stubWorker(true);
  expect(await net.check(new AbortController().signal)).toBe(false);
  reachable = true;
  expect(await net.check(new AbortController().signal)).toBe(true);
  expect(probes).toEqual(["HEAD /assets/worker.js true", "HEAD /assets/worker.js true"]);
});

test("whenOnline ends on the online event", async () => {
  stubWorker(false);
  const waiting = browserNetwork({ ...options, probeEveryMs: 60_000 }).whenOnline(
    new AbortController().signal,
  );
  await until(() => probes.length === 1, { what: "the first probe" });
  let done = false;
  void waiting.then(() => (done = true));
  await new Promise((r) => setTimeout(r, 30));
  expect(done).toBe(false);
  events.dispatchEvent(new Event("online"));
  await waiting;
});

test("whenOnline probes periodically and ends when a probe gets through, though onLine says false", async () => {
  stubWorker(false);
  const waiting = browserNetwork(options).whenOnline(new AbortController().signal);
  await until(() => probes.length >= 3, { what: "three probes" });
  reachable = true;
  await waiting;
  const count = probes.length;
  await new Promise((r) => setTimeout(r, 60));
  expect(probes.length).toBe(count);
});

test("whenOnline says when each next probe is due, a probe's interval after a failed one", async () => {
  stubWorker(false);
  const told: Array<{ at: number; now: number }> = [];
  const waiting = browserNetwork(options).whenOnline(new AbortController().signal, (at) =>
    told.push({ at, now: Date.now() }),
  );
  await until(() => told.length >= 2, { what: "two next looks told" });
  reachable = true;
  await waiting;
  // Told at once, in the same turn as the probe failed (a millisecond may tick between the two reads).
  for (const { at, now } of told) expect(at - now).toBeGreaterThanOrEqual(options.probeEveryMs - 1);
  for (const { at, now } of told) expect(at - now).toBeLessThanOrEqual(options.probeEveryMs);
  expect(told.length).toBeLessThanOrEqual(probes.length);
});

test("an abort ends the wait and its probes", async () => {
  stubWorker(true);
  const abort = new AbortController();
  const waiting = browserNetwork(options).whenOnline(abort.signal);
  await until(() => probes.length >= 2, { what: "two probes" });
  abort.abort(new Error("stopped"));
  await expect(waiting).rejects.toThrow("stopped");
  await new Promise((r) => setTimeout(r, 30));
  const count = probes.length;
  await new Promise((r) => setTimeout(r, 60));
  expect(probes.length).toBe(count);
});
