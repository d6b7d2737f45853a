/**
 * The test kit: the stores, loops and model scripting tests and benches share, in one place. Tests and
 * benches import these instead of writing their own.
 * - `memoryStore`, `recordJobs` (testing/store.ts): memory stores, and the SQL a store ran.
 * - `crashingStore`, `CRASH_MODES`, `crashSweep`, `CRASH_SWEEP_TEST_TIMEOUT_MS` (testing/crash.ts): a
 *   store that dies at a chosen transaction, the one loop every crash sweep runs, and the timeout of
 *   a test that runs sweeps.
 * - `FakeClock` (testing/clock.ts): a wall clock and monotonic process timers, moved by hand, for
 *   the durable timers.
 * - `deferred`, `until`, `within` (testing/wait.ts): waiting without hanging.
 * - `toolCallsCutByCrash`, `wasToolCallCutByCrash` (testing/tools.ts): the tool calls a crash left
 *   started without a result, read from the committed image; `detachedToolApi`, a tool api for
 *   running one tool's `execute` outside a harness.
 * - `nodeScriptWorkers`, `useNodeScriptWorkers` (testing/script-workers.ts): the Node platform's
 *   script workers (worker_threads), so scripts run off the engine's thread as in a browser worker.
 * - `networkSwitch` (testing/network.ts): the platform's network state, switched by hand.
 * - `fauxAgentModel`, `fauxError` (below): pi-ai's faux provider answering from the request context.
 * Fakes of external services that only tests use live with the tests (tests/unit/core/fixtures/fakes.ts).
 */

import * as piAiModule from "@mariozechner/pi-ai";
import {
  type Api,
  type AssistantMessage,
  type Context,
  type FauxResponseFactory,
  fauxAssistantMessage,
  type Message,
  type Model,
  registerFauxProvider,
  type Tool,
} from "@mariozechner/pi-ai";
import { providePiAi } from "./agent/models/pi-ai.ts";
import { createModelResolver, type ModelResolver } from "./agent/models/resolver.ts";
import type { ModelRef } from "./agent/records.ts";

export { FakeClock } from "./testing/clock.ts";
export {
  CRASH_MODES,
  CRASH_SWEEP_TEST_TIMEOUT_MS,
  type CrashingStore,
  type CrashMode,
  type CrashOptions,
  type CrashRun,
  type CrashScenario,
  type CrashSweepOptions,
  type CrashSweepReport,
  crashingStore,
  crashSweep,
  type SweptHarness,
} from "./testing/crash.ts";
export { comparableEntry } from "./testing/entries.ts";
export { type NetworkSwitch, networkSwitch } from "./testing/network.ts";
export { nodeScriptWorkers, useNodeScriptWorkers } from "./testing/script-workers.ts";
export { memoryStore, recordJobs, type StoreJob } from "./testing/store.ts";
export { detachedToolApi, toolCallsCutByCrash, wasToolCallCutByCrash } from "./testing/tools.ts";
export { type Deferred, deferred, releaseDeferreds, until, within } from "./testing/wait.ts";

// The kit imports pi-ai statically anyway: hand it over, so code under test may use it without an open harness.
providePiAi(piAiModule);

/** A request as the faux model received it: the system prompt, a copy of the messages, tool names. */
export interface FauxRequest {
  readonly systemPrompt: string | undefined;
  readonly messages: Message[];
  readonly tools: string[];
  /** The tool declarations as sent to the provider (what the model is offered, field by field). */
  readonly declarations: Tool[];
}

/** Derives the answer from the request (`call` counts requests from 1, for scripts that need it). */
export type FauxResponder = (
  request: FauxRequest,
  call: number,
) => AssistantMessage | Promise<AssistantMessage>;

export interface FauxAgentModel {
  readonly model: Model<Api>;
  readonly ref: ModelRef;
  /** A resolver that knows this model (pass as `models`). */
  readonly models: ModelResolver;
  /** Every request, in order. */
  readonly requests: FauxRequest[];
  /** The responder used for the next requests (replaceable). */
  respond: FauxResponder;
  unregister(): void;
}

/**
 * Register pi-ai's faux provider with one responder for every request (the queue never runs dry), so
 * that a request sent again after a crash gets the same answer. Give tool calls fixed ids
 * (`fauxToolCall(name, args, { id })`) to keep transcripts comparable across runs.
 */
export function fauxAgentModel(
  respond: FauxResponder,
  options: { id?: string; tokensPerSecond?: number; record?: boolean; contextWindow?: number } = {},
): FauxAgentModel {
  const faux = registerFauxProvider({
    provider: "faux",
    models: [
      {
        id: options.id ?? "faux-1",
        ...(options.contextWindow !== undefined ? { contextWindow: options.contextWindow } : {}),
      },
    ],
    ...(options.tokensPerSecond !== undefined ? { tokensPerSecond: options.tokensPerSecond } : {}),
  });
  const model = faux.getModel() as Model<Api>;
  const handle: FauxAgentModel = {
    model,
    ref: { provider: model.provider, modelId: model.id },
    models: createModelResolver({ extra: [model] }),
    requests: [],
    respond,
    unregister: () => faux.unregister(),
  };
  const step: FauxResponseFactory = (context: Context) => {
    faux.appendResponses([step]);
    const request: FauxRequest = {
      systemPrompt: context.systemPrompt,
      // Recording copies every request (tests read them later); benchmarks turn it off.
      messages: options.record === false ? context.messages : structuredClone(context.messages),
      tools: (context.tools ?? []).map((t) => t.name),
      declarations: options.record === false ? (context.tools ?? []) : structuredClone(context.tools ?? []),
    };
    if (options.record !== false) handle.requests.push(request);
    return handle.respond(request, handle.requests.length);
  };
  // Each answered request queues the next factory; the depth is how many requests may be in flight
  // at once (a parent's round of parallel subagents sends that many) before the queue runs dry.
  faux.setResponses(Array.from({ length: 64 }, () => step));
  return handle;
}

/** The faux model's error answer (a provider error such as "503 Service Unavailable"). */
export function fauxError(errorMessage: string): AssistantMessage {
  return fauxAssistantMessage([], { stopReason: "error", errorMessage });
}
