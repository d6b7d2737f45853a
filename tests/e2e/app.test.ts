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
    // Independent of what the shell shows: the Svelte app mounted and names itself.
    await page.waitForFunction(() => (document.getElementById("app")?.childElementCount ?? 0) > 0);
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
