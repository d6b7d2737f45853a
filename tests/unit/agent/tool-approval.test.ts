/**
 * Tool approval (worker/agent/tools/approval.ts, worker/agent/tools/task/approval.ts): the policy a
 * call runs under, the durable wait of a call that asks first, a person's decision (approve, deny
 * with a reason, the first one wins once, the same request again is answered the same), "always
 * allow this tool here", `never`, an abort while a call waits, and a restart across the wait.
 */
import { fauxAssistantMessage, fauxToolCall } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { describe, expect, test } from "vitest";
import { argumentsInWords, policyOf } from "../../../worker/agent/tools/approval.ts";
import { defineTool, textResult } from "../../../worker/index.ts";
import { memoryStore, until } from "../../../worker/testing.ts";
import {
  callsThenAnswer,
  diagnosticsOf,
  liveOf,
  messageOf,
  open,
  reopen,
  textOf,
  toolResults,
} from "./fixtures.ts";

const ask = { approval: {} } as const;

/** A `write`-like tool that counts its runs. */
function countingTool(name = "note", options: { readOnly?: boolean } = {}) {
  const runs: string[] = [];
  const tool = defineTool({
    name,
    description: "Write a note",
    parameters: Type.Object({ text: Type.String() }),
    ...(options.readOnly ? { readOnly: true } : {}),
    async execute(args) {
      runs.push(args.text);
      return textResult(`wrote ${args.text}`);
    },
  });
  return { tool, runs };
}

const awaiting = (h: Parameters<typeof liveOf>[0]) =>
  (liveOf(h).tools ?? []).find((s) => s.status === "awaiting_approval");

/** The slot of the call waiting for approval, once there is one. */
async function waitingCall(h: Parameters<typeof liveOf>[0], what: string) {
  await until(() => awaiting(h) !== undefined, { what });
  return awaiting(h)!;
}

describe("the policy", () => {
  const tool = { name: "note" };
  test("without approval settings every call runs freely (the specification's harness)", () => {
    expect(policyOf({ approval: undefined }, {}, tool)).toBe("allow");
    expect(policyOf({ approval: undefined }, { toolPolicies: { note: "never" } }, tool)).toBe("allow");
  });
  test("read-only tools run freely, any other asks first, by default", () => {
    expect(policyOf(ask, {}, { name: "read", readOnly: true })).toBe("allow");
    expect(policyOf(ask, {}, tool)).toBe("ask");
    expect(policyOf({ approval: { fallback: "never" } }, {}, tool)).toBe("never");
  });
  test("the settings' tool policy overrides the default, and the conversation's overrides both", () => {
    const settings = { approval: { tools: { note: "never" as const, read: "ask" as const } } };
    expect(policyOf(settings, {}, tool)).toBe("never");
    expect(policyOf(settings, {}, { name: "read", readOnly: true })).toBe("ask");
    expect(policyOf(settings, { toolPolicies: { note: "allow" } }, tool)).toBe("allow");
  });
  test("the arguments in words: one line per argument, long values and many lines cut", () => {
    expect(argumentsInWords({ path: "a.md", n: 2 })).toEqual(["path: a.md", "n: 2"]);
    expect(argumentsInWords({})).toEqual(["(no arguments)"]);
    expect(argumentsInWords({ text: "x".repeat(1000) })[0]).toHaveLength(300);
    const many = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`k${i}`, i]));
    expect(argumentsInWords(many).at(-1)).toBe("… and 9 more");
    expect(argumentsInWords({ text: "1\n2\n3\n4\n5\n6" })[0]).toBe("text: 1\n2\n3\n4\n… (2 more lines)");
  });
});

