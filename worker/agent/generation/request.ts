/**
 * The `request` and `poll` phases of `pi.generation`: send the prepared request (or fetch a
 * deferred response) and hand the final answer to classification. A partial left by a crash is
 * converted to an aborted entry before anything is sent; partials stream to pi.live through a
 * throttled writer stopped before any outcome commit; the API key never reaches an entry; a
 * deferred answer moves the task to `poll` without an entry or hooks.
 */
import type {
  Api,
  AssistantMessage,
  AssistantMessageEvent,
  Context,
  Message,
  Model,
} from "@mariozechner/pi-ai";
import type { ConversationId, EntryId, TaskId } from "../../core/types.ts";
import { deriveContext } from "../conversation/context.ts";
import { type HookApi, hookApi } from "../extensions/hooks.ts";
import { keylessFailure } from "../models/provider-problem.ts";
import { type DeferredAnswer, type DeferredHandle, isDeferred } from "../models/resolver.ts";
import { providerSession } from "../provider-session.ts";
import { DOC, errorAnswer, type LiveState, type ModelRef, type ThinkingLevel } from "../records.ts";
import { type AgentServices, type StreamSettings, sleepUntil, withoutSecrets } from "../services.ts";
import { toPiTool } from "../tools/contract.ts";
import { classify, type GenerationDeps } from "./classification.ts";
import { PartialWriter } from "./partial.ts";
import {
  committed,
  convertLeftoverPartial,
  deferTo,
  failRun,
  type GenerationRuntime,
  type GenerationTask,
  runHooks,
} from "./turn.ts";

/**
 * `request`: send the pinned request, stream its partials, classify the answer. The invocation's
 * signal is read from the runtime where it is handed on (the provider's options, hooks), so a
 * provider that never listens makes none; `runtime.aborted` looks.
 */
export async function request(
  deps: GenerationDeps,
  task: GenerationTask<"request">,
  runtime: GenerationRuntime,
): Promise<void> {
  const { services } = deps;
  const c = task.conversationId;
  const cp = task.state.checkpoint;
  // The hooks' api is made for the first hook that runs (most requests run none), once for all.
  let hooksApi: HookApi | undefined;
  const api = () => (hooksApi ??= hookApi(runtime, services));
  await convertPartialLeftByCrash(services, runtime, c);
  const model = services.models.resolve(cp.model);
  if (!model) return failUnknownModel(runtime, task.id, c, cp.model);
  const prompt = await promptFor(services, c, cp.cutoff, api, runtime);
  const apiKey = services.apiKey(model.provider);
  const partials = new PartialWriter(runtime, c, task.id, cp.attempt, services.settings().partialIntervalMs);
  let final = await streamAnswer(services, model, prompt.context, {
    stream: cp.stream,
    thinkingLevel: cp.thinkingLevel,
    conversationId: c,
    apiKey,
    partials,
    runtime,
  });
  // Stopped before any return: no throttled partial may land after the outcome's commit.
  await partials.stop();
  if (runtime.aborted) return; // the abort handler (or the next engine) converts the partial
  // A provider may echo the key in an error ("invalid key sk-..."): it never reaches an entry.
  // So may it echo any other saved secret (a server token, another provider's key).
  final = withoutSecrets(final, apiKey, services.secrets());
  if (isDeferred(final)) {
    // Not an answer yet: keep the handle and poll for it (no entry, no hooks).
    const handle = final.deferred;
    await runtime.commit((tx) => deferTo(tx, task.id, c, cp, handle, tx.now()));
    return;
  }
  const answer = final;
  const afterResponse = services.hooks(c).afterResponse;
  if (afterResponse?.length)
    await runHooks(afterResponse, (h) => h(answer, api(), { signal: runtime.signal }), {
      report: services.report,
      get signal() {
        return runtime.signal;
      },
    });
  await classify(deps, task, runtime, answer, {
    attempt: cp.attempt,
    uncounted: cp.uncounted ?? 0,
    offered: prompt.offered,
    compacted: cp.compacted === true,
  });
}

/** `poll`: at the durable poll time, fetch a deferred response; poll again or classify it. */
export async function poll(
  deps: GenerationDeps,
  task: GenerationTask<"poll">,
  runtime: GenerationRuntime,
  signal: AbortSignal,
): Promise<void> {
  const { services } = deps;
  const c = task.conversationId;
  const cp = task.state.checkpoint;
  services.wakeAt(cp.pollAt);
  await sleepUntil(cp.pollAt, () => runtime.now(), signal);
  const model = services.models.resolve(cp.model);
  if (!model) return failUnknownModel(runtime, task.id, c, cp.model);
  const fetched = await fetchDeferred(services, model, cp.handle, signal);
  if (signal.aborted) return;
  // An answer fetched later comes from the same provider as a streamed one: the same redaction.
  const answer = withoutSecrets(fetched, services.apiKey(model.provider), services.secrets());
  if (isDeferred(answer)) {
    const handle = answer.deferred;
    // Still deferred: the next poll is strictly later than this one.
    await runtime.commit((tx) => deferTo(tx, task.id, c, cp, handle, tx.now(), cp.pollAt + 1));
    return;
  }
  const offered = offeredTools(services, c, deriveContext(await services.entries.get(c, cp.cutoff)).tools);
  await runHooks(services.hooks(c).afterResponse, (h) => h(answer, hookApi(runtime, services), { signal }), {
    report: services.report,
    signal,
  });
  // Every classifying commit replaces pi.live.generation, so the deferred note goes with it.
  await classify(deps, task, runtime, answer, {
    attempt: cp.attempt,
    uncounted: cp.uncounted ?? 0,
    offered,
    compacted: cp.compacted === true,
  });
}

