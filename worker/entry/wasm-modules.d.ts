/** The QuickJS interpreter's WebAssembly, imported as a compiled module by the server's bundle (workerd). */
declare module "@jitl/quickjs-wasmfile-release-sync/wasm" {
  const module: WebAssembly.Module;
  export default module;
}
