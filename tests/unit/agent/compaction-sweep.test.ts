/**
 * The crash sweep over a manual compaction: a three-turn conversation is compacted, crashing after
 * every commit k = 1..K in each crash mode. After a crash a new engine opens what was committed; the
 * client asks for a compaction again only when none was admitted. Every run must end with the
 * uncrashed transcript: exactly one pi.compaction entry, with the same head and summary, no live
 * task, no compaction status left in pi.live. The loop is the kit's `crashSweep`.
 */
import { fauxAssistantMessage } from "@mariozechner/pi-ai";
import { afterAll, describe, expect, test } from "vitest";
import { SUMMARY_SYSTEM_PROMPT } from "../../../worker/agent/compaction/task.ts";
import { internals } from "../../../worker/core/internals.ts";
import {
  AgentHarness,
  type AgentHarnessOptions,
  type EntryRecord,
  type LiveState,
} from "../../../worker/index.ts";
import type { MemoryImage } from "../../../worker/store/open.ts";
import {
  CRASH_MODES,
  CRASH_SWEEP_TEST_TIMEOUT_MS,
  type CrashScenario,
  crashSweep,
  type FauxAgentModel,
  fauxAgentModel,
  memoryStore,
} from "../../../worker/testing.ts";

const big = (label: string) => `${label} ${"x".repeat(400)}`;

function model(): FauxAgentModel {
  return fauxAgentModel((req) =>
    req.systemPrompt === SUMMARY_SYSTEM_PROMPT
      ? fauxAssistantMessage("SUMMARY")
      : fauxAssistantMessage(big("answer")),
  );
}

const optionsFor = (faux: FauxAgentModel): AgentHarnessOptions => ({
  models: faux.models,
  defaultModel: faux.ref,
  settings: { compaction: { keepRecentTokens: 150 } },
});

/** A store holding three answered turns, the starting point of every run. */
async function threeTurns(faux: FauxAgentModel): Promise<MemoryImage> {
  const store = await memoryStore();
  const h = await AgentHarness.open(store, optionsFor(faux));
  const root = await h.root();
  for (let i = 1; i <= 3; i++) await (await root.submit({ type: "input", content: big(`q${i}`) })).wait();
  await root.waitForIdle();
  const image = store.image();
  await h.close();
  return image;
}

const comparable = (entries: readonly EntryRecord[]) =>
  entries.map((e) => ({
    id: e.id,
    kind: e.kind,
    head: e.head,
    data: e.data,
    text: JSON.stringify(e.model ?? null).replace(/"timestamp":\d+/g, ""),
  }));

/** Finish every compaction the store holds (asking for one when none was admitted); the outcome. */
async function finish(h: AgentHarness) {
  const root = await h.root();
  const compactions = () =>
    [...internals(h).session.records.tasks.values()].filter((t) => t.kind === "pi.compaction");
  const stored = await h.tasks();
  if (!stored.some((t) => t.kind === "pi.compaction")) await root.compact();
  for (const t of compactions()) await h.waitForTask(t.id);
  await root.waitForIdle();
  const live = (await h.tasks()).filter((t) => t.state.status !== "terminal");
  return {
    transcript: comparable(await root.entries()),
    live: live.map((t) => t.kind),
    status: (await h.doc<LiveState & Record<string, never>>(1, "pi.live"))?.compactions,
  };
}

type Finished = Awaited<ReturnType<typeof finish>>;

function scenario(faux: FauxAgentModel, image: MemoryImage): CrashScenario<AgentHarness, null, Finished> {
  return {
    name: "manual compaction of three turns",
    image,
    services: () => null,
    open: (store, _services, engine) => AgentHarness.open(store, { ...optionsFor(faux), ...engine }),
    finish: (h) => finish(h),
  };
}

/** Crash points each sweep covered when it was written, by mode: the floor it must not fall below. */
const FLOOR = [3, 4, 3];

let covered = 0;

describe("compaction crash sweep", () => {
  for (const [m, mode] of CRASH_MODES.entries())
    test(`manual compaction of three turns (${mode.name})`, {
      timeout: CRASH_SWEEP_TEST_TIMEOUT_MS,
    }, async () => {
      const faux = model();
      try {
        const report = await crashSweep(scenario(faux, await threeTurns(faux)), {
          mode,
          atLeast: FLOOR[m]!,
          baseline: ({ result: expected }) => {
            expect(expected.transcript.filter((e) => e.kind === "pi.compaction")).toHaveLength(1);
            expect(expected.live).toEqual([]);
            expect(expected.status).toBeUndefined();
          },
          check: (run, baseline) => expect(run.result, run.label).toEqual(baseline.result),
        });
        covered += report.points;
      } finally {
        faux.unregister();
      }
    });
  afterAll(() => {
    console.log(`compaction crash sweep: ${covered} crash points covered`);
  });
});
