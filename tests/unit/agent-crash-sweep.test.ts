/**
 * The crash sweep over an agent run: input "do both" -> one round of two tool calls (`stamp`, replay
 * "safe", applies a keyed effect; `launch`, replay "unsafe") -> an answer. The run is repeated once per
 * transaction boundary k = 1..K (K from the uncrashed run) in three crash modes; after the crash a new
 * engine opens exactly what was committed and the client submits the input again with the same
 * requestId. Every run must end with the uncrashed transcript (a crash inside the unsafe call gives
 * its `interrupted` result instead), one answer per request, the safe effect applied once, and every
 * task terminal. Both intent paths are swept: with no `beforeTool` hook the answer's commit records
 * the intent; with one, the tool task commits its intent itself. A sequential round is swept too: its
 * second call's task is created by the commit that ends the first.
 */
import { fauxAssistantMessage, fauxToolCall, type Message } from "@mariozechner/pi-ai";
import { afterAll, describe, expect, test } from "vitest";
import {
  AgentHarness,
  type AgentHarnessOptions,
  type EntryRecord,
  type Settlement,
} from "../../worker/index.ts";
import {
  CRASH_MODES,
  type CrashMode,
  crashingStore,
  type FauxAgentModel,
  fauxAgentModel,
  KeyedEffects,
  keyedEffectTool,
} from "../../worker/testing.ts";

const modes = CRASH_MODES;
type Mode = CrashMode;

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

/** An entry as a user can compare it across runs: no ids, timestamps, durations or usage estimates. */
function comparable(e: EntryRecord): unknown {
  const strip = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(strip);
    if (value && typeof value === "object") {
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(value)) {
        if (k === "timestamp" || k === "durationMs" || k === "usage" || k === "responseId") continue;
        out[k] = strip(v);
      }
      return out;
    }
    return value;
  };
  return { kind: e.kind, model: strip(e.model), data: strip(e.data) };
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
    transcript: entries.map(comparable),
    entries,
    settled:
      settled.status === "done"
        ? { status: "done", answer: index(settled.answer), entry: index(settled.entry) }
        : settled,
    answers: answers(entries),
  };
}

/**
 * The tool calls the crash left started but without a result (read from a copy of the committed
 * image): in `execute` and reserved. One stored `pending` in `execute` was never started.
 */
async function callsInExecute(
  copy: Awaited<ReturnType<Awaited<ReturnType<typeof crashingStore>>["recover"]>>,
) {
  const rows = await copy.read((sql) => sql.all("SELECT state, input FROM tasks WHERE kind = 'pi.tool'"));
  await copy.close();
  return rows.flatMap((row) => {
    const input = JSON.parse(String(row["input"])) as { callId?: string };
    const state = JSON.parse(String(row["state"])) as { status: string; checkpoint?: { phase: string } };
    return state.status === "running" && state.checkpoint?.phase === "execute" ? [input.callId] : [];
  });
}

