/**
 * The space's alarm at a durable deadline: a task that waits until a time (as the agent's retry
 * backoffs do) announces it through the harness's `wakeAt`, the space arms its alarm there, and
 * after workerd is killed the alarm alone brings the space back at that time (no request reaches
 * the engine; the test only restores the alarm's schedule, which the local runtime forgets on a
 * restart: Space.rearm); the task resumes and wakes once, not before its deadline. The heartbeat is a minute here, so only the
 * deadline's alarm can wake the space within the test. A schedule (worker/app/schedules.ts) fires
 * the same way: its durable timer arms the alarm, which fires it with no tab and no request.
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import { type ServerWorker, startServerWorker } from "./miniflare.ts";

let server: ServerWorker;

beforeAll(async () => {
  server = await startServerWorker({
    entry: "space-entry.ts",
    objects: { SPACES: "TestSpace" },
    bindings: { SPACE_HEARTBEAT_MS: "60000" },
  });
});

afterAll(async () => {
  await server?.stop();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test("an alarm wakes a space with a pending delayed task after workerd is killed, no request arriving", async () => {
  const { at } = await server.call<{ at: number }>("/space/delayed/delay?ms=2000", { method: "POST" });
  // The task announced its deadline: the alarm is armed there (before the minute's heartbeat).
  for (let i = 0; (await server.call<{ alarm: number | null }>("/space/delayed/status")).alarm !== at; i++) {
    if (i > 50) throw new Error("the alarm was never armed at the deadline");
    await sleep(20);
  }
  await server.restart();
  // The local runtime forgot the schedule: restore it (Cloudflare's scheduler keeps it; see
  // Space.rearm). It does not open the engine; from here no request arrives until the deadline passed.
  expect(await server.call("/space/delayed/rearm", { method: "POST" })).toEqual({ alarm: at + 1 });
  await sleep(Math.max(0, at - Date.now()) + 1_500);
  expect(await server.call("/space/delayed/status")).toMatchObject({ by: "alarm" });
  const view = await server.call<{ entries: Array<{ kind: string; data: { at: number; woke: number } }> }>(
    "/space/delayed/view?conversation=1",
  );
  const woke = view.entries.filter((e) => e.kind === "test.woke");
  expect(woke).toHaveLength(1);
  expect(woke[0]!.data.at).toBe(at);
  expect(woke[0]!.data.woke).toBeGreaterThanOrEqual(at);
});

test("a schedule fires by the space's alarm with every tab closed, after workerd is killed", async () => {
  const { at } = await server.call<{ at: number }>("/space/scheduled/schedule?ms=2000", { method: "POST" });
  // The schedule's task sleeps on a durable timer: the harness tells the space, which arms its alarm there.
  for (
    let i = 0;
    (await server.call<{ alarm: number | null }>("/space/scheduled/status")).alarm !== at;
    i++
  ) {
    if (i > 100) throw new Error("the alarm was never armed at the schedule's time");
    await sleep(20);
  }
  await server.restart();
  expect(await server.call("/space/scheduled/rearm", { method: "POST" })).toEqual({ alarm: at + 1 });
  await sleep(Math.max(0, at - Date.now()) + 1_500);
  expect(await server.call("/space/scheduled/status")).toMatchObject({ by: "alarm" });
  let view: { entries: Array<{ kind: string; data: unknown }> } = { entries: [] };
  for (let i = 0; i < 100; i++) {
    view = await server.call("/space/scheduled/view?conversation=1");
    if (view.entries.some((e) => e.kind === "pi.assistant")) break;
    await sleep(100);
  }
  expect(view.entries.filter((e) => e.kind === "app.schedule")).toHaveLength(1);
  expect(
    view.entries.filter((e) => e.kind === "pi.user" && JSON.stringify(e).includes("scheduled hello")),
  ).toHaveLength(1);
  expect(view.entries.some((e) => e.kind === "pi.assistant")).toBe(true);
});
