/**
 * The agent harness's open and pi-ai's load (issue 30 item 2, the recovery path): the store's read
 * runs while pi-ai's chunk loads, and nothing that may need pi-ai (`prepare`, a recovered task) runs
 * before it is here. pi-ai's import is held by a mock; this file imports nothing that imports pi-ai
 * (the test kit's index does: it hands over its static copy), so the engine's own lazy import is the
 * one held.
 */
import { expect, test, vi } from "vitest";
import { AgentHarness } from "../../../worker/agent/harness.ts";
import { memoryStore, recordJobs, type StoreJob } from "../../../worker/testing/store.ts";
import { deferred, until } from "../../../worker/testing/wait.ts";

test("the open's read runs while pi-ai loads; prepare waits for it", async () => {
  const gate = deferred();
  vi.doMock("@mariozechner/pi-ai", async () => {
    await gate.promise;
    return await vi.importActual("@mariozechner/pi-ai");
  });
  const store = await memoryStore();
  const recorder: { into: StoreJob[] } = { into: [] };
  recordJobs(store, recorder);
  let prepared = false;
  const opening = AgentHarness.open(store, {
    prepare: () => {
      prepared = true;
    },
  });
  await until(() => recorder.into.some((j) => j.kind === "read"), { what: "the open's read before pi-ai" });
  // Held: the read ran, nothing was prepared or committed.
  await new Promise((r) => setTimeout(r, 20));
  expect(prepared).toBe(false);
  expect(recorder.into.filter((j) => j.kind === "commit")).toEqual([]);
  gate.resolve();
  const h = await opening;
  expect(prepared).toBe(true);
  await h.close();
});
