/**
 * The header's status in a person's words (src/lib/status.ts): what each engine phase, host mode,
 * network state and live work says, and the engine's details shown on demand.
 */
import { describe, expect, test } from "vitest";
import {
  engineDetails,
  persistenceWords,
  type StatusFacts,
  statusWords,
  workOf,
} from "../../../src/lib/status.ts";
import type { EngineStatus, TaskGraph, TaskGraphNode } from "../../../worker/protocol/index.ts";

const ready: EngineStatus = { phase: "ready", storeKind: "idb", build: "jspi", jspi: true, persisted: false };
const facts = (over: Partial<StatusFacts> = {}): StatusFacts => ({
  status: ready,
  mode: "shared",
  online: true,
  working: false,
  ...over,
});

describe("statusWords", () => {
  test("an idle engine is Ready, live work makes it Working, and no engine words leak into the label", () => {
    expect(statusWords(facts())).toEqual({ label: "Ready", tone: "ok" });
    expect(statusWords(facts({ working: true }))).toEqual({ label: "Working", tone: "busy" });
    for (const f of [facts(), facts({ working: true }), facts({ online: false })]) {
      expect(statusWords(f).label).not.toMatch(/idb|opfs|jspi|worker|shared/i);
    }
  });

  test("the probed network wins over readiness: offline, and offline while work waits", () => {
    expect(statusWords(facts({ online: false }))).toEqual({ label: "Offline", tone: "warn" });
    expect(statusWords(facts({ online: false, working: true })).label).toBe("Offline · waiting to go on");
  });

  test("a tab whose engine runs in another tab says it is read-only here", () => {
    expect(statusWords(facts({ mode: "elsewhere" })).label).toBe("Read-only: open in another tab");
    expect(
      statusWords(facts({ status: { phase: "waiting-for-lock", detail: "x" }, mode: "elsewhere" })).label,
    ).toBe("Read-only: open in another tab");
  });

  test("a failure shows its own message; a handover says a newer version took over", () => {
    const failed: EngineStatus = {
      phase: "failed",
      stage: "run",
      reason: "quota",
      message: "storage is full",
      advice: "Free up space",
    };
    expect(statusWords(facts({ status: failed }))).toEqual({ label: "storage is full", tone: "bad" });
    expect(statusWords(facts({ status: { phase: "handed-over", detail: "d" } })).label).toBe(
      "A newer version took over",
    );
    expect(statusWords(facts({ status: { phase: "starting", detail: "d" } })).label).toBe("Starting…");
  });
});

describe("engineDetails", () => {
  const rows = (list: readonly { label: string; value: string }[]) =>
    Object.fromEntries(list.map((r) => [r.label, r.value]));

  test("the first lines say in plain words where the data is and whether the browser keeps it", () => {
    const { plain } = engineDetails(ready, "shared");
    expect(plain[0]).toEqual({ label: "Your data", value: "Stored in this browser (IndexedDB)" });
    expect(rows(plain)["Kept by the browser"]).toMatch(/best effort/);
    const opfs = engineDetails({ ...ready, storeKind: "opfs", jspi: false, build: "asyncify" }, "dedicated");
    expect(opfs.plain[0]?.value).toBe("Stored in this browser (its private file system)");
    // No engine words in the plain part: store kinds, builds and workers are technical details.
    for (const d of [engineDetails(ready, "shared"), opfs])
      expect(d.plain.map((r) => `${r.label} ${r.value}`).join(" ")).not.toMatch(
        /\bidb\b|opfs|jspi|asyncify|worker|SQLite/i,
      );
  });

  test("the engine's own words are the technical details: store, build, where it runs", () => {
    const technical = rows(engineDetails(ready, "shared").technical);
    expect(technical["Store"]).toBe("SQLite on IndexedDB (idb)");
    expect(technical["Database build"]).toBe("jspi (JSPI)");
    expect(technical["Engine runs in"]).toMatch(/shared worker/);
    const opfs = rows(
      engineDetails({ ...ready, storeKind: "opfs", jspi: false, build: "asyncify" }, "dedicated").technical,
    );
    expect(opfs["Store"]).toBe("SQLite on the origin private file system (opfs)");
    expect(opfs["Database build"]).toBe("asyncify");
    expect(opfs["Engine runs in"]).toBe("a worker of one tab");
  });

  test("an engine not ready here says so in words, its phase only among the technical details", () => {
    const starting = engineDetails({ phase: "starting", detail: "d" }, "shared");
    expect(starting.plain).toEqual([{ label: "Your data", value: "Opening…" }]);
    expect(starting.technical).toEqual([{ label: "Engine phase", value: "starting" }]);
    expect(engineDetails({ phase: "waiting-for-lock", detail: "d" }, "elsewhere").plain[0]?.value).toBe(
      "Open in another tab",
    );
  });

  test("persistence is said without alarm, and an unknown answer says so", () => {
    expect(persistenceWords(true)).toMatch(/^yes/);
    expect(persistenceWords(false)).not.toMatch(/evict|warning|danger/i);
    expect(persistenceWords(undefined)).toBe("not known in this browser");
  });
});

describe("workOf and the paused status", () => {
  const node = (id: number, kind: string, state: TaskGraphNode["state"]): TaskGraphNode => ({
    id,
    kind,
    conversationId: 1,
    background: false,
    abortRequested: false,
    state,
    conversations: [],
  });
  const graph = (...nodes: TaskGraphNode[]): TaskGraph => ({
    tasks: Object.fromEntries(nodes.map((n) => [String(n.id), n])),
  });
  const generationWaiting = node(1, "pi.generation", {
    status: "waiting",
    phase: "tools",
    on: [2],
    policy: "allSettled",
  });
  const approval = node(2, "pi.tool", { status: "running", phase: "approval" });

  test("a run whose only live work is a tool call awaiting approval is paused; any other running task makes it working", () => {
    expect(workOf(graph())).toBe("idle");
    expect(workOf(graph(generationWaiting, approval))).toBe("paused");
    expect(
      workOf(graph(generationWaiting, node(2, "pi.tool", { status: "running", phase: "execute" }))),
    ).toBe("working");
    expect(
      workOf(graph(generationWaiting, approval, node(3, "pi.tool", { status: "running", phase: "execute" }))),
    ).toBe("working");
    expect(workOf(graph(approval, node(4, "pi.generation", { status: "running", phase: "stream" })))).toBe(
      "working",
    );
    expect(
      workOf(graph(approval, node(5, "pi.compaction", { status: "completing", outcome: "completed" }))),
    ).toBe("working");
    // A custom task in a phase named "approval" is not an approval wait.
    expect(workOf(graph(node(6, "app.review", { status: "running", phase: "approval" })))).toBe("working");
  });

  test("paused says so in words, online or offline, instead of Working", () => {
    expect(statusWords(facts({ working: true, paused: true }))).toEqual({
      label: "Paused for you",
      tone: "warn",
    });
    expect(statusWords(facts({ working: true, paused: true, online: false })).label).toBe("Paused for you");
    expect(statusWords(facts({ working: true, paused: false })).label).toBe("Working");
  });
});
