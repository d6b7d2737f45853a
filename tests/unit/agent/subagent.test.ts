/**
 * The `subagent` tool and the conversation handle under it (issue 13 item 1, spec §7.3): the child's
 * answer comes back as the call's result; the child is owned by the call's task and starts with the
 * parent's model and tools; the call's output reports the child's progress; aborting the parent
 * aborts the child bottom-up and the parent is idle only once the child is; handle operations reject
 * once the invocation ended while what they admitted stays; the background variant survives the
 * parent's abort, keeps nobody busy and ends with `abort({ background: true })`.
 */
import { fauxAssistantMessage, fauxToolCall, type Message } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { afterEach, describe, expect, test } from "vitest";
import {
  AgentHarness,
  createSubagentTool,
  defineTool,
  type EntryRecord,
  SUBAGENT_TASK,
  type TaskRecord,
  type ToolConversation,
  type ToolSubmission,
  textResult,
  type UsageState,
} from "../../../worker/index.ts";
import {
  deferred,
  type FauxAgentModel,
  type FauxRequest,
  fauxAgentModel,
  memoryStore,
  until,
} from "../../../worker/testing.ts";

const CHILD_TASK = "CHILD: find the answer";

const userText = (m: Message | undefined) =>
  m?.role === "user"
    ? typeof m.content === "string"
      ? m.content
      : m.content.map((c) => (c.type === "text" ? c.text : "")).join("")
    : "";
const lastToolResult = (req: FauxRequest) => {
  const m = req.messages.at(-1);
  return m?.role === "toolResult" ? m : undefined;
};

/** The child (first user message starts with CHILD:) optionally calls `probe`, then answers; the parent delegates. */
function responder(options: { childCallsProbe?: boolean; background?: boolean } = {}) {
  return (req: FauxRequest) => {
    const first = userText(req.messages.find((m) => m.role === "user"));
    const result = lastToolResult(req);
    if (first.startsWith("CHILD:")) {
      if (options.childCallsProbe && !req.messages.some((m) => m.role === "toolResult"))
        return fauxAssistantMessage([fauxToolCall("probe", { n: 1 }, { id: "call-probe" })], {
          stopReason: "toolUse",
        });
      return fauxAssistantMessage("the answer is 42");
    }
    const lastUser = userText(req.messages.findLast((m) => m.role === "user"));
    if (lastUser.startsWith("The background subagent"))
      return fauxAssistantMessage("noted the subagent's answer");
    if (result) {
      const text = result.content.map((c) => (c.type === "text" ? c.text : "")).join("");
      return fauxAssistantMessage(`parent heard: ${text}`);
    }
    return fauxAssistantMessage(
      [
        fauxToolCall(
          "subagent",
          { task: CHILD_TASK, ...(options.background ? { background: true } : {}) },
          { id: "call-sub" },
        ),
      ],
      { stopReason: "toolUse" },
    );
  };
}

let faux: FauxAgentModel | undefined;
let harness: AgentHarness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
  faux?.unregister();
  faux = undefined;
});

/** `probe`: the child's tool; blocks until `release` when one is given (watching its signal). */
function probeTool(gate?: { started: () => void; release: Promise<void> }) {
  return defineTool({
    name: "probe",
    description: "probe",
    parameters: Type.Object({ n: Type.Number() }),
    replay: "safe",
    execute: async (_args, api) => {
      gate?.started();
      if (gate)
        await new Promise<void>((resolve, reject) => {
          api.signal.addEventListener("abort", () => reject(api.signal.reason), { once: true });
          void gate.release.then(resolve);
        });
      return textResult("probed");
    },
  });
}

async function open(respond: ReturnType<typeof responder>, extra: ReturnType<typeof defineTool>[] = []) {
  faux = fauxAgentModel(respond);
  harness = await AgentHarness.open(await memoryStore(), {
    models: faux.models,
    defaultModel: faux.ref,
    tools: [createSubagentTool(), probeTool(), ...extra],
  });
  return harness;
}

const assistantTexts = (entries: readonly EntryRecord[]) =>
  entries.flatMap((e) =>
    e.kind === "pi.assistant"
      ? (e.model as unknown as Message[]).flatMap((m) =>
          m.role === "assistant" ? m.content.flatMap((b) => (b.type === "text" ? [b.text] : [])) : [],
        )
      : [],
  );

