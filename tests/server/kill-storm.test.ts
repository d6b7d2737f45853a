/**
 * A SIGKILL storm on the server engine: three long runs in two spaces (worker/server/space.ts with a
 * model scripted for many tool rounds, tests/server/worker/storm-entry.ts), and workerd killed with
 * SIGKILL twenty times while they run, at spread-out moments: each kill waits for the first run's
 * transcript to reach a point further along (spread over its whole length) and then a varying
 * delay, so kills land while an answer streams, while a tool sleeps, just after a commit, and once
 * right after the recovery that followed the previous kill. After each kill workerd starts again on
 * the same folder and the spaces are touched (their alarm restored, as the local server does, and a
 * request), which opens them and recovers their runs like a tab reload.
 *
 * Then every run finished, and each transcript is exactly its script: each step once, in order (no
 * entry doubled, none lost), every tool call answered by exactly one result, and that result the
 * tool's own (the tool is safe to run again, so recovery runs a cut call again rather than
 * recording it interrupted). An answer a kill cut while it streamed is kept as an aborted partial
 * and the request sent again (the generation task's rule, worker/agent/generation/request.ts): each
 * such partial is a piece of the answer that follows it, and answered by nothing. The task table
 * holds no live task and no task that ended other than completed, and every submission is answered.
 * About 30 s: twenty restarts of workerd and runs of 8 to 12 rounds of 0.6 s tools.
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import { type ServerWorker, startServerWorker } from "./miniflare.ts";

interface Message {
  role: string;
  content?: Array<{ type: string; text?: string; id?: string; name?: string }>;
  toolCallId?: string;
  isError?: boolean;
  stopReason?: string;
}
interface View {
  busy: boolean;
  live: number;
  entries: Array<{ id: number; kind: string; model?: Message[] }>;
}
interface Tables {
  tasks: Array<{ id: number; kind: string; conversationId: number; status: string; outcome?: string }>;
  submissions: Array<{ id: number; conversationId: number; status: string }>;
}

/** How many times workerd is killed mid-run. */
const KILLS = 20;

/** The runs: space, tool rounds. The first one paces the kills. */
const RUNS = [
  { space: "storm-a", rounds: 12 },
  { space: "storm-b", rounds: 8 },
  { space: "storm-b", rounds: 8 },
] as const;

/**
 * The pause after reaching each kill's point (ms), varied so the kills land in different parts of a
 * round (an answer streams for about 0.2 s, a tool sleeps 0.6 s). `null`: no waiting for progress
 * at all, the kill follows the previous recovery at once.
 */
const PAUSES: ReadonlyArray<number | null> = [
  0,
  40,
  150,
  320,
  null,
  90,
  10,
  250,
  60,
  400,
  0,
  180,
  30,
  null,
  120,
  280,
  70,
  0,
  200,
  50,
];

let server: ServerWorker;

beforeAll(async () => {
  server = await startServerWorker({
    entry: "storm-entry.ts",
    objects: { SPACES: "StormSpace" },
    bindings: { SPACE_HEARTBEAT_MS: "1000" },
  });
});

