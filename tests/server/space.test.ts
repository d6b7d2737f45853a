/**
 * The server engine (worker/server/space.ts with the app's agent, worker/app/space-agent.ts) in
 * workerd: a demo conversation answers, every step committed once; a workerd killed (SIGKILL) in the
 * middle of a run comes back on the same folder, and the space wakes by its own alarm (no request
 * reaches the engine: the test only restores the alarm's schedule, as Cloudflare's scheduler would,
 * see Space.rearm), recovers like a tab reload and finishes the run, nothing doubled. The heartbeat is
 * shortened to half a second so the killed space's alarm is due at once.
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import { type ServerWorker, startServerWorker } from "./miniflare.ts";

interface View {
  busy: boolean;
  live: number;
  entries: Array<{ id: number; kind: string; data?: unknown; model?: unknown }>;
}
interface Status {
  by: "fetch" | "alarm";
  alarm: number | null;
}

let server: ServerWorker;

beforeAll(async () => {
  server = await startServerWorker({
    entry: "space-entry.ts",
    objects: { SPACES: "TestSpace" },
    bindings: { SPACE_HEARTBEAT_MS: "500" },
  });
});

afterAll(async () => {
  await server?.stop();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function viewUntil(space: string, conversation: number, done: (v: View) => boolean): Promise<View> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const view = await server.call<View>(`/space/${space}/view?conversation=${conversation}`);
    if (done(view)) return view;
    if (Date.now() > deadline) throw new Error(`space ${space}: not there in 20 s: ${JSON.stringify(view)}`);
    await sleep(100);
  }
}

const settled = (v: View) => !v.busy && v.live === 0;

/** The text of an assistant entry (its model message's text blocks). */
function textOf(entry: View["entries"][number]): string {
  const messages = entry.model as Array<{ content: Array<{ type: string; text?: string }> }>;
  return messages.flatMap((m) => m.content.filter((c) => c.type === "text").map((c) => c.text)).join("");
}

test("a demo conversation answers in workerd: every step committed once, a repeated submit is the same one", async () => {
  const submit = { text: "write a note", requestId: "note-1" };
  const first = await server.call<{ conversation: number; submission: number }>("/space/answers/submit", {
    method: "POST",
    body: submit,
  });
  const view = await viewUntil("answers", first.conversation, settled);
  expect(view.entries.map((e) => e.kind)).toEqual([
    "pi.user",
    "pi.system",
    "pi.assistant",
    "pi.tool-result",
    "pi.assistant",
    "pi.tool-result",
    "pi.assistant",
  ]);
  expect(view.entries.map((e) => e.id)).toEqual([1, 2, 3, 4, 5, 6, 7]);
  expect(textOf(view.entries.at(-1)!)).toMatch(/^Done: Wrote \d+ bytes to notes\/note-1\.md/);
  // The same request id again: the submission admitted under it, nothing written.
  const again = await server.call<{ conversation: number; submission: number }>("/space/answers/submit", {
    method: "POST",
    body: { ...submit, conversation: first.conversation },
  });
  expect(again).toMatchObject({ conversation: first.conversation, submission: first.submission });
  expect((await viewUntil("answers", first.conversation, settled)).entries).toEqual(view.entries);
});

test("code mode runs on the server: the demo model's script lists the workspace and sums its sizes", async () => {
  const { conversation } = await server.call<{ conversation: number }>("/space/scripts/submit", {
    method: "POST",
    body: { text: "write a note" },
  });
  await viewUntil("scripts", conversation, settled);
  await server.call("/space/scripts/submit", {
    method: "POST",
    body: { conversation, text: "sum the sizes of the files" },
  });
  const view = await viewUntil("scripts", conversation, (v) => settled(v) && v.entries.length > 8);
  const answer = textOf(view.entries.at(-1)!);
  expect(answer).toMatch(/^My script ran:/);
  expect(answer).toMatch(/notes\/note-1\.md: \d+ bytes/);
  expect(answer).toMatch(/Result: \{"files":1,"totalBytes":\d+\}/);
});

test("a runaway script in the object's thread is stopped at its slice (workerd's clock advances inside it)", async () => {
  const run = await server.call<{ ended: string; heldMs: number }>("/space/runaway/runaway", {
    method: "POST",
  });
  expect(run.ended).toMatch(/^CpuSliceExceeded/);
  expect(run.heldMs).toBeLessThan(2_000);
});

test("SIGKILL of workerd mid-run: the space wakes by its alarm with no request, resumes the run and finishes it once", async () => {
  const { conversation } = await server.call<{ conversation: number }>("/space/killed/submit", {
    method: "POST",
    body: { text: "run a long task", requestId: "long-1" },
  });
  // The tool call is committed and the tool (3 s) is running: kill workerd there.
  await viewUntil("killed", conversation, (v) => v.entries.some((e) => e.kind === "pi.assistant"));
  expect((await server.call<Status>("/space/killed/status")).alarm).not.toBeNull();
  await server.restart();
  // Only the alarm's schedule is restored (what Cloudflare's scheduler does by itself; see
  // Space.rearm), then no request for a while: the stored alarm (due within the heartbeat) opens the space.
  expect(
    (await server.call<{ alarm: number | null }>("/space/killed/rearm", { method: "POST" })).alarm,
  ).not.toBeNull();
  await sleep(1_500);
  expect((await server.call<Status>("/space/killed/status")).by).toBe("alarm");
  const view = await viewUntil("killed", conversation, settled);
  expect(view.entries.map((e) => e.kind)).toEqual([
    "pi.user",
    "pi.system",
    "pi.assistant",
    "pi.tool-result",
    "pi.assistant",
  ]);
  expect(textOf(view.entries.at(-1)!)).toMatch(/^The long task is finished\./);
  // Finished for good: another restart runs nothing again.
  await server.restart();
  expect((await viewUntil("killed", conversation, settled)).entries).toEqual(view.entries);
});
