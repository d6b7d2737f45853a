/**
 * A schedule moves with its conversation (worker/app/schedules.ts `moveIds`, worker/core/move.ts):
 * two homes (a "browser" and a "server") on memory stores in one process, on one fake clock, joined
 * by `harnessPeer` (every call through JSON). Moved out, the schedule's task sleeps on the receiver's
 * timer and fires there, never in the sender; brought back, the browser's timer owns it again; an
 * occurrence that comes due while the move is under way (between the sender's step 1 and the
 * receiver's adopt) fires once, in the receiver; one that fired just before the move does not fire
 * again after it. The same in workerd, armed by the space's alarm: tests/server/moves.test.ts.
 */
import { fauxAssistantMessage } from "@mariozechner/pi-ai";
import { afterAll, describe, expect, test } from "vitest";
import { AgentHarness } from "../../../worker/agent/harness.ts";
import { harnessPeer, type MovePeer, Moves } from "../../../worker/app/moves.ts";
import {
  createSchedule,
  SCHEDULE_DOCUMENTS,
  SCHEDULE_TASK,
  SCHEDULES_DOC,
  scheduleTask,
} from "../../../worker/app/schedules.ts";
import type { ConversationId } from "../../../worker/core/types.ts";
import type { EntryRecord } from "../../../worker/index.ts";
import type { ScheduleDraft, SchedulesDoc } from "../../../worker/protocol/index.ts";
import { FakeClock, fauxAgentModel, memoryStore, until } from "../../../worker/testing.ts";

const faux = fauxAgentModel(() => fauxAssistantMessage("on it"));
afterAll(() => faux.unregister());

/** Monday 5 January 2026, 07:00 UTC (08:00 in Berlin); the schedule is due at 09:00 Berlin, 08:00 UTC. */
const T0 = Date.UTC(2026, 0, 5, 7, 0);
const HOUR = 3_600_000;
const DUE = Date.UTC(2026, 0, 5, 8, 0);
const NEXT = Date.UTC(2026, 0, 6, 8, 0);

const DRAFT: ScheduleDraft = {
  text: "summarize my notes",
  when: { kind: "cron", cron: "0 9 * * 1-5" },
  timeZone: "Europe/Berlin",
  catchUp: "run",
};

async function home(clock: FakeClock): Promise<AgentHarness> {
  let opened: AgentHarness | undefined;
  const harness = await AgentHarness.open(await memoryStore(), {
    models: faux.models,
    defaultModel: faux.ref,
    tasks: [scheduleTask(() => opened!)],
    documents: SCHEDULE_DOCUMENTS,
    now: clock.now,
    timers: clock,
    paused: true,
  });
  opened = harness;
  harness.resume();
  await harness.root();
  return harness;
}

async function homes() {
  const clock = new FakeClock(T0);
  const browser = await home(clock);
  const server = await home(clock);
  return { clock, browser, server };
}

const entries = async (h: AgentHarness, c: ConversationId) =>
  (await h.requireConversation(c).entries()) as EntryRecord[];
/** The schedule's inputs in a conversation. */
const inputs = async (h: AgentHarness, c: ConversationId) =>
  (await entries(h, c)).filter(
    (e) => e.kind === "pi.user" && JSON.stringify(e.data ?? e.model ?? "").includes(DRAFT.text),
  ).length;
const notes = async (h: AgentHarness, c: ConversationId) =>
  (await entries(h, c)).filter((e) => e.kind === "app.schedule").length;
const scheduleTasks = async (h: AgentHarness) =>
  (await h.tasks({ kind: SCHEDULE_TASK })).filter((t) => t.state.status !== "terminal");

async function sleepingUntil(h: AgentHarness, at: number): Promise<void> {
  await until(
    () =>
      h
        .inspect()
        .tasks.some(
          (t) => t.record.kind === SCHEDULE_TASK && t.state.kind === "waiting" && t.state.until === at,
        ),
    { what: `a schedule task sleeping until ${new Date(at).toISOString()}` },
  );
}

/** Both homes idle, every schedule task asleep on a time still ahead. */
async function settled(clock: FakeClock, ...hs: AgentHarness[]): Promise<void> {
  for (const h of hs) {
    await until(
      () =>
        h
          .inspect()
          .tasks.filter((t) => t.record.kind === SCHEDULE_TASK)
          .every((t) => t.state.kind === "waiting" && (t.state.until ?? 0) > clock.now()),
      { what: "every schedule asleep" },
    );
    await h.waitForIdle();
  }
}

async function scheduled(browser: AgentHarness): Promise<ConversationId> {
  const c = (await browser.createConversation({ ownership: { kind: "ownerless" } })).id;
  await createSchedule(browser, c, DRAFT);
  await sleepingUntil(browser, DUE);
  return c;
}

