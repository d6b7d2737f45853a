/**
 * Script workers offered by tabs (worker/browser/tab-script-workers.ts) as the SharedWorker engine uses
 * them, with Node worker threads standing in for the tabs' dedicated Workers: the spawner asks the
 * live tab hosting the fewest workers (the newest on a tie) and skips one whose worker failed to
 * start; a tab lost while its script runs (its lock granted to the engine, or a ping it no longer
 * answers) makes the script rerun in another tab's worker, or in the engine's thread when none is
 * left, with each nested call made once and its output streamed once; a silent worker whose tab still
 * answers is a runaway and keeps its limit error.
 */
import { afterEach, beforeEach, expect, test } from "vitest";
import {
  type TabOffer,
  TabScriptWorkers,
  type TabWorkerPort,
} from "../../../worker/browser/tab-script-workers.ts";
import { ScriptWorkerLost } from "../../../worker/sandbox/errors.ts";
import type { FromScriptWorker, ToScriptWorker } from "../../../worker/sandbox/messages.ts";
import { runScript, type ScriptHost } from "../../../worker/sandbox/run.ts";
import {
  type ScriptWorkerPort,
  scriptWorkersAvailable,
  setScriptWorkers,
} from "../../../worker/sandbox/workers.ts";
import { deferred, nodeScriptWorkers, until } from "../../../worker/testing.ts";
import { WORKER_TEST_LIMITS as LIMITS } from "../sandbox/fixtures.ts";

/** A tab whose workers are Node worker threads, bridged to the engine through a fake MessagePort. */
function nodeTab(options: { ping?: () => Promise<true> } = {}) {
  const spawn = nodeScriptWorkers();
  const workers = new Map<number, ScriptWorkerPort>();
  let next = 0;
  const offer: TabOffer = {
    async start() {
      const worker = spawn();
      const id = ++next;
      workers.set(id, worker);
      const listeners: { message: ((event: { data: FromScriptWorker }) => void)[]; close: (() => void)[] } = {
        message: [],
        close: [],
      };
      worker.listen(
        (data) => {
          for (const l of listeners.message) l({ data });
        },
        () => {
          for (const l of listeners.close) l();
        },
      );
      worker.hold?.(false);
      const port: TabWorkerPort = {
        postMessage: (message: ToScriptWorker) => worker.post(message),
        addEventListener: ((type: "message" | "close", listener: never) => {
          listeners[type].push(listener);
        }) as TabWorkerPort["addEventListener"],
        start: () => undefined,
        close: () => undefined,
      };
      return { id, port };
    },
    async terminate(id) {
      workers.get(id)?.terminate();
      workers.delete(id);
    },
    ping: options.ping ?? (async () => true as const),
  };
  return { offer, workers };
}

let tabs: TabScriptWorkers;
beforeEach(() => {
  tabs = new TabScriptWorkers();
  setScriptWorkers(tabs.spawn, { available: tabs.available });
});
afterEach(() => setScriptWorkers(undefined));

const SCRIPT =
  'const a = await echo({ n: 1 }); console.log("one"); const b = await echo({ n: 2 }); console.log("two"); return a.n + b.n;';

/** A host whose second call waits for `release`, counting the calls it is asked. */
function slowSecondCall() {
  const release = deferred<void>();
  const asked: number[] = [];
  const printed: string[] = [];
  const secondAsked = deferred<void>();
  const host: ScriptHost = {
    start: 0,
    seed: 1,
    functions: ["echo"],
    async call(_name, args, index) {
      asked.push(index);
      if (index === 1) {
        secondAsked.resolve();
        await release.promise;
      }
      return { isError: false, value: args };
    },
    print: (text) => printed.push(text),
  };
  return { host, release, asked, printed, secondAsked };
}

const hostingTab = () => tabs.stats().tabs.find((tab) => tab.busy > 0)?.tabId;

test("the spawner asks the tab hosting the fewest workers, the newest on a tie, and none that failed", async () => {
  expect(tabs.available()).toBe(false);
  expect(() => tabs.spawn()).toThrow(ScriptWorkerLost);
  const failing: TabOffer = {
    start: () => Promise.reject(new Error("the script could not load")),
    terminate: async () => undefined,
    ping: async () => true,
  };
  tabs.offer("a", nodeTab().offer);
  tabs.offer("b", nodeTab().offer);
  tabs.offer("c", failing);
  const first = tabs.spawn();
  const lost = deferred<Error>();
  first.listen(() => undefined, lost.resolve);
  expect(tabs.stats().tabs.map((t) => [t.tabId, t.workers])).toEqual([
    ["a", 0],
    ["b", 0],
    ["c", 1],
  ]);
  expect(await lost.promise).toBeInstanceOf(ScriptWorkerLost);
  expect(tabs.stats().tabs.find((t) => t.tabId === "c")?.failed).toBe(true);
  expect(tabs.stats().lost.start).toBe(1);
  const second = tabs.spawn();
  const third = tabs.spawn();
  expect(tabs.stats().tabs.map((t) => [t.tabId, t.workers])).toEqual([
    ["a", 1],
    ["b", 1],
    ["c", 0],
  ]);
  second.terminate();
  third.terminate();
  tabs.drop("a");
  tabs.drop("b");
  expect(tabs.available()).toBe(false);
});

