/**
 * The whole loop on the built-in tools: an input, one round calling `ls` on the workspace, and the
 * answer; the transcript holds each step in order and the submission settles on the answer.
 */
import { fauxAssistantMessage, fauxToolCall } from "@mariozechner/pi-ai";
import { expect, test } from "vitest";
import { builtinTools, MemoryFs, workspaceEnv } from "../../../worker/index.ts";
import { messageOf, open, textOf, transcript } from "./fixtures.ts";

test("smoke: input, a tool round, an answer", async () => {
  const fs = new MemoryFs({ "a.txt": "hello" });
  const { root, faux } = await open(
    (req) =>
      req.messages.some((m) => m.role === "toolResult")
        ? fauxAssistantMessage("there is one file")
        : fauxAssistantMessage([fauxToolCall("ls", { path: "." }, { id: "call-1" })], {
            stopReason: "toolUse",
          }),
    { tools: builtinTools, fs, env: workspaceEnv(fs) },
  );
  const settled = await (await root.submit({ type: "input", content: "list the files" })).wait();
  const entries = await transcript(root);
  expect(entries.map((e) => [e.kind, messageOf(e).role])).toEqual([
    ["pi.user", "user"],
    ["pi.assistant", "assistant"],
    ["pi.tool-result", "toolResult"],
    ["pi.assistant", "assistant"],
  ]);
  expect(messageOf(entries[2]!)).toMatchObject({ toolCallId: "call-1", toolName: "ls", isError: false });
  expect(textOf(messageOf(entries[2]!))).toContain("a.txt");
  expect(textOf(messageOf(entries[3]!))).toBe("there is one file");
  expect(settled).toEqual({ status: "done", answer: entries[3]!.id, entry: entries[0]!.id });
  // The model saw the tool's result before answering.
  expect(faux.requests.map((r) => r.messages.map((m) => m.role))).toEqual([
    ["user"],
    ["user", "assistant", "toolResult"],
  ]);
});
