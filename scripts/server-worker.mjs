/**
 * What starting the server's worker from Node needs, shared by `npm run server` (scripts/server.mjs)
 * and the server tests (tests/server/miniflare.ts): the worker bundled into one ES module with
 * esbuild (for workerd: no Node module may reach it; the MCP SDK's client is bundled in, since a
 * space calls MCP servers too), the QuickJS interpreter's WebAssembly as a
 * compiled module beside it (workerd compiles no WebAssembly at run time), and a space's token as
 * worker/server/token.ts checks it, computed with Node's crypto.
 */
import { createHmac } from "node:crypto";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { build } from "esbuild";

/** What the server's entry imports for the interpreter's WebAssembly. */
const QUICKJS_WASM_IMPORT = "@jitl/quickjs-wasmfile-release-sync/wasm";
/** Its module's name beside the worker's (what the bundle imports instead). */
export const QUICKJS_WASM_MODULE = "quickjs.wasm";

/** The worker whose entry is the file `entry` as one ES module's text. */
export async function bundleServerWorker(entry) {
  const result = await build({
    entryPoints: [entry],
    bundle: true,
    format: "esm",
    platform: "neutral",
    conditions: ["workerd", "worker", "browser"],
    // A neutral build reads no package's `main` by default: packages without `exports` (the MCP
    // SDK's client imports ajv, one of them) resolve through these. Packages with `exports` are
    // resolved by those, as before.
    mainFields: ["module", "main"],
    target: "es2022",
    write: false,
    logLevel: "silent",
    plugins: [
      {
        name: "compiled-wasm",
        setup(b) {
          b.onResolve({ filter: /^@jitl\/quickjs-wasmfile-release-sync\/wasm$/ }, () => ({
            path: `./${QUICKJS_WASM_MODULE}`,
            external: true,
          }));
        },
      },
    ],
  });
  const file = result.outputFiles[0];
  if (!file) throw new Error(`esbuild produced no output for ${entry}`);
  return file.text;
}

/** The interpreter's WebAssembly, the bytes of the module the bundle imports. */
export function quickjsWasm() {
  return readFileSync(createRequire(import.meta.url).resolve(QUICKJS_WASM_IMPORT));
}

/** The token of `space` under `secret` (worker/server/token.ts's scheme). */
export function spaceToken(secret, space) {
  return `${space}.${createHmac("sha256", secret).update(`space:${space}`).digest("base64url")}`;
}
