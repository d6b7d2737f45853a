/**
 * The crash sweep over an agent run: input "do both" -> one round of two tool calls (`stamp`, replay
 * "safe", applies a keyed effect; `launch`, replay "unsafe") -> an answer. The run is repeated once per
 * transaction boundary k = 1..K (K from the uncrashed run) in three crash modes; after the crash a new
 * engine opens exactly what was committed and the client submits the input again with the same
 * requestId. Every run must end with the uncrashed transcript (a crash inside the unsafe call gives
 * its `interrupted` result instead), one answer per request, the safe effect applied once, and every
 * task terminal. Both intent paths are swept: with no `beforeTool` hook the answer's commit records
 * the intent; with one, the tool task commits its intent itself. A sequential round is swept too: its
 * second call's task is created by the commit that ends the first. The loop is the kit's `crashSweep`.
 */
import { fauxAssistantMessage, fauxToolCall, type Message } from "@mariozechner/pi-ai";
import { afterAll, describe, expect, test } from "vitest";
import {
  AgentHarness,
  type AgentHarnessOptions,
  type EntryRecord,
  isInterruptedResult,
  type Settlement,
} from "../../../worker/index.ts";
import {
  CRASH_MODES,
  CRASH_SWEEP_TEST_TIMEOUT_MS,
  type CrashScenario,
  comparableEntry,
  crashSweep,
  type FauxAgentModel,
  fauxAgentModel,
  toolCallsCutByCrash,
} from "../../../worker/testing.ts";
import { KeyedEffects, keyedEffectTool } from "../core/fixtures/fakes.ts";

const INPUT = { type: "input", content: "do both", requestId: "client-request-1" } as const;

/** Calls both tools first; answers once the context has an assistant message. */
function respond(faux: { messages: Message[] }) {
  return faux.messages.some((m) => m.role === "assistant")
    ? fauxAssistantMessage("both done")
    : fauxAssistantMessage(
        [
          fauxToolCall("stamp", { item: "invoice-7" }, { id: "call-stamp" }),
          fauxToolCall("launch", { item: "rocket" }, { id: "call-launch" }),
        ],
        { stopReason: "toolUse" },
      );
}

const message = (e: EntryRecord) => (e.model as unknown as Message[])[0]!;
const isLaunchResult = (e: EntryRecord) =>
  e.kind === "pi.tool-result" && (message(e) as { toolCallId?: string }).toolCallId === "call-launch";
/** Answers that count: assistant entries that were not failed or cut off. */
const answers = (entries: readonly EntryRecord[]) =>
  entries.filter((e) => {
    const m = message(e);
    return (
      e.kind === "pi.assistant" &&
      m.role === "assistant" &&
      (m.stopReason === "stop" || m.stopReason === "toolUse")
    );
  }).length;

interface Observed {
  transcript: unknown[];
  entries: EntryRecord[];
  settled: unknown;
  answers: number;
}

/**
 * Entries in commit order, except that the results of one parallel tool round are put in call order:
 * they commit in completion order, which depends on timing (with or without a crash). The model sees
 * them in call order either way.
 */
function inCallOrder(entries: readonly EntryRecord[]): EntryRecord[] {
  const out: EntryRecord[] = [];
  let calls: string[] = [];
  let i = 0;
  while (i < entries.length) {
    const e = entries[i]!;
    if (e.kind !== "pi.tool-result") {
      const m = message(e);
      if (m?.role === "assistant") calls = m.content.flatMap((b) => (b.type === "toolCall" ? [b.id] : []));
      out.push(e);
      i++;
      continue;
    }
    let j = i;
    while (j < entries.length && entries[j]!.kind === "pi.tool-result") j++;
    const position = (r: EntryRecord) => calls.indexOf((message(r) as { toolCallId: string }).toolCallId);
    out.push(...entries.slice(i, j).sort((a, b) => position(a) - position(b)));
    i = j;
  }
  return out;
}

async function observe(h: AgentHarness, settled: Settlement): Promise<Observed> {
  const root = await h.root();
  await root.waitForIdle();
  const entries = inCallOrder(await root.entries());
  const index = (id: number | undefined) => entries.findIndex((e) => e.id === id);
  return {
    transcript: entries.map(comparableEntry),
    entries,
    settled:
      settled.status === "done"
        ? { status: "done", answer: index(settled.answer), entry: index(settled.entry) }
        : settled,
    answers: answers(entries),
  };
}

type IntentPath = "with the answer" | "by the tool task" | "in a sequential round";

/** One run's fakes, and what its crash left inside the tool calls. */
interface RunState {
  safe: KeyedEffects;
  unsafe: KeyedEffects;
  /** The crash stopped the world inside the unsafe call (its result must be `interrupted`). */
  interrupted: boolean;
  /** The crash stopped the world inside the safe call (it runs again under the same key). */
  replayed: boolean;
}

