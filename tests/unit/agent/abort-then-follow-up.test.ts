/**
 * An input admitted while an aborted run is still ending (after the abort's commit withdrew what was
 * queued, before the generation's abort handler ended the run) is answered: the handler ends the
 * run at a final boundary, which starts the next run for it. Found by the simulator (tests/sim/,
 * seed 12): the handler used to end the run bare, and such an input stayed queued forever with
 * nothing live to answer it.
 */
import { fauxAssistantMessage } from "@mariozechner/pi-ai";
import { expect, test } from "vitest";
import { deferred, until, within } from "../../../worker/testing.ts";
import { open, transcript } from "./fixtures.ts";

test("a follow-up sent while an abort is ending its run is answered by the next run", async () => {
  const gate = deferred();
  let requests = 0;
  const { h, root } = await open(async () => {
    requests++;
    if (requests === 1) await gate.promise;
    return fauxAssistantMessage(`answer ${requests}`);
  });
  await root.submit({ type: "input", content: "first" });
  await until(() => requests === 1, { what: "the first request sent" });
  const aborting = root.abort();
  const second = await root.submit({ type: "input", content: "second", whenBusy: "followUp" });
  expect((await second.record()).status).toBe("queued");
  gate.resolve();
  await aborting;
  expect(await within(second.wait(), 10_000, "the follow-up answered")).toMatchObject({ status: "done" });
  await root.waitForIdle();
  const texts = (await transcript(root)).map((e) => `${e.kind}`);
  expect(texts).toEqual(["pi.user", "pi.user", "pi.assistant"]);
  expect(h.inspect().tasks.every((t) => t.record.state.status === "terminal")).toBe(true);
});
