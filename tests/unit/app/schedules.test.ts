/**
 * Schedules (worker/app/schedules.ts) through the engine service, on the memory store and the kit's
 * fake clock: a draft said in words, bad drafts refused with typed errors before a write; a cron
 * schedule fires on time once per occurrence; occurrences missed while the app was closed are run
 * once each (or skipped) on the next start, said so in the conversation, and never again at a later
 * start; a one-off fires once; pause, edit and delete take effect (nothing fires from an old
 * revision); a conversation with a schedule can be deleted.
 */
import { fauxAssistantMessage } from "@mariozechner/pi-ai";
import { afterAll, describe, expect, test } from "vitest";
import { AgentHarness } from "../../../worker/agent/harness.ts";
import { HarnessEngine } from "../../../worker/app/engine-service.ts";
import {
  LATE_MS,
  SCHEDULE_DOCUMENTS,
  SCHEDULE_TASK,
  SCHEDULES_DOC,
  scheduleTask,
} from "../../../worker/app/schedules.ts";
import type { EntryRecord } from "../../../worker/index.ts";
import { PROTOCOL_VERSION, type ScheduleDraft, type SchedulesDoc } from "../../../worker/protocol/index.ts";
import type { MemoryStore } from "../../../worker/store/open.ts";
import { FakeClock, fauxAgentModel, memoryStore, until } from "../../../worker/testing.ts";

const faux = fauxAgentModel(() => fauxAssistantMessage("on it"));
afterAll(() => faux.unregister());

/** Monday 5 January 2026, 07:00 UTC (08:00 in Berlin). */
const T0 = Date.UTC(2026, 0, 5, 7, 0);
const HOUR = 3_600_000;

