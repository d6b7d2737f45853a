/**
 * Declarations the package's own `src/types/index.d.ts` lacks (the JSPI build and the OPFS VFS
 * examples). Deliberately loose: `browser.ts` casts each to the small surface it uses.
 */
declare module "@journeyapps/wa-sqlite/dist/wa-sqlite-jspi.mjs" {
  export default function ModuleFactory(config?: object): Promise<unknown>;
}

declare module "@journeyapps/wa-sqlite/src/examples/OPFSCoopSyncVFS.js" {
  export const OPFSCoopSyncVFS: unknown;
}

declare module "@journeyapps/wa-sqlite/src/examples/OPFSAnyContextVFS.js" {
  export const OPFSAnyContextVFS: unknown;
}
