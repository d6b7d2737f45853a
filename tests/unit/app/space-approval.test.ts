/**
 * Tool approval on a server space's agent (worker/app/space-agent.ts, tool-policies.ts), on memory
 * stores in Node: the space's agent asks first by the browser's defaults (read-only built-ins free;
 * write, edit and code ask), and a conversation's own policies ("always allow here") and a call
 * waiting for approval move with the conversation between two homes (worker/app/moves.ts through
 * `harnessPeer`, every call through JSON): browser -> server -> browser, the policies kept, the
 * waiting call approved in the home it lives in and run there once. The same agent in workerd, the
 * wait across a SIGKILL and the decision over a socket: tests/server/space-approval.test.ts.
 */
import { afterEach, describe, expect, test } from "vitest";
import type { AgentHarness } from "../../../worker/agent/harness.ts";
import { DOC, type LiveState, type ToolSlot } from "../../../worker/agent/records.ts";
import { harnessPeer, Moves } from "../../../worker/app/moves.ts";
import { writeDemoSpeed } from "../../../worker/app/settings.ts";
import { openSpaceHarness } from "../../../worker/app/space-agent.ts";
import { setToolPolicy, toolPolicyViews } from "../../../worker/app/tool-policies.ts";
import type { ConversationId } from "../../../worker/core/types.ts";
import { memoryStore, until } from "../../../worker/testing.ts";

const opened: AgentHarness[] = [];
afterEach(async () => {
  for (const h of opened.splice(0)) await h.close().catch(() => undefined);
});

/** A server space's agent on a memory store (the demo model, fast). */
async function space(): Promise<AgentHarness> {
  const reports: unknown[] = [];
  const h = await openSpaceHarness(await memoryStore(), {
    wakeAt: () => undefined,
    apiKey: () => undefined,
    onReport: (e) => reports.push(e),
    onFatal: (e) => reports.push(e),
  });
  await writeDemoSpeed(h, "fast");
  opened.push(h);
  return h;
}

async function conversation(h: AgentHarness): Promise<ConversationId> {
  return (await h.createConversation({ ownership: { kind: "ownerless" } })).id;
}

const waiting = (h: AgentHarness, c: ConversationId): ToolSlot | undefined =>
  ((h.docNow(c, DOC.live) as LiveState | undefined)?.tools ?? []).find(
    (s) => s.status === "awaiting_approval" && !s.approval?.decision,
  );

async function toolResults(h: AgentHarness, c: ConversationId) {
  return (await h.requireConversation(c).entries())
    .filter((e) => e.kind === "pi.tool-result")
    .map((e) => (e.model as Array<{ toolName: string; isError: boolean }>)[0]!);
}

const policyOf = async (h: AgentHarness, c: ConversationId | undefined, tool: string) =>
  (await toolPolicyViews(h, c)).find((p) => p.name === tool);

describe("a server space's agent", () => {
  test("asks first by the browser's defaults: read-only tools free, writing asks", async () => {
    const h = await space();
    const byName = Object.fromEntries((await toolPolicyViews(h)).map((p) => [p.name, p.effective]));
    expect(byName).toMatchObject({ read: "allow", ls: "allow", write: "ask", edit: "ask" });
  });

  test("a write waits for approval (the ls before it runs freely), and runs once approved", async () => {
    const h = await space();
    const c = await conversation(h);
    await h.requireConversation(c).submit({ type: "input", content: "write a note", requestId: "n1" });
    await until(() => waiting(h, c) !== undefined, { what: "the write waits for approval" });
    const slot = waiting(h, c)!;
    expect(slot.approval?.summary.join("\n")).toContain("path: notes/note-1.md");
    expect((await toolResults(h, c)).map((r) => r.toolName)).toEqual(["ls"]);
    expect(await h.decideApproval(c, { taskId: slot.taskId!, decision: "approve", requestId: "a1" })).toEqual(
      { status: "decided", decision: "approve" },
    );
    await h.waitForConversationIdle(c);
    expect((await toolResults(h, c)).map((r) => [r.toolName, r.isError])).toEqual([
      ["ls", false],
      ["write", false],
    ]);
  });
});

describe("moved between homes", () => {
  test("a conversation's own policies go with it, browser -> server -> browser; the app-wide ones stay", async () => {
    const browser = await space();
    const server = await space();
    const c = await conversation(browser);
    await setToolPolicy(browser, "write", "allow", c);
    await setToolPolicy(browser, "edit", "never", c);
    await setToolPolicy(browser, "ls", "never");
    const moves = new Moves(browser, { peer: () => harnessPeer(() => server) });
    const out = await moves.moveOut(c, "server");
    expect(out.status).toBe("done");
    const remote = (out as { remote: ConversationId }).remote;
    expect(await policyOf(server, remote, "write")).toMatchObject({
      conversation: "allow",
      effective: "allow",
    });
    expect(await policyOf(server, remote, "edit")).toMatchObject({
      conversation: "never",
      effective: "never",
    });
    // The browser's app-wide choice is the browser's: the space keeps its own defaults.
    expect(await policyOf(server, remote, "ls")).toMatchObject({ effective: "allow" });
    expect((await policyOf(server, remote, "ls"))?.app).toBeUndefined();
    // Changed on the server, then brought back: the browser gets what the server held.
    await setToolPolicy(server, "read", "ask", remote);
    const back = await moves.bringBack(remote, "server");
    expect(back.status).toBe("done");
    const local = (back as { local: ConversationId }).local;
    expect(await policyOf(browser, local, "write")).toMatchObject({ conversation: "allow" });
    expect(await policyOf(browser, local, "edit")).toMatchObject({ conversation: "never" });
    expect(await policyOf(browser, local, "read")).toMatchObject({ conversation: "ask", effective: "ask" });
  });

  test("a call waiting for approval moves to the server, waits there, and is approved there: run once, there", async () => {
    const browser = await space();
    const server = await space();
    const c = await conversation(browser);
    await browser.requireConversation(c).submit({ type: "input", content: "write a note", requestId: "n1" });
    await until(() => waiting(browser, c) !== undefined, { what: "the write waits for approval" });
    const moves = new Moves(browser, { peer: () => harnessPeer(() => server) });
    const out = await moves.moveOut(c, "server");
    expect(out.status).toBe("done");
    const remote = (out as { remote: ConversationId }).remote;
    // Still waiting in its new home, under the task id it has there.
    await until(() => waiting(server, remote) !== undefined, { what: "the moved call waits on the server" });
    const slot = waiting(server, remote)!;
    expect(slot.approval?.summary.join("\n")).toContain("path: notes/note-1.md");
    // The browser's copy cannot be decided any more: nothing of it runs here.
    const left = waiting(browser, c);
    if (left) {
      const here = await browser
        .decideApproval(c, { taskId: left.taskId!, decision: "approve", requestId: "b" })
        .catch((e: unknown) => e);
      expect(here).not.toEqual({ status: "decided", decision: "approve" });
    }
    expect(
      await server.decideApproval(remote, { taskId: slot.taskId!, decision: "approve", requestId: "s" }),
    ).toEqual({ status: "decided", decision: "approve" });
    await server.waitForConversationIdle(remote);
    expect((await toolResults(server, remote)).map((r) => [r.toolName, r.isError])).toEqual([
      ["ls", false],
      ["write", false],
    ]);
    // The note is in the server's workspace, not the browser's.
    expect(await server.services.fs.exists("notes/note-1.md")).toBe(true);
    expect(await browser.services.fs.exists("notes/note-1.md")).toBe(false);
    expect((await toolResults(browser, c)).map((r) => r.toolName)).toEqual(["ls"]);
  });
});
