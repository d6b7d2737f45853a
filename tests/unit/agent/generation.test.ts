/**
 * Generation, against pi-ai's faux provider: request hooks, throttled partial answers, retries
 * with durable backoff, provider sessions, keys kept out of the store, stream settings, and usage.
 */
import {
  type AssistantMessage,
  createAssistantMessageEventStream,
  fauxAssistantMessage,
  fauxToolCall,
  type Usage,
} from "@mariozechner/pi-ai";
import { describe, expect, test } from "vitest";
import { providerProblem } from "../../../worker/agent/models/provider-problem.ts";
import { addUsage } from "../../../worker/agent/records.ts";
import {
  DEFAULT_RETRY,
  defaultStream,
  resolveSettings,
  retryDelayMs,
} from "../../../worker/agent/services.ts";
import { internals } from "../../../worker/core/internals.ts";
import {
  AgentHarness,
  type AgentHarnessOptions,
  type AgentSettings,
  createModelResolver,
  DOC,
  type StreamSettings,
  type UsageState,
} from "../../../worker/index.ts";
import { deferred, fauxAgentModel, fauxError, memoryStore, until, within } from "../../../worker/testing.ts";
import {
  alternationProblems,
  callsThenAnswer,
  cleanups,
  echo,
  itemTool,
  kinds,
  last,
  liveOf,
  messageOf,
  messagesOf,
  open,
  reopen,
  textOf,
  transcript,
} from "./fixtures.ts";

describe("request hooks", () => {
  test("beforeRequest replaces the messages of that request only; the transcript keeps its own", async () => {
    const { root, faux } = await open(echo, {
      hooks: {
        beforeRequest: [(messages) => [...messages, { role: "user", content: "injected", timestamp: 0 }]],
      },
    });
    expect((await (await root.submit({ type: "input", content: "hi" })).wait()).status).toBe("done");
    expect(faux.requests[0]!.messages.map(textOf)).toEqual(["hi", "injected"]);
    expect((await transcript(root)).map((e) => textOf(messageOf(e)))).toEqual(["hi", "echo: injected"]);
    // The next request starts from the transcript again: the first one's replacement is not in it.
    expect((await (await root.submit({ type: "input", content: "again" })).wait()).status).toBe("done");
    expect(faux.requests[1]!.messages.map(textOf)).toEqual(["hi", "echo: injected", "again", "injected"]);
  });

  test("beforeRequest runs for every request of a run: a retried attempt and the request after a tool round each get their own replacement", async () => {
    // Draw 36C: a hook run only for a run's first attempt passed every test (each built one request
    // per run, or resent one after a reopen); here a retry and a tool round follow the first request.
    let hooked = 0;
    const { tool } = itemTool({});
    const answers = callsThenAnswer(fauxToolCall("apply", { item: "a" }, { id: "call-1" }));
    const { root, faux } = await open(
      (req, n) => (n === 1 ? fauxError("503 Service Unavailable") : answers(req, n)),
      {
        tools: [tool],
        settings: { retry: { baseDelayMs: 1 } },
        hooks: {
          beforeRequest: [
            (messages) => [...messages, { role: "user", content: `injected ${++hooked}`, timestamp: 0 }],
          ],
        },
      },
    );
    expect((await (await root.submit({ type: "input", content: "hi" })).wait()).status).toBe("done");
    expect(hooked).toBe(3);
    const lasts = faux.requests.map((r) => textOf(r.messages.at(-1)!));
    expect(lasts).toEqual(["injected 1", "injected 2", "injected 3"]);
    // Each replacement was for its own request only: none of them reached a later one, nor the
    // hooks of a later one (draw 39, 3: a retried attempt's hook handed the failed attempt's
    // replacement, not the transcript, passed while only the tool round's request was read).
    expect(faux.requests.map((r) => r.messages.filter((m) => m.role === "user").map(textOf))).toEqual([
      ["hi", "injected 1"],
      ["hi", "injected 2"],
      ["hi", "injected 3"],
    ]);
  });

  test("a beforeRequest hook that returns nothing replaces nothing: the request keeps an earlier hook's replacement (draw 39, 3)", async () => {
    // Draw 39, 3: a hook returning undefined taken as a return to the transcript's messages (an
    // earlier hook's replacement dropped) passed every test: no chain ended with a hook that kept.
    const seen: string[][] = [];
    const { root, faux } = await open(echo, {
      hooks: {
        beforeRequest: [
          (messages) => [...messages, { role: "user", content: "injected", timestamp: 0 }],
          (messages) => {
            seen.push(messages.map(textOf));
            return undefined;
          },
        ],
      },
    });
    expect((await (await root.submit({ type: "input", content: "hi" })).wait()).status).toBe("done");
    expect(seen).toEqual([["hi", "injected"]]);
    expect(faux.requests[0]!.messages.map(textOf)).toEqual(["hi", "injected"]);
  });

  test("recovery resends an interrupted request and runs beforeRequest again for it", async () => {
    const hold = deferred();
    let hooked = 0;
    const hooks: AgentHarnessOptions["hooks"] = {
      beforeRequest: [
        (messages) => [...messages, { role: "user", content: `injected ${++hooked}`, timestamp: 0 }],
      ],
    };
    // The reasoning each request carried: the resend keeps the attempt's pinned thinking level.
    const reasoning: unknown[] = [];
    const stream: AgentHarnessOptions["stream"] = (model, context, options) => {
      reasoning.push(options.reasoning);
      return defaultStream(model, context, options);
    };
    const { h, root, store, faux } = await open(
      async (req, n) => {
        if (n === 1) await hold.promise;
        return echo(req, n);
      },
      { hooks, stream },
    );
    void root.submit({ type: "input", content: "hi", requestId: "r" });
    await until(() => faux.requests.length === 1, { what: "first request sent" });
    // The agent changes while the request is in flight (reading 22b: "with the same pinned ...").
    await root.configure({ thinkingLevel: "high" });
    // And an application's raw transaction appends a message after the request's cutoff: the resend
    // is the same committed messages, through the cutoff (break 31F: a resend that read the whole
    // transcript passed, as nothing was appended after the cutoff).
    await h.transaction((tx) => {
      tx.appendEntry(root.id, {
        kind: "app.note",
        model: [{ role: "user", content: "late note", timestamp: 0 }],
      });
    });

    // A crash while the request streams: the image holds the request phase, not the answer.
    const h2 = await reopen(store, { models: faux.models, defaultModel: faux.ref, hooks, stream });
    const again = await (await h2.root()).submit({ type: "input", content: "hi", requestId: "r" });
    expect((await again.wait()).status).toBe("done");
    expect(reasoning).toEqual([undefined, undefined]);
    expect(hooked).toBe(2);
    expect(faux.requests.map((r) => r.messages.map(textOf))).toEqual([
      ["hi", "injected 1"],
      ["hi", "injected 2"],
    ]);
    expect((await transcript(await h2.root())).map((e) => textOf(messageOf(e)))).toEqual([
      "hi",
      "late note",
      "echo: injected 2",
    ]);
  });

  test("afterResponse sees every final message, tool-calling ones included", async () => {
    // Each message seen, with the answers the transcript held when the hook ran: the message's own
    // entry is not there yet, the hook runs before the commit that classifies it (reading 22b: the
    // order and an error answer were not asserted).
    const seen: Array<[string, number, string[]]> = [];
    const { tool } = itemTool({});
    const answers = callsThenAnswer(fauxToolCall("apply", { item: "a" }, { id: "call-1" }));
    const { root } = await open(
      (req, n) => (n === 1 ? fauxError("503 Service Unavailable") : answers(req, n)),
      {
        tools: [tool],
        settings: { retry: { baseDelayMs: 1 } },
        hooks: {
          afterResponse: [
            async (m) =>
              void seen.push([
                m.stopReason,
                (await root.entries()).filter((e) => e.kind === "pi.assistant").length,
                // The message itself, its content as the provider answered (break 28B).
                m.content.map((b) => (b.type === "text" ? b.text : b.type === "toolCall" ? b.name : b.type)),
              ]),
          ],
        },
      },
    );
    expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
    expect(seen).toEqual([
      ["error", 0, []],
      ["toolUse", 1, ["apply"]],
      ["stop", 2, ["done"]],
    ]);
  });

  test("afterResponse sees a length-cut answer too, before its entry is committed (draw 32d)", async () => {
    // Every terminal message: a length answer is one, like a stop (draw 32d: the hook skipped for it passed).
    const seen: Array<[string, number]> = [];
    const { root } = await open(() => fauxAssistantMessage("cut sh", { stopReason: "length" }), {
      hooks: {
        afterResponse: [
          async (m) =>
            void seen.push([
              m.stopReason,
              (await root.entries()).filter((e) => e.kind === "pi.assistant").length,
            ]),
        ],
      },
    });
    expect((await (await root.submit({ type: "input", content: "long please" })).wait()).status).toBe("done");
    expect(seen).toEqual([["length", 0]]);
  });

  test("afterResponse sees an answer that ends aborted without an abort mark too, before its error entry is committed (draw 36e C)", async () => {
    // A terminal message like any other (draw 36e C: the hook skipped for a stopReason "aborted" passed).
    const seen: Array<[string, number]> = [];
    const { root } = await open(
      () => fauxAssistantMessage("cut off", { stopReason: "aborted", errorMessage: "the provider hung up" }),
      {
        hooks: {
          afterResponse: [
            async (m) =>
              void seen.push([
                m.stopReason,
                (await root.entries()).filter((e) => e.kind === "pi.assistant").length,
              ]),
          ],
        },
      },
    );
    expect(await (await root.submit({ type: "input", content: "hi" })).wait()).toMatchObject({
      status: "unanswered",
      reason: "model_error",
    });
    expect(seen).toEqual([["aborted", 0]]);
  });

  test("an onYield continuation's pi.user entry is one UserMessage stamped with the Harness clock (spec §8.1)", async () => {
    let yields = 0;
    const { root } = await open(echo, {
      now: () => 7_000,
      hooks: { onYield: [() => (++yields === 1 ? "and once more" : undefined)] },
    });
    expect((await (await root.submit({ type: "input", content: "first" })).wait()).status).toBe("done");
    const users = (await transcript(root)).filter((e) => e.kind === "pi.user");
    expect(users.map((e) => e.model)).toEqual([
      [{ role: "user", content: "first", timestamp: 7_000 }],
      [{ role: "user", content: "and once more", timestamp: 7_000 }],
    ]);
  });

  test("onYield can continue a run with another user message; the input settles with the last answer", async () => {
    let yields = 0;
    const { h, root, faux } = await open(echo, {
      hooks: { onYield: [() => (++yields === 1 ? "and once more" : undefined)] },
    });
    // Every generation's latest record, and the run as each commit of pi.live left it.
    const generations = new Map<number, { owner: number | undefined; state: unknown }>();
    const runs: unknown[] = [];
    h.subscribe((change) => {
      for (const t of change.tasks)
        if (t.kind === "pi.generation") generations.set(t.id, { owner: t.owner, state: t.state });
      const written = change.docs.find((d) => d.name === DOC.live && d.conversationId === root.id);
      if (written) runs.push((written.value as { run?: unknown }).run);
    });
    const input = await root.submit({ type: "input", content: "first" });
    const settled = await input.wait();
    const entries = await transcript(root);
    expect(kinds(entries)).toEqual(["pi.user", "pi.assistant", "pi.user", "pi.assistant"]);
    expect(entries.map((e) => textOf(messageOf(e)))).toEqual([
      "first",
      "echo: first",
      "and once more",
      "echo: and once more",
    ]);
    expect(settled).toMatchObject({ status: "done", answer: entries[3]!.id });
    expect(faux.requests).toHaveLength(2);
    expect(yields).toBe(2);
    // Reading 22b: the continuing generation completes with its answer, and a successor, owned by the
    // conversation, takes pi.live.run with the input still open; it completes with its own answer.
    const [first, second] = [...generations.entries()];
    expect(first![1].state).toEqual({
      status: "terminal",
      outcome: { status: "completed", result: { entryId: entries[1]!.id } },
    });
    expect(second![1]).toEqual({
      owner: undefined,
      state: { status: "terminal", outcome: { status: "completed", result: { entryId: entries[3]!.id } } },
    });
    const handed = runs.filter((r) => r !== undefined).map((r) => JSON.stringify(r));
    expect([...new Set(handed)]).toEqual([
      JSON.stringify({ taskId: first![0], inputs: [input.id] }),
      JSON.stringify({ taskId: second![0], inputs: [input.id] }),
    ]);
  });
});

