/** Types for chromium.mjs, so TypeScript tests can import it. */
export declare const CHROMIUM_FLAGS: readonly string[];
export declare function findChromium(): string;
