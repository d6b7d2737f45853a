import { svelte } from "@sveltejs/vite-plugin-svelte";
import { defineConfig, type Plugin } from "vite";
import { VitePWA } from "vite-plugin-pwa";

/**
 * The CSP in index.html is strict (no inline script or style). The dev server needs a hole the built
 * app does not: injected <style> tags for hot reload. Only `vite serve` gets it. (Connections may go
 * to any http(s) and ws(s) address in both: the server a person sets in the settings is anywhere.)
 */
function devCsp(): Plugin {
  return {
    name: "durable-agent:dev-csp",
    apply: "serve",
    transformIndexHtml(html) {
      return html.replace("style-src 'self'", "style-src 'self' 'unsafe-inline'");
    },
  };
}

/**
 * pi-ai's env-api-keys.js (reading keys from the environment, for Node and Bun) `require`s `node:fs`
 * only under Bun, inside a try. A browser bundle has no `node:fs`: Vite would substitute its
 * "externalized for browser compatibility" stub and warn on every build. That code never runs here
 * (the engine's keys come from the store's settings), so it gets an empty module instead, on purpose.
 */
function noNodeFsInPiAi(): Plugin {
  const stub = "\0pi-ai-no-node-fs";
  return {
    name: "durable-agent:pi-ai-no-node-fs",
    enforce: "pre",
    resolveId(id, importer) {
      if (id === "node:fs" && importer?.includes("@mariozechner/pi-ai/dist/env-api-keys")) return stub;
      return undefined;
    },
    load(id) {
      return id === stub ? "export default {};" : undefined;
    },
  };
}

/**
 * The tab's first script, `src/start.ts`, starts the engine's worker before the app's own scripts
 * arrive (src/lib/engine-start.ts). Vite folds every module script of index.html into one entry, whose
 * code runs only once its whole import graph is fetched, so start.ts is an entry of its own (see
 * `build.rolldownOptions.input`) and this plugin puts its script ahead of the app's: the built chunk
 * in a build, the source under `vite serve`. It is `async`: it runs as soon as it is fetched, not
 * after the document is parsed (a deferred script also waits for the stylesheet); the app calls the
 * same start first thing in case it runs first, and a second call starts nothing.
 */
function earlyEngineStart(): Plugin {
  const source = "src/start.ts";
  // The build's base ("/" or a relative "./" for a build served under any path, as the kill storm's
  // deploys are): the script's address is the page's other assets'.
  let base = "/";
  return {
    name: "durable-agent:early-engine-start",
    configResolved(config) {
      base = config.base.endsWith("/") ? config.base : `${config.base}/`;
    },
    transformIndexHtml: {
      order: "post",
      handler(_html, ctx) {
        let src = `/${source}`;
        if (ctx.bundle) {
          const chunk = Object.values(ctx.bundle).find(
            (c) => c.type === "chunk" && c.isEntry && c.facadeModuleId?.endsWith(source),
          );
          if (!chunk) throw new Error(`the build has no entry chunk for ${source}`);
          src = `${base}${chunk.fileName}`;
        }
        return [
          {
            tag: "script",
            attrs: { type: "module", async: true, crossorigin: true, src },
            injectTo: "head-prepend",
          },
        ];
      },
    },
  };
}

/**
 * Rolldown reports plugin callbacks that take long: vite-plugin-pwa's service-worker generation and
 * the worker bundling always do (seconds on two cores), and there is nothing to act on, so the report
 * is off.
 */
const quietTimings = { checks: { bundlerTimings: false } };

/** A comparable build id (ISO time unless BUILD_ID is set): a newer engine may take a store over. */
const buildId = process.env.BUILD_ID ?? new Date().toISOString();

export default defineConfig({
  define: { __BUILD_ID__: JSON.stringify(buildId) },
  plugins: [
    svelte(),
    devCsp(),
    noNodeFsInPiAi(),
    earlyEngineStart(),
    VitePWA({
      registerType: "autoUpdate",
      // Deferred: a plain script in the head would hold the parser (and so the app) until it and the
      // stylesheet before it arrive.
      injectRegister: "script-defer",
      includeAssets: ["icon-192.png", "icon-512.png"],
      manifest: {
        name: "Durable Agent",
        short_name: "Durable Agent",
        description: "An AI agent whose every step is committed to a database in your browser.",
        start_url: ".",
        scope: ".",
        display: "standalone",
        background_color: "#0f172a",
        theme_color: "#0f172a",
        icons: [
          { src: "icon-192.png", sizes: "192x192", type: "image/png", purpose: "any" },
          { src: "icon-512.png", sizes: "512x512", type: "image/png", purpose: "any" },
          { src: "icon-512.png", sizes: "512x512", type: "image/png", purpose: "maskable" },
        ],
      },
      workbox: {
        // The Asyncify wasm is 2.26 MB: the default 2 MiB cap would fail the build.
        maximumFileSizeToCacheInBytes: 8 * 1024 * 1024,
        // mjs: pdf.js's worker (src/lib/pdf-text.ts), so a PDF is read offline too.
        globPatterns: ["**/*.{js,mjs,css,html,wasm,png,svg,ico,webmanifest}"],
      },
    }),
  ],
  // The engine runs in the workers: they are bundled on their own, with their own plugins.
  worker: { format: "es", plugins: () => [noNodeFsInPiAi()], rolldownOptions: quietTimings },
  optimizeDeps: { exclude: ["@journeyapps/wa-sqlite"] },
  build: {
    target: "es2022",
    rolldownOptions: { ...quietTimings, input: { index: "index.html", start: "src/start.ts" } },
  },
});