describe("retry", () => {
  test("a retryable provider error is retried after a durable backoff, then answered", async () => {
    const { root, faux } = await open(
      (req, n) => (n <= 2 ? fauxError("503 Service Unavailable") : echo(req, n)),
      {
        settings: { retry: { baseDelayMs: 5, maxDelayMs: 20 } },
      },
    );
    const sub = await root.submit({ type: "input", content: "hi" });
    const settled = await sub.wait();
    const entries = await transcript(root);
    const answers = entries
      .filter((e) => e.kind === "pi.assistant")
      .map((e) => messageOf(e) as AssistantMessage);
    expect(answers.map((m) => [m.stopReason, m.errorMessage])).toEqual([
      ["error", "503 Service Unavailable"],
      ["error", "503 Service Unavailable"],
      ["stop", undefined],
    ]);
    expect(settled).toEqual({ status: "done", answer: last(entries).id, entry: entries[0]!.id });
    expect(faux.requests).toHaveLength(3);
    expect(alternationProblems(entries)).toEqual([]);
  });

  test("a rate limit or a server error said only by its status (the SDK's 429 status code (no body)) is retried like a 503 (draw 34C)", async () => {
    // Draw 34C: every retried error was a 503 with its reason in words; 429 dropped from the
    // retryable statuses passed every test.
    const said = ["429 status code (no body)", "500 status code (no body)", "529 status code (no body)"];
    const { root, faux } = await open(
      (req, n) => (n <= said.length ? fauxError(said[n - 1]!) : echo(req, n)),
      {
        settings: { retry: { baseDelayMs: 1, maxDelayMs: 4, maxRetries: 3 } },
      },
    );
    expect((await (await root.submit({ type: "input", content: "hi" })).wait()).status).toBe("done");
    const answers = (await transcript(root))
      .filter((e) => e.kind === "pi.assistant")
      .map((e) => messageOf(e) as AssistantMessage);
    expect(answers.map((m) => m.errorMessage ?? m.stopReason)).toEqual([...said, "stop"]);
    expect(faux.requests).toHaveLength(4);
  });

  test("an overload or a rate limit said only in words (no status code) is retried like a 503 (draw 41-D)", async () => {
    // Draw 41-D: overload dropped from the retryable errors passed every generation and compaction
    // test: every overload retried there carried its 503 or 529 status too.
    const said = ["Overloaded", "Rate limit reached for requests", "Too many requests, try again later"];
    const { root, faux } = await open(
      (req, n) => (n <= said.length ? fauxError(said[n - 1]!) : echo(req, n)),
      {
        settings: { retry: { baseDelayMs: 1, maxDelayMs: 4, maxRetries: 3 } },
      },
    );
    expect((await (await root.submit({ type: "input", content: "hi" })).wait()).status).toBe("done");
    const answers = (await transcript(root))
      .filter((e) => e.kind === "pi.assistant")
      .map((e) => messageOf(e) as AssistantMessage);
    expect(answers.map((m) => m.errorMessage ?? m.stopReason)).toEqual([...said, "stop"]);
    expect(faux.requests).toHaveLength(4);
  });

  test("a retryable error moves to retry at the Harness clock's now + retryDelayMs(policy, attempt): the deadline doubles with the attempt", async () => {
    // The Harness clock is ours: it moves only when the test moves it (spec §8.3: until = now +
    // retryDelayMs(policy, attempt), on the clock the Harness was opened with). Sample 22.
    let clock = 1_000_000_000;
    const { h, root, faux } = await open(
      (req, n) => (n <= 2 ? fauxError("503 Service Unavailable") : echo(req, n)),
      { now: () => clock, settings: { retry: { baseDelayMs: 40, maxDelayMs: 10_000 } } },
    );
    const generationState = () =>
      h.inspect().tasks.find((t) => t.record.kind === "pi.generation")?.record.state as
        | { status: string; checkpoint: { phase: string; attempt: number; until?: number } }
        | undefined;
    const sub = await root.submit({ type: "input", content: "hi" });
    const deadlines: { at: number; checkpoint: unknown; errors: number }[] = [];
    for (const step of [1, 2]) {
      await until(() => generationState()?.checkpoint.phase === "retry" && faux.requests.length === step, {
        what: `retry ${step}`,
      });
      const errors = (await transcript(root)).filter(
        (e) => e.kind === "pi.assistant" && (messageOf(e) as AssistantMessage).stopReason === "error",
      ).length;
      deadlines.push({
        at: liveOf(h).generation!.retry!.at,
        checkpoint: generationState()!.checkpoint,
        errors,
      });
      clock += 10_000; // past any deadline: the sleep ends at its next look at the clock
    }
    expect(deadlines).toEqual([
      {
        at: 1_000_000_000 + 40,
        checkpoint: { phase: "retry", attempt: 1, until: 1_000_000_000 + 40 },
        errors: 1,
      },
      {
        at: 1_000_010_000 + 80,
        checkpoint: { phase: "retry", attempt: 2, until: 1_000_010_000 + 80 },
        errors: 2,
      },
    ]);
    expect((await sub.wait()).status).toBe("done");
  });

  test("an abort during a retry's backoff ends the run aborted: the input is unanswered aborted and pi.live holds neither the run nor the waiting generation (draw 41d-B)", async () => {
    // Draw 41d-B: the named abort tests aborted a streaming, a polling or an offline generation; an
    // abort handler that removed the generation only when a request was under way passed them.
    const clock = 1_000_000_000;
    const { h, root, faux } = await open(() => fauxError("503 Service Unavailable"), {
      now: () => clock,
      settings: { retry: { baseDelayMs: 60_000 } },
    });
    const sub = await root.submit({ type: "input", content: "hi" });
    await until(() => liveOf(h).generation?.retry !== undefined, { what: "the backoff" });
    await root.abort();
    expect(await sub.wait()).toMatchObject({ status: "unanswered", reason: "aborted" });
    await root.waitForIdle();
    expect(liveOf(h)).toEqual({});
    expect(faux.requests).toHaveLength(1);
    expect(root.busy).toBe(false);
  });

  test("a provider that throws a retryable error, at once or while its stream is read, is retried like a 503 answer: error entry, retry at now + retryDelayMs (draw 41-D)", async () => {
    // Draw 41-D: a throw from the provider taken as an abort (stop reason aborted, no mark: the run
    // failed) passed every generation test; each retried error there was an error answer.
    let clock = 3_000_000_000;
    let calls = 0;
    const { h, root } = await open(echo, {
      now: () => clock,
      settings: { retry: { baseDelayMs: 40, maxDelayMs: 10_000 } },
      stream: (model, context, options) => {
        calls++;
        if (calls === 1) throw new Error("503 Service Unavailable");
        if (calls === 2)
          return {
            [Symbol.asyncIterator]: () => ({
              next: () => Promise.reject(new Error("502 Bad Gateway")),
            }),
            result: () => Promise.reject(new Error("no result")),
          } as unknown as ReturnType<typeof defaultStream>;
        return defaultStream(model, context, options);
      },
    });
    const checkpoint = () =>
      (
        h.inspect().tasks.find((t) => t.record.kind === "pi.generation")?.record.state as
          | { checkpoint?: { phase: string; attempt: number; until?: number } }
          | undefined
      )?.checkpoint;
    const sub = await root.submit({ type: "input", content: "hi" });
    let settled = false;
    const waited = sub.wait().finally(() => {
      settled = true;
    });
    const seen: unknown[] = [];
    for (const step of [1, 2]) {
      // Settled instead (the run failed): the checkpoint read below is not a retry.
      await until(() => settled || (checkpoint()?.phase === "retry" && calls === step), {
        what: `retry ${step}`,
      });
      seen.push(checkpoint());
      clock += 10_000;
    }
    expect(seen).toEqual([
      { phase: "retry", attempt: 1, until: 3_000_000_000 + 40 },
      { phase: "retry", attempt: 2, until: 3_000_010_000 + 80 },
    ]);
    expect((await waited).status).toBe("done");
    const answers = (await transcript(root))
      .filter((e) => e.kind === "pi.assistant")
      .map((e) => messageOf(e) as AssistantMessage);
    expect(answers.map((m) => [m.stopReason, m.errorMessage])).toEqual([
      ["error", "503 Service Unavailable"],
      ["error", "502 Bad Gateway"],
      ["stop", undefined],
    ]);
  });

  test("a retry policy whose baseDelayMs is 0 retries at the Harness clock's now: a zero delay is a delay, not an absent one (draw 36d)", async () => {
    const clock = 2_000_000_000;
    const { h, root, faux } = await open(
      (req, n) => (n === 1 ? fauxError("503 Service Unavailable") : echo(req, n)),
      { now: () => clock, settings: { retry: { baseDelayMs: 0, maxDelayMs: 10_000 } } },
    );
    const ats: number[] = [];
    const stop = h.subscribe(() => {
      const at = liveOf(h).generation?.retry?.at;
      if (at !== undefined) ats.push(at);
    });
    const sub = await root.submit({ type: "input", content: "hi" });
    await until(() => ats.length > 0, { what: "the retry's deadline" });
    expect(ats[0]).toBe(clock);
    // The clock never moves: the retry is sent only because its deadline is now.
    expect((await sub.wait()).status).toBe("done");
    stop();
    expect([...new Set(ats)]).toEqual([clock]);
    expect(faux.requests).toHaveLength(2);
  });

  test("the retry policy is read when an attempt is classified: retries turned off while a request is in flight give up at once; turned on, they retry", async () => {
    const hold = deferred();
    let settings: AgentSettings = { retry: { baseDelayMs: 5, maxDelayMs: 20 } };
    const { root, faux } = await open(
      async () => {
        await hold.promise;
        return fauxError("503 Service Unavailable");
      },
      { settings: () => settings },
    );
    const sub = await root.submit({ type: "input", content: "hi" });
    await until(() => faux.requests.length === 1, { what: "request sent" });
    settings = { retry: { enabled: false } };
    hold.resolve();
    expect(await sub.wait()).toMatchObject({ status: "unanswered", reason: "model_error" });
    expect(faux.requests).toHaveLength(1);
    // The other way: prepared with retries off, classified with them on, so the error is retried.
    const second = deferred();
    let sent = 0;
    let on: AgentSettings = { retry: { enabled: false } };
    const other = await open(
      async () => {
        sent++;
        if (sent > 1) return fauxAssistantMessage("answered");
        await second.promise;
        return fauxError("503 Service Unavailable");
      },
      { settings: () => on },
    );
    const input = await other.root.submit({ type: "input", content: "hi" });
    await until(() => other.faux.requests.length === 1, { what: "request sent" });
    on = { retry: { enabled: true, baseDelayMs: 1, maxDelayMs: 5 } };
    second.resolve();
    expect(await input.wait()).toMatchObject({ status: "done" });
    expect(other.faux.requests).toHaveLength(2);
  });

  test("each classification reads the retry policy afresh: maxRetries lowered while a retried request is in flight gives up after it", async () => {
    // spec §2.2: "The retry policy is read when generation classifies an attempt's result, because it
    // governs the next attempt" (not once per run: the first classification allowed three retries).
    const second = deferred();
    let settings: AgentSettings = { retry: { baseDelayMs: 1, maxDelayMs: 5, maxRetries: 3 } };
    let sent = 0;
    const { root, faux } = await open(
      async () => {
        if (++sent === 2) await second.promise;
        return fauxError("503 Service Unavailable");
      },
      { settings: () => settings },
    );
    const sub = await root.submit({ type: "input", content: "hi" });
    await until(() => faux.requests.length === 2, { what: "the first retry sent" });
    settings = { retry: { baseDelayMs: 1, maxDelayMs: 5, maxRetries: 1 } };
    second.resolve();
    expect(await sub.wait()).toMatchObject({ status: "unanswered", reason: "model_error" });
    expect(faux.requests).toHaveLength(2);
  });

  test("the backoff delay is read at each classification too: baseDelayMs changed while a request is in flight sets that attempt's deadline", async () => {
    // Break 29C: every test that moved the policy in flight moved enabled or maxRetries; a backoff
    // whose baseDelayMs and maxDelayMs were kept from the run's first classification passed them.
    let clock = 1_000_000_000;
    let settings: AgentSettings = { retry: { baseDelayMs: 40, maxDelayMs: 10_000 } };
    const held = [deferred(), deferred(), deferred()];
    let sent = 0;
    const { h, root, faux } = await open(
      async (req, n) => {
        const i = sent++;
        if (i >= 3) return echo(req, n);
        await held[i]!.promise;
        return fauxError("503 Service Unavailable");
      },
      { now: () => clock, settings: () => settings },
    );
    const phase = () =>
      (
        h.inspect().tasks.find((t) => t.record.kind === "pi.generation")?.record.state as
          | { checkpoint?: { phase: string } }
          | undefined
      )?.checkpoint?.phase;
    const sub = await root.submit({ type: "input", content: "hi" });
    const deadlines: number[] = [];
    // Draw 36c: the third classification lowers maxDelayMs (a cap kept from the run's first
    // classification, with baseDelayMs read afresh, passed every test).
    for (const [i, [base, cap]] of [
      [300, 10_000],
      [500, 10_000],
      [500, 700],
    ].entries()) {
      await until(() => faux.requests.length === i + 1, { what: `request ${i + 1} sent` });
      settings = { retry: { baseDelayMs: base!, maxDelayMs: cap! } };
      const at = clock;
      held[i]!.resolve();
      await until(() => phase() === "retry" && liveOf(h).generation?.retry !== undefined, {
        what: `retry ${i + 1}`,
      });
      deadlines.push(liveOf(h).generation!.retry!.at - at);
      clock += 10_000; // past the deadline: the sleep ends at its next look at the clock
    }
    // Attempt 1: 300; attempt 2: 500 doubled; attempt 3: 500 quadrupled, capped at 700; each read
    // when its attempt was classified.
    expect(deadlines).toEqual([300, 1000, 700]);
    expect((await sub.wait()).status).toBe("done");
  });

  test("the policy is read at classification only: retries turned off during the backoff still send the retry that classification scheduled", async () => {
    // Break 29C: spec §2.2 reads the policy when an attempt's result is classified, because it
    // governs the next attempt; a retry phase that read it again when its backoff ended, and gave up
    // on retries turned off meanwhile, passed every test.
    let clock = 1_000_000_000;
    let settings: AgentSettings = { retry: { baseDelayMs: 40, maxDelayMs: 10_000 } };
    const { h, root, faux } = await open(
      (req, n) => (n <= 1 ? fauxError("503 Service Unavailable") : echo(req, n)),
      { now: () => clock, settings: () => settings },
    );
    const sub = await root.submit({ type: "input", content: "hi" });
    await until(() => liveOf(h).generation?.retry !== undefined, { what: "the backoff" });
    settings = { retry: { enabled: false } };
    clock += 10_000; // past the deadline: the sleep ends at its next look at the clock
    expect(await sub.wait()).toMatchObject({ status: "done" });
    expect(faux.requests).toHaveLength(2);
  });

  test("giving up after maxRetries: unanswered model_error, the run is gone, a new input is answered", async () => {
    const { h, root, faux } = await open(() => fauxError("503 Service Unavailable"), {
      settings: { retry: { baseDelayMs: 5, maxDelayMs: 20, maxRetries: 2 } },
    });
    const sub = await root.submit({ type: "input", content: "hi" });
    const settled = await sub.wait();
    expect(settled).toMatchObject({
      status: "unanswered",
      reason: "model_error",
      detail: "503 Service Unavailable",
    });
    expect(faux.requests).toHaveLength(3);
    const errors = (await transcript(root)).filter((e) => e.kind === "pi.assistant");
    expect(errors.map((e) => (messageOf(e) as AssistantMessage).stopReason)).toEqual([
      "error",
      "error",
      "error",
    ]);
    // Each failed attempt's entry is written by its own generation attempt's task (reading 24e).
    for (const e of errors) expect((await h.getTask(e.byTaskId!))?.kind).toBe("pi.generation");
    await root.waitForIdle();
    expect(liveOf(h).run).toBeUndefined();
    expect(liveOf(h).generation).toBeUndefined();
    expect(root.busy).toBe(false);
    faux.respond = echo;
    const next = await root.submit({ type: "input", content: "again" });
    const answered = await next.wait();
    expect(answered.status).toBe("done");
    const entries = await transcript(root);
    expect(textOf(messageOf(last(entries)))).toBe("echo: again");
    expect(alternationProblems(entries)).toEqual([]);
  });

  test("giving up after maxRetries on the request after a tool round settles every input of the run: a steer placed at its tool boundary is unanswered model_error too (draw 36d)", async () => {
    // Draw 36d: the named test's run had one input and failed on its first request; a give-up that
    // settled only the run's first input passed every generation test.
    const item = itemTool({ holdFirst: true });
    const tools = callsThenAnswer(fauxToolCall("apply", { item: "a" }, { id: "call-1" }));
    const { h, root, faux } = await open(
      (req, n) =>
        req.messages.some((m) => m.role === "assistant")
          ? fauxError("503 Service Unavailable")
          : tools(req, n),
      { tools: [item.tool], settings: { retry: { baseDelayMs: 1, maxDelayMs: 2, maxRetries: 1 } } },
    );
    const first = await root.submit({ type: "input", content: "one" });
    await item.started.promise;
    const steer = await root.submit({ type: "input", content: "steer", whenBusy: "steer" });
    item.release.resolve();
    const gaveUp = { status: "unanswered", reason: "model_error", detail: "503 Service Unavailable" };
    expect(await first.wait()).toMatchObject(gaveUp);
    expect(await steer.record()).toMatchObject(gaveUp);
    // The first request and two attempts (one retry) of the one after the tool round.
    expect(faux.requests).toHaveLength(3);
    await root.waitForIdle();
    expect(liveOf(h).run).toBeUndefined();
  });
});

