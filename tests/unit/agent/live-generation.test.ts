/**
 * `pi.live.generation` names the generation that is answering (the tab's "answering" state and the
 * task panel read it): after a tool round hands the run to the next generation, that generation is
 * named from the commit that starts it, before its first partial answer, as the run's first
 * generation is.
 */
import { fauxAssistantMessage, fauxToolCall } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { expect, test } from "vitest";
import { DOC, defineTool, type LiveState, textResult } from "../../../worker/index.ts";
import { deferred, until } from "../../../worker/testing.ts";
import { open } from "./fixtures.ts";

test("the generation after a tool round is named in pi.live before its first partial, as the first one is", async () => {
  const tool = defineTool({
    name: "look",
    description: "Look",
    parameters: Type.Object({}),
    execute: async () => textResult("seen"),
  });
  // Each request waits at its gate before any part of an answer streams.
  const gates = [deferred(), deferred()];
  const asked = [deferred(), deferred()];
  const { h, root } = await open(
    async (_req, n) => {
      asked[n - 1]!.resolve();
      await gates[n - 1]!.promise;
      return n === 1
        ? fauxAssistantMessage([fauxToolCall("look", {}, { id: "call-1" })], { stopReason: "toolUse" })
        : fauxAssistantMessage("done");
    },
    { tools: [tool] },
  );
  const live = () => (h.docNow<LiveState & Record<string, never>>(root.id, DOC.live) ?? {}) as LiveState;
  const running = async () =>
    (await h.tasks({ kind: "pi.generation" })).filter((t) => t.state.status !== "terminal").map((t) => t.id);

  const submission = await root.submit({ type: "input", content: "go" });
  await asked[0]!.promise;
  const [first] = await running();
  expect(live().generation).toMatchObject({ taskId: first, attempt: 1 });
  expect(live().generation?.message).toBeUndefined();

  gates[0]!.resolve();
  await asked[1]!.promise;
  const [second] = await running();
  expect(second).toBeDefined();
  expect(second).not.toBe(first);
  await until(() => live().run?.taskId === second, { what: "the run handed to the second generation" });
  expect(live().generation).toMatchObject({ taskId: second, attempt: 1 });
  expect(live().generation?.message).toBeUndefined();

  gates[1]!.resolve();
  expect((await submission.wait()).status).toBe("done");
  expect(live().generation).toBeUndefined();
});
