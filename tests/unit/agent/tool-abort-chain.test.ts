/**
 * The onAbort chain over one aborted call beside a sibling (spec §8.4, §7.2; the upstream scenario
 * "chains selected hooks over durable progress without changing cancellation or sibling work"): the
 * first hook gets the aborted error result built from the slot's durable output, details and
 * diagnostics (the harness's `aborted` one included), with the abort invocation's live signal; each
 * hook sees the one before it; a control changes nothing; output never committed is not in it; the
 * stored result is what the model then reads, with no `durationMs`; the sibling is not marked.
 */
import { fauxAssistantMessage, fauxToolCall, type ToolResultMessage } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { expect, test } from "vitest";
import { defineTool, textResult } from "../../../worker/index.ts";
import { deferred, type FauxRequest, until } from "../../../worker/testing.ts";
import { diagnosticsOf, liveOf, messageOf, open, textOf, toolResults } from "./fixtures.ts";

test("onAbort chains over the call's durable output, details and diagnostics with a live signal; the sibling and the run go on (reading 24f)", async () => {
  const started = deferred();
  const work = defineTool({
    name: "work",
    description: "Works until aborted",
    parameters: Type.Object({}),
    async execute(_args, api) {
      api.output("durable\n");
      api.diagnostic({ severity: "info", code: "progress", message: "checkpoint" });
      await api.details({ checkpoint: 1 });
      started.resolve();
      await new Promise((_, reject) => api.signal.addEventListener("abort", () => reject(api.signal.reason)));
      return textResult("never");
    },
  });
  const siblingStarted = deferred();
  const siblingGo = deferred();
  const sibling = defineTool({
    name: "sibling",
    description: "Finishes when released",
    parameters: Type.Object({}),
    async execute() {
      siblingStarted.resolve();
      await siblingGo.promise;
      return textResult("sibling done");
    },
  });
  const hooks: string[] = [];
  const given: unknown[] = [];
  const reports: unknown[] = [];
  let seenByModel: ToolResultMessage | undefined;
  const { h, root } = await open(
    (req: FauxRequest) => {
      if (req.messages.some((m) => m.role === "toolResult")) {
        seenByModel = req.messages.find(
          (m): m is ToolResultMessage => m.role === "toolResult" && m.toolName === "work",
        );
        return fauxAssistantMessage("done");
      }
      return fauxAssistantMessage(
        [fauxToolCall("work", {}, { id: "c-work" }), fauxToolCall("sibling", {}, { id: "c-sibling" })],
        { stopReason: "toolUse" },
      );
    },
    {
      tools: [work, sibling],
      onReport: (e) => void reports.push(e),
      settings: { outputIntervalMs: 1 },
      hooks: {
        onAbort: [
          (call, result, _api, { signal }) => {
            hooks.push("first");
            given.push({ id: call.id, signal: signal.aborted, result });
            return { ...result, content: [...result.content, { type: "text", text: "|note" }] };
          },
          (_call, result) => {
            hooks.push(`second:${textOf(result as never)}`);
            return { ...result, details: { annotated: true }, control: { terminate: true } };
          },
        ],
        afterTool: [
          (call) => {
            hooks.push(`after:${call.name}`);
            return undefined;
          },
        ],
      },
    },
  );
  const input = await root.submit({ type: "input", content: "go" });
  await started.promise;
  await siblingStarted.promise;
  await until(() => liveOf(h).tools?.find((t) => t.name === "work")?.details !== undefined, {
    what: "details committed",
  });
  const slot = liveOf(h).tools!.find((t) => t.name === "work")!;
  expect(slot.output).toBe("durable\n");
  const workTask = slot.taskId!;
  const siblingTask = liveOf(h).tools!.find((t) => t.name === "sibling")!.taskId!;
  expect(await h.abortTask(workTask)).toBe("marked");
  expect((await h.waitForTask(workTask)).state).toMatchObject({ outcome: { status: "aborted" } });
  expect((await h.getTask(siblingTask))?.abortRequested ?? false).toBe(false);
  siblingGo.resolve();
  expect((await input.wait()).status).toBe("done");
  expect(hooks).toEqual(["first", "second:durable\n|note", "after:sibling"]);
  // The first hook got the error result the slot's durable progress makes, in a live invocation.
  expect(given).toEqual([
    {
      id: "c-work",
      signal: false,
      result: expect.objectContaining({
        content: [{ type: "text", text: "durable\n" }],
        isError: true,
        details: { checkpoint: 1 },
        diagnostics: [
          expect.objectContaining({ code: "progress" }),
          expect.objectContaining({ severity: "error", code: "aborted" }),
        ],
      }),
    },
  ]);
  const results = await toolResults(root);
  const stored = results.find((e) => (messageOf(e) as ToolResultMessage).toolName === "work")!;
  const message = messageOf(stored) as ToolResultMessage & { durationMs?: number };
  expect(message).toEqual(seenByModel);
  expect(message).toMatchObject({ isError: true, details: { annotated: true } });
  expect(textOf(message)).toContain("durable\n|note");
  expect(message.durationMs).toBeUndefined();
  expect(diagnosticsOf(stored).map((d) => d.code)).toEqual(["progress", "aborted"]);
  expect(liveOf(h)).toEqual({});
  expect(reports).toEqual([]);
});
