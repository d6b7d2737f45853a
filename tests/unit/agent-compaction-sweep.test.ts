/**
 * The crash sweep over a manual compaction: a three-turn conversation is compacted, crashing after
 * every commit k = 1..K in each crash mode. After a crash a new engine opens what was committed; the
 * client asks for a compaction again only when none was admitted. Every run must end with the
 * uncrashed transcript: exactly one pi.compaction entry, with the same head and summary, no live
 * task, no compaction status left in pi.live.
 */
import { fauxAssistantMessage } from "@mariozechner/pi-ai";
import { afterAll, describe, expect, test } from "vitest";
import { SUMMARY_SYSTEM_PROMPT } from "../../worker/agent/compaction/task.ts";
import {
  AgentHarness,
  type AgentHarnessOptions,
  type EntryRecord,
  type LiveState,
} from "../../worker/index.ts";
import type { MemoryImage } from "../../worker/store/open.ts";
import {
  CRASH_MODES,
  type CrashMode,
  crashingStore,
  type FauxAgentModel,
  fauxAgentModel,
  memoryStore,
} from "../../worker/testing.ts";

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
  const compactions = () => [...h.session.records.tasks.values()].filter((t) => t.kind === "pi.compaction");
  const stored = await h.tasks();
  if (!stored.some((t) => t.kind === "pi.compaction")) await root.compact();
  for (const t of compactions()) await h.waitForTask(t.id);
  await root.waitForIdle();
  const live = (await h.tasks()).filter((t) => t.state.status !== "terminal");
  return {
    transcript: comparable(await root.entries()),
    live: live.map((t) => t.kind),
    status: h.doc<LiveState & Record<string, never>>(1, "pi.live")?.compactions,
  };
}

async function runOnce(faux: FauxAgentModel, image: MemoryImage, crashAt: number, mode: CrashMode) {
  const cs = await crashingStore({ at: crashAt, point: mode.point, groupCommit: mode.groupCommit, image });
  let first: AgentHarness | undefined;
  let result: Awaited<ReturnType<typeof finish>> | undefined;
  const before = cs.store.stats.transactions;
  try {
    first = await AgentHarness.open(cs.store, optionsFor(faux));
    result = await Promise.race([finish(first), cs.crashed.then(() => undefined)]);
  } catch (error) {
    if (!cs.hasCrashed) throw error;
  }
  if (!cs.hasCrashed) {
    const transactions = cs.store.stats.transactions - before;
    await first?.close();
    return { result: result!, crashed: false, transactions };
  }
  await first?.close().catch(() => undefined);
  const h = await AgentHarness.open(await cs.recover(), optionsFor(faux));
  try {
    return { result: await finish(h), crashed: true, transactions: 0 };
  } finally {
    await h.close();
  }
}

const covered: string[] = [];

describe("compaction crash sweep", () => {
  for (const mode of CRASH_MODES)
    test(`manual compaction of three turns (${mode.name})`, async () => {
      const faux = model();
      try {
        const image = await threeTurns(faux);
        const baseline = await runOnce(faux, image, Number.POSITIVE_INFINITY, mode);
        const expected = baseline.result;
        expect(expected.transcript.filter((e) => e.kind === "pi.compaction")).toHaveLength(1);
        expect(expected.live).toEqual([]);
        expect(expected.status).toBeUndefined();
        let crashes = 0;
        for (let k = 1; k <= baseline.transactions; k++) {
          const run = await runOnce(faux, image, k, mode);
          if (run.crashed) crashes++;
          expect(run.result, `crash at ${mode.point} of transaction ${k}`).toEqual(expected);
        }
        expect(crashes).toBeGreaterThan(0);
        covered.push(`${mode.name}: ${crashes}`);
      } finally {
        faux.unregister();
      }
    });
  afterAll(() => {
    console.log(`compaction crash sweep: ${covered.join(", ")} crash points`);
  });
});
