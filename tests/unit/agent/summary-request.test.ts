/**
 * The summary request's pinned thinking level and its user message (spec §8.7): `reasoning` is the
 * level pinned at `select`, kept across a retry even when the conversation's level changed meanwhile;
 * the user message is the serialized text in `<conversation>` tags, then the built-in summarization
 * prompt, then `Additional focus: <instructions>` only when the input has instructions. The stream
 * options are pinned at `select` the same way.
 */
import { fauxAssistantMessage, type Message } from "@mariozechner/pi-ai";
import { expect, test } from "vitest";
import { SUMMARY_SYSTEM_PROMPT } from "../../../worker/agent/compaction/task.ts";
import { defaultStream } from "../../../worker/agent/services.ts";
import type { AgentHarnessOptions, Conversation, Json } from "../../../worker/index.ts";
import { fauxError } from "../../../worker/testing.ts";
import { open, textOf } from "./fixtures.ts";

test("the summary request carries the pinned thinking level as reasoning and the pinned stream options across a retry, and its user message is <conversation>, the prompt, then the focus only when given", async () => {
  const sent: Array<{
    summary: boolean;
    reasoning: unknown;
    timeoutMs: unknown;
    headers: unknown;
    messages: Message[];
  }> = [];
  const stream: AgentHarnessOptions["stream"] = (model, context, options) => {
    sent.push({
      summary: context.systemPrompt === SUMMARY_SYSTEM_PROMPT,
      reasoning: options.reasoning,
      timeoutMs: options.timeoutMs,
      headers: options.headers,
      messages: [...context.messages],
    });
    return defaultStream(model, context, options);
  };
  let root: Conversation | undefined;
  let summaries = 0;
  // Read at every resolution: the stream options change with the thinking level below.
  const settings = {
    compaction: { keepRecentTokens: 1, reserveTokens: 1000 },
    retry: { baseDelayMs: 1 },
    stream: { timeoutMs: 1111, headers: { authorization: "Bearer one" } },
  };
  const { h, root: r } = await open(
    async (req) => {
      if (req.systemPrompt !== SUMMARY_SYSTEM_PROMPT) return fauxAssistantMessage("ok");
      summaries++;
      if (summaries === 1) {
        // The conversation's level changes while the first attempt is out; it then fails retryably.
        await root!.configure({ thinkingLevel: "low" });
        settings.stream = { timeoutMs: 2222, headers: { authorization: "Bearer two" } };
        // A head marker lands while the attempt is out: the retry summarizes the range pinned at
        // select, not the one the new marker starts.
        await root!.commit((tx) => {
          tx.appendEntry(root!.id, {
            kind: "message",
            head: "self",
            model: [{ role: "user", content: "late entry", timestamp: 1 }] as unknown as Json,
          });
        });
        return fauxError("503 overloaded");
      }
      return fauxAssistantMessage(`SUMMARY ${summaries}`);
    },
    { stream, settings },
  );
  root = r;
  await root.configure({ thinkingLevel: "high" });
  for (const text of ["one", "two", "three"])
    await (await root.submit({ type: "input", content: text })).wait();

  const plain = await root.compact();
  expect((await h.waitForTask(plain)).state).toMatchObject({ outcome: { status: "completed" } });
  const first = sent.filter((s) => s.summary);
  expect(first).toHaveLength(2);
  // Both attempts carry the level pinned at select, not the one configured during the first.
  expect(first.map((s) => s.reasoning)).toEqual(["high", "high"]);
  // So do the stream options: pinned at select, not the settings changed during the first attempt.
  expect(first.map((s) => s.timeoutMs)).toEqual([1111, 1111]);
  // The headers are forwarded too, read at each request (they carry credentials, never pinned; break
  // 31A: a summary request sent without them passed).
  expect(first.map((s) => s.headers)).toEqual([
    { authorization: "Bearer one" },
    { authorization: "Bearer two" },
  ]);
  // And the conversation it summarizes: the retry resends the first attempt's text, without the entry
  // that landed after select (break 28E).
  expect(textOf(first[1]!.messages[0]!)).toBe(textOf(first[0]!.messages[0]!));
  expect(textOf(first[1]!.messages[0]!)).not.toContain("late entry");
  // The conversation's own next request does follow both changes.
  await (await root.submit({ type: "input", content: "four" })).wait();
  expect(sent.at(-1)).toMatchObject({ summary: false, reasoning: "low", timeoutMs: 2222 });

  // One user message: the serialized text in <conversation> tags, then the prompt, and no focus.
  expect(first[1]!.messages.map((m) => m.role)).toEqual(["user"]);
  const text = textOf(first[1]!.messages[0]!);
  const match = /^<conversation>\n([\s\S]*)\n<\/conversation>\n\n([\s\S]+)$/.exec(text);
  expect(match, text).not.toBeNull();
  expect(match![1]).toContain("[User]: one");
  const prompt = match![2]!;
  expect(prompt).not.toContain("Additional focus");
  expect(prompt).not.toContain("[User]");

  // With instructions, the focus follows the same prompt.
  const focused = await root.compact("keep the numbers");
  expect((await h.waitForTask(focused)).state).toMatchObject({ outcome: { status: "completed" } });
  const last = sent.filter((s) => s.summary).at(-1)!;
  expect(last.reasoning).toBe("low");
  const focusedText = textOf(last.messages[0]!);
  expect(focusedText.endsWith(`</conversation>\n\n${prompt}\n\nAdditional focus: keep the numbers`)).toBe(
    true,
  );
});

