/**
 * The QuickJS engine, loaded once, lazily: the first script pays for fetching and compiling the
 * WebAssembly module (dynamic imports, so the tab's bundle never contains it and an engine that runs
 * no script never loads it); later scripts reuse the module and only make a fresh runtime. The
 * variant is fixed (the release build with a separate .wasm file, synchronous), and its name is part
 * of every script's fingerprint: a replay under another variant is refused.
 */
import type { QuickJSWASMModule } from "quickjs-emscripten-core";

/** The engine and variant, as recorded in a script's fingerprint. */
export const ENGINE_VARIANT = "quickjs-emscripten-core@0.32.0+@jitl/quickjs-wasmfile-release-sync@0.32.0";

let loading: Promise<QuickJSWASMModule> | undefined;

/** The QuickJS module (loaded on the first call; a failed load is retried by the next). */
export function loadQuickJS(): Promise<QuickJSWASMModule> {
  if (!loading) {
    loading = (async () => {
      const [core, variant] = await Promise.all([
        import("quickjs-emscripten-core"),
        import("@jitl/quickjs-wasmfile-release-sync"),
      ]);
      return core.newQuickJSWASMModuleFromVariant(variant.default);
    })();
    loading.catch(() => {
      loading = undefined;
    });
  }
  return loading;
}

/** Whether the module is loaded already (a bench tells a cold start from a warm one). */
export function quickJSLoaded(): boolean {
  return loading !== undefined;
}