describe("generation", () => {
  test("a streaming answer reaches pi.live at most every 100 ms by default", async () => {
    const words = Array.from({ length: 400 }, (_, i) => `word${i}`).join(" ");
    const faux = fauxAgentModel(() => fauxAssistantMessage(words), { tokensPerSecond: 2500 });
    const store = await memoryStore();
    const h = await AgentHarness.open(store, { models: faux.models, defaultModel: faux.ref });
    cleanups.push(async () => {
      await h.close().catch(() => undefined);
      faux.unregister();
    });
    const root = await h.root();
    const partials: number[] = [];
    let lastText = "";
    const poll = setInterval(() => {
      const text = liveOf(h).generation?.message ? JSON.stringify(liveOf(h).generation?.message) : "";
      if (text && text !== lastText) partials.push(Date.now());
      lastText = text;
    }, 1);
    const before = store.stats.transactions;
    const started = Date.now();
    const settled = await (await root.submit({ type: "input", content: "talk" })).wait();
    const elapsed = Date.now() - started;
    clearInterval(poll);
    expect(settled.status).toBe("done");
    // Admission and the answer, plus one commit per 100 ms of streaming at most.
    const partialCommits = store.stats.transactions - before - 2;
    expect(elapsed).toBeGreaterThan(200);
    expect(partialCommits).toBeGreaterThanOrEqual(1);
    expect(partialCommits).toBeLessThanOrEqual(Math.ceil(elapsed / 100) + 1);
    expect(partials.length).toBeGreaterThanOrEqual(1);
  });

  test("retry defaults: 3 retries, 2 s base doubling per attempt, capped at 60 s", () => {
    expect(DEFAULT_RETRY).toEqual({ enabled: true, maxRetries: 3, baseDelayMs: 2000, maxDelayMs: 60_000 });
    const policy = resolveSettings({}).retry;
    expect(policy).toEqual(DEFAULT_RETRY);
    expect([1, 2, 3, 4, 5, 6, 7].map((n) => retryDelayMs(policy, n))).toEqual([
      2000, 4000, 8000, 16_000, 32_000, 60_000, 60_000,
    ]);
    expect(resolveSettings({})).toMatchObject({ partialIntervalMs: 100, outputIntervalMs: 100 });
  });

  test("the backoff is durable: after a restart during it, the retry is not sent before the stored time", async () => {
    const sent: number[] = [];
    const respond = (req: Parameters<typeof echo>[0], n: number) => {
      sent.push(Date.now());
      return n <= 1 ? fauxError("503 Service Unavailable") : echo(req, n);
    };
    const settings = { retry: { baseDelayMs: 400, maxDelayMs: 400 } };
    const { h, root, store, faux } = await open(respond, { settings });
    const sub = await root.submit({ type: "input", content: "hi", requestId: "r" });
    await until(() => Boolean(liveOf(h).generation?.retry));
    const retryAt = liveOf(h).generation!.retry!.at;
    expect(retryAt).toBeGreaterThanOrEqual(sent[0]! + 400);
    await h.close();
    void sub;

    const h2 = await reopen(store, { models: faux.models, defaultModel: faux.ref, settings });
    const again = await (await h2.root()).submit({ type: "input", content: "hi", requestId: "r" });
    expect((await again.wait()).status).toBe("done");
    expect(sent).toHaveLength(2);
    expect(sent[1]!).toBeGreaterThanOrEqual(retryAt);
  });

  test("the backoff is durable: reopened inside it, the retry is sent at the stored deadline, not a fresh delay after the reopen", async () => {
    // Break 28I: the restart test above checks only not-before the stored time, so a retry phase
    // sleeping a fresh backoff from its own start (later than the stored deadline) passed it.
    let clock = 2_000_000_000;
    const settings = { retry: { baseDelayMs: 40, maxDelayMs: 10_000 } };
    const { h, root, faux, store } = await open(
      (req, n) => (n <= 1 ? fauxError("503 Service Unavailable") : echo(req, n)),
      { now: () => clock, settings },
    );
    await root.submit({ type: "input", content: "hi", requestId: "r" });
    await until(() => liveOf(h).generation?.retry !== undefined, { what: "the backoff" });
    expect(liveOf(h).generation!.retry!.at).toBe(2_000_000_040);
    await h.close();
    clock += 30; // reopened inside the backoff, 10 ms before its deadline
    const again = await reopen(store, {
      models: faux.models,
      defaultModel: faux.ref,
      now: () => clock,
      settings,
    });
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(faux.requests).toHaveLength(1);
    clock += 11; // past the stored deadline, well short of a fresh 40 ms from the reopen
    await until(() => faux.requests.length === 2, { what: "the retry at the stored deadline" });
    const sub = await (await again.root()).submit({ type: "input", content: "hi", requestId: "r" });
    expect((await sub.wait()).status).toBe("done");
  });

  test("the retry budget holds across a reopen inside the backoff: the attempt after it is counted from the stored one, and maxRetries exhausted gives up (draw 36d)", async () => {
    // Draw 36d: the reopened backoff tests checked the retry's time only; a retry phase that counted
    // the attempt after a reopen from 1 again (a fresh budget) passed every generation test.
    let clock = 2_000_000_000;
    const settings = { retry: { baseDelayMs: 40, maxDelayMs: 10_000, maxRetries: 1 } };
    const { h, root, faux, store } = await open(() => fauxError("503 Service Unavailable"), {
      now: () => clock,
      settings,
    });
    await root.submit({ type: "input", content: "hi", requestId: "r" });
    await until(() => liveOf(h).generation?.retry !== undefined, { what: "the backoff" });
    await h.close();
    clock += 30;
    const again = await reopen(store, {
      models: faux.models,
      defaultModel: faux.ref,
      now: () => clock,
      settings,
    });
    const root2 = await again.root();
    clock += 11;
    await until(() => faux.requests.length === 2, { what: "the retry at the stored deadline" });
    const sub = await root2.submit({ type: "input", content: "hi", requestId: "r" });
    let settled: unknown;
    void sub.wait().then((s) => {
      settled = s;
    });
    await until(() => settled !== undefined || liveOf(again).generation?.retry !== undefined, {
      what: "the retried attempt classified",
    });
    expect(liveOf(again).generation?.retry).toBeUndefined();
    expect(await sub.wait()).toMatchObject({ status: "unanswered", reason: "model_error" });
    expect(faux.requests).toHaveLength(2);
  });

  test("a retry prepares the next attempt with the agent as it is after the backoff", async () => {
    // Spec §8.3: "retry sleeps until until, then returns to prepare with the next attempt, so agent
    // and settings changes made during the backoff apply." (Reading 22b: the attempt number and an
    // agent change during the backoff were not asserted.)
    const seen: Array<{ reasoning: unknown; attempt: number | undefined }> = [];
    let h!: AgentHarness;
    const { h: opened, root } = await open(
      (req, n) => (n <= 1 ? fauxError("503 Service Unavailable") : echo(req, n)),
      {
        settings: { retry: { baseDelayMs: 1000, maxDelayMs: 1000 } },
        stream: (model, context, options) => {
          seen.push({ reasoning: options.reasoning, attempt: liveOf(h).generation?.attempt });
          return defaultStream(model, context, options);
        },
      },
    );
    h = opened;
    const sub = await root.submit({ type: "input", content: "hi" });
    await until(() => Boolean(liveOf(h).generation?.retry));
    await root.configure({ thinkingLevel: "high" }); // during the second-long backoff
    expect((await sub.wait()).status).toBe("done");
    expect(seen).toEqual([
      { reasoning: undefined, attempt: 1 },
      { reasoning: "high", attempt: 2 },
    ]);
  });

  test("a retry goes to the model the agent names after the backoff, not the one whose attempt failed", async () => {
    // Break 29N: the named retry test changes the thinking level only; a retry that resent to the
    // failed attempt's model (the agent's model read at the first attempt) passed every test.
    const first = fauxAgentModel(() => fauxError("503 Service Unavailable"), { id: "first-model" });
    const second = fauxAgentModel(() => fauxAssistantMessage("from the second"), { id: "second-model" });
    const store = await memoryStore();
    const h = await AgentHarness.open(store, {
      models: createModelResolver({ extra: [first.model, second.model] }),
      defaultModel: first.ref,
      settings: { retry: { baseDelayMs: 500, maxDelayMs: 500 } },
    });
    cleanups.push(async () => {
      await h.close().catch(() => undefined);
      first.unregister();
      second.unregister();
    });
    const root = await h.root();
    const sub = await root.submit({ type: "input", content: "hi" });
    await until(() => Boolean(liveOf(h).generation?.retry), { what: "the backoff" });
    await root.configure({ model: second.ref }); // during the backoff
    expect((await sub.wait()).status).toBe("done");
    expect(first.requests).toHaveLength(1);
    expect(second.requests).toHaveLength(1);
    const answer = messageOf(last(await transcript(root))) as AssistantMessage;
    expect(answer.model).toBe("second-model");
    expect(textOf(answer)).toBe("from the second");
  });

  test("a retry finds no model when the model was cleared during the backoff: the run fails no_model at the retried attempt's preparation, its error entry kept", async () => {
    // Draw 37c, 5: every no_model test found the model missing at a first attempt; a preparation that
    // checked the model only for attempt 1 passed them all (the retried attempt then faulted).
    const faux = fauxAgentModel(() => fauxError("503 Service Unavailable"));
    const store = await memoryStore();
    // No default model: the conversation's own is the only one.
    const h = await AgentHarness.open(store, {
      models: faux.models,
      settings: { retry: { baseDelayMs: 500, maxDelayMs: 500 } },
    });
    cleanups.push(async () => {
      await h.close().catch(() => undefined);
      faux.unregister();
    });
    const root = await h.root();
    await root.configure({ model: faux.ref });
    const sub = await root.submit({ type: "input", content: "hi" });
    await until(() => Boolean(liveOf(h).generation?.retry), { what: "the backoff" });
    await root.configure({ model: null }); // during the backoff
    expect(await sub.wait()).toEqual({
      status: "unanswered",
      reason: "no_model",
      detail: "no model is configured",
    });
    expect(faux.requests).toHaveLength(1);
    expect(kinds(await transcript(root))).toEqual(["pi.user", "pi.assistant"]);
    expect((messageOf(last(await transcript(root))) as AssistantMessage).stopReason).toBe("error");
    expect(liveOf(h)).toEqual({});
    const failed = await h.tasks({ kind: "pi.generation" });
    expect(failed.map((t) => t.state)).toEqual([
      {
        status: "terminal",
        outcome: expect.objectContaining({
          status: "failed",
          error: { message: "no model is configured", detail: { reason: "no_model" } },
        }),
      },
    ]);
    expect(root.busy).toBe(false);
  });

  test("the host is told each backoff deadline (wakeAt) before the wait, and again by the engine that resumes it", async () => {
    const wakes: number[] = [];
    const settings = { retry: { baseDelayMs: 300, maxDelayMs: 300 } };
    const { h, root, store, faux } = await open(
      (req, n) => (n <= 1 ? fauxError("503 Service Unavailable") : echo(req, n)),
      { settings, wakeAt: (at) => wakes.push(at) },
    );
    await root.submit({ type: "input", content: "hi", requestId: "r" });
    await until(() => wakes.length === 1);
    const retryAt = liveOf(h).generation!.retry!.at;
    expect(wakes).toEqual([retryAt]);
    await h.close();

    const resumed: number[] = [];
    const h2 = await reopen(store, {
      models: faux.models,
      defaultModel: faux.ref,
      settings,
      wakeAt: (at) => resumed.push(at),
    });
    const again = await (await h2.root()).submit({ type: "input", content: "hi", requestId: "r" });
    expect((await again.wait()).status).toBe("done");
    expect(resumed).toEqual([retryAt]);
  });

  test("requests carry the conversation's provider session (pi.provider): the model's prompt cache hits", async () => {
    const { tool } = itemTool({});
    const { root } = await open(callsThenAnswer(fauxToolCall("apply", { item: "a" }, { id: "call-1" })), {
      tools: [tool],
    });
    expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
    const answers = (await transcript(root))
      .filter((e) => e.kind === "pi.assistant")
      .map((e) => messageOf(e) as AssistantMessage);
    expect(answers[0]!.usage.cacheRead).toBe(0);
    expect(answers[1]!.usage.cacheRead).toBeGreaterThan(0);
  });

  test("an API key echoed by a provider error never reaches the store; a provider that throws at once gives an error answer", async () => {
    const KEY = "sk-test-0123456789abcdef";
    let mode: "echo" | "throw" | "iterate" = "echo";
    const { root, store } = await open(() => fauxError(`401 Unauthorized: key ${KEY} is not valid`), {
      apiKey: () => KEY,
      settings: { retry: { enabled: false } },
      stream: (model, context, options) => {
        expect(options.apiKey).toBe(KEY);
        if (mode === "throw") throw new Error(`could not reach the provider with key ${KEY}`);
        // Draw 34B: a stream made fine whose reading throws is a provider failure too.
        if (mode === "iterate")
          return {
            [Symbol.asyncIterator]: () => ({
              next: () => Promise.reject(new Error(`the stream broke with key ${KEY}`)),
            }),
            result: () => Promise.reject(new Error("no result")),
          } as unknown as ReturnType<typeof defaultStream>;
        return defaultStream(model, context, options);
      },
    });
    const first = await (await root.submit({ type: "input", content: "hi" })).wait();
    expect(first).toMatchObject({ status: "unanswered", reason: "model_error" });
    mode = "throw";
    const second = await (await root.submit({ type: "input", content: "again" })).wait();
    expect(second).toMatchObject({ status: "unanswered", reason: "model_error" });
    mode = "iterate";
    const third = await (await root.submit({ type: "input", content: "once more" })).wait();
    expect(third).toMatchObject({ status: "unanswered", reason: "model_error" });
    const errors = (await transcript(root))
      .filter((e) => e.kind === "pi.assistant")
      .map((e) => (messageOf(e) as AssistantMessage).errorMessage);
    expect(errors).toEqual([
      "401 Unauthorized: key [redacted] is not valid",
      "could not reach the provider with key [redacted]",
      "the stream broke with key [redacted]",
    ]);
    const everything = await store.read(async (sql) =>
      JSON.stringify([
        await sql.all("SELECT * FROM entries"),
        await sql.all("SELECT * FROM documents"),
        await sql.all("SELECT * FROM tasks"),
        await sql.all("SELECT * FROM submissions"),
      ]),
    );
    expect(everything).not.toContain(KEY);
    expect(JSON.stringify([first, second, third])).not.toContain(KEY);
  });

  test("a provider stream that sends no done or error event answers through its result: the answer, or the error it ends with (draw 34C)", async () => {
    // Draw 34C: every test's stream sent a done event; a stream whose final message comes only from
    // result() (a host's own stream function) is read too, its error classified like any other.
    let mode: "answer" | "error" = "answer";
    const { root } = await open(echo, {
      settings: { retry: { enabled: false } },
      stream: () => {
        const s = createAssistantMessageEventStream();
        const message =
          mode === "answer"
            ? fauxAssistantMessage("from the result", { timestamp: 1 })
            : fauxAssistantMessage("", {
                stopReason: "error",
                errorMessage: "400 bad request",
                timestamp: 1,
              });
        queueMicrotask(() => s.end(message));
        return s;
      },
    });
    expect((await (await root.submit({ type: "input", content: "hi" })).wait()).status).toBe("done");
    mode = "error";
    expect(await (await root.submit({ type: "input", content: "again" })).wait()).toMatchObject({
      status: "unanswered",
      reason: "model_error",
    });
    const answers = (await transcript(root))
      .filter((e) => e.kind === "pi.assistant")
      .map((e) => messageOf(e) as AssistantMessage);
    expect(answers.map((m) => [m.stopReason, m.errorMessage])).toEqual([
      ["stop", undefined],
      ["error", "400 bad request"],
    ]);
    expect(answers[0]!.content).toEqual([{ type: "text", text: "from the result" }]);
  });

  test("the harness clock (the now option) stamps the messages the engine writes: the input, and the error answer of a provider that throws", async () => {
    // Spec §2.2 HarnessOptions.now: "Wall clock for sleeps, retries, message timestamps, and task
    // lifecycle times" (sample 25: only conversation and task times were asserted; the error answer
    // was stamped with Date.now()).
    const { root } = await open(echo, {
      now: () => 5_000,
      settings: { retry: { enabled: false } },
      stream: () => {
        throw new Error("the provider is down");
      },
    });
    const settled = await (await root.submit({ type: "input", content: "hi" })).wait();
    expect(settled).toMatchObject({ status: "unanswered", reason: "model_error" });
    const entries = await transcript(root);
    const stamps = ["pi.user", "pi.assistant"].map((kind) =>
      messagesOf(entries.find((e) => e.kind === kind)!).map((m) => m.timestamp),
    );
    expect(stamps).toEqual([[5_000], [5_000]]);
  });

  test("the harness clock (the now option) stamps a provider's answer when it is received, not pi-ai's Date.now()", async () => {
    // Spec §2.2 HarnessOptions.now covers "message timestamps": pi-ai stamps the answers it builds
    // with its own Date.now(), which a host's clock (a replay, a simulation, a test) never sees.
    let clock = 9_000;
    const { root } = await open(echo, { now: () => clock });
    await (await root.submit({ type: "input", content: "hi" })).wait();
    clock = 9_500;
    await (await root.submit({ type: "input", content: "again" })).wait();
    const answers = (await transcript(root)).filter((e) => e.kind === "pi.assistant");
    expect(answers.map((e) => messagesOf(e).map((m) => m.timestamp))).toEqual([[9_000], [9_500]]);
  });

  test("a request without a key that fails on it (pi-ai reads process.env in a browser) says the key is missing", async () => {
    let key: string | undefined;
    const { root } = await open(echo, {
      apiKey: () => key,
      settings: { retry: { enabled: false } },
      stream: () => {
        throw new ReferenceError("process is not defined");
      },
    });
    await (await root.submit({ type: "input", content: "hi" })).wait();
    key = "sk-test-present";
    await (await root.submit({ type: "input", content: "again" })).wait();
    const errors = (await transcript(root))
      .filter((e) => e.kind === "pi.assistant")
      .map((e) => messageOf(e) as AssistantMessage);
    expect(errors.map((m) => m.errorMessage)).toEqual([
      `No API key is saved for ${errors[0]!.provider}.`,
      "process is not defined",
    ]);
    expect(providerProblem(errors[0]!.errorMessage)).toBe("missing");
  });

  test("the thinking level is passed to the provider as reasoning", async () => {
    const reasoning: unknown[] = [];
    const sessions: unknown[] = [];
    const signals: unknown[] = [];
    const { h, root } = await open(echo, {
      stream: (model, context, options) => {
        reasoning.push(options.reasoning);
        sessions.push(options.sessionId);
        signals.push(options.signal);
        return defaultStream(model, context, options);
      },
    });
    await (await root.submit({ type: "input", content: "a" })).wait();
    await root.configure({ thinkingLevel: "high" });
    await (await root.submit({ type: "input", content: "b" })).wait();
    // Cleared again (null): the next request carries no reasoning at all.
    await root.configure({ thinkingLevel: null });
    await (await root.submit({ type: "input", content: "c" })).wait();
    expect(reasoning).toEqual([undefined, "high", undefined]);
    // Every request names the conversation's own provider session (its pi.provider document) and
    // carries the attempt's abort signal.
    const { sessionId } = (await h.doc(root.id, DOC.provider)) as { sessionId: string };
    expect(sessionId).toMatch(/^[0-9a-f-]{36}$/);
    expect(sessions).toEqual([sessionId, sessionId, sessionId]);
    expect(signals.map((s) => s instanceof AbortSignal)).toEqual([true, true, true]);
  });

  test("a request streams with its invocation's signal: the hooks' signal, and aborting the run aborts it", async () => {
    let seen: AbortSignal | undefined;
    let hookSignal: AbortSignal | undefined;
    let end = () => {};
    const { h, root } = await open(echo, {
      hooks: {
        beforeRequest: [
          (_messages, _api, { signal }) => {
            hookSignal = signal;
          },
        ],
      },
      // A provider that answers only when its request is aborted, as a real one does.
      stream: (_model, _context, options) => {
        const s = createAssistantMessageEventStream();
        seen = options.signal;
        end = () => {
          end = () => {};
          s.push({
            type: "error",
            reason: "aborted",
            error: { ...fauxAssistantMessage(""), stopReason: "aborted", errorMessage: "aborted" },
          });
          s.end();
        };
        seen?.addEventListener("abort", () => end());
        return s;
      },
    });
    // Ends the request if the engine never signals it, so a failing run still closes.
    cleanups.push(async () => end());
    const input = await root.submit({ type: "input", content: "a" });
    await until(() => seen !== undefined, { what: "request sent" });
    expect(seen).toBe(hookSignal);
    expect(seen!.aborted).toBe(false);
    expect(await h.abortTask(liveOf(h).run!.taskId)).toBe("marked");
    // Signalled once the abort is marked: the provider's request ends, the input settles aborted.
    expect(seen!.aborted).toBe(true);
    expect(await input.wait()).toMatchObject({ status: "unanswered", reason: "aborted" });
  });

  test("settings.stream options are pinned into the attempt: a resent request keeps them, a retry takes new ones", async () => {
    const SECRET = "Bearer sk-header-secret-42";
    let stream: StreamSettings = {
      transport: "sse",
      timeoutMs: 1234,
      maxRetries: 2,
      maxRetryDelayMs: 500,
      metadata: { user: "u1" },
      cacheRetention: "short",
      headers: { authorization: SECRET },
    };
    const seen: Array<Record<string, unknown>> = [];
    const record: AgentHarnessOptions["stream"] = (model, context, options) => {
      const { signal: _s, sessionId, ...rest } = options;
      seen.push({ ...rest, sessionId: typeof sessionId });
      return defaultStream(model, context, options);
    };
    // The first request streams slowly, so the store's image is taken while it is in flight.
    const slow = fauxAgentModel(() => fauxAssistantMessage("word ".repeat(200)), { tokensPerSecond: 200 });
    cleanups.push(async () => slow.unregister());
    const store = await memoryStore();
    const h = await AgentHarness.open(store, {
      models: slow.models,
      defaultModel: slow.ref,
      settings: () => ({ stream, retry: { baseDelayMs: 1 } }),
      stream: record,
    });
    cleanups.push(() => h.close().catch(() => undefined));
    const root = await h.root();
    // The thinking level is pinned with them (break 29H: a request that read the agent's level at
    // send time, not the attempt's, passed every test): "high" at preparation, "low" by the reopen.
    await root.configure({ thinkingLevel: "high" });
    await root.submit({ type: "input", content: "go", requestId: "r" });
    await until(() => seen.length === 1);
    await root.configure({ thinkingLevel: "low" });
    const image = store.image();
    const { headers: _h, ...pinned } = stream;
    expect(seen[0]).toEqual({ ...stream, reasoning: "high", sessionId: "string" });
    // Headers carry credentials: read at request time, never stored.
    const rows = await store.read((sql) => sql.all("SELECT state FROM tasks"));
    expect(JSON.stringify(rows)).not.toContain(SECRET);
    expect(JSON.parse(String(rows[0]?.["state"])).checkpoint.stream).toEqual(pinned);
    await h.close();

    // Reopened with other settings: the in-flight attempt is resent with its pinned options (and
    // today's headers); its retry after a 503 prepares again and takes the new ones.
    stream = { timeoutMs: 9999, headers: { authorization: "Bearer new" } };
    let calls = 0;
    const flaky = fauxAgentModel(
      () => (++calls === 1 ? fauxError("503 Service Unavailable") : fauxAssistantMessage("ok")),
      {
        id: slow.ref.modelId,
      },
    );
    cleanups.push(async () => flaky.unregister());
    const h2 = await AgentHarness.open(await memoryStore(image), {
      models: flaky.models,
      defaultModel: flaky.ref,
      settings: () => ({ stream, retry: { baseDelayMs: 1 } }),
      stream: record,
    });
    cleanups.push(() => h2.close().catch(() => undefined));
    const again = await (await h2.root()).submit({ type: "input", content: "go", requestId: "r" });
    expect((await again.wait()).status).toBe("done");
    expect(seen.slice(1)).toEqual([
      { ...pinned, headers: { authorization: "Bearer new" }, reasoning: "high", sessionId: "string" },
      { timeoutMs: 9999, headers: { authorization: "Bearer new" }, reasoning: "low", sessionId: "string" },
    ]);
  });

  test("stream.maxRetries is the provider's own retries inside each request; settings.retry alone counts the durable attempts", async () => {
    // Spec §2.2: `stream.maxRetries` are provider retries inside one request, while `retry` governs
    // durable generation attempts. Each setting is set where the other would show: a provider budget
    // of 5 and a durable one of 1 give two requests, each carrying 5. Reading 24b.
    const sent: unknown[] = [];
    const record: AgentHarnessOptions["stream"] = (model, context, options) => {
      sent.push(options.maxRetries);
      return defaultStream(model, context, options);
    };
    const { root, faux } = await open(() => fauxError("503 Service Unavailable"), {
      stream: record,
      settings: { stream: { maxRetries: 5 }, retry: { baseDelayMs: 1, maxDelayMs: 5, maxRetries: 1 } },
    });
    const settled = await (await root.submit({ type: "input", content: "hi" })).wait();
    expect(settled).toMatchObject({ status: "unanswered", reason: "model_error" });
    expect(faux.requests).toHaveLength(2);
    expect(sent).toEqual([5, 5]);
  });

  test("settings.stream options are pinned as a copy: the caller's settings object is neither frozen nor shared, so a later change reaches the next attempt only", async () => {
    // Draw 36eA: the pinned options were taken by a shallow copy; the metadata object, the
    // caller's own, was then committed (and frozen) inside the checkpoint, and the caller could no
    // longer change its settings. Every named test gave a new settings object each time.
    const stream: StreamSettings = { metadata: { user: "u1" } };
    const sent: unknown[] = [];
    const record: AgentHarnessOptions["stream"] = (model, context, options) => {
      sent.push(structuredClone(options.metadata));
      return defaultStream(model, context, options);
    };
    const { root } = await open(echo, { stream: record, settings: () => ({ stream }) });
    expect((await (await root.submit({ type: "input", content: "one" })).wait()).status).toBe("done");
    expect(Object.isFrozen(stream.metadata)).toBe(false);
    stream.metadata!["user"] = "u2";
    expect((await (await root.submit({ type: "input", content: "two" })).wait()).status).toBe("done");
    expect(sent).toEqual([{ user: "u1" }, { user: "u2" }]);
  });

  test("bad stream settings are refused when the harness opens", async () => {
    const bad: unknown[] = [
      { nope: 1 },
      { timeoutMs: -5 },
      { headers: { a: 1 } },
      { transport: "pigeon" },
      { maxRetries: 1.5 },
      { maxRetryDelayMs: -1 },
      { metadata: "user u1" },
      { cacheRetention: "forever" },
      [],
    ];
    for (const stream of bad)
      await expect(open(echo, { settings: { stream: stream as StreamSettings } })).rejects.toThrow(TypeError);
  });
});