async function engine(store: MemoryStore, clock: FakeClock) {
  let opened: AgentHarness | undefined;
  const harness = await AgentHarness.open(store, {
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
  const service = new HarnessEngine({ harness: async () => harness, build: "test" });
  await service.hello({ tabId: "a", protocol: PROTOCOL_VERSION });
  await service.hello({ tabId: "b", protocol: PROTOCOL_VERSION });
  return { harness, a: service.tab("a"), b: service.tab("b") };
}

const draft = (over: Partial<ScheduleDraft> = {}): ScheduleDraft => ({
  text: "summarize my notes",
  when: { kind: "cron", cron: "0 9 * * 1-5" },
  timeZone: "Europe/Berlin",
  catchUp: "run",
  ...over,
});

async function entries(h: AgentHarness, c = 1): Promise<EntryRecord[]> {
  return (await h.conversation(c)!.entries()) as EntryRecord[];
}
const inputs = async (h: AgentHarness, text = "summarize my notes", c = 1) =>
  (await entries(h, c)).filter(
    (e) => e.kind === "pi.user" && JSON.stringify(e.data ?? e.model ?? "").includes(text),
  ).length;
const notes = async (h: AgentHarness, c = 1) =>
  (await entries(h, c))
    .filter((e) => e.kind === "app.schedule")
    .map((e) => (e.data as { text: string }).text);
const schedules = async (h: AgentHarness, c = 1) =>
  ((await h.doc<SchedulesDoc & Record<string, never>>(c, SCHEDULES_DOC))?.items ??
    []) as SchedulesDoc["items"];
const liveScheduleTasks = async (h: AgentHarness) =>
  (await h.tasks({ kind: SCHEDULE_TASK })).filter((t) => t.state.status !== "terminal").length;

/**
 * Let the time pass, then wait until no schedule is due (each sleeps until a later time, or ended:
 * a firing commits its inputs with its next wait) and the conversation is answered.
 */
async function pass(h: AgentHarness, clock: FakeClock, ms: number): Promise<void> {
  clock.advance(ms);
  await until(() =>
    h
      .inspect()
      .tasks.filter((t) => t.record.kind === SCHEDULE_TASK)
      .every((t) => t.state.kind === "waiting" && (t.state.until ?? 0) > clock.now()),
  );
  await h.waitForIdle();
}

async function sleepingUntil(h: AgentHarness, at: number): Promise<void> {
  await until(() => h.inspect().tasks.some((t) => t.state.kind === "waiting" && t.state.until === at));
}

describe("a schedule's draft", () => {
  test("is said in words with its next times in its time zone", async () => {
    const { a } = await engine(await memoryStore(), new FakeClock(T0));
    const preview = await a.schedules.preview(draft());
    expect(preview.description).toBe("At 09:00, Monday through Friday (Europe/Berlin)");
    expect(preview.next).toEqual([
      Date.UTC(2026, 0, 5, 8, 0),
      Date.UTC(2026, 0, 6, 8, 0),
      Date.UTC(2026, 0, 7, 8, 0),
    ]);
    const once = await a.schedules.preview(draft({ when: { kind: "once", at: T0 + 2 * HOUR } }));
    expect(once).toEqual({ description: "Once, Mon 5 Jan, 10:00 (Europe/Berlin)", next: [T0 + 2 * HOUR] });
  });

  test("a bad cron, a bad time zone, a past time or no words are refused, typed, and nothing is written", async () => {
    const { harness, a } = await engine(await memoryStore(), new FakeClock(T0));
    const refused = async (d: ScheduleDraft) => {
      const error = await a.schedules.create(1, d).then(
        () => undefined,
        (e: unknown) => e as { name: string; code: string; message: string },
      );
      return error && { name: error.name, code: error.code };
    };
    expect(await refused(draft({ when: { kind: "cron", cron: "61 9 * * *" } }))).toEqual({
      name: "ScheduleInvalid",
      code: "bad_cron",
    });
    expect(await refused(draft({ when: { kind: "cron", cron: "0 9 * *" } }))).toEqual({
      name: "ScheduleInvalid",
      code: "bad_cron",
    });
    expect(await refused(draft({ when: { kind: "cron", cron: "0 0 30 2 *" } }))).toEqual({
      name: "ScheduleInvalid",
      code: "bad_cron",
    });
    expect(await refused(draft({ timeZone: "Mars/Olympus" }))).toEqual({
      name: "ScheduleInvalid",
      code: "bad_time_zone",
    });
    expect(await refused(draft({ when: { kind: "once", at: T0 - 1 } }))).toEqual({
      name: "ScheduleInvalid",
      code: "past_time",
    });
    expect(await refused(draft({ text: "   " }))).toEqual({ name: "ScheduleInvalid", code: "bad_text" });
    expect(await schedules(harness)).toEqual([]);
    expect(await liveScheduleTasks(harness)).toBe(0);
  });
});

describe("a schedule fires", () => {
  test("on time, once per occurrence, saying so; then sleeps until the next one", async () => {
    const clock = new FakeClock(T0);
    const { harness, a } = await engine(await memoryStore(), clock);
    const s = await a.schedules.create(1, draft());
    const nine = Date.UTC(2026, 0, 5, 8, 0);
    await sleepingUntil(harness, nine);
    expect((await schedules(harness))[0]).toMatchObject({ id: s.id, next: nine, paused: false });
    await pass(harness, clock, HOUR - 1);
    expect(await inputs(harness)).toBe(0);
    await pass(harness, clock, 1);
    await until(() => harness.inspect().tasks.length === 1);
    await harness.waitForIdle();
    expect(await inputs(harness)).toBe(1);
    expect(await notes(harness)).toEqual(["Scheduled run: At 09:00, Monday through Friday (Europe/Berlin)."]);
    expect((await schedules(harness))[0]).toMatchObject({
      next: Date.UTC(2026, 0, 6, 8, 0),
      last: { at: nine, ran: 1, skipped: 0 },
    });
    await harness.close();
  });

  test("missed while the app was closed: each missed occurrence runs once at the next start, never again", async () => {
    const clock = new FakeClock(T0);
    const store = await memoryStore();
    let { harness, a } = await engine(store, clock);
    await a.schedules.create(1, draft({ when: { kind: "cron", cron: "0 * * * *" } }));
    await sleepingUntil(harness, T0 + HOUR);
    await harness.close();
    // Closed from 07:00 to 10:30: 08:00, 09:00 and 10:00 were missed.
    clock.jump(3.5 * HOUR);
    let reopened = await memoryStore(store.image());
    ({ harness, a } = await engine(reopened, clock));
    await sleepingUntil(harness, T0 + 4 * HOUR);
    await harness.waitForIdle();
    expect(await inputs(harness)).toBe(3);
    expect(await notes(harness)).toEqual([
      "While the app was closed, 3 scheduled runs were missed (Mon 5 Jan, 09:00, Mon 5 Jan, 10:00, Mon 5 Jan, 11:00). Ran each once now.",
    ]);
    expect((await schedules(harness))[0]).toMatchObject({
      next: T0 + 4 * HOUR,
      last: { ran: 3, skipped: 0 },
    });
    // Another start before the next occurrence fires nothing.
    await harness.close();
    reopened = await memoryStore(reopened.image());
    ({ harness } = await engine(reopened, clock));
    await sleepingUntil(harness, T0 + 4 * HOUR);
    await harness.waitForIdle();
    expect(await inputs(harness)).toBe(3);
    expect(await notes(harness)).toHaveLength(1);
    await harness.close();
  }, 60_000);

  test("missed with catch-up skip: none runs, and the conversation says they were skipped", async () => {
    const clock = new FakeClock(T0);
    const store = await memoryStore();
    let { harness, a } = await engine(store, clock);
    await a.schedules.create(1, draft({ when: { kind: "cron", cron: "0 * * * *" }, catchUp: "skip" }));
    await sleepingUntil(harness, T0 + HOUR);
    await harness.close();
    clock.jump(2 * HOUR + LATE_MS + 1);
    ({ harness, a } = await engine(await memoryStore(store.image()), clock));
    await sleepingUntil(harness, T0 + 3 * HOUR);
    await harness.waitForIdle();
    expect(await inputs(harness)).toBe(0);
    expect(await notes(harness)).toEqual([
      "While the app was closed, 2 scheduled runs were missed (Mon 5 Jan, 09:00, Mon 5 Jan, 10:00). Skipped, as this schedule says.",
    ]);
    expect((await schedules(harness))[0]).toMatchObject({ last: { ran: 0, skipped: 2 } });
    await harness.close();
  });

  test("a one-off 'in 2 hours' fires once and is done", async () => {
    const clock = new FakeClock(T0);
    const { harness, a } = await engine(await memoryStore(), clock);
    await a.schedules.create(
      1,
      draft({ text: "check the build", when: { kind: "once", at: T0 + 2 * HOUR } }),
    );
    await sleepingUntil(harness, T0 + 2 * HOUR);
    await pass(harness, clock, 2 * HOUR);
    await until(() => harness.inspect().tasks.length === 0);
    await harness.waitForIdle();
    expect(await inputs(harness, "check the build")).toBe(1);
    expect((await schedules(harness))[0]).toMatchObject({ done: true });
    expect((await schedules(harness))[0]!.next).toBeUndefined();
    await pass(harness, clock, 24 * HOUR);
    expect(await inputs(harness, "check the build")).toBe(1);
    await harness.close();
  });
});

describe("a schedule is changed from the UI's calls", () => {
  test("paused, it fires nothing; resumed, from the next occurrence on; any tab may do either", async () => {
    const clock = new FakeClock(T0);
    const { harness, a, b } = await engine(await memoryStore(), clock);
    const s = await a.schedules.create(1, draft({ when: { kind: "cron", cron: "0 * * * *" } }));
    await sleepingUntil(harness, T0 + HOUR);
    expect((await b.schedules.setPaused(1, s.id, true)).paused).toBe(true);
    await until(() => harness.inspect().tasks.length === 0);
    await pass(harness, clock, 2 * HOUR);
    expect(await inputs(harness)).toBe(0);
    await a.schedules.setPaused(1, s.id, false);
    await sleepingUntil(harness, T0 + 3 * HOUR);
    await pass(harness, clock, HOUR);
    await until(() => harness.inspect().tasks.length === 1);
    await harness.waitForIdle();
    expect(await inputs(harness)).toBe(1);
    expect(await liveScheduleTasks(harness)).toBe(1);
    await harness.close();
  });

  test("edited, only the new revision fires; deleted, nothing fires and no task is left", async () => {
    const clock = new FakeClock(T0);
    const { harness, a } = await engine(await memoryStore(), clock);
    const s = await a.schedules.create(1, draft({ when: { kind: "cron", cron: "0 * * * *" } }));
    await sleepingUntil(harness, T0 + HOUR);
    const edited = await a.schedules.update(
      1,
      s.id,
      draft({ text: "new words", when: { kind: "cron", cron: "30 * * * *" } }),
    );
    expect(edited).toMatchObject({
      id: s.id,
      revision: 2,
      description: "At 30 minutes past the hour (Europe/Berlin)",
    });
    await sleepingUntil(harness, T0 + HOUR / 2);
    expect(await liveScheduleTasks(harness)).toBe(1);
    await pass(harness, clock, HOUR / 2);
    await until(() => harness.inspect().tasks.length === 1);
    await harness.waitForIdle();
    expect(await inputs(harness, "new words")).toBe(1);
    expect(await inputs(harness)).toBe(0);
    await a.schedules.delete(1, s.id);
    await until(() => harness.inspect().tasks.length === 0);
    await pass(harness, clock, 3 * HOUR);
    expect(await inputs(harness, "new words")).toBe(1);
    expect(await schedules(harness)).toEqual([]);
    await expect(a.schedules.delete(1, s.id)).rejects.toMatchObject({
      name: "ScheduleInvalid",
      code: "unknown_schedule",
    });
    await harness.close();
  });

  test("a conversation with a schedule can be deleted: its task ends first", async () => {
    const clock = new FakeClock(T0);
    const { harness, a } = await engine(await memoryStore(), clock);
    const c = await a.conversations.create("with a schedule");
    await a.schedules.create(c, draft());
    await until(() => harness.inspect().tasks.length === 1);
    await a.conversations.delete(c);
    expect(harness.conversationRecord(c)).toBeUndefined();
    expect(await liveScheduleTasks(harness)).toBe(0);
    await harness.close();
  });
});
