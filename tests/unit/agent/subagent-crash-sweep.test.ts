/**
 * The crash sweep over a subagent run (issue 13): input -> the parent calls `subagent` -> the child
 * makes one `probe` call (replay "safe", a keyed effect) -> the child answers -> the parent answers
 * with what it heard. Swept with the kit's `crashSweep` at every transaction in every crash mode;
 * after a crash a new engine opens what was committed and the client resends its input under the
 * same request id. Every run must end with the uncrashed transcripts in parent and child, one child
 * (found again through the ownership index, never created twice), the child's input submitted
 * exactly once, no entry duplicated, the probe's effect applied once, and every task terminal.
 */
import { fauxAssistantMessage, fauxToolCall, type Message } from "@mariozechner/pi-ai";
import { afterAll, describe, expect, test } from "vitest";
import { AgentHarness, createSubagentTool } from "../../../worker/index.ts";
import {
  CRASH_MODES,
  CRASH_SWEEP_TEST_TIMEOUT_MS,
  type CrashScenario,
  comparableEntry,
  crashSweep,
  type FauxRequest,
  fauxAgentModel,
} from "../../../worker/testing.ts";
import { KeyedEffects, keyedEffectTool } from "../core/fixtures/fakes.ts";

const INPUT = { type: "input", content: "delegate it", requestId: "client-1" } as const;
const CHILD_TASK = "CHILD: stamp the invoice";

const firstUser = (req: FauxRequest) => {
  const m = req.messages.find((x) => x.role === "user");
  return m?.role === "user" && typeof m.content === "string" ? m.content : "";
};

function respond(req: FauxRequest) {
  const last = req.messages.at(-1);
  if (firstUser(req).startsWith("CHILD:"))
    return last?.role === "toolResult"
      ? fauxAssistantMessage("child: stamped")
      : fauxAssistantMessage([fauxToolCall("stamp", { item: "invoice-7" }, { id: "call-stamp" })], {
          stopReason: "toolUse",
        });
  if (last?.role === "toolResult")
    return fauxAssistantMessage(
      `parent heard: ${last.content.map((c) => (c.type === "text" ? c.text : "")).join("")}`,
    );
  return fauxAssistantMessage([fauxToolCall("subagent", { task: CHILD_TASK }, { id: "call-sub" })], {
    stopReason: "toolUse",
  });
}

interface Observed {
  parent: unknown[];
  child: unknown[];
  children: number;
  childSubmissions: number;
  childUserEntries: number;
  entryIds: number[];
}

async function observe(h: AgentHarness): Promise<Observed> {
  const root = await h.root();
  await h.waitForIdle();
  const calls = (await h.tasks({ kind: "pi.tool" })).filter((t) => t.conversationId === root.id);
  // Read by the owner index: a reopened harness loads records on demand.
  const below = (await h.loadBelow(root.id)) ?? [];
  const owned = below.filter((c) => calls.some((t) => t.id === c.owner?.taskId));
  const child = owned[0]!;
  const parentEntries = await root.entries();
  const childEntries = await h.entries(child.id);
  const rows = await h.store.read((sql) =>
    sql.all("SELECT id FROM submissions WHERE conversation_id = ?", [child.id]),
  );
  return {
    parent: parentEntries.map(comparableEntry),
    child: childEntries.map(comparableEntry),
    children: owned.length,
    childSubmissions: rows.length,
    childUserEntries: childEntries.filter((e) => e.kind === "pi.user").length,
    entryIds: [...parentEntries, ...childEntries].map((e) => e.id),
  };
}

interface RunState {
  effects: KeyedEffects;
}

const faux = fauxAgentModel(respond);
afterAll(() => faux.unregister());

const scenario: CrashScenario<AgentHarness, RunState, Observed> = {
  name: "input -> subagent (child: one tool call -> answer) -> answer",
  services: () => ({ effects: new KeyedEffects() }),
  open: (store, run, engine) =>
    AgentHarness.open(store, {
      ...engine,
      models: faux.models,
      defaultModel: faux.ref,
      tools: [
        createSubagentTool({ progress: false }),
        keyedEffectTool(run.effects, { name: "stamp", replay: "safe" }),
      ],
    }),
  finish: async (h) => {
    await (await (await h.root()).submit(INPUT)).wait();
    return observe(h);
  },
};

const text = (entries: unknown[]) =>
  entries.flatMap((e) =>
    ((e as { model?: Message[] }).model ?? []).flatMap((m) =>
      m.role === "assistant" ? m.content.flatMap((b) => (b.type === "text" ? [b.text] : [])) : [],
    ),
  );

/** Crash points each mode covered when this was written, the floor it must not fall below. */
const FLOOR = [12, 20, 12];

describe("subagent crash sweep", () => {
  for (const [m, mode] of CRASH_MODES.entries())
    test(`${scenario.name} (${mode.name})`, { timeout: CRASH_SWEEP_TEST_TIMEOUT_MS }, async () => {
      await crashSweep(scenario, {
        mode,
        atLeast: FLOOR[m]!,
        baseline: ({ result, services }) => {
          expect(text(result.parent)).toEqual(["parent heard: child: stamped"]);
          expect(text(result.child)).toEqual(["child: stamped"]);
          expect(services.effects.applied).toEqual([{ key: "stamp:call-stamp", ref: "invoice-7" }]);
        },
        check: ({ result, services, label }, baseline) => {
          expect(result.parent, label).toEqual(baseline.result.parent);
          expect(result.child, label).toEqual(baseline.result.child);
          expect(result.children, label).toBe(1);
          expect(result.childSubmissions, label).toBe(1);
          expect(result.childUserEntries, label).toBe(1);
          expect(new Set(result.entryIds).size, label).toBe(result.entryIds.length);
          // A crash inside the safe call reruns it under the same key: applied once.
          expect(services.effects.applied, label).toEqual([{ key: "stamp:call-stamp", ref: "invoice-7" }]);
        },
      });
    });
});
