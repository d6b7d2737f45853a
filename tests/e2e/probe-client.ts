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
  TempResult,
  VfsBenchResult,
  VfsOpenResult,
  WriteResult,
} from "./fixtures/store-probe/protocol.ts";

/** A probe request without its `op`. */
type Args<Op extends ProbeRequest["op"]> = Omit<Extract<ProbeRequest, { op: Op }>, "op">;

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
  sweepPools: (page: Page, target: ProbeTarget) =>
    call<{ removed: number; left: string[] }>(page, target, { op: "sweepPools" }),
  temp: (page: Page, target: ProbeTarget, request: Omit<Extract<ProbeRequest, { op: "temp" }>, "op">) =>
    call<TempResult>(page, target, { op: "temp", ...request }),
  open: (page: Page, target: ProbeTarget, request: Omit<Extract<ProbeRequest, { op: "open" }>, "op">) =>
    call<OpenResult>(page, target, { op: "open", ...request }),
  vfsBench: (page: Page, target: ProbeTarget, request: Args<"vfsBench">) =>
    call<VfsBenchResult>(page, target, { op: "vfsBench", ...request }),
  vfsWrite: (page: Page, target: ProbeTarget, request: Args<"vfsWrite">) =>
    call<{ committed: number; build: string }>(page, target, { op: "vfsWrite", ...request }),
  vfsAcked: (page: Page, target: ProbeTarget, request: Args<"vfsAcked">) =>
    call<number>(page, target, { op: "vfsAcked", ...request }),
  vfsRead: (page: Page, target: ProbeTarget, request: Args<"vfsRead">) =>
    call<{ count: number; sum: number; fillRows: number; integrity: string }>(page, target, {
      op: "vfsRead",
      ...request,
    }),
  vfsFill: (page: Page, target: ProbeTarget, request: Args<"vfsFill">) =>
    call<{ ms: number; bytes: number; pipeline: Record<string, number> }>(page, target, {
      op: "vfsFill",
      ...request,
    }),
  vfsOpen: (page: Page, target: ProbeTarget, request: Args<"vfsOpen">) =>
    call<VfsOpenResult>(page, target, { op: "vfsOpen", ...request }),
  vfsRate: (page: Page, target: ProbeTarget, request: Args<"vfsRate">) =>
    call<{ perSecond: number; wasmBytes: number }>(page, target, { op: "vfsRate", ...request }),
  vfsClose: (page: Page, target: ProbeTarget, request: Args<"vfsClose">) =>
    call<void>(page, target, { op: "vfsClose", ...request }),
};
