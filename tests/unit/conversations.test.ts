/**
 * The conversa ownership: { kind: "ownerless" }, ownership: { kind: "ownerless" },tion API: agent configuration (createConversation, configure, root), a task-owned
 * conversation's inherited agent, and custom documents.
 */
import { fauxToolCall } from "@mariozechner/pi-ai";
import { describe, expect, test } from "vitest";
import { defineDoc } from "../../worker/agent/records.ts";
import { callsThenAnswer, echo, gatedTool, liveOf, open } from "./agent-fixtures.ts";

describe("conversations", () => {
  test("createConversation({ agent }), configure (null clears) and conversation(id) shape what the model gets", async () => {
    const { h, faux } = await open(echo);
    const c = await h.createConversation({
      ownership: { kind: "ownerless" },
      agent: { instructions: "Answer briefly." },
    });
    expect(await c.agent()).toMatchObject({ instructions: "Answer briefly." });
    await (await c.submit({ type: "input", content: "one" })).wait();
    expect(faux.requests[0]!.systemPrompt).toContain("Answer briefly.");
    await c.configure({ instructions: null });
    expect((await c.agent()).instructions).toBeUndefined();
    await (await c.submit({ type: "input", content: "two" })).wait();
    expect(faux.requests[1]!.systemPrompt ?? "").not.toContain("Answer briefly.");
    expect(h.conversation(c.id)?.id).toBe(c.id);
    expect(h.conversation(9999)).toBeUndefined();
  });

  test("root({ agent }) configures the root conversation on first use only", async () => {
    const { h, faux } = await open(echo);
    const root = await h.root({ agent: { instructions: "First set." } });
    await h.root({ agent: { instructions: "Second set." } });
    expect(await root.agent()).toMatchObject({ instructions: "First set." });
    await (await root.submit({ type: "input", content: "x" })).wait();
    expect(faux.requests[0]!.systemPrompt).toContain("First set.");
  });

  test("a conversation owned by a task starts with its owner conversation's agent", async () => {
    const { tool, started, release } = gatedTool();
    const { h, root } = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "call-1" })), {
      tools: [tool],
    });
    await root.configure({ instructions: "Be terse.", thinkingLevel: "low" });
    const sub = await root.submit({ type: "input", content: "go" });
    await started.promise;
    const taskId = liveOf(h).tools![0]!.taskId!;
    const child = await h.createConversation({ ownership: { kind: "task", taskId } });
    expect(await child.agent()).toEqual({ instructions: "Be terse.", thinkingLevel: "low" });
    const ownerless = await h.createConversation({ ownership: { kind: "ownerless" } });
    expect(await ownerless.agent()).toEqual({});
    release.resolve();
    expect((await sub.wait()).status).toBe("done");
  });

  test("defineDoc: a custom document reads its initial value until written, and shows in the view", async () => {
    const notes = defineDoc<{ items: string[] }>("app.notes", { items: [] });
    const { h, root } = await open(echo);
    expect(await h.transaction((tx) => notes.read(tx, root.id))).toEqual({ items: [] });
    await h.transaction((tx) => notes.write(tx, root.id, { items: ["a"] }));
    expect(await h.transaction((tx) => notes.read(tx, root.id))).toEqual({ items: ["a"] });
    expect((await root.viewState()).docs["app.notes"]).toEqual({ items: ["a"] });
    expect(() => defineDoc("pi.custom", {})).toThrow(TypeError);
  });
});
