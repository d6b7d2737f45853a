/**
 * `Harness.usage()` (spec §8.6): "sums every conversation's document into the Session total", the
 * `tools` ledger as well as `models`, and every conversation, those a reopened engine has not loaded
 * too. (Reading 23d: only `models` of two loaded conversations were summed.)
 */
import { fauxToolCall, type Usage } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { expect, test } from "vitest";
import { textResult } from "../../../worker/agent/tools/contract.ts";
import { DOC, defineTool } from "../../../worker/index.ts";
import { callsThenAnswer, open, reopen } from "./fixtures.ts";

const spent = (tokens: number): Usage => ({
  input: tokens,
  output: 1,
  cacheRead: 0,
  cacheWrite: 0,
  totalTokens: tokens + 1,
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
});

test("Harness.usage() sums models and tools over every conversation, those not loaded included", async () => {
  const summarize = defineTool({
    name: "summarize",
    description: "Summarize with a model of its own",
    parameters: Type.Object({ tokens: Type.Number() }),
    execute: async (args) => ({ ...textResult("summary"), usage: spent(args.tokens) }),
  });
  const options = { tools: [summarize] };
  const { h, root, faux, store } = await open(
    callsThenAnswer(fauxToolCall("summarize", { tokens: 10 }, { id: "call-1" })),
    options,
  );
  const other = await h.createConversation({ ownership: { kind: "ownerless" } });
  await (await root.submit({ type: "input", content: "one" })).wait();
  await (await other.submit({ type: "input", content: "two" })).wait();
  const own = async (id: number) =>
    (await h.doc(id, DOC.usage)) as unknown as {
      models: Record<string, Usage>;
      tools: Record<string, Usage>;
    };
  const [a, b] = [await own(root.id), await own(other.id)];
  // Both ran the tool once: 11 tokens each in their own tools ledger.
  expect([a.tools["summarize"]?.totalTokens, b.tools["summarize"]?.totalTokens]).toEqual([11, 11]);
  const model = `${faux.ref.provider}/${faux.ref.modelId}`;
  const expected = {
    models: model,
    modelTokens: a.models[model]!.totalTokens + b.models[model]!.totalTokens,
    toolTokens: 22,
  };
  const totalOf = (u: { models: Record<string, Usage>; tools: Record<string, Usage> }) => ({
    models: Object.keys(u.models).join(),
    modelTokens: u.models[model]?.totalTokens,
    toolTokens: u.tools["summarize"]?.totalTokens,
  });
  expect(totalOf(await h.usage())).toEqual(expected);
  // A reopened engine that has loaded neither conversation sums the same.
  const again = await reopen(store, { models: faux.models, defaultModel: faux.ref, ...options });
  expect(totalOf(await again.usage())).toEqual(expected);
});
