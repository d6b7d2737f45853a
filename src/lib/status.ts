/**
 * The header's status in a person's words. Pure: it maps what the tab knows (the engine's status,
 * who runs the engine, the network, live work, a waiting app update) to one short label and a tone;
 * the engine's own words (store kind, build, worker mode) are details shown only on demand.
 */
import type { EngineStatus, TaskGraph } from "../../worker/protocol/index.ts";

export type StatusTone = "ok" | "busy" | "warn" | "bad";

export interface StatusFacts {
  readonly status: EngineStatus;
  /** `elsewhere`: another tab runs the engine and this one only reads. */
  readonly mode: "shared" | "dedicated" | "elsewhere";
  /** The network as last probed (not only `navigator.onLine`, which says "online" on a dead LAN). */
  readonly online: boolean;
  /** Some task is live (a run, a compaction, a retry wait). */
  readonly working: boolean;
  /** The live work only waits for a person: a tool call awaits approval and nothing else runs (`workOf`). */
  readonly paused?: boolean;
}

/**
 * What the live tasks amount to: "idle" (none), "paused" (a tool call awaits a person's approval
 * and every other live task only waits, on it or on others), or "working".
 */
export function workOf(graph: TaskGraph): "idle" | "working" | "paused" {
  let approvals = 0;
  let active = 0;
  for (const node of Object.values(graph.tasks)) {
    const s = node.state;
    if (node.kind === "pi.tool" && s.status === "running" && s.phase === "approval") approvals++;
    else if (s.status !== "waiting") active++;
  }
  if (approvals === 0 && active === 0 && Object.keys(graph.tasks).length === 0) return "idle";
  return approvals > 0 && active === 0 ? "paused" : "working";
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
      // Nothing goes on until the person decides, online or not: say so, not "Working".
      if (facts.paused) return { label: "Paused for you", tone: "warn" };
      if (!facts.online)
        return { label: facts.working ? "Offline · waiting to go on" : "Offline", tone: "warn" };
      return facts.working ? { label: "Working", tone: "busy" } : { label: "Ready", tone: "ok" };
  }
}

/** One row of the details panel. */
export interface DetailRow {
  readonly label: string;
  readonly value: string;
}

/**
 * The details panel: first what a person asks (where the data is and whether the browser keeps it),
 * in plain words; the engine's own words (store kind, database build, where the engine runs) apart,
 * for the "Technical details" disclosure.
 */
export interface EngineDetails {
  readonly plain: readonly DetailRow[];
  readonly technical: readonly DetailRow[];
}

/** The engine's details for the "About the engine" panel. */
export function engineDetails(status: EngineStatus, mode: StatusFacts["mode"]): EngineDetails {
  if (status.phase !== "ready")
    return {
      plain: [{ label: "Your data", value: notOpenWords[status.phase] }],
      technical: [{ label: "Engine phase", value: status.phase }],
    };
  const opfs = status.storeKind === "opfs" || status.storeKind === "opfs-lent";
  return {
    plain: [
      {
        label: "Your data",
        value: opfs
          ? "Stored in this browser (its private file system)"
          : "Stored in this browser (IndexedDB)",
      },
      { label: "Kept by the browser", value: persistenceWords(status.persisted) },
    ],
    technical: [
      {
        label: "Store",
        value: `SQLite on ${opfs ? "the origin private file system (opfs)" : "IndexedDB (idb)"}`,
      },
      { label: "Database build", value: `${status.build}${status.jspi ? " (JSPI)" : ""}` },
      {
        label: "Engine runs in",
        value: mode === "shared" ? "a shared worker (all tabs use it)" : "a worker of one tab",
      },
    ],
  };
}

/** Where the data stands while the engine is not ready here. */
const notOpenWords: Record<Exclude<EngineStatus["phase"], "ready">, string> = {
  starting: "Opening…",
  "waiting-for-lock": "Open in another tab",
  "handing-over": "A newer version is taking over",
  "handed-over": "A newer version took over",
  failed: "Could not be opened here",
};

/** The storage-persistence answer, said without alarm. */
export function persistenceWords(persisted: boolean | undefined): string {
  if (persisted === true) return "yes: the browser keeps this data until you delete it";
  if (persisted === false)
    return "best effort: the browser may clear it if the disk runs low; export what you want to keep";
  return "not known in this browser";
}
