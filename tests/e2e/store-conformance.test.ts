/**
 * The store conformance suite (tests/conformance/store-suite.ts) on the browser's own stores, in
 * Chromium: the idb kind (wa-sqlite over IndexedDB, IDBBatchAtomicVFS) inside a SharedWorker, the
 * context the app runs its engine and idb store in, and the opfs kind (OPFSCoopSyncVFS) inside a
 * dedicated Worker, the only context with OPFS sync access handles. Both run at once from one page
 * (tests/e2e/fixtures/store-conformance/), each scenario on store names of its own; the kit's kill and
 * reopen are described in fixtures/store-conformance/run.ts. Each backend first answers the list of
 * scenarios its bundle holds, and the test asserts it is exactly the suite's list, that a result came
 * for every one of them in that order, and that each passed: no scenario is dropped silently. The
 * same scenarios run on the memory store (tests/unit/store/conformance.test.ts), the lent store
 * (tests/unit/store/lent-conformance.test.ts) and the Durable Object store (tests/server/).
 */
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { scenarios } from "../conformance/store-suite.ts";
import {
  APP_CSP,
  fixtureDir,
  type LaunchedBrowser,
  launchBrowser,
  type StaticServer,
  serveStatic,
} from "./browser.ts";
import type {
  ConformanceKind,
  ConformanceRun,
  ScenarioResult,
} from "./fixtures/store-conformance/protocol.ts";

/** Every scenario on both backends: about 30 s on a loaded 2-core machine; ten times that is a hang. */
const RUN_TIMEOUT_MS = 300_000;

let server: StaticServer;
let b: LaunchedBrowser;
let page: Page;
const logs: string[] = [];
const started = Date.now();

beforeAll(async () => {
  server = await serveStatic(fixtureDir(), { headers: { "Content-Security-Policy": APP_CSP } });
  // gc() in the workers, for the check that a closed store lets go of its wasm instance.
  b = await launchBrowser({ args: ["--js-flags=--expose-gc"] });
  page = await b.newPage();
  page.on("console", (m) => logs.push(`[${m.type()}] ${m.text()}`));
  page.on("pageerror", (e) => logs.push(`[pageerror] ${e.message}`));
  await page.goto(`${server.url}store-conformance.html`);
});

afterAll(async () => {
  console.log(`store conformance on the browser stores: ${Date.now() - started} ms in all`);
  await b?.close();
  await server?.close();
});

/**
 * The backend's run once it ended (every scenario reported, or the run failed). Waited for once: a
 * run that never ends fails the first test after RUN_TIMEOUT_MS and every later one at once.
 */
const waits = new Map<ConformanceKind, Promise<ConformanceRun>>();
function finished(kind: ConformanceKind): Promise<ConformanceRun> {
  let wait = waits.get(kind);
  if (!wait) {
    wait = waitFinished(kind);
    waits.set(kind, wait);
  }
  return wait;
}

async function waitFinished(kind: ConformanceKind): Promise<ConformanceRun> {
  try {
    await page.waitForFunction(
      (k) =>
        (globalThis as unknown as { conformance?: Record<string, ConformanceRun> }).conformance?.[k]?.done,
      kind,
      { timeout: RUN_TIMEOUT_MS, polling: 500 },
    );
  } catch (error) {
    const reported = await page
      .evaluate((k) => {
        const run = (globalThis as unknown as { conformance: Record<string, ConformanceRun> }).conformance[
          k
        ]!;
        const current = run.current && { ...run.current, for: performance.now() - run.current.startedAt };
        return { results: run.results, current };
      }, kind)
      .catch((e: unknown) => ({ unreadable: String(e) }));
    console.log(
      `[${kind}] run not done: ${JSON.stringify(reported)}\n` +
        `page log:\n${logs.join("\n")}\nchromium stderr (tail):\n${b.log().slice(-3000)}`,
    );
    // One line a CI summary keeps: how far the run got, and where it stands.
    const summary =
      "results" in reported
        ? `${reported.results.length} scenario(s) reported (${reported.results.filter((r) => !r.ok).length} failed); ` +
          (reported.current
            ? `running "${reported.current.name}" for ${Math.round(reported.current.for / 1000)} s, its log: ` +
              JSON.stringify(reported.current.log.slice(-5))
            : "none running (the worker never started one or stopped answering)")
        : `the page did not answer: ${reported.unreadable}`;
    throw new Error(
      `${kind} run not done after ${RUN_TIMEOUT_MS / 1000} s: ${summary}; page log tail: ${JSON.stringify(logs.slice(-5))}`,
      {
        cause: error,
      },
    );
  }
  return page.evaluate(
    (k) => (globalThis as unknown as { conformance: Record<string, ConformanceRun> }).conformance[k]!,
    kind,
  );
}

const BACKENDS: Array<{ kind: ConformanceKind; context: string }> = [
  { kind: "idb", context: "SharedWorker" },
  { kind: "opfs", context: "dedicated Worker" },
];

for (const { kind, context } of BACKENDS) {
  describe(`store conformance: ${kind} in a ${context}`, () => {
    test(
      "the worker runs exactly the suite's scenarios, each to a result",
      async () => {
        const run = await finished(kind);
        expect(run.error).toBeUndefined();
        expect(run.context).toBe(context);
        expect(run.names).toEqual(scenarios.map((s) => s.name));
        expect(run.results.map((r) => r.name)).toEqual(scenarios.map((s) => s.name));
        const total = run.results.reduce((sum, r) => sum + r.ms, 0);
        console.log(
          `[${kind}] ${run.results.length} scenarios in ${Math.round(total)} ms (build ${run.build}); ` +
            `${run.results.filter((r) => r.ok).length} passed`,
        );
      },
      RUN_TIMEOUT_MS + 10_000,
    );

    test("a closed store lets go of its wasm instance: none of 4 opened, written and closed is alive after a GC", async () => {
      const { released } = await finished(kind);
      expect(released?.error).toBeUndefined();
      expect(released?.opened).toBe(4);
      expect(released?.alive).toBe(0);
    });

    for (const scenario of scenarios) {
      test(scenario.name, async () => {
        const run = await finished(kind);
        const result: ScenarioResult | undefined = run.results.find((r) => r.name === scenario.name);
        if (!result) throw new Error(`${kind}: no result for this scenario`);
        for (const line of result.log) console.log(`[${kind}] ${line}`);
        if (!result.ok) {
          console.log(`page log (tail):\n${logs.slice(-40).join("\n")}`);
          throw new Error(`${kind} in the ${context}: ${result.error}`);
        }
      });
    }
  });
}
