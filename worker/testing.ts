/**
 * The test kit: fakes with failure switches and the loops tests share, in one place. Tests and
 * benches import these instead of writing their own.
 * - `memoryStore`, `recordJobs` (testing/store.ts): memory stores, and the SQL a store ran.
 * - `crashingStore`, `CRASH_MODES`, `crashSweep` (testing/crash.ts): a store that dies at a chosen
 *   transaction, and the one loop every crash sweep runs.
 * - `deferred`, `until`, `within` (testing/wait.ts): waiting without hanging.
 * - `fauxAgentModel`, `fauxError`, `KeyedEffects`, `keyedEffectTool` (below): pi-ai's faux provider
 *   answering from the request context, and a tool applying keyed effects.
 */
import {
  type Api,
  type AssistantMessage,
  type Context,
  type FauxResponseFactory,
  fauxAssistantMessage,
  type Message,
  type Model,
  registerFauxProvider,
} from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { createModelResolver, type ModelResolver } from "./agent/models/resolver.ts";
import { defineTool, type ReplayPolicy, type ToolDefinition, textResult } from "./agent/tools/contract.ts";

export {
  CRASH_MODES,
  type CrashingStore,
  type CrashMode,
  type CrashOptions,
  type CrashRun,
  type CrashScenario,
  type CrashSweepOptions,
  type CrashSweepReport,
  crashingStore,
  crashSweep,
  type SweptEngine,
} from "./testing/crash.ts";
export { memoryStore, recordJobs, type StoreJob } from "./testing/store.ts";
export { type Deferred, deferred, releaseDeferreds, until, within } from "./testing/wait.ts";

/** A transient failure of a fake external service (a retry may succeed). */
export class TransientFailure extends Error {
  override readonly name = "TransientFailure";
}

/** A request as the faux model received it: the system prompt, a copy of the messages, tool names. */
export interface FauxRequest {
  readonly systemPrompt: string | undefined;
  readonly messages: Message[];
  readonly tools: string[];
}

/** Derives the answer from the request (`call` counts requests from 1, for scripts that need it). */
export type FauxResponder = (
  request: FauxRequest,
  call: number,
) => AssistantMessage | Promise<AssistantMessage>;

export interface FauxAgentModel {
  readonly model: Model<Api>;
  readonly ref: { provider: string; id: string };
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
        ...(options.contextWindow ? { contextWindow: options.contextWindow } : {}),
      },
    ],
    ...(options.tokensPerSecond !== undefined ? { tokensPerSecond: options.tokensPerSecond } : {}),
  });
  const model = faux.getModel() as Model<Api>;
  const handle: FauxAgentModel = {
    model,
    ref: { provider: model.provider, id: model.id },
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
    };
    if (options.record !== false) handle.requests.push(request);
    return handle.respond(request, handle.requests.length);
  };
  faux.setResponses([step, step, step, step]);
  return handle;
}

/** The faux model's error answer (a provider error such as "503 Service Unavailable"). */
export function fauxError(errorMessage: string): AssistantMessage {
  return fauxAssistantMessage([], { stopReason: "error", errorMessage });
}

/** An external service applying effects keyed by idempotency key (a repeated key is deduplicated). */
export class KeyedEffects {
  /** Keys in the order they were first applied, with what they were about. */
  readonly applied: Array<{ key: string; ref: string }> = [];
  /** Every call, deduplicated or not. */
  calls = 0;
  #failNext = 0;

  /** The next n calls fail with a transient error before doing anything. */
  failNext(n: number): void {
    this.#failNext = n;
  }

  async apply(key: string, ref: string): Promise<"applied" | "duplicate"> {
    await Promise.resolve();
    this.calls++;
    if (this.#failNext > 0) {
      this.#failNext--;
      throw new TransientFailure("effect service unavailable");
    }
    if (this.applied.some((a) => a.key === key)) return "duplicate";
    this.applied.push({ key, ref });
    return "applied";
  }

  /** How many distinct keys each ref was applied under (more than one: the key was not stable). */
  keysPerRef(): Map<string, number> {
    const out = new Map<string, number>();
    for (const a of this.applied) out.set(a.ref, (out.get(a.ref) ?? 0) + 1);
    return out;
  }
}

/**
 * A tool `{ item: string }` that applies one effect in `effects`, keyed by its tool-call id, and
 * answers `<name> applied <item>`. `seen` records the arguments of every execution.
 */
export function keyedEffectTool(
  effects: KeyedEffects,
  options: { name: string; replay?: ReplayPolicy; seen?: Array<{ item: string }> },
): ToolDefinition {
  return defineTool({
    name: options.name,
    description: `Apply ${options.name} to an item`,
    parameters: Type.Object({ item: Type.String() }),
    ...(options.replay ? { replay: options.replay } : {}),
    async execute(args, api) {
      options.seen?.push({ ...args });
      await effects.apply(`${options.name}:${api.toolCallId}`, args.item);
      return textResult(`${options.name} applied ${args.item}`);
    },
  });
}
