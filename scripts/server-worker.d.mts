/** Types for server-worker.mjs, so TypeScript tests can import it. */
export declare const QUICKJS_WASM_MODULE: string;
export declare function bundleServerWorker(entry: string): Promise<string>;
export declare function quickjsWasm(): Uint8Array<ArrayBuffer>;
export declare function spaceToken(secret: string, space: string): string;
