/**
 * The two-device bench (issue 27): two browsers with profiles of their own (two devices) attached to
 * one server space, both showing the same server conversation. Device A sends messages; for each, the
 * time from A pressing Enter to the message's text on B's screen (the submission committed in the
 * server's Durable Object store, then pushed to B's watch over its WebSocket and rendered), beside the
 * same time to A's own screen. Then, while the demo model streams each answer, the time from A's
 * screen showing a partial to B's screen showing it (the two devices' skew: both get the same commit).
 * Median and p95 of each. The server is the real server worker (worker/entry/server.ts, the
 * `SpaceObject` class `npm run server` runs) in workerd through miniflare 3 on a temporary folder.
 *
 * Clocks: every stamp is `performance.timeOrigin + performance.now()`, in Node for the press and in
 * each page for its screen (a MutationObserver); all are this machine's clock. Figures only, never a
 * failure. Env: BENCH_DEVICE_MESSAGES (default 20).
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { Page } from "playwright-core";
import { findChromium } from "../../scripts/chromium.mjs";
import { type LaunchedBrowser, launchBrowser, type StaticServer, serveStatic } from "../e2e/browser.ts";
import { type ServerWorker, startServerWorker } from "../server/miniflare.ts";
import { fmt, machineLoad, median, percentile, table } from "./report.ts";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const MESSAGES = Number(process.env["BENCH_DEVICE_MESSAGES"] ?? 20);
const SPACE = "bench-devices";

const now = () => performance.timeOrigin + performance.now();
const ms = (n: number) => (Number.isFinite(n) ? `${fmt(n, 1)} ms` : "-");

async function until<T>(what: string, probe: () => Promise<T>, ok: (v: T) => boolean): Promise<T> {
  const deadline = Date.now() + 120_000;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined && ok(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A device: the app in its own browser (profile), attached to the space with its token. */
async function device(browser: LaunchedBrowser, app: StaticServer, server: ServerWorker): Promise<Page> {
  const page = await browser.newPage();
  await page.setViewportSize({ width: 1280, height: 800 });
  await page.goto(`${app.url}?store=bench-devices-${Date.now().toString(36)}`);
  await page
    .locator('[data-testid="engine-status"][data-phase="ready"]')
    .waitFor({ state: "attached", timeout: 120_000 });
  await page.getByTestId("open-settings").first().click();
  await page.getByTestId("server-url").fill(server.url().toString());
  await page.getByTestId("server-token").fill(server.token(SPACE));
  await page.getByTestId("server-save").click();
  await until(
    "connected to the space",
    () =>
      page.evaluate(
        () => document.querySelector('[data-testid="server-section"]')?.getAttribute("data-state") ?? "",
      ),
    (s) => s === "connected",
  );
  await page.getByRole("button", { name: "Close settings" }).click();
  return page;
}

/**
 * Record, in the page, when the transcript first shows `globalThis.want` (a marker) and every new
 * text of the streaming partial. A string, not a function: tsx would wrap named closures in a helper
 * the page lacks.
 */
const OBSERVE = `(() => {
  globalThis.shown = {};
  globalThis.partials = [];
  let last = "";
  new MutationObserver(() => {
    const entries = document.querySelector('[data-testid="entries"]');
    const want = globalThis.want;
    if (entries && want && !(want in globalThis.shown) && entries.textContent.includes(want))
      globalThis.shown[want] = performance.timeOrigin + performance.now();
    const el = document.querySelector('[data-testid="partial"]');
    const text = el ? el.textContent : "";
    if (el && text !== last) {
      last = text;
      globalThis.partials.push({ at: performance.timeOrigin + performance.now(), text });
    }
  }).observe(document.body, { subtree: true, childList: true, characterData: true });
})()`;

interface Seen {
  shown: Record<string, number>;
  partials: Array<{ at: number; text: string }>;
}
const seen = (page: Page) =>
  page.evaluate(`({ shown: globalThis.shown, partials: globalThis.partials })`) as Promise<Seen>;

