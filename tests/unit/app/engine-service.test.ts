/**
 * The portable engine service (worker/app/engine-service.ts) on the memory store, with no browser
 * part: a tab's hello, a call through its grouped calls, a conversation watch that hears a commit,
 * and `dropTab` ending that tab's watches and status listeners (and only that tab's).
 */
import { afterAll, expect, test } from "vitest";
import { AgentHarness } from "../../../worker/agent/harness.ts";
import { HarnessEngine } from "../../../worker/app/engine-service.ts";
import type { EngineStatus, WatchFrame } from "../../../worker/protocol/index.ts";
import { PROTOCOL_VERSION } from "../../../worker/protocol/index.ts";
import { deferred, fauxAgentModel, memoryStore, until } from "../../../worker/testing.ts";
import { echo } from "../agent/fixtures.ts";

const faux = fauxAgentModel(echo);
afterAll(() => faux.unregister());

async function engine() {
  const harness = await AgentHarness.open(await memoryStore(), {
    models: faux.models,
    defaultModel: faux.ref,
  });
  const arrived: string[] = [];
  const service = new HarnessEngine({
    harness: async () => harness,
    build: "test-build",
    tabArrived: (tabId) => arrived.push(tabId),
  });
  return { harness, service, arrived };
}

test("a hello answers the build and status; a tab's watch hears a commit; dropTab ends only its watches", async () => {
  const { harness, service, arrived } = await engine();
  const hello = await service.hello({ tabId: "a", protocol: PROTOCOL_VERSION });
  expect(hello).toEqual({
    protocol: PROTOCOL_VERSION,
    build: "test-build",
    status: { phase: "starting", detail: "starting the engine" },
  });
  await service.hello({ tabId: "a", protocol: PROTOCOL_VERSION });
  await service.hello({ tabId: "b", protocol: PROTOCOL_VERSION });
  expect(arrived).toEqual(["a", "b"]);

  const a = service.tab("a");
  const b = service.tab("b");
  const id = await a.conversations.create("from the service");
  expect((await b.conversations.list()).map((c) => c.title)).toContain("from the service");

  const framesA: WatchFrame[] = [];
  const framesB: WatchFrame[] = [];
  await a.watches.conversation(id, (f) => void framesA.push(f));
  await b.watches.conversation(id, (f) => void framesB.push(f));
  expect(service.watchStats().watches).toBe(2);

  await a.run.submit(id, { text: "hello there", requestId: "r1" });
  await harness.waitForIdle();
  await expect.poll(() => framesB.length).toBeGreaterThan(1);
  expect(framesA.length).toBeGreaterThan(1);

  service.dropTab("a");
  expect(service.hasTab("a")).toBe(false);
  expect(service.watchStats().watches).toBe(1);
  const heardA = framesA.length;
  const heardB = framesB.length;
  await b.run.submit(id, { text: "again", requestId: "r2" });
  await harness.waitForIdle();
  await expect.poll(() => framesB.length).toBeGreaterThan(heardB);
  expect(framesA.length).toBe(heardA);
  await harness.close();
});

test("setStatus reaches every tab's listeners until the tab is dropped; stopAll ends every watch", async () => {
  const { harness, service } = await engine();
  const heard: Record<string, EngineStatus[]> = { a: [], b: [] };
  service.onStatus("a", (s) => void heard["a"]!.push(s));
  service.onStatus("b", (s) => void heard["b"]!.push(s));
  const failed: EngineStatus = {
    phase: "failed",
    stage: "open",
    reason: "unknown",
    message: "it broke",
    advice: "reload",
  };
  service.dropTab("b");
  service.setStatus(failed);
  expect(heard["a"]!.map((s) => s.phase)).toEqual(["starting", "failed"]);
  expect(heard["b"]!.map((s) => s.phase)).toEqual(["starting"]);

  const id = await service.tab("a").conversations.create();
  await service.tab("a").watches.conversation(id, () => undefined);
  await service.tab("a").watches.taskGraph(() => undefined);
  expect(service.watchStats().watches).toBe(2);
  service.stopAll();
  expect(service.watchStats().watches).toBe(0);
  await harness.close();
});

test("a tab's conversation watch is bounded like every watch: a stalled tab holds at most 100 undelivered frames, the 101st replaces them with one whole view (sweep 42, 123)", async () => {
  // Sweep 42, 123: the 100-frame bound was read on a bare Watch, a conversation's watch and the task
  // graph's; a tab's watch (the paged mount, through the service) opened unbounded passed them all.
  const { harness, service } = await engine();
  await service.hello({ tabId: "a", protocol: PROTOCOL_VERSION });
  const a = service.tab("a");
  const id = await a.conversations.create("stalled");
  const frames: WatchFrame[] = [];
  const stalled = deferred();
  let stalledAt = -1;
  await a.watches.conversation(id, async (f) => {
    frames.push(f);
    if (stalledAt < 0 && JSON.stringify(f.ops).includes('"kind":"note"')) {
      stalledAt = frames.length - 1;
      await stalled.promise;
    }
  });
  for (let i = 0; i < 150; i++)
    await harness.transaction((tx) => void tx.appendEntry(id, { kind: "note", data: { i } }));
  await until(() => stalledAt >= 0, { what: "the first note's frame, stalled" });
  stalled.resolve();
  await harness.waitForIdle();
  await until(() => frames.some((f) => JSON.stringify(f).includes('"i":149')), {
    what: "the last note delivered",
  });
  // Behind the stalled frame the later notes' frames were a backlog: at the 101st, one replacement
  // holding the newest view took the place of all 100, and later frames followed it normally.
  const after = frames.slice(stalledAt + 1);
  expect(after.length).toBeLessThanOrEqual(101);
  expect(after.filter((f) => f.ops[0]?.op === "replace")).toHaveLength(1);
  await harness.close();
});
