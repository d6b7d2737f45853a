/**
 * The summary request's serialization (spec §8.7): [User]/[Assistant thinking]/[Assistant]/[Assistant tool calls]/[Tool result] lines, tool
 * results cut to 2,000 characters, no system text.
 */
import type { Message } from "@mariozechner/pi-ai";
import { expect, test } from "vitest";
import { serializeForSummary } from "../../../worker/agent/compaction/range.ts";

const toolResult = (text: string): Message => ({
  role: "toolResult",
  toolCallId: "c1",
  toolName: "read",
  content: [{ type: "text", text }],
  isError: false,
  timestamp: 1,
});

test("summary serialization cuts a tool result to its first 2,000 characters and keeps a shorter one whole", () => {
  const long = `${"a".repeat(2000)}${"b".repeat(3000)}`;
  const cut = serializeForSummary([toolResult(long)]);
  expect(cut.startsWith(`[Tool result]: ${"a".repeat(2000)}`)).toBe(true);
  expect(cut).not.toContain("b");
  expect(cut.length).toBeLessThan("[Tool result]: ".length + 2000 + 10);
  const exact = "c".repeat(2000);
  expect(serializeForSummary([toolResult(exact)])).toBe(`[Tool result]: ${exact}`);
  expect(serializeForSummary([{ role: "user", content: "hi", timestamp: 1 }, toolResult("ok")])).toBe(
    "[User]: hi\n\n[Tool result]: ok",
  );
});

test("summary serialization writes an answer's thinking, its text and its tool calls as name(key=json, ...)", () => {
  const answer = {
    role: "assistant",
    content: [
      { type: "thinking", thinking: "plan the read" },
      { type: "text", text: "Reading it." },
      { type: "toolCall", id: "c1", name: "read", arguments: { path: "a.md", limit: 10 } },
      { type: "toolCall", id: "c2", name: "ls", arguments: { path: ".", all: true } },
    ],
    stopReason: "toolUse",
  } as unknown as Message;
  expect(serializeForSummary([answer])).toBe(
    '[Assistant thinking]: plan the read\n\n[Assistant]: Reading it.\n\n[Assistant tool calls]: read(path="a.md", limit=10); ls(path=".", all=true)',
  );
});

test("summary serialization cuts every tool result in the range, and a result of several parts as one text", () => {
  // Break 28C: the test above has one result of one part; cutting only the first long result, or
  // each part on its own, passed it.
  const lines = serializeForSummary([
    toolResult(`${"a".repeat(2000)}${"x".repeat(1000)}`),
    { role: "user", content: "next", timestamp: 1 },
    toolResult(`${"b".repeat(2000)}${"y".repeat(1000)}`),
    {
      role: "toolResult",
      toolCallId: "c2",
      toolName: "read",
      content: [
        { type: "text", text: "c".repeat(1500) },
        { type: "text", text: "d".repeat(1500) },
      ],
      isError: false,
      timestamp: 1,
    },
  ]).split("\n\n");
  expect(lines).toHaveLength(4);
  expect(lines[0]!.startsWith(`[Tool result]: ${"a".repeat(2000)}`)).toBe(true);
  expect(lines[2]!.startsWith(`[Tool result]: ${"b".repeat(2000)}`)).toBe(true);
  // The parts are one text (joined by a newline), cut as one at 2,000 characters.
  expect(lines[3]!.startsWith(`[Tool result]: ${"c".repeat(1500)}\n${"d".repeat(499)}`)).toBe(true);
  for (const line of [lines[0]!, lines[2]!, lines[3]!]) {
    expect(line).not.toMatch(/[xy]/);
    expect(line.length).toBeLessThan("[Tool result]: ".length + 2000 + 10);
  }
});

test("summary serialization writes every part of a user message and every block of an answer, in order (draw 32b)", () => {
  // Draw 32b: the tests above had a user message of one string and an answer of one thinking and one
  // text block; keeping only a user message's first part, or an answer's first text and thinking
  // block, passed them.
  const user = {
    role: "user",
    content: [
      { type: "text", text: "look at" },
      { type: "image", data: "AAAA", mimeType: "image/png" },
      { type: "text", text: "this one" },
    ],
    timestamp: 1,
  } as unknown as Message;
  const answer = {
    role: "assistant",
    content: [
      { type: "thinking", thinking: "first thought" },
      { type: "text", text: "first text" },
      { type: "thinking", thinking: "second thought" },
      { type: "text", text: "second text" },
    ],
    stopReason: "stop",
  } as unknown as Message;
  expect(serializeForSummary([user, answer]).split("\n\n")).toEqual([
    "[User]: look at\n[image]\nthis one",
    "[Assistant thinking]: first thought",
    "[Assistant]: first text",
    "[Assistant thinking]: second thought",
    "[Assistant]: second text",
  ]);
});
