/**
 * `compacted` through a deferred poll (spec §8.3): "`compacted` carries over to `request`, `retry`,
 * `poll`, and the next `prepare`", and an overflow is compacted only "while ... `compacted` is
 * absent"; "any other overflow, including a second one, is never retried". A run that compacted
 * for an overflow, whose next request is answered later and whose poll overflows again, fails
 * `model_error` without a second compaction. (Reading 23d: the poll phase dropped `compacted`.)
 */
import {
  type AssistantMessage,
  createAssistantMessageEventStream,
  fauxAssistantMessage,
} from "@mariozechner/pi-ai";
import { expect, test } from "vitest";
import { SUMMARY_SYSTEM_PROMPT } from "../../../worker/agent/compaction/task.ts";
import { zeroUsage } from "../../../worker/agent/records.ts";
import { defaultStream } from "../../../worker/agent/services.ts";
import { AgentHarness, createModelResolver, type DeferredAnswer } from "../../../worker/index.ts";
import {
  type FauxResponder,
  fauxAgentModel,
  fauxError,
  memoryStore,
  networkSwitch,
  until,
} from "../../../worker/testing.ts";
import { cleanups, textOf } from "./fixtures.ts";

const big = (label: string) => `${label} ${"x".repeat(400)}`; // about 100 tokens
const TOO_LONG = "prompt is too long: 210000 tokens > 200000 maximum";
const SUMMARY_START = "The conversation history before this point was compacted";

test("a run that compacted keeps compacted through a deferred poll: the poll's overflow fails the run, with no second compaction", async () => {
  let overflowed = 0;
  // Once summarized, a smaller keepRecentTokens leaves a cut in the compacted context, so only
  // `compacted` can keep the poll's overflow from compacting again.
  let keepRecentTokens = 150;
  const responder: FauxResponder = (req) => {
    if (req.systemPrompt === SUMMARY_SYSTEM_PROMPT) {
      keepRecentTokens = 50;
      return fauxAssistantMessage("SUMMARY");
    }
    const last = textOf([...req.messages].reverse().find((m) => m.role === "user")!);
    if (last.startsWith("q4")) {
      overflowed++;
      return fauxError(TOO_LONG);
    }
    return fauxAssistantMessage(big("answer"));
  };
  const faux = fauxAgentModel(responder, { contextWindow: 1_000_000 });
  let polled = 0;
  const h = await AgentHarness.open(await memoryStore(), {
    models: createModelResolver({
      extra: [faux.model],
      deferred: {
        // The request sent after the summary is answered later, with the overflow again.
        async fetchDeferred(model) {
          polled++;
          const error = fauxError(TOO_LONG);
          return { ...error, api: model.api, provider: model.provider, model: model.id } as AssistantMessage;
        },
      },
    }),
    defaultModel: faux.ref,
    settings: () => ({
      compaction: { enabled: true, reserveTokens: 100, keepRecentTokens, backgroundTokens: 0 },
      retry: { enabled: false, baseDelayMs: 1 },
    }),
    stream: (model, context, options) => {
      const afterSummary =
        context.systemPrompt !== SUMMARY_SYSTEM_PROMPT &&
        context.messages.some((m) => m.role === "user" && textOf(m).startsWith(SUMMARY_START));
      if (!afterSummary) return defaultStream(model, context, options);
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
        deferred: { id: "job-1", pollAfterMs: 1 },
      };
      queueMicrotask(() => {
        stream.push({ type: "done", reason: "stop", message });
        stream.end(message);
      });
      return stream;
    },
  });
  cleanups.push(async () => {
    await h.close().catch(() => undefined);
    faux.unregister();
  });
  const root = await h.root();
  for (let i = 1; i <= 3; i++) await (await root.submit({ type: "input", content: big(`q${i}`) })).wait();
  const run = await (await root.submit({ type: "input", content: big("q4") })).wait();
  // The first overflow compacted; the request after the summary was deferred and its poll overflowed.
  expect([overflowed, polled]).toEqual([1, 1]);
  expect(run).toEqual({ status: "unanswered", reason: "model_error", detail: TOO_LONG });
  // One compaction only: the run had compacted, and the poll knew it.
  expect((await h.tasks({ kind: "pi.compaction" })).length).toBe(1);
  expect((await root.entries()).filter((e) => e.kind === "pi.compaction")).toHaveLength(1);
});

