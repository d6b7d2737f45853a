/**
 * Usage roll-ups (issue 13 item 6, spec §8.6, §12): per conversation (per provider/model and per
 * tool) and for the whole store, a subagent's spend counted once, under the child. The parent's own
 * pi.usage holds only its own requests (the subagent tool reports no usage of the child's); the
 * parent's roll-up shows the child's share apart; the store's total counts every conversation once.
 */
import { fauxAssistantMessage, fauxToolCall, type Usage } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { afterEach, expect, test } from "vitest";
import { textResult } from "../../../worker/agent/tools/contract.ts";
import {
  AgentHarness,
  createModelResolver,
  createSubagentTool,
  defineTool,
  type EntryRecord,
  sumUsage,
  type UsageState,
} from "../../../worker/index.ts";
import { type FauxAgentModel, fauxAgentModel, memoryStore } from "../../../worker/testing.ts";

let faux: FauxAgentModel | undefined;
let harness: AgentHarness | undefined;
afterEach(async () => {
  await harness?.close();
  faux?.unregister();
});

const tokens = (u: UsageState) =>
  [...Object.values(u.models), ...Object.values(u.tools)].reduce((n, x) => n + x.totalTokens, 0);
/** What a conversation's assistant entries spent, read from the entries themselves. */
const spent = (entries: EntryRecord[]) =>
  entries
    .filter((e) => e.kind === "pi.assistant")
    .reduce((n, e) => n + (e.model as unknown as Array<{ usage: Usage }>)[0]!.usage.totalTokens, 0);

test("a parent with a subagent (which has its own subagent) reports each child's tokens once, under the child", async () => {
  faux = fauxAgentModel((req) => {
    const first = req.messages.find((m) => m.role === "user");
    const text = first?.role === "user" && typeof first.content === "string" ? first.content : "";
    const answered = req.messages.some((m) => m.role === "toolResult");
    if (text === "grandchild task") return fauxAssistantMessage("grandchild says hi");
    const next = text === "child task" ? "grandchild task" : "child task";
    if (answered) return fauxAssistantMessage(`${text || "parent"}: done`);
    return fauxAssistantMessage([fauxToolCall("subagent", { task: next }, { id: `sub-${next}` })], {
      stopReason: "toolUse",
    });
  });
  harness = await AgentHarness.open(await memoryStore(), {
    models: faux.models,
    defaultModel: faux.ref,
    tools: [createSubagentTool()],
  });
  const h = harness;
  const root = await h.root();
  expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
  await h.waitForIdle();
  const [child, grandchild] = h.conversationRecords().filter((c) => c.owner);
  expect(h.conversationRecord(grandchild!.id)!.owner!.conversationId).toBe(child!.id);

  const parentTokens = spent(await root.entries());
  const childTokens = spent(await h.entries(child!.id));
  const grandchildTokens = spent(await h.entries(grandchild!.id));
  expect(Math.min(parentTokens, childTokens, grandchildTokens)).toBeGreaterThan(0);

  const rollup = await h.conversationUsage(root.id);
  expect(rollup.own.tools).toEqual({});
  expect(tokens(rollup.own)).toBe(parentTokens);
  expect(rollup.children).toEqual([child!.id, grandchild!.id]);
  expect(tokens(rollup.childrenUsage)).toBe(childTokens + grandchildTokens);
  expect(tokens(rollup.total)).toBe(parentTokens + childTokens + grandchildTokens);
  // Per provider/model: one model here, so the total's one row is the sum.
  expect(Object.keys(rollup.total.models)).toEqual([`${faux.ref.provider}/${faux.ref.modelId}`]);

  const childRollup = await h.conversationUsage(child!.id);
  expect(tokens(childRollup.own)).toBe(childTokens);
  expect(childRollup.children).toEqual([grandchild!.id]);
  expect(tokens(childRollup.total)).toBe(childTokens + grandchildTokens);

  // The whole store: every conversation once.
  expect(tokens(await h.usage())).toBe(parentTokens + childTokens + grandchildTokens);
  expect(await h.usage()).toEqual(rollup.total);
});