function childOf(h: AgentHarness, taskId: number) {
  return h.conversationRecords().find((c) => c.owner?.taskId === taskId);
}

describe("subagent", () => {
  test("returns the child's answer; the child is owned by the call and starts with the parent's agent", async () => {
    const h = await open(responder({ childCallsProbe: true }));
    const root = await h.root({ agent: { model: faux!.ref, instructions: "be brief" } });
    const settled = await (await root.submit({ type: "input", content: "delegate it" })).wait();
    expect(settled.status).toBe("done");
    await h.waitForIdle();
    const [call] = (await h.tasks({ kind: "pi.tool" })).filter((t) => t.conversationId === root.id);
    const child = childOf(h, call!.id)!;
    expect(child.owner).toEqual({ taskId: call!.id, conversationId: root.id });
    const childEntries = await h.entries(child.id);
    expect(childEntries.filter((e) => e.kind === "pi.user")).toHaveLength(1);
    expect(assistantTexts(childEntries)).toEqual(["the answer is 42"]);
    expect(await h.doc(child.id, "pi.agent")).toEqual({ model: faux!.ref, instructions: "be brief" });
    expect(assistantTexts(await root.entries())).toEqual(["parent heard: the answer is 42"]);
    // The result names the child for a UI; the call's output reported the child's progress.
    const result = (await root.entries()).find((e) => e.kind === "pi.tool-result")!;
    expect((result.model as unknown as Array<{ details?: unknown }>)[0]!.details).toEqual({
      conversationId: child.id,
    });
  });

  test("the call's output shows the child's progress while it runs", async () => {
    let started!: () => void;
    const running = new Promise<void>((r) => {
      started = r;
    });
    const release = deferred<void>();
    faux = fauxAgentModel(responder({ childCallsProbe: true }));
    harness = await AgentHarness.open(await memoryStore(), {
      models: faux.models,
      defaultModel: faux.ref,
      tools: [createSubagentTool(), probeTool({ started, release: release.promise })],
      settings: { outputIntervalMs: 1 },
    });
    const h = harness;
    const root = await h.root();
    const sub = await root.submit({ type: "input", content: "delegate it" });
    await running;
    const slotOutput = () =>
      (h.docNow<{ tools?: Array<{ name: string; output?: string }> }>(root.id, "pi.live")?.tools ?? []).find(
        (s) => s.name === "subagent",
      )?.output ?? "";
    await until(() => slotOutput().includes("→ probe"));
    expect(slotOutput()).toMatch(/^subagent in conversation \d+\n→ probe \{"n":1\}\n/);
    // The child's own run marks it working, in its pi.live, while the parent's call waits.
    const [child] = h.conversationRecords().filter((c) => c.owner?.conversationId === root.id);
    expect(h.docNow<{ run?: { inputs: number[] } }>(child!.id, "pi.live")?.run?.inputs).toHaveLength(1);
    expect(h.conversation(child!.id)!.busy).toBe(true);
    release.resolve();
    expect((await sub.wait()).status).toBe("done");
  });

  test("aborting the parent aborts the child bottom-up; the parent is idle only once the child is", async () => {
    let started!: () => void;
    const running = new Promise<void>((r) => {
      started = r;
    });
    const never = new Promise<void>(() => undefined);
    faux = fauxAgentModel(responder({ childCallsProbe: true }));
    harness = await AgentHarness.open(await memoryStore(), {
      models: faux.models,
      defaultModel: faux.ref,
      tools: [createSubagentTool(), probeTool({ started, release: never })],
    });
    const h = harness;
    const root = await h.root();
    const ended: TaskRecord[] = [];
    h.subscribe((change) => {
      for (const t of change.tasks) if (t.state.status === "terminal") ended.push(t);
    });
    const sub = await root.submit({ type: "input", content: "delegate it" });
    await running;
    await root.abort();
    // Idle from the parent means the child's work is over too.
    expect(h.inspect().tasks).toEqual([]);
    const call = ended.find((t) => t.kind === "pi.tool" && t.conversationId === root.id)!;
    const child = childOf(h, call.id)!;
    const order = ended.map((t) => `${t.conversationId === child.id ? "child" : "parent"} ${t.kind}`);
    expect(order).toEqual(["child pi.tool", "child pi.generation", "parent pi.tool", "parent pi.generation"]);
    expect(ended.every((t) => t.state.status === "terminal" && t.state.outcome.status === "aborted")).toBe(
      true,
    );
    expect((await sub.wait()).status).toBe("unanswered");
  });

  test("handle operations reject once the invocation ended; an admitted submission stays durable", async () => {
    let kept: { handle: ToolConversation; submission: ToolSubmission } | undefined;
    const leaky = defineTool({
      name: "leaky",
      description: "submits to a child and returns without waiting",
      parameters: Type.Object({}),
      replay: "safe",
      execute: async (_args, api) => {
        const id = await api.commit((tx) => tx.createConversation({ kind: "task", taskId: api.taskId }).id);
        const handle = api.conversation(id)!;
        const submission = await handle.submit({ content: "CHILD: hello", requestId: `leaky:${api.taskId}` });
        // The same request id finds the same submission.
        expect((await handle.submit({ content: "CHILD: hello", requestId: `leaky:${api.taskId}` })).id).toBe(
          submission.id,
        );
        await expect(handle.submit({ type: "write" } as never)).rejects.toThrow(/input submissions only/);
        kept = { handle, submission };
        return textResult("left it running");
      },
    });
    const h = await open(
      (req) =>
        userText(req.messages.find((m) => m.role === "user")).startsWith("CHILD:")
          ? fauxAssistantMessage("child done")
          : lastToolResult(req)
            ? fauxAssistantMessage("ok")
            : fauxAssistantMessage([fauxToolCall("leaky", {}, { id: "call-leaky" })], {
                stopReason: "toolUse",
              }),
      [leaky],
    );
    const root = await h.root();
    expect((await (await root.submit({ type: "input", content: "go" })).wait()).status).toBe("done");
    await h.waitForIdle();
    const { handle, submission } = kept!;
    await expect(handle.submit({ content: "CHILD: again" })).rejects.toThrow(/invocation .* has ended/);
    await expect(submission.wait()).rejects.toThrow(/invocation .* has ended/);
    await expect(handle.abort()).rejects.toThrow(/has ended/);
    await expect(handle.waitForIdle()).rejects.toThrow(/has ended/);
    // What it admitted was answered all the same.
    const record = await h.submissionRecord(submission.id);
    expect(record?.status).toBe("done");
    expect(assistantTexts(await h.entries(handle.id))).toEqual(["child done"]);
  });

  test("usage: the child's tokens are counted once, under the child", async () => {
    const h = await open(responder());
    const root = await h.root();
    await (await root.submit({ type: "input", content: "delegate it" })).wait();
    await h.waitForIdle();
    const [call] = await h.tasks({ kind: "pi.tool" });
    const child = childOf(h, call!.id)!;
    const spent = (entries: EntryRecord[]) =>
      entries
        .filter((e) => e.kind === "pi.assistant")
        .reduce(
          (n, e) =>
            n +
            ((e.model as unknown as Array<{ usage: { totalTokens: number } }>)[0]!.usage.totalTokens ?? 0),
          0,
        );
    const parentTokens = spent(await root.entries());
    const childTokens = spent(await h.entries(child.id));
    expect(childTokens).toBeGreaterThan(0);
    const tokens = (u: UsageState) =>
      Object.values(u.models).reduce((n, m) => n + m.totalTokens, 0) +
      Object.values(u.tools).reduce((n, m) => n + m.totalTokens, 0);
    const parentUsage = (await h.doc<UsageState & Record<string, never>>(root.id, "pi.usage"))!;
    expect(parentUsage.tools).toEqual({});
    expect(tokens(parentUsage)).toBe(parentTokens);
    expect(tokens((await h.doc<UsageState & Record<string, never>>(child.id, "pi.usage"))!)).toBe(
      childTokens,
    );
    expect(tokens(await h.usage())).toBe(parentTokens + childTokens);
  });
});