test("a tab closed while its script waits on a call: the script reruns in the other tab's worker, each call made once", async () => {
  tabs.offer("a", nodeTab().offer);
  tabs.offer("b", nodeTab().offer);
  const { host, release, asked, printed, secondAsked } = slowSecondCall();
  const run = runScript(SCRIPT, host, LIMITS);
  await secondAsked.promise;
  const hosting = hostingTab();
  expect(hosting).toBeDefined();
  tabs.drop(hosting!);
  // The rerun runs in the other tab's worker; the answer to the call it waits on comes after.
  const other = hosting === "a" ? "b" : "a";
  await until(() => tabs.stats().tabs.some((t) => t.tabId === other && t.busy === 1), {
    what: "the rerun in the other tab's worker",
  });
  expect(tabs.stats().tabs.map((t) => t.tabId)).toEqual([other]);
  release.resolve();
  await expect(run).resolves.toMatchObject({ value: 3, calls: 2 });
  expect(asked).toEqual([0, 1]);
  expect(printed.join("")).toBe("one\ntwo\n");
  expect(tabs.stats()).toMatchObject({ started: 2, lost: { lock: 1, close: 0, ping: 0, start: 0 } });
});

test("the last tab closed mid-script: the script reruns in the engine's thread", async () => {
  tabs.offer("a", nodeTab().offer);
  const { host, release, asked, printed, secondAsked } = slowSecondCall();
  const run = runScript(SCRIPT, host, LIMITS);
  await secondAsked.promise;
  tabs.drop("a");
  expect(scriptWorkersAvailable()).toBe(false);
  release.resolve();
  await expect(run).resolves.toMatchObject({ value: 3, calls: 2 });
  expect(asked).toEqual([0, 1]);
  expect(printed.join("")).toBe("one\ntwo\n");
  expect(tabs.stats().started).toBe(1);
});

/** A tab whose worker says it started its script and then nothing (frozen, or its thread is busy). */
function silentTab(ping: () => Promise<true>): TabOffer {
  return {
    async start() {
      let listener: ((event: { data: FromScriptWorker }) => void) | undefined;
      const port: TabWorkerPort = {
        postMessage: (message: ToScriptWorker) => {
          if (message.type === "run") setTimeout(() => listener?.({ data: { type: "started" } }), 0);
        },
        addEventListener: ((type: "message" | "close", l: never) => {
          if (type === "message") listener = l;
        }) as TabWorkerPort["addEventListener"],
        start: () => undefined,
        close: () => undefined,
      };
      return { id: 1, port };
    },
    terminate: async () => undefined,
    ping,
  };
}

test("a silent worker whose tab no longer answers is lost, not a runaway: the script reruns elsewhere", async () => {
  tabs.offer("answering", nodeTab().offer);
  tabs.offer(
    "frozen",
    silentTab(() => new Promise<true>(() => undefined)),
  );
  const printed: string[] = [];
  const run = await runScript(
    'console.log("hi"); return (await echo({ n: 41 })).n + 1;',
    {
      start: 0,
      seed: 1,
      functions: ["echo"],
      call: async (_name, args) => ({ isError: false, value: args }),
      print: (text) => printed.push(text),
    },
    LIMITS,
  );
  expect(run).toMatchObject({ value: 42, calls: 1 });
  expect(printed).toEqual(["hi\n"]);
  expect(tabs.stats().lost).toMatchObject({ ping: 1, lock: 0 });
});

test("a silent worker whose tab still answers is a runaway: CpuSliceExceeded, as in the engine's workers", async () => {
  tabs.offer(
    "busy",
    silentTab(async () => true),
  );
  await expect(
    runScript(
      "for (;;) {}",
      {
        start: 0,
        seed: 1,
        functions: [],
        call: async () => ({ isError: true, text: "" }),
        print: () => undefined,
      },
      LIMITS,
    ),
  ).rejects.toMatchObject({ name: "CpuSliceExceeded", sliceMs: LIMITS.sliceMs });
  expect(tabs.stats().lost).toEqual({ lock: 0, close: 0, ping: 0, start: 0 });
});

test("a worker that never starts its script is lost after the start bound: the script reruns, at last in the engine's thread", async () => {
  // Workers that take every message and never answer: a worker that died silently under a live tab.
  let given = 0;
  setScriptWorkers(
    () => ({
      post: (message) => {
        if (message.type === "run") given++;
      },
      listen: () => undefined,
      terminate: () => undefined,
    }),
    { startTimeoutMs: 100 },
  );
  const { host, release, asked, printed } = slowSecondCall();
  release.resolve();
  const run = await runScript(SCRIPT, host, LIMITS);
  expect(run.value).toBe(3);
  // Three workers were given the script and given up on (run.ts tries three before the thread);
  // the thread ran it, each call made once.
  expect(given).toBe(3);
  expect(asked).toEqual([0, 1]);
  expect(printed.join("")).toBe("one\ntwo\n");
});
