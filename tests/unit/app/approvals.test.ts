/**
 * Tool approval through the engine service (worker/app/engine-service.ts `approvals`,
 * worker/app/tool-policies.ts) on the memory store: the app's defaults (read-only tools free, the
 * rest ask first), a policy set app-wide and per conversation (one commit each, bad values refused
 * before a write), and a decision from two tabs at once: the first wins, the other is told so.
 */
import { fauxToolCall } from "@mariozechner/pi-ai";
import { afterAll, expect, test } from "vitest";
import { createRegistry } from "../../../worker/agent/extensions/registry.ts";
import { AgentHarness } from "../../../worker/agent/harness.ts";
import { builtinToolsExtension } from "../../../worker/agent/tools/builtin/index.ts";
import { HarnessEngine } from "../../../worker/app/engine-service.ts";
import { approvalSettings } from "../../../worker/app/tool-policies.ts";
import { DOC, type LiveState } from "../../../worker/index.ts";
import { PROTOCOL_VERSION } from "../../../worker/protocol/index.ts";
import { fauxAgentModel, memoryStore, until } from "../../../worker/testing.ts";
import { callsThenAnswer, diagnosticsOf, toolResults } from "../agent/fixtures.ts";

const faux = fauxAgentModel(
  callsThenAnswer(fauxToolCall("write", { path: "a.md", content: "hi" }, { id: "w1" })),
);
afterAll(() => faux.unregister());

async function engine() {
  const extensions = createRegistry();
  extensions.install(builtinToolsExtension);
  let opened: AgentHarness | undefined;
  const harness = await AgentHarness.open(await memoryStore(), {
    extensions,
    models: faux.models,
    defaultModel: faux.ref,
    settings: approvalSettings(
      () => ({}),
      () => opened,
      { defaults: "ask" },
    ),
  });
  opened = harness;
  await harness.root();
  const service = new HarnessEngine({ harness: async () => harness, build: "test" });
  await service.hello({ tabId: "a", protocol: PROTOCOL_VERSION });
  await service.hello({ tabId: "b", protocol: PROTOCOL_VERSION });
  return { harness, a: service.tab("a"), b: service.tab("b") };
}

test("the app's defaults: read-only tools run freely, writing and running code ask first", async () => {
  const { a } = await engine();
  const byName = Object.fromEntries((await a.approvals.policies()).map((p) => [p.name, p.effective]));
  expect(byName).toMatchObject({ read: "allow", ls: "allow", write: "ask", edit: "ask", codemode: "ask" });
});

test("a policy set app-wide and per conversation: the conversation's wins there only; null goes back", async () => {
  const { harness, a } = await engine();
  const other = await a.conversations.create("other");
  await a.approvals.setPolicy("write", "never");
  await a.approvals.setPolicy("write", "allow", 1);
  const write = async (c?: number) => (await a.approvals.policies(c)).find((p) => p.name === "write")!;
  expect(await write(1)).toMatchObject({
    default: "ask",
    app: "never",
    conversation: "allow",
    effective: "allow",
  });
  expect(await write(other)).toMatchObject({ app: "never", effective: "never" });
  await a.approvals.setPolicy("write", null);
  await a.approvals.setPolicy("write", null, 1);
  expect(await write(1)).toEqual({
    name: "write",
    label: expect.any(String),
    readOnly: false,
    default: "ask",
    effective: "ask",
  });
  const before = harness.docNow(1, DOC.agent);
  await expect(a.approvals.setPolicy("write", "sometimes" as never, 1)).rejects.toThrow(TypeError);
  expect(harness.docNow(1, DOC.agent)).toEqual(before);
});

test("two tabs decide at once: the first wins, the second is told it was already decided; the denial is the result", async () => {
  const { harness, a, b } = await engine();
  await a.run.submit(1, { text: "write it", requestId: "r1" });
  const waiting = () =>
    ((harness.docNow(1, DOC.live) as LiveState | undefined)?.tools ?? []).find(
      (s) => s.status === "awaiting_approval",
    );
  await until(() => waiting() !== undefined, { what: "the write waits for approval" });
  const taskId = waiting()!.taskId!;
  const [first, second] = await Promise.all([
    a.approvals.decide(1, { taskId, decision: "deny", reason: "not now", requestId: "tab-a" }),
    b.approvals.decide(1, { taskId, decision: "approve", requestId: "tab-b" }),
  ]);
  expect(first).toEqual({ status: "decided", decision: "deny" });
  expect(second).toMatchObject({ status: "already_decided", decision: "deny" });
  await harness.waitForIdle();
  const root = await harness.root();
  const [result] = await toolResults(root);
  expect(diagnosticsOf(result!).map((d) => d.code)).toEqual(["denied"]);
  await expect(a.approvals.decide(99, { taskId, decision: "approve", requestId: "x" })).rejects.toMatchObject(
    {
      name: "UnknownConversation",
    },
  );
});
