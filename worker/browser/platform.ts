/**
 * What an engine host gets from the worker that runs it (shared-worker.ts or dedicated-worker.ts):
 * its store's name, kind and build, and how to open it. Everything else the engine host does is the
 * same for both kinds of worker.
 */
import type { LentOpenParts } from "../store/lent/wire.ts";
import type { OwnedStore, Store } from "../store/types.ts";
import type { MarkerFile } from "./store-marker.ts";

/** The parts of a store's open that the engine's timeline stamps (EngineTimeline). */
export type OpenPart =
  | "kindAt"
  | "lenderAt"
  | "lentPortAt"
  | "lentOpenAt"
  // The lent worker's own steps, on its clock (worker/store/lent/wire.ts `LentOpenParts`).
  | "lentScriptAt"
  | "lentCompileAt"
  | "lentWasmAt"
  | "lentAskedAt"
  | "lentInstanceAt"
  | "lentVfsAt"
  | "lentFileAt"
  | "lentOpenedAt";
/** The timeline's part for each of the lent worker's own steps (`LentOpenParts`, same order). */
export const LENT_PARTS = {
  scriptAt: "lentScriptAt",
  compileAt: "lentCompileAt",
  wasmAt: "lentWasmAt",
  askedAt: "lentAskedAt",
  instanceAt: "lentInstanceAt",
  vfsAt: "lentVfsAt",
  fileAt: "lentFileAt",
  openedAt: "lentOpenedAt",
} as const satisfies Record<keyof LentOpenParts, OpenPart>;
/** Called when a part of the open ended: now, or `at` (ms since the epoch) for a part stamped elsewhere. */
export type OpenStamp = (part: OpenPart, at?: number) => void;

export interface HostPlatform {
  readonly storeName: string;
  /**
   * `opfs-lent`: the opfs store in a dedicated worker a tab lends the SharedWorker (worker/store/lent/).
   * The SharedWorker's platform may choose it when the store opens (store-kind.ts): read it after.
   */
  readonly storeKind: "idb" | "opfs" | "opfs-lent";
  /** Comparable build id (ISO time of the build): a newer one may take the store over. */
  readonly build: string;
  readonly jspi: boolean;
  /** Open the store; `stamp` hears when each part of the open ended (the recovery bench's parts). */
  openStore(stamp?: OpenStamp): Promise<OwnedStore>;
  /** The store's marker outside it (store-marker.ts); without one, a discarded store goes unnoticed. */
  readonly marker?: MarkerFile | undefined;
  /** Open a throwaway store of the same kind and build under another name (the bench). */
  openScratchStore(name: string): Promise<Store>;
  /** Delete a scratch store's data (the bench cleans up after itself). */
  deleteScratchStore(name: string): Promise<void>;
}