function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([
    promise,
    new Promise<T>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: no result after ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

type IntentPath = "with the answer" | "by the tool task" | "in a sequential round";

async function runOnce(faux: FauxAgentModel, crashAt: number, mode: Mode, path: IntentPath) {
  const safe = new KeyedEffects();
  const unsafe = new KeyedEffects();
  const options: AgentHarnessOptions = {
    models: faux.models,
    defaultModel: faux.ref,
    tools: [
      keyedEffectTool(safe, { name: "stamp", replay: "safe" }),
      keyedEffectTool(unsafe, { name: "launch", replay: "unsafe" }),
    ],
    // A hook that changes nothing still sits between the answer and the intent.
    ...(path === "by the tool task" ? { hooks: { beforeTool: [() => undefined] } } : {}),
    ...(path === "in a sequential round" ? { settings: { toolExecution: "sequential" as const } } : {}),
  };
  const cs = await crashingStore({ at: crashAt, point: mode.point, groupCommit: mode.groupCommit });
  const CRASH = Symbol("crash");
  let first: AgentHarness | undefined;
  let observed: Observed | undefined;
  try {
    first = await AgentHarness.open(cs.store, options);
    const sub = await (await first.root()).submit(INPUT);
    const settled = await within(
      Promise.race([sub.wait(), cs.crashed.then(() => CRASH)]),
      10_000,
      "first engine",
    );
    if (settled !== CRASH) observed = await observe(first, settled as Settlement);
  } catch (error) {
    if (!cs.hasCrashed) throw error;
  }
  if (!cs.hasCrashed) {
    const transactions = cs.store.stats.transactions;
    await first?.close();
    return {
      observed: observed!,
      crashed: false,
      interrupted: false,
      replayed: false,
      transactions,
      safe,
      unsafe,
    };
  }
  await first?.close().catch(() => undefined);
  const inExecute = await callsInExecute(await cs.recover());
  const interrupted = inExecute.includes("call-launch");
  const replayed = inExecute.includes("call-stamp");
  const h = await AgentHarness.open(await cs.recover(), options);
  try {
    // The client did not see an answer (or did not see its admission): it sends the request again.
    const sub = await (await h.root()).submit(INPUT);
    observed = await observe(h, await within(sub.wait(), 10_000, `recovery after crash at ${crashAt}`));
    const live = (await h.tasks()).filter((t) => t.state.status !== "terminal");
    expect(live, `tasks left live after crash at ${crashAt}`).toEqual([]);
  } finally {
    await h.close();
  }
  return { observed, crashed: true, interrupted, replayed, transactions: 0, safe, unsafe };
}

const covered: string[] = [];

describe("agent crash sweep", () => {
  const paths: IntentPath[] = ["with the answer", "by the tool task", "in a sequential round"];
  for (const path of paths)
    for (const mode of modes) {
      test(`input -> safe + unsafe tool round -> answer (${mode.name}, intent ${path})`, async () => {
        const faux = fauxAgentModel((req) => respond(req));
        try {
          const baseline = await runOnce(faux, Number.POSITIVE_INFINITY, mode, path);
          const expected = baseline.observed;
          expect(expected.settled).toEqual({ status: "done", answer: expected.entries.length - 1, entry: 0 });
          expect(expected.answers).toBe(2);
          expect(
            expected.entries.some((e) => isLaunchResult(e) && !(message(e) as { isError: boolean }).isError),
          ).toBe(true);
          expect(baseline.safe.applied).toHaveLength(1);
          const K = baseline.transactions;
          let crashes = 0;
          let interruptions = 0;
          let replays = 0;
          for (let k = 1; k <= K; k++) {
            const run = await runOnce(faux, k, mode, path);
            const at = `crash at ${mode.point} of transaction ${k}`;
            const got = run.observed;
            if (run.interrupted) {
              interruptions++;
              const result = got.entries.find(isLaunchResult)!;
              expect(message(result), at).toMatchObject({
                role: "toolResult",
                toolName: "launch",
                isError: true,
              });
              expect(
                (result.data as { diagnostics: Array<{ code: string }> }).diagnostics.map((d) => d.code),
                at,
              ).toEqual(["interrupted"]);
              const without = (o: Observed) => o.entries.filter((e) => !isLaunchResult(e)).map(comparable);
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
            if (run.crashed) crashes++;
            if (run.replayed) replays++;
          }
          expect(crashes).toBeGreaterThan(0);
          // The sweep must actually stop the world inside each call, or it proves nothing about them.
          expect(interruptions, "crash points inside the unsafe call").toBeGreaterThan(0);
          expect(replays, "crash points inside the safe call").toBeGreaterThan(0);
          covered.push(
            `${mode.name}, intent ${path}: ${crashes} crash points of ${K} transactions (${interruptions} inside the unsafe call, ${replays} inside the safe one)`,
          );
        } finally {
          faux.unregister();
        }
      });
    }
});

afterAll(() => {
  console.log(`agent crash sweep:\n  ${covered.join("\n  ")}`);
});
