/**
 * Outcomes the scheduler writes for a built-in task (spec §5.4 harness hook, §8.2, §8.3): a
 * generation that faults settles its run's inputs unanswered `faulted` with the error as detail,
 * keeps at most its committed partial (as an aborted pi.assistant entry), and leaves pi.live empty;
 * the conversation then takes new input normally.
 */

import { fauxToolCall } from "@mariozechner/pi-ai";
import { expect, test } from "vitest";
import { deferred } from "../../../worker/testing.ts";
import {
  callsThenAnswer,
  echo,
  faultingHook,
  gatedTool,
  inboxOf,
  kinds,
  liveOf,
  messageOf,
  open,
  toolResults,
  transcript,
} from "./fixtures.ts";

test("a faulted generation settles its input unanswered faulted with the error, clears pi.live, and the next input runs", async () => {
  let broken = true;
  // A hook's throw is reported (spec §7.2); a reporter that throws as well faults the phase.
  const { h, root } = await open(
    echo,
    faultingHook("afterResponse", "hook bug", () => broken),
  );
  const input = await root.submit({ type: "input", content: "hi" });
  expect(await input.wait()).toEqual({ status: "unanswered", reason: "faulted", detail: "hook bug" });
  const [generation] = await h.tasks({ kind: "pi.generation" });
  expect(generation?.state).toMatchObject({
    status: "terminal",
    outcome: { status: "faulted", error: { message: "hook bug" } },
  });
  expect(liveOf(h)).toEqual({});
  for (const e of await transcript(root))
    if (e.kind === "pi.assistant") expect(messageOf(e)).toMatchObject({ stopReason: "aborted" });
  broken = false;
  expect((await (await root.submit({ type: "input", content: "again" })).wait()).status).toBe("done");
  expect(kinds(await transcript(root)).filter((k) => k === "pi.user")).toHaveLength(2);
});

test("a faulted run leaves the inbox alone (spec §6): its queued follow-up stays queued until the next submission's boundary", async () => {
  let broken = true;
  const hold = deferred();
  const { h, root } = await open(
    async (req, n) => {
      if (n === 1) await hold.promise;
      return echo(req, n);
    },
    faultingHook("afterResponse", "hook bug", () => broken),
  );
  const first = await root.submit({ type: "input", content: "one" });
  const queued = await root.submit({ type: "input", content: "two" });
  hold.resolve();
  expect(await first.wait()).toMatchObject({ status: "unanswered", reason: "faulted" });
  await root.waitForIdle();
  expect(root.busy).toBe(false);
  expect(inboxOf(h).items.map((i) => i.id)).toEqual([queued.id]);
  expect((await queued.record()).status).toBe("queued");
  broken = false;
  const third = await root.submit({ type: "input", content: "three" });
  expect((await queued.wait()).status).toBe("done");
  expect((await third.wait()).status).toBe("done");
  expect(kinds(await transcript(root)).filter((k) => k === "pi.user")).toHaveLength(3);
});

test("a faulted tool task writes no result entry; the run continues and the model sees a synthesized error result", async () => {
  const gate = gatedTool("hold");
  const { h, root, faux } = await open(callsThenAnswer(fauxToolCall("hold", {}, { id: "c1" })), {
    tools: [gate.tool],
    ...faultingHook("afterTool", "afterTool bug"),
  });
  const input = await root.submit({ type: "input", content: "go" });
  await gate.started.promise;
  gate.release.resolve();
  expect((await input.wait()).status).toBe("done");
  const [tool] = await h.tasks({ kind: "pi.tool" });
  expect(tool?.state).toMatchObject({ status: "terminal", outcome: { status: "faulted" } });
  expect(await toolResults(root)).toEqual([]);
  const second = faux.requests[1]!;
  const result = second.messages.find((m) => m.role === "toolResult");
  expect(result).toMatchObject({ toolCallId: "c1", isError: true });
  expect(liveOf(h)).toEqual({});
});
