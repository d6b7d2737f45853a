/**
 * The Durable Object store across a real death of its process: workerd is killed (SIGKILL, as
 * miniflare disposes it) and a new one started on the same persist folder. What a commit's promise
 * acknowledged is there; what an open transaction wrote is not; tasks the dead engine left running
 * resume in the new one, as after a tab reload. (The conformance suite's crash sweeps simulate the
 * death inside one process, at every transaction boundary; these tests check that the simulation's
 * premise holds for the real thing.)
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import { type ServerWorker, startServerWorker } from "./miniflare.ts";

let server: ServerWorker;

beforeAll(async () => {
  server = await startServerWorker();
});

afterAll(async () => {
  await server?.stop();
});

test("every acknowledged commit survives a SIGKILL of workerd; an open transaction's writes do not", async () => {
  await server.call("/commit?object=acked&from=0&count=40", { method: "POST" });
  expect(await server.call("/hold?object=acked&rows=5", { method: "POST" })).toEqual({ holding: 5 });
  await server.restart();
  expect(await server.call<number[]>("/rows?object=acked")).toEqual(Array.from({ length: 40 }, (_, i) => i));
  await server.call("/commit?object=acked&from=40&count=2", { method: "POST" });
  expect((await server.call<number[]>("/rows?object=acked")).slice(-3)).toEqual([39, 40, 41]);
});

test("tasks left running by a killed workerd resume in the next one and finish once", async () => {
  expect(await server.call("/park?object=parked&tasks=3", { method: "POST" })).toEqual({ parked: 3 });
  await server.restart();
  const finished = {
    outcomes: [0, 1, 2].map((n) => ({ status: "completed", result: { input: { n }, resumed: true } })),
    entries: 3,
  };
  expect(await server.call("/resume?object=parked", { method: "POST" })).toEqual(finished);
  // Finished for good: the next engine finds the same outcomes and runs nothing again (no entry more).
  await server.restart();
  expect(await server.call("/resume?object=parked", { method: "POST" })).toEqual(finished);
});