describe("a schedule moved with its conversation", () => {
  test("to the server: its timer fires it there, never here; brought back: the browser's timer owns it", async () => {
    const { clock, browser, server } = await homes();
    const c = await scheduled(browser);
    const moves = new Moves(browser, { peer: () => harnessPeer(() => server) });
    const out = await moves.moveOut(c, "server");
    expect(out.status).toBe("done");
    const remote = (out as { remote: ConversationId }).remote;
    // The schedule and its sleeping task are the server's now; the browser's task ended.
    expect((await server.doc<SchedulesDoc & Record<string, never>>(remote, SCHEDULES_DOC))?.items).toEqual(
      (await browser.doc<SchedulesDoc & Record<string, never>>(c, SCHEDULES_DOC))?.items,
    );
    await sleepingUntil(server, DUE);
    expect(await scheduleTasks(browser)).toEqual([]);
    // Due: the server fires it, once; the browser's copy never.
    clock.advance(HOUR);
    await settled(clock, server, browser);
    expect(await inputs(server, remote)).toBe(1);
    expect(await notes(server, remote)).toBe(1);
    expect(await inputs(browser, c)).toBe(0);
    await sleepingUntil(server, NEXT);
    // Brought back: the server's task ends, the browser's sleeps until the next occurrence.
    const back = await moves.bringBack(remote, "server");
    expect(back.status).toBe("done");
    const local = (back as { local: ConversationId }).local;
    expect(await scheduleTasks(server)).toEqual([]);
    await sleepingUntil(browser, NEXT);
    clock.advance(24 * HOUR);
    await settled(clock, browser, server);
    expect(await inputs(browser, local)).toBe(2);
    expect(await notes(browser, local)).toBe(2);
    expect(await inputs(server, remote)).toBe(1);
    expect(await notes(server, remote)).toBe(1);
  });

  test("its task arrives background: the new home's record says so, and Conversation.abort() there leaves it asleep (draw 37C)", async () => {
    // Draw 37, 18 (spec §5.5: a conversation-owned task may be background, and stays one): a move
    // adopting every task as non-background failed the tests above only by their timeout.
    const { browser, server } = await homes();
    const c = await scheduled(browser);
    expect((await scheduleTasks(browser)).map((t) => t.background)).toEqual([true]);
    const out = await new Moves(browser, { peer: () => harnessPeer(() => server) }).moveOut(c, "server");
    expect(out.status).toBe("done");
    const remote = (out as { remote: ConversationId }).remote;
    await sleepingUntil(server, DUE);
    expect((await scheduleTasks(server)).map((t) => t.background)).toEqual([true]);
    await server.requireConversation(remote).abort();
    expect((await scheduleTasks(server)).map((t) => [t.state.status, t.abortRequested])).toEqual([
      ["waiting", false],
    ]);
    await sleepingUntil(server, DUE);
  });

  test("due while the move is under way: fired once, by the home it arrives in", async () => {
    const { clock, browser, server } = await homes();
    const c = await scheduled(browser);
    // The due time passes after the browser's step 1 (the conversation is away from then on) and
    // before the server adopts: the browser's timer fires, and its scheduler must leave the task be.
    const peer = (): MovePeer => {
      const inner = harnessPeer(() => server);
      return {
        ...inner,
        adopt: async (pkg) => {
          clock.advance(HOUR + 60_000);
          await browser.waitForIdle();
          return inner.adopt(pkg);
        },
      };
    };
    const out = await new Moves(browser, { peer }).moveOut(c, "server");
    expect(out.status).toBe("done");
    const remote = (out as { remote: ConversationId }).remote;
    await settled(clock, server, browser);
    await sleepingUntil(server, NEXT);
    expect(await inputs(server, remote)).toBe(1);
    expect(await notes(server, remote)).toBe(1);
    expect(await inputs(browser, c)).toBe(0);
    expect(await notes(browser, c)).toBe(0);
  });

  test("fired just before the move: not fired again in the new home", async () => {
    const { clock, browser, server } = await homes();
    const c = await scheduled(browser);
    clock.advance(HOUR);
    await settled(clock, browser);
    expect(await inputs(browser, c)).toBe(1);
    await sleepingUntil(browser, NEXT);
    const out = await new Moves(browser, { peer: () => harnessPeer(() => server) }).moveOut(c, "server");
    expect(out.status).toBe("done");
    const remote = (out as { remote: ConversationId }).remote;
    await sleepingUntil(server, NEXT);
    clock.advance(HOUR);
    await settled(clock, server, browser);
    // The firing moved with the transcript; nothing fired again.
    expect(await inputs(server, remote)).toBe(1);
    expect(await notes(server, remote)).toBe(1);
  });
});
