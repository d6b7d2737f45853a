/**
 * The browser bench's IndexedDB rows (part of its throughput section; issue 30): the idb store's
 * commit rate beside the platform's limit and beside the VFS choices, all in the store probe's
 * SharedWorker (the engine's home) on the bench's on-disk profile, in one run.
 *
 * 1. Commit rates (probe `vfsBench`, tests/e2e/fixtures/store-probe/vfs-bench.ts), interleaved slices,
 *    median of BENCH_ROUNDS: a bare IndexedDB readwrite transaction (one small put, awaited
 *    `complete`) at durability strict (what the store asks for at synchronous=FULL: the limit),
 *    relaxed and default; the idb store as shipped; bare wa-sqlite loops on IDBBatchAtomicVFS as
 *    shipped, on the same VFS with the pipelined request queue (a probe-only variant, the change
 *    proposed upstream in docs/idb-vfs-pipelined-requests.md), the same ending each commit's
 *    transaction with an explicit `commit()` (the proposal's second half), on IDBMirrorVFS as
 *    published (default durability) and on IDBMirrorVFS with strict transactions. Each row's ratio to the strict
 *    IndexedDB transaction; the aim (issue 30) is 0.8x for the store with full durability.
 * 2. Per instrumented commit of each: IndexedDB requests and transactions, and for the pipelined
 *    queue the share of requests placed while the previous one was pending, its waits and its
 *    explicit `commit()` calls.
 * 3. Growth (BENCH_MIRROR_MB, default "1,10,50"): per size, a database of that size on IDBMirrorVFS
 *    (strict) and on IDBBatchAtomicVFS; its open on a fresh module instance to the first query's
 *    answer; what that open added to the SharedWorker's JS heap and ArrayBuffer backing stores (the
 *    mirror's pages; wasm memory is not counted there) after a forced GC before and after it (CDP
 *    `Runtime.getHeapUsage`); the connection's wasm memory; and commits/s on it at that size. The mirror holds the whole
 *    database in memory and reads all of it at open, so its memory and open time grow with the
 *    database; IDBBatchAtomicVFS's stay flat. The table says up to what size the mirror's commit
 *    rate is worth its cost.
 */
import type { Page } from "playwright-core";
import { Cdp, type LaunchedBrowser, type StaticServer, waitForSharedWorker } from "../e2e/browser.ts";
import type { VfsBenchResult, VfsVariant } from "../e2e/fixtures/store-probe/protocol.ts";
import { openProbe, probe } from "../e2e/probe-client.ts";

export interface IdbVfsHelpers {
  fmt(n: number, digits?: number): string;
  median(values: number[]): number;
  table(rows: string[][]): void;
}

const AIM = 0.8;
const MB = 1 << 20;

const ROW_LABELS: Array<[string, (r: VfsBenchResult) => number, { strict: boolean }]> = [
  ["IndexedDB readwrite tx, 1 put, strict (the limit)", (r) => r.bareIdb.strict, { strict: true }],
  ["IndexedDB readwrite tx, 1 put, relaxed", (r) => r.bareIdb.relaxed, { strict: false }],
  ["IndexedDB readwrite tx, 1 put, default", (r) => r.bareIdb.default, { strict: false }],
  ["idb store as shipped (store.commit)", (r) => r.store, { strict: true }],
  ["IDBBatchAtomicVFS as shipped (bare loop)", (r) => r.variants["batch-atomic"], { strict: true }],
  [
    "IDBBatchAtomicVFS, pipelined requests (probe)",
    (r) => r.variants["batch-atomic-pipelined"],
    { strict: true },
  ],
  [
    "IDBBatchAtomicVFS, pipelined + commit() (probe)",
    (r) => r.variants["batch-atomic-pipelined-commit"],
    { strict: true },
  ],
  ["IDBMirrorVFS as published (default durability)", (r) => r.variants.mirror, { strict: false }],
  ["IDBMirrorVFS, strict transactions (probe)", (r) => r.variants["mirror-strict"], { strict: true }],
];

/** The SharedWorker's heap after a forced GC, through CDP. */
class WorkerHeap {
  private constructor(
    private readonly cdp: Cdp,
    private readonly sessionId: string,
  ) {}

