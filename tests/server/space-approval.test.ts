/**
 * Tool approval on a server space, in workerd (miniflare), decided by tabs over real WebSockets
 * (worker/app/space-agent.ts under the product's defaults: `SPACE_TEST_APPROVAL=ask`). Shown: the
 * demo model's write waits for approval (its `ls` ran freely) and every tab watching the
 * conversation sees the request in words; workerd is SIGKILLed and started again on the same folder
 * (`restart()`), and a new tab finds the call still waiting (the wait is the tool task's committed
 * checkpoint in the object's store); two tabs approve at once over their sockets, one decision is
 * taken and the other told it came too late, and the tool ran once. A denial's reason is the result the model reads, and the
 * tool never ran. "Always allow here" is kept in the conversation: the next write runs freely.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { type ServerWorker, startServerWorker } from "./miniflare.ts";
import { SocketTab } from "./socket-tab.ts";

let server: ServerWorker;

beforeAll(async () => {
  server = await startServerWorker({
    entry: "space-entry.ts",
    objects: { SPACES: "TestSpace" },
    // The heartbeat is a minute: nothing but the tabs' calls opens the space after the restart.
    bindings: { SPACE_TEST_APPROVAL: "ask", SPACE_HEARTBEAT_MS: "60000" },
  });
}, 120_000);

const tabs: SocketTab[] = [];
afterAll(async () => {
  await Promise.all(tabs.map((t) => t.close().catch(() => undefined)));
  await server?.stop();
});

function socketUrl(space: string): URL {
  const url = new URL(`/space/${space}/socket`, server.url());
  url.protocol = "ws:";
  return url;
}

async function tabOn(space: string): Promise<SocketTab> {
  const tab = await SocketTab.open(socketUrl(space), {
    protocols: ["durable-harness.v1", `token.${server.token(space)}`],
  });
  tabs.push(tab);
  await tab.hello(`tab-${tabs.length}`);
  return tab;
}

interface Slot {
  taskId?: number;
  name?: string;
  status: string;
  approval?: { summary: string[]; decision?: { decision: string } };
}
interface Entry {
  kind: string;
  model?: Array<{ role?: string; toolName?: string; isError?: boolean; content?: Array<{ text?: string }> }>;
}
type Frame =
  | { ops: [{ op: "replace" }]; value: { entries: Entry[]; docs: Record<string, unknown> } }
  | { ops: Array<{ op: string; name?: string; value?: unknown; entries?: Entry[] }> };

/** What a tab's watch of a conversation adds up to: its entries and its pi.live document. */
function viewOf(frames: readonly unknown[]): { entries: Entry[]; live: { tools?: Slot[] } | undefined } {
  let entries: Entry[] = [];
  let live: { tools?: Slot[] } | undefined;
  for (const frame of frames as Frame[]) {
    if ("value" in frame) {
      entries = [...frame.value.entries];
      live = frame.value.docs["pi.live"] as typeof live;
      continue;
    }
    for (const op of frame.ops) {
      if ((op.op === "append" || op.op === "head") && op.entries) entries.push(...op.entries);
      if (op.op === "doc" && op.name === "pi.live") live = op.value as typeof live;
    }
  }
  return { entries, live };
}

const waitingIn = (tab: SocketTab, watch: number): Slot | undefined =>
  viewOf(tab.frames.get(watch) ?? []).live?.tools?.find(
    (s) => s.status === "awaiting_approval" && !s.approval?.decision,
  );

const results = (entries: readonly Entry[]) =>
  entries
    .filter((e) => e.kind === "pi.tool-result")
    .map((e) => ({
      tool: e.model?.[0]?.toolName,
      error: e.model?.[0]?.isError === true,
      text: (e.model?.[0]?.content ?? []).map((c) => c.text ?? "").join(""),
    }));

interface View {
  busy: boolean;
  entries: Entry[];
}
const view = (space: string, c: number) => server.call<View>(`/space/${space}/view?conversation=${c}`);

/** The view once the run is answered (and `also` holds). */
async function settledView(
  space: string,
  c: number,
  what: string,
  also: (v: View) => boolean = () => true,
): Promise<View> {
  for (let i = 0; i < 300; i++) {
    const v = await view(space, c);
    if (!v.busy && v.entries.at(-1)?.kind === "pi.assistant" && also(v)) return v;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`the conversation never settled: ${what}`);
}

/** A conversation on `space` whose write waits for approval, watched by `tab`. */
async function waitingWrite(space: string, tab: SocketTab, text = "write a note") {
  const c = await tab.value<number>("conversations.create", "approvals");
  const watch = await tab.value<number>("watches.conversation", c);
  await tab.value("run.submit", c, { text, requestId: `${space}-1` });
  await tab.until(() => waitingIn(tab, watch) !== undefined, "the write waits for approval", 60_000);
  return { c, watch, slot: waitingIn(tab, watch)! };
}

