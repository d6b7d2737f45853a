/**
 * Usage roll-ups (issue 13 item 6, spec §8.6, §12): per conversation (per provider/model and per
 * tool) and for the whole store, a subagent's spend counted once, under the child. The parent's own
 * pi.usage holds only its own requests (the subagent tool reports no usage of the child's); the
 * parent's roll-up shows the child's share apart; the store's total counts every conversation once.
 */
import { fauxAssistantMessage, fauxToolCall, type Usage } from "@mariozechner/pi-ai";
import { afterEach, expect, test } from "vitest";
import {
  AgentHarness,
  createSubagentTool,
  type EntryRecord,
  sumUsage,
  type UsageState,
} from "../../worker/index.ts";
import { type FauxAgentModel, fauxAgentModel, memoryStore } from "../../worker/testing.ts";

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