  /**
   * Attach to the one SharedWorker whose URL contains `urlIncludes`: while an earlier probe page's
   * worker is still going away there are two, so wait (up to 10 s) until one is left.
   */
  static async attach(b: LaunchedBrowser, urlIncludes: string): Promise<WorkerHeap> {
    await waitForSharedWorker(b, urlIncludes);
    const cdp = await Cdp.connect(b.wsEndpoint);
    let targetId = "";
    for (const deadline = Date.now() + 10_000; ; ) {
      const { targetInfos } = await cdp.send<{
        targetInfos: Array<{ targetId: string; type: string; url: string }>;
      }>("Target.getTargets");
      const matching = targetInfos.filter((t) => t.type === "shared_worker" && t.url.includes(urlIncludes));
      targetId = matching.at(-1)?.targetId ?? "";
      if ((matching.length === 1 || Date.now() > deadline) && targetId) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    const { sessionId } = await cdp.send<{ sessionId: string }>("Target.attachToTarget", {
      targetId,
      flatten: true,
    });
    return new WorkerHeap(cdp, sessionId);
  }

  /** JS heap used and ArrayBuffer backing stores (0 when this Chromium does not report them), bytes. */
  async measure(): Promise<{ heap: number; buffers: number }> {
    await this.cdp.send("HeapProfiler.collectGarbage", {}, this.sessionId);
    const usage = await this.cdp.send<{ usedSize: number; backingStorageSize?: number }>(
      "Runtime.getHeapUsage",
      {},
      this.sessionId,
    );
    return { heap: usage.usedSize, buffers: usage.backingStorageSize ?? 0 };
  }

  async close(): Promise<void> {
    await this.cdp.send("Target.detachFromTarget", { sessionId: this.sessionId }).catch(() => undefined);
    this.cdp.close();
  }
}

async function growth(
  b: LaunchedBrowser,
  fixtures: StaticServer,
  page: Page,
  options: { seconds: number; sizes: number[] },
  h: IdbVfsHelpers,
): Promise<void> {
  const { fmt, table } = h;
  const heap = await WorkerHeap.attach(b, `${fixtures.url}assets/shared-worker`);
  const variants: Array<[VfsVariant, string]> = [
    ["mirror-strict", "IDBMirrorVFS (strict)"],
    ["batch-atomic", "IDBBatchAtomicVFS"],
  ];
  const rows: string[][] = [
    ["size", "VFS", "file MB", "fill s", "open ms", "JS heap +MB", "buffers +MB", "wasm MB", "commits/s"],
  ];
  try {
    for (const mb of options.sizes) {
      for (const [variant, label] of variants) {
        const name = `grow-${mb}-${Date.now().toString(36)}`;
        try {
          const filled = await probe.vfsFill(page, "shared", { variant, name, mb });
          const before = await heap.measure();
          const opened = await probe.vfsOpen(page, "shared", { variant, name });
          const after = await heap.measure();
          const rate = await probe.vfsRate(page, "shared", { variant, name, seconds: options.seconds });
          rows.push([
            `${mb} MB`,
            label,
            fmt(filled.bytes / MB, 1),
            fmt(filled.ms / 1000, 1),
            fmt(opened.openMs, 1),
            fmt((after.heap - before.heap) / MB, 1),
            after.buffers || before.buffers ? fmt((after.buffers - before.buffers) / MB, 1) : "n/a",
            fmt(opened.wasmBytes / MB, 1),
            fmt(rate.perSecond),
          ]);
        } finally {
          await probe.vfsClose(page, "shared", { variant, name, remove: true });
        }
      }
    }
  } finally {
    await heap.close();
  }
  console.log(
    "\nas the database grows: per size, a database filled on each VFS, then opened on a fresh module instance (open = to a first query's answer), memory after a forced GC around that open, commits/s on it",
  );
  table(rows);
  console.log(
    "(JS heap and buffers: what the open added in the SharedWorker after a forced GC; buffers = ArrayBuffer backing stores outside wasm memory, for the mirror every page of the database; wasm = the connection's own wasm memory, the same for both. The mirror is the better choice only while its commit rate is worth that memory and open time)",
  );
}

/**
 * The IndexedDB rows, printed after the throughput tables. `rounds` of `seconds` per loop; `sizes`
 * in MB for the growth rows (empty: none).
 */
export async function idbVfsRows(
  b: LaunchedBrowser,
  fixtures: StaticServer,
  options: { rounds: number; seconds: number; sizes: number[] },
  h: IdbVfsHelpers,
): Promise<void> {
  const { fmt, median, table } = h;
  console.log(
    `\nIndexedDB's own limit and the VFS choices: ${options.rounds} round(s), ${options.seconds} s per row in interleaved slices, in the store probe's SharedWorker, medians`,
  );
  const page = await openProbe(b, fixtures);
  try {
    const results: VfsBenchResult[] = [];
    for (let round = 0; round < options.rounds; round++)
      results.push(await probe.vfsBench(page, "shared", { seconds: options.seconds }));
    const limit = median(results.map((r) => r.bareIdb.strict));
    const rows: string[][] = [["commit of one small row", "commits/s", "vs strict IndexedDB", `aim ${AIM}x`]];
    for (const [label, of, { strict }] of ROW_LABELS) {
      const rate = median(results.map(of));
      const ratio = rate / limit;
      rows.push([
        label,
        fmt(rate),
        `${fmt(ratio, 2)}x`,
        label.startsWith("IndexedDB") ? "" : !strict ? "not strict" : ratio >= AIM ? "PASS" : "FAIL",
      ]);
    }
    table(rows);
    const store = median(results.map((r) => r.store));
    console.log(
      `(wa-sqlite build ${results[0]!.build}; the store commits at ${fmt(store / limit, 2)}x a strict IndexedDB transaction; per round: ${results.map((r) => `${fmt(r.store)}/${fmt(r.bareIdb.strict)}`).join(", ")})`,
    );

    const labels = results[0]!.breakdown.map((x) => x.label);
    const breakdown: string[][] = [
      [
        "per commit (instrumented)",
        "IDB requests",
        "IDB transactions",
        "placed while pending",
        "waits",
        "commit() calls",
      ],
    ];
    for (const label of labels) {
      const m = (f: (x: VfsBenchResult["breakdown"][number]) => number, digits: number) =>
        fmt(median(results.map((r) => f(r.breakdown.find((x) => x.label === label)!))), digits);
      const pipelined = label.startsWith("batch-atomic-pipelined");
      breakdown.push([
        label,
        m((x) => x.idbRequests, 1),
        m((x) => x.idbTransactions, 1),
        pipelined ? `${m((x) => x.pipelined * 100, 0)}%` : "",
        pipelined ? m((x) => x.waits, 2) : "",
        pipelined ? m((x) => x.explicitCommits, 2) : "",
      ]);
    }
    table(breakdown);

    if (options.sizes.length > 0)
      await growth(
        b,
        fixtures,
        page,
        { seconds: Math.max(0.5, options.seconds / 2), sizes: options.sizes },
        h,
      );
  } finally {
    await page.close();
  }
}
