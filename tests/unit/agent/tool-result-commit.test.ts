/**
 * A tool's result commit (spec §8.4): one commit appends one `pi.tool-result` entry with the whole
 * message shape and `data: { diagnostics }`, marks the call's slot `done` with that entry, and makes
 * the task terminal `completed` with `{ entryId, control }`; an `isError` result still completes.
 * Read commit by commit, so "in the same commit" is shown, not inferred from the end state.
 */
import { fauxToolCall } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { expect, test } from "vitest";
import {
  type ChangeSet,
  DOC,
  defineTool,
  type EntryRecord,
  type LiveState,
  type TaskRecord,
} from "../../../worker/index.ts";
import { callsThenAnswer, messageOf, open } from "./fixtures.ts";

test("the result commit appends one tool-result entry, marks the slot done with it, and completes with { entryId, control }; an isError result completes too", async () => {
  const ok = defineTool({
    name: "ok",
    description: "ok",
    parameters: Type.Object({}),
    executionMode: "sequential",
    execute: async () => ({
      content: [{ type: "text", text: "fine" }],
      details: { rows: 2 },
      control: { addTools: ["extra"] },
    }),
  });
  const soft = defineTool({
    name: "soft",
    description: "soft error",
    parameters: Type.Object({}),
    execute: async () => ({ content: [{ type: "text", text: "not quite" }], isError: true }),
  });
  const { h, root } = await open(
    callsThenAnswer(fauxToolCall("ok", {}, { id: "c-ok" }), fauxToolCall("soft", {}, { id: "c-soft" })),
    { tools: [ok, soft] },
  );
  const commits: ChangeSet[] = [];
  h.subscribe((change) => {
    commits.push(change);
  });
  expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");

  for (const [callId, name, isError, control] of [
    ["c-ok", "ok", false, { addTools: ["extra"] }],
    ["c-soft", "soft", true, undefined],
  ] as const) {
    const isResult = (e: EntryRecord) =>
      e.kind === "pi.tool-result" && (messageOf(e) as { toolCallId?: string }).toolCallId === callId;
    const withResult = commits.filter((c) => c.entries.some(isResult));
    // One entry for the call, in one commit.
    expect(withResult, callId).toHaveLength(1);
    const commit = withResult[0]!;
    const entry = commit.entries.find(isResult)!;
    const message = messageOf(entry) as unknown as Record<string, unknown>;
    expect(message).toMatchObject({
      role: "toolResult",
      toolCallId: callId,
      toolName: name,
      content: [{ type: "text", text: isError ? "not quite" : "fine" }],
      isError,
    });
    if (!isError) expect(message.details).toEqual({ rows: 2 });
    expect(typeof message.durationMs, callId).toBe("number");
    expect(typeof message.timestamp, callId).toBe("number");
    expect(entry.data).toEqual({ diagnostics: [] });
    // The same commit marks the slot done with this entry ...
    const live = commit.docs.find((d) => d.name === DOC.live && d.conversationId === root.id)?.value as
      | LiveState
      | undefined;
    expect(
      live?.tools?.find((s) => s.callId === callId),
      callId,
    ).toMatchObject({
      status: "done",
      entry: entry.id,
    });
    // ... and makes the tool task terminal completed with { entryId, control }.
    const task = commit.tasks.find(
      (t: TaskRecord) => t.kind === "pi.tool" && (t.input as { callId: string }).callId === callId,
    );
    expect(task?.state, callId).toMatchObject({
      status: "terminal",
      outcome: { status: "completed", result: { entryId: entry.id } },
    });
    const result = (task!.state as { outcome: { result: { control?: unknown } } }).outcome.result;
    expect(result.control, callId).toEqual(control);
  }
});
