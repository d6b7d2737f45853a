/** Driving the store-probe fixture page from a test. */
import type { Page } from "playwright-core";
import type { LaunchedBrowser, StaticServer } from "./browser.ts";
import type {
  BigResult,
  CommitBenchResult,
  LentBenchResult,
  OpenResult,
  ProbeInfo,
  ProbeRequest,
  ReadResult,
  WriteResult,
} from "./fixtures/store-probe/protocol.ts";

export type ProbeTarget = "shared" | "dedicated" | "page";

export async function openProbe(b: LaunchedBrowser, server: StaticServer): Promise<Page> {
  const page = await b.newPage();
  await page.goto(`${server.url}store-probe.html`);
  await waitReady(page);
  return page;
}

export async function waitReady(page: Page): Promise<void> {
  await page.waitForFunction(() => document.getElementById("status")?.textContent === "ready", undefined, {
    timeout: 30_000,
  });
}

function call<T>(page: Page, target: ProbeTarget, request: ProbeRequest): Promise<T> {
  return page.evaluate(
    ({ target, request }) =>
      (globalThis as unknown as { probe: Record<string, (r: unknown) => Promise<unknown>> }).probe[target]!(
        request,
      ),
    { target, request },
  ) as Promise<T>;
}

export const probe = {
  info: (page: Page, target: ProbeTarget) => call<ProbeInfo>(page, target, { op: "info" }),
  write: (page: Page, target: ProbeTarget, request: Omit<Extract<ProbeRequest, { op: "write" }>, "op">) =>
    call<WriteResult>(page, target, { op: "write", ...request }),
  big: (page: Page, target: ProbeTarget, request: Omit<Extract<ProbeRequest, { op: "big" }>, "op">) =>
    call<BigResult>(page, target, { op: "big", ...request }),
  read: (page: Page, target: ProbeTarget, request: Omit<Extract<ProbeRequest, { op: "read" }>, "op">) =>
    call<ReadResult>(page, target, { op: "read", ...request }),
  commitBench: (
    page: Page,
    target: ProbeTarget,
    request: Omit<Extract<ProbeRequest, { op: "commitBench" }>, "op">,
  ) => call<CommitBenchResult>(page, target, { op: "commitBench", ...request }),
  /** The OPFS shapes from the SharedWorker, beside its idb store (lent-bench.ts). */
  lentBench: (page: Page, request: { seconds: number }) =>
    call<LentBenchResult>(page, "shared", { op: "lentBench", ...request }),
  open: (page: Page, target: ProbeTarget, request: Omit<Extract<ProbeRequest, { op: "open" }>, "op">) =>
    call<OpenResult>(page, target, { op: "open", ...request }),
};