test("an answer cut at its length limit is a pi.assistant entry with stop reason length, and answers its input like a stop", async () => {
  // Like a stop, it is offered to the onYield chain first (break 27I: a length answer that skipped
  // the chain passed).
  const yielded: string[] = [];
  const { h, root, faux } = await open(() => fauxAssistantMessage("cut sh", { stopReason: "length" }), {
    hooks: {
      onYield: [
        (message: AssistantMessage) => {
          yielded.push(message.stopReason);
          return undefined;
        },
      ],
    },
  });
  const settled = await (await root.submit({ type: "input", content: "long please" })).wait();
  expect(yielded).toEqual(["length"]);
  const answers = (await transcript(root)).filter((e) => e.kind === "pi.assistant");
  expect(answers.map((e) => (messageOf(e) as AssistantMessage).stopReason)).toEqual(["length"]);
  // Written by the generation (spec §8.1; reading 24e).
  expect((await h.getTask(answers[0]!.byTaskId!))?.kind).toBe("pi.generation");
  expect(textOf(messageOf(answers[0]!))).toBe("cut sh");
  expect(settled).toMatchObject({ status: "done", answer: answers[0]!.id });
  expect(faux.requests).toHaveLength(1);
  await root.waitForIdle();
  expect(root.busy).toBe(false);
});