/** A partial committed before a crash is kept as an aborted answer, never resent. */
async function convertPartialLeftByCrash(
  services: AgentServices,
  runtime: GenerationRuntime,
  c: ConversationId,
): Promise<void> {
  if (!committed<LiveState>(services, c, DOC.live, {}).generation?.message) return;
  await runtime.commit((tx) => {
    convertLeftoverPartial(tx, c);
    return undefined;
  });
}

async function failUnknownModel(
  runtime: GenerationRuntime,
  taskId: TaskId,
  c: ConversationId,
  ref: ModelRef,
): Promise<void> {
  await runtime.commit((tx) =>
    failRun(tx, c, taskId, "no_model", `unknown model ${ref.provider}/${ref.modelId}`),
  );
}

/** The offered tools that the conversation's agent has, in the context's order. */
function offeredTools(services: AgentServices, c: ConversationId, offered: readonly string[]): string[] {
  const registered = services.tools(c);
  return offered.filter((n) => registered.has(n));
}

/** What the model sees up to `cutoff`, after the beforeRequest hooks, and the tools it is offered. */
async function promptFor(
  services: AgentServices,
  c: ConversationId,
  cutoff: EntryId,
  api: () => HookApi,
  runtime: GenerationRuntime,
): Promise<{ context: Context; offered: string[] }> {
  const derived = deriveContext(await services.entries.get(c, cutoff));
  const registered = services.tools(c);
  const offered = offeredTools(services, c, derived.tools);
  let messages: Message[] = derived.messages;
  const beforeRequest = services.hooks(c).beforeRequest;
  if (beforeRequest?.length)
    await runHooks(
      beforeRequest,
      async (h) => {
        messages = (await h(messages, api(), { signal: runtime.signal })) ?? messages;
      },
      {
        report: services.report,
        get signal() {
          return runtime.signal;
        },
      },
    );
  return {
    context: {
      ...(derived.systemPrompt ? { systemPrompt: derived.systemPrompt } : {}),
      messages,
      tools: offered.map((n) => toPiTool(registered.get(n)!)),
    },
    offered,
  };
}

interface StreamRequest {
  /** The provider options pinned in the checkpoint. */
  readonly stream: Omit<StreamSettings, "headers"> | undefined;
  readonly thinkingLevel: ThinkingLevel;
  readonly conversationId: ConversationId;
  readonly apiKey: string | undefined;
  readonly partials: PartialWriter;
  /** Its `signal` goes to the provider, made when the provider reads it. */
  readonly runtime: GenerationRuntime;
}

/** Stream one request to its final message; every failure is an error answer, never a throw. */
async function streamAnswer(
  services: AgentServices,
  model: Model<Api>,
  context: Context,
  req: StreamRequest,
): Promise<AssistantMessage> {
  // Before the try: a store that cannot take the id is the engine stopping, not a provider failure.
  const sessionId = await providerSession(services.core, req.conversationId);
  const headers = services.settings().stream.headers;
  let final: AssistantMessage | undefined;
  try {
    // Inside the try: a provider that throws at once (no such API registered, a bad option)
    // gives an error answer like any other failure, not a faulted task.
    const { runtime } = req;
    const stream = services.stream(model, context, {
      ...(req.stream ?? {}),
      ...(headers ? { headers } : {}),
      get signal() {
        return runtime.signal;
      },
      ...(req.thinkingLevel !== "off" ? { reasoning: req.thinkingLevel } : {}),
      sessionId,
      ...(req.apiKey ? { apiKey: req.apiKey } : {}),
    });
    for await (const event of stream as AsyncIterable<AssistantMessageEvent>) {
      if (event.type === "done") final = event.message;
      else if (event.type === "error") final = event.error;
      else if ("partial" in event) req.partials.offer(event.partial);
    }
    final ??= await stream.result();
    // Spec §2.2: the harness clock stamps message timestamps; pi-ai stamped this with Date.now().
    final = { ...final, timestamp: services.core.now() };
  } catch (error) {
    final = errorAnswer(
      { api: model.api, provider: model.provider, model: model.id },
      error,
      services.core.now(),
    );
  }
  // Without a key, pi-ai's providers fail on `process.env` in a browser: say what is missing.
  if (!req.apiKey && final.stopReason === "error") {
    const said = keylessFailure(final.errorMessage, model.provider);
    if (said !== undefined && said !== final.errorMessage) final = { ...final, errorMessage: said };
  }
  return final;
}

/** Fetch a deferred response once; a failure is an error answer. */
async function fetchDeferred(
  services: AgentServices,
  model: Model<Api>,
  handle: DeferredHandle,
  signal: AbortSignal,
): Promise<AssistantMessage | DeferredAnswer> {
  try {
    if (!services.models.fetchDeferred)
      throw new Error(`the model resolver cannot fetch deferred responses (${model.provider}/${model.id})`);
    const fetched = await services.models.fetchDeferred(model, handle, signal);
    // A fetched answer is stamped by the harness clock like a streamed one (spec §2.2).
    return { ...fetched, timestamp: services.core.now() };
  } catch (error) {
    return errorAnswer(
      { api: model.api, provider: model.provider, model: model.id },
      error,
      services.core.now(),
    );
  }
}
