/** The built app (dist/) loads under its CSP, renders, and registers its service worker. */
import { afterAll, beforeAll, expect, test } from "vitest";
import { appDir, launchBrowser, type StaticServer, serveStatic } from "./browser.ts";

let server: StaticServer;

beforeAll(async () => {
  server = await serveStatic(appDir());
});

afterAll(async () => {
  await server?.close();
});

test("the app mounts under its strict CSP and installs its service worker", async () => {
  const b = await launchBrowser();
  try {
    const page = await b.newPage();
    const problems: string[] = [];
    page.on("console", (m) => {
      if (m.type() === "error") problems.push(m.text());
    });
    page.on("pageerror", (e) => problems.push(e.message));
    await page.goto(server.url);
    // The Svelte app mounted (index.html's static shell has no engine status) and names itself.
    await page.locator('[data-testid="engine-status"]').waitFor({ state: "attached" });
    expect(await page.title()).toBe("Durable Agent");
    await page.getByText("Durable Agent").first().waitFor();
    const csp = await page.locator('meta[http-equiv="Content-Security-Policy"]').getAttribute("content");
    expect(csp).toContain("script-src 'self' 'wasm-unsafe-eval'");
    expect(csp).toContain("worker-src 'self'");
    const registered = await page.evaluate(async () => {
      const registration = await navigator.serviceWorker.ready;
      return registration.active?.scriptURL ?? "";
    });
    expect(registered).toBe(`${server.url}sw.js`);
    const manifest = await page.evaluate(async () => {
      const link = document.querySelector<HTMLLinkElement>('link[rel="manifest"]');
      return link
        ? ((await (await fetch(link.href)).json()) as { name: string; icons: unknown[] })
        : undefined;
    });
    expect(manifest?.name).toBe("Durable Agent");
    expect(manifest?.icons.length).toBeGreaterThan(0);
    expect(problems).toEqual([]);
  } finally {
    await b.close();
  }
});

test("the static shell paints first; the app mounts once the engine has left starting, and replaces the shell", async () => {
  const b = await launchBrowser();
  try {
    const page = await b.newPage();
    // The shell as the browser first shows it: index.html alone, before any script runs.
    await page.route(/\.js$/, (route) => route.abort());
    await page.goto(`${server.url}?store=${crypto.randomUUID()}`);
    const shell = page.locator("#app .boot-shell");
    await shell.waitFor();
    expect(await shell.locator("header").textContent()).toContain("Durable Agent");
    expect(await shell.getByRole("status").textContent()).toBe("Starting…");
    await page.unroute(/\.js$/);
    // The store made once (its first open is slow on a loaded machine), then the page as after a reload.
    await page.reload();
    await page.locator('[data-testid="engine-status"][data-phase="ready"]').waitFor({ state: "attached" });
    await page.reload();
    await page.locator('[data-testid="engine-status"][data-phase="ready"]').waitFor({ state: "attached" });
    const seen = await page.evaluate(() => {
      const mount = performance.getEntriesByName("durable-agent:app-mounted")[0] as
        | PerformanceMark
        | undefined;
      return {
        phase: (mount?.detail as { phase?: string } | undefined)?.phase,
        mountedAt: mount?.startTime,
        paintedAt: performance.getEntriesByName("first-contentful-paint")[0]?.startTime,
      };
    });
    // Mounted once the engine answered, or, were it still starting, only once the cap (src/main.ts
    // MOUNT_CAP_MS, a second from the app's first line) had passed.
    expect(seen.phase).toBeDefined();
    expect(seen.mountedAt).toBeGreaterThan(0);
    if (seen.phase === "starting") expect(seen.mountedAt).toBeGreaterThanOrEqual(1_000);
    // The shell was painted before the mount, and is gone with it.
    expect(seen.paintedAt).toBeLessThan(seen.mountedAt!);
    expect(await page.locator(".boot-shell").count()).toBe(0);
    expect(await page.locator("#app header").count()).toBe(1);
  } finally {
    await b.close();
  }
});