test("pi.usage counts the usage of every assistant entry, failed attempts included, in the commit that appends it", async () => {
  const { h, root, faux } = await open(
    (req, n) => (n === 1 ? fauxError("503 Service Unavailable") : echo(req, n)),
    {
      settings: { retry: { baseDelayMs: 5, maxDelayMs: 20 } },
    },
  );
  // Each commit that appends an answer, with the pi.usage value that same commit wrote.
  const commits: Array<{ answers: AssistantMessage[]; usage: UsageState | undefined }> = [];
  h.subscribe((change) => {
    const answers = change.entries
      .filter((e) => e.kind === "pi.assistant")
      .map((e) => messageOf(e) as AssistantMessage);
    if (answers.length === 0) return;
    const usage = change.docs.find((d) => d.conversationId === root.id && d.name === DOC.usage);
    commits.push({ answers, usage: usage?.value as unknown as UsageState | undefined });
  });
  await (await root.submit({ type: "input", content: "count me" })).wait();
  const answers = (await transcript(root))
    .filter((e) => e.kind === "pi.assistant")
    .map((e) => messageOf(e) as AssistantMessage);
  expect(answers.map((a) => a.stopReason)).toEqual(["error", "stop"]);
  expect(answers[0]!.usage.totalTokens).toBeGreaterThan(0);
  // The failed attempt's entry keeps its error text, and the retry's request leaves it out (spec §8.1).
  expect(answers[0]!.errorMessage).toBe("503 Service Unavailable");
  expect(faux.requests.map((r) => r.messages.map((m) => m.role))).toEqual([["user"], ["user"]]);
  const sum = (list: Usage[]): Usage => list.reduce((a, b) => addUsage(a, b));
  const usage = internals(h).session.records.getDoc(1, DOC.usage) as unknown as UsageState;
  expect(Object.keys(usage.models)).toEqual(["faux/faux-1"]);
  expect(usage.models["faux/faux-1"]).toEqual(sum(answers.map((a) => a.usage)));
  expect((await h.usage()).models["faux/faux-1"]).toEqual(sum(answers.map((a) => a.usage)));
  // Counted in the same commit: each answer's commit holds the total up to and including it.
  expect(commits.map((c) => c.answers.map((a) => a.stopReason))).toEqual([["error"], ["stop"]]);
  expect(commits.map((c) => c.usage?.models["faux/faux-1"])).toEqual([
    answers[0]!.usage,
    sum(answers.map((a) => a.usage)),
  ]);
});

