/**
 * The recovery path (issue 30 item 2): the store operations a reopen runs before a recovered task's
 * own first commit, counted through a recording store (never timed). A task found running that the
 * first drain starts again keeps its stored row (recovery and reservation write nothing for it); one
 * it cannot start is written back to pending, interrupted, in that drain's commit; a paused open
 * still writes every running task back to pending at once.
 */
import { expect, test } from "vitest";
import { Harness, type TaskId } from "../../../worker/index.ts";
import { memoryStore, recordJobs, type StoreJob, until } from "../../../worker/testing.ts";
import { blocked, complete, done, outcome, parked, row, single, storeWith } from "./fixtures.ts";

/** The same task name as `parked("job")`, but its phase commits: records whether it ran resumed. */
function finisher(seen: boolean[]) {
  return single("job", async (_t, runtime) => {
    seen.push(runtime.resumed);
    await runtime.commit(() => complete("finished"));
  });
}

const kinds = (jobs: readonly StoreJob[]) => jobs.map((j) => j.kind);
/** Whether a job writes the tasks table. */
const writesTasks = (job: StoreJob) =>
  job.statements.some((s) => /^\s*(INSERT|UPDATE)\s+(INTO\s+)?tasks\b/i.test(s.sql));

test("a task found running is started again with one read and no transaction before its own first commit", async () => {
  const { image, ids } = await storeWith([parked("job")]);
  const id = ids[0] as TaskId;
  const recorder: { into: StoreJob[] } = { into: [] };
  recordJobs(image, recorder);
  const seen: boolean[] = [];
  const h = await Harness.open(image, { tasks: [finisher(seen)] });
  expect(outcome(await done(h, id))).toEqual({ status: "completed", result: "finished" });
  expect(seen).toEqual([true]);
  // The open's one read, then the task's own commit (its outcome): nothing in between.
  expect(kinds(recorder.into)).toEqual(["read", "commit"]);
  expect(writesTasks(recorder.into[1]!)).toBe(true);
  await h.close();
});

test("a crash before the resumed task's first commit finds its row as it was, and it resumes again", async () => {
  const { image, ids } = await storeWith([parked("job")]);
  const id = ids[0] as TaskId;
  const before = await row(image, id);
  // Started again (parked: it commits nothing), then the world stops.
  const h = await Harness.open(image, { tasks: [parked("job")] });
  await until(() => h.inspect().tasks.some((t) => t.record.id === id && t.state.kind === "running"), {
    what: "the task running again",
  });
  const crashed = await memoryStore(image.image());
  await h.close();
  expect(await row(crashed, id)).toEqual(before);
  expect(before?.["status"]).toBe("running");

  const seen: boolean[] = [];
  const again = await Harness.open(crashed, { tasks: [finisher(seen)] });
  expect(outcome(await done(again, id))).toEqual({ status: "completed", result: "finished" });
  expect(seen).toEqual([true]);
  await again.close();
});

test("a task found running that cannot start (no definition) is written pending, interrupted, by the first drain", async () => {
  const { image, ids } = await storeWith([parked("job")]);
  const id = ids[0] as TaskId;
  const recorder: { into: StoreJob[] } = { into: [] };
  recordJobs(image, recorder);
  const h = await Harness.open(image);
  await until(() => blocked(h).length === 1, { what: "the task blocked" });
  // Shown blocked only once its pending row is stored.
  expect((await h.getTask(id))?.state).toMatchObject({ status: "pending", interrupted: true });
  expect(kinds(recorder.into).slice(0, 2)).toEqual(["read", "commit"]);
  expect(writesTasks(recorder.into[1]!)).toBe(true);
  expect(JSON.parse(String((await row(image, id))?.["state"]))).toMatchObject({ interrupted: true });
  await h.close();
});

