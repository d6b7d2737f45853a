/**
 * Agent events across a crash (spec §9.4): a consumer attaches to the engine reopened after a crash at
 * each commit of a run (a streamed answer calling a tool that prints, then a streamed answer), and
 * gets a snapshot and then events that continue it. The consumer fails on any event that does not fit
 * what it holds, so a half message (an update with nothing in flight, a message started over an
 * unfinished one) or a tool update before its start fails the run; once the conversation is idle it
 * holds no message or tool in flight and exactly the engine's active entries. The loop is the kit's
 * `crashSweep`.
 */
import {
  createAssistantMessageEventStream,
  fauxAssistantMessage,
  fauxText,
  fauxToolCall,
  type Message,
} from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { afterAll, expect, test } from "vitest";
import { textResult } from "../../../worker/agent/tools/contract.ts";
import { AgentHarness, DOC, defineTool, type LiveState, watchEvents } from "../../../worker/index.ts";
import {
  CRASH_MODES,
  CRASH_SWEEP_TEST_TIMEOUT_MS,
  type CrashRun,
  crashSweep,
  fauxAgentModel,
  until,
} from "../../../worker/testing.ts";
import { EventConsumer } from "./events-fixtures.ts";

const INPUT = { type: "input", content: "report twice", requestId: "client-1" } as const;
const faux = fauxAgentModel(() => fauxAssistantMessage("unused"));
afterAll(() => faux.unregister());

/** The engine now open (the first one, then the reopened one): the model waits for its commits. */
let engine: AgentHarness | undefined;
const partialCommitted = (h: AgentHarness) =>
  (h.docNow<LiveState & Record<string, never>>(1, DOC.live) as LiveState | undefined)?.generation?.message !==
  undefined;

/**
 * Streams one partial (its first text block), waits until the engine committed it, then answers: the
 * same transactions in every run. The first answer calls the tool, the second one ends the run.
 */
function stream(_model: unknown, context: { messages: Message[] }) {
  const s = createAssistantMessageEventStream();
  const answer = context.messages.some((m) => m.role === "assistant")
    ? fauxAssistantMessage("Both steps are reported, and the report is complete.", { timestamp: 1 })
    : fauxAssistantMessage(
        [
          fauxText("I will report the steps one after another now."),
          fauxToolCall("report", { what: "steps" }, { id: "call-report" }),
        ],
        { stopReason: "toolUse", timestamp: 1 },
      );
  const h = engine!;
  void (async () => {
    const head = (answer.content[0] as { text: string }).text.slice(0, 6);
    const partial = { ...answer, content: [fauxText(head)], stopReason: "stop" as const };
    s.push({ type: "text_delta", contentIndex: 0, delta: head, partial });
    const start = Date.now();
    while (!partialCommitted(h) && !h.closed && Date.now() - start < 2000)
      await new Promise((r) => setTimeout(r, 1));
    s.push({ type: "done", reason: answer.stopReason === "toolUse" ? "toolUse" : "stop", message: answer });
    s.end();
  })();
  return s;
}

const report = defineTool({
  name: "report",
  description: "Report the steps",
  parameters: Type.Object({ what: Type.String() }),
  replay: "safe",
  async execute(args, api) {
    api.output("step 1\n");
    api.output("step 2\n");
    return textResult(`reported ${args.what}`);
  },
});

interface Seen {
  /** Errors the consumer threw while applying a batch. */
  readonly errors: string[];
  readonly problems: string[];
  readonly entries: number[];
  readonly view: number[];
  /** What the snapshot at attachment held in flight. */
  readonly snapshot: { message: boolean; tools: number };
}

async function finish(h: AgentHarness): Promise<Seen> {
  const root = await h.root();
  const stream = await watchEvents(h, root.id);
  const consumer = new EventConsumer(stream.snapshot);
  const errors: string[] = [];
  stream.start((events) => {
    try {
      consumer.apply(events);
    } catch (error) {
      errors.push(String(error));
    }
  });
  h.resume();
  const sub = await root.submit(INPUT);
  await sub.wait();
  await root.waitForIdle();
  const view = (await root.viewState()).entries.map((e) => e.id);
  await until(() => consumer.entries.length === view.length && stream.pending === 0, {
    what: "the consumer caught up",
  });
  await stream.stop();
  return {
    errors,
    problems: consumer.problems(),
    entries: consumer.entries.map((e) => e.id),
    view,
    snapshot: {
      message: stream.snapshot.generation?.message !== undefined,
      tools: stream.snapshot.tools.filter((t) => t.status === "running").length,
    },
  };
}

// Crash points each mode covered when this was written.
const POINTS = { grouped: 9, single: 13 };

test.each([
  { mode: CRASH_MODES[0]!, atLeast: POINTS.grouped },
  { mode: CRASH_MODES[1]!, atLeast: POINTS.single },
])(
  "after a crash at any commit of a run ($mode.name), a consumer of the reopened store gets a snapshot, then a well-formed continuation",
  { timeout: CRASH_SWEEP_TEST_TIMEOUT_MS },
  async ({ mode, atLeast }) => {
    const check = (run: CrashRun<undefined, Seen>) => {
      expect(run.result.errors, run.label).toEqual([]);
      expect(run.result.problems, run.label).toEqual([]);
      expect(run.result.entries, run.label).toEqual(run.result.view);
    };
    const report_ = await crashSweep(
      {
        name: "agent events",
        services: () => undefined,
        open: async (store, _services, options) => {
          engine = await AgentHarness.open(store, {
            ...options,
            models: faux.models,
            defaultModel: faux.ref,
            stream: stream as never,
            tools: [report],
            // Only the first output is committed (the throttle's leading edge): every run commits the
            // same transactions.
            settings: { partialIntervalMs: 0, outputIntervalMs: 60_000 },
            // Opened paused, so the consumer attaches to the recovered state (a crash's partial answer
            // and running tool still in flight) before the engine goes on (`finish` resumes it): an
            // open that resumes at once restarts the generation in its first drain, and the snapshot
            // would only ever see the fresh attempt.
            paused: true,
          });
          return engine;
        },
        finish,
      },
      { mode, baseline: check, check, atLeast },
    );
    // The sweep reached the states that matter: a partial answer and a running tool in the snapshot.
    expect(report_.runs.some((r) => r.result.snapshot.message)).toBe(true);
    expect(report_.runs.some((r) => r.result.snapshot.tools > 0)).toBe(true);
  },
);