test("an abort's converted partial is counted in pi.usage in the commit that appends it (spec §8.6: every built-in writer)", async () => {
  const faux = fauxAgentModel(() => fauxAssistantMessage("word ".repeat(400)), { tokensPerSecond: 400 });
  const h = await AgentHarness.open(await memoryStore(), {
    models: faux.models,
    defaultModel: faux.ref,
    settings: { partialIntervalMs: 10 },
  });
  cleanups.push(async () => {
    await h.close().catch(() => undefined);
    faux.unregister();
  });
  const root = await h.root();
  const commits: Array<{ answer: AssistantMessage; usage: UsageState | undefined }> = [];
  h.subscribe((change) => {
    const entry = change.entries.find((e) => e.kind === "pi.assistant");
    if (!entry) return;
    const usage = change.docs.find((d) => d.conversationId === root.id && d.name === DOC.usage);
    commits.push({
      answer: messageOf(entry) as AssistantMessage,
      usage: usage?.value as unknown as UsageState,
    });
  });
  const input = await root.submit({ type: "input", content: "talk" });
  await until(() => (liveOf(h).generation?.message?.content.length ?? 0) > 0, {
    what: "a partial committed",
  });
  await root.abort();
  expect((await input.wait()).status).toBe("unanswered");
  expect(commits).toHaveLength(1);
  const [{ answer, usage }] = commits as [(typeof commits)[number]];
  expect(answer.stopReason).toBe("aborted");
  expect(answer.usage.totalTokens).toBeGreaterThan(0);
  expect(usage?.models[`${faux.ref.provider}/${faux.ref.modelId}`]).toEqual(answer.usage);
});

