/**
 * The crash sweep across an approval wait: input "launch it" -> one call of `launch` (replay
 * "unsafe", asks first under the approval settings) -> the call waits -> a person approves it ->
 * it runs -> an answer. The kit's `crashSweep` crashes after every commit in every mode; after a
 * crash a new engine opens what was committed, the client resends the input with the same request
 * id, and the person decides again with the same request id whatever still waits. Every run must end
 * with the uncrashed transcript (a crash inside the unsafe call gives its `interrupted` result), one
 * answer, the effect applied at most once, and no decision refused as already taken by another.
 */
import { fauxAssistantMessage, fauxToolCall, type Message } from "@mariozechner/pi-ai";
import { afterAll, describe, expect, test } from "vitest";
import type { ApprovalAnswer } from "../../../worker/agent/tools/approval.ts";
import {
  AgentHarness,
  DOC,
  type EntryRecord,
  isInterruptedResult,
  type LiveState,
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

const INPUT = { type: "input", content: "launch it", requestId: "client-request-1" } as const;

function respond(faux: { messages: Message[] }) {
  return faux.messages.some((m) => m.role === "assistant")
    ? fauxAssistantMessage("launched")
    : fauxAssistantMessage([fauxToolCall("launch", { item: "rocket" }, { id: "call-launch" })], {
        stopReason: "toolUse",
      });
}

interface RunState {
  effects: KeyedEffects;
  answers: ApprovalAnswer[];
  /** The crash stopped the world inside the call (its result must be `interrupted`). */
  interrupted: boolean;
}

interface Observed {
  transcript: unknown[];
  entries: EntryRecord[];
}

/** The call waiting for a decision, if any (the documents may not be loaded yet after a reopen). */
function waiting(h: AgentHarness): number | undefined {
  try {
    const live = h.docNow(1, DOC.live) as LiveState | undefined;
    const slot = live?.tools?.find((s) => s.status === "awaiting_approval" && !s.approval?.decision);
    return slot?.taskId;
  } catch {
    return undefined;
  }
}

function scenario(faux: FauxAgentModel): CrashScenario<AgentHarness, RunState, Observed> {
  return {
    name: "input -> a call that asks first -> approved -> it runs -> answer",
    services: () => ({ effects: new KeyedEffects(), answers: [], interrupted: false }),
    open: (store, run, engine) =>
      AgentHarness.open(store, {
        models: faux.models,
        defaultModel: faux.ref,
        tools: [keyedEffectTool(run.effects, { name: "launch", replay: "unsafe" })],
        settings: { approval: {} },
        ...engine,
      }),
    finish: async (h, run) => {
      const root = await h.root();
      const submission = await root.submit(INPUT);
      let settled = false;
      const done = submission.wait().finally(() => {
        settled = true;
      });
      // The person: whatever waits gets their approval, always under the same request id.
      while (!settled) {
        const taskId = waiting(h);
        if (taskId !== undefined)
          run.answers.push(
            await h.decideApproval(1, { taskId, decision: "approve", requestId: "person-approves" }),
          );
        await Promise.race([done, new Promise((r) => setTimeout(r, 2))]);
      }
      await done;
      await root.waitForIdle();
      const entries = await root.entries();
      return { transcript: entries.map(comparableEntry), entries };
    },
    afterCrash: async (committed, run) => {
      run.interrupted = (await toolCallsCutByCrash(committed)).includes("call-launch");
    },
  };
}

const message = (e: EntryRecord) => (e.model as unknown as Message[])[0]!;
const isLaunchResult = (e: EntryRecord) => e.kind === "pi.tool-result";

let covered = 0;

describe("approval crash sweep", () => {
  for (const mode of CRASH_MODES)
    test(`input -> a call that asks first -> approved -> answer (${mode.name})`, {
      timeout: CRASH_SWEEP_TEST_TIMEOUT_MS,
    }, async () => {
      const faux = fauxAgentModel((req) => respond(req));
      try {
        const report = await crashSweep(scenario(faux), {
          mode,
          atLeast: 5,
          baseline: ({ result, services }) => {
            expect(services.effects.applied).toHaveLength(1);
            expect(services.answers).toEqual([{ status: "decided", decision: "approve" }]);
            const result0 = result.entries.find(isLaunchResult)!;
            expect(message(result0)).toMatchObject({ isError: false });
          },
          check: ({ result: got, services: run, label: at }, { result: expected }) => {
            if (run.interrupted) {
              const result = got.entries.find(isLaunchResult)!;
              expect(isInterruptedResult(result), at).toBe(true);
            } else {
              expect(got.transcript, at).toEqual(expected.transcript);
            }
            // Never run twice, never decided twice.
            expect(run.effects.calls, at).toBeLessThanOrEqual(1);
            expect(
              run.answers.filter((a) => a.status === "already_decided"),
              at,
            ).toEqual([]);
          },
        });
        // The sweep must stop the world while the call waits, and inside the call, or it proves nothing.
        const interruptions = report.runs.filter((r) => r.services.interrupted).length;
        expect(interruptions, "crash points inside the call").toBeGreaterThan(0);
        covered += report.points;
      } finally {
        faux.unregister();
      }
    });
});

afterAll(() => {
  console.log(`approval crash sweep: ${covered} crash points covered`);
});
