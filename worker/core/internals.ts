/**
 * The core's internals, for the core itself and for tests: a harness's session (the commit line and
 * its records) and its scheduler. They are ES-private fields of `Harness`; this module is the one
 * door to them, opened by `harness.ts` when it loads. Nothing above the core imports it: the agent
 * and the host use the harness's public operations (the import-direction test enforces this).
 */
import type { Scheduler } from "./scheduler.ts";
import type { Session } from "./session.ts";

export interface CoreInternals {
  readonly session: Session;
  readonly scheduler: Scheduler;
}

let reach: ((harness: object) => CoreInternals) | undefined;

/** Called once, by `harness.ts`, with the function that reads a harness's private fields. */
export function grantInternals(read: (harness: object) => CoreInternals): void {
  if (reach) throw new Error("core internals granted twice");
  reach = read;
}

/** The session and scheduler of a harness (throws a TypeError for anything that is not a `Harness`). */
export function internals(harness: object): CoreInternals {
  if (!reach) throw new Error("core internals not granted: harness.ts is not loaded");
  return reach(harness);
}