test("opened paused, every running task is written pending at once and starts only on resume", async () => {
  const { image, ids } = await storeWith([parked("job")]);
  const id = ids[0] as TaskId;
  const seen: boolean[] = [];
  const h = await Harness.open(image, { tasks: [finisher(seen)], paused: true });
  expect((await h.getTask(id))?.state).toMatchObject({ status: "pending", interrupted: true });
  expect(seen).toEqual([]);
  h.resume();
  expect(outcome(await done(h, id))).toEqual({ status: "completed", result: "finished" });
  expect(seen).toEqual([true]);
  await h.close();
});

test("prepare runs after the load and before any recovered task starts; a resume it asks for waits for the open", async () => {
  const { image, ids } = await storeWith([parked("job")]);
  const id = ids[0] as TaskId;
  const seen: boolean[] = [];
  const order: string[] = [];
  const definition = finisher(seen);
  const h = await Harness.open(image, {
    paused: true,
    prepare: async (opened) => {
      order.push(
        `prepare: ${opened
          .inspect()
          .tasks.map((t) => t.record.state.status)
          .join()}`,
      );
      // The definition arrives in prepare (an app's stored tools): the recovered task finds it.
      opened.registry.register(definition);
      opened.resume();
      order.push(`resumed in prepare: ${opened.inspect().scheduling}`);
    },
  });
  expect(order).toEqual(["prepare: running", "resumed in prepare: paused"]);
  // The resume() itself takes effect once the open ends, before done() (itself a progress call).
  expect(h.inspect().scheduling).toBe("running");
  expect(outcome(await done(h, id))).toEqual({ status: "completed", result: "finished" });
  expect(seen).toEqual([true]);
  await h.close();
});

test("opened running, no handler runs during the open: a stored pending task and one prepare creates start only once prepare returned (draw 32b)", async () => {
  // Draw 32b: a scheduler held only for a paused open (an unpaused one left running from the start)
  // passed every test above, all of whose prepare callbacks run paused or commit nothing: here
  // prepare's own commit kicks the scheduler while the open is under way.
  const store = await memoryStore();
  const first = await Harness.open(store, { paused: true });
  const stored = await first.createTask(parked("job"), null, { ownership: { kind: "conversation" } });
  const image = await memoryStore(store.image());
  await first.close();
  const seen: boolean[] = [];
  const during: number[] = [];
  let made: TaskId | undefined;
  const h = await Harness.open(image, {
    prepare: async (opened) => {
      opened.registry.register(finisher(seen));
      made = await opened.createTask(finisher(seen), null, { ownership: { kind: "conversation" } });
      await new Promise((resolve) => setTimeout(resolve, 20));
      during.push(seen.length);
    },
  });
  expect(during).toEqual([0]);
  expect(outcome(await done(h, stored))).toEqual({ status: "completed", result: "finished" });
  expect(outcome(await done(h, made!))).toEqual({ status: "completed", result: "finished" });
  expect(seen).toEqual([false, false]);
  await h.close();
});

test("a progress call made in prepare resumes a paused open once the open ends, with no other call after it", async () => {
  // Break 30N: the prepare test above waits with done() (itself a progress call), so an open that
  // dropped a progress call made during it passed; here nothing after the open resumes it.
  const { image, ids } = await storeWith([parked("job")]);
  const id = ids[0] as TaskId;
  const seen: boolean[] = [];
  const definition = finisher(seen);
  let waited: Promise<unknown> | undefined;
  const during: string[] = [];
  const h = await Harness.open(image, {
    paused: true,
    prepare: (opened) => {
      opened.registry.register(definition);
      waited = opened.waitForTask(id);
      during.push(opened.inspect().scheduling);
    },
  });
  expect(during).toEqual(["paused"]);
  expect(h.inspect().scheduling).toBe("running");
  expect(outcome((await waited) as Awaited<ReturnType<Harness["waitForTask"]>>)).toEqual({
    status: "completed",
    result: "finished",
  });
  await h.close();
});