test("a run that compacted keeps compacted through a retry: the next prepare checks no threshold again", async () => {
  // A declined blocking compaction leaves the context above the threshold; the request then fails
  // retryably, and the retry's prepare must not compact again (spec §8.3: `compacted` carries over
  // to `retry` and the next `prepare`).
  const reasons: string[] = [];
  let failNext = false;
  const responder: FauxResponder = (req, n) => {
    if (failNext && n > 0) {
      failNext = false;
      return fauxError("503 Service Unavailable");
    }
    return fauxAssistantMessage(big(`answer ${req.messages.length}`));
  };
  const faux = fauxAgentModel(responder, { contextWindow: 1200 });
  const h = await AgentHarness.open(await memoryStore(), {
    models: faux.models,
    defaultModel: faux.ref,
    settings: {
      compaction: { reserveTokens: 100, keepRecentTokens: 150, backgroundTokens: 0 },
      retry: { baseDelayMs: 1 },
    },
    hooks: {
      beforeCompact: [
        (input) => {
          reasons.push(input.reason);
          // The request after the decline fails once, retryably.
          failNext = true;
          return { decline: true };
        },
      ],
    },
  });
  cleanups.push(async () => {
    await h.close().catch(() => undefined);
    faux.unregister();
  });
  const root = await h.root();
  let turn = 0;
  while (reasons.length === 0 && turn < 12) {
    turn++;
    expect((await (await root.submit({ type: "input", content: big(`q${turn}`) })).wait()).status).toBe(
      "done",
    );
  }
  expect(reasons).toEqual(["threshold"]);
  expect(failNext).toBe(false);
  // The failed attempt and the retried answer, and one compaction only.
  const last = (await root.entries()).filter((e) => e.kind === "pi.assistant").slice(-2);
  expect(last.map((e) => (e.model as unknown as AssistantMessage[])[0]!.stopReason)).toEqual([
    "error",
    "stop",
  ]);
  expect(await h.tasks({ kind: "pi.compaction" })).toHaveLength(1);
});

test("a run that compacted keeps compacted through a wait for the network: the prepare after it checks no threshold again", async () => {
  // Break 29A: the `offline` checkpoint (the engine's retry while the platform is offline, not
  // counted) dropping `compacted` passed every test above; the prepare after the network returned
  // compacted a second time.
  const reasons: string[] = [];
  let failNext = false;
  const network = networkSwitch({ online: true });
  const responder: FauxResponder = (req, n) => {
    if (failNext && n > 0) {
      failNext = false;
      // The request never reaches its server, and the platform says offline.
      network.set(false);
      return fauxError("Connection error.");
    }
    return fauxAssistantMessage(big(`answer ${req.messages.length}`));
  };
  const faux = fauxAgentModel(responder, { contextWindow: 1200 });
  const h = await AgentHarness.open(await memoryStore(), {
    models: faux.models,
    defaultModel: faux.ref,
    network,
    settings: {
      compaction: { reserveTokens: 100, keepRecentTokens: 150, backgroundTokens: 0 },
      retry: { baseDelayMs: 1 },
    },
    hooks: {
      beforeCompact: [
        (input) => {
          reasons.push(input.reason);
          // Only the first: the request after it fails on the network.
          if (reasons.length === 1) failNext = true;
          return { decline: true };
        },
      ],
    },
  });
  cleanups.push(async () => {
    await h.close().catch(() => undefined);
    faux.unregister();
  });
  const root = await h.root();
  let turn = 0;
  while (reasons.length === 0 && turn < 12) {
    turn++;
    const sub = await root.submit({ type: "input", content: big(`q${turn}`) });
    let settled = false;
    const waited = sub.wait().then((r) => {
      settled = true;
      return r;
    });
    await until(() => settled || network.waiting > 0, { what: "an answer or a wait for the network" });
    if (!settled) network.set(true);
    expect((await waited).status).toBe("done");
  }
  expect(reasons).toEqual(["threshold"]);
  expect(failNext).toBe(false);
  const last = (await root.entries()).filter((e) => e.kind === "pi.assistant").slice(-2);
  expect(last.map((e) => (e.model as unknown as AssistantMessage[])[0]!.stopReason)).toEqual([
    "error",
    "stop",
  ]);
  expect(await h.tasks({ kind: "pi.compaction" })).toHaveLength(1);
});