describe("tool approval on a server space", () => {
  test("a write waits across a SIGKILL of workerd, is approved over a new socket, and runs once", async () => {
    const a = await tabOn("approve");
    const { c, slot } = await waitingWrite("approve", a);
    expect(slot.name).toBe("write");
    expect(slot.approval?.summary.join("\n")).toContain("path: notes/note-1.md");
    // Only the read-only ls ran; the write did not.
    expect(results((await view("approve", c)).entries).map((r) => r.tool)).toEqual(["ls"]);

    await server.restart();
    await a.until(() => a.closed !== undefined, "the first tab's socket closing with workerd");

    // A new tab (as after a reload): the call still waits, under the same task.
    const b = await tabOn("approve");
    const watch = await b.value<number>("watches.conversation", c);
    await b.until(() => waitingIn(b, watch) !== undefined, "the call still waits after the restart");
    expect(waitingIn(b, watch)!.taskId).toBe(slot.taskId);
    expect(results((await view("approve", c)).entries).map((r) => r.tool)).toEqual(["ls"]);

    // Two tabs approve at once: the first decision wins, once; the other is told it came second.
    const second = await tabOn("approve");
    const decide = (tab: SocketTab, requestId: string) =>
      tab.value<{ status: string; decision?: string }>("approvals.decide", c, {
        taskId: slot.taskId,
        decision: "approve",
        requestId,
      });
    const answers = await Promise.all([decide(b, "b-approve"), decide(second, "c-approve")]);
    // One decided it; the other came too late: `already_decided` while the call was still there, or
    // `not_waiting` once the approved call had already run and ended (on workerd each commit awaits
    // its storage sync, so the call often ends between the two). Either way it wrote nothing.
    expect(answers.filter((x) => x.status === "decided")).toEqual([
      { status: "decided", decision: "approve" },
    ]);
    const late = answers.find((x) => x.status !== "decided")!;
    expect(["already_decided", "not_waiting"]).toContain(late.status);
    if (late.status === "already_decided") expect(late.decision).toBe("approve");

    const done = await settledView(
      "approve",
      c,
      "after the approval",
      (v) => results(v.entries).length === 2,
    );
    expect(results(done.entries).map((r) => [r.tool, r.error])).toEqual([
      ["ls", false],
      ["write", false],
    ]);
    // The tool ran once: the note is in the (in-memory, since the restart) workspace, written once.
    expect(await b.value<string>("workspace.read", "notes/note-1.md")).toContain("note");
  });

  test("a denial with a reason: the model reads it, the tool never runs", async () => {
    const a = await tabOn("deny");
    const { c, slot } = await waitingWrite("deny", a);
    const denied = await a.value("approvals.decide", c, {
      taskId: slot.taskId,
      decision: "deny",
      reason: "not on the shared server",
      requestId: "a-deny",
    });
    expect(denied).toEqual({ status: "decided", decision: "deny" });
    const done = await settledView("deny", c, "after the denial", (v) => results(v.entries).length === 2);
    const write = results(done.entries).find((r) => r.tool === "write")!;
    expect(write.error).toBe(true);
    expect(write.text).toContain("not on the shared server");
    const files = await a.value<Array<{ path: string }>>("workspace.files");
    expect(files.map((f) => f.path)).not.toContain("notes/note-1.md");
  });

  test("policies set over the socket are the server's: 'never' everywhere refuses a write unasked; the conversation's 'allow' wins there", async () => {
    const a = await tabOn("policies");
    await a.value("approvals.setPolicy", "write", "never");
    const c = await a.value<number>("conversations.create", "never");
    const watch = await a.value<number>("watches.conversation", c);
    const asked = () => JSON.stringify(a.frames.get(watch) ?? []).includes("awaiting_approval");
    await a.value("run.submit", c, { text: "write a note", requestId: "never-1" });
    const refused = await settledView("policies", c, "the refused write", (v) =>
      results(v.entries).some((r) => r.tool === "write"),
    );
    expect(results(refused.entries).find((r) => r.tool === "write")).toMatchObject({
      error: true,
      text: expect.stringContaining("set never to run in this conversation"),
    });
    expect(asked()).toBe(false);
    const files = await a.value<Array<{ path: string }>>("workspace.files");
    expect(files.map((f) => f.path).filter((p) => p.startsWith("notes/"))).toEqual([]);

    // This conversation's own choice wins over the space's: its next write runs, unasked.
    await a.value("approvals.setPolicy", "write", "allow", c);
    const policies = await a.value<
      Array<{ name: string; app?: string; conversation?: string; effective: string }>
    >("approvals.policies", c);
    expect(policies.find((p) => p.name === "write")).toMatchObject({
      app: "never",
      conversation: "allow",
      effective: "allow",
    });
    await a.value("run.submit", c, { text: "write another note", requestId: "never-2" });
    const ran = await settledView("policies", c, "the allowed write", (v) =>
      results(v.entries).some((r) => r.tool === "write" && !r.error),
    );
    expect(results(ran.entries).filter((r) => r.tool === "write" && !r.error)).toHaveLength(1);
    expect(asked()).toBe(false);
  });

  test("'always allow here' is kept in the conversation: its next write runs freely", async () => {
    const a = await tabOn("always");
    const { c, slot, watch } = await waitingWrite("always", a);
    await a.value("approvals.decide", c, {
      taskId: slot.taskId,
      decision: "approve",
      always: true,
      requestId: "a-always",
    });
    await settledView("always", c, "after the first write", (v) => results(v.entries).length === 2);
    const policies = await a.value<Array<{ name: string; conversation?: string; effective: string }>>(
      "approvals.policies",
      c,
    );
    expect(policies.find((p) => p.name === "write")).toMatchObject({
      conversation: "allow",
      effective: "allow",
    });
    await a.value("run.submit", c, { text: "write another note", requestId: "always-2" });
    const done = await settledView(
      "always",
      c,
      "after the second write",
      (v) => results(v.entries).filter((r) => r.tool === "write").length >= 2,
    );
    // It never waited: no second request was made, and it ran.
    expect(results(done.entries).filter((r) => r.tool === "write" && !r.error)).toHaveLength(2);
    expect(waitingIn(a, watch)).toBeUndefined();
  });
});