describe("background subagent", () => {
  test("returns at once, keeps nobody busy, posts its answer to the parent as a follow-up", async () => {
    const h = await open(responder({ background: true }));
    const root = await h.root();
    await (await root.submit({ type: "input", content: "delegate it" })).wait();
    const [anchor] = await h.tasks({ kind: SUBAGENT_TASK });
    expect(anchor!.background).toBe(true);
    await h.waitForTask(anchor!.id);
    await root.waitForIdle();
    const child = childOf(h, anchor!.id)!;
    expect(assistantTexts(await h.entries(child.id))).toEqual(["the answer is 42"]);
    const texts = assistantTexts(await root.entries());
    expect(texts[0]).toMatch(/^parent heard: Started a background subagent in conversation \d+/);
    expect(texts.at(-1)).toBe("noted the subagent's answer");
    const posted = (await root.entries())
      .filter((e) => e.kind === "pi.user")
      .map((e) => userText((e.model as unknown as Message[])[0]));
    expect(posted.at(-1)).toBe(
      `The background subagent in conversation ${child.id} answered:\n\nthe answer is 42`,
    );
  });

  test("the answer posted while the parent is busy queues as a follow-up, in the inbox and in its record, and starts a run of its own after the parent's answer (draw 39, 4)", async () => {
    // Draw 39, 4: every queued-mode test submitted through a conversation or a tool's handle; the
    // reporter's own admission posting its answer as a steer passed every test (the parent was idle).
    let started!: () => void;
    const running = new Promise<void>((r) => {
      started = r;
    });
    const release = deferred<void>();
    const busy = deferred<void>();
    const base = responder({ childCallsProbe: true, background: true });
    faux = fauxAgentModel(async (req: FauxRequest) => {
      if (userText(req.messages.findLast((m) => m.role === "user")) === "keep busy") {
        await busy.promise;
        return fauxAssistantMessage("was busy");
      }
      return base(req);
    });
    harness = await AgentHarness.open(await memoryStore(), {
      models: faux.models,
      defaultModel: faux.ref,
      tools: [createSubagentTool(), probeTool({ started, release: release.promise })],
    });
    const h = harness;
    const root = await h.root();
    await (await root.submit({ type: "input", content: "delegate it" })).wait();
    await running;
    const hold = await root.submit({ type: "input", content: "keep busy" });
    await until(() => root.busy);
    release.resolve();
    const inboxItems = () =>
      h.docNow<{ items: { id: number; mode: string }[] }>(root.id, "pi.inbox")?.items ?? [];
    await until(() => inboxItems().length === 1, { what: "the answer queued" });
    const [item] = inboxItems();
    const posted = await h.submissionRecord(item!.id as never);
    busy.resolve();
    expect(item!.mode).toBe("followUp");
    expect([posted?.status, (posted as { mode?: string } | undefined)?.mode]).toEqual(["queued", "followUp"]);
    expect((await hold.wait()).status).toBe("done");
    await root.waitForIdle();
    expect(assistantTexts(await root.entries()).slice(-2)).toEqual([
      "was busy",
      "noted the subagent's answer",
    ]);
  });

  test("survives the parent's abort; abort({ background: true }) ends it bottom-up", async () => {
    let started!: () => void;
    const running = new Promise<void>((r) => {
      started = r;
    });
    faux = fauxAgentModel(responder({ background: true, childCallsProbe: true }));
    harness = await AgentHarness.open(await memoryStore(), {
      models: faux.models,
      defaultModel: faux.ref,
      tools: [createSubagentTool(), probeTool({ started, release: new Promise(() => undefined) })],
    });
    const h = harness;
    const root = await h.root();
    const ended: TaskRecord[] = [];
    h.subscribe((change) => {
      for (const t of change.tasks) if (t.state.status === "terminal") ended.push(t);
    });
    // The parent's run ends while the child works: the child does not keep it busy.
    expect((await (await root.submit({ type: "input", content: "delegate it" })).wait()).status).toBe("done");
    await running;
    await root.waitForIdle();
    await h.waitForIdle();
    await root.abort();
    const [anchor] = await h.tasks({ kind: SUBAGENT_TASK });
    const child = childOf(h, anchor!.id)!;
    expect(h.getTask).toBeDefined();
    expect((await h.getTask(anchor!.id))!.state.status).toBe("running");
    expect(root.busy).toBe(false);
    expect(h.conversation(child.id)!.busy).toBe(true);
    await root.abort({ background: true });
    const order = ended
      .filter((t) => t.kind !== "pi.generation" || t.conversationId === child.id)
      .filter((t) => t.id === anchor!.id || t.conversationId === child.id)
      .map((t) => t.kind);
    expect(order).toEqual(["pi.tool", "pi.generation", SUBAGENT_TASK]);
    const outcome = (await h.getTask(anchor!.id))!.state;
    expect(outcome.status === "terminal" && outcome.outcome.status).toBe("aborted");
    expect(h.conversation(child.id)!.busy).toBe(false);
  });
});
