/**
 * close (spec §2.2, §4): the first call seals admission and reservation for good. Its optional
 * signal cancels only that caller's wait: admission stays sealed, and a later close() awaits the
 * same shutdown.
 */
import { expect, test } from "vitest";
import { Harness, HarnessClosed, WaitCancelled } from "../../worker/index.ts";
import { deferred, memoryStore, until } from "../../worker/testing.ts";
import { single } from "./core-fixtures.ts";

test("cancelling a close wait does not reopen admission; a later close() awaits the same shutdown", async () => {
  const release = deferred();
  let returned = false;
  // Ignores its signal until released: the shutdown waits for it.
  const stubborn = single("stubborn", async () => {
    await release.promise;
    returned = true;
  });
  const store = await memoryStore();
  const h = await Harness.open(store, { tasks: [stubborn] });
  await h.createTask(stubborn, null, { ownership: { kind: "conversation" } });
  await until(() => h.inspect().running === 1, { what: "running" });
  const controller = new AbortController();
  const first = h.close({}, controller.signal);
  controller.abort();
  await expect(first).rejects.toBeInstanceOf(WaitCancelled);
  expect(h.closed).toBe(true);
  await expect(h.createTask(stubborn, null, { ownership: { kind: "conversation" } })).rejects.toBeInstanceOf(
    HarnessClosed,
  );
  await expect(h.transaction(() => undefined)).rejects.toBeInstanceOf(HarnessClosed);
  const second = h.close();
  expect(store.closed).toBe(false);
  release.resolve();
  await second;
  expect(returned).toBe(true);
  expect(store.closed).toBe(true);
});