function scenario(faux: FauxAgentModel, path: IntentPath): CrashScenario<AgentHarness, RunState, Observed> {
  const options = (run: RunState): AgentHarnessOptions => ({
    models: faux.models,
    defaultModel: faux.ref,
    tools: [
      keyedEffectTool(run.safe, { name: "stamp", replay: "safe" }),
      keyedEffectTool(run.unsafe, { name: "launch", replay: "unsafe" }),
    ],
    // A hook that changes nothing still sits between the answer and the intent.
    ...(path === "by the tool task" ? { hooks: { beforeTool: [() => undefined] } } : {}),
    ...(path === "in a sequential round" ? { settings: { toolExecution: "sequential" as const } } : {}),
  });
  return {
    name: `input -> safe + unsafe tool round -> answer, intent ${path}`,
    services: () => ({
      safe: new KeyedEffects(),
      unsafe: new KeyedEffects(),
      interrupted: false,
      replayed: false,
    }),
    open: (store, run, engine) => AgentHarness.open(store, { ...options(run), ...engine }),
    // After a crash the client did not see an answer (or its admission): it sends the request again.
    finish: async (h) => observe(h, await (await (await h.root()).submit(INPUT)).wait()),
    afterCrash: async (committed, run) => {
      const inExecute = await toolCallsCutByCrash(committed);
      run.interrupted = inExecute.includes("call-launch");
      run.replayed = inExecute.includes("call-stamp");
    },
  };
}

/** Crash points each sweep covered when it was written, by mode: the floor it must not fall below. */
const FLOOR: Record<IntentPath, [number, number, number]> = {
  "with the answer": [6, 9, 6],
  "by the tool task": [7, 12, 7],
  "in a sequential round": [8, 11, 8],
};

let covered = 0;

describe("agent crash sweep", () => {
  const paths: IntentPath[] = ["with the answer", "by the tool task", "in a sequential round"];
  for (const path of paths)
    for (const [m, mode] of CRASH_MODES.entries()) {
      test(`input -> safe + unsafe tool round -> answer (${mode.name}, intent ${path})`, {
        timeout: CRASH_SWEEP_TEST_TIMEOUT_MS,
      }, async () => {
        const faux = fauxAgentModel((req) => respond(req));
        try {
          const report = await crashSweep(scenario(faux, path), {
            mode,
            atLeast: FLOOR[path][m]!,
            baseline: ({ result: expected, services }) => {
              expect(expected.settled).toEqual({
                status: "done",
                answer: expected.entries.length - 1,
                entry: 0,
              });
              expect(expected.answers).toBe(2);
              expect(
                expected.entries.some(
                  (e) => isLaunchResult(e) && !(message(e) as { isError: boolean }).isError,
                ),
              ).toBe(true);
              expect(services.safe.applied).toHaveLength(1);
            },
            check: ({ result: got, services: run, label: at }, { result: expected }) => {
              if (run.interrupted) {
                const result = got.entries.find(isLaunchResult)!;
                expect(message(result), at).toMatchObject({
                  role: "toolResult",
                  toolName: "launch",
                  isError: true,
                });
                expect(isInterruptedResult(result), at).toBe(true);
                const without = (o: Observed) =>
                  o.entries.filter((e) => !isLaunchResult(e)).map(comparableEntry);
                expect(without(got), at).toEqual(without(expected));
                expect(got.entries.findIndex(isLaunchResult), at).toBe(
                  expected.entries.findIndex(isLaunchResult),
                );
              } else {
                expect(got.transcript, at).toEqual(expected.transcript);
              }
              expect(got.settled, at).toEqual(expected.settled);
              expect(got.answers, at).toBe(expected.answers);
              // The safe tool's keyed effect: applied, once, under one key.
              expect(
                run.safe.applied.map((a) => a.key),
                at,
              ).toEqual(["stamp:call-stamp"]);
              expect([...run.safe.keysPerRef().values()], at).toEqual([1]);
              // The unsafe tool is never run a second time.
              expect(run.unsafe.calls, at).toBeLessThanOrEqual(1);
            },
          });
          // The sweep must actually stop the world inside each call, or it proves nothing about them.
          const interruptions = report.runs.filter((r) => r.services.interrupted).length;
          const replays = report.runs.filter((r) => r.services.replayed).length;
          expect(interruptions, "crash points inside the unsafe call").toBeGreaterThan(0);
          expect(replays, "crash points inside the safe call").toBeGreaterThan(0);
          console.log(`  (${interruptions} inside the unsafe call, ${replays} inside the safe one)`);
          covered += report.points;
        } finally {
          faux.unregister();
        }
      });
    }
});

afterAll(() => {
  console.log(`agent crash sweep: ${covered} crash points covered`);
});