describe("a conversation without a model", () => {
  test("an agent with no model fails the run durably: the input is unanswered no_model and the generation failed", async () => {
    const faux = fauxAgentModel(echo);
    cleanups.push(async () => faux.unregister());
    const store = await memoryStore();
    const h = await AgentHarness.open(store, { models: faux.models });
    cleanups.push(() => h.close().catch(() => undefined));
    const root = await h.root();
    const sub = await root.submit({ type: "input", content: "hello" });
    const [userEntry] = await root.entries();
    // The settled record names the input's entry; nothing but that entry was written and the run is gone.
    expect(await sub.wait()).toEqual({
      status: "unanswered",
      reason: "no_model",
      detail: "no model is configured",
    });
    expect(await sub.record()).toMatchObject({
      status: "unanswered",
      reason: "no_model",
      entry: userEntry!.id,
    });
    expect((await root.entries()).map((e) => e.kind)).toEqual(["pi.user"]);
    expect(liveOf(h)).toEqual({});
    const failed = await h.tasks({ kind: "pi.generation" });
    expect(failed.map((t) => t.state)).toEqual([
      {
        status: "terminal",
        outcome: expect.objectContaining({
          status: "failed",
          error: { message: "no model is configured", detail: { reason: "no_model" } },
        }),
      },
    ]);
    expect(faux.requests).toHaveLength(0);
    expect(root.busy).toBe(false);
    await h.close();
    const again = await reopen(store, { models: faux.models });
    expect(await (await again.submission(sub.id))!.wait()).toMatchObject({
      status: "unanswered",
      reason: "no_model",
    });
  });
});