describe("a call that asks first", () => {
  test("waits durably with its arguments in words: nothing runs, the run stays busy", async () => {
    const { tool, runs } = countingTool();
    const { h, root } = await open(callsThenAnswer(fauxToolCall("note", { text: "hi" }, { id: "c1" })), {
      tools: [tool],
      settings: ask,
    });
    await root.submit({ type: "input", content: "go" });
    const slot = await waitingCall(h, "the call awaits approval");
    expect(slot.approval?.summary).toEqual(["text: hi"]);
    expect(slot.approval?.decision).toBeUndefined();
    const [task] = await h.tasks({ kind: "pi.tool" });
    expect(task?.state).toMatchObject({ status: "running", checkpoint: { phase: "approval" } });
    expect(runs).toEqual([]);
    expect(await toolResults(root)).toEqual([]);
  });

  test("approved: the tool runs once; a second decision is refused as already decided, the same request answered the same", async () => {
    const { tool, runs } = countingTool();
    const { h, root } = await open(callsThenAnswer(fauxToolCall("note", { text: "hi" }, { id: "c1" })), {
      tools: [tool],
      settings: ask,
    });
    await root.submit({ type: "input", content: "go" });
    const slot = await waitingCall(h, "the call awaits approval");
    const taskId = slot.taskId!;
    const first = await h.decideApproval(1, { taskId, decision: "approve", requestId: "r1" });
    expect(first).toEqual({ status: "decided", decision: "approve" });
    const second = await h.decideApproval(1, { taskId, decision: "deny", requestId: "r2" });
    expect(second).toMatchObject({ status: "already_decided", decision: "approve" });
    expect(await h.decideApproval(1, { taskId, decision: "approve", requestId: "r1" })).toEqual(first);
    await root.waitForIdle();
    expect(runs).toEqual(["hi"]);
    const [result] = await toolResults(root);
    expect(textOf(messageOf(result!))).toBe("wrote hi");
    // The result keeps the wait and the decision beside its diagnostics (a departure from spec §8.1's
    // "{diagnostics} only", written in tests/NOT-APPLICABLE.md), so they outlive the pi.live slot.
    const data = result!.data as { diagnostics: unknown[]; approval?: Record<string, unknown> };
    expect(Object.keys(data).sort()).toEqual(["approval", "diagnostics"]);
    expect(data.diagnostics).toEqual([]);
    expect(data.approval).toEqual({
      waitedSince: slot.approval!.since,
      decidedAt: expect.any(Number),
      decision: "approve",
    });
    expect(data.approval!.decidedAt as number).toBeGreaterThanOrEqual(slot.approval!.since as number);
    // Once the run ended the call waits for nothing: a late decision writes nothing.
    expect(await h.decideApproval(1, { taskId, decision: "deny", requestId: "r3" })).toEqual({
      status: "not_waiting",
    });
  });

  test("a call approved after its tool was taken out of the agent's tools is resolved after the wait: tool_unavailable, the tool never ran (break 28A)", async () => {
    const { tool, runs } = countingTool();
    const { h, root } = await open(callsThenAnswer(fauxToolCall("note", { text: "hi" }, { id: "c1" })), {
      tools: [tool],
      settings: ask,
    });
    // Every checkpoint phase of the tool task and every slot status, commit by commit: an unresolved
    // call commits its error result without intent, after an approval too (draw 33cC: an intent
    // committed before the tool was resolved after the wait passed this test).
    const phases: string[] = [];
    const slots: string[] = [];
    h.subscribe((change) => {
      for (const t of change.tasks)
        if (t.kind === "pi.tool" && "checkpoint" in t.state)
          phases.push((t.state.checkpoint as { phase: string }).phase);
      const live = change.docs.find((d) => d.name === "pi.live")?.value as
        | { tools?: { status: string }[] }
        | undefined;
      for (const s of live?.tools ?? []) slots.push(s.status);
    });
    const sub = await root.submit({ type: "input", content: "go" });
    const slot = await waitingCall(h, "the call awaits approval");
    // Taken out while the call waits: its task resolves the tool when it goes on, after the decision.
    await root.configure({ tools: [] });
    expect(await h.decideApproval(1, { taskId: slot.taskId!, decision: "approve", requestId: "r1" })).toEqual(
      {
        status: "decided",
        decision: "approve",
      },
    );
    expect((await sub.wait()).status).toBe("done");
    expect(runs).toEqual([]);
    const [result] = await toolResults(root);
    expect(diagnosticsOf(result!).map((d) => d.code)).toEqual(["tool_unavailable"]);
    expect(phases.length).toBeGreaterThan(0);
    expect(phases).not.toContain("execute");
    expect(slots).toContain("done");
    expect(slots).not.toContain("running");
  });

  test("denied with a reason: an error result the model reads, with the reason; the tool never ran", async () => {
    const { tool, runs } = countingTool();
    const { h, root, faux } = await open(
      callsThenAnswer(fauxToolCall("note", { text: "hi" }, { id: "c1" })),
      { tools: [tool], settings: ask },
    );
    await root.submit({ type: "input", content: "go" });
    const slot = await waitingCall(h, "the call awaits approval");
    const answer = await h.decideApproval(1, {
      taskId: slot.taskId!,
      decision: "deny",
      reason: "not in my notes folder",
      requestId: "r1",
    });
    expect(answer).toEqual({ status: "decided", decision: "deny" });
    await root.waitForIdle();
    expect(runs).toEqual([]);
    const [result] = await toolResults(root);
    expect(diagnosticsOf(result!).map((d) => d.code)).toEqual(["denied"]);
    const next = faux.requests.at(-1)!;
    const sent = next.messages.find((m) => m.role === "toolResult");
    expect(sent && textOf(sent)).toContain("their reason: not in my notes folder");
  });

  test('"always allow this tool here" is kept in the conversation\'s agent: its next call runs freely', async () => {
    const { tool, runs } = countingTool();
    const { h, root } = await open(
      (req) => {
        // Each input calls the tool once (t1, t2, ...); a tool result is answered "done".
        if (req.messages.at(-1)?.role !== "user") return fauxAssistantMessage("done");
        const n = req.messages.filter((m) => m.role === "user").length;
        return fauxAssistantMessage([fauxToolCall("note", { text: `t${n}` }, { id: `c${n}` })], {
          stopReason: "toolUse",
        });
      },
      { tools: [tool], settings: ask },
    );
    await root.submit({ type: "input", content: "go" });
    const slot = await waitingCall(h, "the call awaits approval");
    await h.decideApproval(1, { taskId: slot.taskId!, decision: "approve", always: true, requestId: "r1" });
    await root.waitForIdle();
    expect((await root.agentState()).toolPolicies).toEqual({ note: "allow" });
    await root.submit({ type: "input", content: "again" });
    await root.waitForIdle();
    expect(runs).toEqual(["t1", "t2"]);
  });

  test("never: an error result at once, nobody asked, the tool never ran", async () => {
    const { tool, runs } = countingTool();
    const { root } = await open(callsThenAnswer(fauxToolCall("note", { text: "hi" }, { id: "c1" })), {
      tools: [tool],
      settings: { approval: { tools: { note: "never" } } },
    });
    await root.submit({ type: "input", content: "go" });
    await root.waitForIdle();
    expect(runs).toEqual([]);
    const [result] = await toolResults(root);
    expect(diagnosticsOf(result!).map((d) => d.code)).toEqual(["not_allowed"]);
  });

  test("a read-only tool runs freely under the default policy", async () => {
    const { tool, runs } = countingTool("look", { readOnly: true });
    const { root } = await open(callsThenAnswer(fauxToolCall("look", { text: "x" }, { id: "c1" })), {
      tools: [tool],
      settings: ask,
    });
    await root.submit({ type: "input", content: "go" });
    await root.waitForIdle();
    expect(runs).toEqual(["x"]);
  });

  test("aborting the conversation while a call waits ends the wait: the task aborted, nothing ran, a late decision is not_waiting", async () => {
    const { tool, runs } = countingTool();
    const { h, root } = await open(callsThenAnswer(fauxToolCall("note", { text: "hi" }, { id: "c1" })), {
      tools: [tool],
      settings: ask,
    });
    await root.submit({ type: "input", content: "go" });
    const slot = await waitingCall(h, "the call awaits approval");
    await root.abort();
    await root.waitForIdle();
    const [task] = await h.tasks({ kind: "pi.tool" });
    expect(task?.state).toMatchObject({ status: "terminal", outcome: { status: "aborted" } });
    expect((await h.tasks()).filter((t) => t.state.status !== "terminal")).toEqual([]);
    const late = await h.decideApproval(1, { taskId: slot.taskId!, decision: "approve", requestId: "r1" });
    expect(late).toEqual({ status: "not_waiting" });
    expect(runs).toEqual([]);
    const [result] = await toolResults(root);
    expect(diagnosticsOf(result!).map((d) => d.code)).toContain("aborted");
  });

  test("aborting only the tool task while it waits ends it aborted too", async () => {
    const { tool, runs } = countingTool();
    const { h, root } = await open(callsThenAnswer(fauxToolCall("note", { text: "hi" }, { id: "c1" })), {
      tools: [tool],
      settings: ask,
    });
    await root.submit({ type: "input", content: "go" });
    const slot = await waitingCall(h, "the call awaits approval");
    await h.abortTask(slot.taskId!);
    await root.waitForIdle();
    const task = await h.getTask(slot.taskId!);
    expect(task?.state).toMatchObject({ status: "terminal", outcome: { status: "aborted" } });
    expect(runs).toEqual([]);
  });

  test("a restart keeps the call waiting; approved after it, the tool runs once", async () => {
    const { tool, runs } = countingTool();
    const respond = callsThenAnswer(fauxToolCall("note", { text: "hi" }, { id: "c1" }));
    const { h, root, store, faux } = await open(respond, { tools: [tool], settings: ask });
    await root.submit({ type: "input", content: "go" });
    await waitingCall(h, "the call awaits approval");
    const image = store.image();
    await h.close();
    const h2 = await reopen(await memoryStore(image), {
      models: faux.models,
      defaultModel: faux.ref,
      tools: [tool],
      settings: ask,
    });
    const root2 = await h2.root();
    const slot = await waitingCall(h2, "still awaiting after the restart");
    expect(runs).toEqual([]);
    await h2.decideApproval(1, { taskId: slot.taskId!, decision: "approve", requestId: "r1" });
    await root2.waitForIdle();
    expect(runs).toEqual(["hi"]);
  });
});
