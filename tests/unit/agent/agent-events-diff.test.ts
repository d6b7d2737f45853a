/**
 * `message_update`'s changes (spec §9.4), from one committed partial to the next: an append to a
 * block's text or thinking is a delta, a new block starts, any other change inside a block sends the
 * block, any other change to `content` sends the whole message, and a change of only `usage` sends
 * no changes.
 */
import {
  type AssistantMessage,
  fauxAssistantMessage,
  fauxText,
  fauxThinking,
  fauxToolCall,
} from "@mariozechner/pi-ai";
import { expect, test } from "vitest";
import { messageChanges, outputChange } from "../../../worker/agent/events/diff.ts";

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

test("toolcall_delta carries each grown string's path inside the arguments, through objects and arrays; a new call starts; any other change to a call sends the block", () => {
  // Draw 28a: every toolcall_delta a named test derived grew a string at a top-level key, so a path
  // that dropped array indexes passed them.
  const call = (args: Record<string, unknown>, id = "c1") => fauxToolCall("edit", args as never, { id });
  const before = message([fauxText("ok"), call({ path: "a", edits: [{ old: "x", new: "y" }, "fi"] })]);
  const grown = message([fauxText("ok"), call({ path: "a.ts", edits: [{ old: "x", new: "yes" }, "first"] })]);
  expect(messageChanges(before, grown)).toEqual([
    { type: "toolcall_delta", contentIndex: 1, path: ["path"], delta: ".ts" },
    { type: "toolcall_delta", contentIndex: 1, path: ["edits", 0, "new"], delta: "es" },
    { type: "toolcall_delta", contentIndex: 1, path: ["edits", 1], delta: "rst" },
  ]);
  // A new call: it starts, whole.
  const second = call({ path: "b" }, "c2");
  expect(messageChanges(grown, message([...grown.content, second] as never))).toEqual([
    { type: "toolcall_start", contentIndex: 2, block: second },
  ]);
  // An argument that is not a grown string (an array that grew, a string rewritten), or a field
  // outside the arguments: the block is sent whole.
  for (const next of [
    call({ path: "a.ts", edits: [{ old: "x", new: "yes" }, "first", "more"] }),
    call({ path: "b.ts", edits: [{ old: "x", new: "yes" }, "first"] }),
    call({ path: "a.ts", edits: [{ old: "x", new: "yes" }, "first"] }, "c9"),
  ])
    expect(messageChanges(grown, message([fauxText("ok"), next]))).toEqual([
      { type: "block", contentIndex: 1, block: next },
    ]);
});

test("message_update changes in one throttled commit: a grown block and each of several new blocks; a thinking or text block that grew and gained its signature is sent whole (draw 32b)", () => {
  // Draw 32b: each named change came one at a time; a diff that started only the first of several
  // new blocks, and one that sent a grown block as a delta though its signature had appeared (the
  // signature lost), passed every test.
  const before = message([fauxThinking("Let")]);
  const text = fauxText("Reading");
  const call = fauxToolCall("read", { path: "a.md" } as never, { id: "c1" });
  expect(messageChanges(before, message([fauxThinking("Let me"), text, call]))).toEqual([
    { type: "thinking_delta", contentIndex: 0, delta: " me" },
    { type: "text_start", contentIndex: 1, block: text },
    { type: "toolcall_start", contentIndex: 2, block: call },
  ]);
  const signed = { type: "thinking", thinking: "Let me", thinkingSignature: "sig-1" } as const;
  expect(messageChanges(before, message([signed]))).toEqual([
    { type: "block", contentIndex: 0, block: signed },
  ]);
  const textSigned = { type: "text", text: "Reading it", textSignature: "sig-2" } as const;
  expect(
    messageChanges(message([fauxThinking("Let"), text]), message([fauxThinking("Let"), textSigned])),
  ).toEqual([{ type: "block", contentIndex: 1, block: textSigned }]);
});

test("tool_execution_update output: a rewritten window, or a trim the new text does not continue, is a replacement", () => {
  // An append and a front trim that the new text continues: no replacement.
  expect(outputChange("ab\n", "ab\ncd\n", 0)).toEqual({ append: "cd\n" });
  expect(outputChange("ab\ncd\n", "cd\nef\n", 3)).toEqual({ trimStart: 3, append: "ef\n" });
  // Rewritten from the start, nothing trimmed: the whole window is set.
  expect(outputChange("ab\ncd\n", "xy\n", 0)).toEqual({ set: "xy\n" });
  // Rewritten and longer, nothing trimmed: growth alone is no append (draw 38c).
  expect(outputChange("ab\n", "xy\nzz\n", 0)).toEqual({ set: "xy\nzz\n" });
  // Bytes were dropped, but what is left does not start with the kept part: set, not a trim.
  expect(outputChange("ab\ncd\n", "zz\nef\n", 3)).toEqual({ set: "zz\nef\n" });
  // Cleared: set to the empty window.
  expect(outputChange("ab\n", undefined, 0)).toEqual({ set: "" });
});
