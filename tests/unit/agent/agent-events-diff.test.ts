/**
 * `message_update`'s changes (spec §9.4), from one committed partial to the next: an append to a
 * block's text or thinking is a delta, a new block starts, any other change inside a block sends the
 * block, any other change to `content` sends the whole message, and a change of only `usage` sends
 * no changes.
 */
import { type AssistantMessage, fauxAssistantMessage, fauxText, fauxThinking } from "@mariozechner/pi-ai";
import { expect, test } from "vitest";
import { messageChanges } from "../../../worker/agent/events/diff.ts";

const message = (...content: Parameters<typeof fauxAssistantMessage>[0][]): AssistantMessage =>
  fauxAssistantMessage(content.flat() as never);

test("message_update changes: text and thinking deltas, a block start, a rewritten block, a whole message, and nothing for usage alone", () => {
  const before = message([fauxThinking("Let"), fauxText("Hel")]);
  // Appends to both blocks' strings: two deltas, in content order.
  expect(messageChanges(before, message([fauxThinking("Let me"), fauxText("Hello")]))).toEqual([
    { type: "thinking_delta", contentIndex: 0, delta: " me" },
    { type: "text_delta", contentIndex: 1, delta: "lo" },
  ]);
  // A new block: it starts.
  expect(messageChanges(before, message([fauxThinking("Let"), fauxText("Hel"), fauxText("x")]))).toEqual([
    { type: "text_start", contentIndex: 2, block: { type: "text", text: "x" } },
  ]);
  // Text that is not an append: the block is sent whole.
  expect(messageChanges(before, message([fauxThinking("Let"), fauxText("Hex")]))).toEqual([
    { type: "block", contentIndex: 1, block: { type: "text", text: "Hex" } },
  ]);
  // A block whose type changed, or content that shrank: the whole message.
  const retyped = message([fauxText("Let"), fauxText("Hel")]);
  expect(messageChanges(before, retyped)).toEqual([{ type: "message", message: retyped }]);
  const shrunk = message([fauxThinking("Let")]);
  expect(messageChanges(before, shrunk)).toEqual([{ type: "message", message: shrunk }]);
  // Only the usage changed: an update with no changes (it carries the usage).
  const costlier = { ...before, usage: { ...before.usage, output: before.usage.output + 5 } };
  expect(messageChanges(before, costlier)).toEqual([]);
});
