/**
 * Deferred responses and the generation's `poll` phase. pi-ai 0.73.1 has no deferred API, so the
 * model seam defines one: a stream whose final message carries a `deferred` handle is not an answer;
 * the generation keeps the handle and the next poll time durably, asks `fetchDeferred` when due (a
 * handle that is still deferred polls again strictly later), classifies the answer like any other,
 * survives a restart without sending the request again, and cancels the handle when aborted.
 */
import {
  type AssistantMessage,
  createAssistantMessageEventStream,
  fauxAssistantMessage,
  fauxToolCall,
} from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { afterEach, describe, expect, test } from "vitest";
import { zeroUsage } from "../../../worker/agent/records.ts";
import { internals } from "../../../worker/core/internals.ts";
import {
  AgentHarness,
  createModelResolver,
  type DeferredAnswer,
  type DeferredHandle,
  DOC,
  defineTool,
  type LiveState,
  type ModelResolver,
  type Store,
  type StreamFn,
  textResult,
} from "../../../worker/index.ts";
import { deferred, fauxAgentModel, memoryStore, until } from "../../../worker/testing.ts";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** Every request is answered "later" with `handle`; counts the requests sent. */
function deferringStream(handle: DeferredHandle, sent: { count: number }): StreamFn {
  return (model) => {
    sent.count++;
    const stream = createAssistantMessageEventStream();
    const message: DeferredAnswer = {
      role: "assistant",
      content: [],
      api: model.api,
      provider: model.provider,
      model: model.id,
      usage: zeroUsage(),
      stopReason: "stop",
      timestamp: Date.now(),
      deferred: handle,
    };
    queueMicrotask(() => {
      stream.push({ type: "done", reason: "stop", message });
      stream.end(message);
    });
    return stream;
  };
}

function answer(text: string, model: { api: string; provider: string; id: string }): AssistantMessage {
  return { ...fauxAssistantMessage(text), api: model.api, provider: model.provider, model: model.id };
}

const textOf = (e: { model?: unknown }) =>
  ((e.model as AssistantMessage[])[0]?.content ?? []).map((b) => ("text" in b ? b.text : "")).join("");

type FauxModel = ReturnType<typeof fauxAgentModel>["model"];

/** The deferred-answer hooks of a model resolver. */
type DeferredHooks = NonNullable<NonNullable<Parameters<typeof createModelResolver>[0]>["deferred"]>;

/**
 * A harness on a new memory store whose every request is answered later with the handle `job`, the
 * provider's `hooks` fetching and cancelling (`extra`: more models beside the faux one, made from
 * it); its root's input "answer later" submitted. Closed after the test.
 */
async function awaitingAnswer(
  job: DeferredHandle,
  hooks: DeferredHooks,
  options: { extra?: (model: FauxModel) => FauxModel[] } = {},
) {
  const faux = fauxAgentModel(() => fauxAssistantMessage("unused"));
  const h = await AgentHarness.open(await memoryStore(), {
    models: createModelResolver({
      extra: [faux.model, ...(options.extra?.(faux.model) ?? [])],
      deferred: hooks,
    }),
    defaultModel: faux.ref,
    stream: deferringStream(job, { count: 0 }),
  });
  cleanups.push(async () => {
    await h.close();
    faux.unregister();
  });
  const root = await h.root();
  const sub = await root.submit({ type: "input", content: "answer later" });
  return { faux, h, root, sub };
}

/** The moment the standing-clock tests start at. */
const T = 1_700_000_000_000;

/**
 * A harness on a new memory store whose clock stands at `clock.at` (T until the test moves it), every
 * request answered later with job-1 (pollAfterMs 0); each poll records the pollAt it ran for in
 * `polls`, then answers with `answerPoll` (given the poll's number, from 1). Its root's input "answer
 * later" is submitted; `pollAt()` reads the live poll time.
 */
async function pollingOnAStandingClock(
  answerPoll: (model: FauxModel, n: number) => AssistantMessage | Promise<AssistantMessage>,
) {
  const clock = { at: T };
  const faux = fauxAgentModel(() => fauxAssistantMessage("unused"));
  const polls: number[] = [];
  const pollAt = () =>
    (internals(h).session.records.getDoc(1, DOC.live) as LiveState).generation?.deferred?.pollAt;
  const h: AgentHarness = await AgentHarness.open(await memoryStore(), {
    models: createModelResolver({
      extra: [faux.model],
      deferred: {
        async fetchDeferred(model) {
          polls.push(pollAt()!);
          return answerPoll(model as FauxModel, polls.length);
        },
      },
    }),
    defaultModel: faux.ref,
    stream: deferringStream({ id: "job-1", pollAfterMs: 0 }, { count: 0 }),
    now: () => clock.at,
  });
  cleanups.push(async () => {
    await h.close();
    faux.unregister();
  });
  const root = await h.root();
  const sub = await root.submit({ type: "input", content: "answer later" });
  return { h, root, sub, polls, pollAt, clock };
}

/**
 * Reopen `image` two minutes on (past a stored poll a minute away), with a provider whose fetch
 * answers "fetched after restart" and records each handle it was given, and submit the run's input
 * again under its requestId "r1" (it returns the first submission); resolves once that run is done.
 */
async function reopenAndFetch(
  image: Store,
  faux: ReturnType<typeof fauxAgentModel>,
  sent: { count: number },
  options: { wakeAt?: (at: number) => void } = {},
): Promise<{ second: AgentHarness; handles: DeferredHandle[] }> {
  const handles: DeferredHandle[] = [];
  const second = await AgentHarness.open(image, {
    ...(options.wakeAt ? { wakeAt: options.wakeAt } : {}),
    models: createModelResolver({
      extra: [faux.model],
      deferred: {
        async fetchDeferred(model, handle) {
          handles.push(handle);
          return answer("fetched after restart", model);
        },
      },
    }),
    defaultModel: faux.ref,
    stream: deferringStream({ id: "never", pollAfterMs: 1 }, sent),
    now: () => Date.now() + 120_000,
  });
  cleanups.push(async () => {
    await second.close();
    faux.unregister();
  });
  const again = await (await second.root()).submit({
    type: "input",
    content: "answer later",
    requestId: "r1",
  });
  expect((await again.wait()).status).toBe("done");
  return { second, handles };
}