test("a retried summary request goes to the model pinned at select, though the conversation names another meanwhile (break 31bA)", async () => {
  // Break 31bA: the named tests never change the model while a summary is out; a retry resolving the
  // conversation's model at send time, not the pinned one, passed them.
  const models: string[] = [];
  const stream: AgentHarnessOptions["stream"] = (model, context, options) => {
    if (context.systemPrompt === SUMMARY_SYSTEM_PROMPT) models.push(`${model.provider}/${model.id}`);
    return defaultStream(model, context, options);
  };
  let root: Conversation | undefined;
  let summaries = 0;
  const {
    h,
    root: r,
    faux,
  } = await open(
    async (req) => {
      if (req.systemPrompt !== SUMMARY_SYSTEM_PROMPT) return fauxAssistantMessage("ok");
      summaries++;
      if (summaries === 1) {
        await root!.configure({ model: { provider: "faux", modelId: "another-model" } });
        return fauxError("503 overloaded");
      }
      return fauxAssistantMessage(`SUMMARY ${summaries}`);
    },
    {
      stream,
      settings: { compaction: { keepRecentTokens: 1, reserveTokens: 1000 }, retry: { baseDelayMs: 1 } },
    },
  );
  root = r;
  for (const text of ["one", "two", "three"])
    await (await root.submit({ type: "input", content: text })).wait();
  const id = await root.compact();
  expect((await h.waitForTask(id)).state).toMatchObject({ outcome: { status: "completed" } });
  const pinned = `${faux.ref.provider}/${faux.ref.modelId}`;
  expect(models).toEqual([pinned, pinned]);
});

test("a fork's summary request summarizes the history it inherits with its own: <conversation> holds the parent's entries through the fork point, then the fork's (draw 35)", async () => {
  // Draw 35: every summary-request test compacts the root; a summary that read only the entries of the
  // compacting conversation itself (a fork's inherited history left out) passed them all.
  const summaries: string[] = [];
  const stream: AgentHarnessOptions["stream"] = (model, context, options) => {
    if (context.systemPrompt === SUMMARY_SYSTEM_PROMPT) summaries.push(textOf(context.messages[0]!));
    return defaultStream(model, context, options);
  };
  const { h, root } = await open(
    (req) => fauxAssistantMessage(req.systemPrompt === SUMMARY_SYSTEM_PROMPT ? "SUMMARY" : "ok"),
    { stream, settings: { compaction: { keepRecentTokens: 1, reserveTokens: 1000 } } },
  );
  for (const text of ["one", "two"]) await (await root.submit({ type: "input", content: text })).wait();
  const at = (await root.entries()).at(-1)!.id;
  const fork = await root.fork(at, { ownership: { kind: "ownerless" } });
  for (const text of ["three", "four"]) await (await fork.submit({ type: "input", content: text })).wait();
  const id = await fork.compact();
  expect((await h.waitForTask(id)).state).toMatchObject({ outcome: { status: "completed" } });
  expect(summaries).toHaveLength(1);
  const match = /^<conversation>\n([\s\S]*)\n<\/conversation>\n\n/.exec(summaries[0]!);
  expect(match, summaries[0]).not.toBeNull();
  const body = match![1]!;
  for (const text of ["[User]: one", "[User]: two", "[User]: three"]) expect(body).toContain(text);
  expect(body.indexOf("[User]: one")).toBeLessThan(body.indexOf("[User]: three"));
});

test("a retried summary request sends the maxTokens pinned at select, though the compaction settings changed meanwhile (draw 38 D)", async () => {
  // Draw 38 D: the named tests never change reserveTokens while a summary is out; a summary request
  // that computed maxTokens from the settings at send time, not the pinned value, passed them.
  const sent: unknown[] = [];
  const stream: AgentHarnessOptions["stream"] = (model, context, options) => {
    if (context.systemPrompt === SUMMARY_SYSTEM_PROMPT) sent.push(options.maxTokens);
    return defaultStream(model, context, options);
  };
  let summaries = 0;
  // Read at every resolution: the change below reaches everything that reads the settings anew.
  const settings = { compaction: { keepRecentTokens: 1, reserveTokens: 1000 }, retry: { baseDelayMs: 1 } };
  const { h, root } = await open(
    async (req) => {
      if (req.systemPrompt !== SUMMARY_SYSTEM_PROMPT) return fauxAssistantMessage("ok");
      summaries++;
      if (summaries === 1) {
        settings.compaction = { keepRecentTokens: 1, reserveTokens: 500 };
        return fauxError("503 overloaded");
      }
      return fauxAssistantMessage(`SUMMARY ${summaries}`);
    },
    { stream, settings },
  );
  for (const text of ["one", "two", "three"])
    await (await root.submit({ type: "input", content: text })).wait();
  const id = await root.compact();
  expect((await h.waitForTask(id)).state).toMatchObject({ outcome: { status: "completed" } });
  // floor(0.8 * 1000) pinned at select, for the first attempt and its retry alike.
  expect(sent).toEqual([800, 800]);
  // A compaction selected after the change pins the new value.
  for (const text of ["four", "five"]) await (await root.submit({ type: "input", content: text })).wait();
  const later = await root.compact();
  expect((await h.waitForTask(later)).state).toMatchObject({ outcome: { status: "completed" } });
  expect(sent).toEqual([800, 800, 400]);
});
