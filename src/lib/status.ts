/**
 * The header's status in a person's words. Pure: it maps what the tab knows (the engine's status,
 * who runs the engine, the network, live work, a waiting app update) to one short label and a tone;
 * the engine's own words (store kind, build, worker mode) are details shown only on demand.
 */
import type { EngineStatus } from "../../worker/protocol.ts";

export type StatusTone = "ok" | "busy" | "warn" | "bad";

export interface StatusFacts {
  readonly status: EngineStatus;
  /** `elsewhere`: another tab runs the engine and this one only reads. */
  readonly mode: "shared" | "dedicated" | "elsewhere";
  /** The network as last probed (not only `navigator.onLine`, which says "online" on a dead LAN). */
  readonly online: boolean;
  /** Some task is live (a run, a compaction, a retry wait). */
  readonly working: boolean;
}

export interface StatusWords {
  readonly label: string;
  readonly tone: StatusTone;
}

/** The one label the header shows. A failure's own message wins: it says what happened. */
export function statusWords(facts: StatusFacts): StatusWords {
  const { status } = facts;
  switch (status.phase) {
    case "failed":
      return { label: status.message, tone: "bad" };
    case "handing-over":
    case "handed-over":
      return { label: "A newer version took over", tone: "warn" };
    case "waiting-for-lock":
      return { label: "Read-only: open in another tab", tone: "warn" };
    case "starting":
      return { label: "Starting…", tone: "busy" };
    case "ready":
      if (facts.mode === "elsewhere") return { label: "Read-only: open in another tab", tone: "warn" };
      if (!facts.online)
        return { label: facts.working ? "Offline · waiting to go on" : "Offline", tone: "warn" };
      return facts.working ? { label: "Working", tone: "busy" } : { label: "Ready", tone: "ok" };
  }
}

/** The engine's details, for the "About this app" panel: label/value rows in plain words. */
export function engineDetails(
  status: EngineStatus,
  mode: StatusFacts["mode"],
): readonly { readonly label: string; readonly value: string }[] {
  if (status.phase !== "ready") return [{ label: "Engine", value: status.phase }];
  return [
    {
      label: "Storage",
      value: status.storeKind === "opfs" ? "Origin private file system" : "IndexedDB",
    },
    { label: "Database build", value: `${status.build}${status.jspi ? " (JSPI)" : ""}` },
    {
      label: "Engine runs in",
      value: mode === "shared" ? "a shared worker (all tabs use it)" : "a worker of one tab",
    },
    { label: "Kept by the browser", value: persistenceWords(status.persisted) },
  ];
}

/** The storage-persistence answer, said without alarm. */
export function persistenceWords(persisted: boolean | undefined): string {
  if (persisted === true) return "yes: the browser keeps this data until you delete it";
  if (persisted === false)
    return "best effort: the browser may clear it if the disk runs low; export what you want to keep";
  return "not known in this browser";
}