const answersSettled = (page: Page, n: number) =>
  until(
    `${n} settled answers`,
    () =>
      page.evaluate(() => ({
        busy: document.querySelectorAll('[data-testid="partial"], [data-testid="tool-slot"]').length,
        count: document.querySelectorAll('[data-testid="entries"] > [data-kind="pi.assistant"]').length,
      })),
    (s) => s.busy === 0 && s.count >= n,
  );

const plain = (text: string) => text.toLowerCase().replace(/[^a-z0-9]/g, "");

async function main(): Promise<void> {
  if (!existsSync(join(root, "dist/index.html"))) {
    const built = spawnSync(process.execPath, [join(root, "node_modules/vite/bin/vite.js"), "build"], {
      cwd: root,
      stdio: "inherit",
    });
    if (built.status !== 0) throw new Error("vite build failed");
  }
  const app = await serveStatic(join(root, "dist"));
  const server = await startServerWorker({
    entry: join(root, "worker/entry/server.ts"),
    objects: { SPACES: "SpaceObject" },
  });
  const executablePath = findChromium();
  const browserA = await launchBrowser({ executablePath });
  const browserB = await launchBrowser({ executablePath });
  try {
    const a = await device(browserA, app, server);
    const b = await device(browserB, app, server);
    // A makes a conversation on the server; B opens the same one.
    await a.getByTestId("server-new").click();
    const hash = await until(
      "A on its new server conversation",
      () => a.evaluate(() => location.hash),
      (h) => /^#\/s\/\d+$/.test(h),
    );
    await b.evaluate((h) => {
      location.hash = h;
    }, hash);
    await b.getByTestId("server-home").waitFor();
    for (const page of [a, b]) await page.evaluate(OBSERVE);

    const toB: number[] = [];
    const toA: number[] = [];
    const skew: number[] = [];
    let partialsUnmatched = 0;
    for (let i = 1; i <= MESSAGES; i++) {
      const marker = `device message ${i} ${Math.random().toString(36).slice(2, 8)}`;
      for (const page of [a, b])
        await page.evaluate(
          `(() => { globalThis.want = ${JSON.stringify(marker)}; globalThis.partials = []; })()`,
        );
      const box = a.getByRole("textbox", { name: "message" });
      await box.fill(marker);
      const pressed = now();
      await box.press("Enter");
      await answersSettled(b, i);
      await answersSettled(a, i);
      const [seenA, seenB] = await Promise.all([seen(a), seen(b)]);
      const atA = seenA.shown[marker];
      const atB = seenB.shown[marker];
      if (atA !== undefined) toA.push(atA - pressed);
      if (atB !== undefined) toB.push(atB - pressed);
      for (const p of seenA.partials) {
        const tail = plain(p.text).slice(-24);
        if (tail.length < 8) continue;
        const other = seenB.partials.find((q) => plain(q.text).includes(tail));
        if (other) skew.push(other.at - p.at);
        else partialsUnmatched++;
      }
    }
    console.log(`\ntwo devices on one server conversation (${MESSAGES} messages; load ${machineLoad()})`);
    const row = (name: string, values: number[]) => [
      name,
      String(values.length),
      ms(median(values)),
      ms(percentile(values, 95)),
      ms(Math.max(...values)),
    ];
    table([
      ["", "n", "median", "p95", "max"],
      row("A presses Enter -> on A's screen", toA),
      row("A presses Enter -> on B's screen (the other device)", toB),
      row("a streamed partial: A's screen -> B's screen", skew),
    ]);
    console.log(
      `ratio B/A (median): ${fmt(median(toB) / median(toA), 2)}x; partials seen on A but not matched on B: ${partialsUnmatched}`,
    );
  } finally {
    await browserA.close();
    await browserB.close();
    await server.stop();
    await app.close();
  }
}

await main();