afterAll(async () => {
  await server?.stop();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const view = (space: string, conversation: number) =>
  server.call<View>(`/space/${space}/view?conversation=${conversation}`);

/** Poll the view of a conversation until `done` holds (at most `ms`). */
async function viewUntil(space: string, conversation: number, done: (v: View) => boolean, ms = 30_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await view(space, conversation);
    if (done(v)) return v;
    if (Date.now() > deadline)
      throw new Error(`${space}/${conversation}: not there in ${ms} ms: ${v.entries.length} entries`);
    await sleep(25);
  }
}

/** The transcript a run of `rounds` rounds is, kind by kind. */
const script = (rounds: number) => [
  "pi.user",
  "pi.system",
  ...Array.from({ length: rounds }, () => ["pi.assistant", "pi.tool-result"]).flat(),
  "pi.assistant",
];

/** A message's text blocks, joined. */
const text = (message: Message | undefined) =>
  (message?.content ?? [])
    .filter((c) => c.type === "text")
    .map((c) => c.text ?? "")
    .join("");

/** The ids of the tool calls an assistant entry makes. */
const callIds = (entry: View["entries"][number]) =>
  (entry.model?.[0]?.content ?? []).filter((c) => c.type === "toolCall").map((c) => c.id);

test(`SIGKILL of workerd ${KILLS} times mid-run: every run resumes and finishes, every step once, every tool call answered once`, async () => {
  const started: Array<{ space: string; conversation: number; rounds: number }> = [];
  for (const [i, run] of RUNS.entries()) {
    const { conversation } = await server.call<{ conversation: number }>(`/space/${run.space}/submit`, {
      method: "POST",
      body: { text: `storm ${run.rounds}`, requestId: `storm-${i}` },
    });
    started.push({ space: run.space, conversation, rounds: run.rounds });
  }
  const pacer = started[0]!;
  const length = script(pacer.rounds).length;
  const spaces = [...new Set(started.map((r) => r.space))];
  const killedAt: number[] = [];
  for (let kill = 0; kill < KILLS; kill++) {
    // The kill's point: spread over the pacer's transcript, before its final answer.
    const point = 2 + Math.floor((kill * (length - 3)) / KILLS);
    const pause = PAUSES[kill % PAUSES.length]!;
    if (pause !== null) {
      await viewUntil(pacer.space, pacer.conversation, (v) => v.entries.length >= point);
      await sleep(pause);
    }
    const before = await view(pacer.space, pacer.conversation);
    // The premise: the kill lands mid-run.
    expect(before.busy || before.live > 0, `kill ${kill + 1} found the run finished`).toBe(true);
    killedAt.push(before.entries.length);
    await server.restart();
    // Recover: restore each space's alarm (the local server does at start) and reach it.
    for (const space of spaces) await server.call(`/space/${space}/rearm`, { method: "POST" });
    for (const run of started) await view(run.space, run.conversation);
  }
  // The kills were spread over the run, not bunched at one point.
  expect(new Set(killedAt).size).toBeGreaterThanOrEqual(KILLS / 2);

  for (const run of started) {
    const v = await viewUntil(run.space, run.conversation, (x) => !x.busy && x.live === 0, 60_000);
    const where = `${run.space}/${run.conversation}`;
    // Entry ids strictly increasing: nothing written twice, nothing out of order.
    const ids = v.entries.map((e) => e.id);
    expect(ids, where).toEqual([...ids].sort((a, b) => a - b));
    expect(new Set(ids).size, where).toBe(ids.length);
    // An answer a kill cut while it streamed stays as an aborted partial (the generation task's
    // rule: a partial left by a crash is kept as an aborted answer, never resent), and the request
    // is sent again. Each one is a piece of the answer that follows it, with no result of its own.
    const isPartial = (e: View["entries"][number]) =>
      e.kind === "pi.assistant" && e.model?.[0]?.stopReason === "aborted";
    const partials = v.entries.filter(isPartial);
    expect(partials.length, where).toBeLessThanOrEqual(KILLS);
    const steps = v.entries.filter((e) => !isPartial(e));
    for (const partial of partials) {
      const next = steps.find((e) => e.id > partial.id);
      expect(next?.kind, where).toBe("pi.assistant");
      expect(text(next?.model?.[0]).startsWith(text(partial.model?.[0])), where).toBe(true);
      for (const id of callIds(partial)) expect(callIds(next!), where).toContain(id);
    }
    // Every step once, in order: the script, kind by kind and answer by answer.
    expect(
      steps.map((e) => e.kind),
      where,
    ).toEqual(script(run.rounds));
    const answers = steps.filter((e) => e.kind === "pi.assistant");
    expect(
      answers.map((e) => text(e.model?.[0])),
      where,
    ).toEqual([
      ...Array.from(
        { length: run.rounds },
        (_, k) => `Round ${k + 1} of ${run.rounds}: one more step of the long task.`,
      ),
      `All ${run.rounds} rounds done.`,
    ]);
    // Every tool call answered by exactly one result, right after it, the tool's own.
    const calls = answers.flatMap(callIds);
    expect(calls, where).toHaveLength(run.rounds);
    expect(new Set(calls).size, where).toBe(run.rounds);
    const results = steps.filter((e) => e.kind === "pi.tool-result").map((e) => e.model?.[0]);
    expect(
      results.map((r) => r?.toolCallId),
      where,
    ).toEqual(calls);
    for (const result of results) {
      expect(result?.isError, where).toBe(false);
      expect(text(result), where).toMatch(/^Finished the long task: 3 steps in 0\.6 seconds/);
    }
  }
  // The task table: nothing live, nothing ended other than completed; every submission answered.
  for (const space of spaces) {
    const { tasks, submissions } = await server.call<Tables>(`/space/${space}/tasks`);
    expect(tasks.length, space).toBeGreaterThan(0);
    expect(
      tasks.filter((t) => t.status !== "terminal" || t.outcome !== "completed"),
      space,
    ).toEqual([]);
    const mine = started.filter((r) => r.space === space);
    expect(
      submissions.map((s) => [s.conversationId, s.status]),
      space,
    ).toEqual(mine.map((r) => [r.conversation, "done"]));
  }
}, 120_000);
