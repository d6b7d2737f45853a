/**
 * An answer the app could not read (a provider stream in another format than the model's API: it
 * ends normally with nothing in it) is kept as an error answer with the reason in words (pi-ai's
 * stopReason "error"), fails the run once without a retry, and the input is answered as failed;
 * an answer with text, or with a tool call and no text, is an answer as before.
 */
import { type AssistantMessage, fauxAssistantMessage, fauxText, fauxToolCall } from "@mariozechner/pi-ai";
import { expect, test } from "vitest";
import { EMPTY_ANSWER_ERROR, emptyAnswerAsError } from "../../../worker/agent/generation/classification.ts";
import { isRetryableError } from "../../../worker/agent/services.ts";
import { echo, messageOf, open, transcript } from "./fixtures.ts";

test("an answer with no text and no tool call is an error answer in words, the run fails once, not retried", async () => {
  const { root, faux } = await open(() => fauxAssistantMessage(""), {
    settings: { retry: { baseDelayMs: 5, maxDelayMs: 20 } },
  });
  const sub = await root.submit({ type: "input", content: "hi" });
  expect(await sub.wait()).toMatchObject({ status: "unanswered", reason: "model_error" });
  expect(faux.requests).toHaveLength(1);
  const answers = (await transcript(root))
    .filter((e) => e.kind === "pi.assistant")
    .map((e) => messageOf(e) as AssistantMessage);
  expect(answers.map((m) => [m.stopReason, m.errorMessage])).toEqual([["error", EMPTY_ANSWER_ERROR]]);
  expect(isRetryableError(EMPTY_ANSWER_ERROR)).toBe(false);
});

test("text of only spaces is empty too; a tool call alone or any text is an answer", () => {
  const blank = fauxAssistantMessage("  \n");
  expect(emptyAnswerAsError(blank)).toMatchObject({ stopReason: "error", errorMessage: EMPTY_ANSWER_ERROR });
  const thinkingOnly = fauxAssistantMessage([{ type: "thinking", thinking: "hmm" }]);
  expect(emptyAnswerAsError(thinkingOnly).stopReason).toBe("error");
  const text = fauxAssistantMessage([fauxText("hello")]);
  expect(emptyAnswerAsError(text)).toBe(text);
  const call = fauxAssistantMessage([fauxToolCall("read", { path: "a" })], { stopReason: "toolUse" });
  expect(emptyAnswerAsError(call)).toBe(call);
  const failed = { ...fauxAssistantMessage(""), stopReason: "error" as const, errorMessage: "boom" };
  expect(emptyAnswerAsError(failed)).toBe(failed);
});

test("a normal answer still ends the run as done", async () => {
  const { root } = await open(echo);
  expect((await (await root.submit({ type: "input", content: "hi" })).wait()).status).toBe("done");
});