test("sumUsage adds per provider/model and per tool", () => {
  const u = (n: number): Usage => ({
    input: n,
    output: n,
    cacheRead: 0,
    cacheWrite: 0,
    totalTokens: 2 * n,
    cost: { input: n, output: n, cacheRead: 0, cacheWrite: 0, total: 2 * n },
  });
  const sum = sumUsage([
    { models: { "a/x": u(1) }, tools: { t: u(2) } },
    undefined,
    { models: { "a/x": u(3), "b/y": u(4) }, tools: {} },
  ]);
  expect(sum).toEqual({ models: { "a/x": u(4), "b/y": u(4) }, tools: { t: u(2) } });
});

test("a conversation's roll-up has a row per provider/model and per tool; a subagent's rows stay under the child", async () => {
  const spent = (tokens: number): Usage => ({
    input: tokens,
    output: 0,
    cacheRead: 0,
    cacheWrite: 0,
    totalTokens: tokens,
    cost: { input: tokens / 1000, output: 0, cacheRead: 0, cacheWrite: 0, total: tokens / 1000 },
  });
  const summarize = defineTool({
    name: "summarize",
    description: "Summarize with a model of its own",
    parameters: Type.Object({ tokens: Type.Number() }),
    execute: async (args) => ({ ...textResult("summary"), usage: spent(args.tokens) }),
  });
  faux = fauxAgentModel((req) => {
    const first = req.messages.find((m) => m.role === "user");
    const text = first?.role === "user" && typeof first.content === "string" ? first.content : "";
    const lastUser = [...req.messages].reverse().find((m) => m.role === "user");
    const input = lastUser?.role === "user" && typeof lastUser.content === "string" ? lastUser.content : "";
    if (text === "child task") return fauxAssistantMessage("child done");
    if (req.messages.at(-1)?.role === "toolResult") return fauxAssistantMessage(`${input}: done`);
    const call =
      input === "one"
        ? fauxToolCall("summarize", { tokens: 10 }, { id: "sum-1" })
        : fauxToolCall("subagent", { task: "child task" }, { id: "sub-1" });
    return fauxAssistantMessage([call], { stopReason: "toolUse" });
  });
  const other = { ...faux.model, id: "faux-2" };
  harness = await AgentHarness.open(await memoryStore(), {
    models: createModelResolver({ extra: [faux.model, other] }),
    defaultModel: faux.ref,
    tools: [summarize, createSubagentTool()],
  });
  const h = harness;
  const root = await h.root();
  expect((await (await root.submit({ type: "input", content: "one" })).wait()).status).toBe("done");
  await root.configure({ model: { provider: other.provider, modelId: other.id } });
  expect((await (await root.submit({ type: "input", content: "two" })).wait()).status).toBe("done");
  await h.waitForIdle();
  const [child] = h.conversationRecords().filter((c) => c.owner);

  /** What a conversation's answers spent per `provider/model`, read from the entries themselves. */
  const perModel = (entries: EntryRecord[]) => {
    const out: Record<string, number> = {};
    for (const e of entries.filter((x) => x.kind === "pi.assistant")) {
      const m = (e.model as unknown as Array<{ provider: string; model: string; usage: Usage }>)[0]!;
      const key = `${m.provider}/${m.model}`;
      out[key] = (out[key] ?? 0) + m.usage.totalTokens;
    }
    return out;
  };
  const tokensOf = (rows: Record<string, Usage>) =>
    Object.fromEntries(Object.entries(rows).map(([k, u]) => [k, u.totalTokens]));
  const parentSpent = perModel(await root.entries());
  const childSpent = perModel(await h.entries(child!.id));
  // Two answers on each model in the parent; the child ran on the parent's model then.
  expect(Object.keys(parentSpent).sort()).toEqual(["faux/faux-1", "faux/faux-2"]);
  expect(Object.keys(childSpent)).toEqual(["faux/faux-2"]);
  expect(Math.min(...Object.values(parentSpent), ...Object.values(childSpent))).toBeGreaterThan(0);

  const rollup = await h.conversationUsage(root.id);
  expect(tokensOf(rollup.own.models)).toEqual(parentSpent);
  expect(rollup.own.tools).toEqual({ summarize: spent(10) });
  expect(tokensOf(rollup.childrenUsage.models)).toEqual(childSpent);
  expect(rollup.childrenUsage.tools).toEqual({});
  expect(tokensOf(rollup.total.models)).toEqual({
    "faux/faux-1": parentSpent["faux/faux-1"],
    "faux/faux-2": parentSpent["faux/faux-2"]! + childSpent["faux/faux-2"]!,
  });
  expect(rollup.total.tools).toEqual({ summarize: spent(10) });
});
