/**
 * What engines of one store say to each other in a browser, apart from the tab protocol: the store's
 * Web Lock (held by the engine that owns the store) and the BroadcastChannel on which a new engine
 * asks the owner to hand the store over (owner.ts). Browser-only, engine-only: no tab reads these.
 */

export const storeLockName = (store: string) => `store:${store}`;
export const handoverChannelName = (store: string) => `engine:${store}`;

/** Engines of one store talk over BroadcastChannel to hand the store over. */
export type HandoverMessage =
  | { type: "handover-request"; from: string; build: string }
  | { type: "handover-released"; from: string; build: string }
  | { type: "owner-ready"; from: string; build: string };
