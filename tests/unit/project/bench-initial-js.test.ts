import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { afterEach, describe, expect, test } from "vitest";
import { measureInitialJs, staticImports } from "../../bench/initial-js.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function dist(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), "initial-js-"));
  dirs.push(dir);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(dir, path, ".."), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  return dir;
}

describe("the tab's initial JavaScript", () => {
  test("static imports of built code: named, bare and re-exports; never a dynamic import()", () => {
    const code =
      'import{a as e}from"./runtime-1.js";import"./side.js";export*from"../up.js";' +
      'const m=()=>import("./lazy.js");el.importNode(x,!0);const s="import it";';
    expect(staticImports(code)).toEqual(["./runtime-1.js", "./side.js", "../up.js"]);
  });

  test("counts the page's scripts and the closure of the entry's static imports, not lazy chunks", () => {
    const entry = 'import{t}from"./shared.js";const l=()=>import("./lazy.js");t(l);';
    const shared = 'import"./runtime.js";export const t=f=>f;';
    const runtime = "export{};";
    const sw = "navigator.serviceWorker.register('/sw.js');";
    const dir = dist({
      "index.html":
        '<html><head><script type="module" crossorigin src="/assets/entry.js"></script>' +
        '<link rel="modulepreload" href="/assets/shared.js"><script id="sw" src="/registerSW.js"></script>' +
        '<script src="https://example.com/x.js"></script></head></html>',
      "assets/entry.js": entry,
      "assets/shared.js": shared,
      "assets/runtime.js": runtime,
      "assets/lazy.js": "export const big='x'.repeat(100000);",
      "registerSW.js": sw,
    });
    const measured = measureInitialJs(dir);
    expect(measured.files.map((f) => f.path)).toEqual([
      "assets/entry.js",
      "assets/shared.js",
      "assets/runtime.js",
      "registerSW.js",
    ]);
    const texts = [entry, shared, runtime, sw];
    expect(measured.bytes).toBe(texts.reduce((n, t) => n + Buffer.byteLength(t), 0));
    expect(measured.gzip).toBe(texts.reduce((n, t) => n + gzipSync(t).length, 0));
  });
});
