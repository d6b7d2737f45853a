/**
 * Quota exhaustion: a transaction whose COMMIT fails (SQLITE_FULL) stops the engine with a clear
 * error, and nothing committed before it is lost: a new engine on the same store resumes the work.
 */
import { expect, test } from "vitest";
import { Harness, HarnessClosed, type TaskRecord } from "../../../worker/index.ts";
import { memoryStore } from "../../../worker/testing.ts";
import { FakeMailer } from "../core/fixtures/fakes.ts";
import { sendEmailTask } from "../core/fixtures/payments.ts";

test("a full disk stops the engine with a typed error and loses nothing committed", async () => {
  const mailer = new FakeMailer();
  const email = sendEmailTask(mailer);
  const store = await memoryStore();
  const fatal: Error[] = [];
  const h = await Harness.open(store, { tasks: [email], onFatal: (e) => fatal.push(e) });
  const first = await h.createTask(
    email,
    { to: "a@b.c", subject: "one" },
    { ownership: { kind: "conversation" } },
  );
  await h.waitForTask(first);
  const committed = store.stats.transactions;
  // What the engine publishes from here on: the failed commit must publish nothing (spec §1.8, §3).
  const published: unknown[] = [];
  h.subscribe((change) => published.push(change));
  const liveBefore = h.inspect().tasks.map((t) => t.record.id);
  // From the next transaction on, the disk is full.
  store.setFaultHook((point) => {
    if (point === "before-commit") throw new Error("SQLITE_FULL: database or disk is full");
  });
  const second = h.createTask(
    email,
    { to: "a@b.c", subject: "two" },
    { ownership: { kind: "conversation" } },
  );
  await expect(second).rejects.toThrow(/database or disk is full/);
  expect(fatal[0]?.message).toMatch(/disk is full/);
  expect(h.inspect().fatal).toMatch(/disk is full/);
  await expect(
    h.createTask(email, { to: "a@b.c", subject: "three" }, { ownership: { kind: "conversation" } }),
  ).rejects.toBeInstanceOf(HarnessClosed);
  expect(store.stats.transactions).toBe(committed);
  // Published nothing, and the engine's memory holds nothing of the failed commit.
  expect(published).toEqual([]);
  expect(h.inspect().tasks.map((t) => t.record.id)).toEqual(liveBefore);

  // Space is freed: a new engine on the same store sees everything committed and carries on.
  store.setFaultHook(undefined);
  const image = store.image();
  await h.close();
  const h2 = await Harness.open(await memoryStore(image), { tasks: [email] });
  const done = (await h2.getTask(first)) as TaskRecord;
  expect(done.state).toMatchObject({ status: "terminal", outcome: { status: "completed" } });
  const again = await h2.createTask(
    email,
    { to: "a@b.c", subject: "two" },
    { ownership: { kind: "conversation" } },
  );
  expect((await h2.waitForTask(again)).state).toMatchObject({
    status: "terminal",
    outcome: { status: "completed" },
  });
  expect([...mailer.sent.values()].map((m) => m.subject).sort()).toEqual(["one", "two"]);
  await h2.close();
});
