/**
 * When a tool's onAbort hooks run (spec §8.4): only for an explicit abort of the call. A host close
 * and the unsafe recovery that follows it are not an abort; an abort while beforeTool still decides
 * runs onAbort once, before any execution.
 */
import { fauxToolCall } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { expect, test } from "vitest";
import { defineTool, textResult } from "../../worker/index.ts";
import { deferred, memoryStore } from "../../worker/testing.ts";
import {
  callsThenAnswer,
  diagnosticsOf,
  gatedTool,
  itemTool,
  messageOf,
  open,
  reopen,
  textOf,
  toolResults,
} from "./agent-fixtures.ts";
import { settle } from "./core-fixtures.ts";

test("a host close and the unsafe recovery after it never run onAbort: the call ends interrupted, its task failed", async () => {
  const aborts: string[] = [];
  const hooks = { onAbort: [(call: { name: string }) => void aborts.push(call.name)] };
  const held = itemTool({ holdFirst: true, replay: "unsafe" });
  const respond = callsThenAnswer(fauxToolCall("apply", { item: "x" }, { id: "call-1" }));
  const { h, root, store, faux } = await open(respond, { tools: [held.tool], hooks });
  await root.submit({ type: "input", content: "go" });
  await held.started.promise;
  const image = store.image();
  await h.close();
  expect(aborts).toEqual([]);
  const h2 = await reopen(await memoryStore(image), {
    models: faux.models,
    defaultModel: faux.ref,
    tools: [itemTool({ replay: "unsafe" }).tool],
    hooks,
  });
  const root2 = await h2.root();
  await root2.waitForIdle();
  expect(aborts).toEqual([]);
  const [result] = await toolResults(root2);
  expect(diagnosticsOf(result!).map((d) => d.code)).toEqual(["interrupted"]);
  const [tool] = await h2.tasks({ kind: "pi.tool" });
  expect(tool?.state).toMatchObject({ status: "terminal", outcome: { status: "failed" } });
});

test("an abort while beforeTool decides runs onAbort once, with an empty result, and never executes the tool", async () => {
  const aborts: Array<{ name: string; text: string }> = [];
  const inBeforeTool = deferred();
  const release = deferred();
  const gate = gatedTool("hold");
  let executed = false;
  void gate.started.promise.then(() => {
    executed = true;
  });
  const { root } = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "c1" })), {
    tools: [gate.tool],
    hooks: {
      beforeTool: [
        async () => {
          inBeforeTool.resolve();
          await release.promise;
          return undefined;
        },
      ],
      onAbort: [
        (call, result) =>
          void aborts.push({
            name: call.name,
            text: result.content.map((b) => ("text" in b ? b.text : "")).join(""),
          }),
      ],
    },
  });
  const input = await root.submit({ type: "input", content: "go" });
  await inBeforeTool.promise;
  const aborting = root.abort();
  await settle();
  release.resolve();
  await aborting;
  expect(await input.wait()).toEqual({ status: "unanswered", reason: "aborted" });
  expect(aborts).toEqual([{ name: "hold", text: "" }]);
  expect(executed).toBe(false);
  const [result] = await toolResults(root);
  expect(diagnosticsOf(result!).map((d) => d.code)).toContain("aborted");
});

test("onAbort's replacement content is bounded by the tool's own limits, with the harness diagnostics last", async () => {
  const started = deferred();
  const tool = defineTool({
    name: "tail",
    description: "Works until aborted",
    parameters: Type.Object({}),
    outputLimits: { maxLines: 2, retain: "tail" },
    async execute(_args, api) {
      started.resolve();
      await new Promise((_, reject) => api.signal.addEventListener("abort", () => reject(api.signal.reason)));
      return textResult("never");
    },
  });
  const { root } = await open(callsThenAnswer(fauxToolCall("tail", {}, { id: "c1" })), {
    tools: [tool],
    hooks: { onAbort: [() => textResult("one\ntwo\nthree\nfour")] },
  });
  const input = await root.submit({ type: "input", content: "go" });
  await started.promise;
  await root.abort();
  expect((await input.wait()).status).toBe("unanswered");
  const [result] = await toolResults(root);
  const codes = diagnosticsOf(result!).map((d) => d.code);
  expect(codes.at(-1)).toBe("truncated");
  expect(codes).toContain("aborted");
  const text = textOf(messageOf(result!));
  expect(text.startsWith("three\nfour")).toBe(true);
  expect(text).not.toContain("one\ntwo");
});