describe("deferred responses (poll)", () => {
  test("a fetched answer is stamped with the harness clock (the now option), not the provider's time", async () => {
    // Spec §2.2 HarnessOptions.now: "Wall clock for ... message timestamps". The fetch answers
    // with a timestamp of its own; the committed answer carries the harness's.
    const faux = fauxAgentModel(() => fauxAssistantMessage("unused"));
    const h = await AgentHarness.open(await memoryStore(), {
      models: createModelResolver({
        extra: [faux.model],
        deferred: { fetchDeferred: async (model) => ({ ...answer("ready", model), timestamp: 1 }) },
      }),
      defaultModel: faux.ref,
      stream: deferringStream({ id: "job-s", pollAfterMs: 0 }, { count: 0 }),
      now: () => 31_000,
    });
    cleanups.push(async () => {
      await h.close();
      faux.unregister();
    });
    const root = await h.root();
    const settled = await (await root.submit({ type: "input", content: "later" })).wait();
    expect(settled.status).toBe("done");
    const answers = (await root.entries()).filter((e) => e.kind === "pi.assistant");
    expect(answers.map(textOf)).toEqual(["ready"]);
    expect(answers.map((e) => (e.model as unknown as AssistantMessage[])[0]!.timestamp)).toEqual([31_000]);
  });

  test("a fetched answer that echoes the API key or another saved secret reaches neither an entry nor afterResponse", async () => {
    // The request path strips them (a provider may echo the key in an error); a poll's answer is an
    // answer too, from the same provider.
    const KEY = "sk-test-poll-0123456789";
    const TOKEN = "server-token-abcdef123456";
    const faux = fauxAgentModel(() => fauxAssistantMessage("unused"));
    const observed: string[] = [];
    const h = await AgentHarness.open(await memoryStore(), {
      models: createModelResolver({
        extra: [faux.model],
        deferred: {
          fetchDeferred: async (model) => ({
            ...answer(`ready with ${KEY} and ${TOKEN}`, model),
            stopReason: "error",
            errorMessage: `401: key ${KEY} refused, token ${TOKEN}`,
          }),
        },
      }),
      defaultModel: faux.ref,
      apiKey: () => KEY,
      secrets: () => [TOKEN],
      settings: { retry: { enabled: false } },
      stream: deferringStream({ id: "job-secret", pollAfterMs: 0 }, { count: 0 }),
      hooks: {
        afterResponse: [(message) => void observed.push(JSON.stringify(message))],
      },
    });
    cleanups.push(async () => {
      await h.close();
      faux.unregister();
    });
    const root = await h.root();
    await (await root.submit({ type: "input", content: "later" })).wait();
    const answers = (await root.entries()).filter((e) => e.kind === "pi.assistant");
    expect(answers).toHaveLength(1);
    const stored = JSON.stringify(answers);
    expect(stored).not.toContain(KEY);
    expect(stored).not.toContain(TOKEN);
    expect((answers[0]!.model as unknown as AssistantMessage[])[0]!.errorMessage).toContain("401: key");
    expect(observed).toHaveLength(1);
    expect(observed[0]).not.toContain(KEY);
    expect(observed[0]).not.toContain(TOKEN);
  });

  test("polled until ready: still-deferred polls strictly later; a poll's answer is classified like any other (a tool round, then the answer); afterResponse sees terminal messages only", async () => {
    const faux = fauxAgentModel(() => fauxAssistantMessage("unused"));
    const sent = { count: 0 };
    const polls: Array<{ id: string; pollAt: number | undefined; at: number }> = [];
    const observed: string[] = [];
    // Every poll gets the checkpoint's model and its invocation's live signal (spec §8).
    const fetchedWith: string[] = [];
    // The signal each fetch got, and the one afterResponse got after it: the same invocation's
    // (reading 23d: a fresh live signal passed the check above).
    const fetchSignals: AbortSignal[] = [];
    const hookSignals: AbortSignal[] = [];
    let h!: AgentHarness;
    const models = createModelResolver({
      extra: [faux.model],
      deferred: {
        async fetchDeferred(model, handle, signal) {
          const live = internals(h).session.records.getDoc(1, DOC.live) as LiveState;
          polls.push({ id: handle.id, pollAt: live.generation?.deferred?.pollAt, at: Date.now() });
          fetchedWith.push(`${model.id} ${signal instanceof AbortSignal && !signal.aborted}`);
          fetchSignals.push(signal);
          if (polls.length === 1) return { ...answer("", model), deferred: { id: "job-2", pollAfterMs: 20 } };
          // The second poll answers with a tool call: a tool round starts from the poll.
          if (polls.length === 2)
            return {
              ...fauxAssistantMessage([fauxToolCall("note", {}, { id: "call-1" })], {
                stopReason: "toolUse",
              }),
              api: model.api,
              provider: model.provider,
              model: model.id,
            };
          return answer("ready now", model);
        },
      },
    });
    const note = defineTool({
      name: "note",
      description: "take a note",
      parameters: Type.Object({}),
      execute: async () => textResult("noted"),
    });
    h = await AgentHarness.open(await memoryStore(), {
      models,
      defaultModel: faux.ref,
      tools: [note],
      hooks: {
        afterResponse: [
          (message, _api, { signal }) => {
            hookSignals.push(signal);
            observed.push(`${message.stopReason}:${message.content.map((b) => b.type).join(",")}`);
          },
        ],
      },
      stream: deferringStream({ id: "job-1", pollAfterMs: 20 }, sent),
    });
    cleanups.push(async () => {
      await h.close();
      faux.unregister();
    });
    const root = await h.root();
    const settled = await (await root.submit({ type: "input", content: "answer later" })).wait();
    expect(settled.status).toBe("done");
    expect(fetchedWith).toEqual(polls.map(() => `${faux.model.id} true`));
    // The second poll's answer and the third's were observed by afterResponse in their invocations.
    expect(fetchSignals[1]).toBe(hookSignals[0]);
    expect(fetchSignals[2]).toBe(hookSignals[1]);
    // Two requests (the second after the tool round), each answered later.
    expect(sent.count).toBe(2);
    expect(polls.map((p) => p.id)).toEqual(["job-1", "job-2", "job-1"]);
    const [first, second] = polls as [(typeof polls)[0], (typeof polls)[0]];
    expect(first.pollAt).toBeDefined();
    expect(second.pollAt!).toBeGreaterThan(first.pollAt!);
    for (const p of polls) expect(p.at).toBeGreaterThanOrEqual(p.pollAt!);
    const entries = (await root.entries()).filter((e) => e.kind !== "pi.system");
    expect(entries.map((e) => e.kind)).toEqual(["pi.user", "pi.assistant", "pi.tool-result", "pi.assistant"]);
    expect(textOf(entries[3]!)).toBe("ready now");
    // Still-deferred results are not terminal: the hook saw the poll's two answers only.
    expect(observed).toEqual(["toolUse:toolCall", "stop:text"]);
    expect((internals(h).session.records.getDoc(1, DOC.live) as LiveState).generation).toBeUndefined();
  });

  test("a model change while polling does not reach the polls: they fetch with their request's model, and the change applies at the next request", async () => {
    // Spec §8.3: preparation pins the model, and every poll belongs to that request (break 30D: a poll
    // phase resolving the agent's current model passed every test: none changed the model while
    // polling). The first poll changes the model and answers "still deferred": the next poll phase
    // starts after the change.
    const faux = fauxAgentModel(() => fauxAssistantMessage("unused"));
    const other = { ...faux.model, id: "faux-other" };
    const sentWith: string[] = [];
    const fetchedWith: string[] = [];
    let h!: AgentHarness;
    const stream: StreamFn = (model) => {
      sentWith.push(model.id);
      const s = createAssistantMessageEventStream();
      const message = { ...answer("", model), deferred: { id: `job-${sentWith.length}`, pollAfterMs: 0 } };
      queueMicrotask(() => {
        s.push({ type: "done", reason: "stop", message });
        s.end(message);
      });
      return s;
    };
    h = await AgentHarness.open(await memoryStore(), {
      models: createModelResolver({
        extra: [faux.model, other],
        deferred: {
          async fetchDeferred(model, handle) {
            fetchedWith.push(`${handle.id} ${model.id}`);
            if (fetchedWith.length === 1) {
              await (await h.root()).configure({ model: { provider: other.provider, modelId: other.id } });
              return { ...answer("", model), deferred: { id: "job-1b", pollAfterMs: 0 } };
            }
            return answer(`from ${model.id}`, model);
          },
        },
      }),
      defaultModel: faux.ref,
      stream,
    });
    cleanups.push(async () => {
      await h.close();
      faux.unregister();
    });
    const root = await h.root();
    expect(await (await root.submit({ type: "input", content: "answer later" })).wait()).toMatchObject({
      status: "done",
    });
    expect(fetchedWith).toEqual([`job-1 ${faux.model.id}`, `job-1b ${faux.model.id}`]);
    expect(await (await root.submit({ type: "input", content: "again" })).wait()).toMatchObject({
      status: "done",
    });
    expect(sentWith).toEqual([faux.model.id, other.id]);
    expect(fetchedWith.slice(2)).toEqual([`job-2 ${other.id}`]);
    const answers = (await root.entries()).filter((e) => e.kind === "pi.assistant");
    expect(answers.map(textOf)).toEqual([`from ${faux.model.id}`, `from ${other.id}`]);
  });

  test("a poll that fails is a terminal error message: afterResponse observes it before it is classified (retried), then the retried poll's answer", async () => {
    const faux = fauxAgentModel(() => fauxAssistantMessage("unused"));
    const sent = { count: 0 };
    let fetches = 0;
    const observed: Array<[string, number]> = [];
    let h!: AgentHarness;
    h = await AgentHarness.open(await memoryStore(), {
      models: createModelResolver({
        extra: [faux.model],
        deferred: {
          async fetchDeferred(model) {
            if (++fetches === 1) throw new Error("503 Service Unavailable");
            return answer("ready now", model);
          },
        },
      }),
      defaultModel: faux.ref,
      settings: { retry: { baseDelayMs: 1 } },
      hooks: {
        afterResponse: [
          async (message) => {
            const root = await h.root();
            // The assistant entries the transcript held when the hook ran: its own not yet.
            observed.push([
              message.stopReason,
              (await root.entries()).filter((e) => e.kind === "pi.assistant").length,
            ]);
          },
        ],
      },
      stream: deferringStream({ id: "job-1", pollAfterMs: 5 }, sent),
    });
    cleanups.push(async () => {
      await h.close();
      faux.unregister();
    });
    const root = await h.root();
    const settled = await (await root.submit({ type: "input", content: "answer later" })).wait();
    expect(settled.status).toBe("done");
    expect(observed).toEqual([
      ["error", 0],
      ["stop", 1],
    ]);
    const assistants = (await root.entries()).filter((e) => e.kind === "pi.assistant");
    expect(assistants.map((e) => (e.model as unknown as AssistantMessage[])[0]?.stopReason)).toEqual([
      "error",
      "stop",
    ]);
  });

  test("a poll's failed answer is classified as its request's attempt: with maxRetries 1, the second attempt's failed poll is not retried and the run fails (draw 37-D)", async () => {
    // Spec §8.3: a poll's result "is classified as above": retried while `attempt <= maxRetries`, at
    // now + retryDelayMs(policy, attempt). The named retry tests failed requests, never polls; a
    // poll's answer classified as a first attempt retried without end, each deadline the first's.
    const faux = fauxAgentModel(() => fauxAssistantMessage("unused"));
    const sent = { count: 0 };
    let fetches = 0;
    const h = await AgentHarness.open(await memoryStore(), {
      models: createModelResolver({
        extra: [faux.model],
        deferred: {
          async fetchDeferred(model) {
            if (++fetches <= 2) throw new Error("503 Service Unavailable");
            return answer("ready now", model);
          },
        },
      }),
      defaultModel: faux.ref,
      settings: { retry: { baseDelayMs: 1, maxRetries: 1 } },
      stream: deferringStream({ id: "job-a", pollAfterMs: 0 }, sent),
    });
    cleanups.push(async () => {
      await h.close();
      faux.unregister();
    });
    const retries: unknown[] = [];
    h.subscribe((change) => {
      for (const t of change.tasks) {
        const state = t.state as { status: string; checkpoint?: { phase: string; attempt: number } };
        if (t.kind === "pi.generation" && state.checkpoint?.phase === "retry")
          retries.push({ attempt: state.checkpoint.attempt });
      }
    });
    const root = await h.root();
    const settled = await (await root.submit({ type: "input", content: "answer later" })).wait();
    expect(settled).toMatchObject({ status: "unanswered", reason: "model_error" });
    expect([sent.count, fetches]).toEqual([2, 2]);
    expect(retries).toEqual([{ attempt: 1 }]);
    const assistants = (await root.entries()).filter((e) => e.kind === "pi.assistant");
    expect(assistants.map((e) => (e.model as unknown as AssistantMessage[])[0]?.stopReason)).toEqual([
      "error",
      "error",
    ]);
  });

  test("the retry policy is read when a poll's answer is classified: retries turned off while the poll runs, a failed poll fails the run at once", async () => {
    // Spec §8.3: "The settings' retry policy is read when the attempt's result is classified". Break
    // 31F: a policy read as the poll phase began (before its sleep and fetch) passed every test; the
    // named ones change it while a request streams, never while a poll runs.
    const faux = fauxAgentModel(() => fauxAssistantMessage("unused"));
    const sent = { count: 0 };
    let retry = { enabled: true, baseDelayMs: 1 };
    const h = await AgentHarness.open(await memoryStore(), {
      models: createModelResolver({
        extra: [faux.model],
        deferred: {
          async fetchDeferred() {
            retry = { enabled: false, baseDelayMs: 1 };
            throw new Error("503 Service Unavailable");
          },
        },
      }),
      defaultModel: faux.ref,
      settings: () => ({ retry }),
      stream: deferringStream({ id: "job-r", pollAfterMs: 0 }, sent),
    });
    cleanups.push(async () => {
      await h.close();
      faux.unregister();
    });
    const root = await h.root();
    const settled = await (await root.submit({ type: "input", content: "answer later" })).wait();
    expect(settled).toMatchObject({ status: "unanswered", reason: "model_error" });
    expect(sent.count).toBe(1);
  });

  test("the retry policy is read when a poll's answer is classified: retries turned on while the poll runs, a failed poll is retried", async () => {
    // Spec §8.3: "The settings' retry policy is read when the attempt's result is classified". Draw
    // 37c: the poll tests turned retries off while a poll ran, never on, so a poll that retried only
    // when both the poll's start and its classification allowed it passed every test.
    const faux = fauxAgentModel(() => fauxAssistantMessage("unused"));
    const sent = { count: 0 };
    let fetches = 0;
    let retry = { enabled: false, baseDelayMs: 1 };
    const h = await AgentHarness.open(await memoryStore(), {
      models: createModelResolver({
        extra: [faux.model],
        deferred: {
          async fetchDeferred(model) {
            if (++fetches > 1) return answer("ready now", model);
            retry = { enabled: true, baseDelayMs: 1 };
            throw new Error("503 Service Unavailable");
          },
        },
      }),
      defaultModel: faux.ref,
      settings: () => ({ retry }),
      stream: deferringStream({ id: "job-on", pollAfterMs: 0 }, sent),
    });
    cleanups.push(async () => {
      await h.close();
      faux.unregister();
    });
    const root = await h.root();
    const settled = await (await root.submit({ type: "input", content: "answer later" })).wait();
    expect(settled).toMatchObject({ status: "done" });
    expect([sent.count, fetches]).toEqual([2, 2]);
  });

  test("a poll's answer is observed by every afterResponse observer in order: a throw is reported (the error thrown) and the next runs", async () => {
    // Break 28P: the hooks table's afterResponse row was read on the request path only; a poll that
    // asked only its first observer passed every test.
    const faux = fauxAgentModel(() => fauxAssistantMessage("unused"));
    const calls: string[] = [];
    const thrown = new Error("first observer broke");
    const reports: unknown[] = [];
    const h = await AgentHarness.open(await memoryStore(), {
      models: createModelResolver({
        extra: [faux.model],
        deferred: { fetchDeferred: async (model) => answer("polled", model) },
      }),
      defaultModel: faux.ref,
      stream: deferringStream({ id: "job-observers", pollAfterMs: 0 }, { count: 0 }),
      onReport: (error) => void reports.push(error),
      hooks: {
        afterResponse: [
          () => {
            calls.push("x");
            throw thrown;
          },
          async (m) => {
            calls.push(`a:${m.content.map((b) => ("text" in b ? b.text : "")).join("")}`);
            await new Promise((r) => setTimeout(r, 5));
            calls.push("a settled");
          },
          () => void calls.push("b"),
        ],
      },
    });
    cleanups.push(async () => {
      await h.close();
      faux.unregister();
    });
    const root = await h.root();
    expect((await (await root.submit({ type: "input", content: "later" })).wait()).status).toBe("done");
    expect(calls).toEqual(["x", "a:polled", "a settled", "b"]);
    expect(reports).toHaveLength(1);
    expect(reports[0]).toBe(thrown);
  });

  test("a poll's afterResponse observer that throws after the poll was aborted propagates: not reported, the next observer not asked, the run ends aborted (draw 36d)", async () => {
    // Draw 36d: the abort-propagation rows were tried on the request path only; a poll whose
    // afterResponse guard never saw the phase's signal (reporting the error, asking the next) passed.
    const faux = fauxAgentModel(() => fauxAssistantMessage("unused"));
    const entered = deferred();
    const leave = deferred();
    const calls: string[] = [];
    const reports: unknown[] = [];
    const h = await AgentHarness.open(await memoryStore(), {
      models: createModelResolver({
        extra: [faux.model],
        deferred: { fetchDeferred: async (model) => answer("polled", model) },
      }),
      defaultModel: faux.ref,
      stream: deferringStream({ id: "job-abort-observer", pollAfterMs: 0 }, { count: 0 }),
      onReport: (error) => void reports.push(error),
      hooks: {
        afterResponse: [
          async () => {
            calls.push("x");
            entered.resolve();
            await leave.promise;
            throw new Error("failed while aborting");
          },
          () => void calls.push("b"),
        ],
      },
    });
    cleanups.push(async () => {
      await h.close();
      faux.unregister();
    });
    const root = await h.root();
    const input = await root.submit({ type: "input", content: "later" });
    await entered.promise;
    const aborting = root.abort();
    await until(() =>
      h.inspect().tasks.some((t) => t.record.kind === "pi.generation" && t.record.abortRequested),
    );
    leave.resolve();
    await aborting;
    expect(await input.wait()).toMatchObject({ status: "unanswered", reason: "aborted" });
    expect(calls).toEqual(["x"]);
    expect(reports).toEqual([]);
  });

  test("a deferred answer moves to poll at now + pollAfterMs, or now + 5000 without one", async () => {
    // Spec §8.3: "pollAt = now + (handle.pollAfterMs ?? 5000)", on the harness clock. (Reading 22b:
    // the poll time was only checked to be later, and the default never.)
    for (const [handle, expected] of [
      [{ id: "job-a", pollAfterMs: 20 }, T + 20],
      [{ id: "job-b" }, T + 5000],
    ] as const) {
      const faux = fauxAgentModel(() => fauxAssistantMessage("unused"));
      const h = await AgentHarness.open(await memoryStore(), {
        models: createModelResolver({
          extra: [faux.model],
          deferred: { fetchDeferred: () => new Promise(() => undefined) },
        }),
        defaultModel: faux.ref,
        stream: deferringStream(handle, { count: 0 }),
        now: () => T, // the clock stands still: the poll never comes due
      });
      cleanups.push(async () => {
        await h.close();
        faux.unregister();
      });
      await (await h.root()).submit({ type: "input", content: "answer later" });
      await until(
        () =>
          (internals(h).session.records.getDoc(1, DOC.live) as LiveState).generation?.deferred !== undefined,
      );
      const [generation] = await h.tasks({ kind: "pi.generation" });
      expect(generation!.state).toMatchObject({ checkpoint: { phase: "poll", pollAt: expected } });
      expect((internals(h).session.records.getDoc(1, DOC.live) as LiveState).generation?.deferred).toEqual({
        pollAt: expected,
      });
    }
  });

  test("a still-deferred poll moves pollAt strictly later, even with pollAfterMs 0 and a clock that stands still", async () => {
    // Spec §8.3: "A still deferred result moves pollAt strictly later." (Reading 22b: only seen with
    // a 20 ms pollAfterMs on a running clock, where any later poll time is later anyway.)
    const { h, polls, pollAt } = await pollingOnAStandingClock((model) => ({
      ...answer("", model),
      deferred: { id: "job-2", pollAfterMs: 0 },
    }));
    await until(() => polls.length >= 1 && pollAt() !== T, { timeoutMs: 5000, what: "a later poll time" });
    // Due at once (T), polled, still deferred: the next poll is at T + 1, which this clock never reaches.
    expect(polls).toEqual([T]);
    expect(pollAt()).toBe(T + 1);
    const [generation] = await h.tasks({ kind: "pi.generation" });
    expect(generation!.state).toMatchObject({ checkpoint: { phase: "poll", pollAt: T + 1 } });
    expect(polls).toHaveLength(1);
  });

  test("a still-deferred poll with pollAfterMs 0 is not polled again at the same time: the next poll waits for the clock to pass the previous poll time", async () => {
    // Draw 37c, 17: a still-deferred poll that dropped the previous pollAt + 1 floor passed the named
    // tests (their clock runs) and made the standing-clock test above spin without end; here the
    // polls are counted, each fetch answering after a timer, so the break fails an assertion.
    const { root, sub, polls, pollAt, clock } = await pollingOnAStandingClock(async (model, n) => {
      await new Promise((resolve) => setTimeout(resolve, 5));
      if (n === 1) return { ...answer("", model), deferred: { id: "job-2", pollAfterMs: 0 } };
      return answer("ready now", model);
    });
    await until(() => polls.length >= 2 || pollAt() === T + 1, {
      timeoutMs: 5000,
      what: "the second poll time",
    });
    // The clock stood at T: one poll so far, the next due at T + 1.
    expect(polls).toEqual([T]);
    clock.at = T + 1;
    expect((await sub.wait()).status).toBe("done");
    expect(polls).toEqual([T, T + 1]);
    expect(textOf((await root.entries()).at(-1)!)).toBe("ready now");
  });

  test("every pi.live value a deferred run commits, its polls and its answer, holds only run, generation, tools and compactions (spec §8.2 LiveState, draw 41d-B)", async () => {
    // Draw 41d-B: the named LiveState test ran a streamed run, a tool round and a compaction; a poll
    // that wrote a field of its own beside generation (removed again with the run) passed it.
    const { h, sub, polls, clock } = await pollingOnAStandingClock(async (model, n) => {
      if (n === 1) return { ...answer("", model), deferred: { id: "job-2", pollAfterMs: 0 } };
      return answer("ready now", model);
    });
    const seen = new Set<string>();
    const pollsSeen: unknown[] = [];
    h.subscribe((change) => {
      for (const d of change.docs) {
        if (d.name !== DOC.live) continue;
        const value = (d.value ?? {}) as LiveState;
        for (const key of Object.keys(value)) seen.add(key);
        if (value.generation?.deferred) pollsSeen.push(value.generation.deferred.pollAt);
      }
    });
    const stored = () => internals(h).session.records.getDoc(1, DOC.live) as LiveState;
    // The first stored poll time is read as well as the ones committed after the subscription.
    for (const key of Object.keys(stored())) seen.add(key);
    await until(() => stored().generation?.deferred?.pollAt === T + 1, {
      timeoutMs: 5000,
      what: "a second poll time",
    });
    for (const key of Object.keys(stored())) seen.add(key);
    expect(polls).toEqual([T]);
    expect(pollsSeen).toContain(T + 1);
    // The clock moves on: the second poll answers and the run ends.
    clock.at = T + 1;
    expect((await sub.wait()).status).toBe("done");
    expect([...seen].every((key) => ["run", "generation", "tools", "compactions"].includes(key))).toBe(true);
    expect([...seen].sort()).toEqual(["generation", "run"]);
    expect(stored()).toEqual({});
  });

  test("a still-deferred poll moves to poll at now + the new handle's pollAfterMs (spec: max(now + pollAfterMs, previous pollAt + 1)), not the old handle's, not one later (draw 32c)", async () => {
    // Appendix A.9: "pollAt = max(now + (pollAfterMs ?? 5000), previousPollAt + 1)". The clock stands
    // at T: the first handle (pollAfterMs 0) is due at T, its poll answers still deferred with a new
    // handle of pollAfterMs 20 (then one without pollAfterMs): T + 20, then T + 5000, each from the
    // poll's now. (Draw 32c: the poll took max(now, previous + 1) + pollAfterMs, T + 21.)
    const { h, polls, pollAt, clock } = await pollingOnAStandingClock((model, n) =>
      n === 1
        ? { ...answer("", model), deferred: { id: "job-2", pollAfterMs: 20 } }
        : { ...answer("", model), deferred: { id: "job-3" } },
    );
    await until(() => polls.length >= 1 && pollAt() !== T, { timeoutMs: 5000, what: "the second poll time" });
    expect(polls).toEqual([T]);
    expect(pollAt()).toBe(T + 20);
    const [generation] = await h.tasks({ kind: "pi.generation" });
    expect(generation!.state).toMatchObject({ checkpoint: { phase: "poll", pollAt: T + 20 } });
    // The clock moves past it: polled at T + 30, still deferred without pollAfterMs: T + 30 + 5000.
    clock.at = T + 30;
    await until(() => polls.length >= 2 && pollAt() !== T + 20, {
      timeoutMs: 5000,
      what: "the third poll time",
    });
    expect(polls).toEqual([T, T + 20]);
    expect(pollAt()).toBe(T + 5030);
  });

  test("a poll's answer calling a tool its request did not offer gets tool_unavailable, with no task, though the agent has it now", async () => {
    // Spec §8.3: the offered tools are replayed through the cutoff, and "poll derives it again".
    // (Reading 22b: only a request's answer was tried, tools "a call to a tool its request did not
    // offer ...".) The agent offers the tool again before the poll phase starts (after a restart).
    const faux = fauxAgentModel(() => fauxAssistantMessage("unused"));
    const ran: string[] = [];
    const apply = defineTool({
      name: "apply",
      description: "apply",
      parameters: Type.Object({}),
      execute: async () => {
        ran.push("apply");
        return textResult("applied");
      },
    });
    const store = await memoryStore();
    const first = await AgentHarness.open(store, {
      models: createModelResolver({
        extra: [faux.model],
        deferred: { fetchDeferred: () => new Promise(() => undefined) },
      }),
      defaultModel: faux.ref,
      tools: [apply],
      stream: deferringStream({ id: "job-t", pollAfterMs: 60_000 }, { count: 0 }),
    });
    const root = await first.root();
    await root.configure({ tools: [] });
    await root.submit({ type: "input", content: "go", requestId: "r" });
    await until(
      () =>
        (internals(first).session.records.getDoc(1, DOC.live) as LiveState).generation?.deferred !==
        undefined,
    );
    await root.configure({ tools: null });
    const image = await memoryStore(store.image());
    await first.close();
    let fetches = 0;
    const h = await AgentHarness.open(image, {
      models: createModelResolver({
        extra: [faux.model],
        deferred: {
          async fetchDeferred(model) {
            if (++fetches > 1) return answer("done", model);
            return {
              ...fauxAssistantMessage([fauxToolCall("apply", {}, { id: "call-1" })], {
                stopReason: "toolUse",
              }),
              api: model.api,
              provider: model.provider,
              model: model.id,
            };
          },
        },
      }),
      defaultModel: faux.ref,
      tools: [apply],
      stream: deferringStream({ id: "job-u", pollAfterMs: 1 }, { count: 0 }),
      now: () => Date.now() + 120_000,
    });
    cleanups.push(async () => {
      await h.close();
      faux.unregister();
    });
    const again = await (await h.root()).submit({ type: "input", content: "go", requestId: "r" });
    expect((await again.wait()).status).toBe("done");
    expect(ran).toEqual([]);
    expect(await h.tasks({ kind: "pi.tool" })).toEqual([]);
    const entries = (await (await h.root()).entries()).filter((e) => e.kind !== "pi.system");
    expect(entries.map((e) => e.kind)).toEqual(["pi.user", "pi.assistant", "pi.tool-result", "pi.assistant"]);
    expect(entries[2]!.data).toMatchObject({ diagnostics: [{ code: "tool_unavailable" }] });
    expect(entries[2]!.id).toBe(entries[1]!.id + 1);
  });

  test("a restart while polling polls the stored handle; the request is not sent again", async () => {
    const faux = fauxAgentModel(() => fauxAssistantMessage("unused"));
    const sent = { count: 0 };
    const store = await memoryStore();
    let polledEarly = 0;
    // The host is told the poll time before the wait, and again by the engine that resumes it (draw
    // 35bB: a poll that armed no wake-up passed every test; a sleeping host would never poll).
    const wakes: number[] = [];
    const resumedWakes: number[] = [];
    const first = await AgentHarness.open(store, {
      wakeAt: (at) => wakes.push(at),
      models: createModelResolver({
        extra: [faux.model],
        deferred: {
          fetchDeferred: (_model, _handle, signal) =>
            new Promise((_resolve, reject) => {
              polledEarly++;
              signal.addEventListener("abort", () => reject(new Error("aborted")));
            }),
        },
      }),
      defaultModel: faux.ref,
      stream: deferringStream({ id: "job-7", pollAfterMs: 60_000 }, sent),
    });
    const root = await first.root();
    await root.submit({ type: "input", content: "answer later", requestId: "r1" });
    await until(
      () =>
        (internals(first).session.records.getDoc(1, DOC.live) as LiveState).generation?.deferred !==
        undefined,
    );
    // What the restart has to go on is durable: the generation's committed checkpoint holds the
    // handle and its next poll time, a minute after the request.
    const polling = (await first.tasks({ kind: "pi.generation" })).find(
      (t) => (t.state as { checkpoint?: { phase: string } }).checkpoint?.phase === "poll",
    );
    expect(polling).toBeDefined();
    const cp = (polling!.state as { checkpoint?: { handle: { id: string }; pollAt: number } }).checkpoint;
    const pollAt = (internals(first).session.records.getDoc(1, DOC.live) as LiveState).generation?.deferred
      ?.pollAt;
    expect(cp?.handle.id).toBe("job-7");
    expect(cp?.pollAt).toBe(pollAt);
    expect(cp?.pollAt).toBeGreaterThan(Date.now());
    // The poll waits for its time: nothing is fetched before it.
    await new Promise((r) => setTimeout(r, 50));
    expect(polledEarly).toBe(0);
    expect(wakes).toEqual([pollAt]);
    const image = await memoryStore(store.image());
    await first.close();
    const { second, handles } = await reopenAndFetch(image, faux, sent, {
      wakeAt: (at) => resumedWakes.push(at),
    });
    expect(handles.map((h) => h.id)).toEqual(["job-7"]);
    expect(resumedWakes).toEqual([pollAt]);
    // The stored handle is the provider's whole, not its id alone (draw 34dA).
    expect(handles).toEqual([{ id: "job-7", pollAfterMs: 60_000 }]);
    expect(sent.count).toBe(1);
    const entries = (await (await second.root()).entries()).filter((e) => e.kind === "pi.assistant");
    expect(entries.map(textOf)).toEqual(["fetched after restart"]);
  });

  test("a restart after a still-deferred poll polls the poll's new handle, stored whole with its poll time; the request is not sent again (draw 37b)", async () => {
    // Draw 37bC: every restart test reopened after the request's own deferral; a still-deferred
    // poll storing the old handle with the new id (the new handle's pollAfterMs lost) passed them.
    const faux = fauxAgentModel(() => fauxAssistantMessage("unused"));
    const sent = { count: 0 };
    const store = await memoryStore();
    let firstPolls = 0;
    const first = await AgentHarness.open(store, {
      models: createModelResolver({
        extra: [faux.model],
        deferred: {
          async fetchDeferred(model) {
            firstPolls++;
            if (firstPolls === 1)
              return { ...answer("", model), deferred: { id: "job-2", pollAfterMs: 60_000 } };
            return new Promise<never>(() => undefined);
          },
        },
      }),
      defaultModel: faux.ref,
      stream: deferringStream({ id: "job-1", pollAfterMs: 20 }, sent),
    });
    await (await first.root()).submit({ type: "input", content: "answer later", requestId: "r1" });
    const checkpointOf = async (h: AgentHarness) => {
      const [generation] = await h.tasks({ kind: "pi.generation" });
      return (generation?.state as { checkpoint?: { phase: string; handle?: unknown; pollAt?: number } })
        ?.checkpoint;
    };
    const livePollAt = () =>
      (internals(first).session.records.getDoc(1, DOC.live) as LiveState).generation?.deferred?.pollAt;
    // The first poll (20 ms after the request) answers "later" again, a minute on.
    await until(() => firstPolls >= 1 && (livePollAt() ?? 0) > Date.now() + 30_000, {
      what: "the still-deferred poll's commit",
    });
    const cp = await checkpointOf(first);
    const pollAt = livePollAt();
    expect(cp?.phase).toBe("poll");
    expect(cp?.handle).toEqual({ id: "job-2", pollAfterMs: 60_000 });
    expect(cp?.pollAt).toBe(pollAt);
    expect(cp?.pollAt).toBeGreaterThan(Date.now());
    const image = await memoryStore(store.image());
    await first.close();
    const { second, handles } = await reopenAndFetch(image, faux, sent);
    expect(handles).toEqual([{ id: "job-2", pollAfterMs: 60_000 }]);
    expect(sent.count).toBe(1);
    const entries = (await (await second.root()).entries()).filter((e) => e.kind === "pi.assistant");
    expect(entries.map(textOf)).toEqual(["fetched after restart"]);
  });

  test("reopened before the stored pollAt, the poll still sleeps until it: nothing is fetched earlier, then the stored handle once", async () => {
    // Break 29C: the restart test above reopens with a clock already past the stored poll time, so
    // a recovered poll that fetched at once, skipping its sleep, passed every test.
    let clock = 1_700_000_000_000;
    const faux = fauxAgentModel(() => fauxAssistantMessage("unused"));
    const sent = { count: 0 };
    const store = await memoryStore();
    const first = await AgentHarness.open(store, {
      models: createModelResolver({
        extra: [faux.model],
        deferred: { fetchDeferred: () => new Promise<never>(() => undefined) },
      }),
      defaultModel: faux.ref,
      stream: deferringStream({ id: "job-8", pollAfterMs: 4_000 }, sent),
      now: () => clock,
    });
    await (await first.root()).submit({ type: "input", content: "answer later", requestId: "r1" });
    const pollAtOf = (h: AgentHarness) =>
      (internals(h).session.records.getDoc(1, DOC.live) as LiveState).generation?.deferred?.pollAt;
    await until(() => pollAtOf(first) !== undefined, { what: "the deferred note" });
    expect(pollAtOf(first)).toBe(clock + 4_000);
    const image = await memoryStore(store.image());
    await first.close();
    // Reopened halfway to the stored poll time (the engine sleeps in real time for what is left: the
    // delay is kept short so the test takes seconds, not the half minute a real poll would).
    clock += 2_000;
    const fetched: Array<{ id: string; at: number }> = [];
    const second = await AgentHarness.open(image, {
      models: createModelResolver({
        extra: [faux.model],
        deferred: {
          async fetchDeferred(model, handle) {
            fetched.push({ id: handle.id, at: clock });
            return answer("fetched at its time", model);
          },
        },
      }),
      defaultModel: faux.ref,
      stream: deferringStream({ id: "never", pollAfterMs: 1 }, sent),
      now: () => clock,
    });
    cleanups.push(async () => {
      await second.close();
      faux.unregister();
    });
    second.resume();
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(fetched).toEqual([]);
    clock += 2_000; // the stored poll time
    const again = await (await second.root()).submit({
      type: "input",
      content: "answer later",
      requestId: "r1",
    });
    expect((await again.wait()).status).toBe("done");
    expect(fetched).toEqual([{ id: "job-8", at: 1_700_000_004_000 }]);
    expect(sent.count).toBe(1);
  });

  test("abort while polling cancels the handle and leaves the input unanswered (aborted)", async () => {
    const cancelled: string[] = [];
    // The cancellation gets the checkpoint's model and a signal (spec §8).
    const models: string[] = [];
    const { faux, h, root, sub } = await awaitingAnswer(
      { id: "job-9", pollAfterMs: 60_000 },
      {
        fetchDeferred: () => new Promise(() => undefined),
        async cancelDeferred(model, handle, signal) {
          // A live signal: the abort invocation's, not the cancelled poll's (reading 23d).
          models.push(`cancel ${model.id} ${signal instanceof AbortSignal && !signal.aborted}`);
          cancelled.push(handle.id);
        },
      },
    );
    await until(
      () =>
        (internals(h).session.records.getDoc(1, DOC.live) as LiveState).generation?.deferred !== undefined,
    );
    await root.abort();
    expect(await sub.wait()).toMatchObject({ status: "unanswered", reason: "aborted" });
    expect(cancelled).toEqual(["job-9"]);
    expect(models).toEqual([`cancel ${faux.model.id} true`]);
    await root.waitForIdle();
    expect(internals(h).session.records.getDoc(1, DOC.live)).toEqual({});
  });
  test("abort while polling asks the cancellation before its commit: pi.live.run still lists the input when cancelDeferred is called (draw 39d-C)", async () => {
    // Draw 39d-C: the abort handler cancels, then commits (spec §8.3); a handler that committed first
    // and cancelled after passed every test (each read the cancellation only once all had settled).
    const seen: unknown[] = [];
    let read: () => unknown = () => undefined;
    const { h, root, sub } = await awaitingAnswer(
      { id: "job-39", pollAfterMs: 60_000 },
      {
        fetchDeferred: () => new Promise(() => undefined),
        async cancelDeferred(_model, handle) {
          seen.push([handle.id, read()]);
        },
      },
    );
    read = () => (internals(h).session.records.getDoc(1, DOC.live) as LiveState).run?.inputs;
    await until(
      () =>
        (internals(h).session.records.getDoc(1, DOC.live) as LiveState).generation?.deferred !== undefined,
    );
    await root.abort();
    expect(await sub.wait()).toMatchObject({ status: "unanswered", reason: "aborted" });
    expect(seen).toEqual([["job-39", [sub.id]]]);
    await root.waitForIdle();
    expect(internals(h).session.records.getDoc(1, DOC.live)).toEqual({});
  });
  test("abort while polling after the conversation's model changed: the cancellation is asked of the poll's own model, not the new one (draw 38C)", async () => {
    // Spec §8: cancelDeferred is called with the model of the continuation. Draw 38C: an abort
    // handler resolving the conversation's current model passed every test (none changed the
    // model while polling before the abort).
    const cancelled: string[] = [];
    const { faux, h, root, sub } = await awaitingAnswer(
      { id: "job-38", pollAfterMs: 60_000 },
      {
        fetchDeferred: () => new Promise(() => undefined),
        async cancelDeferred(model, handle) {
          cancelled.push(`${handle.id} ${model.id}`);
        },
      },
      { extra: (model) => [{ ...model, id: "faux-other" }] },
    );
    const other = { provider: faux.model.provider, id: "faux-other" };
    await until(
      () =>
        (internals(h).session.records.getDoc(1, DOC.live) as LiveState).generation?.deferred !== undefined,
    );
    await root.configure({ model: { provider: other.provider, modelId: other.id } });
    await root.abort();
    expect(await sub.wait()).toMatchObject({ status: "unanswered", reason: "aborted" });
    expect(cancelled).toEqual([`job-38 ${faux.model.id}`]);
    await root.waitForIdle();
    expect(internals(h).session.records.getDoc(1, DOC.live)).toEqual({});
  });

  test("abort while a poll's fetch is in flight (its pollAt passed) cancels the handle too, and the input ends unanswered (aborted)", async () => {
    // Break 30I: the named test aborted during the sleep before the first poll (pollAt a minute
    // ahead); a handler that cancels only while the poll is still ahead passed it.
    const cancelled: string[] = [];
    const fetching = deferred();
    const { h, root, sub } = await awaitingAnswer(
      { id: "job-10", pollAfterMs: 0 },
      {
        // In flight until its signal aborts (a fetch that honours the signal, as pi-ai's do).
        fetchDeferred: (_model, _handle, signal) => {
          fetching.resolve();
          return new Promise((_, reject) =>
            signal.addEventListener("abort", () => reject(signal.reason), { once: true }),
          );
        },
        async cancelDeferred(_model, handle) {
          cancelled.push(handle.id);
        },
      },
    );
    await fetching.promise;
    const cp = (internals(h).session.records.getDoc(1, DOC.live) as LiveState).generation?.deferred;
    expect(cp?.pollAt).toBeLessThanOrEqual(Date.now());
    await root.abort();
    expect(await sub.wait()).toMatchObject({ status: "unanswered", reason: "aborted" });
    expect(cancelled).toEqual(["job-10"]);
    await root.waitForIdle();
    expect(internals(h).session.records.getDoc(1, DOC.live)).toEqual({});
  });
  test("abort while polling after a reopen, before the recovered poll ran: the stored handle is cancelled and the input ends unanswered (aborted) (draw 33c)", async () => {
    // Draw 33c: the named tests abort a poll that runs in this process; an abort handler that
    // cancelled only the handle an in-memory poll held passed them.
    const faux = fauxAgentModel(() => fauxAssistantMessage("unused"));
    const store = await memoryStore();
    const first = await AgentHarness.open(store, {
      models: createModelResolver({
        extra: [faux.model],
        deferred: { fetchDeferred: () => new Promise<never>(() => undefined) },
      }),
      defaultModel: faux.ref,
      stream: deferringStream({ id: "job-13", pollAfterMs: 60_000 }, { count: 0 }),
    });
    const sub = await (await first.root()).submit({ type: "input", content: "answer later" });
    await until(
      () =>
        (internals(first).session.records.getDoc(1, DOC.live) as LiveState).generation?.deferred !==
        undefined,
      { what: "the deferred note" },
    );
    const image = await memoryStore(store.image());
    await first.close();
    const cancelled: string[] = [];
    const second = await AgentHarness.open(image, {
      models: createModelResolver({
        extra: [faux.model],
        deferred: {
          fetchDeferred: () => new Promise<never>(() => undefined),
          async cancelDeferred(_model, handle) {
            cancelled.push(handle.id);
          },
        },
      }),
      defaultModel: faux.ref,
      stream: deferringStream({ id: "never", pollAfterMs: 60_000 }, { count: 0 }),
      paused: true,
    });
    cleanups.push(async () => {
      await second.close();
      faux.unregister();
    });
    const root = await second.root();
    const aborting = root.abort();
    second.resume();
    await aborting;
    expect(await (await second.submission(sub.id))!.wait()).toMatchObject({
      status: "unanswered",
      reason: "aborted",
    });
    expect(cancelled).toEqual(["job-13"]);
    await root.waitForIdle();
    expect(internals(second).session.records.getDoc(1, DOC.live)).toEqual({});
  });
  test("abort while polling a model the resolver no longer knows: no cancellation is asked, the run still ends aborted", async () => {
    // Spec §8.3: the abort handler calls cancelDeferred in poll "when the model is known". (Reading
    // 22b: only a known model was tried.)
    const faux = fauxAgentModel(() => fauxAssistantMessage("unused"));
    const cancelled: unknown[] = [];
    let gone = false;
    const base = createModelResolver({
      extra: [faux.model],
      deferred: {
        fetchDeferred: () => new Promise(() => undefined),
        async cancelDeferred(model, handle) {
          cancelled.push([model?.id, handle.id]);
        },
      },
    });
    const models: ModelResolver = { ...base, resolve: (ref) => (gone ? undefined : base.resolve(ref)) };
    const h = await AgentHarness.open(await memoryStore(), {
      models,
      defaultModel: faux.ref,
      stream: deferringStream({ id: "job-12", pollAfterMs: 60_000 }, { count: 0 }),
    });
    cleanups.push(async () => {
      await h.close();
      faux.unregister();
    });
    const root = await h.root();
    const sub = await root.submit({ type: "input", content: "answer later" });
    await until(
      () =>
        (internals(h).session.records.getDoc(1, DOC.live) as LiveState).generation?.deferred !== undefined,
    );
    gone = true;
    await root.abort();
    expect(await sub.wait()).toMatchObject({ status: "unanswered", reason: "aborted" });
    expect(cancelled).toEqual([]);
    const [generation] = await h.tasks({ kind: "pi.generation" });
    expect(generation!.state).toMatchObject({ status: "terminal", outcome: { status: "aborted" } });
    expect(internals(h).session.records.getDoc(1, DOC.live)).toEqual({});
  });
  test("a failed deferred cancellation is reported and the run still ends aborted", async () => {
    const faux = fauxAgentModel(() => fauxAssistantMessage("unused"));
    const reports: unknown[] = [];
    // The very error the resolver threw is reported, not a wrapper that only repeats its message.
    const cancelFailed = new Error("cancel failed");
    const h = await AgentHarness.open(await memoryStore(), {
      models: createModelResolver({
        extra: [faux.model],
        deferred: {
          fetchDeferred: () => new Promise(() => undefined),
          cancelDeferred: async () => Promise.reject(cancelFailed),
        },
      }),
      defaultModel: faux.ref,
      stream: deferringStream({ id: "job-10", pollAfterMs: 60_000 }, { count: 0 }),
      onReport: (error) => void reports.push(error),
    });
    cleanups.push(async () => {
      await h.close();
      faux.unregister();
    });
    const root = await h.root();
    const sub = await root.submit({ type: "input", content: "answer later" });
    await until(
      () =>
        (internals(h).session.records.getDoc(1, DOC.live) as LiveState).generation?.deferred !== undefined,
    );
    await root.abort();
    expect(await sub.wait()).toMatchObject({ status: "unanswered", reason: "aborted" });
    expect(reports.map((e) => String((e as Error).message))).toContainEqual(
      expect.stringMatching(/cancel failed/),
    );
    expect(reports).toContain(cancelFailed);
    const [generation] = await h.tasks({ kind: "pi.generation" });
    expect(generation!.state).toMatchObject({ status: "terminal", outcome: { status: "aborted" } });
    expect(internals(h).session.records.getDoc(1, DOC.live)).toEqual({});
  });
  /**
   * A response whose only event before it turns deferred is an empty start (`startUsage`: what that
   * start carries), slower than the partial throttle: the partials committed meanwhile must be none,
   * and an abort while deferred leaves the user's message alone, unanswered.
   */
  async function deferredAfterEmptyStart(
    id: string,
    startUsage: ReturnType<typeof zeroUsage>,
  ): Promise<void> {
    const faux = fauxAgentModel(() => fauxAssistantMessage("unused"));
    const handle = { id, pollAfterMs: 60_000 };
    const stream: StreamFn = (model) => {
      const events = createAssistantMessageEventStream();
      const message: DeferredAnswer = {
        role: "assistant",
        content: [],
        api: model.api,
        provider: model.provider,
        model: model.id,
        usage: zeroUsage(),
        stopReason: "stop",
        timestamp: Date.now(),
        deferred: handle,
      };
      events.push({ type: "start", partial: { ...message, usage: startUsage } });
      // Longer than the partial throttle: an empty partial would be committed meanwhile.
      setTimeout(() => {
        events.push({ type: "done", reason: "stop", message });
        events.end(message);
      }, 200);
      return events;
    };
    const h = await AgentHarness.open(await memoryStore(), {
      models: createModelResolver({
        extra: [faux.model],
        deferred: { fetchDeferred: () => new Promise(() => undefined) },
      }),
      defaultModel: faux.ref,
      stream,
      settings: { partialIntervalMs: 10 },
    });
    cleanups.push(async () => {
      await h.close();
      faux.unregister();
    });
    const partials: unknown[] = [];
    h.subscribe((change) => {
      for (const d of change.docs)
        if (d.name === DOC.live) partials.push((d.value as LiveState | undefined)?.generation?.message);
    });
    const root = await h.root();
    const sub = await root.submit({ type: "input", content: "answer later" });
    await until(
      () =>
        (internals(h).session.records.getDoc(1, DOC.live) as LiveState).generation?.deferred !== undefined,
    );
    expect(partials.filter((m) => m !== undefined)).toEqual([]);
    // Aborted while deferred: with no partial there is nothing to convert, so the transcript keeps the
    // user's message alone (no empty aborted answer) and the input ends unanswered, aborted.
    await root.abort();
    expect(await sub.wait()).toMatchObject({ status: "unanswered", reason: "aborted" });
    await root.waitForIdle();
    expect((await root.entries()).map((e) => e.kind)).toEqual(["pi.user"]);
  }

  test("a response that turns deferred after an empty start event commits no partial", async () => {
    await deferredAfterEmptyStart("job-11", zeroUsage());
  });

  test("an empty start event that carries usage (input tokens counted at start) commits no partial either, when the response turns deferred (draw 32c)", async () => {
    // Draw 32c: the start above carries zero usage; a provider counts input tokens in its start event
    // (Anthropic's message_start), and a writer that took usage alone as worth a partial committed an
    // empty one for it, where the test above passed.
    await deferredAfterEmptyStart("job-11u", { ...zeroUsage(), input: 1200, totalTokens: 1200 });
  });
});