test("a run that takes several follow-ups and then finds no model fails them all durably no_model, not only the first: the model cleared while the run before was busy (break 29M)", async () => {
  const hold = deferred();
  const faux = fauxAgentModel(async (req, n) => {
    if (n === 1) await hold.promise;
    return echo(req, n);
  });
  cleanups.push(async () => faux.unregister());
  const store = await memoryStore();
  // No default model: the conversation's own is the only one.
  const h = await AgentHarness.open(store, { models: faux.models, settings: { followUpMode: "all" } });
  cleanups.push(() => h.close().catch(() => undefined));
  const root = await h.root();
  await root.configure({ model: faux.ref });
  const first = await root.submit({ type: "input", content: "one" });
  await until(() => faux.requests.length === 1, { what: "the first request sent" });
  const a = await root.submit({ type: "input", content: "A" });
  const b = await root.submit({ type: "input", content: "B" });
  await root.configure({ model: null });
  hold.resolve();
  expect((await first.wait()).status).toBe("done");
  for (const sub of [a, b])
    expect(await within(sub.wait(), 5000, `follow-up ${sub.id} settled`)).toEqual({
      status: "unanswered",
      reason: "no_model",
      detail: "no model is configured",
    });
  expect(faux.requests).toHaveLength(1);
  expect(liveOf(h)).toEqual({});
  await h.close();
  const again = await reopen(store, { models: faux.models });
  for (const sub of [a, b])
    expect(await (await again.submission(sub.id))!.wait()).toMatchObject({
      status: "unanswered",
      reason: "no_model",
    });
});

test("a conversation with no model of its own fails no_model, though the root was configured with one; an unknown default model fails at preparation", async () => {
  // Break 28C (the upstream scenario's plain conversation): the named tests have no model anywhere
  // or an unknown one on the root; a conversation taking the root's model passed them.
  const faux = fauxAgentModel(echo);
  cleanups.push(async () => faux.unregister());
  const h = await AgentHarness.open(await memoryStore(), { models: faux.models });
  cleanups.push(() => h.close().catch(() => undefined));
  const root = await h.root();
  await root.configure({ model: faux.ref });
  expect((await (await root.submit({ type: "input", content: "hi" })).wait()).status).toBe("done");
  const plain = await h.createConversation({ ownership: { kind: "ownerless" } });
  const unset = await (await plain.submit({ type: "input", content: "hi" })).wait();
  expect(unset).toEqual({ status: "unanswered", reason: "no_model", detail: "no model is configured" });
  expect((await plain.entries()).map((e) => e.kind)).toEqual(["pi.user"]);
  expect(faux.requests).toHaveLength(1);
  // A default model the resolver does not know fails at preparation too: the transcript holds the
  // input alone.
  const gone = await AgentHarness.open(await memoryStore(), {
    models: faux.models,
    defaultModel: { provider: "nowhere", modelId: "none" },
  });
  cleanups.push(() => gone.close().catch(() => undefined));
  const other = await gone.root();
  expect(await (await other.submit({ type: "input", content: "hi" })).wait()).toEqual({
    status: "unanswered",
    reason: "no_model",
    detail: "unknown model nowhere/none",
  });
  expect((await other.entries()).map((e) => e.kind)).toEqual(["pi.user"]);
  expect(faux.requests).toHaveLength(1);
});

test('written system messages have content "": the prompt lives in their named sections', async () => {
  const { tool } = itemTool({});
  const { root } = await open(echo, { tools: [tool] });
  await root.configure({ instructions: "Answer in French." });
  await (await root.submit({ type: "input", content: "hi" })).wait();
  const systems = (await root.entries()).filter((e) => e.kind === "pi.system").flatMap(messagesOf);
  expect(systems.length).toBeGreaterThan(0);
  for (const m of systems) expect(m).toMatchObject({ role: "system", content: "" });
  expect(JSON.stringify(systems)).toContain("Answer in French.");
});
