/**
 * The tab's initial JavaScript, as the browser fetches it before the app can run: every script
 * `index.html` loads (the entry module and any classic script such as the service worker's
 * registration) and, for modules, the closure of their static imports. Lazy chunks (`import()`)
 * and the engine's worker scripts are not initial and are not counted. Sizes are gzip at zlib's
 * default level, as a static server would send them. Reads a built dist/ directory; no browser.
 */
import { readFileSync } from "node:fs";
import { dirname, join, normalize, relative } from "node:path";
import { gzipSync } from "node:zlib";

/** The budget of the tab's initial JavaScript, gzip (issue 31; enforced by tests/e2e/initial-js-budget.test.ts). */
export const INITIAL_JS_BUDGET_KB = 80;

export interface InitialFile {
  /** Relative to the dist/ directory. */
  readonly path: string;
  readonly bytes: number;
  readonly gzip: number;
}

export interface InitialJs {
  readonly files: readonly InitialFile[];
  readonly bytes: number;
  readonly gzip: number;
}

/** The scripts `index.html` loads: `[src, isModule]` in document order. */
function pageScripts(html: string): Array<{ src: string; module: boolean }> {
  const out: Array<{ src: string; module: boolean }> = [];
  for (const tag of html.match(/<script\b[^>]*>/gi) ?? []) {
    const src = /\ssrc\s*=\s*["']([^"']+)["']/i.exec(tag)?.[1];
    if (src) out.push({ src, module: /\stype\s*=\s*["']module["']/i.test(tag) });
  }
  return out;
}

/**
 * The relative specifiers a built module imports statically: `import ... from "./x.js"`,
 * `import "./x.js"`, `export ... from "./x.js"`. A dynamic `import("./x.js")` is not one (the
 * character after `import` is a parenthesis, which the pattern never crosses).
 */
export function staticImports(code: string): string[] {
  const found = new Set<string>();
  const pattern = /\b(?:import|export)\s*(?:[^"'`()]*?\bfrom\s*)?["'`](\.{1,2}\/[^"'`]+)["'`]/g;
  for (const match of code.matchAll(pattern)) found.add(match[1]!);
  return [...found];
}

/** Measure the initial JavaScript of the built app in `distDir`. */
export function measureInitialJs(distDir: string): InitialJs {
  const html = readFileSync(join(distDir, "index.html"), "utf8");
  const files: InitialFile[] = [];
  const seen = new Set<string>();
  const visit = (path: string, module: boolean) => {
    if (seen.has(path)) return;
    seen.add(path);
    const code = readFileSync(join(distDir, path));
    files.push({ path, bytes: code.length, gzip: gzipSync(code).length });
    if (!module) return;
    for (const spec of staticImports(code.toString("utf8")))
      visit(relative(distDir, normalize(join(distDir, dirname(path), spec))), true);
  };
  for (const script of pageScripts(html)) {
    if (/^[a-z]+:/i.test(script.src)) continue; // another origin: not the app's
    visit(normalize(script.src.replace(/^\/+/, "")), script.module);
  }
  return {
    files,
    bytes: files.reduce((n, f) => n + f.bytes, 0),
    gzip: files.reduce((n, f) => n + f.gzip, 0),
  };
}
