/**
 * What an engine host gets from the worker that runs it (shared-worker.ts or dedicated-worker.ts):
 * its store's name, kind and build, and how to open it. Everything else the engine host does is the
 * same for both kinds of worker.
 */
import type { SqliteLine } from "../store/line.ts";
import type { MarkerFile } from "./store-marker.ts";

export interface HostPlatform {
  readonly storeName: string;
  readonly storeKind: "idb" | "opfs";
  /** Comparable build id (ISO time of the build): a newer one may take the store over. */
  readonly build: string;
  readonly jspi: boolean;
  openStore(): Promise<SqliteLine>;
  /** The store's marker outside it (store-marker.ts); without one, a discarded store goes unnoticed. */
  readonly marker?: MarkerFile;
  /** Open a throwaway store of the same kind and build under another name (the bench). */
  openScratchStore(name: string): Promise<SqliteLine>;
  /** Delete a scratch store's data (the bench cleans up after itself). */
  deleteScratchStore(name: string): Promise<void>;
}
