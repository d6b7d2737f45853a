/**
 * The app engine's recovery path (issue 30 item 2), as the browser bench's recovery measures it: a
 * store holding a running ticker (the debug task), reopened through `openAppHarness` (the app's own
 * open: settings documents, stored user tools, the root, then scheduling). Counted through a
 * recording store, never timed: before the ticker's first tick after the reopen the store runs the
 * open's one read and no transaction (recovery, the settings' documents and the reservation used to
 * cost two reads and two transactions in a row).
 */
import { expect, test } from "vitest";
import type { AgentHarness } from "../../../worker/agent/harness.ts";
import { openAppHarness } from "../../../worker/app/app-agent.ts";
import { tickerTask } from "../../../worker/debug/ticker.ts";
import { ROOT_CONVERSATION_ID } from "../../../worker/index.ts";
import { tickEntry } from "../../../worker/protocol/index.ts";
import { memoryStore, recordJobs, type StoreJob, until } from "../../../worker/testing.ts";
import { appOpenOptions } from "./open-fixtures.ts";

const options = appOpenOptions;

/** Whether a store job appends an entry (a tick's commit). */
const appendsEntry = (job: StoreJob) =>
  job.statements.some((s) => /^\s*INSERT\s+INTO\s+entries\b/i.test(s.sql));

/** The tick numbers `h` commits from now on, as its change sets publish them. */
function ticksOf(h: AgentHarness): number[] {
  const seen: number[] = [];
  h.subscribe((change) => {
    for (const e of change.entries) if (tickEntry.is(e)) seen.push(e.data.n);
  });
  return seen;
}

test("a reload resumes a running ticker with the open's one read and no transaction before its first tick", async () => {
  const store = await memoryStore();
  const first = await openAppHarness(store, options());
  const ticked = ticksOf(first);
  await first.createTask(
    tickerTask,
    { phases: 10_000, delayMs: 1 },
    { ownership: { kind: "conversation" }, conversationId: ROOT_CONVERSATION_ID },
  );
  await until(() => ticked.length >= 2, { what: "the ticker ticking" });
  // The world stops mid-run: the next engine opens what was committed.
  const crashed = await memoryStore(store.image());
  await first.close();
  const stored = Number((await crashed.read((sql) => sql.get("SELECT count(*) AS n FROM entries")))?.["n"]);
  expect(stored).toBeGreaterThanOrEqual(2);

  const recorder: { into: StoreJob[] } = { into: [] };
  recordJobs(crashed, recorder);
  const second = await openAppHarness(crashed, options());
  const resumed = ticksOf(second);
  await until(() => recorder.into.some(appendsEntry), { what: "the first tick after the reload" });
  const untilTick = recorder.into.slice(0, recorder.into.findIndex(appendsEntry));
  expect(untilTick.map((j) => j.kind)).toEqual(["read"]);
  // The ticker goes on from its last committed tick: none lost, none doubled.
  await until(() => resumed.length >= 2, { what: "ticks after the reload" });
  expect(resumed.slice(0, 2)).toEqual([stored + 1, stored + 2]);
  await second.close();
});
